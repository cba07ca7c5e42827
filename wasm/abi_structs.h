/* The records JS and the C ABI exchange (wasm/abi*.c <-> web/src/engine.mjs),
 * as structs with named fields. Their layout is not agreed by convention:
 * abi_layout.c exports a table of every field (name, offset, type, count)
 * built with offsetof, and engine.mjs reads and writes fields by name at the
 * offsets that table gives. It needs nothing of Emscripten, so a native unit
 * test (tests/unit/test_abi_layout.c) checks the same table.
 *
 * Field types are the four JS has typed views for; no pointers cross here
 * (a pointer's size differs between wasm32 and a native test). */
#ifndef WISP_WASM_ABI_STRUCTS_H
#define WISP_WASM_ABI_STRUCTS_H

#include <stdint.h>

#include "wisp.h"

/* An engine configuration (ww_plan, ww_init). */
typedef struct ww_config_in {
    int32_t n_ctx, n_batch;
    int32_t kv_f32; /* 1: f32 keys/values, 0: f16 */
    int32_t max_text_bytes, max_adapters, max_lora_rank;
    int32_t threads;
} ww_config_in;

/* The figures of a memory plan (ww_plan, ww_plan_of, ww_train_plan): bytes
 * and counts as doubles, exact up to 2^53. part[] is indexed by wisp_part
 * (names: ww_part_name). */
typedef struct ww_plan_figures {
    double total;
    double part[WISP_PART_COUNT];
    double weights, file_bytes;
    double n_ctx, n_batch, kv_f32, max_text_bytes, max_adapters, max_lora_rank;
    double n_vocab, dim, n_layers, n_heads, n_kv_heads, head_dim, ffn_dim, ctx_train;
} ww_plan_figures;

/* Fine-tuning settings (ww_train_plan, ww_train_begin). */
typedef struct ww_train_in {
    int32_t seq_len, micro_batch, rank, steps;
    uint32_t seed_lo, seed_hi;
    int32_t schedule, warmup;
    int32_t jsonl;          /* 1: the data is JSONL records, 0: plain text */
    int32_t blank_line_docs; /* 1: documents end at blank lines, 0: one per file */
    int32_t threads;
    float alpha, lr, clip;
    int32_t packing;        /* 1: JSONL records packed into shared windows (adapters/train_data.h) */
    int32_t method;         /* ww_train_method */
    float dpo_beta;         /* DPO: trl's beta (0: 0.1) */
    float label_smoothing;  /* DPO sigmoid: cDPO's label smoothing in [0, 0.5) */
    int32_t dpo_loss;       /* DPO: wisp_dpo_loss_kind (sigmoid, ipo) */
    int32_t num_virtual_tokens; /* prompt tuning: learned embeddings before every input (prefix: key/value positions) */
} ww_train_in;

/* What a session trains (`wisp finetune --method`, cli/finetune_settings.c).
 * DPO trains a LoRA adapter on JSONL pairs {prompt, chosen, rejected}; its
 * micro_batch counts pairs (two sequences each), as --batch does. */
typedef enum ww_train_method {
    WW_METHOD_LORA, WW_METHOD_RSLORA, WW_METHOD_DORA, WW_METHOD_DPO, WW_METHOD_PROMPT, WW_METHOD_PREFIX
} ww_train_method;

/* What one optimizer step reports (ww_train_step). */
typedef struct ww_train_step_out {
    double loss, scored, lr, grad_norm, step, epoch;
    /* DPO: trl's rewards/chosen, rewards/rejected, rewards/accuracies and
     * rewards/margins, means over the step's pairs; NaN for other methods */
    double rewards_chosen, rewards_rejected, rewards_accuracies, rewards_margins;
} ww_train_step_out;

/* What the training data became (ww_train_data_report): the same counts
 * `wisp finetune` prints. */
typedef struct ww_train_data_out {
    double records, windows, truncated, unscored, scored;
} ww_train_data_out;

/* Short NUL-terminated strings JS passes (metadata keys, kernel names,
 * adapter names) and metadata text read back (ww_meta_str). */
enum { WW_KEY_BYTES = 512, WW_META_BYTES = 1024 };
typedef struct ww_strings {
    char key[WW_KEY_BYTES];
    char second_key[WW_KEY_BYTES]; /* a second string of the same call */
    char meta[WW_META_BYTES];
} ww_strings;

/* ---- the layout table (abi_layout.c) ---- */

/* Records in the table, and their fields in record order. Types: "i32",
 * "u32", "f32", "f64", "char"; count > 1 for arrays. */
int32_t ww_record_count(void);
const char *ww_record_name(int32_t r);
int32_t ww_record_size(int32_t r);
int32_t ww_field_count(void);
int32_t ww_field_record(int32_t i);
const char *ww_field_name(int32_t i);
const char *ww_field_type(int32_t i);
int32_t ww_field_offset(int32_t i);
int32_t ww_field_size(int32_t i); /* bytes of the whole field: elements x the type's size */
int32_t ww_field_elements(int32_t i);
const char *ww_part_name(int32_t i);

#endif
