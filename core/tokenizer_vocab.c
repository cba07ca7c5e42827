/* Loading a vocabulary from GGUF metadata: validation, the exact table plan,
 * and the lookups the encoders use (string -> id, (left, right) -> merge). */
#include <string.h>

#include "pretokenize.h"
#include "tokenizer_internal.h"
#include "unicode.h"

/* ---- lookups ---- */

static bool text_is(const wisp_tokenizer *tok, int32_t id, const void *a, size_t na, const void *b, size_t nb) {
    wisp_str t = tk_text(tok, id);
    return t.len == na + nb && memcmp(t.ptr, a, na) == 0 && (nb == 0 || memcmp(t.ptr + na, b, nb) == 0);
}

int32_t tk_lookup2(const wisp_tokenizer *tok, const void *a, size_t na, const void *b, size_t nb) {
    if (na + nb == 0 || na + nb > (size_t)tok->max_token_len) return -1;
    uint32_t h = tk_hash_end(tk_hash_bytes(tk_hash_bytes(TK_HASH_SEED, a, na), b, nb));
    uint32_t tag = tk_slot_tag(h);
    for (uint32_t i = h & tok->tok_hash_mask;; i = (i + 1) & tok->tok_hash_mask) {
        uint32_t slot = tok->tok_hash[i];
        if (slot == 0) return -1;
        if ((slot >> TK_ID_BITS) != tag) continue;
        int32_t id = (int32_t)(slot & ((1u << TK_ID_BITS) - 1)) - 1;
        if (text_is(tok, id, a, na, b, nb)) return id;
    }
}

int32_t tk_merge_rank(const wisp_tokenizer *tok, int32_t left, int32_t right) {
    uint32_t h = tk_pair_hash(left, right);
    for (uint32_t i = h & tok->merge_hash_mask;; i = (i + 1) & tok->merge_hash_mask) {
        uint32_t slot = tok->merge_hash[i];
        if (slot == 0) return -1;
        const int32_t *m = tok->merges + 3 * (size_t)(slot - 1);
        if (m[0] == left && m[1] == right) return (int32_t)(slot - 1);
    }
}

/* An element of an integer metadata array (types are i32 in practice). */
static int64_t read_int(const uint8_t *base, uint32_t elem, uint32_t i) {
    switch (elem) {
    case WISP_GGUF_U8: return base[i];
    case WISP_GGUF_I8: return (int8_t)base[i];
    case WISP_GGUF_U16: return wisp_load_u16(base + 2 * (size_t)i);
    case WISP_GGUF_I16: return (int16_t)wisp_load_u16(base + 2 * (size_t)i);
    case WISP_GGUF_U32: return wisp_load_u32(base + 4 * (size_t)i);
    case WISP_GGUF_I32: return (int32_t)wisp_load_u32(base + 4 * (size_t)i);
    case WISP_GGUF_U64: case WISP_GGUF_I64: return (int64_t)wisp_load_u64(base + 8 * (size_t)i);
    default: return -1;
    }
}

static int raw_type(const uint8_t *types, uint32_t elem, int32_t id) {
    if (!types) return WISP_TOKEN_NORMAL;
    int64_t t = read_int(types, elem, (uint32_t)id);
    return (t >= 0 && t <= WISP_TOKEN_BYTE) ? (int)t : WISP_TOKEN_UNDEFINED;
}

int tk_type(const wisp_tokenizer *tok, int32_t id) {
    for (int32_t i = 0; i < tok->n_forced_control; i++)
        if (tok->forced_control[i] == id) return WISP_TOKEN_CONTROL;
    return raw_type(tok->types, tok->types_elem, id);
}

/* ---- metadata ---- */

/* The metadata keys the tokenizer reads. They are collected in one walk over
 * the metadata: every lookup by name walks (and re-checks) all the arrays
 * before it, which for 100k-token vocabularies costs more than the rest of
 * initialisation together. */
