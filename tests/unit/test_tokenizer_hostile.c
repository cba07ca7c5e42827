/* Hostile or broken tokenizer metadata must give a clear error, never a
 * crash: vocabularies are built in memory (a tiny GGUF writer below), so this
 * test needs no shared files. Also: the plan is exact (one byte less fails
 * and leaves the arena untouched), and odd-but-legal vocabularies (empty
 * tokens, duplicates, no scores, no types) work. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf.h"
#include "tokenizer.h"

/* ---- a minimal GGUF v3 writer (metadata only) ---- */

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
    uint64_t n_kv;
} buf;

static void put(buf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void key(buf *b, const char *k, uint32_t type) {
    put_str(b, k);
    put_u32(b, type);
    b->n_kv++;
}
static void kv_str(buf *b, const char *k, const char *v) {
    key(b, k, WISP_GGUF_STRING);
    put_str(b, v);
}
static void kv_u32(buf *b, const char *k, uint32_t v) {
    key(b, k, WISP_GGUF_U32);
    put_u32(b, v);
}
static void kv_strs(buf *b, const char *k, const char *const *v, size_t n) {
    key(b, k, WISP_GGUF_ARRAY);
    put_u32(b, WISP_GGUF_STRING);
    put_u64(b, n);
    for (size_t i = 0; i < n; i++) put_str(b, v[i]);
}
static void kv_f32s(buf *b, const char *k, const float *v, size_t n) {
    key(b, k, WISP_GGUF_ARRAY);
    put_u32(b, WISP_GGUF_F32);
    put_u64(b, n);
    put(b, v, n * 4);
}
static void kv_i32s(buf *b, const char *k, const int32_t *v, size_t n) {
    key(b, k, WISP_GGUF_ARRAY);
    put_u32(b, WISP_GGUF_I32);
    put_u64(b, n);
    put(b, v, n * 4);
}
static void kv_f64s(buf *b, const char *k, const double *v, size_t n) {
    key(b, k, WISP_GGUF_ARRAY);
    put_u32(b, WISP_GGUF_F64);
    put_u64(b, n);
    put(b, v, n * 8);
}

/* Finish: a header in front of the pairs. */
static unsigned char *finish(buf *b, size_t *size) {
    buf out = {0};
    put(&out, "GGUF", 4);
    put_u32(&out, 3);
    put_u64(&out, 0);
    put_u64(&out, b->n_kv);
    put(&out, b->p, b->n);
    free(b->p);
    memset(b, 0, sizeof *b);
    *size = out.n;
    return out.p;
}

/* ---- small vocabularies ---- */

static const char *const spm_tokens[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "\342\226\201a", "ab", "<0x41>"};
static const float spm_scores[] = {0, 0, 0, -1, -2, -2, -1.5f, -0.5f, 0};
static const int32_t spm_types[] = {2, 3, 3, 1, 1, 1, 1, 1, 6};
#define SPM_N 9

static const char *const bpe_tokens[] = {"a", "b", "c", "\xc4\xa0", "ab", "\304\240a", "abc", "<|endoftext|>"};
static const int32_t bpe_types[] = {1, 1, 1, 1, 1, 1, 1, 3};
static const char *const bpe_merges[] = {"a b", "\xc4\xa0 a", "ab c"};
#define BPE_N 8

typedef struct built {
    unsigned char *bytes;
    size_t size;
    wisp_gguf g;
} built;

/* Expect the vocabulary to fail with `want` (plan or init), message mentioning `needle`. */
static void expect_fail(buf *b, wisp_status want, const char *needle, const char *what) {
    built x;
    x.bytes = finish(b, &x.size);
    wisp_error err = {0};
    REQUIRE(wisp_gguf_open(&x.g, x.bytes, x.size, &err) == WISP_OK, "%s: the GGUF itself must be valid: %s", what, err.message);
    size_t bytes = 0;
    wisp_status s = wisp_tokenizer_plan(&x.g, &bytes, &err);
    if (s == WISP_OK) {
        void *mem = malloc(bytes + 64);
        wisp_arena a;
        wisp_arena_init(&a, mem, bytes + 64);
        wisp_tokenizer tok;
        s = wisp_tokenizer_init(&tok, &x.g, &a, &err);
        CHECK(s != WISP_OK || want == WISP_OK, "%s: init accepted it", what);
        if (s != WISP_OK) CHECK(a.used == 0, "%s: a failed init leaves the arena as it was", what);
        free(mem);
    }
    CHECK(s == want, "%s: got %s (%s), want %s", what, wisp_status_name(s), err.message, wisp_status_name(want));
    CHECK(!needle || strstr(err.message, needle), "%s: message '%s' should mention '%s'", what, err.message, needle);
    if (s) printf("  %-44s -> %s: %s\n", what, wisp_status_name(s), err.message);
    free(x.bytes);
}

static void spm_base(buf *b, size_t n_tok, size_t n_scores, size_t n_types) {
    kv_str(b, "general.architecture", "llama");
    kv_str(b, "tokenizer.ggml.model", "llama");
    kv_strs(b, "tokenizer.ggml.tokens", spm_tokens, n_tok);
    if (n_scores) kv_f32s(b, "tokenizer.ggml.scores", spm_scores, n_scores);
    if (n_types) kv_i32s(b, "tokenizer.ggml.token_type", spm_types, n_types);
}

static void bpe_base(buf *b, const char *const *merges, size_t n_merges) {
    kv_str(b, "tokenizer.ggml.model", "gpt2");
    kv_str(b, "tokenizer.ggml.pre", "gpt-2");
    kv_strs(b, "tokenizer.ggml.tokens", bpe_tokens, BPE_N);
    kv_i32s(b, "tokenizer.ggml.token_type", bpe_types, BPE_N);
    if (merges) kv_strs(b, "tokenizer.ggml.merges", merges, n_merges);
}

static void hostile(void) {
    buf b = {0};
    kv_str(&b, "general.architecture", "llama");
    expect_fail(&b, WISP_ERR_NOT_FOUND, "tokenizer.ggml.model", "no tokenizer at all");

    kv_str(&b, "tokenizer.ggml.model", "t5");
    kv_strs(&b, "tokenizer.ggml.tokens", spm_tokens, SPM_N);
    expect_fail(&b, WISP_ERR_UNSUPPORTED, "t5", "unsupported model");

    kv_str(&b, "tokenizer.ggml.model", "llama");
    expect_fail(&b, WISP_ERR_NOT_FOUND, "tokens", "no token list");

    kv_str(&b, "tokenizer.ggml.model", "llama");
    kv_f32s(&b, "tokenizer.ggml.tokens", spm_scores, SPM_N);
    expect_fail(&b, WISP_ERR_FORMAT, "array of strings", "tokens are floats");

    kv_str(&b, "tokenizer.ggml.model", "llama");
    kv_strs(&b, "tokenizer.ggml.tokens", spm_tokens, 0);
    expect_fail(&b, WISP_ERR_UNSUPPORTED, "0 tokens", "empty token list");

    spm_base(&b, SPM_N, SPM_N - 2, SPM_N);
    expect_fail(&b, WISP_ERR_FORMAT, "scores", "scores shorter than the tokens");

    spm_base(&b, SPM_N, SPM_N, SPM_N - 1);
    expect_fail(&b, WISP_ERR_FORMAT, "token_type", "types shorter than the tokens");

    spm_base(&b, SPM_N, 0, SPM_N);
    static const double f64[SPM_N] = {0};
    kv_f64s(&b, "tokenizer.ggml.scores", f64, SPM_N);
    expect_fail(&b, WISP_ERR_FORMAT, "f32", "scores are f64");

    spm_base(&b, SPM_N, SPM_N, 0);
    kv_f32s(&b, "tokenizer.ggml.token_type", spm_scores, SPM_N);
    expect_fail(&b, WISP_ERR_FORMAT, "integers", "types are floats");

    spm_base(&b, SPM_N, SPM_N, 0);
    int32_t bad_types[SPM_N];
    memcpy(bad_types, spm_types, sizeof bad_types);
    bad_types[4] = 9;
    kv_i32s(&b, "tokenizer.ggml.token_type", bad_types, SPM_N);
    expect_fail(&b, WISP_ERR_FORMAT, "token 4", "type out of range");

    spm_base(&b, SPM_N, SPM_N, SPM_N);
    kv_u32(&b, "tokenizer.ggml.bos_token_id", 9);
    expect_fail(&b, WISP_ERR_FORMAT, "bos_token_id", "BOS id = n_vocab");

    spm_base(&b, SPM_N, SPM_N, SPM_N);
    kv_u32(&b, "tokenizer.ggml.eos_token_id", 70000);
    expect_fail(&b, WISP_ERR_FORMAT, "eos_token_id", "EOS id far out of range");

    spm_base(&b, SPM_N, SPM_N, SPM_N);
    kv_str(&b, "tokenizer.ggml.unknown_token_id", "zero");
    expect_fail(&b, WISP_ERR_FORMAT, "unknown_token_id", "UNK id is a string");

    bpe_base(&b, NULL, 0);
    expect_fail(&b, WISP_ERR_NOT_FOUND, "merges", "gpt2 without merges");

    static const char *const unknown_part[] = {"a b", "a zz"};
    bpe_base(&b, unknown_part, 2);
    expect_fail(&b, WISP_ERR_FORMAT, "merge 1", "merge naming an unknown token");

    static const char *const no_space[] = {"ab"};
    bpe_base(&b, no_space, 1);
    expect_fail(&b, WISP_ERR_FORMAT, "merge 0", "merge without a space");

    static const char *const no_result[] = {"b c"};
    bpe_base(&b, no_result, 1);
    expect_fail(&b, WISP_ERR_FORMAT, "not in the vocabulary", "merge whose result is not a token");

    static const char *const leading_space[] = {" a"};
    bpe_base(&b, leading_space, 1);
    expect_fail(&b, WISP_ERR_FORMAT, "merge 0", "merge ' a'");

    static const char *const empty_special[] = {"a", "", "b"};
    static const int32_t empty_special_types[] = {1, 3, 4};
    kv_str(&b, "tokenizer.ggml.model", "llama");
    kv_strs(&b, "tokenizer.ggml.tokens", empty_special, 3);
    kv_i32s(&b, "tokenizer.ggml.token_type", empty_special_types, 3);
    kv_u32(&b, "tokenizer.ggml.bos_token_id", 3);
    expect_fail(&b, WISP_ERR_FORMAT, "bos_token_id = 3", "default-less BOS out of range");
}

static void unknown_pre(void) {
    buf b = {0};
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.pre", "made-up");
    kv_strs(&b, "tokenizer.ggml.tokens", bpe_tokens, BPE_N);
    kv_strs(&b, "tokenizer.ggml.merges", bpe_merges, 3);
    expect_fail(&b, WISP_ERR_UNSUPPORTED, "made-up", "unknown pre-tokenizer");
}

/* ---- legal but odd vocabularies work, and the plan is exact ---- */

static void encode_small(const wisp_tokenizer *tok, const char *text, unsigned flags, int32_t *ids, size_t *n) {
    size_t sb = wisp_tokenizer_scratch_bytes(tok, strlen(text));
    void *scratch = malloc(sb);
    wisp_error err = {0};
    wisp_status s = wisp_tokenize(tok, text, strlen(text), flags, ids, 64, n, scratch, sb, &err);
    CHECK(s == WISP_OK, "encode '%s': %s", text, err.message);
    free(scratch);
}

static void exact_plan_and_odd_vocabs(void) {
    buf b = {0};
    /* SPM: scores decide, byte fallback for A, unk for what has no byte token */
    spm_base(&b, SPM_N, SPM_N, SPM_N);
    kv_u32(&b, "tokenizer.ggml.padding_token_id", 0xFFFFFFFFu); /* "none", as llama.cpp writes it */
    built x;
    x.bytes = finish(&b, &x.size);
    wisp_error err = {0};
    REQUIRE(wisp_gguf_open(&x.g, x.bytes, x.size, &err) == WISP_OK, "%s", err.message);
    size_t bytes;
    REQUIRE(wisp_tokenizer_plan(&x.g, &bytes, &err) == WISP_OK, "%s", err.message);
    CHECK(bytes % WISP_ARENA_ALIGN == 0, "plan is a sum of rounded carves");
    unsigned char *mem = malloc(bytes);
    wisp_arena a;
    wisp_tokenizer tok;
    wisp_arena_init(&a, mem, bytes - 1);
    wisp_status s = wisp_tokenizer_init(&tok, &x.g, &a, &err);
    CHECK(s == WISP_ERR_ARENA && a.used == 0 && a.part_bytes[WISP_PART_TOKENIZER] == 0,
          "one byte short: %s, arena used %zu", wisp_status_name(s), a.used);
    printf("  one byte short -> %s: %s\n", wisp_status_name(s), err.message);
    wisp_arena_init(&a, mem, bytes);
    REQUIRE(wisp_tokenizer_init(&tok, &x.g, &a, &err) == WISP_OK, "%s", err.message);
    CHECK(a.used == bytes && a.part_bytes[WISP_PART_TOKENIZER] == bytes, "init carves exactly the plan");
    int32_t ids[64];
    size_t n;
    encode_small(&tok, "ab a", 0, ids, &n);
    /* "▁ab▁a": "ab" (-0.5) merges first, then "▁a" (-1.5); "▁"+"ab" is no token */
    CHECK(n == 3 && ids[0] == 3 && ids[1] == 7 && ids[2] == 6, "ab a -> ▁ ab ▁a (got %zu ids)", n);
    encode_small(&tok, "A", 0, ids, &n);
    CHECK(n == 2 && ids[0] == 3 && ids[1] == 8, "A -> ▁ <0x41>");
    encode_small(&tok, "Z", 0, ids, &n);
    CHECK(n == 2 && ids[0] == 3 && ids[1] == 0, "Z (no byte token) -> ▁ <unk>");
    CHECK(tok.pad == -1, "0xFFFFFFFF means no token");
    free(mem);
    free(x.bytes);

    /* BPE without types, with an empty token and a duplicate, merges by rank */
    static const char *const odd_tokens[] = {"a", "b", "c", "", "ab", "abc", "a", "\xc4\xa0"};
    static const char *const odd_merges[] = {"a b", "ab c", "a b"};
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_strs(&b, "tokenizer.ggml.tokens", odd_tokens, 8);
    kv_strs(&b, "tokenizer.ggml.merges", odd_merges, 3);
    x.bytes = finish(&b, &x.size);
    REQUIRE(wisp_gguf_open(&x.g, x.bytes, x.size, &err) == WISP_OK, "%s", err.message);
    REQUIRE(wisp_tokenizer_plan(&x.g, &bytes, &err) == WISP_OK, "%s", err.message);
    mem = malloc(bytes);
    wisp_arena_init(&a, mem, bytes);
    REQUIRE(wisp_tokenizer_init(&tok, &x.g, &a, &err) == WISP_OK, "%s", err.message);
    encode_small(&tok, "abc ab", WISP_TOKENIZE_PARSE_SPECIAL, ids, &n);
    /* "abc" 5; " ab" -> Ġ 7 + "ab" 4 (the repeated merge keeps rank 0; "a" resolves to
     * token 6, the later of the two "a"s, as in llama.cpp) */
    CHECK(n == 3 && ids[0] == 5 && ids[1] == 7 && ids[2] == 4, "abc ab -> abc Ġ ab (got %zu)", n);
    CHECK(wisp_token_lookup(&tok, "a", 1) == 6, "a later duplicate wins the lookup");
    encode_small(&tok, "", WISP_TOKENIZE_PARSE_SPECIAL, ids, &n);
    CHECK(n == 0, "empty");
    CHECK(wisp_tokenizer_bos(&tok) == -1, "no BOS in a bare gpt2 vocabulary");
    size_t sb = wisp_tokenizer_scratch_bytes(&tok, 1);
    void *scratch = malloc(sb);
    s = wisp_tokenize(&tok, "a", 1, WISP_TOKENIZE_ADD_BOS, ids, 64, &n, scratch, sb, &err);
    CHECK(s == WISP_ERR_ARG, "BOS requested without a BOS token: %s", wisp_status_name(s));
    free(scratch);
    char piece[8];
    CHECK(wisp_token_piece(&tok, 3, piece, sizeof piece) == 0, "empty token decodes to nothing");
    free(mem);
    free(x.bytes);
}

/* Build a vocabulary from `b`, init it, encode `text`, compare. */
static void expect_encoding(buf *b, const char *text, const int32_t *want, size_t n_want, const char *what) {
    built x;
    x.bytes = finish(b, &x.size);
    wisp_error err = {0};
    size_t bytes;
    REQUIRE(wisp_gguf_open(&x.g, x.bytes, x.size, &err) == WISP_OK, "%s", err.message);
    REQUIRE(wisp_tokenizer_plan(&x.g, &bytes, &err) == WISP_OK, "%s: %s", what, err.message);
    void *mem = malloc(bytes);
    wisp_arena a;
    wisp_arena_init(&a, mem, bytes);
    wisp_tokenizer tok;
    REQUIRE(wisp_tokenizer_init(&tok, &x.g, &a, &err) == WISP_OK, "%s: %s", what, err.message);
    int32_t ids[64];
    size_t n;
    encode_small(&tok, text, 0, ids, &n);
    CHECK(n == n_want && memcmp(ids, want, n * sizeof *ids) == 0, "%s (got %zu ids, first %d)", what, n, n ? ids[0] : -1);
    free(mem);
    free(x.bytes);
}

static void flags_from_metadata(void) {
    static const char *const toks[] = {"a", "b", "c", "bc", "abc"};
    static const char *const merges[] = {"b c"};
    buf b = {0};
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.pre", "gpt-2");
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 5);
    kv_strs(&b, "tokenizer.ggml.merges", merges, 1);
    static const int32_t merged[] = {0, 3};
    expect_encoding(&b, "abc", merged, 2, "gpt-2 merges: abc -> a bc");
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.pre", "llama-bpe");
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 5);
    kv_strs(&b, "tokenizer.ggml.merges", merges, 1);
    static const int32_t whole[] = {4};
    expect_encoding(&b, "abc", whole, 1, "llama-bpe ignores merges for a whole-token word: abc -> abc");

    spm_base(&b, SPM_N, SPM_N, SPM_N);
    key(&b, "tokenizer.ggml.add_space_prefix", WISP_GGUF_BOOL);
    put(&b, "\0", 1);
    static const int32_t no_prefix[] = {7}; /* "ab" without the leading ▁ */
    expect_encoding(&b, "ab", no_prefix, 1, "add_space_prefix = false");
}

int main(void) {
    hostile();
    flags_from_metadata();
    unknown_pre();
    exact_plan_and_odd_vocabs();
    return check_report("test_tokenizer_hostile");
}
