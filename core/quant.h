/* Reference (scalar) kernels of the quantized block types, shared between
 * core/types.c (the table), core/quant_*.c and the SIMD fallbacks in simd/.
 *
 * Blocks are addressed as bytes with the field offsets below: GGUF files,
 * flash and wasm memory promise no alignment, so multi-byte fields are read
 * with half.h's memcpy loads and no block struct is ever dereferenced.
 *
 * Floating point: these functions define answers bit for bit on every
 * platform, so they must be compiled without FP contraction (a*b+c fused into
 * an FMA). Dequantization happens to be immune (a fp16 scale times a level is
 * exact in float) but dot products are not. GCC does not contract under
 * -std=c11 (the project's mode; -std=gnu11 or -ffp-contract=fast would, e.g.
 * on aarch64); clang is told so by the pragma in each file. test_quant pins
 * the exact output bits, so a build that contracts fails it.
 */
#ifndef WISP_QUANT_H
#define WISP_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "half.h"
#include "types.h"

/* ---- block layouts (byte offsets; d/m/s are fp16 unless noted) ---------- */
/* Q4_0   18 B: d@0 qs[16]@2            element j<16: low nibble of qs[j], j+16: high */
/* Q4_1   20 B: d@0 m@2 qs[16]@4         */
/* Q5_0   22 B: d@0 qh(u32)@2 qs[16]@6   bit j of qh = 5th bit of element j */
/* Q5_1   24 B: d@0 m@2 qh@4 qs[16]@8    */
/* Q8_0   34 B: d@0 qs(int8)[32]@2       */
/* Q8_1   36 B: d@0 s@2 qs(int8)[32]@4   s = d * sum(qs) */
/* IQ4_NL 18 B: d@0 qs[16]@2             value = d * wisp_iq4nl_table[nibble] */
#define WISP_Q4_0_BYTES 18
#define WISP_Q4_1_BYTES 20
#define WISP_Q5_0_BYTES 22
#define WISP_Q5_1_BYTES 24
#define WISP_Q8_0_BYTES 34
#define WISP_Q8_1_BYTES 36
#define WISP_IQ4_NL_BYTES 18

/* Q2_K  84 B: scales[16]@0 (low nibble scale, high nibble min, per 16
 *             elements) qs[64]@16 d@80 dmin@82 */
/* Q3_K 110 B: hmask[32]@0 qs[64]@32 scales[12]@96 d@108 */
/* Q4_K 144 B: d@0 dmin@2 scales[12]@4 qs[128]@16 */
/* Q5_K 176 B: d@0 dmin@2 scales[12]@4 qh[32]@16 qs[128]@48 */
/* Q6_K 210 B: ql[128]@0 qh[64]@128 scales(int8)[16]@192 d@208 */
/* Q8_K 292 B: d(float32)@0 qs(int8)[256]@4 bsums(int16)[16]@260 */
#define WISP_Q2_K_BYTES 84
#define WISP_Q3_K_BYTES 110
#define WISP_Q4_K_BYTES 144
#define WISP_Q5_K_BYTES 176
#define WISP_Q6_K_BYTES 210
#define WISP_Q8_K_BYTES 292

/* The 16 levels of IQ4_NL (a non-uniform grid fitted to bell-shaped data). */
extern const int8_t wisp_iq4nl_table[16];

/* ---- kernels ------------------------------------------------------------- */
/* dequantize(src, dst, n) / quantize(src, dst, n): n is a multiple of the
 * block length. dot(w, act, n): see the "dot products" note in types.c. */
#define WISP_DECLARE_QTYPE(t)                                       \
    void wisp_dequantize_##t(const void *src, float *dst, int64_t n); \
    void wisp_quantize_##t(const float *src, void *dst, int64_t n)

WISP_DECLARE_QTYPE(f32);
WISP_DECLARE_QTYPE(f16);
WISP_DECLARE_QTYPE(bf16);
WISP_DECLARE_QTYPE(q4_0);
WISP_DECLARE_QTYPE(q4_1);
WISP_DECLARE_QTYPE(q5_0);
WISP_DECLARE_QTYPE(q5_1);
WISP_DECLARE_QTYPE(q8_0);
WISP_DECLARE_QTYPE(q8_1);
WISP_DECLARE_QTYPE(iq4_nl);
WISP_DECLARE_QTYPE(q2_K);
WISP_DECLARE_QTYPE(q3_K);
WISP_DECLARE_QTYPE(q4_K);
WISP_DECLARE_QTYPE(q5_K);
WISP_DECLARE_QTYPE(q6_K);
WISP_DECLARE_QTYPE(q8_K);