enum {
    K_MODEL, K_PRE, K_TOKENS, K_SCORES, K_TYPES, K_MERGES, K_BOS, K_EOS, K_UNK, K_SEP, K_PAD, K_CLS, K_EOT, K_EOM,
    K_ADD_BOS, K_ADD_EOS, K_ADD_SPACE, K_NAME, K_COUNT
};
static const char *const key_names[K_COUNT] = {
    "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.scores",
    "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.seperator_token_id",
    "tokenizer.ggml.padding_token_id", "tokenizer.ggml.cls_token_id", "tokenizer.ggml.eot_token_id",
    "tokenizer.ggml.eom_token_id", "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
    "tokenizer.ggml.add_space_prefix", "general.name",
};

typedef struct tk_meta {
    wisp_gguf_kv kv[K_COUNT];
    bool has[K_COUNT];
    int kind, pre;
    unsigned pre_flags;
    uint32_t n_vocab, n_merges;
} tk_meta;

static bool is_int_type(uint32_t t) {
    return t == WISP_GGUF_U8 || t == WISP_GGUF_I8 || t == WISP_GGUF_U16 || t == WISP_GGUF_I16 || t == WISP_GGUF_U32 ||
           t == WISP_GGUF_I32 || t == WISP_GGUF_U64 || t == WISP_GGUF_I64;
}

static bool meta_str(const tk_meta *m, int k, wisp_str *out) {
    if (!m->has[k] || m->kv[k].type != WISP_GGUF_STRING) return false;
    out->len = wisp_load_u64(m->kv[k].value);
    out->ptr = (const char *)m->kv[k].value + 8;
    return true;
}

static bool meta_bool(const tk_meta *m, int k, bool *out) {
    int64_t v;
    if (!m->has[k] || m->kv[k].type == WISP_GGUF_ARRAY || m->kv[k].type == WISP_GGUF_STRING ||
        !wisp_gguf_kv_int(&m->kv[k], 0, &v))
        return false;
    *out = v != 0;
    return true;
}

static int shown_len(wisp_str s) { return (int)(s.len > 40 ? 40 : s.len); }

