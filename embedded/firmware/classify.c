/* classify: the model linked into flash answers a prompt with one label of a
 * grammar (by default ` positive`, ` negative` or ` neutral`), exactly as
 *     wisp run -m MODEL -p PROMPT --grammar GRAMMAR --temp 0 --ctx C
 * prints it (the test compares the two byte for byte).
 *
 * Memory: four static blocks, each the exact size `wisp plan --c-header
 * --grammar GRAMMAR --grammar-limits ...` planned on the host
 * (classify_plan.h): the context arena, the vocabulary's byte trie, the
 * compiled grammar, and the guide (matcher stacks, token mask, walk tables)
 * with limits small enough for an MCU. Nothing allocates. The closing line
 * reports what this target itself plans for each block, so the test can
 * check the host's plan covers it.
 *
 * Exit status: 0 a label was produced, 1 engine or grammar error. */
#include <string.h>

#include "classify_plan.h"
#include "fw.h"
#include "guide.h"
#include "planned_config.h"
#include "sampler.h"
#include "wisp.h"

#ifndef FW_PROMPT
#define FW_PROMPT "The movie was great. Sentiment:"
#endif
#ifndef FW_GRAMMAR
#define FW_GRAMMAR "root ::= \" positive\" | \" negative\" | \" neutral\""
#endif
#ifndef FW_N_PREDICT
#define FW_N_PREDICT 16
#endif
#ifndef FW_NAME
#define FW_NAME "classify"
#endif

extern const uint8_t wisp_model_start[], wisp_model_end[];

static uint8_t arena[WISP_ARENA_BYTES] __attribute__((aligned(16)));
static uint8_t trie_mem[WISP_PLAN_TOKEN_TRIE_BYTES] __attribute__((aligned(16)));
static uint8_t grammar_mem[WISP_PLAN_GRAMMAR_BYTES] __attribute__((aligned(16)));
static uint8_t guide_mem[WISP_PLAN_GUIDE_BYTES] __attribute__((aligned(16)));
static int32_t tokens[WISP_PLAN_N_CTX];
static wisp_token_trie trie;
static wisp_guide guide;

static int fail(const char *what, const wisp_error *err) {
    fw_eprint("%s: %s: %s\n", FW_NAME, what, err->message);
    return 1;
}

int main(void) {
    wisp_error err = {0};
    wisp_gguf g;
    if (wisp_gguf_open(&g, wisp_model_start, (size_t)(wisp_model_end - wisp_model_start), &err))
        return fail("model in flash", &err);
    wisp_config cfg = fw_planned_config();
    wisp_memory_plan plan;
    if (wisp_plan(&g, &cfg, &plan, &err)) return fail("plan", &err);
    wisp_ctx *ctx;
    if (wisp_init(&ctx, &g, &cfg, arena, sizeof arena, &err)) return fail("init", &err);
    const wisp_tokenizer *tok = wisp_ctx_tokenizer(ctx);

    /* the trie and grammar first: the guide's plan depends on both */
    const char *gbnf = FW_GRAMMAR;
    const wisp_matcher_limits lim = WISP_PLAN_GRAMMAR_LIMITS;
    size_t trie_plan = 0, grammar_plan = 0;
    wisp_arena a;
    const wisp_grammar *grammar;
    if (wisp_token_trie_plan(tok, &trie_plan, &err)) return fail("trie plan", &err);
    wisp_arena_init(&a, trie_mem, sizeof trie_mem);
    if (wisp_token_trie_init(&trie, tok, &a, &err)) return fail("trie", &err);
    if (wisp_grammar_plan(gbnf, strlen(gbnf), &grammar_plan, &err)) return fail("grammar plan", &err);
    wisp_arena_init(&a, grammar_mem, sizeof grammar_mem);
    if (wisp_grammar_compile(gbnf, strlen(gbnf), &a, &grammar, &err)) return fail("grammar", &err);
    size_t guide_plan = wisp_guide_plan(&trie, grammar, &lim);
    wisp_arena_init(&a, guide_mem, sizeof guide_mem);
    if (wisp_guide_init(&guide, &trie, grammar, &lim, &a, &err)) return fail("guide", &err);

    const char *prompt = FW_PROMPT;
    size_t n_prompt = 0;
    if (wisp_tokenize_text(ctx, prompt, strlen(prompt), WISP_TOKENIZE_ADD_BOS, tokens, WISP_PLAN_N_CTX, &n_prompt,
                           &err))
        return fail("prompt", &err);
    fw_put(prompt, strlen(prompt));

    wisp_sampler_params sp = wisp_sampler_defaults();
    sp.temperature = 0.0f; /* greedy among the tokens the grammar allows */
    wisp_sampler sampler;
    wisp_sampler_init(&sampler, &sp);
    sampler.guide = &guide;
    wisp_status st = wisp_eval(ctx, tokens, (int32_t)n_prompt, &err);

    int32_t n_gen = 0, n_tok = (int32_t)n_prompt;
    char piece[64];
    while (!st && n_gen < FW_N_PREDICT) {
        int32_t next = wisp_sample(ctx, &sampler, tokens, (size_t)n_tok);
        if (next < 0 && !wisp_guide_done(&guide)) return fail("grammar", &guide.error);
        if (next < 0 || wisp_tokenizer_is_eog(tok, next)) break;
        size_t len = wisp_token_piece(tok, next, piece, sizeof piece);
        fw_put(piece, len < sizeof piece ? len : sizeof piece);
        n_gen++;
        if (n_tok >= WISP_PLAN_N_CTX) break;
        tokens[n_tok++] = next;
        if (n_gen == FW_N_PREDICT) break;
        st = wisp_eval(ctx, &next, 1, &err);
    }
    fw_put("\n", 1);
    if (st) return fail("eval", &err);
    if (!wisp_guide_done(&guide)) {
        fw_eprint("%s: stopped before the grammar's end after %d tokens\n", FW_NAME, (int)n_gen);
        return 1;
    }
    fw_eprint("[%s: prompt %d tokens, generated %d tokens (%u forced, %u masks), arena %u (plan %u), "
              "trie %u (plan %u), grammar %u (plan %u), guide %u (plan %u) bytes, stack %u of %u bytes]\n",
              FW_NAME, (int)n_prompt, (int)n_gen, (unsigned)guide.n_forced,
              (unsigned)guide.n_masks, (unsigned)sizeof arena, (unsigned)plan.total,
              (unsigned)sizeof trie_mem, (unsigned)trie_plan, (unsigned)sizeof grammar_mem, (unsigned)grammar_plan,
              (unsigned)sizeof guide_mem, (unsigned)guide_plan, (unsigned)fw_stack_used(),
              (unsigned)fw_stack_reserved());
    return 0;
}
