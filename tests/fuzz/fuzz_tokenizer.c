/* libFuzzer harness: arbitrary bytes encoded and decoded by each tokenizer
 * kind (SentencePiece, byte-level BPE, WordPiece), with and without special
 * token parsing. The vocabularies are real GGUFs named by WISP_FUZZ_VOCABS
 * (colon-separated paths; `make fuzz` points them into ../shared). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

#define MAX_VOCABS 8

typedef struct vocab {
    unsigned char *file;
    wisp_gguf g;
    wisp_tokenizer tok;
    void *tables;
} vocab;

static vocab vocabs[MAX_VOCABS];
static int n_vocabs = -1;

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    unsigned char *b = aligned_alloc(64, ((size_t)len + 64) & ~(size_t)63);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) { free(b); b = NULL; }
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void load_vocabs(void) {
    n_vocabs = 0;
    const char *list = getenv("WISP_FUZZ_VOCABS");
    if (!list) { fprintf(stderr, "fuzz_tokenizer: set WISP_FUZZ_VOCABS=a.gguf:b.gguf\n"); abort(); }
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", list);
    for (char *p = strtok(copy, ":"); p && n_vocabs < MAX_VOCABS; p = strtok(NULL, ":")) {
        vocab *v = &vocabs[n_vocabs];
        size_t n;
        wisp_error err;
        size_t bytes;
        if (!(v->file = slurp(p, &n)) || wisp_gguf_open(&v->g, v->file, n, &err) ||
            wisp_tokenizer_plan(&v->g, &bytes, &err)) {
            fprintf(stderr, "fuzz_tokenizer: cannot load %s\n", p);
            abort();
        }
        v->tables = aligned_alloc(64, (bytes + 64) & ~(size_t)63);
        wisp_arena a;
        wisp_arena_init(&a, v->tables, bytes);
        if (wisp_tokenizer_init(&v->tok, &v->g, &a, &err)) { fprintf(stderr, "%s: %s\n", p, err.message); abort(); }
        n_vocabs++;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (n_vocabs < 0) load_vocabs();
    if (size == 0) return 0;
    const vocab *v = &vocabs[data[0] % n_vocabs];
    unsigned flags = (data[0] >> 4) & 7u;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    size_t scratch_bytes = wisp_tokenizer_scratch_bytes(&v->tok, len);
    void *scratch = malloc(scratch_bytes ? scratch_bytes : 1);
    size_t cap = len + 8, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    wisp_error err;
    if (wisp_tokenize(&v->tok, text, len, flags, ids, cap, &n, scratch, scratch_bytes, &err) == WISP_OK) {
        /* a piece is never longer than its token's text */
        size_t out_cap = n * (size_t)v->tok.max_token_len + 16;
        char *out = malloc(out_cap);
        size_t full = wisp_detokenize(&v->tok, ids, n, WISP_DETOKENIZE_SPECIAL, out, out_cap);
        if (full > out_cap) abort();
        free(out);
    }
    /* a deliberately small output buffer must report the size, not overflow */
    if (n > 2) {
        size_t need = 0;
        int32_t small[2];
        if (wisp_tokenize(&v->tok, text, len, flags, small, 2, &need, scratch, scratch_bytes, &err) != WISP_ERR_CAPACITY ||
            need != n)
            abort();
    }
    free(ids);
    free(scratch);
    return 0;
}
