/* Rewriting a GGUF model tensor by tensor: re-quantizing to another type
 * (`wisp quantize`) and merging LoRA adapters (`wisp merge`) are the same
 * walk — dequantize a row, optionally add LoRA rows, quantize it with core's
 * reference quantizers — so both share this module.
 *
 * Which type each tensor gets (a "target"):
 *   - keep: every tensor keeps its type (a merge that does not re-quantize);
 *   - a plain type (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K,
 *     Q4_K, Q5_K, Q6_K, IQ4_NL): every 2-D weight gets it;
 *   - a recipe: q4_k_m / q5_k_m, llama.cpp's mixes — Q4_K (Q5_K) for most
 *     weights; Q6_K for the output projection (the embedding when tied) and
 *     for attn_v and ffn_down in the first and last eighth of the layers and
 *     every third layer between.
 * Tensors that are not 2-D weights (norms, biases) are copied unchanged and
 * stay F32. A row length the chosen type cannot split into blocks falls back
 * as llama.cpp does (Q4_K->Q5_0, Q5_K->Q5_1, Q6_K->Q8_0, Q2_K/Q3_K->IQ4_NL),
 * and to F16 when even that does not divide it. */
#ifndef WISP_QUANTIZE_MODEL_H
#define WISP_QUANTIZE_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"
#include "merge.h"
#include "sink.h"
#include "status.h"

typedef enum wisp_qrecipe { WISP_QRECIPE_KEEP, WISP_QRECIPE_TYPE, WISP_QRECIPE_Q4_K_M, WISP_QRECIPE_Q5_K_M } wisp_qrecipe;

typedef struct wisp_qtarget {
    int recipe; /* wisp_qrecipe */
    int type;   /* for WISP_QRECIPE_TYPE */
} wisp_qtarget;

/* "q4_k_m", "q5_k_m", "keep", or a type name ("q8_0", "F16", ...),
 * case-insensitive. false for names that are not targets. */
bool wisp_qtarget_parse(const char *name, wisp_qtarget *t);

/* Every accepted name, for help texts. */
extern const char wisp_qtarget_names[];

/* Whether a tensor is a weight that targets convert (2-D, named *.weight). */
bool wisp_quant_is_weight(const wisp_gguf_tensor *t);

/* The type tensor `t` gets in a model of `n_layers` layers with `tied`
 * output. *wanted (may be NULL) gets the type before any row-length
 * fallback. */
int wisp_qtarget_tensor_type(const wisp_qtarget *target, const wisp_gguf_tensor *t, int32_t n_layers, bool tied,
                             int *wanted);

/* llama.cpp's general.file_type for a target (e.g. 15 for q4_k_m). */
uint32_t wisp_qtarget_file_type(const wisp_qtarget *t);

/* Write the output's header: every metadata pair of `in` (general.file_type
 * and general.quantization_version updated unless the target is keep), then
 * the tensor infos of `in` in the same order with out_types[i] (one per
 * tensor), padded to the data section. Afterwards the caller writes each
 * tensor's data (wisp_model_rewrite_rows), padding to in->alignment after
 * each. */
wisp_status wisp_model_rewrite_header(const wisp_gguf *in, const wisp_qtarget *target, const uint32_t *out_types,
                                      wisp_sink *sink, wisp_error *err);

/* Rows [r0, r1) of `t` (2-D view: rows of ne[0] elements) converted to
 * `out_type` with the merge terms added, into `out` ((r1 - r0) rows of
 * wisp_type_row_bytes(out_type, ne[0])). `scratch` holds ne[0] floats. Rows
 * that need no change (same type, no terms) are copied byte for byte. */
void wisp_model_rewrite_rows(const wisp_gguf_tensor *t, int out_type, const wisp_merge_term *terms, int n_terms,
                             int64_t r0, int64_t r1, float *scratch, uint8_t *out);

/* Rows of a tensor's 2-D view (ne[1] * ne[2] * ne[3]). */
int64_t wisp_tensor_rows(const wisp_gguf_tensor *t);

#endif
