/* wisp eval: the mean loss and perplexity of a data file under a base model,
 * with any LoRA adapters attached, on exactly the windows `wisp finetune`
 * trains and validates on (same --ctx, --format and --docs give the same
 * windows and masks), computed by the inference path. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "lora_attach.h"
#include "session.h"
#include "token_loss.h"
#include "train_data_load.h"

int cmd_eval(int argc, char **argv) {
    cli_model_opts mo;
    cli_model_opts_default(&mo);
    mo.kv_type = "f32"; /* what training computes with */
    cli_str_list loras = {{0}, 0};
    float lora_scale = 1.0f;
    const char *path = NULL, *format = "auto", *docs = "file";
    int32_t seq = 256, max_windows = 0;
    bool json = false;
    const cli_opt opts[] = {
        {"model", 'm', OPT_STR, &mo.model, "PATH", "GGUF base model"},
        CLI_LORA_OPTS(&loras, &lora_scale),
        {"file", 'f', OPT_STR, &path, "FILE", "data to score: plain text, or JSONL records"},
        {"ctx", 'c', OPT_INT, &seq, "N", "tokens per window (as finetune's --ctx)"},
        {"format", 0, OPT_STR, &format, "auto|text|jsonl", "data format; auto: JSONL for .jsonl/.json files"},
        {"docs", 0, OPT_STR, &docs, "file|blank", "plain-text documents: the whole file, or blank-line paragraphs"},
        {"max-windows", 0, OPT_INT, &max_windows, "N", "score only the first N windows; 0: all"},
        {"threads", 't', OPT_INT, &mo.threads, "N", "worker threads; 0: online CPUs, at most 8"},
        {"kv-type", 0, OPT_STR, &mo.kv_type, "f16|f32", "KV cache element type"},
        {"arena", 0, OPT_SIZE, &mo.arena, "BYTES", "use exactly one arena of this size (default: the plan)"},
        {"json", 0, OPT_FLAG, &json, NULL, "print the result as JSON"},
    };
    const cli_command cmd = {
        "eval", "-m BASE [--lora ADAPTER[:SCALE] ...] -f FILE [--ctx N]",
        "Mean next-token cross-entropy and perplexity of FILE, cut into the windows finetune uses: plain text\n"
        "packed into BOS-led windows of --ctx tokens (every token scored once), JSONL records scored on the\n"
        "response only. With adapters attached, the loss is the adapted model's.",
        "Example: wisp eval -m stories260K.gguf --lora shakespeare-lora/adapter.gguf -f valid.txt --ctx 128",
        opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    wisp_data_options o = {WISP_DATA_TEXT, WISP_DOCS_FILE, seq, 0, 0, 0, false};
    if (!mo.model || !path || seq < 1 || max_windows < 0 || !cli_data_format(format, path, &o.format) ||
        !cli_data_docs(docs, &o.docs)) {
        fprintf(stderr, "wisp eval: needs -m BASE and -f FILE, --ctx >= 1, --format auto|text|jsonl, --docs file|blank\n"
                        "(see: wisp eval --help)\n");
        return CLI_USAGE;
    }
    wisp_config cfg = wisp_config_default();
    cfg.logits_all = true;
    mo.ctx = seq + 1;
    mo.batch = seq + 1;
    cli_adapters ad;
    cli_session s;
    if (!cli_adapted_session_open(&s, &ad, &loras, lora_scale, &mo, &cfg)) return CLI_FAIL;
    cli_data data;
    memset(&data, 0, sizeof data);
    bool ok = cli_data_load(&data, path, wisp_ctx_tokenizer(s.ctx), &o);
    int32_t n = ok ? wisp_data_count(&data.d, WISP_SPLIT_TRAIN) : 0, V = wisp_ctx_hparams(s.ctx)->n_vocab;
    if (max_windows > 0 && n > max_windows) n = max_windows;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(seq + 1));
    uint8_t *mask = malloc((size_t)seq + 1);
    double total = 0, t0 = cli_now();
    int64_t scored = 0;
    wisp_error err = {0};
    for (int32_t w = 0; ok && w < n; w++) {
        wisp_data_get(&data.d, WISP_SPLIT_TRAIN, w, ids, mask);
        if (!cli_adapters_rewind(&ad, s.ctx)) { /* a prompt-tuning adapter's virtual tokens stay */
            ok = false;
            break;
        }
        if (wisp_eval(s.ctx, ids, seq, &err)) {
            cli_report(path, &err);
            ok = false;
            break;
        }
        for (int32_t j = 1; j <= seq; j++)
            if (mask[j]) total += cli_token_nll(wisp_logits(s.ctx, j - 1), V, ids[j]), scored++;
        if (isatty(2) && !json)
            fprintf(stderr, "\r[window %d/%d] loss %.4f, %.0f tok/s   ", w + 1, n, scored ? total / (double)scored : 0.0,
                    (double)(w + 1) * seq / (cli_now() - t0));
    }
    if (ok && isatty(2) && !json && n) fputc('\n', stderr);
    if (ok && !scored) {
        fprintf(stderr, "wisp eval: %s: no scored tokens\n", path);
        ok = false;
    }
    if (ok) {
        double mean = total / (double)scored;
        if (json)
            printf("{\"loss\": %.9g, \"perplexity\": %.9g, \"tokens\": %lld, \"windows\": %d, \"adapters\": %d}\n", mean,
                   exp(mean), (long long)scored, n, ad.n + (ad.n_prompt > 0));
        else
            printf("mean loss %.6f, perplexity %.4f over %lld tokens (%d windows of %d)%s\n", mean, exp(mean),
                   (long long)scored, n, seq, ad.n || ad.n_prompt ? ", adapters attached" : "");
    }
    free(ids);
    free(mask);
    cli_data_free(&data);
    cli_session_close(&s);
    cli_adapters_close(&ad);
    return ok ? CLI_OK : CLI_FAIL;
}
