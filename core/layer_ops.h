/* The row operations that the families of the architecture table add to the
 * llama layer, each with its backward, used by both the inference forward
 * pass (forward.c) and training (train_forward.c, train_backward.c), so a
 * trained adapter sees at inference exactly the arithmetic it was trained
 * on. They are rare next to the matrix products, so they stay scalar here
 * rather than in the SIMD kernel table. */
#ifndef WISP_LAYER_OPS_H
#define WISP_LAYER_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "arch.h"
#include "kernels.h"
#include "model.h"

/* g = act(g) * u over n elements (SiLU through the kernel table, GELU-tanh here). */
void wisp_act_mul(const wisp_kernels *k, wisp_activation act, float *g, const float *u, int64_t n);
/* The gradient of act(g) * u: on entry dact holds d(act(g) u); on exit it
 * holds d g and du holds d u. */
void wisp_act_mul_backward(wisp_activation act, float *dact, float *du, const float *g, const float *u, int64_t n);
/* GELU with the tanh approximation, times u: g = gelu_tanh(g) * u. */
void wisp_gelu_tanh_mul(float *g, const float *u, int64_t n);

/* RMSNorm of each of n_heads consecutive vectors of hd floats, in place,
 * all with the weight w[hd] (qwen3 and gemma3 q/k norms). */
void wisp_head_norm(const wisp_kernels *k, float *x, int32_t n_heads, int32_t hd, const float *w, float eps);
/* The gradient of y = rmsnorm(x) w for one row of n: dx (+)= J^T dy. */
void wisp_rmsnorm_backward_row(float *dx, const float *x, const float *w, const float *dy, int32_t n, float eps,
                               bool accumulate);

/* The queries and keys of one token, from the projections (biases added) to
 * what attention takes: each head's RMSNorm where the layer has q/k norms
 * (qwen3, gemma3), then RoPE by the position's table row cs (the windowed
 * layers' own table where the family has one). */
void wisp_layer_qk_rope(const wisp_kernels *k, const wisp_hparams *hp, const wisp_layer *L, float *q, float *key,
                        const float *cs);
/* Its backward for one token: dq, dk hold the gradients of its outputs and
 * receive those of its inputs q_in, k_in (read only with q/k norms). */
void wisp_layer_qk_rope_backward(const wisp_hparams *hp, const wisp_layer *L, float *dq, float *dk, const float *q_in,
                                 const float *k_in, const float *cs);

/* x = cap tanh(x / cap) (gemma2's final logits and attention scores). */
void wisp_softcap(float *x, int64_t n, float cap);
/* Given y = softcap(x) and dy: dy := dy (1 - (y / cap)^2), the gradient w.r.t. x. */
void wisp_softcap_backward(float *dy, const float *y, int64_t n, float cap);

#endif
