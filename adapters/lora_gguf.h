/* llama.cpp's GGUF LoRA adapters, read in place and written through a sink.
 *
 * The file: `general.type = "adapter"`, `general.architecture` (the base's),
 * `adapter.type = "lora"`, `adapter.lora.alpha` (f32; 0 or absent: the scale
 * is the user's alone), and per adapted base tensor `<name>.lora_a` (ne =
 * [in, r]) and `<name>.lora_b` (ne = [r, out]) in F32, F16 or BF16. Those
 * byte layouts are exactly wisp_lora's A [rank][n_in] and B [n_out][rank],
 * so reading fills a table of pairs whose A/B point into the GGUF bytes (no
 * alignment is promised beyond the file's; kernels load unaligned).
 *
 * Reading, in two steps so the caller owns the memory:
 *
 *     wisp_lora_gguf_info info;
 *     wisp_lora_gguf_plan(&g, &info, &err);               // counts pairs
 *     wisp_lora_pair *pairs = <info.pairs_bytes bytes>;
 *     wisp_lora lora;
 *     wisp_lora_gguf_read(&g, base_hp_or_NULL, pairs, info.n_pairs, &lora, &err);
 *
 * Writing chooses one file alpha A such that llama.cpp's A / r reproduces
 * every pair's scale exactly (see wisp_lora_gguf_write). */
#ifndef WISP_LORA_GGUF_H
#define WISP_LORA_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "lora.h"
#include "model.h"
#include "sink.h"
#include "status.h"

typedef struct wisp_lora_gguf_info {
    char arch[32];      /* general.architecture */
    float alpha;        /* adapter.lora.alpha; 0 when absent */
    int32_t n_pairs;    /* adapted projections */
    size_t pairs_bytes; /* n_pairs * sizeof(wisp_lora_pair) */
} wisp_lora_gguf_info;

/* Check the metadata and count the pairs. Fails with a clear message for a
 * file that is not a GGUF LoRA, or whose tensor names do not all end in
 * .lora_a/.lora_b. */
wisp_status wisp_lora_gguf_plan(const wisp_gguf *g, wisp_lora_gguf_info *info, wisp_error *err);

/* Fill `pairs` (room for `cap`, at least info.n_pairs) sorted by (layer,
 * proj) and describe them in `out`. Every tensor must be named
 * `blk.N.<attn_q|attn_k|attn_v|attn_output|ffn_gate|ffn_up|ffn_down>.weight
 * .lora_a|.lora_b`, each A with its B, 2-D, F32/F16/BF16 (A and B alike),
 * A.ne[1] == B.ne[0], finite. With `base` (may be NULL): the architecture is
 * the base's, the layer exists and the shapes are the base projection's.
 * scale = alpha / rank (1 when alpha is 0). */
wisp_status wisp_lora_gguf_read(const wisp_gguf *g, const wisp_hparams *base, wisp_lora_pair *pairs, size_t cap,
                                wisp_lora *out, wisp_error *err);

/* What wisp_lora_gguf_write decided. */
typedef struct wisp_lora_gguf_written {
    float alpha;      /* adapter.lora.alpha written */
    int32_t n_folded; /* pairs whose B was rescaled to make alpha / r exact */
} wisp_lora_gguf_written;

/* Write `l` (validated first) as a GGUF LoRA for a base of architecture
 * `arch` ("llama", "qwen2"); `name` (may be NULL) becomes general.name.
 *
 * llama.cpp applies s = alpha / r with one alpha per file and r = B.ne[0]
 * per pair, while a wisp adapter has a scale per pair (rsLoRA's alpha /
 * sqrt(r), per-pair alphas from PEFT's alpha_pattern, mixed ranks). So the
 * writer picks the file alpha A: the pairs' own alpha when A / r already
 * equals every scale, else scale * r of the first pair (nudged by an ulp if
 * float division misses), else 0 when every scale is 1. Pairs for which A / r
 * still differs from their scale get B multiplied by scale / (A / r) (in
 * double, rounded once to B's type), so s * B' = scale * B and llama.cpp
 * computes what wisp computes; their B bytes then differ from the source.
 * The adapter's nominal alpha and rsLoRA flag are kept under `wisp.lora.*`
 * (llama.cpp ignores them) so reading back restores them for PEFT export.
 * Tensors appear in pair order, A then B. */
wisp_status wisp_lora_gguf_write(const wisp_lora *l, const char *arch, const char *name, wisp_sink *sink,
                                 wisp_lora_gguf_written *written, wisp_error *err);

#endif
