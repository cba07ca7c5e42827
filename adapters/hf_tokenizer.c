#include "hf_tokenizer.h"

#include <stdarg.h>
#include <string.h>

#include "gguf_write.h"
#include "half.h"
#include "tokenizer.h"

#define MAX_IDS (1 << 24)
#define NO_NODE UINT32_MAX

static size_t round8(size_t n) { return (n + 7) & ~(size_t)7; }

static void note(wisp_hf_tokenizer *t, const char *fmt, ...) {
    if (t->n_notes >= WISP_HF_MAX_NOTES) return;
    va_list ap;
    va_start(ap, fmt);
    wisp_vformat(t->notes[t->n_notes++], sizeof t->notes[0], fmt, ap);
    va_end(ap);
}

/* ---- step 1: node memory ------------------------------------------------ */

static wisp_status count_nodes(const char *text, size_t len, const char *what, size_t *n, wisp_error *err) {
    wisp_json j;
    *n = 0;
    wisp_status st = wisp_json_parse(&j, text, len, NULL, 0, n, err);
    if (st && st != WISP_ERR_CAPACITY) {
        wisp_error_prefix(err, "%s", what);
        return st;
    }
    return WISP_OK;
}

wisp_status wisp_hf_tokenizer_nodes(const char *json, size_t len, const wisp_hf_tokenizer_opts *opts, size_t *bytes,
                                    wisp_error *err) {
    size_t a, b = 0;
    wisp_status st = count_nodes(json, len, "tokenizer.json", &a, err);
    if (!st && opts && opts->config) st = count_nodes(opts->config, opts->config_len, "tokenizer_config.json", &b, err);
    *bytes = round8(a * sizeof(wisp_json_node)) + round8(b * sizeof(wisp_json_node));
    return st;
}

/* ---- step 2: parse and detect ------------------------------------------- */

static bool type_is(const wisp_json *j, int64_t obj, const char *type) {
    return wisp_json_string_eq(j, wisp_json_get(j, obj, "type"), type);
}

/* The members of a pre-tokenizer / normalizer / decoder: itself, or the
 * list of a Sequence. Returns the count; items[] gets up to cap nodes. */
static int flatten(const wisp_json *j, int64_t node, const char *list_key, int64_t *items, int cap) {
    if (!wisp_json_is(j, node, WISP_JSON_OBJECT)) return 0;
    if (!type_is(j, node, "Sequence")) {
        items[0] = node;
        return 1;
    }
    int n = 0;
    int64_t arr = wisp_json_get(j, node, list_key);
    for (int64_t e = wisp_json_first(j, arr); e >= 0 && n < cap; e = wisp_json_next(j, e)) items[n++] = e;
    return n;
}

static bool has_type(const wisp_json *j, int64_t node, const char *list_key, const char *type) {
    int64_t items[16];
    int n = flatten(j, node, list_key, items, 16);
    for (int i = 0; i < n; i++)
        if (type_is(j, items[i], type)) return true;
    return false;
}

static bool is_true(const wisp_json *j, int64_t node) { return wisp_json_is(j, node, WISP_JSON_TRUE); }