static wisp_status read_meta(const wisp_gguf *g, tk_meta *m, wisp_error *err) {
    memset(m, 0, sizeof *m);
    size_t cur = 0;
    wisp_gguf_kv kv;
    while (wisp_gguf_next_kv(g, &cur, &kv)) {
        for (int k = 0; k < K_COUNT; k++) {
            if (!m->has[k] && wisp_str_eq(kv.key, key_names[k])) {
                m->kv[k] = kv;
                m->has[k] = true;
                break;
            }
        }
    }

    wisp_str model;
    if (!meta_str(m, K_MODEL, &model))
        return wisp_fail(err, WISP_ERR_NOT_FOUND, "tokenizer.ggml.model is missing (or not a string)");
    if (wisp_str_eq(model, "llama")) m->kind = WISP_VOCAB_SPM;
    else if (wisp_str_eq(model, "gpt2")) m->kind = WISP_VOCAB_BPE;
    else if (wisp_str_eq(model, "bert")) m->kind = WISP_VOCAB_WPM;
    else
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "tokenizer.ggml.model '%.*s' is not supported (llama, gpt2, bert are)",
                         shown_len(model), model.ptr);

    const wisp_gguf_kv *tokens = &m->kv[K_TOKENS];
    if (!m->has[K_TOKENS]) return wisp_fail(err, WISP_ERR_NOT_FOUND, "tokenizer.ggml.tokens is missing");
    if (tokens->type != WISP_GGUF_ARRAY || tokens->elem_type != WISP_GGUF_STRING)
        return wisp_fail(err, WISP_ERR_FORMAT, "tokenizer.ggml.tokens must be an array of strings");
    if (tokens->count == 0 || tokens->count > TK_MAX_VOCAB)
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "tokenizer.ggml.tokens has %llu tokens (1..%d supported)",
                         (unsigned long long)tokens->count, TK_MAX_VOCAB);
    if (tokens->value_bytes > UINT32_MAX)
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "tokenizer.ggml.tokens takes more than 4 GiB");
    m->n_vocab = (uint32_t)tokens->count;

    const wisp_gguf_kv *scores = &m->kv[K_SCORES];
    if (m->has[K_SCORES]) {
        if (scores->type != WISP_GGUF_ARRAY || scores->elem_type != WISP_GGUF_F32)
            return wisp_fail(err, WISP_ERR_FORMAT, "tokenizer.ggml.scores must be an array of f32, not %s of %s",
                             wisp_gguf_vtype_name(scores->type), wisp_gguf_vtype_name(scores->elem_type));
        if (scores->count < m->n_vocab)
            return wisp_fail(err, WISP_ERR_FORMAT, "tokenizer.ggml.scores has %llu entries for %u tokens",
                             (unsigned long long)scores->count, m->n_vocab);
    }
    const wisp_gguf_kv *types = &m->kv[K_TYPES];
    if (m->has[K_TYPES]) {
        if (types->type != WISP_GGUF_ARRAY || !is_int_type(types->elem_type))
            return wisp_fail(err, WISP_ERR_FORMAT, "tokenizer.ggml.token_type must be an array of integers");
        if (types->count < m->n_vocab)
            return wisp_fail(err, WISP_ERR_FORMAT, "tokenizer.ggml.token_type has %llu entries for %u tokens",
                             (unsigned long long)types->count, m->n_vocab);
    }

    m->pre = WISP_PRETOK_DEFAULT;
    if (m->kind == WISP_VOCAB_BPE) {
        const wisp_gguf_kv *merges = &m->kv[K_MERGES];
        if (!m->has[K_MERGES])
            return wisp_fail(err, WISP_ERR_NOT_FOUND, "tokenizer.ggml.merges is missing (a gpt2 vocabulary needs it)");
        if (merges->type != WISP_GGUF_ARRAY || merges->elem_type != WISP_GGUF_STRING)
            return wisp_fail(err, WISP_ERR_FORMAT, "tokenizer.ggml.merges must be an array of strings");
        if (merges->count > INT32_MAX / 4)
            return wisp_fail(err, WISP_ERR_UNSUPPORTED, "tokenizer.ggml.merges has too many entries");
        m->n_merges = (uint32_t)merges->count;
        wisp_str pre;
        if (meta_str(m, K_PRE, &pre)) {
            m->pre = wisp_pretok_from_name(pre, &m->pre_flags);
            if (m->pre < 0)
                return wisp_fail(err, WISP_ERR_UNSUPPORTED, "pre-tokenizer '%.*s' (tokenizer.ggml.pre) is not supported",
                                 shown_len(pre), pre.ptr);
        }
    }
    return WISP_OK;
}

static uint32_t pow2_at_least(uint64_t n) {
    uint32_t c = 16;
    while (c < n) c *= 2;
    return c;
}

/* Tokens whose text marks the end of a turn; llama.cpp treats them as
 * end-of-generation and as control tokens whatever their stored type. */
typedef struct text_len {
    const char *text;
    size_t len;
} text_len;
#define TEXT(s) {s, sizeof(s) - 1}
static const text_len eog_texts[] = {
    TEXT("<|eot_id|>"), TEXT("<|im_end|>"), TEXT("<|end|>"), TEXT("<end_of_turn>"), TEXT("<|endoftext|>"),
    TEXT("<|eom_id|>"), TEXT("<EOT>"),
    TEXT("<\357\275\234end\342\226\201of\342\226\201sentence\357\275\234>"), /* DeepSeek */
};
#undef TEXT

static bool is_eog_text(wisp_str s) {
    if (s.len < 5 || s.len > 40) return false;
    for (size_t i = 0; i < sizeof eog_texts / sizeof eog_texts[0]; i++)
        if (s.len == eog_texts[i].len && memcmp(s.ptr, eog_texts[i].text, eog_texts[i].len) == 0) return true;
    return false;
}

