/* Shared internals of the tokenizer files (not a public header). */
#ifndef WISP_TOKENIZER_INTERNAL_H
#define WISP_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "half.h"
#include "tokenizer.h"

/* Scratch regions start at multiples of this. */
#define TK_ALIGN 16
static inline size_t tk_align(size_t n) { return (n + (TK_ALIGN - 1)) & ~(size_t)(TK_ALIGN - 1); }

/* Saturating size arithmetic for scratch bounds. */
static inline size_t tk_mul(size_t a, size_t b) { return (b && a > SIZE_MAX / b) ? SIZE_MAX : a * b; }
static inline size_t tk_add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

/* ---- token strings ---- */

static inline wisp_str tk_text(const wisp_tokenizer *tok, int32_t id) {
    const uint8_t *p = tok->tok_base + tok->tok_off[id];
    wisp_str s = {(const char *)p + 8, wisp_load_u64(p)};
    return s;
}

/* Byte-at-a-time hash (FNV-1a with a final mix) so that a string can be hashed
 * in pieces: tk_hash_end(tk_hash_bytes(tk_hash_bytes(TK_HASH_SEED, a), b)). */
#define TK_HASH_SEED 2166136261u
static inline uint32_t tk_hash_bytes(uint32_t h, const void *s, size_t n) {
    const uint8_t *p = (const uint8_t *)s;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}
static inline uint32_t tk_hash_end(uint32_t h) {
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return h;
}

/* Hash slots of tok_hash: (id + 1) | tag << 24, where the tag is the top byte
 * of the hash, so most probes of the wrong string never touch its bytes. */
#define TK_ID_BITS 24
#define TK_MAX_VOCAB ((1 << TK_ID_BITS) - 2)
static inline uint32_t tk_slot_tag(uint32_t h) { return h >> 24; }

/* Id of the token whose text is a ++ b (b may be empty), -1 if none. */
int32_t tk_lookup2(const wisp_tokenizer *tok, const void *a, size_t na, const void *b, size_t nb);
static inline int32_t tk_lookup(const wisp_tokenizer *tok, const void *s, size_t n) {
    return tk_lookup2(tok, s, n, NULL, 0);
}

/* Rank of the merge (left, right), -1 if none. */
int32_t tk_merge_rank(const wisp_tokenizer *tok, int32_t left, int32_t right);
static inline uint32_t tk_pair_hash(int32_t left, int32_t right) {
    uint64_t k = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return (uint32_t)k;
}

int tk_type(const wisp_tokenizer *tok, int32_t id); /* wisp_token_type after overrides */

/* ---- output ---- */

typedef struct tk_out {
    int32_t *ids;
    size_t cap;
    size_t n; /* ids produced so far (may exceed cap: then only counted) */
} tk_out;

static inline void tk_emit(tk_out *out, int32_t id) {
    if (out->n < out->cap) out->ids[out->n] = id;
    out->n++;
}

/* ---- merging adjacent symbols by priority (SPM and BPE) ---- */

typedef struct tk_sym {
    int32_t prev, next;  /* neighbours in the live list, -1 at the ends */
    int32_t id;          /* token this symbol is, -1 if not known (yet) */
    int32_t hpos;        /* heap position of the pair (this, next), -1 if none */
    int32_t pair_id;     /* token the pair (this, next) would become */
    uint32_t key;        /* the pair's priority: lower merges first */
    uint32_t start, len; /* bytes of the text this symbol covers */
} tk_sym;

/* Whether l and r (adjacent) can merge; if so their priority and result. */
typedef bool (*tk_pair_fn)(const void *ctx, const tk_sym *l, const tk_sym *r, uint32_t *key, int32_t *pair_id);

/* Merge syms[0..n) (linked in order) until no pair can merge, always taking
 * the pair with the lowest key, ties to the leftmost, as llama.cpp's queues
 * do. heap needs n entries. Merged-away symbols get len 0; the result is the
 * list starting at syms[0]. */
void tk_merge(tk_sym *syms, int32_t n, int32_t *heap, tk_pair_fn pair, const void *ctx);

/* ---- the three encoders: raw text (no special tokens) to ids ---- */

size_t tk_spm_scratch(size_t len);
void tk_spm_encode(const wisp_tokenizer *tok, const uint8_t *text, size_t len, bool space_prefix, tk_out *out,
                   void *scratch);

size_t tk_bpe_scratch(size_t len);
void tk_bpe_encode(const wisp_tokenizer *tok, const uint8_t *text, size_t len, tk_out *out, void *scratch);

size_t tk_wpm_scratch(size_t len);
void tk_wpm_encode(const wisp_tokenizer *tok, const uint8_t *text, size_t len, tk_out *out, void *scratch);

#endif
