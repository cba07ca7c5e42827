/* Encoding speed and scaling: tinyshakespeare (1.1 MB) through the SmolLM2
 * byte-level BPE and the Llama SentencePiece vocabularies, plus inputs that
 * would expose quadratic behaviour (long runs of one character, long runs of
 * spaces, one huge word). Prints MB/s and init times for information only:
 * it asserts results (every input encodes and decodes back), never a time,
 * which would make it fail on a slow or busy machine, or under valgrind.
 * A quadratic encoder shows up here as minutes, not as a failed check. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#endif
#include <time.h>

#include "test_tokenizer_util.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void time_init(const char *rel) {
    const char *path = shared_path(rel);
    if (!path) return;
    loaded_vocab v;
    REQUIRE(load_vocab(&v, path) == 0, "%s does not load", rel);
    wisp_arena a;
    wisp_error err = {0};
    const int reps = 5;
    double t0 = now();
    for (int i = 0; i < reps; i++) {
        wisp_arena_init(&a, v.arena_mem, v.table_bytes);
        CHECK(wisp_tokenizer_init(&v.tok, &v.g, &a, &err) == WISP_OK, "%s", err.message);
    }
    double ms = (now() - t0) * 1000.0 / reps;
    printf("init %-48s %7.2f ms  (%d tokens, %d merges, %zu table bytes)\n", rel, ms, v.tok.n_vocab, v.tok.n_merges,
           v.table_bytes);
    free_vocab(&v);
}

/* Encode, check the round trip, report MB/s; returns the token count. */
static size_t run(const loaded_vocab *v, const char *label, const char *text, size_t len) {
    int32_t *ids;
    size_t n;
    wisp_error err = {0};
    double t0 = now();
    wisp_status s = encode_alloc(&v->tok, text, len, 0, &ids, &n, &err);
    double secs = now() - t0;
    CHECK(s == WISP_OK, "%s: %s", label, err.message);
    size_t dl;
    char *back = detok_alloc(&v->tok, ids, n, WISP_DETOKENIZE_STRIP_PREFIX, &dl);
    bool same = dl == len && memcmp(back, text, len) == 0;
    CHECK(same || v->tok.kind == WISP_VOCAB_WPM, "%s: decoding does not give the text back", label);
    printf("  %-40s %9zu bytes -> %8zu tokens  %8.2f ms  %7.2f MB/s\n", label, len, n, secs * 1000.0,
           (double)len / 1e6 / (secs > 0 ? secs : 1e-9));
    free(back);
    free(ids);
    return n;
}

static void speed_for(const char *rel, const char *corpus, size_t corpus_len) {
    const char *path = shared_path(rel);
    if (!path) {
        printf("skip %s: missing\n", rel);
        return;
    }
    loaded_vocab v;
    REQUIRE(load_vocab(&v, path) == 0, "%s does not load", rel);
    printf("%s\n", rel);
    if (corpus) run(&v, "tinyshakespeare", corpus, corpus_len);

    size_t big = 100000;
    char *s = malloc(big + 1);
    memset(s, 'a', big);
    run(&v, "100000 x 'a'", s, big);
    memset(s, ' ', big);
    run(&v, "100000 spaces", s, big);
    for (size_t i = 0; i < big; i++) s[i] = "ab"[i % 2];
    run(&v, "100000 x 'ab'", s, big);
    for (size_t i = 0; i < big; i++) s[i] = (i % 7 == 6) ? '\n' : ' ';
    run(&v, "100000 spaces and newlines", s, big);
    for (size_t i = 0; i < big; i++) s[i] = (char)('0' + i % 10);
    run(&v, "100000 digits", s, big);
    static const char code[] = "        if (x) {\n            y();\n        }\n";
    for (size_t i = 0; i < big; i++) s[i] = code[i % (sizeof code - 1)];
    run(&v, "100000 bytes of indented code", s, big);
    free(s);
    free_vocab(&v);
}

int main(void) {
    const char *corpus_path = shared_path_or_skip("test_tokenizer_speed", "data/tinyshakespeare.txt");
    size_t len;
    char *corpus = (char *)read_file(corpus_path, &len);
    if (!corpus) check_skip("test_tokenizer_speed", "cannot read data/tinyshakespeare.txt");
    time_init(VOCAB_DIR "/ggml-vocab-smollm2.gguf");
    time_init(VOCAB_DIR "/ggml-vocab-llama-spm.gguf");
    time_init(VOCAB_DIR "/ggml-vocab-deepseek-llm.gguf");
    time_init("models/stories260K.gguf");
    speed_for(VOCAB_DIR "/ggml-vocab-smollm2.gguf", corpus, len);
    speed_for(VOCAB_DIR "/ggml-vocab-llama-spm.gguf", corpus, len);
    speed_for(VOCAB_DIR "/ggml-vocab-bert-bge.gguf", corpus, len);
    speed_for(VOCAB_DIR "/ggml-vocab-deepseek-llm.gguf", corpus, len);
    speed_for(VOCAB_DIR "/ggml-vocab-mpt.gguf", corpus, len); /* 178 user-defined space-run tokens */
    free(corpus);
    return check_report("test_tokenizer_speed");
}
