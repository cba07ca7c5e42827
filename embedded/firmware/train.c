/* train: LoRA fine-tuning on a microcontroller. A short text linked into
 * flash is packed into training windows exactly as `wisp finetune` packs a
 * text file; a few optimizer steps run on the frozen base model (also in
 * flash, read in place), printing the loss of each step; the adapter is then
 * written to the host through semihosting as a GGUF LoRA file that
 * `wisp run --lora` loads. The test runs
 *     wisp finetune -m MODEL --data TEXT --ctx S --batch B --rank R --targets ...
 *         --steps N --lr LR --schedule constant --warmup 0 --checkpointing ...
 * with the same settings and compares the two adapters.
 *
 * Memory: the arena (WISP_ARENA_BYTES, from `wisp plan --train ... --c-header`
 * in train_plan.h) holds the LoRA weights, gradients, AdamW moments, the
 * checkpointed activations and the backward scratch; the data pipeline's
 * arrays come from a static pool of FW_DATA_POOL_BYTES, checked against
 * wisp_data_plan at start. Nothing allocates.
 *
 * Command line (QEMU -append): `-o PATH` where the adapter goes (default
 * FW_ADAPTER_PATH; written to PATH.tmp, then renamed), `-n STEPS`.
 * Exit status: 0 done, 1 engine or host I/O error, 2 bad arguments. */
#include <string.h>

#include "fw.h"
#include "lora_gguf.h"
#include "train_data.h"
#include "train_plan.h"
#include "planned_config.h"
#include "wisp.h"

#ifndef FW_NAME
#define FW_NAME "train"
#endif
#ifndef FW_TRAIN_STEPS
#define FW_TRAIN_STEPS 12
#endif
#ifndef FW_TRAIN_LR
#define FW_TRAIN_LR 1e-2f
#endif
#ifndef FW_TRAIN_SEED
#define FW_TRAIN_SEED 42
#endif
#ifndef FW_TRAIN_CLIP
#define FW_TRAIN_CLIP 1.0f
#endif
#ifndef FW_DATA_POOL_BYTES
#define FW_DATA_POOL_BYTES (32 * 1024)
#endif
#ifndef FW_PIECE_BYTES
#define FW_PIECE_BYTES 256 /* text tokenized at once: sizes the tokenizer scratch */
#endif
#ifndef FW_ADAPTER_PATH
#define FW_ADAPTER_PATH "adapter.gguf"
#endif

#if WISP_PLAN_TRAIN_SEQ_LEN < 1
#error "generate train_plan.h with `wisp plan -t 1 --train ... --c-header`"
#endif

#define WINDOW (WISP_PLAN_TRAIN_SEQ_LEN + 1)
#define BATCH WISP_PLAN_TRAIN_MICRO_BATCH

extern const uint8_t wisp_model_start[], wisp_model_end[];
extern const char wisp_text_start[], wisp_text_end[];

static uint8_t arena[WISP_ARENA_BYTES] __attribute__((aligned(16)));
static uint8_t data_pool[FW_DATA_POOL_BYTES] __attribute__((aligned(16)));
static int32_t batch_ids[BATCH * WINDOW];
static uint8_t batch_mask[BATCH * WINDOW];

static int fail(const char *what, const wisp_error *err) {
    fw_eprint("%s: %s: %s\n", FW_NAME, what, err->message);
    return 1;
}

typedef struct settings {
    const char *out;
    int32_t steps;
} settings;

/* `-o PATH` and `-n STEPS` from QEMU's command line; anything else is an
 * error, said. */
static bool parse_args(settings *s) {
    char *argv[8];
    int argc = fw_args(FW_NAME, argv, 8);
    if (argc < 0) return false;
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "-o") == 0 && v) s->out = v;
        else if (strcmp(argv[i], "-n") == 0 && v && fw_parse_i32(v, &s->steps) && s->steps > 0) continue;
        else {
            fw_eprint("%s: bad argument '%s' (usage: [-o ADAPTER.gguf] [-n STEPS > 0])\n", FW_NAME, argv[i]);
            return false;
        }
    }
    return true;
}

/* The plan's shapes, and the hyperparameters as `wisp finetune` sets them
 * from its options. */
static wisp_config training_config(int32_t steps) {
    wisp_config cfg = fw_planned_config();
    wisp_train_config *t = &cfg.train;
    t->seed = FW_TRAIN_SEED;
    t->lr = FW_TRAIN_LR;
    t->schedule = WISP_SCHEDULE_CONSTANT;
    t->total_steps = steps;
    t->clip_norm = FW_TRAIN_CLIP;
    return cfg;
}

/* The data pipeline's arrays, carved from the static pool in the sizes
 * wisp_data_plan asks for. */
typedef struct pool {
    size_t used;
} pool;

static void *take(pool *p, size_t bytes) {
    size_t at = (p->used + 15) & ~(size_t)15;
    if (at > sizeof data_pool || bytes > sizeof data_pool - at) return NULL;
    p->used = at + bytes;
    return data_pool + at;
}

