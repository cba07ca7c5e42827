/* wisp logits: the schema of the golden logits files (../shared/golden/logits), so any model
 * can be checked against a reference implementation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
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

/* Evaluate one prompt and print its case object. */
/* ad: a prompt-tuning adapter's virtual tokens lead every case */
static wisp_status one_case(wisp_ctx *ctx, const char *prompt, bool first, const cli_adapters *ad, wisp_error *err) {
    const wisp_hparams *hp = wisp_ctx_hparams(ctx);
    int32_t n_ctx = wisp_ctx_config(ctx)->n_ctx - ad->n_prompt, n_batch = wisp_ctx_config(ctx)->n_batch;
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)n_ctx);
    float *logits = NULL;
    size_t n = 0;
    wisp_status st = tokens ? WISP_OK : wisp_fail(err, WISP_ERR_CAPACITY, "out of memory");
    if (!st) st = wisp_tokenize_text(ctx, prompt, strlen(prompt), WISP_TOKENIZE_ADD_BOS, tokens, (size_t)n_ctx, &n, err);
    if (!st && n + GREEDY_TOKENS > (size_t)n_ctx)
        st = wisp_fail(err, WISP_ERR_CAPACITY, "prompt of %zu tokens plus %d greedy tokens exceeds --ctx %d", n,
                       GREEDY_TOKENS, n_ctx);
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
    int32_t greedy[GREEDY_TOKENS];
    for (int i = 0; !st && i < GREEDY_TOKENS; i++) {
        greedy[i] = argmax(wisp_logits(ctx, -1), hp->n_vocab);
        if (i + 1 < GREEDY_TOKENS) st = wisp_eval(ctx, &greedy[i], 1, err);
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
        printf("],\n   \"greedy\": ");
        cli_json_ints(stdout, greedy, GREEDY_TOKENS);
        printf("}");
    }
    free(logits);
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
    const cli_opt opts[] = {
        CLI_MODEL_OPTS(&mo),
        CLI_LORA_OPTS(&loras, &lora_scale),
        {"prompt", 'p', OPT_STR_LIST, &prompts, "TEXT", "a prompt (repeat -p for several)"},
        {"json", 0, OPT_FLAG, &json, NULL, "JSON output (the only format; required for clarity)"},
    };
    const cli_command cmd = {
        "logits", "-m MODEL -p PROMPT [-p PROMPT ...] --json",
        "For each prompt (BOS added): its tokens, the logits after every token, and the 32-token greedy\n"
        "continuation, as JSON in the schema of the golden reference files:\n"
        "{model, n_vocab, cases:[{prompt, tokens, logits[pos][vocab], greedy}]}",
        NULL, opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    if (!json || prompts.n == 0) {
        fprintf(stderr, "wisp logits: needs --json and at least one -p PROMPT\n(see: wisp logits --help)\n");
        return CLI_USAGE;
    }
    wisp_config cfg = wisp_config_default();
    cfg.logits_all = true;
    size_t longest = 0;
    for (int i = 0; i < prompts.n; i++)
        if (strlen(prompts.items[i]) > longest) longest = strlen(prompts.items[i]);
    cfg.max_text_bytes = cli_text_bytes_for(longest);
    cli_adapters ad;
    cli_session s;
    if (!cli_adapted_session_open(&s, &ad, &loras, lora_scale, &mo, &cfg)) return CLI_FAIL;
    const char *base = strrchr(mo.model, '/');
    base = base ? base + 1 : mo.model;
    printf("{\"model\": ");
    cli_json_string(stdout, base, strlen(base));
    printf(", \"n_vocab\": %d, \"cases\": [", wisp_ctx_hparams(s.ctx)->n_vocab);
    wisp_error err = {0};
    wisp_status st = WISP_OK;
    for (int i = 0; i < prompts.n && !st; i++) st = one_case(s.ctx, prompts.items[i], i == 0, &ad, &err);
    printf("]}\n");
    if (st) cli_report(mo.model, &err); /* evaluation errors (e.g. NaN activations) are the model's */
    cli_session_close(&s);
    cli_adapters_close(&ad);
    return st ? CLI_FAIL : CLI_OK;
}
