/* wisp logits: the schema of the golden logits files (../shared/golden/logits), so any model
 * can be checked against a reference implementation; with a grammar, also the tokens it allows
 * after the prompt and the masked logits there (what a constrained sampler draws from). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "grammar_source.h"
#include "json_out.h"
#include "lora_attach.h"
#include "session.h"

#define GREEDY_TOKENS 32

static int32_t argmax(const float *v, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

static bool in_mask(const uint32_t *mask, int32_t id) { return (mask[id >> 5] >> (id & 31)) & 1u; }

/* The highest logit among the tokens the mask allows (the lowest id on ties, like argmax). */
static int32_t masked_argmax(const float *v, int32_t n, const wisp_guide *g) {
    int32_t best = -1;
    for (int32_t i = 0; i < n; i++)
        if (in_mask(g->mask, i) && (best < 0 || v[i] > v[best])) best = i;
    return best;
}

/* With a grammar: the grammar's mask for the next token (computed into g->mask); an
 * error when no token of the vocabulary may come next. */
static wisp_status next_mask(wisp_guide *g, wisp_error *err) {
    if (wisp_guide_mask(g, err)) return WISP_OK;
    return err->message[0] ? WISP_ERR_ARG : wisp_fail(err, WISP_ERR_ARG, "grammar: no token of the vocabulary can continue the text");
}

/* The part a grammar adds to a case: the tokens allowed right after the prompt and the
 * logits there with every other token masked (-inf, written null: JSON has no infinity). */
static void print_allowed(const uint32_t *mask, const float *row, int32_t n_vocab) {
    printf(",\n   \"allowed\": [");
    for (int32_t i = 0, k = 0; i < n_vocab; i++)
        if (in_mask(mask, i)) printf("%s%d", k++ ? ", " : "", i);
    printf("],\n   \"masked_logits\": ");
    fputc('[', stdout);
    for (int32_t i = 0; i < n_vocab; i++) {
        if (i) fputs(", ", stdout);
        if (in_mask(mask, i)) cli_json_float(stdout, row[i]);
        else fputs("null", stdout);
    }
    fputc(']', stdout);
}

/* Evaluate one prompt and print its case object. */
/* ad: a prompt-tuning adapter's virtual tokens lead every case; guide: NULL, or the grammar the
 * continuation follows (reset here) */
static wisp_status one_case(wisp_ctx *ctx, const char *prompt, bool first, const cli_adapters *ad, int32_t n_greedy,
                            wisp_guide *guide, wisp_error *err) {
    const wisp_hparams *hp = wisp_ctx_hparams(ctx);
    int32_t n_ctx = wisp_ctx_config(ctx)->n_ctx - ad->n_prompt, n_batch = wisp_ctx_config(ctx)->n_batch;
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)n_ctx), *greedy = malloc(sizeof(int32_t) * (size_t)n_greedy + 1);
    float *logits = NULL;
    uint32_t *first_mask = NULL; /* the grammar's mask right after the prompt */
    size_t n = 0;
    wisp_status st = tokens && greedy ? WISP_OK : wisp_fail(err, WISP_ERR_CAPACITY, "out of memory");
    if (!st) st = wisp_tokenize_text(ctx, prompt, strlen(prompt), WISP_TOKENIZE_ADD_BOS, tokens, (size_t)n_ctx, &n, err);
    if (!st && n + (size_t)n_greedy > (size_t)n_ctx)
        st = wisp_fail(err, WISP_ERR_CAPACITY, "prompt of %zu tokens plus %d greedy tokens exceeds --ctx %d", n,
                       n_greedy, n_ctx);
    if (!st && !(logits = malloc(sizeof(float) * n * (size_t)hp->n_vocab)))
        st = wisp_fail(err, WISP_ERR_CAPACITY, "out of memory");
    if (!st && !cli_adapters_rewind(ad, ctx))
        st = wisp_fail(err, WISP_ERR_ARG, "the prompt-tuning adapter could not be evaluated");
    for (size_t done = 0; !st && done < n;) {
        int32_t step = (int32_t)(n - done) < n_batch ? (int32_t)(n - done) : n_batch;
        st = wisp_eval(ctx, tokens + done, step, err);
        for (int32_t i = 0; !st && i < step; i++)
            memcpy(logits + (done + (size_t)i) * hp->n_vocab, wisp_logits(ctx, i), sizeof(float) * (size_t)hp->n_vocab);
        done += (size_t)step;
    }
    if (!st && guide) { /* the grammar starts after the prompt: its first mask is the one reported */
        st = wisp_guide_reset(guide, err);
        if (!st) st = next_mask(guide, err);
        size_t words = ((size_t)hp->n_vocab + 31) / 32;
        if (!st && !(first_mask = malloc(words * 4))) st = wisp_fail(err, WISP_ERR_CAPACITY, "out of memory");
        if (!st) memcpy(first_mask, guide->mask, words * 4);
    }
    /* greedy: the best token (with a grammar, the best allowed one) and on; a grammar's
     * continuation stops at its end-of-generation token or where the grammar can go no further */
    int32_t n_out = 0;
    bool stop = false;
    for (; !st && !stop && n_out < n_greedy; n_out++) {
        if (guide && n_out > 0) st = next_mask(guide, err);
        if (st) break;
        int32_t id = guide ? masked_argmax(wisp_logits(ctx, -1), hp->n_vocab, guide) : argmax(wisp_logits(ctx, -1), hp->n_vocab);
        if (guide) st = wisp_guide_accept(guide, id, err);
        greedy[n_out] = id;
        stop = guide && (guide->ended || (wisp_guide_done(guide) && guide->trie->n_eog == 0));
        if (!st && !stop && n_out + 1 < n_greedy) st = wisp_eval(ctx, &id, 1, err);
    }
    if (!st) {
        printf("%s\n  {\"prompt\": ", first ? "" : ",");
        cli_json_string(stdout, prompt, strlen(prompt));
        printf(", \"tokens\": ");
        cli_json_ints(stdout, tokens, n);
        printf(",\n   \"logits\": [");
        for (size_t i = 0; i < n; i++) {
            printf("%s\n    ", i ? "," : "");
            cli_json_floats(stdout, logits + i * hp->n_vocab, (size_t)hp->n_vocab);
        }
        printf("]");
        if (guide) print_allowed(first_mask, logits + (n - 1) * hp->n_vocab, hp->n_vocab);
        printf(",\n   \"greedy\": ");
        cli_json_ints(stdout, greedy, (size_t)n_out);
        if (guide) printf(", \"complete\": %s", wisp_guide_done(guide) ? "true" : "false");
        printf("}");
    }
    free(first_mask);
    free(logits);
    free(greedy);
    free(tokens);
    return st;
}