static bool is_special_type(int t) {
    return t == WISP_TOKEN_CONTROL || t == WISP_TOKEN_USER_DEFINED || t == WISP_TOKEN_UNKNOWN;
}

static void add_eog(wisp_tokenizer *tok, int32_t id) {
    if (id < 0) return;
    for (int32_t i = 0; i < tok->n_eog; i++)
        if (tok->eog[i] == id) return;
    if (tok->n_eog < WISP_TOKENIZER_MAX_EOG) tok->eog[tok->n_eog++] = id;
}

/* Walk every token once: validate types, find the EOG-looking ones, count the
 * special tokens, and (when tables exist) fill the index and the hash. */
static wisp_status scan_tokens(const tk_meta *m, wisp_tokenizer *tok, uint32_t *tok_off, uint32_t *hash,
                               uint32_t hash_mask, uint32_t *n_special, wisp_error *err) {
    const uint8_t *pos = m->kv[K_TOKENS].value;
    const uint8_t *base = m->kv[K_TOKENS].value;
    const uint8_t *types = m->has[K_TYPES] ? m->kv[K_TYPES].value : NULL;
    *n_special = 0;
    tok->n_forced_control = 0;
    tok->n_eog = 0;
    tok->max_token_len = 0;
    for (uint32_t i = 0; i < m->n_vocab; i++) {
        const uint8_t *at = pos;
        wisp_str s = wisp_gguf_next_array_str(&pos);
        int64_t t = types ? read_int(types, m->kv[K_TYPES].elem_type, i) : WISP_TOKEN_NORMAL;
        if (t < 0 || t > WISP_TOKEN_BYTE)
            return wisp_fail(err, WISP_ERR_FORMAT, "token %u has type %lld (tokenizer.ggml.token_type allows 0..6)", i,
                             (long long)t);
        if (s.len > INT32_MAX / 2)
            return wisp_fail(err, WISP_ERR_UNSUPPORTED, "token %u is %llu bytes long", i, (unsigned long long)s.len);
        if (is_eog_text(s)) {
            add_eog(tok, (int32_t)i);
            if (t != WISP_TOKEN_CONTROL && tok->n_forced_control < WISP_TOKENIZER_MAX_FORCED) {
                tok->forced_control[tok->n_forced_control++] = (int32_t)i;
                t = WISP_TOKEN_CONTROL;
            }
        }
        if (is_special_type((int)t) && s.len > 0) (*n_special)++;
        if ((int32_t)s.len > tok->max_token_len) tok->max_token_len = (int32_t)s.len;
        if (!tok_off) continue;
        tok_off[i] = (uint32_t)(at - base);
        for (uint64_t k = 0; k < s.len; k++) tok->token_bytes[(uint8_t)s.ptr[k] >> 3] |= (uint8_t)(1u << (s.ptr[k] & 7));
        if (s.len == 0) continue; /* an empty token can never be matched */
        uint32_t h = tk_hash_end(tk_hash_bytes(TK_HASH_SEED, s.ptr, (size_t)s.len));
        uint32_t slot = (i + 1) | tk_slot_tag(h) << TK_ID_BITS;
        uint32_t j = h & hash_mask;
        for (; hash[j]; j = (j + 1) & hash_mask) {
            int32_t other = (int32_t)(hash[j] & ((1u << TK_ID_BITS) - 1)) - 1;
            if ((hash[j] >> TK_ID_BITS) == tk_slot_tag(h) && text_is(tok, other, s.ptr, (size_t)s.len, NULL, 0))
                break; /* a repeated text: the later token wins, as in llama.cpp */
        }
        hash[j] = slot;
    }
    return WISP_OK;
}

