#include "token_loss.h"

#include <math.h>

double cli_token_nll(const float *logits, int32_t n, int32_t target) {
    float m = logits[0];
    for (int32_t i = 1; i < n; i++)
        if (logits[i] > m) m = logits[i];
    double sum = 0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)logits[i] - m);
    return log(sum) + m - logits[target];
}