static wisp_status setup_data(wisp_train_data *d, const wisp_tokenizer *tok, wisp_error *err) {
    const char *text = wisp_text_start;
    size_t n = (size_t)(wisp_text_end - wisp_text_start);
    wisp_data_options o = {WISP_DATA_TEXT, WISP_DOCS_FILE, WISP_PLAN_TRAIN_SEQ_LEN, 0.0f, FW_TRAIN_SEED, FW_PIECE_BYTES, false};
    wisp_data_plan_info info;
    wisp_status st = wisp_data_plan(tok, text, n, &o, &info, err);
    if (st) return st;
    pool p = {0};
    wisp_data_memory m = {0};
    m.cap_tokens = info.max_tokens;
    m.cap_examples = info.max_examples;
    m.tokens = take(&p, sizeof(int32_t) * (info.max_tokens + 1));
    m.examples = take(&p, sizeof(wisp_data_example) * (info.max_examples + 1));
    m.order = take(&p, sizeof(int32_t) * (info.max_examples + 1));
    m.tok_scratch_bytes = info.tok_scratch;
    m.tok_scratch = take(&p, info.tok_scratch + 1);
    if (!m.tokens || !m.examples || !m.order || !m.tok_scratch)
        return wisp_fail(err, WISP_ERR_CAPACITY,
                         "the data needs %zu tokens, %zu windows and %zu bytes of tokenizer scratch: more than the "
                         "%u-byte pool (raise FW_DATA_POOL_BYTES)",
                         info.max_tokens, info.max_examples, info.tok_scratch, (unsigned)sizeof data_pool);
    st = wisp_data_build(d, tok, text, n, &o, &m, err);
    if (!st) fw_eprint("%s: %zu text bytes -> %d windows of %d tokens (data pool %zu of %u bytes)\n", FW_NAME, n,
                       wisp_data_count(d, WISP_SPLIT_TRAIN), WISP_PLAN_TRAIN_SEQ_LEN, p.used,
                       (unsigned)sizeof data_pool);
    return st;
}

/* Written to PATH.tmp and renamed, so a failed run never leaves a partial
 * adapter under the real name. */
static wisp_status write_adapter(const wisp_ctx *ctx, const char *path, wisp_error *err) {
    char tmp[256];
    if (wisp_format(tmp, sizeof tmp, "%s.tmp", path) + 1 >= sizeof tmp)
        return wisp_fail(err, WISP_ERR_ARG, "adapter path too long: %s", path);
    int h = fw_open(tmp, FW_OPEN_WB);
    if (h < 0) return wisp_fail(err, WISP_ERR_IO, "cannot create %s on the host", tmp);
    wisp_sink sink = fw_file_sink(&h);
    wisp_lora_gguf_written w;
    wisp_status st = wisp_lora_gguf_write(wisp_train_lora(ctx), wisp_arch_name(wisp_ctx_hparams(ctx)->arch), FW_NAME,
                                          &sink, &w, err);
    bool closed = fw_close(h);
    if (!st && !closed) st = wisp_fail(err, WISP_ERR_IO, "closing %s failed", tmp);
    if (!st && !fw_rename(tmp, path)) st = wisp_fail(err, WISP_ERR_IO, "cannot rename %s to %s", tmp, path);
    if (st) fw_remove(tmp);
    else fw_eprint("%s: wrote %s (%llu bytes)\n", FW_NAME, path, (unsigned long long)sink.written);
    return st;
}

int main(void) {
    settings set = {FW_ADAPTER_PATH, FW_TRAIN_STEPS};
    if (!parse_args(&set)) return 2;

    wisp_error err = {0};
    wisp_gguf g;
    if (wisp_gguf_open(&g, wisp_model_start, (size_t)(wisp_model_end - wisp_model_start), &err))
        return fail("model in flash", &err);
    wisp_config cfg = training_config(set.steps);
    wisp_memory_plan plan;
    if (wisp_plan(&g, &cfg, &plan, &err)) return fail("plan", &err);
    wisp_ctx *ctx;
    if (wisp_init(&ctx, &g, &cfg, arena, sizeof arena, &err)) return fail("init", &err);
    static wisp_train_data data;
    if (setup_data(&data, wisp_ctx_tokenizer(ctx), &err)) return fail("training text", &err);

    fw_mark(); /* start of training */
    for (int32_t step = 0; step < set.steps; step++) {
        wisp_data_next(&data, BATCH, batch_ids, batch_mask);
        double loss;
        int32_t scored;
        if (wisp_train_micro_step(ctx, batch_ids, batch_mask, BATCH, &loss, &scored, &err)) return fail("step", &err);
        wisp_train_step_info info;
        if (wisp_train_optimizer_step(ctx, &info, &err)) return fail("optimizer", &err);
        fw_print("step %d loss %.6f lr %g grad_norm %g%s\n", (int)info.step, loss, (double)info.lr,
                 (double)info.grad_norm, info.skipped ? " (skipped)" : "");
        fw_mark(); /* one optimizer step */
    }
    if (write_adapter(ctx, set.out, &err)) return fail("adapter", &err);
    fw_eprint("[%s: %d steps of %d x %d tokens, rank %d, kernels %s, arena %u bytes (this target's plan: %u), "
              "stack %u of %u bytes]\n",
              FW_NAME, (int)set.steps, BATCH, WISP_PLAN_TRAIN_SEQ_LEN, WISP_PLAN_TRAIN_RANK,
              wisp_ctx_kernels_name(ctx), (unsigned)sizeof arena, (unsigned)plan.total, (unsigned)fw_stack_used(),
              (unsigned)fw_stack_reserved());
    return 0;
}
