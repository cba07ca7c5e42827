/* LoRA adapters as wisp holds them, whatever file they came from.
 *
 * A pair adapts one projection of one layer: y = W x + scale * B (A x).
 * Orientation is PEFT's: A is [rank][n_in] row-major (PyTorch (r, in)) and B
 * is [n_out][rank] (PyTorch (out, r)). GGUF LoRA's `.lora_a` (ne = [in, r])
 * and `.lora_b` (ne = [r, out]) have exactly these byte layouts, so a GGUF
 * adapter is used in place. Rows of B are in GGUF order (for arch llama the
 * q/k rows are permuted relative to HF order; PEFT import/export converts).
 *
 * `scale` is the adapter's own factor (alpha / rank, or alpha / sqrt(rank)
 * for rsLoRA); a user scale given when attaching multiplies it.
 *
 * DoRA (PEFT `use_dora`) adds a magnitude per output row: the adapted weight
 * is m (W + s B A) / ||W + s B A||_row, i.e. y = (m / n) (W x + s B A x)
 * (+ bias after), where n[o] is the L2 norm of row o of W + s B A. PEFT
 * treats n as a constant in backward (DoRA paper, section 4.3), and so does
 * wisp. `magnitude` is always F32 (importers convert); `norm` is room for n
 * that its owner provides and core fills (at attach, and per training step). */
#ifndef WISP_LORA_H
#define WISP_LORA_H

#include <stdbool.h>
#include <stdint.h>

typedef struct wisp_lora_pair {
    int32_t layer;
    int32_t proj;   /* wisp_proj */
    int32_t rank;
    int32_t n_in;   /* columns of the base weight */
    int32_t n_out;  /* rows of the base weight */
    int32_t type;   /* element type of a and b: WISP_TYPE_F32, F16 or BF16 */
    const void *a;  /* [rank][n_in] */
    const void *b;  /* [n_out][rank] */
    float alpha;    /* as recorded by the source (for export) */
    float scale;    /* effective factor applied to B (A x) */
    const float *magnitude; /* DoRA: [n_out] m; NULL for plain LoRA */
    float *norm;            /* DoRA: [n_out] room for the row norms of W + s B A */
} wisp_lora_pair;

typedef struct wisp_lora {
    const wisp_lora_pair *pairs;
    int32_t n_pairs;
    int32_t max_rank;
    bool rslora;    /* scale = alpha / sqrt(rank) */
} wisp_lora;

#endif