float wisp_dot_f32_f32(const void *w, const void *act, int64_t n);
float wisp_dot_f16_f32(const void *w, const void *act, int64_t n);
float wisp_dot_bf16_f32(const void *w, const void *act, int64_t n);
float wisp_dot_q4_0_q8_0(const void *w, const void *act, int64_t n);
float wisp_dot_q4_1_q8_1(const void *w, const void *act, int64_t n);
float wisp_dot_q5_0_q8_0(const void *w, const void *act, int64_t n);
float wisp_dot_q5_1_q8_1(const void *w, const void *act, int64_t n);
float wisp_dot_q8_0_q8_0(const void *w, const void *act, int64_t n);
float wisp_dot_iq4_nl_q8_0(const void *w, const void *act, int64_t n);
float wisp_dot_q2_K_q8_K(const void *w, const void *act, int64_t n);
float wisp_dot_q3_K_q8_K(const void *w, const void *act, int64_t n);
float wisp_dot_q4_K_q8_K(const void *w, const void *act, int64_t n);
float wisp_dot_q5_K_q8_K(const void *w, const void *act, int64_t n);
float wisp_dot_q6_K_q8_K(const void *w, const void *act, int64_t n);

/* ---- fitting helpers of the weight quantizers (core/quant_fit.c) -------- */

/* x[i] ~ s * q[i] with integer q[i] in [qmin, qmax] (qmin < 0 < qmax),
 * minimising the squared error over a grid of scales refined by alternating
 * rounding and least squares. Returns s (its sign is free, so the largest
 * magnitude can use the longer side of an asymmetric range); 0 if x is 0. */
float wisp_fit_symmetric(const float *x, int n, int qmin, int qmax, int8_t *q);

/* x[i] ~ s * q[i] + b with q[i] in [0, qmax] and s >= 0, same search. With
 * `b_nonpositive` the offset is kept <= 0 (K-quant mins are subtracted).
 * Returns s and writes b. */
float wisp_fit_affine(const float *x, int n, int qmax, bool b_nonpositive, uint8_t *q, float *b);

/* x[i] ~ s * table[q[i]] over a 16-entry sorted table. Returns s. */
float wisp_fit_table(const float *x, int n, const int8_t table[16], uint8_t *q);

/* Index of the table entry nearest v (table sorted ascending, 16 entries). */
int wisp_nearest_in_table(const int8_t table[16], float v);

/* Least-squares (s, b) for fixed levels q: s >= 0, and b <= 0 when asked. */
void wisp_solve_affine(const float *x, int n, const uint8_t *q, bool b_nonpositive, float *s, float *b);

/* Sum of squared errors of x against s*q+b (helpers for the refinements). */
float wisp_affine_error(const float *x, int n, const uint8_t *q, float s, float b);

/* ---- rounding ------------------------------------------------------------ */

/* Round half away from zero, like C's roundf, for |v| < 2^30; NaN gives 0. */
static inline int wisp_round_away(float v) {
    if (!(v == v)) return 0;
    if (v > 1073741824.0f) v = 1073741824.0f;
    if (v < -1073741824.0f) v = -1073741824.0f;
    int t = (int)v;           /* truncates toward zero */
    float r = v - (float)t;   /* exact */
    if (r >= 0.5f) t++;
    else if (r <= -0.5f) t--;
    return t;
}

/* Round half to even (the default IEEE mode, what ggml's nearest_int does
 * with its 1.5*2^23 trick) for |v| < 2^22; out-of-range values saturate and
 * NaN gives 0. */
static inline int wisp_round_even(float v) {
    if (!(v == v)) return 0;
    if (v > 4194303.0f) return 4194303;
    if (v < -4194303.0f) return -4194303;
    float m = v + 12582912.0f; /* 1.5 * 2^23: the sum's ulp is 1 */
    uint32_t u = wisp_f32_bits(m);
    return (int)(u & 0x007fffffu) - 0x00400000;
}

/* Nearest integer in [lo, hi]; NaN gives lo. */
static inline int wisp_round_clamp(float v, int lo, int hi) {
    if (!(v > (float)lo)) return lo;
    if (v >= (float)hi) return hi;
    return wisp_round_even(v);
}

static inline float wisp_load_f16(const void *p) { return wisp_f16_to_f32(wisp_load_u16(p)); }

/* fp16 bits of a block scale, saturated to the finite range (weights too
 * large for fp16 scales clip instead of turning into inf). */
static inline uint16_t wisp_f16_scale(float v) {
    if (v > 65504.0f) v = 65504.0f;
    if (v < -65504.0f) v = -65504.0f;
    return wisp_f32_to_f16(v);
}

#endif
