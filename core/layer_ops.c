#include "layer_ops.h"

#include <math.h>

#include "rope.h"

/* gelu_tanh(x) = x/2 (1 + tanh(c (x + 0.044715 x^3))), c = sqrt(2/pi) */
#define GELU_C 0.7978845608028654f
#define GELU_A 0.044715f

void wisp_gelu_tanh_mul(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float x = g[i];
        g[i] = 0.5f * x * (1.0f + tanhf(GELU_C * (x + GELU_A * x * x * x))) * u[i];
    }
}

void wisp_act_mul(const wisp_kernels *k, wisp_activation act, float *g, const float *u, int64_t n) {
    if (act == WISP_ACT_GELU_TANH) wisp_gelu_tanh_mul(g, u, n);
    else k->silu_mul(g, u, n);
}

void wisp_act_mul_backward(wisp_activation act, float *dact, float *du, const float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float x = g[i], d = dact[i], a, da;
        if (act == WISP_ACT_GELU_TANH) {
            float th = tanhf(GELU_C * (x + GELU_A * x * x * x));
            a = 0.5f * x * (1.0f + th);
            da = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * GELU_C * (1.0f + 3.0f * GELU_A * x * x);
        } else { /* silu(x) = x s, silu' = s (1 + x (1 - s)), s = sigmoid(x) */
            float s = 1.0f / (1.0f + expf(-x));
            a = x * s;
            da = s * (1.0f + x * (1.0f - s));
        }
        du[i] = d * a;
        dact[i] = d * u[i] * da;
    }
}

void wisp_head_norm(const wisp_kernels *k, float *x, int32_t n_heads, int32_t hd, const float *w, float eps) {
    for (int32_t h = 0; h < n_heads; h++) k->rmsnorm(x + (size_t)h * hd, x + (size_t)h * hd, w, hd, eps);
}

/* y = x r w with r = (mean x^2 + eps)^-1/2, so
 * dx_i = r w_i dy_i - x_i r^3 / n * sum_j dy_j w_j x_j. */
void wisp_rmsnorm_backward_row(float *dx, const float *x, const float *w, const float *dy, int32_t n, float eps,
                               bool accumulate) {
    double ss = 0, dot = 0;
    for (int32_t i = 0; i < n; i++) {
        ss += (double)x[i] * x[i];
        dot += (double)dy[i] * w[i] * x[i];
    }
    double r = 1.0 / sqrt(ss / n + (double)eps);
    float rf = (float)r, c = (float)(r * r * r / n * dot);
    for (int32_t i = 0; i < n; i++) {
        float g = rf * (w[i] * dy[i]) - c * x[i];
        dx[i] = accumulate ? dx[i] + g : g;
    }
}

void wisp_layer_qk_rope(const wisp_kernels *k, const wisp_hparams *hp, const wisp_layer *L, float *q, float *key,
                        const float *cs) {
    if (L->q_norm) {
        wisp_head_norm(k, q, hp->n_heads, hp->head_dim, L->q_norm, hp->rms_eps);
        wisp_head_norm(k, key, hp->n_kv_heads, hp->head_dim, L->k_norm, hp->rms_eps);
    }
    wisp_rope_apply(q, hp->n_heads, hp->head_dim, hp->rope_dim, cs, hp->rope_neox, false);
    wisp_rope_apply(key, hp->n_kv_heads, hp->head_dim, hp->rope_dim, cs, hp->rope_neox, false);
}

void wisp_layer_qk_rope_backward(const wisp_hparams *hp, const wisp_layer *L, float *dq, float *dk, const float *q_in,
                                 const float *k_in, const float *cs) {
    wisp_rope_apply(dq, hp->n_heads, hp->head_dim, hp->rope_dim, cs, hp->rope_neox, true);
    wisp_rope_apply(dk, hp->n_kv_heads, hp->head_dim, hp->rope_dim, cs, hp->rope_neox, true);
    if (!L->q_norm) return;
    int32_t hd = hp->head_dim;
    for (int32_t h = 0; h < hp->n_heads; h++) /* in place: the row's reduction is done before it is written */
        wisp_rmsnorm_backward_row(dq + (size_t)h * hd, q_in + (size_t)h * hd, L->q_norm, dq + (size_t)h * hd, hd,
                                  hp->rms_eps, false);
    for (int32_t h = 0; h < hp->n_kv_heads; h++)
        wisp_rmsnorm_backward_row(dk + (size_t)h * hd, k_in + (size_t)h * hd, L->k_norm, dk + (size_t)h * hd, hd,
                                  hp->rms_eps, false);
}

void wisp_softcap(float *x, int64_t n, float cap) {
    for (int64_t i = 0; i < n; i++) x[i] = cap * tanhf(x[i] / cap);
}

void wisp_softcap_backward(float *dy, const float *y, int64_t n, float cap) {
    for (int64_t i = 0; i < n; i++) {
        float t = y[i] / cap;
        dy[i] *= 1.0f - t * t;
    }
}
