/* Helpers shared by the tokenizer tests: load a vocabulary GGUF into a
 * tokenizer, read llama.cpp's .inp/.out test vectors, encode with scratch. */
#ifndef WISP_TEST_TOKENIZER_UTIL_H
#define WISP_TEST_TOKENIZER_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf.h"
#include "tokenizer.h"

#define VOCAB_DIR "models/tokenizers/llamacpp-vocab"

typedef struct loaded_vocab {
    unsigned char *file;
    size_t file_size;
    wisp_gguf g;
    void *arena_mem;
    wisp_arena arena;
    size_t table_bytes;
    wisp_tokenizer tok;
} loaded_vocab;

/* 0 on success; on failure prints why and returns -1. */
static inline int load_vocab(loaded_vocab *v, const char *path) {
    memset(v, 0, sizeof *v);
    wisp_error err = {0};
    v->file = read_file(path, &v->file_size);
    if (!v->file) { fprintf(stderr, "cannot read %s\n", path); return -1; }
    if (wisp_gguf_open(&v->g, v->file, v->file_size, &err)) { fprintf(stderr, "%s: %s\n", path, err.message); return -1; }
    if (wisp_tokenizer_plan(&v->g, &v->table_bytes, &err)) { fprintf(stderr, "%s: plan: %s\n", path, err.message); return -1; }
    v->arena_mem = malloc(v->table_bytes ? v->table_bytes : 1);
    wisp_arena_init(&v->arena, v->arena_mem, v->table_bytes);
    if (wisp_tokenizer_init(&v->tok, &v->g, &v->arena, &err)) { fprintf(stderr, "%s: init: %s\n", path, err.message); return -1; }
    return 0;
}

static inline void free_vocab(loaded_vocab *v) {
    free(v->arena_mem);
    free(v->file);
    memset(v, 0, sizeof *v);
}

/* Encode with freshly sized scratch; returns the status, ids in *out (malloc'd). */
static inline wisp_status encode_alloc(const wisp_tokenizer *tok, const char *text, size_t len, unsigned flags,
                                       int32_t **out, size_t *n, wisp_error *err) {
    size_t sb = wisp_tokenizer_scratch_bytes(tok, len);
    void *scratch = malloc(sb ? sb : 1);
    size_t cap = len + 16;
    int32_t *ids = malloc(cap * sizeof *ids);
    wisp_status s = wisp_tokenize(tok, text, len, flags, ids, cap, n, scratch, sb, err);
    if (s == WISP_ERR_CAPACITY) {
        cap = *n;
        ids = realloc(ids, (cap ? cap : 1) * sizeof *ids);
        s = wisp_tokenize(tok, text, len, flags, ids, cap, n, scratch, sb, err);
    }
    free(scratch);
    *out = ids;
    return s;
}

static inline char *detok_alloc(const wisp_tokenizer *tok, const int32_t *ids, size_t n, unsigned flags, size_t *len) {
    size_t need = wisp_detokenize(tok, ids, n, flags, NULL, 0);
    char *buf = malloc(need + 1);
    size_t got = wisp_detokenize(tok, ids, n, flags, buf, need);
    buf[got < need ? got : need] = 0;
    *len = need;
    return buf;
}

/* Test strings of a .inp file: separated by "\n__ggml_vocab_test__\n"; a file
 * ending with the separator has no empty last case. Pointers into `text`
 * (which is modified); returns the count. */
static inline size_t split_cases(char *text, size_t size, char **cases, size_t *lens, size_t max) {
    static const char sep[] = "\n__ggml_vocab_test__\n";
    size_t seplen = sizeof sep - 1, n = 0, start = 0;
    for (size_t i = 0; i + seplen <= size && n < max;) {
        if (memcmp(text + i, sep, seplen) == 0) {
            cases[n] = text + start;
            lens[n] = i - start;
            n++;
            i += seplen;
            start = i;
        } else {
            i++;
        }
    }
    if (start < size && n < max) {
        cases[n] = text + start;
        lens[n] = size - start;
        n++;
    }
    return n;
}

static inline void print_escaped(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '"') fputs("\\\"", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\x%02x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

#endif
