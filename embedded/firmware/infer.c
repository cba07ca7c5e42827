/* infer: a greedy continuation of a prompt by the model linked into flash,
 * streamed to the host through semihosting, exactly as
 *     wisp run -m MODEL -p PROMPT --temp 0 -n N --ctx C
 * prints it (the test compares the two byte for byte).
 *
 * Memory: the GGUF is parsed where it lies in flash; the arena is one static
 * buffer of WISP_ARENA_BYTES, planned on the host by `wisp plan --c-header`
 * (infer_plan.h) for the same model and settings; nothing allocates.
 *
 * Command line (QEMU -append): `-n N` tokens to generate (default
 * FW_N_PREDICT). Exit status: 0 done, 1 engine error, 2 bad arguments. */
#include <string.h>

#include "fw.h"
#include "infer_plan.h"
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
        if (n_tok >= WISP_PLAN_N_CTX) {
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
    fw_eprint("[%s: prompt %d tokens, generated %d tokens, kernels %s, ctx %d, arena %u bytes (this target's plan: "
              "%u), stack %u of %u bytes]\n",
              FW_NAME, (int)n_prompt, (int)n_gen, wisp_ctx_kernels_name(ctx), WISP_PLAN_N_CTX,
              (unsigned)sizeof arena, (unsigned)plan.total, (unsigned)fw_stack_used(), (unsigned)fw_stack_reserved());
    return 0;
}