/* Hugging Face's spelling of the Llama 3 and Qwen2 split regexes. */
static const char LLAMA3_SPLIT[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                   "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char QWEN2_SPLIT[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                                  "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static bool byte_level_regex(const wisp_json *j, int64_t bl, bool want_regex) {
    int64_t r = wisp_json_get(j, bl, "use_regex");
    bool use_regex = r < 0 || is_true(j, r); /* HF's default is true */
    return use_regex == want_regex && !is_true(j, wisp_json_get(j, bl, "add_prefix_space"));
}

/* tokenizer.ggml.pre from the pre_tokenizer structure, or NULL. */
static const char *detect_pre(const wisp_json *j, int64_t pt) {
    int64_t it[16];
    int n = flatten(j, pt, "pretokenizers", it, 16);
    if (n == 1 && type_is(j, it[0], "ByteLevel") && byte_level_regex(j, it[0], true)) return "gpt-2";
    if (n == 2 && type_is(j, it[0], "Digits") && is_true(j, wisp_json_get(j, it[0], "individual_digits")) &&
        type_is(j, it[1], "ByteLevel") && byte_level_regex(j, it[1], true))
        return "smollm";
    if (n == 2 && type_is(j, it[0], "Split") && type_is(j, it[1], "ByteLevel") && byte_level_regex(j, it[1], false)) {
        int64_t re = wisp_json_get(j, wisp_json_get(j, it[0], "pattern"), "Regex");
        if (wisp_json_string_eq(j, re, LLAMA3_SPLIT)) return "llama-bpe";
        if (wisp_json_string_eq(j, re, QWEN2_SPLIT)) return "qwen2";
    }
    return NULL;
}

/* Id of a token text in the vocabulary or the added tokens; -1 if none. */
static int32_t lookup(const wisp_hf_tokenizer *t, const char *text) {
    const wisp_json *j = &t->json;
    int64_t v = wisp_json_get(j, t->vocab, text);
    int64_t id;
    if (v >= 0 && wisp_json_int(j, v, &id)) return (int32_t)id;
    for (int64_t e = wisp_json_first(j, t->added); e >= 0; e = wisp_json_next(j, e))
        if (wisp_json_string_eq(j, wisp_json_get(j, e, "content"), text) && wisp_json_int(j, wisp_json_get(j, e, "id"), &id))
            return (int32_t)id;
    return -1;
}

/* A token named by the config: a string, or an object with "content". */
static int32_t config_token(const wisp_hf_tokenizer *t, const char *key) {
    const wisp_json *c = &t->config;
    int64_t v = wisp_json_get(c, 0, key);
    if (wisp_json_is(c, v, WISP_JSON_OBJECT)) v = wisp_json_get(c, v, "content");
    if (!wisp_json_is(c, v, WISP_JSON_STRING)) return -1;
    char text[256];
    if (wisp_json_string(c, v, text, sizeof text) >= sizeof text) return -1;
    return lookup(t, text);
}

static int8_t config_flag(const wisp_json *c, const char *key) {
    bool b;
    return wisp_json_bool(c, wisp_json_get(c, 0, key), &b) ? (int8_t)b : -1;
}

/* The id of a TemplateProcessing item if it is a special token. */
static int32_t template_special(const wisp_json *j, int64_t tp, int64_t item) {
    int64_t st = wisp_json_get(j, item, "SpecialToken");
    if (st < 0) return -1;
    int64_t name = wisp_json_get(j, st, "id");
    char text[256];
    if (wisp_json_string(j, name, text, sizeof text) >= sizeof text) return -1;
    int64_t ids = wisp_json_get(j, wisp_json_get(j, wisp_json_get(j, tp, "special_tokens"), text), "ids");
    int64_t id;
    return wisp_json_int(j, wisp_json_at(j, ids, 0), &id) ? (int32_t)id : -1;
}

/* bos/eos and whether they are added, from a TemplateProcessing post-processor. */
static void from_post_processor(wisp_hf_tokenizer *t) {
    const wisp_json *j = &t->json;
    int64_t items[16];
    int n = flatten(j, wisp_json_get(j, 0, "post_processor"), "processors", items, 16);
    for (int i = 0; i < n; i++) {
        if (!type_is(j, items[i], "TemplateProcessing")) continue;
        int64_t single = wisp_json_get(j, items[i], "single");
        uint32_t count = wisp_json_is(j, single, WISP_JSON_ARRAY) ? j->nodes[single].count : 0;
        if (!count) continue;
        int32_t first = template_special(j, items[i], wisp_json_at(j, single, 0));
        int32_t last = count > 1 ? template_special(j, items[i], wisp_json_at(j, single, count - 1)) : -1;
        if (t->add_bos < 0) t->add_bos = first >= 0;
        if (t->add_eos < 0) t->add_eos = last >= 0;
        if (first >= 0 && t->bos < 0) t->bos = first;
        if (last >= 0 && t->eos < 0) t->eos = last;
        return;
    }
    /* no template: Hugging Face adds nothing */
    if (t->add_bos < 0 && n == 0) t->add_bos = 0;
    if (t->add_eos < 0 && n == 0) t->add_eos = 0;
}

static wisp_status check_ids(wisp_hf_tokenizer *t, int32_t *max_id, wisp_error *err) {
    const wisp_json *j = &t->json;
    int64_t id;
    *max_id = -1;
    for (int64_t k = wisp_json_first(j, t->vocab); k >= 0; k = wisp_json_next(j, k + 1)) {
        if (!wisp_json_int(j, k + 1, &id) || id < 0 || id >= MAX_IDS) {
            char name[64];
            wisp_json_string(j, k, name, sizeof name);
            return wisp_fail(err, WISP_ERR_FORMAT, "tokenizer.json: vocab['%s'] is not a token id", name);
        }
        if (id > *max_id) *max_id = (int32_t)id;
    }
    for (int64_t e = wisp_json_first(j, t->added); e >= 0; e = wisp_json_next(j, e)) {
        if (!wisp_json_int(j, wisp_json_get(j, e, "id"), &id) || id < 0 || id >= MAX_IDS ||
            !wisp_json_is(j, wisp_json_get(j, e, "content"), WISP_JSON_STRING))
            return wisp_fail(err, WISP_ERR_FORMAT, "tokenizer.json: an added token lacks a valid id or content");
        if (id > *max_id) *max_id = (int32_t)id;
    }
    return WISP_OK;
}

static wisp_status check_merges(const wisp_hf_tokenizer *t, wisp_error *err) {
    const wisp_json *j = &t->json;
    int64_t i = 0;
    for (int64_t e = wisp_json_first(j, t->merges); e >= 0; e = wisp_json_next(j, e), i++) {
        bool ok;
        if (wisp_json_is(j, e, WISP_JSON_STRING)) {
            const wisp_json_node *n = &j->nodes[e];
            ok = memchr(j->text + n->start, ' ', n->end - n->start) != NULL;
        } else {
            ok = wisp_json_is(j, e, WISP_JSON_ARRAY) && j->nodes[e].count == 2 &&
                 wisp_json_is(j, e + 1, WISP_JSON_STRING) && wisp_json_is(j, j->nodes[e + 1].after, WISP_JSON_STRING);
        }
        if (!ok)
            return wisp_fail(err, WISP_ERR_FORMAT, "tokenizer.json: merge %lld is neither \"left right\" nor "
                                                   "[left, right]",
                             (long long)i);
        /* bounded so the writer's buffers hold them whole (spaces in array parts grow to 2 bytes) */
        bool fits = wisp_json_is(j, e, WISP_JSON_STRING)
                        ? wisp_json_string(j, e, NULL, 0) < WISP_HF_MAX_TOKEN_BYTES
                        : wisp_json_string(j, e + 1, NULL, 0) < WISP_HF_MAX_TOKEN_BYTES / 4 &&
                              wisp_json_string(j, j->nodes[e + 1].after, NULL, 0) < WISP_HF_MAX_TOKEN_BYTES / 4;
        if (!fits)
            return wisp_fail(err, WISP_ERR_UNSUPPORTED, "tokenizer.json: merge %lld is longer than wisp accepts",
                             (long long)i);
    }
    return WISP_OK;
}

/* Slots of the spm text -> id hash: a power of two, at least twice the tokens. */
static size_t hash_slots(int32_t n_vocab) {
    size_t n = 16;
    while (n < 2 * (size_t)n_vocab) n *= 2;
    return n;
}

wisp_status wisp_hf_tokenizer_open(wisp_hf_tokenizer *t, const char *json, size_t len,
                                   const wisp_hf_tokenizer_opts *opts, void *nodes, size_t node_bytes,
                                   wisp_error *err) {
    memset(t, 0, sizeof *t);
    wisp_hf_tokenizer_opts none = {0};
    if (!opts) opts = &none;
    size_t a, b = 0, need;
    wisp_status st = wisp_hf_tokenizer_nodes(json, len, opts, &need, err);
    if (st) return st;
    if (!nodes || (uintptr_t)nodes % 8 || node_bytes < need)
        return wisp_fail(err, WISP_ERR_CAPACITY, "tokenizer.json needs %zu bytes of JSON nodes, got %zu", need,
                         node_bytes);
    count_nodes(json, len, "tokenizer.json", &a, err);
    if (opts->config) count_nodes(opts->config, opts->config_len, "tokenizer_config.json", &b, err);
    wisp_json_node *n1 = nodes, *n2 = (wisp_json_node *)((uint8_t *)nodes + round8(a * sizeof(wisp_json_node)));
    if ((st = wisp_json_parse(&t->json, json, len, n1, a, NULL, err))) return st;
    if (opts->config && (st = wisp_json_parse(&t->config, opts->config, opts->config_len, n2, b, NULL, err))) {
        wisp_error_prefix(err, "tokenizer_config.json");
        return st;
    }
    const wisp_json *j = &t->json;
    int64_t model = wisp_json_get(j, 0, "model");
    if (!wisp_json_is(j, model, WISP_JSON_OBJECT))
        return wisp_fail(err, WISP_ERR_FORMAT, "tokenizer.json has no \"model\" object");
    int64_t mtype = wisp_json_get(j, model, "type");
    if (mtype >= 0 && !wisp_json_string_eq(j, mtype, "BPE")) {
        char name[32];
        wisp_json_string(j, mtype, name, sizeof name);
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "tokenizer.json model type '%s': wisp imports BPE tokenizers "
                                                    "(byte-level or SentencePiece-style)",
                         name);
    }
    t->vocab = wisp_json_get(j, model, "vocab");
    t->merges = wisp_json_get(j, model, "merges");
    t->added = wisp_json_get(j, 0, "added_tokens");
    t->chat_template = -1;
    if (!wisp_json_is(j, t->vocab, WISP_JSON_OBJECT) || !wisp_json_is(j, t->merges, WISP_JSON_ARRAY))
        return wisp_fail(err, WISP_ERR_FORMAT, "tokenizer.json: model.vocab must be an object and model.merges a list");
    if (t->added >= 0 && !wisp_json_is(j, t->added, WISP_JSON_ARRAY))
        return wisp_fail(err, WISP_ERR_FORMAT, "tokenizer.json: added_tokens must be a list");
    if (is_true(j, wisp_json_get(j, model, "ignore_merges")))
        note(t, "tokenizer.json sets ignore_merges (as Llama 3 does); the pre-tokenizer name decides it in GGUF");

    int64_t pt = wisp_json_get(j, 0, "pre_tokenizer"), dec = wisp_json_get(j, 0, "decoder"),
            norm = wisp_json_get(j, 0, "normalizer");
    bool byte_level = has_type(j, pt, "pretokenizers", "ByteLevel") || has_type(j, dec, "decoders", "ByteLevel");
    t->spm = !byte_level && (is_true(j, wisp_json_get(j, model, "byte_fallback")) ||
                             has_type(j, pt, "pretokenizers", "Metaspace") || has_type(j, dec, "decoders", "Metaspace"));
    if (!byte_level && !t->spm)
        return wisp_fail(err, WISP_ERR_UNSUPPORTED,
                         "tokenizer.json is neither byte-level BPE (a ByteLevel pre-tokenizer) nor SentencePiece BPE "
                         "(byte_fallback / Metaspace)");
    if (t->spm) {
        /* the "▁" prefix: Metaspace's prepend_scheme / add_prefix_space, or a Prepend normalizer */
        int64_t it[16];
        int n = flatten(j, pt, "pretokenizers", it, 16);
        for (int i = 0; i < n; i++)
            if (type_is(j, it[i], "Metaspace")) {
                int64_t scheme = wisp_json_get(j, it[i], "prepend_scheme");
                t->add_space_prefix = scheme >= 0 ? !wisp_json_string_eq(j, scheme, "never")
                                                  : is_true(j, wisp_json_get(j, it[i], "add_prefix_space"));
            }
        if (has_type(j, norm, "normalizers", "Prepend")) t->add_space_prefix = true;
    } else if (opts->pre) {
        if (strlen(opts->pre) >= sizeof t->pre) return wisp_fail(err, WISP_ERR_ARG, "pre-tokenizer name too long");
        strcpy(t->pre, opts->pre);
    } else {
        const char *pre = detect_pre(j, pt);
        if (!pre)
            return wisp_fail(err, WISP_ERR_UNSUPPORTED,
                             "tokenizer.json: pre-tokenizer not recognised (known: GPT-2 ByteLevel, Digits + "
                             "ByteLevel, the Llama 3 and Qwen2 splits); name the matching llama.cpp pre-tokenizer "
                             "explicitly");
        strcpy(t->pre, pre);
    }
    int32_t max_id;
    if ((st = check_ids(t, &max_id, err))) return st;
    if ((st = check_merges(t, err))) return st;
    t->n_vocab = max_id + 1;
    if (opts->n_vocab > 0) {
        if (opts->n_vocab < t->n_vocab)
            return wisp_fail(err, WISP_ERR_SHAPE, "tokenizer.json has token ids up to %d but the model has %d tokens",
                             (int)max_id, (int)opts->n_vocab);
        t->n_vocab = opts->n_vocab;
    }
    if (t->n_vocab == 0) return wisp_fail(err, WISP_ERR_FORMAT, "tokenizer.json has no tokens");
    t->n_merges = (int32_t)j->nodes[t->merges].count;

    /* special tokens */
    t->bos = t->eos = t->unk = t->pad = -1;
    t->add_bos = t->add_eos = -1;
    int64_t unk = wisp_json_get(j, model, "unk_token");
    if (wisp_json_is(j, unk, WISP_JSON_STRING)) {
        char text[256];
        if (wisp_json_string(j, unk, text, sizeof text) < sizeof text) t->unk = lookup(t, text);
    }
    if (opts->config) {
        const wisp_json *c = &t->config;
        if (!wisp_json_is(c, 0, WISP_JSON_OBJECT))
            return wisp_fail(err, WISP_ERR_FORMAT, "tokenizer_config.json must hold a JSON object");
        t->bos = config_token(t, "bos_token");
        t->eos = config_token(t, "eos_token");
        int32_t u = config_token(t, "unk_token");
        if (u >= 0) t->unk = u;
        t->pad = config_token(t, "pad_token");
        t->add_bos = config_flag(c, "add_bos_token");
        t->add_eos = config_flag(c, "add_eos_token");
        int64_t ct = wisp_json_get(c, 0, "chat_template");
        if (wisp_json_is(c, ct, WISP_JSON_ARRAY)) { /* [{name, template}]: the default one */
            int64_t def = -1;
            for (int64_t e = wisp_json_first(c, ct); e >= 0; e = wisp_json_next(c, e))
                if (wisp_json_string_eq(c, wisp_json_get(c, e, "name"), "default")) def = wisp_json_get(c, e, "template");
            if (def < 0) note(t, "tokenizer_config.json: no chat template named 'default'; none written");
            if (c->nodes[ct].count > 1) note(t, "tokenizer_config.json: only the default chat template is written");
            ct = def;
        }
        if (wisp_json_is(c, ct, WISP_JSON_STRING)) t->chat_template = ct;
    }
    from_post_processor(t);
    t->table_bytes = round8((size_t)t->n_vocab * 4) + round8((size_t)t->n_vocab);
    if (t->spm) t->table_bytes += round8((size_t)t->n_vocab * 4) + hash_slots(t->n_vocab) * 4;
    if (t->chat_template >= 0)
        t->table_bytes += round8(wisp_json_string(&t->config, t->chat_template, NULL, 0) + 1);
    return WISP_OK;
}