static wisp_status read_id(const tk_meta *m, int k, int32_t dflt, int32_t *out, wisp_error *err) {
    uint32_t n_vocab = m->n_vocab;
    *out = (dflt >= 0 && (uint32_t)dflt < n_vocab) ? dflt : -1;
    if (!m->has[k]) return WISP_OK;
    int64_t v;
    if (m->kv[k].type == WISP_GGUF_ARRAY || !wisp_gguf_kv_int(&m->kv[k], 0, &v))
        return wisp_fail(err, WISP_ERR_FORMAT, "%s must be an integer", key_names[k]);
    if (v == -1 || v == (int64_t)UINT32_MAX) { *out = -1; return WISP_OK; } /* "none" */
    if (v < 0 || v >= (int64_t)n_vocab)
        return wisp_fail(err, WISP_ERR_FORMAT, "%s = %lld is out of range (the vocabulary has %u tokens)", key_names[k],
                         (long long)v, n_vocab);
    *out = (int32_t)v;
    return WISP_OK;
}

static wisp_status read_special_ids(const tk_meta *m, wisp_tokenizer *tok, wisp_error *err) {
    wisp_status s;
    bool spm = m->kind == WISP_VOCAB_SPM, wpm = m->kind == WISP_VOCAB_WPM;
    int32_t cls;
    if ((s = read_id(m, K_CLS, wpm ? 101 : -1, &cls, err))) return s;
    if ((s = read_id(m, K_BOS, spm ? 1 : cls, &tok->bos, err))) return s;
    if ((s = read_id(m, K_EOS, spm ? 2 : -1, &tok->eos, err))) return s;
    if ((s = read_id(m, K_UNK, spm ? 0 : wpm ? 100 : -1, &tok->unk, err))) return s;
    if ((s = read_id(m, K_SEP, wpm ? 102 : -1, &tok->sep, err))) return s;
    if ((s = read_id(m, K_PAD, wpm ? 0 : -1, &tok->pad, err))) return s;
    if ((s = read_id(m, K_EOT, -1, &tok->eot, err))) return s;
    if ((s = read_id(m, K_EOM, -1, &tok->eom, err))) return s;
    if (wpm && tok->eos < 0) tok->eos = tok->sep;
    add_eog(tok, tok->eos);
    add_eog(tok, tok->eot);
    add_eog(tok, tok->eom);
    return WISP_OK;
}

static wisp_status load_merges(const tk_meta *m, wisp_tokenizer *tok, int32_t *merges, uint32_t *hash, wisp_error *err) {
    const uint8_t *pos = m->kv[K_MERGES].value;
    for (uint32_t r = 0; r < m->n_merges; r++) {
        wisp_str s = wisp_gguf_next_array_str(&pos);
        int shown = (int)(s.len > 60 ? 60 : s.len);
        uint64_t sp = 1;
        while (sp < s.len && s.ptr[sp] != ' ') sp++;
        if (sp >= s.len)
            return wisp_fail(err, WISP_ERR_FORMAT, "merge %u ('%.*s') is not two tokens separated by a space", r, shown, s.ptr);
        const char *b = s.ptr + sp + 1;
        size_t na = (size_t)sp, nb = (size_t)(s.len - sp - 1);
        int32_t left = tk_lookup(tok, s.ptr, na), right = tk_lookup(tok, b, nb);
        if (left < 0 || right < 0)
            return wisp_fail(err, WISP_ERR_FORMAT, "merge %u ('%.*s') names a token that is not in the vocabulary", r,
                             shown, s.ptr);
        /* merges usually list their results in vocabulary order: try the next id first */
        int32_t guess = r > 0 ? merges[3 * (size_t)(r - 1) + 2] + 1 : -1;
        int32_t merged = (guess >= 0 && guess < tok->n_vocab && text_is(tok, guess, s.ptr, na, b, nb))
                             ? guess
                             : tk_lookup2(tok, s.ptr, na, b, nb);
        if (merged < 0)
            return wisp_fail(err, WISP_ERR_FORMAT, "merge %u ('%.*s') makes a token that is not in the vocabulary", r,
                             shown, s.ptr);
        merges[3 * (size_t)r] = left;
        merges[3 * (size_t)r + 1] = right;
        merges[3 * (size_t)r + 2] = merged;
        uint32_t j = tk_pair_hash(left, right) & tok->merge_hash_mask;
        bool seen = false;
        for (; hash[j]; j = (j + 1) & tok->merge_hash_mask) {
            const int32_t *o = merges + 3 * (size_t)(hash[j] - 1);
            if (o[0] == left && o[1] == right) { seen = true; break; } /* a repeated pair keeps its first rank */
        }
        if (!seen) hash[j] = r + 1;
    }
    return WISP_OK;
}

