/* SentencePiece-style BPE as llama.cpp runs it for "llama" vocabularies:
 * spaces become "▁" (with one more in front when add_space_prefix asks),
 * the text starts as one symbol per UTF-8 character, and the adjacent pair
 * whose concatenation is the highest-scoring token merges first (ties: the
 * leftmost). A symbol that never became a token is written as its bytes
 * (<0xXX> tokens, else the single-byte token, else unk).
 * Invalid UTF-8: each bad byte is a symbol of its own (llama.cpp groups bytes
 * by the lead byte alone, so a stray lead byte can swallow the "▁" after it
 * and the space would not decode back); valid text is split identically. */
#include <string.h>

#include "tokenizer_internal.h"
#include "unicode.h"

/* Scratch: the escaped text, then the symbols, then the heap. */
size_t tk_spm_scratch(size_t len) {
    size_t n = tk_add(len, 1);
    size_t bytes = tk_align(tk_add(tk_mul(len, 3), 3));
    bytes = tk_add(bytes, tk_align(tk_mul(n, sizeof(tk_sym))));
    return tk_add(bytes, tk_align(tk_mul(n, sizeof(int32_t))));
}

/* A float score as a key where lower keys merge first: higher scores map to
 * lower keys, monotonically (IEEE order made unsigned, then inverted). */
static uint32_t score_key(float score) {
    uint32_t u = wisp_f32_bits(score);
    uint32_t ordered = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ~ordered;
}

typedef struct spm_ctx {
    const wisp_tokenizer *tok;
    const uint8_t *text;
} spm_ctx;

static bool spm_pair(const void *vctx, const tk_sym *l, const tk_sym *r, uint32_t *key, int32_t *pair_id) {
    const spm_ctx *ctx = (const spm_ctx *)vctx;
    int32_t id = tk_lookup(ctx->tok, ctx->text + l->start, (size_t)l->len + r->len);
    if (id < 0) return false;
    float score = ctx->tok->scores ? wisp_load_f32(ctx->tok->scores + 4 * (size_t)id) : 0.0f;
    *key = score_key(score);
    *pair_id = id;
    return true;
}

static void emit_bytes(const wisp_tokenizer *tok, const uint8_t *p, size_t n, tk_out *out) {
    for (size_t i = 0; i < n; i++) {
        int32_t id = tok->byte_tok[p[i]];
        if (id < 0) id = tok->unk;
        if (id >= 0) tk_emit(out, id);
    }
}

/* Merge and emit buf[from, to). */
static void encode_span(const wisp_tokenizer *tok, const uint8_t *buf, size_t from, size_t to, tk_sym *syms,
                        int32_t *heap, tk_out *out) {
    int32_t count = 0;
    for (size_t off = from; off < to; count++) {
        size_t l; /* one character; a byte of invalid UTF-8 is a symbol of its own */
        wisp_utf8_decode(buf + off, to - off, &l);
        tk_sym *s = &syms[count];
        s->prev = count - 1;
        s->next = off + l < to ? count + 1 : -1;
        s->id = -1;
        s->start = (uint32_t)off;
        s->len = (uint32_t)l;
        off += l;
    }
    spm_ctx ctx = {tok, buf};
    tk_merge(syms, count, heap, spm_pair, &ctx);
    for (int32_t i = 0; i >= 0; i = syms[i].next) {
        int32_t id = syms[i].id >= 0 ? syms[i].id : tk_lookup(tok, buf + syms[i].start, syms[i].len);
        if (id >= 0) tk_emit(out, id);
        else emit_bytes(tok, buf + syms[i].start, syms[i].len, out);
    }
}

void tk_spm_encode(const wisp_tokenizer *tok, const uint8_t *text, size_t len, bool space_prefix, tk_out *out,
                   void *scratch) {
    uint8_t *buf = (uint8_t *)scratch;
    size_t n = 0;
    static const uint8_t lower_eighth[3] = {0xE2, 0x96, 0x81}; /* "▁" */
    if (space_prefix) {
        memcpy(buf, lower_eighth, 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(buf + n, lower_eighth, 3);
            n += 3;
        } else {
            buf[n++] = text[i];
        }
    }
    if (n == 0) return;

    tk_sym *syms = (tk_sym *)((uint8_t *)scratch + tk_align(tk_add(tk_mul(len, 3), 3)));
    int32_t *heap = (int32_t *)((uint8_t *)syms + tk_align(tk_mul(tk_add(len, 1), sizeof(tk_sym))));
    /* An ASCII byte that occurs in no token can never merge with anything, so
     * the stretches between such bytes (newlines, in Llama's vocabulary) are
     * merged independently: same result, much smaller heaps. */
    size_t seg = 0;
    while (seg < n) {
        size_t end = seg;
        while (end < n && (buf[end] >= 0x80 || ((tok->token_bytes[buf[end] >> 3] >> (buf[end] & 7)) & 1))) end++;
        if (end == seg) end = seg + 1; /* the wall byte alone */
        encode_span(tok, buf, seg, end, syms, heap, out);
        seg = end;
    }
}