/* ---- step 3: id tables -------------------------------------------------- */

/* llama.cpp's converter treats these added tokens as control even when the
 * tokenizer does not mark them special. */
static bool looks_special(const char *s, size_t n) {
    static const char *const names[] = {"<pad>", "<mask>", "<2mass>", "[@BOS@]"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strlen(names[i]) == n && memcmp(s, names[i], n) == 0) return true;
    if (n >= 4 && memcmp(s, "<|", 2) == 0 && memcmp(s + n - 2, "|>", 2) == 0) return true;
    if (n >= 8 && memcmp(s, "<\xef\xbd\x9c", 4) == 0 && memcmp(s + n - 4, "\xef\xbd\x9c>", 4) == 0) return true;
    if (n >= 8 && memcmp(s, "<unused", 7) == 0 && s[n - 1] == '>') return true;
    return false;
}

static bool is_byte_token(const char *s, size_t n) {
    static const char hex[] = "0123456789ABCDEFabcdef";
    return n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && s[3] && s[4] && strchr(hex, s[3]) && strchr(hex, s[4]);
}

/* FNV-1a over bytes, for the spm score lookup. */
static uint32_t hash_bytes(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* Scores for SentencePiece BPE: -rank of the first merge producing a token,
 * found through a text -> id hash (mask + 1 slots, zeroed). Normal tokens
 * that no merge produces get -1e9: Hugging Face never forms them. */
static wisp_status spm_scores(wisp_hf_tokenizer *t, uint32_t *hash, uint32_t mask, wisp_error *err) {
    const wisp_json *j = &t->json;
    char left[WISP_HF_MAX_TOKEN_BYTES + 1], right[WISP_HF_MAX_TOKEN_BYTES + 1];
    for (int32_t id = 0; id < t->n_vocab; id++) {
        t->score[id] = 0.0f;
        if (t->id_node[id] == NO_NODE || t->id_type[id] != WISP_TOKEN_NORMAL) continue;
        size_t n = wisp_json_string(j, t->id_node[id], left, sizeof left);
        uint32_t h = hash_bytes(left, n) & mask;
        while (hash[h]) h = (h + 1) & mask;
        hash[h] = (uint32_t)id + 1;
        t->score[id] = -1e9f; /* reachable only through a merge, below */
    }
    int32_t rank = 0;
    for (int64_t e = wisp_json_first(j, t->merges); e >= 0; e = wisp_json_next(j, e), rank++) {
        size_t nl, nr;
        if (wisp_json_is(j, e, WISP_JSON_STRING)) {
            nl = wisp_json_string(j, e, left, sizeof left);
            if (nl >= sizeof left) continue; /* longer than any token: produces none */
            char *sp = memchr(left, ' ', nl);
            if (!sp) return wisp_fail(err, WISP_ERR_FORMAT, "merge %d has no space", (int)rank);
            nr = nl - (size_t)(sp - left) - 1;
            memmove(right, sp + 1, nr);
            nl = (size_t)(sp - left);
        } else {
            nl = wisp_json_string(j, e + 1, left, sizeof left);
            nr = wisp_json_string(j, j->nodes[e + 1].after, right, sizeof right);
        }
        if (nl + nr > WISP_HF_MAX_TOKEN_BYTES) continue;
        memcpy(left + nl, right, nr);
        size_t n = nl + nr;
        char cand[WISP_HF_MAX_TOKEN_BYTES + 1];
        for (uint32_t h = hash_bytes(left, n) & mask; hash[h]; h = (h + 1) & mask) {
            int32_t id = (int32_t)hash[h] - 1;
            if (wisp_json_string(j, t->id_node[id], cand, sizeof cand) == n && memcmp(cand, left, n) == 0) {
                if (t->score[id] == -1e9f) t->score[id] = -(float)rank;
                break;
            }
        }
    }
    return WISP_OK;
}

wisp_status wisp_hf_tokenizer_index(wisp_hf_tokenizer *t, void *mem, size_t mem_bytes, wisp_error *err) {
    if (!mem || (uintptr_t)mem % 8 || mem_bytes < t->table_bytes)
        return wisp_fail(err, WISP_ERR_CAPACITY, "tokenizer tables need %zu bytes (8-byte aligned), got %zu",
                         t->table_bytes, mem_bytes);
    const wisp_json *j = &t->json;
    t->id_node = mem;
    t->id_type = (uint8_t *)mem + round8((size_t)t->n_vocab * 4);
    for (int32_t i = 0; i < t->n_vocab; i++) t->id_node[i] = NO_NODE, t->id_type[i] = WISP_TOKEN_NORMAL;
    int64_t id;
    char text[WISP_HF_MAX_TOKEN_BYTES + 1];
    for (int64_t k = wisp_json_first(j, t->vocab); k >= 0; k = wisp_json_next(j, k + 1)) {
        wisp_json_int(j, k + 1, &id);
        if (t->id_node[id] != NO_NODE)
            return wisp_fail(err, WISP_ERR_FORMAT, "tokenizer.json: two vocabulary entries have id %lld", (long long)id);
        t->id_node[id] = (uint32_t)k;
    }
    for (int64_t e = wisp_json_first(j, t->added); e >= 0; e = wisp_json_next(j, e)) {
        wisp_json_int(j, wisp_json_get(j, e, "id"), &id);
        int64_t content = wisp_json_get(j, e, "content");
        size_t n = wisp_json_string(j, content, text, sizeof text);
        if (t->id_node[id] != NO_NODE && !wisp_json_string_eq(j, t->id_node[id], n < sizeof text ? text : ""))
            return wisp_fail(err, WISP_ERR_FORMAT, "tokenizer.json: added token %lld differs from the vocabulary's",
                             (long long)id);
        t->id_node[id] = (uint32_t)content;
        bool special = is_true(j, wisp_json_get(j, e, "special"));
        t->id_type[id] = special || looks_special(text, n) ? WISP_TOKEN_CONTROL : WISP_TOKEN_USER_DEFINED;
    }
    t->n_holes = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        if (t->id_node[i] == NO_NODE) {
            t->n_holes++;
            t->id_type[i] = WISP_TOKEN_UNUSED;
            continue;
        }
        size_t n = wisp_json_string(j, t->id_node[i], text, sizeof text);
        if (n > WISP_HF_MAX_TOKEN_BYTES)
            return wisp_fail(err, WISP_ERR_UNSUPPORTED, "tokenizer.json: token %d is %zu bytes long (wisp takes up to %d)",
                             (int)i, n, WISP_HF_MAX_TOKEN_BYTES);
        if (t->spm && t->id_type[i] == WISP_TOKEN_NORMAL && is_byte_token(text, n)) t->id_type[i] = WISP_TOKEN_BYTE;
    }
    if (t->unk >= 0 && t->unk < t->n_vocab) t->id_type[t->unk] = WISP_TOKEN_UNKNOWN;
    if (t->n_holes) note(t, "%d token ids have no token; they are written as [PAD<id>] (unused)", (int)t->n_holes);
    uint8_t *next = (uint8_t *)t->id_type + round8((size_t)t->n_vocab);
    if (t->spm) {
        t->score = (float *)next;
        uint32_t *hash = (uint32_t *)(next + round8((size_t)t->n_vocab * 4));
        size_t slots = hash_slots(t->n_vocab);
        memset(hash, 0, slots * 4);
        next = (uint8_t *)(hash + slots);
        wisp_status st = spm_scores(t, hash, (uint32_t)(slots - 1), err);
        if (st) return st;
    }
    if (t->chat_template >= 0) {
        t->template_text = (char *)next;
        t->template_len = wisp_json_string(&t->config, t->chat_template, t->template_text,
                                           wisp_json_string(&t->config, t->chat_template, NULL, 0) + 1);
    }
    return WISP_OK;
}

