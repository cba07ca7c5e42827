/* How LoRA pairs line up with a base model, whatever file they came from:
 * the shape each projection must have, the checks every importer runs, and
 * the q/k row permutation between Hugging Face order and GGUF order.
 *
 * The permutation. For arch `llama`, llama.cpp's HF->GGUF conversion
 * reorders the rows of q_proj/k_proj within each head so that llama.cpp can
 * rotate adjacent pairs (2i, 2i+1) where HF rotates halves (i, i+d/2): the
 * rows of a head are viewed as [2][d/2] and transposed to [d/2][2]. So GGUF
 * row h*d + 2i + s holds HF row h*d + s*(d/2) + i (s in {0,1}, i < d/2),
 * with d the head size (n_out / n_heads for q, n_out / n_kv_heads for k).
 * A LoRA delta B A adds to W, so the same reordering applies to the rows of
 * B; A (whose rows index the rank) is untouched. qwen2 keeps HF order. */
#ifndef WISP_LORA_LAYOUT_H
#define WISP_LORA_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lora.h"
#include "model.h"
#include "status.h"

/* Columns (n_in) and rows (n_out) of projection `proj` in a model. */
void wisp_lora_proj_shape(const wisp_hparams *hp, int proj, int32_t *n_in, int32_t *n_out);

/* "blk.N.<attn_q|attn_k|attn_v|attn_output|ffn_gate|ffn_up|ffn_down>.weight"
 * (exactly, N without leading zeros) -> layer, proj; false otherwise. */
bool wisp_lora_parse_weight_name(const char *s, size_t len, int32_t *layer, int *proj);

/* Bytes of one element of a LoRA tensor type (F32/F16/BF16), 0 otherwise. */
size_t wisp_lora_elem_bytes(int type);

/* Check an adapter: every pair has a known projection, a layer >= 0, a rank
 * >= 1, an element type F32/F16/BF16, data, and a finite scale; no
 * (layer, proj) appears twice; all pairs of one projection share n_in and
 * n_out; max_rank is at least every rank. With `base` (may be NULL) also:
 * the layer exists and the shapes are the base's. `what` prefixes messages
 * (a file name). */
wisp_status wisp_lora_validate(const wisp_lora *l, const wisp_hparams *base, const char *what, wisp_error *err);

/* Check that no element of an F32/F16/BF16 array is NaN or infinite. */
bool wisp_lora_all_finite(const void *data, int type, size_t n);

/* Sort pairs by (layer, proj): the order every importer returns. */
void wisp_lora_sort_pairs(wisp_lora_pair *pairs, int32_t n);

/* Whether rows of B move between HF and GGUF order for this projection. */
bool wisp_lora_permutes(wisp_arch arch, int proj);

/* Whether the adapter is DoRA (its pairs carry magnitudes; validated: all or none). */
bool wisp_lora_is_dora(const wisp_lora *l);

/* The HF row that GGUF row `gguf_row` came from, for heads of `head_dim`
 * rows (even). The inverse, GGUF row of an HF row, is wisp_lora_gguf_row. */
int32_t wisp_lora_hf_row(int32_t gguf_row, int32_t head_dim);
int32_t wisp_lora_gguf_row(int32_t hf_row, int32_t head_dim);

/* Head size of the rows of projection `proj` (q: n_heads, k: n_kv_heads). */
int32_t wisp_lora_head_rows(const wisp_hparams *hp, int proj);

/* Effective scale of a pair as PEFT and llama.cpp compute it: alpha / r (or
 * alpha / sqrt(r) for rsLoRA) evaluated in double and rounded once to float
 * (for a single division that equals llama.cpp's float alpha / r). */
float wisp_lora_scale_of(double alpha, int32_t rank, bool rslora);

#endif
