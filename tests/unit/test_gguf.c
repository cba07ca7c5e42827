/* GGUF reader and writer: real files, a written-then-read round trip, and
 * every truncation and a set of hostile edits of a small file. */
#include <string.h>

#include "check.h"
#include "gguf.h"
#include "gguf_write.h"
#include "half.h"
#include "types.h"

static void test_shared_models(void) {
    const char *path = shared_path("models/stories260K.gguf");
    if (!path) { printf("note: ../shared absent, real-file checks skipped\n"); return; }
    size_t n;
    unsigned char *b = read_file(path, &n);
    REQUIRE(b, "read %s", path);
    wisp_gguf g;
    wisp_error err = {0};
    REQUIRE(wisp_gguf_open(&g, b, n, &err) == WISP_OK, "%s", err.message);
    CHECK(g.version == 3 && g.n_tensors == 48 && g.n_kv == 19, "header %u %llu %llu", g.version,
          (unsigned long long)g.n_tensors, (unsigned long long)g.n_kv);
    uint32_t v;
    CHECK(wisp_gguf_get_u32(&g, "llama.embedding_length", &v) && v == 64, "embedding_length");
    float eps;
    CHECK(wisp_gguf_get_f32(&g, "llama.attention.layer_norm_rms_epsilon", &eps) && eps > 9e-6f && eps < 1.1e-5f, "eps");
    wisp_str s;
    CHECK(wisp_gguf_get_str(&g, "general.architecture", &s) && wisp_str_eq(s, "llama"), "arch");
    wisp_gguf_kv kv;
    REQUIRE(wisp_gguf_find_kv(&g, "tokenizer.ggml.tokens", &kv), "tokens");
    CHECK(kv.type == WISP_GGUF_ARRAY && kv.elem_type == WISP_GGUF_STRING && kv.count == 512, "tokens array");
    const uint8_t *pos = kv.value;
    wisp_str t0 = wisp_gguf_next_array_str(&pos), t1 = wisp_gguf_next_array_str(&pos);
    CHECK(wisp_str_eq(t0, "<unk>") && wisp_str_eq(t1, "<s>"), "first tokens");
    wisp_gguf_tensor t;
    REQUIRE(wisp_gguf_find_tensor(&g, "blk.0.ffn_down.weight", &t), "ffn_down");
    CHECK(t.ne[0] == 172 && t.ne[1] == 64 && t.type == WISP_TYPE_F32 && t.nbytes == 172 * 64 * 4, "ffn_down shape");
    CHECK(!wisp_gguf_find_tensor(&g, "blk.9.ffn_down.weight", &t), "absent tensor");
    int64_t i64;
    CHECK(!wisp_gguf_get_i64(&g, "general.architecture", &i64), "string is not an integer");
    free(b);
}