int cmd_logits(int argc, char **argv) {
    cli_model_opts mo;
    cli_model_opts_default(&mo);
    cli_str_list prompts = {{0}, 0};
    bool json = false;
    cli_str_list loras = {{0}, 0};
    float lora_scale = 1.0f;
    int32_t n_greedy = GREEDY_TOKENS;
    cli_grammar_opts go = {0};
    const cli_opt opts[] = {
        CLI_MODEL_OPTS(&mo),
        CLI_LORA_OPTS(&loras, &lora_scale),
        {"prompt", 'p', OPT_STR_LIST, &prompts, "TEXT", "a prompt (repeat -p for several)"},
        {"json", 0, OPT_FLAG, &json, NULL, "JSON output (the only format; required for clarity)"},
        {"n-greedy", 'n', OPT_INT, &n_greedy, "N", "tokens of greedy continuation per prompt"},
        CLI_GRAMMAR_SOURCE_OPTS(&go),
    };
    const cli_command cmd = {
        "logits", "-m MODEL -p PROMPT [-p PROMPT ...] --json [--grammar GBNF | --json-schema SCHEMA | ...]",
        "For each prompt (BOS added): its tokens, the logits after every token, and the greedy continuation\n"
        "(-n tokens, 32 by default), as JSON in the schema of the golden reference files:\n"
        "{model, n_vocab, cases:[{prompt, tokens, logits[pos][vocab], greedy}]}",
        "With a grammar (--grammar, --grammar-file, --json-schema, or --json-mode for any JSON object;\n"
        "--json here is the output format, so the JSON mode is spelled --json-mode), the grammar\n"
        "constrains the continuation after the prompt, as in `wisp run`, and each case also has:\n"
        "  allowed        the token ids the grammar allows right after the prompt (end-of-text ids only\n"
        "                 where the grammar may end)\n"
        "  masked_logits  the logits after the prompt with every other token at -inf, written null\n"
        "  greedy         the highest-logit allowed token at each step (lowest id on ties), up to -n\n"
        "                 tokens, ending with the end-of-text token once the grammar ends\n"
        "  complete       whether the greedy continuation finished the grammar\n"
        "`logits` keeps the prompt's own logits unmasked: the grammar applies to what follows it.\n"
        "Example: wisp logits -m model.gguf -p \"Label:\" --json --grammar 'root ::= \" yes\" | \" no\"'",
        opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    if (!json || prompts.n == 0) {
        fprintf(stderr, "wisp logits: needs --json and at least one -p PROMPT\n(see: wisp logits --help)\n");
        return CLI_USAGE;
    }
    if (n_greedy < 1) {
        fprintf(stderr, "wisp logits: -n must be at least 1\n");
        return CLI_USAGE;
    }
    bool no_grammar;
    char *gbnf = cli_grammar_text(&go, &no_grammar, "logits");
    if (!gbnf && !no_grammar) return CLI_USAGE;
    const bool guided = !no_grammar;
    wisp_config cfg = wisp_config_default();
    cfg.logits_all = true;
    size_t longest = 0;
    for (int i = 0; i < prompts.n; i++)
        if (strlen(prompts.items[i]) > longest) longest = strlen(prompts.items[i]);
    cfg.max_text_bytes = cli_text_bytes_for(longest);
    cli_adapters ad;
    cli_session s;
    cli_guide guide = {0};
    if (!cli_adapted_session_open(&s, &ad, &loras, lora_scale, &mo, &cfg)) {
        free(gbnf);
        return CLI_FAIL;
    }
    if (guided && !cli_guide_open(&guide, wisp_ctx_tokenizer(s.ctx), gbnf, "logits")) {
        free(gbnf);
        cli_session_close(&s);
        cli_adapters_close(&ad);
        return CLI_FAIL;
    }
    free(gbnf);
    const char *base = strrchr(mo.model, '/');
    base = base ? base + 1 : mo.model;
    printf("{\"model\": ");
    cli_json_string(stdout, base, strlen(base));
    printf(", \"n_vocab\": %d, \"cases\": [", wisp_ctx_hparams(s.ctx)->n_vocab);
    wisp_error err = {0};
    wisp_status st = WISP_OK;
    for (int i = 0; i < prompts.n && !st; i++)
        st = one_case(s.ctx, prompts.items[i], i == 0, &ad, n_greedy, guided ? &guide.guide : NULL, &err);
    printf("]}\n");
    if (st) cli_report(mo.model, &err); /* evaluation errors (e.g. NaN activations) are the model's */
    if (guided) cli_guide_close(&guide);
    cli_session_close(&s);
    cli_adapters_close(&ad);
    return st ? CLI_FAIL : CLI_OK;
}
