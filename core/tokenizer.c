/* The tokenizer's public face: plan and init, the special-token partition
 * every encoder shares, dispatch to the SPM / BPE / WordPiece encoders, and
 * decoding. */
#include "tokenizer.h"

#include <string.h>

#include "tokenizer_internal.h"
#include "unicode.h"

wisp_status wisp_tokenizer_plan(const wisp_gguf *g, size_t *table_bytes, wisp_error *err) {
    if (!g || !table_bytes) return wisp_fail(err, WISP_ERR_ARG, "wisp_tokenizer_plan: NULL argument");
    wisp_tokenizer probe;
    wisp_layout lay = {.arena = NULL};
    wisp_status s = wisp_tokenizer_layout(&probe, g, &lay, err);
    *table_bytes = lay.bytes;
    return s;
}

wisp_status wisp_tokenizer_plan_scratch(const wisp_gguf *g, size_t text_len, size_t *scratch_bytes, wisp_error *err) {
    if (!g || !scratch_bytes) return wisp_fail(err, WISP_ERR_ARG, "wisp_tokenizer_plan_scratch: NULL argument");
    wisp_tokenizer probe; /* measured only: kind and special count, no tables */
    wisp_layout lay = {.arena = NULL};
    wisp_status s = wisp_tokenizer_layout(&probe, g, &lay, err);
    if (s) return s;
    *scratch_bytes = wisp_tokenizer_scratch_bytes(&probe, text_len);
    return WISP_OK;
}

wisp_status wisp_tokenizer_init(wisp_tokenizer *tok, const wisp_gguf *g, wisp_arena *arena, wisp_error *err) {
    if (!tok || !g || !arena) return wisp_fail(err, WISP_ERR_ARG, "wisp_tokenizer_init: NULL argument");
    wisp_arena before = *arena;
    wisp_layout lay = {.arena = arena};
    wisp_status s = wisp_tokenizer_layout(tok, g, &lay, err);
    if (s) {
        *arena = before; /* nothing carved stays behind a failure */
        size_t need;
        if (s == WISP_ERR_ARENA && wisp_tokenizer_plan(g, &need, NULL) == WISP_OK)
            return wisp_fail(err, WISP_ERR_ARENA, "tokenizer tables need %zu bytes but the arena has %zu left", need,
                             arena->size - arena->used);
        return s;
    }
    return WISP_OK;
}

/* ---- special tokens ---- */

/* Marks over the input bytes: which bytes belong to a special token. */
enum { MARK_RAW = 0, MARK_SPECIAL_START = 1, MARK_SPECIAL = 2, MARK_STRIPPED = 3 };
#define PAIR_BITS_BYTES 8192 /* one bit per byte pair present in the text */

static bool may_parse(const wisp_tokenizer *tok, int32_t id, bool parse_special) {
    return parse_special || tk_type(tok, id) == WISP_TOKEN_USER_DEFINED;
}

static bool strips_right(const wisp_tokenizer *tok, int32_t id) {
    if (!tok->rstrip_special) return false;
    wisp_str t = tk_text(tok, id);
    return !wisp_str_eq(t, "<unk>") && !wisp_str_eq(t, "<s>") && !wisp_str_eq(t, "<|endoftext|>");
}

static bool is_ascii_space(uint8_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* llama.cpp's partition: special tokens are tried longest first; each one
 * claims all its non-overlapping occurrences (left to right) in the text not
 * yet claimed. A bit set of the byte pairs in the text rules out most tokens
 * without scanning. Returns whether anything was claimed. */
/* Whether [i, i + n) touches one of the sorted literal ranges. */
static bool in_literal(const wisp_text_span *lit, size_t n_lit, size_t i, size_t n) {
    size_t lo = 0, hi = n_lit; /* the first range starting at or after i + n */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (lit[mid].start < i + n) lo = mid + 1;
        else hi = mid;
    }
    return lo > 0 && lit[lo - 1].start + lit[lo - 1].len > i;
}

