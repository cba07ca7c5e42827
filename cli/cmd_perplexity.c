/* wisp perplexity: how well a model predicts a text file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "session.h"
#include "token_loss.h"
#include "tokenizer.h"


int cmd_perplexity(int argc, char **argv) {
    cli_model_opts mo;
    cli_model_opts_default(&mo);
    const char *path = NULL;
    int32_t max_windows = 0;
    const cli_opt opts[] = {
        CLI_MODEL_OPTS(&mo),
        {"file", 'f', OPT_STR, &path, "TEXTFILE", "text to score"},
        {"max-windows", 0, OPT_INT, &max_windows, "N", "score only the first N windows; 0: all"},
    };
    const cli_command cmd = {
        "perplexity", "-m MODEL -f TEXTFILE [--ctx N]",
        "Split the tokenized file into windows of --ctx tokens (each starts with BOS) and report the mean\n"
        "negative log-likelihood of every token given the ones before it in its window, and its exponential,\n"
        "the perplexity. Progress goes to stderr.",
        NULL, opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    if (!path) {
        fprintf(stderr, "wisp perplexity: missing -f TEXTFILE\n");
        return CLI_USAGE;
    }
    cli_file text;
    if (!cli_file_open(&text, path)) return CLI_FAIL;
    if (text.size > UINT32_MAX - 64) {
        fprintf(stderr, "wisp: %s: larger than 4 GiB\n", path);
        cli_file_close(&text);
        return CLI_FAIL;
    }
    wisp_config cfg = wisp_config_default();
    cfg.logits_all = true;
    cfg.max_text_bytes = (uint32_t)text.size + 16;
    cli_session s;
    if (!cli_session_open(&s, &mo, &cfg)) {
        cli_file_close(&text);
        return CLI_FAIL;
    }
    wisp_ctx *ctx = s.ctx;
    const wisp_hparams *hp = wisp_ctx_hparams(ctx);
    int32_t n_ctx = wisp_ctx_config(ctx)->n_ctx, n_batch = wisp_ctx_config(ctx)->n_batch;
    int32_t bos = wisp_tokenizer_bos(wisp_ctx_tokenizer(ctx));
    size_t cap = text.size + 16, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    int32_t *window = malloc((size_t)n_ctx * sizeof *window);
    wisp_error err = {0};
    wisp_status st = ids && window ? wisp_tokenize_text(ctx, (const char *)text.data, text.size, 0, ids, cap, &n, &err)
                                   : wisp_fail(&err, WISP_ERR_CAPACITY, "out of memory");
    int32_t per = bos >= 0 ? n_ctx - 1 : n_ctx; /* text tokens per window */
    if (!st && (per < 1 || n < 2)) st = wisp_fail(&err, WISP_ERR_ARG, "need at least 2 tokens of text and --ctx >= 2");
    size_t n_windows = st ? 0 : (n + (size_t)per - 1) / (size_t)per;
    if (max_windows > 0 && n_windows > (size_t)max_windows) n_windows = (size_t)max_windows;
    double total = 0;
    size_t scored = 0;
    double t0 = cli_now();
    for (size_t w = 0; !st && w < n_windows; w++) {
        size_t start = w * (size_t)per, len = n - start < (size_t)per ? n - start : (size_t)per;
        int32_t wn = 0;
        if (bos >= 0) window[wn++] = bos;
        memcpy(window + wn, ids + start, len * sizeof *ids);
        wn += (int32_t)len;
        wisp_rewind(ctx, 0);
        for (int32_t done = 0; !st && done < wn;) {
            int32_t step = wn - done < n_batch ? wn - done : n_batch;
            st = wisp_eval(ctx, window + done, step, &err);
            for (int32_t i = 0; !st && i < step; i++) {
                int32_t p = done + i; /* logits at p predict window[p+1] */
                if (p + 1 >= wn) break;
                total += cli_token_nll(wisp_logits(ctx, i), hp->n_vocab, window[p + 1]);
                scored++;
            }
            done += step;
        }
        if (isatty(2) || w + 1 == n_windows)
            fprintf(stderr, "\r[window %zu/%zu] %zu tokens, perplexity %.4f, %.0f tok/s   ", w + 1, n_windows, scored,
                    scored ? exp(total / (double)scored) : 0.0, (double)scored / (cli_now() - t0));
    }
    if (n_windows) fputc('\n', stderr);
    if (!st) printf("mean NLL %.6f, perplexity %.4f over %zu tokens (%zu windows of up to %d)\n",
                    total / (double)scored, exp(total / (double)scored), scored, n_windows, n_ctx);
    else cli_report(path, &err);
    free(window);
    free(ids);
    cli_session_close(&s);
    cli_file_close(&text);
    return st ? CLI_FAIL : CLI_OK;
}