/* ---- step 4: write ------------------------------------------------------ */

uint64_t wisp_hf_tokenizer_kv_count(const wisp_hf_tokenizer *t) {
    uint64_t n = 3; /* model, tokens, token_type */
    n += 2;         /* scores + add_space_prefix, or pre + merges */
    n += (t->bos >= 0) + (t->eos >= 0) + (t->unk >= 0) + (t->pad >= 0);
    n += (t->add_bos >= 0) + (t->add_eos >= 0) + (t->chat_template >= 0);
    return n;
}

/* A token's text as written: the vocabulary's; user-defined "▁" as spaces (llama.cpp's converter). */
static wisp_str token_text(void *user, uint64_t i) {
    wisp_hf_tokenizer *t = user;
    wisp_str s;
    if (t->id_node[i] == NO_NODE) {
        s.len = wisp_format(t->text, sizeof t->text, "[PAD%llu]", (unsigned long long)i);
        s.ptr = t->text;
        return s;
    }
    size_t n = wisp_json_string(&t->json, t->id_node[i], t->text, sizeof t->text);
    if (t->id_type[i] == WISP_TOKEN_USER_DEFINED) {
        size_t w = 0;
        for (size_t r = 0; r < n; r++) {
            if (r + 2 < n && memcmp(t->text + r, "\xe2\x96\x81", 3) == 0) {
                t->text[w++] = ' ';
                r += 2;
            } else {
                t->text[w++] = t->text[r];
            }
        }
        n = w;
    }
    s.ptr = t->text;
    s.len = n;
    return s;
}

