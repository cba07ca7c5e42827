/* libFuzzer harness: arbitrary bytes as a Hugging Face tokenizer.json,
 * optionally followed by a NUL byte and a tokenizer_config.json (JSON text
 * cannot hold a raw NUL, so the split is unambiguous). Import it in exactly
 * the planned memory into a vocabulary-only GGUF in memory (sized by a
 * counting pass, written by a second), then load that GGUF as wisp's
 * tokenizer and encode and decode a text with it: whatever the importer
 * accepts must make a vocabulary the tokenizer can load or refuse cleanly. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "gguf_write.h"
#include "hf_tokenizer.h"
#include "tokenizer.h"

static const char sample[] = "Hello world! 123  <|endoftext|> caf\xc3\xa9 \xe2\x96\x81x\n\tend";

static void use_vocabulary(unsigned char *file, size_t n) {
    wisp_gguf g;
    wisp_error err;
    size_t bytes;
    if (wisp_gguf_open(&g, file, n, &err) || wisp_tokenizer_plan(&g, &bytes, &err)) return;
    void *tables = aligned_alloc(64, (bytes + 64) & ~(size_t)63);
    wisp_arena a;
    wisp_arena_init(&a, tables, bytes);
    wisp_tokenizer tok;
    if (wisp_tokenizer_init(&tok, &g, &a, &err) == WISP_OK) {
        size_t scratch_bytes = wisp_tokenizer_scratch_bytes(&tok, sizeof sample - 1);
        void *scratch = fuzz_exact(scratch_bytes);
        int32_t ids[128];
        size_t n_ids = 0;
        if (wisp_tokenize(&tok, sample, sizeof sample - 1, WISP_TOKENIZE_ADD_BOS | WISP_TOKENIZE_PARSE_SPECIAL, ids,
                          128, &n_ids, scratch, scratch_bytes, &err) == WISP_OK) {
            size_t cap = n_ids * (size_t)tok.max_token_len + 16;
            char *out = fuzz_exact(cap);
            if (wisp_detokenize(&tok, ids, n_ids, WISP_DETOKENIZE_SPECIAL, out, cap) > cap) abort();
            free(out);
        }
        free(scratch);
    }
    free(tables);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t json_len = nul ? (size_t)(nul - data) : size;
    char *json = fuzz_exact(json_len);
    memcpy(json, data, json_len);
    wisp_hf_tokenizer_opts opts = {NULL, 0, NULL, 0};
    char *config = NULL;
    if (nul) {
        opts.config_len = size - json_len - 1;
        config = fuzz_exact(opts.config_len);
        memcpy(config, nul + 1, opts.config_len);
        opts.config = config;
    }
    /* the importer keeps state of a few KB: on the heap, as callers do */
    wisp_hf_tokenizer *t = malloc(sizeof *t);
    wisp_error err;
    size_t node_bytes;
    void *nodes = NULL, *tables = NULL;
    unsigned char *out = NULL;
    if (wisp_hf_tokenizer_nodes(json, json_len, &opts, &node_bytes, &err) == WISP_OK &&
        wisp_hf_tokenizer_open(t, json, json_len, &opts, nodes = fuzz_exact(node_bytes), node_bytes, &err) ==
            WISP_OK &&
        wisp_hf_tokenizer_index(t, tables = fuzz_exact(t->table_bytes), t->table_bytes, &err) == WISP_OK) {
        size_t out_size = 0;
        for (int pass = 0; pass < 2; pass++) {
            wisp_mem_sink m;
            wisp_sink s = pass ? wisp_mem_sink_make(&m, out, out_size) : wisp_count_sink_make();
            wisp_status st = wisp_gguf_write_header(&s, 0, 1 + wisp_hf_tokenizer_kv_count(t), &err);
            if (!st) st = wisp_gguf_write_kv_str(&s, "general.architecture", "llama", &err);
            if (!st) st = wisp_hf_tokenizer_write(t, &s, &err);
            if (st) break;
            if (pass == 0) out = aligned_alloc(64, ((out_size = (size_t)s.written) + 64) & ~(size_t)63);
            else if (s.written != out_size) abort(); /* both passes must write the same bytes */
            else use_vocabulary(out, out_size);
        }
    }
    free(out);
    free(tables);
    free(nodes);
    free(t);
    free(config);
    free(json);
    return 0;
}
