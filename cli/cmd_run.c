/* wisp run: stream a continuation of a prompt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "grammar_source.h"
#include "lora_attach.h"
#include "random_seed.h"
#include "sampler.h"
#include "session.h"

int cmd_run(int argc, char **argv) {
    for (int i = 1; i < argc; i++) /* conversations are their own mode (cli/chat_run.c) */
        if (strcmp(argv[i], "--chat") == 0) return cmd_run_chat(argc, argv);
    cli_model_opts mo;
    cli_model_opts_default(&mo);
    const char *prompt = NULL;
    int32_t n_predict = 128;
    wisp_sampler_params sp = wisp_sampler_defaults();
    uint64_t seed = UINT64_MAX;
    bool no_bos = false, quiet = false, no_echo = false, ids = false;
    cli_str_list loras = {{0}, 0};
    float lora_scale = 1.0f;
    cli_grammar_opts go = {0};
    const cli_opt opts[] = {
        CLI_MODEL_OPTS(&mo),
        CLI_LORA_OPTS(&loras, &lora_scale),
        {"prompt", 'p', OPT_STR, &prompt, "TEXT", "text to continue"},
        {"n-predict", 'n', OPT_INT, &n_predict, "N", "tokens to generate (stops earlier at end-of-text)"},
        {"temp", 0, OPT_FLOAT, &sp.temperature, "T", "temperature; 0 picks the most likely token (greedy)"},
        {"top-k", 0, OPT_INT, &sp.top_k, "K", "sample among the K most likely tokens; 0: all"},
        {"top-p", 0, OPT_FLOAT, &sp.top_p, "P", "sample within the smallest set of probability P; 1: off"},
        {"min-p", 0, OPT_FLOAT, &sp.min_p, "P", "drop tokens less likely than P x the best; 0: off"},
        {"repeat-penalty", 0, OPT_FLOAT, &sp.repeat_penalty, "R", "penalise recently seen tokens; 1: off"},
        {"repeat-last-n", 0, OPT_INT, &sp.repeat_last_n, "N", "how many recent tokens the penalty considers"},
        {"seed", 's', OPT_U64, &seed, "S", "random seed (default: random, printed at the end)"},
        {"no-bos", 0, OPT_FLAG, &no_bos, NULL, "do not add the beginning-of-sequence token"},
        {"no-echo", 0, OPT_FLAG, &no_echo, NULL, "print only the continuation, not the prompt"},
        {"ids", 0, OPT_FLAG, &ids, NULL, "print token ids (space-separated) instead of their text"},
        {"quiet", 'q', OPT_FLAG, &quiet, NULL, "no statistics line on stderr"},
        CLI_GRAMMAR_OPTS(&go),
    };
    const cli_command cmd = {
        "run", "-m MODEL -p PROMPT [options]", "Generate a continuation of PROMPT and stream it to stdout.",
        "Sampling applies the repetition penalty, top-k, top-p, min-p, then the temperature.\n"
        "With --temp 0 the output is deterministic; otherwise the same --seed gives the same text.\n"
        "Example: wisp run -m stories260K.gguf -p \"Once upon a time\" -n 64 --temp 0\n"
        "For instruct models, --chat answers a conversation instead (see wisp run --chat --help).",
        opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    if (!prompt) {
        fprintf(stderr, "wisp run: missing -p PROMPT\n(see: wisp run --help)\n");
        return CLI_USAGE;
    }
    if (n_predict < 0) {
        fprintf(stderr, "wisp run: -n must not be negative\n");
        return CLI_USAGE;
    }
    if (seed == UINT64_MAX) seed = cli_random_seed();
    sp.seed = seed;
    bool no_grammar;
    char *gbnf = cli_grammar_text(&go, &no_grammar, "run");
    if (!gbnf && !no_grammar) return CLI_USAGE;

    wisp_config cfg = wisp_config_default();
    cfg.max_text_bytes = cli_text_bytes_for(strlen(prompt));
    cli_adapters ad;
    cli_session s;
    cli_guide guide = {0};
    if (!cli_adapted_session_open(&s, &ad, &loras, lora_scale, &mo, &cfg)) {
        free(gbnf);
        return CLI_FAIL;
    }
    wisp_ctx *ctx = s.ctx;
    const wisp_tokenizer *tok = wisp_ctx_tokenizer(ctx);
    int32_t n_ctx = wisp_ctx_config(ctx)->n_ctx - ad.n_prompt; /* a prompt-tuning adapter's virtual tokens came first */
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)n_ctx);
    wisp_error err = {0};
    size_t n_prompt = 0;
    unsigned flags = no_bos ? 0 : WISP_TOKENIZE_ADD_BOS;
    wisp_status st = tokens ? wisp_tokenize_text(ctx, prompt, strlen(prompt), flags, tokens, (size_t)n_ctx, &n_prompt, &err)
                            : wisp_fail(&err, WISP_ERR_CAPACITY, "out of memory");
    if (st == WISP_ERR_CAPACITY)
        wisp_fail(&err, st, "the prompt is %zu tokens but the context holds %d (raise --ctx)", n_prompt, n_ctx);
    if (!st && n_prompt == 0) st = wisp_fail(&err, WISP_ERR_ARG, "the prompt is empty (and no BOS token was added)");
    if (!st && gbnf && !cli_guide_open(&guide, tok, gbnf, "run")) st = WISP_ERR_ARG, err.message[0] = 0;
    free(gbnf);
    if (st) {
        if (err.message[0]) cli_report("run", &err);
        free(tokens);
        cli_session_close(&s);
        cli_adapters_close(&ad);
        return CLI_FAIL;
    }
    if (!no_echo) {
        if (ids)
            for (size_t i = 0; i < n_prompt; i++) printf("%s%d", i ? " " : "", (int)tokens[i]);
        else
            fputs(prompt, stdout);
        fflush(stdout);
    }
    wisp_sampler sampler;
    wisp_sampler_init(&sampler, &sp);
    if (guide.mem) sampler.guide = &guide.guide;
    double t0 = cli_now();
    st = wisp_eval(ctx, tokens, (int32_t)n_prompt, &err);
    double t_prefill = cli_now() - t0;
    int32_t n_gen = 0, n_tok = (int32_t)n_prompt;
    bool context_full = false;
    double t1 = cli_now(), c1 = cli_cpu_seconds();
    char piece[256];
    while (!st && n_gen < n_predict) {
        int32_t next = wisp_sample(ctx, &sampler, tokens, (size_t)n_tok);
        if (next < 0 && guide.mem && !cli_guide_finished(&guide, "run")) st = WISP_ERR_ARG;
        if (next < 0 || wisp_tokenizer_is_eog(tok, next)) break;
        if (ids) {
            printf("%s%d", n_gen || !no_echo ? " " : "", (int)next);
        } else {
            size_t len = wisp_token_piece(tok, next, piece, sizeof piece);
            fwrite(piece, 1, len < sizeof piece ? len : sizeof piece, stdout);
        }
        fflush(stdout);
        n_gen++;
        if (n_tok >= n_ctx) { context_full = true; break; }
        tokens[n_tok++] = next;
        if (n_gen == n_predict) break;
        st = wisp_eval(ctx, &next, 1, &err);
    }
    double t_decode = cli_now() - t1, c_decode = cli_cpu_seconds() - c1;
    fputc('\n', stdout);
    fflush(stdout);
    if (st && err.message[0]) cli_report(mo.model, &err); /* evaluation errors (e.g. NaN activations) are the model's */
    if (context_full) fprintf(stderr, "wisp run: stopped: the context of %d tokens is full (raise --ctx)\n", n_ctx);
    if (!quiet)
        fprintf(stderr, "[prompt %zu tokens in %.3f s (%.1f tok/s), generated %d tokens in %.3f s (%.1f tok/s; CPU %.3f s), seed %llu, "
                "kernels %s]\n",
                n_prompt, t_prefill, t_prefill > 0 ? (double)n_prompt / t_prefill : 0.0, n_gen, t_decode,
                t_decode > 0 && n_gen > 1 ? (double)(n_gen - 1) / t_decode : 0.0, c_decode, (unsigned long long)seed,
                wisp_ctx_kernels_name(ctx));
    if (!st && guide.mem && !wisp_guide_done(&guide.guide)) {
        fprintf(stderr, "wisp run: the output is incomplete: generation stopped before the grammar's end (raise -n)\n");
        st = WISP_ERR_ARG;
    }
    if (guide.mem && !quiet)
        fprintf(stderr, "[grammar: %llu tokens checked, %llu masks computed, %llu forced]\n",
                (unsigned long long)guide.guide.n_checks, (unsigned long long)guide.guide.n_masks,
                (unsigned long long)guide.guide.n_forced);
    cli_guide_close(&guide);
    free(tokens);
    cli_session_close(&s);
    cli_adapters_close(&ad);
    return st ? CLI_FAIL : CLI_OK;
}