/* "left right"; an array merge's parts have their spaces spelled as GPT-2's U+0120. */
static wisp_str merge_text(void *user, uint64_t i) {
    wisp_hf_tokenizer *t = user;
    const wisp_json *j = &t->json;
    /* called for i = 0, 1, 2, ...: walk on from the previous merge instead of from the start */
    int64_t e = i == 0 || t->merge_cursor < 0 ? wisp_json_at(j, t->merges, (size_t)i) : wisp_json_next(j, t->merge_cursor);
    t->merge_cursor = e;
    wisp_str s = {t->text, 0};
    if (wisp_json_is(j, e, WISP_JSON_STRING)) {
        s.len = wisp_json_string(j, e, t->text, sizeof t->text);
        if (s.len >= sizeof t->text) s.len = sizeof t->text - 1;
        return s;
    }
    size_t n = 0;
    int64_t part[2] = {e + 1, j->nodes[e + 1].after};
    for (int p = 0; p < 2; p++) {
        char tmp[WISP_HF_MAX_TOKEN_BYTES / 2];
        size_t m = wisp_json_string(j, part[p], tmp, sizeof tmp);
        if (m >= sizeof tmp) m = sizeof tmp - 1;
        if (p) t->text[n++] = ' ';
        for (size_t k = 0; k < m && n + 2 < sizeof t->text; k++) {
            if (tmp[k] == ' ') {
                t->text[n++] = '\xc4';
                t->text[n++] = '\xa0';
            } else {
                t->text[n++] = tmp[k];
            }
        }
    }
    s.len = n;
    return s;
}

