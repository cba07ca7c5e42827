/* Learning-rate schedules, as Hugging Face's get_*_schedule_with_warmup and
 * PyTorch's OneCycleLR compute them, so a run here and there with the same
 * settings sees the same rates. `step` is the 0-based optimizer step. */
#include <math.h>

#include "wisp.h"

#define PI 3.14159265358979323846 /* M_PI is not standard C */

static double cosine_between(double start, double end, double pct) {
    return end + (start - end) / 2.0 * (1.0 + cos(PI * pct));
}

float wisp_train_lr_at(const wisp_train_config *c, int64_t step) {
    double lr = c->lr, floor_lr = lr * c->min_lr_ratio, s = (double)step, N = (double)c->total_steps;
    double W = c->warmup_steps;
    if (c->schedule == WISP_SCHEDULE_ONECYCLE) {
        double initial = lr / 25.0, final = initial / 1e4;
        double up_end = (W > 0 ? W : 0.3 * N) - 1.0, down_end = N - 1.0;
        if (s <= up_end && up_end > 0) return (float)cosine_between(initial, lr, s / up_end);
        double span = down_end - (up_end > 0 ? up_end : 0.0), pct = span > 0 ? (s - (up_end > 0 ? up_end : 0.0)) / span : 1.0;
        return (float)cosine_between(lr, final, pct > 1 ? 1 : pct < 0 ? 0 : pct);
    }
    if (s < W) return (float)(lr * s / (W > 1 ? W : 1));
    double span = N - W > 1 ? N - W : 1, progress = (s - W) / span;
    if (progress > 1) progress = 1;
    switch (c->schedule) {
    case WISP_SCHEDULE_COSINE: return (float)(floor_lr + (lr - floor_lr) * 0.5 * (1.0 + cos(PI * progress)));
    case WISP_SCHEDULE_LINEAR: return (float)(floor_lr + (lr - floor_lr) * (1.0 - progress));
    default: return (float)lr;
    }
}
