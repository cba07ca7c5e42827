/* wisp embed: one vector per text from the model's final hidden states (after output_norm,
 * before the output projection), mean-pooled or the last token's, L2-normalized by default.
 * The pooling itself is core's (wisp_embed_tokens), shared with the npm package. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "file_map.h"
#include "json_out.h"
#include "session.h"

typedef struct text_span {
    const char *s;
    size_t n;
} text_span;

/* -p texts first, then the file's non-empty lines (a trailing \r is dropped). NULL if out of memory. */
static text_span *collect_texts(const cli_str_list *prompts, const cli_file *file, size_t *n_texts) {
    size_t cap = (size_t)prompts->n + 1, n = 0;
    if (file)
        for (size_t i = 0; i < file->size; i++) cap += file->data[i] == '\n';
    text_span *t = malloc(sizeof *t * cap);
    if (!t) return NULL;
    for (int i = 0; i < prompts->n; i++) t[n++] = (text_span){prompts->items[i], strlen(prompts->items[i])};
    for (size_t lo = 0; file && lo < file->size;) {
        size_t hi = lo;
        while (hi < file->size && file->data[hi] != '\n') hi++;
        size_t end = hi > lo && file->data[hi - 1] == '\r' ? hi - 1 : hi;
        if (end > lo) t[n++] = (text_span){(const char *)file->data + lo, end - lo};
        lo = hi + 1;
    }
    *n_texts = n;
    return t;
}

static void print_vector(const float *v, int32_t dim) {
    for (int32_t i = 0; i < dim; i++) printf("%s%.9g", i ? " " : "", (double)v[i]);
    printf("\n");
}

int cmd_embed(int argc, char **argv) {
    cli_model_opts mo;
    cli_model_opts_default(&mo);
    cli_str_list prompts = {{0}, 0};
    const char *path = NULL, *pooling_name = "mean";
    bool no_normalize = false, json = false;
    const cli_opt opts[] = {
        CLI_MODEL_OPTS(&mo),
        {"prompt", 'p', OPT_STR_LIST, &prompts, "TEXT", "a text to embed (repeat -p for several)"},
        {"file", 'f', OPT_STR, &path, "FILE", "embed every non-empty line of FILE, one text per line"},
        {"pooling", 0, OPT_STR, &pooling_name, "mean|last", "mean of every position's hidden state, or the last one's"},
        {"no-normalize", 0, OPT_FLAG, &no_normalize, NULL, "keep the pooled vector's length (default: L2 norm 1)"},
        {"json", 0, OPT_FLAG, &json, NULL, "JSON: {model, dim, pooling, normalized, embeddings:[{text, n_tokens, embedding}]}"},
    };
    const cli_command cmd = {
        "embed", "-m MODEL (-p TEXT ... | -f FILE) [--pooling mean|last] [--no-normalize] [--json]",
        "Print one embedding vector per text: the model's final hidden state (after its output norm,\n"
        "before the output projection), averaged over the text's tokens (BOS added) or taken at the\n"
        "last token, L2-normalized unless --no-normalize. Each text is evaluated on its own; a text\n"
        "longer than --ctx is an error. Plain output: one line per text, the vector's numbers\n"
        "separated by spaces, in the order -p texts then the file's lines.",
        NULL, opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    wisp_pooling pooling;
    if (!strcmp(pooling_name, "mean")) pooling = WISP_POOL_MEAN;
    else if (!strcmp(pooling_name, "last")) pooling = WISP_POOL_LAST;
    else {
        fprintf(stderr, "wisp embed: unknown --pooling '%s' (mean or last)\n", pooling_name);
        return CLI_USAGE;
    }
    if (prompts.n == 0 && !path) {
        fprintf(stderr, "wisp embed: needs -p TEXT or -f FILE\n(see: wisp embed --help)\n");
        return CLI_USAGE;
    }
    cli_file file;
    if (path && !cli_file_open(&file, path)) return CLI_FAIL;
    size_t n_texts = 0, longest = 0;
    text_span *texts = collect_texts(&prompts, path ? &file : NULL, &n_texts);
    if (!texts) {
        fprintf(stderr, "wisp: out of memory\n");
        if (path) cli_file_close(&file);
        return CLI_FAIL;
    }
    if (n_texts == 0) {
        fprintf(stderr, "wisp embed: %s has no non-empty line to embed\n", path);
        free(texts);
        cli_file_close(&file);
        return CLI_FAIL;
    }
    for (size_t i = 0; i < n_texts; i++)
        if (texts[i].n > longest) longest = texts[i].n;
    wisp_config cfg = wisp_config_default();
    cfg.hidden_states = true;
    cfg.max_text_bytes = cli_text_bytes_for(longest);
    cli_session s;
    if (!cli_session_open(&s, &mo, &cfg)) {
        free(texts);
        if (path) cli_file_close(&file);
        return CLI_FAIL;
    }
    const int32_t dim = wisp_ctx_hparams(s.ctx)->dim, n_ctx = wisp_ctx_config(s.ctx)->n_ctx;
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)n_ctx);
    float *vec = malloc(sizeof(float) * (size_t)dim);
    wisp_error err = {0};
    wisp_status st = tokens && vec ? WISP_OK : wisp_fail(&err, WISP_ERR_CAPACITY, "out of memory");
    if (st) cli_report(mo.model, &err);
    if (!st && json) {
        const char *base = strrchr(mo.model, '/');
        base = base ? base + 1 : mo.model;
        printf("{\"model\": ");
        cli_json_string(stdout, base, strlen(base));
        printf(", \"dim\": %d, \"pooling\": \"%s\", \"normalized\": %s, \"embeddings\": [", dim, pooling_name,
               no_normalize ? "false" : "true");
    }
    for (size_t i = 0; i < n_texts && !st; i++) {
        size_t n = 0;
        st = wisp_tokenize_text(s.ctx, texts[i].s, texts[i].n, WISP_TOKENIZE_ADD_BOS, tokens, (size_t)n_ctx, &n, &err);
        if (!st) st = wisp_embed_tokens(s.ctx, tokens, (int32_t)n, pooling, !no_normalize, vec, &err);
        if (st) {
            fprintf(stderr, "wisp embed: %s: text %zu: %s\n", mo.model, i + 1, err.message);
            break;
        }
        if (json) {
            printf("%s\n  {\"text\": ", i ? "," : "");
            cli_json_string(stdout, texts[i].s, texts[i].n);
            printf(", \"n_tokens\": %zu, \"embedding\": ", n);
            cli_json_floats(stdout, vec, (size_t)dim);
            printf("}");
        } else {
            print_vector(vec, dim);
        }
    }
    if (json && tokens && vec) printf("]}\n");
    free(vec);
    free(tokens);
    free(texts);
    cli_session_close(&s);
    if (path) cli_file_close(&file);
    return st ? CLI_FAIL : CLI_OK;
}
