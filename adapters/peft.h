/* PEFT LoRA adapters (Hugging Face): a folder with adapter_config.json and
 * adapter_model.safetensors. The platform reads the two files; this module
 * turns their bytes into a wisp_lora and a wisp_lora back into them.
 *
 * Import (tensors used in place, except the rows that must move), in two
 * steps so every byte is planned: first an index to parse the files into,
 * then the pair table and moved rows.
 *
 *     size_t index_bytes;
 *     wisp_peft_index_bytes(cfg, cfg_len, st, st_len, &index_bytes, &err);
 *     wisp_peft p;                                // parsed view + config facts + notes
 *     wisp_peft_open(&p, cfg, cfg_len, st, st_len, &base_hp, <index_bytes>, index_bytes, &err);
 *     wisp_lora lora;                             // p.lora_bytes: pairs and moved rows
 *     wisp_peft_read(&p, <p.lora_bytes>, p.lora_bytes, &lora, &err);
 *     // the index memory may be released now; the lora points into `st` and its own block
 *
 * Keys `base_model.model.model.layers.N.{self_attn,mlp}.<module>.lora_{A,B}
 * .weight` (also without the `base_model.model.` prefix) map to blk.N and
 * the GGUF projection (q_proj->attn_q ... down_proj->ffn_down). lora_A is
 * (r, in) and lora_B (out, r): wisp's orientation. For arch llama the rows of
 * lora_B of q_proj/k_proj are reordered from HF to GGUF order (see
 * lora_layout.h) into `mem`; everything else is used where it lies.
 * An architecture with fused tensors (phi3) has Hugging Face's fused modules
 * instead: qkv_proj (rows q, k, v) and gate_up_proj (rows gate, up); each of
 * their pairs becomes a pair per projection sharing the module's A, with its
 * rows of B (exact); the unfused names are refused on such a base.
 *
 * Config semantics honoured: r, lora_alpha, use_rslora, rank_pattern and
 * alpha_pattern (PEFT's rule: the first pattern P with the module name
 * matching `(.*\.)?P$` wins; patterns may use '.' but no other regex syntax),
 * target_modules and layers_to_transform (checked against the tensors).
 * DoRA (use_dora): each module's `lora_magnitude_vector` (PEFT's saved name,
 * the same from 0.9 to today's releases) is read into F32 in `mem`, its rows
 * in GGUF order, with room for the row norms the context fills on attach.
 * Refused with a clear error: modules_to_save, bias other than
 * "none", fan_in_fan_out, lora_bias, layer_replication, trainable tokens,
 * target_parameters, aLoRA invocation tokens, QALoRA, peft_type other than
 * LORA, and any tensor that is not a LoRA A/B of the seven projections.
 * Fields wisp does not know are reported in info.notes, never dropped
 * silently. */
#ifndef WISP_PEFT_H
#define WISP_PEFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "lora.h"
#include "model.h"
#include "safetensors.h"
#include "sink.h"
#include "status.h"

#define WISP_PEFT_MAX_NOTES 16
#define WISP_PEFT_NOTE_MAX 200

/* Messages for the user: unknown fields, inconsistencies that are harmless. */
typedef struct wisp_peft_notes {
    char text[WISP_PEFT_MAX_NOTES][WISP_PEFT_NOTE_MAX];
    int n;
    int dropped; /* notes beyond WISP_PEFT_MAX_NOTES */
} wisp_peft_notes;

typedef struct wisp_peft_info {
    int32_t r;               /* config r */
    double lora_alpha;       /* config lora_alpha */
    bool use_rslora;
    bool use_dora;           /* DoRA: every pair has a lora_magnitude_vector */
    char base_model[256];    /* base_model_name_or_path ("" when null) */
    char task_type[64];
    wisp_peft_notes notes;
} wisp_peft_info;

/* A parsed adapter: what wisp_peft_open learned, used by wisp_peft_read. */
typedef struct wisp_peft {
    wisp_json config;
    wisp_safetensors st;
    wisp_hparams base;
    wisp_peft_info info;
    int32_t n_pairs;
    size_t lora_bytes; /* the pair table plus q/k rows moved to GGUF order */
    /* config nodes consulted per pair (-1: absent or null) */
    int64_t rank_pattern, alpha_pattern, target_modules, layers_to_transform;
} wisp_peft;

/* Memory wisp_peft_open needs to parse the two files (JSON nodes of the
 * config and the safetensors index). */
wisp_status wisp_peft_index_bytes(const char *config, size_t config_len, const void *st, size_t st_len, size_t *bytes,
                                  wisp_error *err);

/* Parse and validate everything: config fields, tensor names, shapes,
 * dtypes, ranks against r/rank_pattern, pairs complete, shapes against
 * `base` (required: the q/k reordering needs its head counts). `config`, `st`
 * and `index` (8-byte aligned) must outlive `p`. */
wisp_status wisp_peft_open(wisp_peft *p, const char *config, size_t config_len, const void *st, size_t st_len,
                           const wisp_hparams *base, void *index, size_t index_bytes, wisp_error *err);

/* Fill the pair table (sorted by layer, proj) and move the q/k rows into
 * `mem` (8-byte aligned, p->lora_bytes). */
wisp_status wisp_peft_read(const wisp_peft *p, void *mem, size_t mem_bytes, wisp_lora *out, wisp_error *err);

/* ---- export ------------------------------------------------------------- */

/* adapter_config.json for `l` into buf (pretty JSON, NUL-terminated); *len
 * gets the length needed (call with cap 0 to size). r and lora_alpha are the
 * first pair's; pairs that differ get rank_pattern / alpha_pattern entries
 * keyed by their full module name, with alpha derived from the pair's scale
 * when its nominal alpha does not reproduce it. target_modules and
 * layers_to_transform describe exactly the adapted set. `base_model` (may be
 * NULL) becomes base_model_name_or_path. */
wisp_status wisp_peft_write_config(const wisp_lora *l, const wisp_hparams *base, const char *base_model, char *buf,
                                   size_t cap, size_t *len, wisp_error *err);

/* Scratch memory wisp_peft_write_safetensors needs for its header table. */
size_t wisp_peft_export_bytes(const wisp_lora *l);

/* adapter_model.safetensors for `l` through `sink`, tensors in their own
 * type, lora_B rows of q/k put back in HF order for arch llama. For a fused
 * architecture (phi3) the pairs of a fused module become one pair, exactly:
 * A stacked and B block-diagonal (rank = the sum), or, when the pairs share
 * one A (an imported PEFT pair), A once and B stacked; DoRA magnitudes are
 * concatenated in row order (all the module's projections must be adapted);
 * pairs of different scale or type in one module are refused. The config
 * names the same modules. */
wisp_status wisp_peft_write_safetensors(const wisp_lora *l, const wisp_hparams *base, void *scratch,
                                        size_t scratch_bytes, wisp_sink *sink, wisp_error *err);

/* The PEFT module name of a pair of an unfused architecture
 * ("model.layers.3.self_attn.q_proj"). */
void wisp_peft_module_name(int32_t layer, int proj, char *buf, size_t cap);

#endif
