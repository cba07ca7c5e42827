#include "chat_template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat_formats.h"
#include "chat_messages.h"
#include "chat_tools.h"

static char *read_all(FILE *f, size_t *size) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap) break;
        char *bigger = realloc(buf, cap * 2 + 1);
        if (!bigger) { free(buf); return NULL; }
        buf = bigger;
        cap *= 2;
    }
    if (buf) buf[n] = 0;
    *size = n;
    return buf;
}

static char *read_path(const char *path, size_t *size) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "wisp: %s: cannot open\n", path);
        return NULL;
    }
    char *text = read_all(f, size);
    if (f != stdin) fclose(f);
    if (!text) fprintf(stderr, "wisp: %s: cannot read\n", path);
    return text;
}

static char *dup_str(wisp_str s) {
    char *c = malloc(s.len + 1);
    if (c) {
        memcpy(c, s.ptr, s.len);
        c[s.len] = 0;
    }
    return c;
}

char *cli_gguf_token_text(const wisp_gguf *g, const char *id_key) {
    uint64_t id;
    wisp_gguf_kv tokens;
    if (!g || !wisp_gguf_get_u64(g, id_key, &id) || !wisp_gguf_find_kv(g, "tokenizer.ggml.tokens", &tokens) ||
        tokens.type != WISP_GGUF_ARRAY || tokens.elem_type != WISP_GGUF_STRING || id >= tokens.count)
        return NULL;
    const uint8_t *pos = tokens.value;
    wisp_str s = {0, 0};
    for (uint64_t i = 0; i <= id; i++) s = wisp_gguf_next_array_str(&pos);
    return dup_str(s);
}

bool cli_chat_template_set_date(cli_chat_template *ct, const char *date) {
    if (!date) {
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        ct->year = tm.tm_year + 1900, ct->month = tm.tm_mon + 1, ct->day = tm.tm_mday;
        return true;
    }
    int y, m, d;
    char extra;
    if (sscanf(date, "%4d-%2d-%2d%c", &y, &m, &d, &extra) != 3 || m < 1 || m > 12 || d < 1 || d > 31 || y < 1) return false;
    ct->year = y, ct->month = m, ct->day = d;
    return true;
}

bool cli_chat_template_open(cli_chat_template *ct, const wisp_gguf *g, const char *template_file, const char *choice,
                            const char *bos, const char *eos) {
    memset(ct, 0, sizeof *ct);
    cli_chat_template_set_date(ct, NULL);
    size_t len = 0;
    const char *file = template_file;
    if (choice) {
        const wisp_chat_format *f = wisp_chat_format_find(choice);
        if (f) {
            ct->source = strdup(f->template);
            snprintf(ct->origin, sizeof ct->origin, "built-in %s", f->name);
        } else if (strchr(choice, '/') || strchr(choice, '.')) {
            file = choice;
        } else {
            size_t n;
            const wisp_chat_format *all = wisp_chat_formats(&n);
            fprintf(stderr, "wisp: --chat-template %s: no such built-in format (and not a file path); built-ins:", choice);
            for (size_t i = 0; i < n; i++) fprintf(stderr, " %s", all[i].name);
            fprintf(stderr, "\n");
            return false;
        }
    }
    if (!ct->source && file) {
        ct->source = read_path(file, &len);
        if (!ct->source) return false;
        snprintf(ct->origin, sizeof ct->origin, "%s", file);
    }
    if (!ct->source && g) {
        wisp_str s;
        if (wisp_gguf_get_str(g, "tokenizer.chat_template", &s)) {
            ct->source = dup_str(s);
            snprintf(ct->origin, sizeof ct->origin, "the model's tokenizer.chat_template");
        }
    }
    if (!ct->source) {
        fprintf(stderr, "wisp: %s; choose one with --chat-template NAME|FILE (built-ins: chatml, llama3, gemma, phi3, "
                        "phi4, zephyr, mistral)\n",
                g ? "the model has no tokenizer.chat_template" : "no chat template given");
        return false;
    }
    ct->bos = bos ? strdup(bos) : cli_gguf_token_text(g, "tokenizer.ggml.bos_token_id");
    ct->eos = eos ? strdup(eos) : cli_gguf_token_text(g, "tokenizer.ggml.eos_token_id");
    len = strlen(ct->source);
    wisp_error err = {0};
    size_t bytes = 0;
    if (wisp_template_plan(ct->source, len, NULL, &bytes, &err) ||
        !(ct->mem = aligned_alloc(64, (bytes + 63) / 64 * 64)) ||
        wisp_template_init(&ct->tpl, ct->mem, bytes, ct->source, len, NULL, &err)) {
        if (!err.message[0]) wisp_fail(&err, WISP_ERR_CAPACITY, "out of memory");
        fprintf(stderr, "wisp: chat template (%s): %s\n", ct->origin, err.message);
        cli_chat_template_close(ct);
        return false;
    }
    return true;
}