static void fill_byte_tokens(wisp_tokenizer *tok, int32_t *byte_tok) {
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        int32_t id = -1;
        if (tok->kind == WISP_VOCAB_SPM) {
            char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
            char one = (char)b;
            id = tk_lookup(tok, name, 6);
            if (id < 0) id = tk_lookup(tok, &one, 1);
        } else if (tok->kind == WISP_VOCAB_BPE) {
            uint8_t u[4];
            size_t n = wisp_utf8_encode(wisp_byte_to_unicode((uint8_t)b), u);
            id = tk_lookup(tok, u, n);
        }
        byte_tok[b] = id;
    }
}

/* Special-token ids, longest text first (ties: lower id first), so that a
 * longer token claims its text before a shorter one can, as in llama.cpp. */
static bool special_before(const wisp_tokenizer *tok, int32_t a, int32_t b) {
    uint64_t la = tk_text(tok, a).len, lb = tk_text(tok, b).len;
    return la > lb || (la == lb && a < b);
}

static void sort_specials(const wisp_tokenizer *tok, int32_t *ids, int32_t n) {
    /* heapsort: O(n log n) whatever the input, no recursion, no memory */
    for (int32_t start = n / 2 - 1, end = n;; ) {
        int32_t root;
        if (start >= 0) {
            root = start--;
        } else {
            if (--end <= 0) break;
            int32_t t = ids[0]; ids[0] = ids[end]; ids[end] = t;
            root = 0;
        }
        for (;;) {
            int32_t child = 2 * root + 1;
            if (child >= end) break;
            if (child + 1 < end && special_before(tok, ids[child], ids[child + 1])) child++;
            if (!special_before(tok, ids[root], ids[child])) break;
            int32_t t = ids[root]; ids[root] = ids[child]; ids[child] = t;
            root = child;
        }
    }
}

