/* file_boundaries KIND FILE: print where the structure of a file begins and
 * ends, for the truncation matrix (tests/cli/test_matrix.sh): a prefix cut
 * at, just before or just after each of these offsets stops the reader in a
 * different place. KIND is gguf, safetensors, json, llama2c (checkpoint),
 * llama2c-tok (tokenizer) or checkpoint (wisp finetune's checkpoint.bin).
 *
 * Output, one fact per line:
 *     size N          the file's length
 *     valid_from N    the shortest prefix that can still be a valid file
 *                     (trailing padding and whitespace may go; nothing else)
 *     header_end N    where the descriptive part ends (the payload follows)
 *     OFFSET LABEL    a boundary, e.g. "24 kv[0].key_len" or "4096 tensor[3].data"
 * Long arrays list their first three and last element boundaries only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf.h"
#include "half.h"
#include "llama2c.h"
#include "safetensors.h"

static void at(size_t off, const char *what, long i, const char *field) {
    if (i >= 0) printf("%zu %s[%ld].%s\n", off, what, i, field);
    else printf("%zu %s\n", off, what);
}

/* Structural characters of JSON text outside strings, plus each string's start. */
static void json_structure(const unsigned char *t, size_t n, size_t base) {
    bool in_string = false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = t[i];
        if (in_string) {
            if (c == '\\') i++;
            else if (c == '"') in_string = false, at(base + i + 1, "json.string_end", -1, NULL);
        } else if (c == '"') {
            in_string = true;
            at(base + i, "json.string", -1, NULL);
        } else if (strchr("{}[]:,", c) && c) {
            at(base + i, "json.token", -1, NULL);
        }
    }
}

static size_t json_valid_from(const unsigned char *t, size_t n) {
    while (n > 0 && strchr(" \t\r\n", t[n - 1])) n--;
    return n;
}

static int gguf(const unsigned char *b, size_t n) {
    wisp_gguf g;
    wisp_error err = {0};
    if (wisp_gguf_open(&g, b, n, &err)) {
        fprintf(stderr, "file_boundaries: %s\n", err.message);
        return 1;
    }
    size_t end = g.data_start;
    wisp_gguf_tensor t;
    size_t cur = 0;
    while (wisp_gguf_next_tensor(&g, &cur, &t)) {
        size_t e = (size_t)((const uint8_t *)t.data - b) + (size_t)t.nbytes;
        if (e > end) end = e;
    }
    /* a file without tensors may end where its infos end, before the padding */
    printf("size %zu\nvalid_from %zu\nheader_end %zu\n", n, g.n_tensors ? end : g.tensors_start, g.data_start);
    at(4, "magic", -1, NULL);
    at(8, "version", -1, NULL);
    at(16, "n_tensors", -1, NULL);
    at(24, "n_kv", -1, NULL);
    wisp_gguf_kv kv;
    cur = 0;
    long i = 0;
    while (wisp_gguf_next_kv(&g, &cur, &kv)) {
        size_t key = (size_t)((const uint8_t *)kv.key.ptr - b);
        at(key - 8, "kv", i, "key_len");
        at(key, "kv", i, "key");
        at(key + kv.key.len, "kv", i, "type");
        size_t v = (size_t)(kv.value - b);
        if (kv.type == WISP_GGUF_ARRAY) {
            at(key + kv.key.len + 4, "kv", i, "elem_type");
            at(key + kv.key.len + 8, "kv", i, "count");
        }
        at(v, "kv", i, "value");
        if (kv.type == WISP_GGUF_STRING) at(v + 8, "kv", i, "string");
        if (kv.type == WISP_GGUF_ARRAY && kv.elem_type == WISP_GGUF_STRING) {
            const uint8_t *p = kv.value;
            for (uint64_t k = 0; k < kv.count; k++) {
                const uint8_t *start = p;
                (void)wisp_gguf_next_array_str(&p);
                if (k < 3 || k + 1 == kv.count) at((size_t)(start - b), "kv", i, "element");
            }
        } else if (kv.type == WISP_GGUF_ARRAY && kv.count > 1) {
            size_t elem = kv.value_bytes / kv.count;
            at(v + elem, "kv", i, "element");
            at(v + kv.value_bytes - elem, "kv", i, "last_element");
        }
        at(v + kv.value_bytes, "kv", i, "end");
        i++;
    }
    cur = 0;
    i = 0;
    while (wisp_gguf_next_tensor(&g, &cur, &t)) {
        size_t name = (size_t)((const uint8_t *)t.name.ptr - b), after = name + t.name.len;
        at(name - 8, "tensor", i, "name_len");
        at(name, "tensor", i, "name");
        at(after, "tensor", i, "n_dims");
        at(after + 4, "tensor", i, "ne");
        at(after + 4 + 8 * t.n_dims, "tensor", i, "type");
        at(after + 8 + 8 * t.n_dims, "tensor", i, "offset");
        at(after + 16 + 8 * t.n_dims, "tensor", i, "info_end");
        at((size_t)((const uint8_t *)t.data - b), "tensor", i, "data");
        i++;
    }
    at(g.tensors_start, "tensor_infos", -1, NULL);
    at(g.data_start, "data_section", -1, NULL);
    return 0;
}