void cli_chat_template_close(cli_chat_template *ct) {
    free(ct->source);
    free(ct->mem);
    free(ct->bos);
    free(ct->eos);
    free(ct->tools_json);
    memset(ct, 0, sizeof *ct);
}

wisp_status cli_chat_render(const cli_chat_template *ct, const wisp_chat_message *msgs, size_t n, bool add_generation_prompt,
                            char **out, size_t *len, wisp_error *err) {
    wisp_template_vars vars = {msgs, n, add_generation_prompt, ct->bos, ct->eos, ct->year, ct->month, ct->day, ct->tools_json, ct->tools_len};
    size_t cap = 4096;
    for (size_t i = 0; i < n; i++) cap += msgs[i].content_len + msgs[i].role_len + 64;
    for (;;) {
        char *buf = malloc(cap);
        if (!buf) return wisp_fail(err, WISP_ERR_CAPACITY, "out of memory for %zu bytes of chat text", cap);
        wisp_status s = wisp_template_render(ct->tpl, &vars, buf, cap, len, err);
        /* only the output buffer is grown: a full work heap is the template's limit */
        if (s == WISP_ERR_CAPACITY && strstr(err->message, "rendered text") && cap < ((size_t)1 << 30)) {
            free(buf);
            cap *= 4;
            continue;
        }
        if (s) {
            free(buf);
            return s;
        }
        *out = buf;
        return WISP_OK;
    }
}

bool cli_chat_template_load_tools(cli_chat_template *ct, const char *path) {
    size_t size = 0;
    char *doc = read_path(path, &size);
    if (!doc) return false;
    wisp_json j;
    wisp_error err = {0};
    size_t need = 0, n_tools = 0;
    wisp_json_parse(&j, doc, size, NULL, 0, &need, &err);
    wisp_json_node *nodes = need ? malloc(need * sizeof *nodes) : NULL;
    bool ok = nodes && !wisp_json_parse(&j, doc, size, nodes, need, NULL, &err) &&
              !wisp_chat_tools_check(&j, 0, &n_tools, &err);
    free(nodes);
    if (!ok) {
        fprintf(stderr, "wisp: --tools %s: %s\n", path, err.message[0] ? err.message : "not JSON");
        free(doc);
        return false;
    }
    free(ct->tools_json);
    ct->tools_json = doc;
    ct->tools_len = size;
    return true;
}

bool cli_load_messages(const char *path, wisp_chat_message **msgs, size_t *n, char **text_out) {
    size_t size = 0;
    char *doc = read_path(path, &size);
    if (!doc) return false;
    wisp_json j;
    wisp_error err = {0};
    size_t need = 0;
    wisp_json_parse(&j, doc, size, NULL, 0, &need, &err);
    wisp_json_node *nodes = need ? malloc(need * sizeof *nodes) : NULL;
    bool ok = false;
    *msgs = NULL;
    *text_out = NULL;
    if (!nodes || wisp_json_parse(&j, doc, size, nodes, need, NULL, &err)) {
        fprintf(stderr, "wisp: %s: %s\n", path, err.message[0] ? err.message : "not JSON");
    } else {
        int64_t arr = wisp_json_is(&j, 0, WISP_JSON_OBJECT) ? wisp_json_get(&j, 0, "messages") : 0;
        size_t cap = arr >= 0 && wisp_json_is(&j, arr, WISP_JSON_ARRAY) ? j.nodes[arr].count : 0;
        *msgs = malloc((cap ? cap : 1) * sizeof **msgs);
        *text_out = malloc(size + 1);
        if (!*msgs || !*text_out)
            fprintf(stderr, "wisp: %s: out of memory\n", path);
        else if (wisp_chat_messages_from_json(&j, arr, *msgs, cap, n, *text_out, size + 1, &err))
            fprintf(stderr, "wisp: %s: %s\n", path, err.message);
        else
            ok = true;
    }
    if (!ok) {
        free(*msgs);
        free(*text_out);
        *msgs = NULL;
        *text_out = NULL;
    }
    free(nodes);
    free(doc);
    return ok;
}
