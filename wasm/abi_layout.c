/* The layout of the records JS and the C ABI exchange (abi_structs.h), as a
 * table JS reads at startup: web/src/engine.mjs then writes and reads fields
 * by name at these offsets, and refuses to start when a field it uses is
 * missing or has another type. Offsets and sizes come from offsetof and
 * sizeof, so the table cannot drift from the structs; names are the C member
 * names (stringified), so they cannot drift either.
 *
 * No Emscripten here: tests/unit/test_abi_layout.c compiles this file
 * natively and checks the table (every byte of every record covered once,
 * types matching sizes). */
#include <stddef.h>

#include "abi_export.h"
#include "abi_structs.h"

enum { R_CONFIG, R_PLAN, R_TRAIN, R_TRAIN_STEP, R_TRAIN_DATA, R_STRINGS, R_COUNT };

static const struct {
    const char *name;
    int32_t size;
} records[R_COUNT] = {
    [R_CONFIG] = {"config", (int32_t)sizeof(ww_config_in)},
    [R_PLAN] = {"plan", (int32_t)sizeof(ww_plan_figures)},
    [R_TRAIN] = {"train", (int32_t)sizeof(ww_train_in)},
    [R_TRAIN_STEP] = {"train_step", (int32_t)sizeof(ww_train_step_out)},
    [R_TRAIN_DATA] = {"train_data", (int32_t)sizeof(ww_train_data_out)},
    [R_STRINGS] = {"strings", (int32_t)sizeof(ww_strings)},
};

typedef struct field {
    int32_t record;
    const char *name, *type;
    int32_t offset, size, elements;
} field;

/* One row per member: its record, C type (struct), member, element type and
 * the element type's name for JS. */
#define MEMBER_SIZE(T, member) ((int32_t)sizeof(((T *)0)->member))
#define FIELD(rec, T, member, elem, tag)                                                                \
    {rec, #member, tag, (int32_t)offsetof(T, member), MEMBER_SIZE(T, member),                           \
     MEMBER_SIZE(T, member) / (int32_t)sizeof(elem)}
#define CONFIG(m) FIELD(R_CONFIG, ww_config_in, m, int32_t, "i32")
#define PLAN(m) FIELD(R_PLAN, ww_plan_figures, m, double, "f64")
#define TRAIN_I(m) FIELD(R_TRAIN, ww_train_in, m, int32_t, "i32")
#define TRAIN_U(m) FIELD(R_TRAIN, ww_train_in, m, uint32_t, "u32")
#define TRAIN_F(m) FIELD(R_TRAIN, ww_train_in, m, float, "f32")
#define STEP(m) FIELD(R_TRAIN_STEP, ww_train_step_out, m, double, "f64")
#define DATA(m) FIELD(R_TRAIN_DATA, ww_train_data_out, m, double, "f64")
#define STRING(m) FIELD(R_STRINGS, ww_strings, m, char, "char")

static const field fields[] = {
    CONFIG(n_ctx), CONFIG(n_batch), CONFIG(kv_f32), CONFIG(max_text_bytes), CONFIG(max_adapters),
    CONFIG(max_lora_rank), CONFIG(threads),

    PLAN(total), PLAN(part), PLAN(weights), PLAN(file_bytes), PLAN(n_ctx), PLAN(n_batch), PLAN(kv_f32),
    PLAN(max_text_bytes), PLAN(max_adapters), PLAN(max_lora_rank), PLAN(n_vocab), PLAN(dim), PLAN(n_layers),
    PLAN(n_heads), PLAN(n_kv_heads), PLAN(head_dim), PLAN(ffn_dim), PLAN(ctx_train),

    TRAIN_I(seq_len), TRAIN_I(micro_batch), TRAIN_I(rank), TRAIN_I(steps), TRAIN_U(seed_lo), TRAIN_U(seed_hi),
    TRAIN_I(schedule), TRAIN_I(warmup), TRAIN_I(jsonl), TRAIN_I(blank_line_docs), TRAIN_I(threads), TRAIN_F(alpha),
    TRAIN_F(lr), TRAIN_F(clip), TRAIN_I(packing), TRAIN_I(method), TRAIN_F(dpo_beta), TRAIN_F(label_smoothing),
    TRAIN_I(dpo_loss), TRAIN_I(num_virtual_tokens),

    STEP(loss), STEP(scored), STEP(lr), STEP(grad_norm), STEP(step), STEP(epoch), STEP(rewards_chosen),
    STEP(rewards_rejected), STEP(rewards_accuracies), STEP(rewards_margins),

    DATA(records), DATA(windows), DATA(truncated), DATA(unscored), DATA(scored),

    STRING(key), STRING(second_key), STRING(meta),
};

enum { FIELD_COUNT = (int32_t)(sizeof fields / sizeof fields[0]) };

static int in_range(int32_t i, int32_t n) { return i >= 0 && i < n; }

API int32_t ww_record_count(void) { return R_COUNT; }
API const char *ww_record_name(int32_t r) { return in_range(r, R_COUNT) ? records[r].name : ""; }
API int32_t ww_record_size(int32_t r) { return in_range(r, R_COUNT) ? records[r].size : -1; }
API int32_t ww_field_count(void) { return FIELD_COUNT; }
API int32_t ww_field_record(int32_t i) { return in_range(i, FIELD_COUNT) ? fields[i].record : -1; }
API const char *ww_field_name(int32_t i) { return in_range(i, FIELD_COUNT) ? fields[i].name : ""; }
API const char *ww_field_type(int32_t i) { return in_range(i, FIELD_COUNT) ? fields[i].type : ""; }
API int32_t ww_field_offset(int32_t i) { return in_range(i, FIELD_COUNT) ? fields[i].offset : -1; }
API int32_t ww_field_size(int32_t i) { return in_range(i, FIELD_COUNT) ? fields[i].size : -1; }
API int32_t ww_field_elements(int32_t i) { return in_range(i, FIELD_COUNT) ? fields[i].elements : -1; }

/* The name of plan part i (the plan record's part[i]). */
API const char *ww_part_name(int32_t i) { return in_range(i, WISP_PART_COUNT) ? wisp_part_name(i) : ""; }
