/* The scalar reference kernels: plain loops that define every answer. */
#include "kernels.h"

#include <math.h>
#include <string.h>

#include "half.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF /* y += a*x must not fuse: these loops define the bits (quant.h) */
#endif

void wisp_matmul_reference(const wisp_matmul_args *a, int64_t r0, int64_t r1) {
    wisp_dot_fn dot = wisp_type_info_of(a->w_type)->dot;
    for (int64_t t = 0; t < a->n_tok; t++) {
        const uint8_t *x = a->x + (size_t)t * a->x_row_bytes;
        float *y = a->y + t * a->ldy;
        for (int64_t r = r0; r < r1; r++) y[r] = dot(a->w + (size_t)r * a->w_row_bytes, x, a->n_in);
    }
}

static float ref_dot_f32(const float *a, const float *b, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

static float ref_dot_f16_f32(const uint16_t *a, const float *b, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += wisp_f16_to_f32(a[i]) * b[i];
    return s;
}

static void ref_axpy_f32(float *y, float a, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

static void ref_axpy_f16(float *y, float a, const uint16_t *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * wisp_f16_to_f32(x[i]);
}

static void ref_scale_f32(float *y, float a, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] *= a;
}

static void ref_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    /* accumulate in double: the mean square of a long row loses bits in float */
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale * w[i];
}

static void ref_silu_mul(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void ref_f32_to_f16(const float *x, uint16_t *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = wisp_f32_to_f16(x[i]);
}

static void ref_f16_to_f32(const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = wisp_f16_to_f32(x[i]);
}

static void ref_bf16_to_f32(const uint16_t *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = wisp_bf16_to_f32(x[i]);
}

static void ref_attn_scores(float *s, const void *keys, size_t stride, int kv_f16, int64_t n, const float *q, int64_t hd,
                            float scale) {
    const uint8_t *k = keys;
    for (int64_t j = 0; j < n; j++, k += stride) {
        float d = kv_f16 ? ref_dot_f16_f32((const uint16_t *)(const void *)k, q, hd)
                         : ref_dot_f32((const float *)(const void *)k, q, hd);
        s[j] = d * scale;
    }
}

static void ref_attn_values(float *o, const float *w, const void *values, size_t stride, int kv_f16, int64_t n,
                            int64_t hd) {
    const uint8_t *v = values;
    for (int64_t j = 0; j < n; j++, v += stride) {
        if (kv_f16) ref_axpy_f16(o, w[j], (const uint16_t *)(const void *)v, hd);
        else ref_axpy_f32(o, w[j], (const float *)(const void *)v, hd);
    }
}

static float ref_max_f32(const float *x, int64_t n) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > m) m = x[i];
    return m;
}

static void ref_softmax_exp(float *s, int64_t n, float m, double *sum) {
    for (int64_t j = 0; j < n; j++) {
        s[j] = expf(s[j] - m);
        *sum += s[j];
    }
}

static void ref_attn_scores_heads(float *s, int64_t ld_s, const uint16_t *keys, size_t stride, int64_t n, const float *q,
                                  int64_t ld_q, int64_t n_q, int64_t hd, float scale) {
    for (int64_t h = 0; h < n_q; h++) ref_attn_scores(s + h * ld_s, keys, stride, 1, n, q + h * ld_q, hd, scale);
}

static void ref_attn_values_heads(float *o, int64_t ld_o, const float *w, int64_t ld_w, const uint16_t *values,
                                  size_t stride, int64_t n, int64_t n_q, int64_t hd) {
    for (int64_t h = 0; h < n_q; h++) ref_attn_values(o + h * ld_o, w + h * ld_w, values, stride, 1, n, hd);
}

static void ref_quantize_row(int type, const float *x, void *y, int64_t n) {
    wisp_type_info_of(type)->quantize(x, y, n);
}

static void ref_quantize_q8_0(const float *x, void *y, int64_t n) { ref_quantize_row(WISP_TYPE_Q8_0, x, y, n); }
static void ref_quantize_q8_1(const float *x, void *y, int64_t n) { ref_quantize_row(WISP_TYPE_Q8_1, x, y, n); }
static void ref_quantize_q8_k(const float *x, void *y, int64_t n) { ref_quantize_row(WISP_TYPE_Q8_K, x, y, n); }

static const wisp_kernels reference_table = {
    .name = "scalar",
    .matmul = {0}, /* every type: wisp_matmul_reference, filled in by the accessor's caller */
    .quantize_row = {[WISP_TYPE_Q8_0] = ref_quantize_q8_0,
                     [WISP_TYPE_Q8_1] = ref_quantize_q8_1,
                     [WISP_TYPE_Q8_K] = ref_quantize_q8_k},
    .dot_f32 = ref_dot_f32,
    .dot_f16_f32 = ref_dot_f16_f32,
    .axpy_f32 = ref_axpy_f32,
    .axpy_f16 = ref_axpy_f16,
    .scale_f32 = ref_scale_f32,
    .rmsnorm = ref_rmsnorm,
    .silu_mul = ref_silu_mul,
    .f32_to_f16 = ref_f32_to_f16,
    .f16_to_f32 = ref_f16_to_f32,
    .bf16_to_f32 = ref_bf16_to_f32,
    .attn_scores = ref_attn_scores,
    .attn_values = ref_attn_values,
    .max_f32 = ref_max_f32,
    .softmax_exp = ref_softmax_exp,
    .attn_scores_heads = ref_attn_scores_heads,
    .attn_values_heads = ref_attn_values_heads,
};

const wisp_kernels *wisp_kernels_reference(void) { return &reference_table; }

void wisp_kernels_complete(wisp_kernels *k) {
    const wisp_kernels *r = &reference_table;
    for (int t = 0; t < WISP_TYPE_COUNT; t++) {
        if (!k->matmul[t]) k->matmul[t] = wisp_matmul_reference;
        if (!k->dequant_t[t]) k->dequant_t[t] = wisp_dequant_t_reference;
        if (!k->quantize_row[t]) k->quantize_row[t] = r->quantize_row[t];
    }
/* a statement of its own, safe after an unbraced if/else */
#define FILL(f)                  \
    do {                         \
        if (!k->f) k->f = r->f;  \
    } while (0)
    FILL(dot_f32);
    FILL(dot_f16_f32);
    FILL(axpy_f32);
    FILL(axpy_f16);
    FILL(scale_f32);
    FILL(rmsnorm);
    FILL(silu_mul);
    FILL(f32_to_f16);
    FILL(f16_to_f32);
    FILL(bf16_to_f32);
    FILL(attn_scores);
    FILL(attn_values);
    FILL(max_f32);
    FILL(softmax_exp);
    FILL(attn_scores_heads);
    FILL(attn_values_heads);
#undef FILL
    if (!k->name) k->name = r->name;
}