static bool partition(const wisp_tokenizer *tok, const uint8_t *text, size_t len, bool parse_special,
                      const wisp_text_span *lit, size_t n_lit, uint8_t *marks, uint8_t *pairs) {
    memset(marks, MARK_RAW, len);
    memset(pairs, 0, PAIR_BITS_BYTES + 32);
    uint8_t *singles = pairs + PAIR_BITS_BYTES;
    for (size_t i = 0; i < len; i++) {
        singles[text[i] >> 3] |= (uint8_t)(1u << (text[i] & 7));
        if (i + 1 < len) {
            uint32_t p = (uint32_t)text[i] << 8 | text[i + 1];
            pairs[p >> 3] |= (uint8_t)(1u << (p & 7));
        }
    }
    bool any = false;
    for (int32_t k = 0; k < tok->n_special; k++) {
        int32_t id = tok->special[k];
        if (!may_parse(tok, id, parse_special)) continue;
        wisp_str t = tk_text(tok, id);
        const uint8_t *tt = (const uint8_t *)t.ptr;
        size_t tl = (size_t)t.len;
        if (tl > len) continue;
        bool possible = (singles[tt[0] >> 3] >> (tt[0] & 7)) & 1;
        for (size_t i = 0; possible && i + 1 < tl; i++) {
            uint32_t p = (uint32_t)tt[i] << 8 | tt[i + 1];
            possible = (pairs[p >> 3] >> (p & 7)) & 1;
        }
        if (!possible) continue;
        size_t at = 0;
        while (at + tl <= len) {
            const uint8_t *hit = memchr(text + at, tt[0], len - tl + 1 - at);
            if (!hit) break;
            size_t i = (size_t)(hit - text);
            bool free_here = memcmp(hit, tt, tl) == 0;
            for (size_t j = i; free_here && j < i + tl; j++) free_here = marks[j] == MARK_RAW;
            if (free_here && n_lit && !may_parse(tok, id, false) && in_literal(lit, n_lit, i, tl)) free_here = false;
            if (!free_here) { at = i + 1; continue; }
            marks[i] = MARK_SPECIAL_START;
            memset(marks + i + 1, MARK_SPECIAL, tl - 1);
            any = true;
            at = i + tl;
            if (strips_right(tok, id))
                for (size_t j = at; j < len && marks[j] == MARK_RAW && is_ascii_space(text[j]); j++) marks[j] = MARK_STRIPPED;
        }
    }
    return any;
}

/* The special token claimed at [i, i + n): the first in partition order with that text. */
static int32_t claimed_token(const wisp_tokenizer *tok, const uint8_t *text, size_t n, bool parse_special) {
    for (int32_t k = 0; k < tok->n_special; k++) {
        int32_t id = tok->special[k];
        wisp_str t = tk_text(tok, id);
        if (t.len == n && may_parse(tok, id, parse_special) && memcmp(t.ptr, text, n) == 0) return id;
    }
    return -1;
}

/* ---- encoding ---- */

static bool partition_possible(const wisp_tokenizer *tok) { return tok->n_special > 0; }

size_t wisp_tokenizer_scratch_bytes(const wisp_tokenizer *tok, size_t text_len) {
    if (!tok) return 0;
    size_t n = 0;
    if (partition_possible(tok)) n = tk_add(tk_align(text_len), PAIR_BITS_BYTES + 32);
    size_t enc = 0;
    switch (tok->kind) {
    case WISP_VOCAB_SPM: enc = tk_spm_scratch(text_len); break;
    case WISP_VOCAB_BPE: enc = tk_bpe_scratch(text_len); break;
    case WISP_VOCAB_WPM: enc = tk_wpm_scratch(text_len); break;
    default: break;
    }
    return tk_add(tk_add(n, enc), TK_ALIGN); /* slack to align the caller's pointer */
}

static void encode_raw(const wisp_tokenizer *tok, const uint8_t *text, size_t len, bool after_special, tk_out *out,
                       void *scratch) {
    switch (tok->kind) {
    case WISP_VOCAB_SPM: tk_spm_encode(tok, text, len, tok->add_space_prefix && after_special, out, scratch); break;
    case WISP_VOCAB_BPE: tk_bpe_encode(tok, text, len, out, scratch); break;
    case WISP_VOCAB_WPM: tk_wpm_encode(tok, text, len, out, scratch); break;
    default: break;
    }
}