static bool name_mentions_phi3(const tk_meta *m) {
    wisp_str name;
    if (!meta_str(m, K_NAME, &name)) return false;
    for (uint64_t i = 0; i < name.len; i++) {
        char w[5];
        size_t k = 0;
        for (; k < 5 && i + k < name.len; k++) {
            char c = name.ptr[i + k];
            w[k] = (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
        }
        if (k >= 4 && memcmp(w, "phi3", 4) == 0) return true;
        if (k >= 5 && memcmp(w, "phi-3", 5) == 0) return true;
    }
    return false;
}

static void *take(wisp_layout *lay, size_t bytes) { return wisp_layout_take(lay, bytes, 1, WISP_PART_TOKENIZER); }

/* Measure (lay->arena NULL: fills only what plans need, the kind and the
 * special-token count) or carve and initialise; both walk the same steps so
 * that the plan is exactly what initialisation carves. */
wisp_status wisp_tokenizer_layout(wisp_tokenizer *tok, const wisp_gguf *g, wisp_layout *lay, wisp_error *err) {
    wisp_arena *arena = lay->arena;
    tk_meta m;
    wisp_status s;
    if ((s = read_meta(g, &m, err))) return s;
    memset(tok, 0, sizeof *tok);
    tok->kind = m.kind;
    tok->pre = m.pre;
    tok->n_vocab = (int32_t)m.n_vocab;
    tok->n_merges = (int32_t)m.n_merges;
    tok->tok_base = m.kv[K_TOKENS].value;
    tok->scores = m.has[K_SCORES] ? m.kv[K_SCORES].value : NULL;
    tok->types = m.has[K_TYPES] ? m.kv[K_TYPES].value : NULL;
    tok->types_elem = m.has[K_TYPES] ? m.kv[K_TYPES].elem_type : 0;

    uint32_t hash_cap = pow2_at_least((uint64_t)m.n_vocab + m.n_vocab / 2);
    uint32_t merge_cap = m.kind == WISP_VOCAB_BPE ? pow2_at_least((uint64_t)m.n_merges + m.n_merges / 2) : 0;
    uint32_t *tok_off = take(lay, (size_t)m.n_vocab * 4);
    uint32_t *hash = take(lay, (size_t)hash_cap * 4);
    int32_t *merges = NULL;
    uint32_t *merge_hash = NULL;
    if (m.kind == WISP_VOCAB_BPE) {
        if (m.n_merges) merges = take(lay, (size_t)m.n_merges * 12);
        merge_hash = take(lay, (size_t)merge_cap * 4);
    }
    int32_t *byte_tok = take(lay, 256 * 4);
    if (arena && (!tok_off || !hash || !byte_tok || (m.kind == WISP_VOCAB_BPE && (!merge_hash || (m.n_merges && !merges)))))
        return wisp_fail(err, WISP_ERR_ARENA, "the tokenizer tables do not fit in the arena");
    tok->tok_off = tok_off;
    tok->tok_hash = hash;
    tok->tok_hash_mask = hash_cap - 1;

    uint32_t n_special;
    if ((s = scan_tokens(&m, tok, tok_off, hash, hash_cap - 1, &n_special, err))) return s;
    int32_t *special = n_special ? take(lay, (size_t)n_special * 4) : NULL;
    tok->n_special = (int32_t)n_special; /* the count alone, for scratch plans */
    if ((s = read_special_ids(&m, tok, err))) return s;
    if (!arena) return WISP_OK;
    if (n_special && !special) return wisp_fail(err, WISP_ERR_ARENA, "the tokenizer tables do not fit in the arena");

    if (m.kind == WISP_VOCAB_BPE) {
        tok->merges = merges;
        tok->merge_hash = merge_hash;
        tok->merge_hash_mask = merge_cap - 1;
        if ((s = load_merges(&m, tok, merges, merge_hash, err))) return s;
    }
    fill_byte_tokens(tok, byte_tok);
    tok->byte_tok = byte_tok;

    int32_t k = 0;
    for (int32_t id = 0; id < tok->n_vocab && (uint32_t)k < n_special; id++) {
        int t = tk_type(tok, id);
        if (!is_special_type(t) || tk_text(tok, id).len == 0) continue;
        special[k++] = id;
        if (t == WISP_TOKEN_USER_DEFINED) tok->n_user_defined++;
    }
    sort_specials(tok, special, k);
    tok->special = special;
    tok->n_special = k;

    bool flag;
    tok->add_bos = m.kind != WISP_VOCAB_BPE || (m.pre_flags & WISP_PRETOK_ADD_BOS);
    if (meta_bool(&m, K_ADD_BOS, &flag)) tok->add_bos = flag;
    tok->add_eos = false;
    if (meta_bool(&m, K_ADD_EOS, &flag)) tok->add_eos = flag;
    tok->add_space_prefix = m.kind == WISP_VOCAB_SPM;
    if (m.kind == WISP_VOCAB_SPM && meta_bool(&m, K_ADD_SPACE, &flag))
        tok->add_space_prefix = flag;
    tok->ignore_merges = (m.pre_flags & WISP_PRETOK_IGNORE_MERGES) != 0;
    tok->rstrip_special = name_mentions_phi3(&m);
    return WISP_OK;
}
