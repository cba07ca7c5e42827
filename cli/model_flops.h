/* Model FLOPs per token of prefill and of LoRA training, counted from the
 * model's tensors, split by the arithmetic that runs them: quantized
 * weights' matmuls dot int8 activations (their act_type is Q8_0/Q8_1/Q8_K),
 * everything else is F32 multiply-adds. Two operations per multiply-add.
 * With each part's measured peak (compute_peak.h) they give the fraction of
 * the machine's arithmetic a measured speed reaches. */
#ifndef WISP_CLI_MODEL_FLOPS_H
#define WISP_CLI_MODEL_FLOPS_H

#include <stdint.h>

#include "compute_peak.h"
#include "model.h"

typedef struct cli_flops {
    double int8; /* operations per token on the int8 dot-product path */
    double f32;  /* operations per token on the F32 path */
} cli_flops;

/* Prefill of an n_prompt-token prompt in one batch, per token: every
 * projection for every token, the output matrix once (only the last
 * token's logits are computed), and causal attention's scores and
 * weighted values (4 x heads x head_dim x positions attended, F32). */
cli_flops cli_prefill_flops(const wisp_model *m, int32_t n_prompt);

/* One LoRA training token in windows of seq_len positions, rank `rank` on
 * the projections in `targets` (bit p: projection p):
 *   frozen base: forward 2 per weight (int8 path for quantized weights),
 *     backward 2 per weight for the activation gradient dx = W^T dy (F32:
 *     the backward pass dequantizes tiles, core/matmul_t.h); no weight
 *     gradient. Every projection and the output matrix (logits for every
 *     position, as the loss needs).
 *   adapters: 6 r (d_in + d_out) per adapted matrix (forward A x and B h,
 *     backward dB, dh, dA, dx), F32.
 *   attention: forward 4 x heads x head_dim x positions attended, backward
 *     twice that, F32.
 * Recomputation under activation checkpointing is not counted (model FLOPs,
 * not hardware FLOPs). */
cli_flops cli_train_flops(const wisp_model *m, uint32_t targets, int32_t rank, int32_t seq_len);

/* tok_s x (int8 ops / int8 peak + f32 ops / f32 peak): the time the work
 * would take at the peaks over the time it took. -1 when a part with work
 * has no measured peak. */
double cli_peak_fraction(double tok_s, cli_flops f, const cli_compute_peak *p);

#endif
