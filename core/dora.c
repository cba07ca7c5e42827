/* DoRA row norms and output scaling (dora.h). */
#include "dora.h"

#include <math.h>

#include "context.h"
#include "half.h"

static float elem(int32_t type, const void *base, size_t i) {
    if (type == WISP_TYPE_F32) return ((const float *)base)[i];
    const uint16_t *h = base;
    return type == WISP_TYPE_F16 ? wisp_f16_to_f32(h[i]) : wisp_bf16_to_f32(h[i]);
}

void wisp_dora_norm_rows(const wisp_exec *e, const wisp_weight *w, const wisp_lora_pair *p, float s, float *row,
                         int64_t lo, int64_t hi, float *norm) {
    for (int64_t o = lo; o < hi; o++) {
        wisp_embed_row(e, w, (int32_t)o, row);
        for (int32_t r = 0; r < p->rank; r++) {
            float c = s * elem(p->type, p->b, (size_t)o * (size_t)p->rank + (size_t)r);
            if (c == 0.0f) continue;
            for (int32_t i = 0; i < p->n_in; i++) row[i] += c * elem(p->type, p->a, (size_t)r * (size_t)p->n_in + (size_t)i);
        }
        double ss = 0;
        for (int32_t i = 0; i < p->n_in; i++) ss += (double)row[i] * (double)row[i];
        norm[o] = (float)sqrt(ss);
    }
}

typedef struct norm_job {
    const wisp_exec *e;
    const wisp_weight *w;
    const wisp_lora_pair *p;
    float s;
    float *scratch, *norm;
} norm_job;

static void norm_piece(void *arg, int ith, int nth) {
    const norm_job *j = arg;
    int64_t lo, hi;
    wisp_split(j->p->n_out, ith, nth, &lo, &hi);
    wisp_dora_norm_rows(j->e, j->w, j->p, j->s, j->scratch + (size_t)ith * (size_t)j->p->n_in, lo, hi, j->norm);
}

void wisp_dora_norms(const wisp_exec *e, const wisp_weight *w, const wisp_lora_pair *p, float s, float *scratch,
                     float *norm) {
    norm_job j = {e, w, p, s, scratch, norm};
    wisp_exec_parallel(e, norm_piece, &j);
}

void wisp_dora_scale_rows(const wisp_lora_pair *p, float *y, int64_t ldy, int32_t n_tok) {
    for (int32_t t = 0; t < n_tok; t++)
        for (int32_t o = 0; o < p->n_out; o++) y[t * ldy + o] *= p->magnitude[o] / p->norm[o];
}