static wisp_status tokenize(const wisp_tokenizer *tok, const char *text, size_t len, unsigned flags,
                            const wisp_text_span *lit, size_t n_lit, int32_t *ids, size_t cap, size_t *n_ids,
                            void *scratch, size_t scratch_bytes, wisp_error *err) {
    if (n_ids) *n_ids = 0;
    if (!tok || !n_ids || (len && !text) || (cap && !ids))
        return wisp_fail(err, WISP_ERR_ARG, "wisp_tokenize: NULL argument");
    if (len > (size_t)INT32_MAX / 8)
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "text of %zu bytes is too long for one call (split it)", len);
    size_t need = wisp_tokenizer_scratch_bytes(tok, len);
    if (!scratch || scratch_bytes < need)
        return wisp_fail(err, WISP_ERR_ARENA, "tokenizing %zu bytes needs %zu bytes of scratch, got %zu", len, need,
                         scratch ? scratch_bytes : (size_t)0);
    uint8_t *work = (uint8_t *)scratch + ((TK_ALIGN - (uintptr_t)scratch % TK_ALIGN) % TK_ALIGN);

    bool wpm = tok->kind == WISP_VOCAB_WPM;
    int32_t first = (flags & WISP_TOKENIZE_ADD_BOS) ? tok->bos : -2;
    int32_t last = (flags & WISP_TOKENIZE_ADD_EOS) ? (wpm ? tok->sep : tok->eos) : -2;
    if (first == -1) return wisp_fail(err, WISP_ERR_ARG, "BOS requested but the vocabulary has no BOS token");
    if (last == -1) return wisp_fail(err, WISP_ERR_ARG, "EOS requested but the vocabulary has no %s token", wpm ? "SEP" : "EOS");

    tk_out out = {ids, cap, 0};
    if (first >= 0) tk_emit(&out, first);

    const uint8_t *t = (const uint8_t *)text;
    bool parse_special = (flags & WISP_TOKENIZE_PARSE_SPECIAL) != 0;
    bool any = false;
    uint8_t *marks = NULL;
    if (len > 0 && partition_possible(tok) && (parse_special || tok->n_user_defined > 0)) {
        marks = work;
        any = partition(tok, t, len, parse_special, lit, n_lit, marks, marks + tk_align(len));
    }
    void *enc_scratch = partition_possible(tok) ? work + tk_align(len) + PAIR_BITS_BYTES + 32 : work;

    if (!any) {
        if (len > 0) encode_raw(tok, t, len, true, &out, enc_scratch);
    } else {
        bool after_special = true;
        size_t i = 0;
        while (i < len) {
            size_t j = i + 1;
            if (marks[i] == MARK_RAW) {
                while (j < len && marks[j] == MARK_RAW) j++;
                encode_raw(tok, t + i, j - i, after_special, &out, enc_scratch);
                after_special = false;
            } else if (marks[i] == MARK_SPECIAL_START) {
                while (j < len && marks[j] == MARK_SPECIAL) j++;
                int32_t id = claimed_token(tok, t + i, j - i, parse_special);
                if (id < 0) return wisp_fail(err, WISP_ERR_INTERNAL, "special token lost during partition");
                tk_emit(&out, id);
                after_special = true;
            }
            i = j;
        }
    }
    if (last >= 0) tk_emit(&out, last);
    *n_ids = out.n;
    if (out.n > cap)
        return wisp_fail(err, WISP_ERR_CAPACITY, "the text makes %zu tokens but the buffer holds %zu", out.n, cap);
    return WISP_OK;
}

wisp_status wisp_tokenize(const wisp_tokenizer *tok, const char *text, size_t len, unsigned flags, int32_t *ids,
                          size_t cap, size_t *n_ids, void *scratch, size_t scratch_bytes, wisp_error *err) {
    return tokenize(tok, text, len, flags, NULL, 0, ids, cap, n_ids, scratch, scratch_bytes, err);
}

wisp_status wisp_tokenize_literal(const wisp_tokenizer *tok, const char *text, size_t len, unsigned flags,
                                  const wisp_text_span *literal, size_t n_literal, int32_t *ids, size_t cap,
                                  size_t *n_ids, void *scratch, size_t scratch_bytes, wisp_error *err) {
    if (n_ids) *n_ids = 0;
    if (n_literal && !literal) return wisp_fail(err, WISP_ERR_ARG, "wisp_tokenize_literal: NULL ranges");
    for (size_t i = 0; i < n_literal; i++)
        if (literal[i].start > len || literal[i].len > len - literal[i].start ||
            (i && literal[i].start < literal[i - 1].start + literal[i - 1].len))
            return wisp_fail(err, WISP_ERR_ARG, "literal range %zu is outside the text or out of order", i);
    return tokenize(tok, text, len, flags | WISP_TOKENIZE_PARSE_SPECIAL, literal, n_literal, ids, cap, n_ids, scratch,
                    scratch_bytes, err);
}

/* ---- decoding ---- */

/* Appends to buf[0..cap) at `at`, dropping the first `skip` bytes it is given;
 * `at` keeps counting past cap so that callers learn the full length. */
typedef struct writer {
    char *buf;
    size_t cap, at, skip;
} writer;

static void put(writer *w, const void *src, size_t n) {
    const char *p = (const char *)src;
    size_t drop = w->skip < n ? w->skip : n;
    w->skip -= drop;
    p += drop;
    n -= drop;
    if (w->at < w->cap) memcpy(w->buf + w->at, p, (w->cap - w->at) < n ? (w->cap - w->at) : n);
    w->at += n;
}

