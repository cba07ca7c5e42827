/* Byte-level BPE ("gpt2" vocabularies): the text is cut into pre-tokens by
 * the vocabulary's regex pre-tokenizer, each pre-token starts as one symbol
 * per byte (the token of that byte's GPT-2 character), and the adjacent pair
 * with the lowest merge rank merges first (ties: the leftmost), as in
 * llama.cpp. Symbols carry token ids, so merging never touches strings. */
#include "pretokenize.h"
#include "tokenizer_internal.h"
#include "unicode.h"

/* Scratch: one packed entry per code point, then symbols and heap for the
 * longest possible pre-token (every byte of the text). */
size_t tk_bpe_scratch(size_t len) {
    size_t bytes = tk_align(tk_mul(len, sizeof(uint32_t)));
    bytes = tk_add(bytes, tk_align(tk_mul(len, sizeof(tk_sym))));
    return tk_add(bytes, tk_align(tk_mul(len, sizeof(int32_t))));
}

static bool bpe_pair(const void *vctx, const tk_sym *l, const tk_sym *r, uint32_t *key, int32_t *pair_id) {
    const wisp_tokenizer *tok = (const wisp_tokenizer *)vctx;
    if (l->id < 0 || r->id < 0) return false;
    int32_t rank = tk_merge_rank(tok, l->id, r->id);
    if (rank < 0) return false;
    *key = (uint32_t)rank;
    *pair_id = tok->merges[3 * (size_t)rank + 2];
    return true;
}

/* The token whose text is the GPT-2 spelling of bytes p[0..n), -1 if none
 * (hashing and comparing the spelling as it is produced, without a buffer). */
static int32_t lookup_spelled(const wisp_tokenizer *tok, const uint8_t *p, size_t n) {
    uint32_t h = TK_HASH_SEED;
    size_t spelled = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t u[4];
        size_t l = wisp_utf8_encode(wisp_byte_to_unicode(p[i]), u);
        h = tk_hash_bytes(h, u, l);
        spelled += l;
    }
    if (spelled > (size_t)tok->max_token_len) return -1;
    h = tk_hash_end(h);
    for (uint32_t i = h & tok->tok_hash_mask;; i = (i + 1) & tok->tok_hash_mask) {
        uint32_t slot = tok->tok_hash[i];
        if (slot == 0) return -1;
        if ((slot >> TK_ID_BITS) != tk_slot_tag(h)) continue;
        int32_t id = (int32_t)(slot & ((1u << TK_ID_BITS) - 1)) - 1;
        wisp_str t = tk_text(tok, id);
        if (t.len != spelled) continue;
        size_t at = 0;
        bool same = true;
        for (size_t k = 0; same && k < n; k++) {
            uint8_t u[4];
            size_t l = wisp_utf8_encode(wisp_byte_to_unicode(p[k]), u);
            for (size_t j = 0; same && j < l; j++) same = (uint8_t)t.ptr[at + j] == u[j];
            at += l;
        }
        if (same) return id;
    }
}

static void encode_word(const wisp_tokenizer *tok, const uint8_t *p, size_t n, tk_out *out, tk_sym *syms,
                        int32_t *heap) {
    if (n == 1) {
        if (tok->byte_tok[p[0]] >= 0) tk_emit(out, tok->byte_tok[p[0]]);
        return;
    }
    if (tok->ignore_merges) {
        int32_t whole = lookup_spelled(tok, p, n);
        if (whole >= 0) {
            tk_emit(out, whole);
            return;
        }
    }
    for (size_t i = 0; i < n; i++) {
        tk_sym *s = &syms[i];
        s->prev = (int32_t)i - 1;
        s->next = i + 1 < n ? (int32_t)i + 1 : -1;
        s->id = tok->byte_tok[p[i]];
        s->start = (uint32_t)i;
        s->len = 1;
    }
    tk_merge(syms, (int32_t)n, heap, bpe_pair, tok);
    /* a byte whose character is not in the vocabulary is dropped, as llama.cpp does */
    for (int32_t i = 0; i >= 0; i = syms[i].next)
        if (syms[i].id >= 0) tk_emit(out, syms[i].id);
}

void tk_bpe_encode(const wisp_tokenizer *tok, const uint8_t *text, size_t len, tk_out *out, void *scratch) {
    uint32_t *cps = (uint32_t *)scratch;
    tk_sym *syms = (tk_sym *)((uint8_t *)scratch + tk_align(tk_mul(len, sizeof(uint32_t))));
    int32_t *heap = (int32_t *)((uint8_t *)syms + tk_align(tk_mul(len, sizeof(tk_sym))));
    size_t n = wisp_pretokenize(tok->pre, text, len, cps);
    size_t cp = 0, byte = 0, start, bytes;
    while (wisp_pretok_next(cps, n, &cp, &byte, &start, &bytes)) encode_word(tok, text + start, bytes, out, syms, heap);
}
