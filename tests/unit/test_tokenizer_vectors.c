/* llama.cpp's tokenizer test vectors: every .inp/.out pair in
 * shared/models/tokenizers/llamacpp-vocab whose vocabulary GGUF is present
 * must encode exactly (no BOS, no special-token parsing). Pairs without a
 * GGUF are listed as skipped. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* opendir, strdup */
#endif
#include <dirent.h>

#include "test_tokenizer_util.h"

#define MAX_CASES 256
#define MAX_IDS 4096

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Parse one .out line of space-separated ids. */
static size_t parse_ids(const char *line, size_t len, int32_t *ids, size_t max) {
    size_t n = 0, i = 0;
    while (i < len && n < max) {
        while (i < len && line[i] == ' ') i++;
        if (i >= len) break;
        long v = 0;
        while (i < len && line[i] >= '0' && line[i] <= '9') v = v * 10 + (line[i++] - '0');
        ids[n++] = (int32_t)v;
        while (i < len && line[i] != ' ') i++;
    }
    return n;
}

static void test_pair(const char *dir, const char *inp_name, int *vocabs_run, int *vocabs_skipped) {
    char base[512], path[1200];
    size_t bl = strlen(inp_name) - 4; /* drop ".inp" */
    snprintf(base, sizeof base, "%.*s", (int)bl, inp_name);
    snprintf(path, sizeof path, "%s/%s", dir, base);
    FILE *probe = fopen(path, "rb");
    if (!probe) {
        printf("skip  %-36s no vocab file (the GGUF was too large to bring; only %s.inp/.out exist)\n", base, base);
        (*vocabs_skipped)++;
        return;
    }
    fclose(probe);
    (*vocabs_run)++;

    loaded_vocab v;
    REQUIRE(load_vocab(&v, path) == 0, "%s does not load", base);
    wisp_str pre = {"", 0};
    wisp_gguf_get_str(&v.g, "tokenizer.ggml.pre", &pre);

    char inp_path[1200], out_path[1200];
    snprintf(inp_path, sizeof inp_path, "%s/%s.inp", dir, base);
    snprintf(out_path, sizeof out_path, "%s/%s.out", dir, base);
    size_t inp_size, out_size;
    char *inp = (char *)read_file(inp_path, &inp_size);
    char *outf = (char *)read_file(out_path, &out_size);
    REQUIRE(inp && outf, "cannot read %s vectors", base);

    static char *cases[MAX_CASES];
    static size_t lens[MAX_CASES];
    size_t n_cases = split_cases(inp, inp_size, cases, lens, MAX_CASES);

    size_t pass = 0, line_start = 0;
    static int32_t want[MAX_IDS];
    for (size_t c = 0; c < n_cases; c++) {
        size_t line_end = line_start;
        while (line_end < out_size && outf[line_end] != '\n') line_end++;
        CHECK(line_start < out_size || c == n_cases - 1, "%s: fewer .out lines than cases", base);
        size_t n_want = parse_ids(outf + line_start, line_end - line_start, want, MAX_IDS);
        line_start = line_end + 1;

        int32_t *got;
        size_t n_got;
        wisp_error err = {0};
        wisp_status s = encode_alloc(&v.tok, cases[c], lens[c], 0, &got, &n_got, &err);
        bool same = s == WISP_OK && n_got == n_want && memcmp(got, want, n_want * sizeof *want) == 0;
        CHECK(same, "%s case %zu differs", base, c);
        if (same) {
            pass++;
        } else {
            fprintf(stderr, "  text: ");
            print_escaped(stderr, cases[c], lens[c]);
            fprintf(stderr, "\n  want:");
            for (size_t i = 0; i < n_want; i++) fprintf(stderr, " %d", want[i]);
            fprintf(stderr, "\n  got: ");
            if (s) fprintf(stderr, " (%s: %s)", wisp_status_name(s), err.message);
            for (size_t i = 0; i < n_got; i++) fprintf(stderr, " %d", got[i]);
            fprintf(stderr, "\n");
        }
        free(got);
    }
    printf("%-5s %-36s pre %-15.*s %3zu/%-3zu cases  (tables %zu bytes)\n", pass == n_cases ? "ok" : "FAIL", base,
           (int)pre.len, pre.ptr, pass, n_cases, v.table_bytes);
    free(inp);
    free(outf);
    free_vocab(&v);
}

int main(void) {
    const char *dir = shared_path_or_skip("test_tokenizer_vectors", VOCAB_DIR);
    DIR *d = opendir(dir);
    if (!d) check_skip("test_tokenizer_vectors", "cannot list the vocabulary folder");
    char *names[128];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 128) {
        size_t l = strlen(e->d_name);
        if (l > 4 && strcmp(e->d_name + l - 4, ".inp") == 0) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof names[0], cmp_names);
    int run = 0, skipped = 0;
    for (size_t i = 0; i < n; i++) {
        test_pair(dir, names[i], &run, &skipped);
        free(names[i]);
    }
    printf("%d vocabularies tested, %d vector files without a vocabulary skipped\n", run, skipped);
    CHECK(run > 0, "no vocabulary was tested");
    return check_report("test_tokenizer_vectors");
}
