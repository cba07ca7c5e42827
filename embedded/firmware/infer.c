/* infer: a greedy continuation of a prompt by the model linked into flash,
 * streamed to the host through semihosting, exactly as
 *     wisp run -m MODEL -p PROMPT --temp 0 -n N --ctx C
 * prints it (the test compares the two byte for byte).
 *
 * Memory: the GGUF is parsed where it lies in flash; the arena is one static
 * buffer of WISP_ARENA_BYTES, planned on the host by `wisp plan --c-header`
 * (infer_plan.h) for the same model and settings; nothing allocates.
 *
 * With a prompt- or prefix-tuning adapter (built with EMB_ADAPTER=DIR, a PEFT
 * folder): its two files are linked into flash too, and the header, made by
 * `wisp plan --c-header --lora DIR`, adds two static blocks of the exact
 * sizes planned for them (wisp_prompt_read's parse, and the rows in the
 * engine's order). The adapter's virtual tokens (or its keys and values)
 * take the context's first positions, as
 *     wisp run -m MODEL --lora DIR -p PROMPT --temp 0 -n N --ctx C
 * puts them. The closing line reports what this target plans for each block.
 *
 * Command line (QEMU -append): `-n N` tokens to generate (default
 * FW_N_PREDICT). Exit status: 0 done, 1 engine error, 2 bad arguments. */
#include <string.h>

#include "fw.h"
#include "infer_plan.h"
#include "peft_prompt.h"
#include "planned_config.h"
#include "sampler.h"
#include "tokenizer.h"
#include "wisp.h"

#ifndef FW_PROMPT
#define FW_PROMPT "Once upon a time"
#endif
#ifndef FW_N_PREDICT
#define FW_N_PREDICT 200
#endif
#ifndef FW_NAME
#define FW_NAME "infer"
#endif

extern const uint8_t wisp_model_start[], wisp_model_end[];

static uint8_t arena[WISP_ARENA_BYTES] __attribute__((aligned(16)));
static int32_t tokens[WISP_PLAN_N_CTX];

#ifdef WISP_PLAN_ADAPTER_VIRTUAL_TOKENS
#ifndef FW_ADAPTER_SHRINK
#define FW_ADAPTER_SHRINK 0 /* the test builds it with 1: one byte less than planned must fail */
#endif
extern const uint8_t wisp_adapter_config_start[], wisp_adapter_config_end[];
extern const uint8_t wisp_adapter_tensors_start[], wisp_adapter_tensors_end[];
static uint8_t adapter_index[WISP_PLAN_ADAPTER_INDEX_BYTES - FW_ADAPTER_SHRINK] __attribute__((aligned(16)));
static float adapter_rows[WISP_PLAN_ADAPTER_ROWS_BYTES / sizeof(float)] __attribute__((aligned(16)));
static size_t adapter_index_plan;

/* Read the adapter in flash into the static blocks and put it in the
 * context's first positions. */
static wisp_status adapter_prime(wisp_ctx *ctx, wisp_error *err) {
    const char *cfg = (const char *)wisp_adapter_config_start;
    size_t cfg_len = (size_t)(wisp_adapter_config_end - wisp_adapter_config_start);
    const void *st = wisp_adapter_tensors_start;
    size_t st_len = (size_t)(wisp_adapter_tensors_end - wisp_adapter_tensors_start);
    const wisp_hparams *hp = wisp_ctx_hparams(ctx);
    wisp_prompt_adapter a;
    wisp_status s = wisp_prompt_index_bytes(cfg, cfg_len, st, st_len, &adapter_index_plan, err);
    if (!s) s = wisp_prompt_read(cfg, cfg_len, st, st_len, hp, adapter_index, sizeof adapter_index, &a, err);
    if (s) return s;
    size_t n = (size_t)a.n_virtual * wisp_prompt_width(&a);
    if (a.n_virtual != WISP_PLAN_ADAPTER_VIRTUAL_TOKENS || a.prefix != WISP_PLAN_ADAPTER_PREFIX ||
        n * sizeof(float) != sizeof adapter_rows)
        return wisp_fail(err, WISP_ERR_ARG, "the adapter in flash is not the one the header was planned for");
    for (size_t i = 0; i < n; i++) adapter_rows[i] = wisp_prompt_engine_value(&a, hp->arch, i);
    return a.prefix ? wisp_eval_kv_prefix(ctx, adapter_rows, a.n_virtual, err)
                    : wisp_eval_embeddings(ctx, adapter_rows, a.n_virtual, err);
}
#endif