/* A small GGUF with every value type, two tensors and a custom alignment. */
static size_t build_sample(uint8_t *buf, size_t cap) {
    wisp_mem_sink m;
    wisp_sink s = wisp_mem_sink_make(&m, buf, cap);
    wisp_error err;
    const float data_a[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    const uint16_t data_b[32] = {0x3c00};
    wisp_gguf_out_tensor ts[2] = {{"a", 2, {4, 2, 1, 1}, WISP_TYPE_F32}, {"b.weight", 1, {32, 1, 1, 1}, WISP_TYPE_F16}};
    const int32_t arr[3] = {-1, 0, 7};
    wisp_gguf_write_header(&s, 2, 8, &err);
    wisp_gguf_write_kv_u32(&s, "general.alignment", 64, &err);
    wisp_gguf_write_kv_str(&s, "general.architecture", "llama", &err);
    wisp_gguf_write_kv_i32(&s, "x.i32", -5, &err);
    wisp_gguf_write_kv_f32(&s, "x.f32", 0.25f, &err);
    wisp_gguf_write_kv_bool(&s, "x.bool", true, &err);
    wisp_gguf_write_kv_array(&s, "x.arr", WISP_GGUF_I32, arr, 3, &err);
    uint8_t u8 = 200;
    wisp_gguf_write_kv_array(&s, "x.u8s", WISP_GGUF_U8, &u8, 1, &err);
    wisp_gguf_write_kv_strn(&s, "x.empty", "", 0, &err);
    wisp_gguf_write_tensor_infos(&s, ts, 2, 64, &err);
    wisp_sink_write(&s, data_a, sizeof data_a, &err);
    wisp_sink_pad(&s, 64, &err);
    wisp_sink_write(&s, data_b, sizeof data_b, &err);
    return m.len;
}

static void test_round_trip(void) {
    static uint8_t buf[4096];
    size_t n = build_sample(buf, sizeof buf);
    REQUIRE(n < sizeof buf, "sample fits");
    wisp_gguf g;
    wisp_error err = {0};
    REQUIRE(wisp_gguf_open(&g, buf, n, &err) == WISP_OK, "%s", err.message);
    CHECK(g.alignment == 64 && g.data_start % 64 == 0, "alignment %u data_start %zu", g.alignment, g.data_start);
    int64_t i;
    float f;
    bool b;
    CHECK(wisp_gguf_get_i64(&g, "x.i32", &i) && i == -5, "i32");
    CHECK(wisp_gguf_get_f32(&g, "x.f32", &f) && f == 0.25f, "f32");
    CHECK(wisp_gguf_get_bool(&g, "x.bool", &b) && b, "bool");
    wisp_gguf_kv kv;
    CHECK(wisp_gguf_find_kv(&g, "x.arr", &kv) && kv.count == 3 && wisp_gguf_kv_int(&kv, 2, &i) && i == 7, "array");
    CHECK(wisp_gguf_kv_int(&kv, 0, &i) && i == -1 && !wisp_gguf_kv_int(&kv, 3, &i), "array bounds");
    wisp_str s;
    CHECK(wisp_gguf_get_str(&g, "x.empty", &s) && s.len == 0, "empty string");
    wisp_gguf_tensor t;
    REQUIRE(wisp_gguf_find_tensor(&g, "b.weight", &t), "tensor b");
    CHECK(t.offset == 64 && t.nbytes == 64 && wisp_load_u16(t.data) == 0x3c00, "tensor b data");
    REQUIRE(wisp_gguf_find_tensor(&g, "a", &t), "tensor a");
    CHECK(wisp_load_f32((const uint8_t *)t.data + 28) == 8.0f, "tensor a data");

    /* every prefix must fail cleanly (except the full file) */
    int prefix_failures = 0;
    for (size_t cut = 0; cut < n; cut++) {
        uint8_t *copy = malloc(cut ? cut : 1);
        memcpy(copy, buf, cut);
        if (wisp_gguf_open(&g, copy, cut, &err) == WISP_OK) prefix_failures++;
        else if (!strstr(err.message, "truncated") && !strstr(err.message, "not a GGUF") && !strstr(err.message, "fit"))
            printf("prefix %zu: %s\n", cut, err.message);
        free(copy);
    }
    CHECK(prefix_failures == 0, "%d truncated prefixes parsed as valid", prefix_failures);

    /* every single-byte change of the header must not crash (the result may be valid) */
    for (size_t at = 0; at < g.data_start; at++)
        for (int bit = 0; bit < 8; bit++) {
            uint8_t copy[4096];
            memcpy(copy, buf, n);
            copy[at] ^= (uint8_t)(1u << bit);
            wisp_gguf g2;
            if (wisp_gguf_open(&g2, copy, n, &err) == WISP_OK) {
                size_t cur = 0;
                while (wisp_gguf_next_tensor(&g2, &cur, &t))
                    CHECK((const uint8_t *)t.data + t.nbytes <= copy + n, "tensor extent past the end after a flip");
            }
        }
}

static void expect_error(const uint8_t *b, size_t n, const char *fragment) {
    wisp_gguf g;
    wisp_error err = {0};
    wisp_status st = wisp_gguf_open(&g, b, n, &err);
    CHECK(st != WISP_OK && strstr(err.message, fragment), "want error containing '%s', got %d '%s'", fragment, st,
          err.message);
}

static void test_hostile(void) {
    uint8_t buf[512];
    wisp_mem_sink m;
    wisp_error err;
    /* duplicate key */
    wisp_sink s = wisp_mem_sink_make(&m, buf, sizeof buf);
    wisp_gguf_write_header(&s, 0, 2, &err);
    wisp_gguf_write_kv_u32(&s, "k", 1, &err);
    wisp_gguf_write_kv_u32(&s, "k", 2, &err);
    expect_error(buf, m.len, "appears twice");
    /* duplicate tensor */
    s = wisp_mem_sink_make(&m, buf, sizeof buf);
    wisp_gguf_out_tensor ts[2] = {{"t", 1, {4, 1, 1, 1}, WISP_TYPE_F32}, {"t", 1, {4, 1, 1, 1}, WISP_TYPE_F32}};
    wisp_gguf_write_header(&s, 2, 0, &err);
    wisp_gguf_write_tensor_infos(&s, ts, 2, 32, &err);
    uint8_t zeros[64] = {0};
    wisp_sink_write(&s, zeros, 64, &err);
    expect_error(buf, m.len, "appears twice");
    /* a tensor whose data runs past the end (the second one ends 16 bytes before the padding does) */
    expect_error(buf, m.len - 17, "truncated");
    /* bad version, bad alignment, huge counts */
    s = wisp_mem_sink_make(&m, buf, sizeof buf);
    wisp_gguf_write_header(&s, 0, 1, &err);
    wisp_gguf_write_kv_u32(&s, "general.alignment", 48, &err);
    expect_error(buf, m.len, "power of two");
    buf[4] = 9;
    expect_error(buf, m.len, "version 9");
    s = wisp_mem_sink_make(&m, buf, sizeof buf);
    wisp_gguf_write_header(&s, UINT64_MAX / 2, UINT64_MAX / 3, &err);
    expect_error(buf, m.len, "cannot fit");
    /* a row length that is not a whole number of blocks */
    s = wisp_mem_sink_make(&m, buf, sizeof buf);
    wisp_gguf_write_header(&s, 1, 0, &err);
    wisp_gguf_out_tensor q = {"q", 1, {32, 1, 1, 1}, WISP_TYPE_Q8_0};
    wisp_gguf_write_tensor_infos(&s, &q, 1, 32, &err);
    wisp_sink_write(&s, zeros, 34, &err);
    buf[24 + 8 + 1 + 4] = 31; /* ne[0] = 31 */
    expect_error(buf, m.len, "not a multiple");
    /* a string array whose count cannot fit */
    s = wisp_mem_sink_make(&m, buf, sizeof buf);
    wisp_gguf_write_header(&s, 0, 1, &err);
    wisp_gguf_write_kv_array_begin(&s, "arr", WISP_GGUF_STRING, UINT64_C(1) << 60, &err);
    expect_error(buf, m.len, "cannot fit");
    expect_error((const uint8_t *)"GGML", 4, "not a GGUF");
}

/* What wisp.h's callers, who cannot see the struct, rely on: the size it
 * reports, and a missing handle refused as a value, not dereferenced. */
static void test_opaque_handle(void) {
    CHECK(wisp_gguf_size() == sizeof(wisp_gguf), "wisp_gguf_size %zu, sizeof %zu", wisp_gguf_size(), sizeof(wisp_gguf));
    static uint8_t buf[4096];
    size_t n = build_sample(buf, sizeof buf);
    wisp_error err = {0};
    CHECK(wisp_gguf_open(NULL, buf, n, &err) == WISP_ERR_ARG, "a NULL handle: %s", err.message);
}

int main(void) {
    test_opaque_handle();
    test_shared_models();
    test_round_trip();
    test_hostile();
    return check_report("test_gguf");
}