/* s with every U+2581 ("▁") turned into a space. */
static void put_unescaped(writer *w, wisp_str s) {
    uint64_t run = 0; /* bytes copied in one go */
    for (uint64_t i = 0; i < s.len;) {
        if (i + 2 < s.len && (uint8_t)s.ptr[i] == 0xE2 && (uint8_t)s.ptr[i + 1] == 0x96 && (uint8_t)s.ptr[i + 2] == 0x81) {
            put(w, s.ptr + run, (size_t)(i - run));
            put(w, " ", 1);
            i += 3;
            run = i;
        } else {
            i++;
        }
    }
    put(w, s.ptr + run, (size_t)(s.len - run));
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static void put_piece(const wisp_tokenizer *tok, int32_t id, unsigned flags, writer *w) {
    if (id < 0 || id >= tok->n_vocab) return;
    int type = tk_type(tok, id);
    wisp_str s = tk_text(tok, id);
    if (type == WISP_TOKEN_CONTROL || type == WISP_TOKEN_UNKNOWN) {
        if (flags & WISP_PIECE_SPECIAL) put(w, s.ptr, (size_t)s.len);
        return;
    }
    if (type == WISP_TOKEN_USER_DEFINED) {
        put(w, s.ptr, (size_t)s.len);
        return;
    }
    if (type == WISP_TOKEN_BYTE && tok->kind != WISP_VOCAB_BPE) { /* "<0xXX>" */
        int hi = s.len == 6 ? hex_digit(s.ptr[3]) : -1, lo = s.len == 6 ? hex_digit(s.ptr[4]) : -1;
        if (hi >= 0 && lo >= 0) {
            char b = (char)(hi << 4 | lo);
            put(w, &b, 1);
        }
        return;
    }
    if (type != WISP_TOKEN_NORMAL) return;
    if (tok->kind != WISP_VOCAB_BPE) {
        put_unescaped(w, s);
        return;
    }
    /* byte-level: each character of the text stands for one byte */
    const uint8_t *p = (const uint8_t *)s.ptr;
    for (size_t i = 0; i < s.len;) {
        size_t l;
        uint32_t cp = wisp_utf8_decode(p + i, (size_t)s.len - i, &l);
        int b = wisp_unicode_to_byte(cp);
        if (b >= 0) {
            char c = (char)b;
            put(w, &c, 1);
        } else {
            put(w, p + i, l); /* not from the byte alphabet: keep it as it is */
        }
        i += l;
    }
}

size_t wisp_token_piece_ex(const wisp_tokenizer *tok, int32_t id, unsigned flags, char *buf, size_t cap) {
    if (!tok) return 0;
    writer w = {buf, buf ? cap : 0, 0, 0};
    put_piece(tok, id, flags, &w);
    return w.at;
}

size_t wisp_token_piece(const wisp_tokenizer *tok, int32_t id, char *buf, size_t cap) {
    return wisp_token_piece_ex(tok, id, 0, buf, cap);
}

size_t wisp_detokenize(const wisp_tokenizer *tok, const int32_t *ids, size_t n, unsigned flags, char *buf, size_t cap) {
    if (!tok || (!ids && n)) return 0;
    writer w = {buf, buf ? cap : 0, 0, 0};
    bool strip = (flags & WISP_DETOKENIZE_STRIP_PREFIX) && tok->add_space_prefix;
    unsigned pflags = (flags & WISP_DETOKENIZE_SPECIAL) ? WISP_PIECE_SPECIAL : 0;
    for (size_t i = 0; i < n; i++) {
        if (strip) {
            /* the first piece that prints anything loses its leading space */
            char first;
            writer probe = {&first, 1, 0, 0};
            put_piece(tok, ids[i], pflags, &probe);
            if (probe.at == 0) continue;
            w.skip = first == ' ' ? 1 : 0;
            strip = false;
        }
        put_piece(tok, ids[i], pflags, &w);
    }
    return w.at;
}

int32_t wisp_tokenizer_n_vocab(const wisp_tokenizer *tok) { return tok ? tok->n_vocab : 0; }
int32_t wisp_tokenizer_bos(const wisp_tokenizer *tok) { return tok ? tok->bos : -1; }
int32_t wisp_tokenizer_eos(const wisp_tokenizer *tok) { return tok ? tok->eos : -1; }
bool wisp_tokenizer_add_bos_default(const wisp_tokenizer *tok) { return tok && tok->add_bos; }

bool wisp_tokenizer_is_eog(const wisp_tokenizer *tok, int32_t id) {
    if (!tok || id < 0) return false;
    for (int32_t i = 0; i < tok->n_eog; i++)
        if (tok->eog[i] == id) return true;
    return false;
}

wisp_str wisp_token_text(const wisp_tokenizer *tok, int32_t id) {
    wisp_str none = {"", 0};
    if (!tok || id < 0 || id >= tok->n_vocab) return none;
    return tk_text(tok, id);
}

int wisp_token_type_of(const wisp_tokenizer *tok, int32_t id) {
    if (!tok || id < 0 || id >= tok->n_vocab) return WISP_TOKEN_UNDEFINED;
    return tk_type(tok, id);
}

int32_t wisp_token_lookup(const wisp_tokenizer *tok, const char *text, size_t len) {
    if (!tok || (!text && len)) return -1;
    return tk_lookup(tok, text, len);
}