static int fail(const char *what, const wisp_error *err) {
    fw_eprint("%s: %s: %s\n", FW_NAME, what, err->message);
    return 1;
}

/* `-n N` from QEMU's command line; anything else is an error, said. */
static bool parse_args(int32_t *n_predict) {
    char *argv[8];
    int argc = fw_args(FW_NAME, argv, 8);
    if (argc < 0) return false;
    for (int i = 1; i < argc; i += 2) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc && fw_parse_i32(argv[i + 1], n_predict) && *n_predict >= 0)
            continue;
        fw_eprint("%s: bad argument '%s' (usage: -n TOKENS, a count >= 0)\n", FW_NAME, argv[i]);
        return false;
    }
    return true;
}

int main(void) {
    int32_t n_predict = FW_N_PREDICT;
    if (!parse_args(&n_predict)) return 2;

    wisp_error err = {0};
    wisp_gguf g;
    if (wisp_gguf_open(&g, wisp_model_start, (size_t)(wisp_model_end - wisp_model_start), &err))
        return fail("model in flash", &err);
    wisp_config cfg = fw_planned_config();
    wisp_memory_plan plan;
    if (wisp_plan(&g, &cfg, &plan, &err)) return fail("plan", &err);
    wisp_ctx *ctx;
    if (wisp_init(&ctx, &g, &cfg, arena, sizeof arena, &err)) return fail("init", &err);

#ifdef WISP_PLAN_ADAPTER_VIRTUAL_TOKENS
    if (adapter_prime(ctx, &err)) return fail(WISP_PLAN_ADAPTER_PREFIX ? "prefix adapter" : "prompt adapter", &err);
    const int32_t n_virtual = WISP_PLAN_ADAPTER_VIRTUAL_TOKENS;
#else
    const int32_t n_virtual = 0;
#endif
    const char *prompt = FW_PROMPT;
    size_t n_prompt = 0;
    if (wisp_tokenize_text(ctx, prompt, strlen(prompt), WISP_TOKENIZE_ADD_BOS, tokens, WISP_PLAN_N_CTX, &n_prompt,
                           &err))
        return fail("prompt", &err);
    fw_put(prompt, strlen(prompt));

    wisp_sampler_params sp = wisp_sampler_defaults();
    sp.temperature = 0.0f; /* greedy */
    wisp_sampler sampler;
    wisp_sampler_init(&sampler, &sp);
    fw_mark(); /* start of prefill */
    wisp_status st = wisp_eval(ctx, tokens, (int32_t)n_prompt, &err);
    fw_mark(); /* end of prefill */

    const wisp_tokenizer *tok = wisp_ctx_tokenizer(ctx);
    int32_t n_gen = 0, n_tok = (int32_t)n_prompt;
    bool context_full = false;
    char piece[64];
    while (!st && n_gen < n_predict) {
        int32_t next = wisp_sample(ctx, &sampler, tokens, (size_t)n_tok);
        if (next < 0 || wisp_tokenizer_is_eog(tok, next)) break;
        size_t len = wisp_token_piece(tok, next, piece, sizeof piece);
        fw_put(piece, len < sizeof piece ? len : sizeof piece);
        n_gen++;
        if (n_virtual + n_tok >= WISP_PLAN_N_CTX) {
            context_full = true;
            break;
        }
        tokens[n_tok++] = next;
        if (n_gen == n_predict) break;
        st = wisp_eval(ctx, &next, 1, &err);
        fw_mark(); /* one generated token */
    }
    fw_put("\n", 1);
    if (st) return fail("eval", &err);
    if (context_full) fw_eprint("%s: stopped: the context of %d tokens is full\n", FW_NAME, WISP_PLAN_N_CTX);
#ifdef WISP_PLAN_ADAPTER_VIRTUAL_TOKENS
    fw_eprint("[%s: %s adapter, %d virtual positions, index %u (plan %u), rows %u bytes]\n", FW_NAME,
              WISP_PLAN_ADAPTER_PREFIX ? "prefix" : "prompt", (int)n_virtual, (unsigned)sizeof adapter_index,
              (unsigned)adapter_index_plan, (unsigned)sizeof adapter_rows);
#endif
    fw_eprint("[%s: prompt %d tokens, generated %d tokens, kernels %s, ctx %d, arena %u bytes (this target's plan: "
              "%u), stack %u of %u bytes]\n",
              FW_NAME, (int)n_prompt, (int)n_gen, wisp_ctx_kernels_name(ctx), WISP_PLAN_N_CTX,
              (unsigned)sizeof arena, (unsigned)plan.total, (unsigned)fw_stack_used(), (unsigned)fw_stack_reserved());
    return 0;
}
