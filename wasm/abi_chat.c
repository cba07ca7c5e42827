/* Chat templates for the npm package: a conversation (messages JSON) rendered
 * with the model's tokenizer.chat_template, a built-in format or a template
 * given as text, and optionally tokenized the way a chat must be (the
 * template's special tokens parsed, the messages' text never). Rendering
 * plans and allocates its own memory for the call and frees it after, so,
 * unlike generation, it may grow wasm memory. */
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "chat_formats.h"
#include "chat_messages.h"
#include "json.h"
#include "template.h"
#include "tokenizer.h"

/* The last rendering (ww_chat with tokenize 0), owned here until the next call. */
static char *chat_text;

static char *token_text(ww_model *m, int32_t id) {
    if (id < 0) return NULL;
    wisp_str s = wisp_token_text(wisp_ctx_tokenizer(m->ctx), id);
    char *c = malloc(s.len + 1);
    if (c) memcpy(c, s.ptr, s.len), c[s.len] = 0;
    return c;
}

bool ww_template_source(ww_model *m, const char *spec, uint32_t spec_len, wisp_str *src) {
    char name[32];
    if (spec_len == 0) {
        if (wisp_gguf_get_str(&m->gguf, "tokenizer.chat_template", src)) return true;
        wisp_fail(&m->err, WISP_ERR_NOT_FOUND, "the model has no tokenizer.chat_template; pass a template (a built-in "
                  "name: chatml, llama3, gemma, phi3, phi4, zephyr, mistral, or a Jinja template)");
        return false;
    }
    if (spec_len < sizeof name && !memchr(spec, '{', spec_len)) {
        memcpy(name, spec, spec_len);
        name[spec_len] = 0;
        const wisp_chat_format *f = wisp_chat_format_find(name);
        if (!f) return wisp_fail(&m->err, WISP_ERR_NOT_FOUND, "no built-in chat format '%s'", name), false;
        src->ptr = f->template, src->len = strlen(f->template);
        return true;
    }
    src->ptr = spec, src->len = spec_len;
    return true;
}

/* json[0..json_len): the messages; spec[0..spec_len): "" (the model's
 * template), a built-in format's name, or a template's source. ymd: the date
 * strftime_now gives, as YYYYMMDD. Returns the text's length (tokenize 0; the
 * text is at ww_chat_text()) or the number of ids in ww_ids (tokenize 1), or -1. */
API int32_t ww_chat(ww_model *m, const char *json, uint32_t json_len, const char *spec, uint32_t spec_len,
                    int32_t add_generation_prompt, int32_t tokenize, int32_t ymd) {
    free(chat_text);
    chat_text = NULL;
    wisp_error *err = &m->err;
    wisp_str chosen;
    if (!ww_template_source(m, spec, spec_len, &chosen)) return -1;
    const char *src = chosen.ptr;
    size_t src_len = chosen.len;
    /* everything this call needs, freed at the end */
    wisp_json j;
    size_t need = 0, bytes = 0, n_msgs = 0, len = 0, n_spans = 0, n_ids = 0;
    wisp_json_parse(&j, json, json_len, NULL, 0, &need, err);
    wisp_json_node *nodes = need ? malloc(need * sizeof *nodes) : NULL;
    wisp_chat_message *msgs = malloc((need / 5 + 1) * sizeof *msgs);
    char *text = malloc((size_t)json_len + 1), *bos = token_text(m, wisp_tokenizer_bos(wisp_ctx_tokenizer(m->ctx)));
    char *eos = token_text(m, wisp_tokenizer_eos(wisp_ctx_tokenizer(m->ctx)));
    void *mem = NULL, *scratch = NULL;
    char *out = NULL;
    wisp_text_span *spans = malloc((need + 8) * sizeof *spans);
    wisp_template *t = NULL;
    int32_t result = -1;
    wisp_status s = !nodes || !msgs || !text || !spans ? wisp_fail(err, WISP_ERR_CAPACITY, "out of memory") : WISP_OK;
    if (!s) s = wisp_json_parse(&j, json, json_len, nodes, need, NULL, err);
    if (!s) s = wisp_chat_messages_from_json(&j, 0, msgs, need / 5 + 1, &n_msgs, text, (size_t)json_len + 1, err);
    if (!s) s = wisp_template_plan(src, src_len, NULL, &bytes, err);
    if (!s) s = (mem = ww_alloc(bytes)) ? wisp_template_init(&t, mem, bytes, src, src_len, NULL, err)
                                        : wisp_fail(err, WISP_ERR_CAPACITY, "out of memory");
    wisp_template_vars vars = {msgs, n_msgs, add_generation_prompt != 0, bos, eos, ymd / 10000, ymd / 100 % 100, ymd % 100, NULL, 0};
    for (size_t cap = 4096 + 2 * (size_t)json_len; !s;) { /* grow the text until it fits */
        free(out);
        if (!(out = malloc(cap))) { s = wisp_fail(err, WISP_ERR_CAPACITY, "out of memory"); break; }
        s = wisp_template_render_spans(t, &vars, out, cap, &len, spans, need + 8, &n_spans, err);
        if (s == WISP_ERR_CAPACITY && strstr(err->message, "rendered text") && cap < ((size_t)1 << 28)) { s = WISP_OK; cap *= 4; continue; }
        break;
    }
    if (!s && !tokenize) {
        chat_text = out;
        out = NULL;
        result = (int32_t)len;
    } else if (!s) {
        const wisp_tokenizer *tok = wisp_ctx_tokenizer(m->ctx);
        unsigned flags = 0;
        int32_t b = wisp_tokenizer_bos(tok);
        if (wisp_tokenizer_add_bos_default(tok) && b >= 0 && !(bos && len >= strlen(bos) && memcmp(out, bos, strlen(bos)) == 0))
            flags |= WISP_TOKENIZE_ADD_BOS; /* unless the template wrote it */
        size_t sb = wisp_tokenizer_scratch_bytes(tok, len), cap = (size_t)wisp_ctx_config(m->ctx)->n_ctx;
        s = (scratch = malloc(sb)) ? wisp_tokenize_literal(tok, out, len, flags, spans, n_spans, m->ids, cap, &n_ids, scratch,
                                                           sb, err)
                                   : wisp_fail(err, WISP_ERR_CAPACITY, "out of memory");
        if (s == WISP_ERR_CAPACITY && n_ids > cap)
            wisp_fail(err, s, "the conversation is %zu tokens but the context holds %zu", n_ids, cap);
        if (!s) result = (int32_t)n_ids;
    }
    free(scratch), free(out), free(spans), ww_free(mem), free(eos), free(bos), free(text), free(msgs), free(nodes);
    return result;
}

API const char *ww_chat_text(void) { return chat_text ? chat_text : ""; }