wisp_status wisp_hf_tokenizer_write(wisp_hf_tokenizer *t, wisp_sink *s, wisp_error *err) {
    if (!t->id_node) return wisp_fail(err, WISP_ERR_ARG, "wisp_hf_tokenizer_index has not run");
    wisp_status st;
    if ((st = wisp_gguf_write_kv_str(s, "tokenizer.ggml.model", t->spm ? "llama" : "gpt2", err))) return st;
    if (!t->spm && (st = wisp_gguf_write_kv_str(s, "tokenizer.ggml.pre", t->pre, err))) return st;
    if ((st = wisp_gguf_write_kv_str_array(s, "tokenizer.ggml.tokens", (uint64_t)t->n_vocab, token_text, t, err)))
        return st;
    if (t->spm) {
        if ((st = wisp_gguf_write_kv_array(s, "tokenizer.ggml.scores", WISP_GGUF_F32, t->score, (uint64_t)t->n_vocab,
                                           err)))
            return st;
    }
    if ((st = wisp_gguf_write_kv_array_begin(s, "tokenizer.ggml.token_type", WISP_GGUF_I32, (uint64_t)t->n_vocab, err)))
        return st;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        uint8_t v[4];
        wisp_store_u32(v, t->id_type[i]);
        if ((st = wisp_sink_write(s, v, 4, err))) return st;
    }
    t->merge_cursor = -1;
    if (!t->spm &&
        (st = wisp_gguf_write_kv_str_array(s, "tokenizer.ggml.merges", (uint64_t)t->n_merges, merge_text, t, err)))
        return st;
    if (t->spm && (st = wisp_gguf_write_kv_bool(s, "tokenizer.ggml.add_space_prefix", t->add_space_prefix, err)))
        return st;
    static const char *const id_keys[4] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                           "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id"};
    const int32_t ids[4] = {t->bos, t->eos, t->unk, t->pad};
    for (int k = 0; k < 4; k++)
        if (ids[k] >= 0 && (st = wisp_gguf_write_kv_u32(s, id_keys[k], (uint32_t)ids[k], err))) return st;
    if (t->add_bos >= 0 && (st = wisp_gguf_write_kv_bool(s, "tokenizer.ggml.add_bos_token", t->add_bos, err))) return st;
    if (t->add_eos >= 0 && (st = wisp_gguf_write_kv_bool(s, "tokenizer.ggml.add_eos_token", t->add_eos, err))) return st;
    if (t->chat_template >= 0 &&
        (st = wisp_gguf_write_kv_strn(s, "tokenizer.chat_template", t->template_text, t->template_len, err)))
        return st;
    return WISP_OK;
}
