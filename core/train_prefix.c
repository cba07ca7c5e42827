/* Prefix tuning (PEFT PREFIX_TUNING): every layer attends first to learned
 * keys and values. A micro-step lays them out as the first n_virtual
 * positions of every sequence, as prompt tuning lays out its embeddings:
 * the layer computes keys and values there like anywhere (from a zero
 * input), and they are replaced by the prefix before attention. So the text
 * sits at positions n_virtual.. (RoPE included), exactly as in HF, where the
 * prefix is a cache of n_virtual past positions whose keys are used as they
 * are stored (never rotated). In the backward pass the gradient reaching the
 * replaced keys and values is the prefix's; it stops there (nothing below
 * produced them). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "train.h"

/* Key (kv 0) or value (kv 1) of layer l at virtual position i: PEFT's
 * past_key_values row order [n_layers][2][n_kv_heads][head_dim]. */
static size_t prefix_offset(const wisp_train *tr, int32_t i, int32_t l, int kv) {
    return (size_t)i * (size_t)tr->prompt_width + ((size_t)l * 2 + (size_t)kv) * (size_t)tr->KV;
}

void wisp_train_prefix_forward(wisp_train *tr, int32_t l) {
    size_t bytes = (size_t)tr->KV * sizeof(float);
    for (int32_t b = 0; b < tr->n_seq; b++)
        for (int32_t i = 0; i < tr->n_virtual; i++) {
            size_t row = ((size_t)b * (size_t)tr->S + (size_t)i) * (size_t)tr->KV;
            memcpy(tr->k + row, tr->prompt + prefix_offset(tr, i, l, 0), bytes);
            memcpy(tr->v + row, tr->prompt + prefix_offset(tr, i, l, 1), bytes);
        }
}

void wisp_train_prefix_backward(wisp_train *tr, int32_t l) {
    for (int32_t b = 0; b < tr->n_seq; b++)
        for (int32_t i = 0; i < tr->n_virtual; i++) {
            size_t row = ((size_t)b * (size_t)tr->S + (size_t)i) * (size_t)tr->KV;
            float *dk = tr->k + row, *dv = tr->v + row;
            float *gk = tr->prompt_grad + prefix_offset(tr, i, l, 0), *gv = tr->prompt_grad + prefix_offset(tr, i, l, 1);
            for (int32_t k = 0; k < tr->KV; k++) gk[k] += dk[k], gv[k] += dv[k];
            memset(dk, 0, (size_t)tr->KV * sizeof(float));
            memset(dv, 0, (size_t)tr->KV * sizeof(float));
        }
}

/* ---- PEFT's reparameterization (PrefixEncoder with prefix_projection):
 * prefix_i = W2 tanh(W1 e_i + b1) + b2, with virtual_params laid out as
 * e [N][KV], W1 [H][KV], b1 [H], W2 [width][H], b2 [width]. Sums run in
 * double, in a fixed order: the result does not depend on threads. ---- */

typedef struct mlp {
    const float *e, *w1, *b1, *w2, *b2;
    size_t N, K, H, W;
} mlp;

static mlp mlp_of(const wisp_train *tr, const float *base) {
    mlp m;
    m.N = (size_t)tr->n_virtual, m.K = (size_t)tr->KV, m.H = (size_t)tr->proj_hidden, m.W = (size_t)tr->prompt_width;
    m.e = base, m.w1 = m.e + m.N * m.K, m.b1 = m.w1 + m.H * m.K, m.w2 = m.b1 + m.H, m.b2 = m.w2 + m.W * m.H;
    return m;
}

void wisp_train_prefix_project(wisp_train *tr) {
    if (!tr->proj_hidden) return;
    mlp m = mlp_of(tr, tr->virtual_params);
    for (size_t i = 0; i < m.N; i++) {
        float *h = tr->proj_h + i * m.H, *out = tr->prompt + i * m.W;
        for (size_t k = 0; k < m.H; k++) {
            double s = m.b1[k];
            for (size_t j = 0; j < m.K; j++) s += (double)m.w1[k * m.K + j] * m.e[i * m.K + j];
            h[k] = (float)tanh(s);
        }
        for (size_t r = 0; r < m.W; r++) {
            double s = m.b2[r];
            for (size_t k = 0; k < m.H; k++) s += (double)m.w2[r * m.H + k] * h[k];
            out[r] = (float)s;
        }
    }
}

void wisp_train_prefix_project_backward(wisp_train *tr) {
    if (!tr->proj_hidden) return;
    mlp m = mlp_of(tr, tr->virtual_params), g = mlp_of(tr, tr->virtual_grad);
    float *de = (float *)(uintptr_t)g.e, *dw1 = (float *)(uintptr_t)g.w1, *db1 = (float *)(uintptr_t)g.b1;
    float *dw2 = (float *)(uintptr_t)g.w2, *db2 = (float *)(uintptr_t)g.b2;
    for (size_t i = 0; i < m.N; i++) {
        const float *dp = tr->prompt_grad + i * m.W, *h = tr->proj_h + i * m.H;
        float *dz = tr->proj_dh + i * m.H;
        for (size_t k = 0; k < m.H; k++) { /* d h = W2^T dp, then through tanh: (1 - h^2) */
            double s = 0;
            for (size_t r = 0; r < m.W; r++) s += (double)m.w2[r * m.H + k] * dp[r];
            dz[k] = (float)(s * (1.0 - (double)h[k] * h[k]));
        }
        for (size_t r = 0; r < m.W; r++) {
            db2[r] += dp[r];
            for (size_t k = 0; k < m.H; k++) dw2[r * m.H + k] += dp[r] * h[k];
        }
        for (size_t k = 0; k < m.H; k++) {
            db1[k] += dz[k];
            for (size_t j = 0; j < m.K; j++) dw1[k * m.K + j] += dz[k] * m.e[i * m.K + j];
        }
        for (size_t j = 0; j < m.K; j++) {
            double s = 0;
            for (size_t k = 0; k < m.H; k++) s += (double)m.w1[k * m.K + j] * dz[k];
            de[i * m.K + j] += (float)s;
        }
    }
}
