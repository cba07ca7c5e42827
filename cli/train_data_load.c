#include "train_data_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_map.h"

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

bool cli_data_format(const char *name, const char *path, wisp_data_format *out) {
    if (strcmp(name, "text") == 0) *out = WISP_DATA_TEXT;
    else if (strcmp(name, "jsonl") == 0) *out = WISP_DATA_JSONL;
    else if (strcmp(name, "auto") == 0)
        *out = ends_with(path, ".jsonl") || ends_with(path, ".json") ? WISP_DATA_JSONL : WISP_DATA_TEXT;
    else return false;
    return true;
}

bool cli_data_docs(const char *name, wisp_data_docs *out) {
    if (strcmp(name, "file") == 0) *out = WISP_DOCS_FILE;
    else if (strcmp(name, "blank") == 0) *out = WISP_DOCS_BLANK_LINE;
    else return false;
    return true;
}

bool cli_data_load(cli_data *c, const char *path, const wisp_tokenizer *tok, const wisp_data_options *opt) {
    return cli_data_load_chat(c, path, tok, opt, NULL);
}

bool cli_data_load_chat(cli_data *c, const char *path, const wisp_tokenizer *tok, const wisp_data_options *opt,
                        const wisp_data_chat *chat) {
    memset(c, 0, sizeof *c);
    cli_file f;
    if (!cli_file_open(&f, path)) return false;
    bool ok = cli_data_load_bytes(c, path, (const char *)f.data, f.size, tok, opt, chat);
    cli_file_close(&f);
    return ok;
}

bool cli_data_load_bytes(cli_data *c, const char *name, const char *bytes, size_t size, const wisp_tokenizer *tok,
                         const wisp_data_options *opt, const wisp_data_chat *chat) {
    memset(c, 0, sizeof *c);
    struct {
        const unsigned char *data;
        size_t size;
    } f = {(const unsigned char *)bytes, size};
    const char *path = name;
    wisp_error err = {0};
    wisp_data_plan_info info;
    bool ok = chat ? !wisp_data_plan_chat(tok, (const char *)f.data, f.size, opt, chat, &info, &err)
                   : !wisp_data_plan(tok, (const char *)f.data, f.size, opt, &info, &err);
    if (ok) {
        wisp_data_memory *m = &c->mem;
        m->cap_tokens = info.max_tokens;
        m->cap_examples = info.max_examples;
        m->cap_nodes = info.json_nodes;
        m->text_bytes = info.text_bytes;
        m->tok_scratch_bytes = info.tok_scratch;
        m->tokens = malloc(sizeof(int32_t) * (m->cap_tokens + 1));
        m->examples = malloc(sizeof(wisp_data_example) * (m->cap_examples + 1));
        m->order = malloc(sizeof(int32_t) * (m->cap_examples + 1));
        m->nodes = malloc(sizeof(wisp_json_node) * (m->cap_nodes + 1));
        m->text = malloc(m->text_bytes + 1);
        m->tok_scratch = malloc(m->tok_scratch_bytes + 1);
        ok = m->tokens && m->examples && m->order && m->nodes && m->text && m->tok_scratch;
        if (!ok) wisp_fail(&err, WISP_ERR_CAPACITY, "out of memory for %zu tokens", m->cap_tokens);
    }
    if (ok) ok = chat ? !wisp_data_build_chat(&c->d, tok, (const char *)f.data, f.size, opt, &c->mem, chat, &err)
                      : !wisp_data_build(&c->d, tok, (const char *)f.data, f.size, opt, &c->mem, &err);
    c->d.chat = NULL; /* the template was needed to build only */
    char dropped[64] = "";
    if (ok && c->d.n_dropped)
        snprintf(dropped, sizeof dropped, " (%d conversation%s among them dropped)", c->d.n_dropped, c->d.n_dropped == 1 ? "" : "s");
    if (ok && opt->format == WISP_DATA_JSONL && opt->packing) /* packed: nothing is cut, records share windows */
        fprintf(stderr, "%s: %d records kept, packed into %d windows of %d tokens, %d left with nothing to score%s; "
                "%lld scored targets\n", path, c->d.n_records, c->d.n_examples, opt->seq_len + 1, c->d.n_unscored,
                dropped, (long long)c->d.n_scored);
    else if (ok && opt->format == WISP_DATA_JSONL) /* truncation is never silent */
        fprintf(stderr, "%s: %d records kept, %d cut to %d tokens, %d left with nothing to score%s; %lld scored targets\n",
                path, c->d.n_records, c->d.n_truncated, opt->seq_len + 1, c->d.n_unscored, dropped, (long long)c->d.n_scored);
    if (!ok) {
        fprintf(stderr, "wisp: %s: %s\n", path, err.message);
        cli_data_free(c);
    }
    return ok;
}

void cli_data_free(cli_data *c) {
    free(c->mem.tokens), free(c->mem.examples), free(c->mem.order), free(c->mem.nodes), free(c->mem.text);
    free(c->mem.tok_scratch);
    memset(c, 0, sizeof *c);
}