static int safetensors(const unsigned char *b, size_t n) {
    wisp_st_plan plan;
    wisp_error err = {0};
    if (wisp_st_plan_memory(b, n, &plan, &err)) {
        fprintf(stderr, "file_boundaries: %s\n", err.message);
        return 1;
    }
    void *mem = malloc(plan.bytes ? plan.bytes : 8);
    wisp_safetensors st;
    if (wisp_st_open(&st, b, n, mem, plan.bytes, &err)) {
        fprintf(stderr, "file_boundaries: %s\n", err.message);
        return 1;
    }
    size_t data = (size_t)(st.data - b);
    printf("size %zu\nvalid_from %zu\nheader_end %zu\n", n, n, data);
    at(8, "header_len", -1, NULL);
    json_structure(b + 8, st.header_len, 8);
    for (size_t i = 0; i < st.n_tensors; i++) {
        wisp_st_tensor t;
        wisp_st_tensor_at(&st, i, &t);
        at((size_t)(t.data - b), "tensor", (long)i, "data");
    }
    at(data, "data_section", -1, NULL);
    free(mem);
    return 0;
}

static int llama2c(const unsigned char *b, size_t n) {
    wisp_llama2c m;
    wisp_error err = {0};
    if (wisp_llama2c_open(&m, b, n, &err)) {
        fprintf(stderr, "file_boundaries: %s\n", err.message);
        return 1;
    }
    printf("size %zu\nvalid_from %zu\nheader_end 28\n", n, n);
    static const char *const fields[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
    for (int i = 0; i < 7; i++) at(4 * (size_t)i + 4, fields[i], -1, NULL);
    const size_t offs[] = {m.off_embedding, m.off_rms_att, m.off_wq, m.off_wk, m.off_wv, m.off_wo,
                           m.off_rms_ffn, m.off_w1, m.off_w2, m.off_w3, m.off_rms_final, m.off_classifier};
    static const char *const names[] = {"embedding", "rms_att", "wq", "wk", "wv", "wo",
                                        "rms_ffn", "w1", "w2", "w3", "rms_final", "classifier"};
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) at(offs[i], names[i], -1, NULL);
    return 0;
}

static int llama2c_tok(const unsigned char *b, size_t n) {
    printf("size %zu\nvalid_from %zu\nheader_end %zu\n", n, n, n);
    at(4, "max_token_length", -1, NULL);
    size_t pos = 4;
    long i = 0;
    while (pos + 8 <= n) {
        uint32_t len = wisp_load_u32(b + pos + 4);
        if (len > n - pos - 8) break;
        at(pos + 4, "token", i, "len");
        at(pos + 8, "token", i, "text");
        pos += 8 + len;
        at(pos, "token", i, "end");
        i++;
    }
    return 0;
}

/* checkpoint.bin: "WISPCKP1", i64 epoch, i32 pos, i64 tokens, f64 seconds, then the
 * engine's state: "WISPTRS1", u32 version, u32 header bytes, 9 x u32, u64 n_params,
 * u64 seed, i64 step, i64 micro_total, i32 good_steps, f32 loss_scale, i32 hysteresis_left,
 * i64 skipped_steps, arrays. */
static int checkpoint(const unsigned char *b, size_t n) {
    const size_t head = 36, state_header = 104;
    if (n < head + state_header || memcmp(b, "WISPCKP1", 8) != 0) {
        fprintf(stderr, "file_boundaries: not a wisp finetune checkpoint\n");
        return 1;
    }
    printf("size %zu\nvalid_from %zu\nheader_end %zu\n", n, n, head + state_header);
    static const size_t fields[] = {8, 16, 20, 28, 36};
    static const char *const names[] = {"magic", "epoch", "pos", "tokens", "seconds"};
    for (int i = 0; i < 5; i++) at(fields[i], names[i], -1, NULL);
    size_t s = head;
    at(s + 8, "state.magic", -1, NULL);
    at(s + 12, "state.version", -1, NULL);
    at(s + 16, "state.header_bytes", -1, NULL);
    for (int i = 0; i < 9; i++) at(s + 20 + 4 * (size_t)i, "state.u32", i, "field");
    uint64_t n_params = wisp_load_u64(b + s + 52);
    at(s + 60, "state.n_params", -1, NULL);
    at(s + 68, "state.seed", -1, NULL);
    at(s + 76, "state.step", -1, NULL);
    at(s + 84, "state.micro_total", -1, NULL);
    at(s + 88, "state.good_steps", -1, NULL);
    at(s + 92, "state.loss_scale", -1, NULL);
    at(s + 96, "state.hysteresis_left", -1, NULL);
    at(s + 104, "state.skipped_steps", -1, NULL);
    for (size_t k = 0; s + state_header + k * n_params * 4 < n; k++)
        at(s + state_header + k * (size_t)n_params * 4, "state.array", (long)k, "start");
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: file_boundaries gguf|safetensors|json|llama2c|llama2c-tok|checkpoint FILE\n");
        return 2;
    }
    size_t n;
    unsigned char *b = read_file(argv[2], &n);
    if (!b) {
        fprintf(stderr, "file_boundaries: cannot read %s\n", argv[2]);
        return 1;
    }
    const char *kind = argv[1];
    int rc = 2;
    if (strcmp(kind, "gguf") == 0) rc = gguf(b, n);
    else if (strcmp(kind, "safetensors") == 0) rc = safetensors(b, n);
    else if (strcmp(kind, "llama2c") == 0) rc = llama2c(b, n);
    else if (strcmp(kind, "llama2c-tok") == 0) rc = llama2c_tok(b, n);
    else if (strcmp(kind, "checkpoint") == 0) rc = checkpoint(b, n);
    else if (strcmp(kind, "json") == 0) {
        printf("size %zu\nvalid_from %zu\nheader_end %zu\n", n, json_valid_from(b, n), n);
        json_structure(b, n, 0);
        rc = 0;
    } else fprintf(stderr, "file_boundaries: unknown kind %s\n", kind);
    free(b);
    return rc;
}
