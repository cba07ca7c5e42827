/* safetensors: the golden PEFT file read in place; every dtype written and
 * read back; every truncation and a catalogue of hostile headers rejected
 * with a clear message (never a crash or an out-of-bounds read). */
#include <string.h>

#include "check.h"
#include "half.h"
#include "safetensors.h"

static const char *GOLDEN = "golden/adapters/stories260K-r4/peft/adapter_model.safetensors";

/* Open with malloc'd index memory (freed by the caller through *mem). */
static wisp_status open_st(wisp_safetensors *st, const void *b, size_t n, void **mem, wisp_error *err) {
    *mem = NULL;
    wisp_st_plan plan;
    wisp_status s = wisp_st_plan_memory(b, n, &plan, err);
    if (s) return s;
    *mem = malloc(plan.bytes ? plan.bytes : 8);
    return wisp_st_open(st, b, n, *mem, plan.bytes, err);
}

static void test_golden(void) {
    const char *path = shared_path_or_skip("test_safetensors", GOLDEN);
    size_t n;
    unsigned char *b = read_file(path, &n);
    REQUIRE(b, "read");
    wisp_safetensors st;
    void *mem;
    wisp_error err = {0};
    REQUIRE(open_st(&st, b, n, &mem, &err) == WISP_OK, "%s", err.message);
    CHECK(st.n_tensors == 70 && st.metadata < 0, "%zu tensors", st.n_tensors);
    wisp_st_tensor t;
    REQUIRE(wisp_st_find(&st, "base_model.model.model.layers.0.mlp.down_proj.lora_A.weight", &t), "find");
    CHECK(t.dtype == WISP_ST_F32 && t.n_dims == 2 && t.shape[0] == 4 && t.shape[1] == 172 && t.nbytes == 2752,
          "down_proj A");
    CHECK(t.data == st.data, "first tensor at the start of the data buffer");
    CHECK(!wisp_st_find(&st, "base_model.model.model.layers.0.mlp.down_proj.lora_A", &t), "prefix is not a match");
    CHECK(!wisp_st_find(&st, "zzz", &t) && !wisp_st_find(&st, "", &t), "absent names");
    /* data order covers the buffer */
    uint64_t off = 0;
    for (size_t i = 0; i < st.n_tensors; i++) {
        wisp_st_tensor u;
        wisp_st_tensor_at(&st, i, &u);
        CHECK(u.data == st.data + off, "tensor %zu in order", i);
        off += u.nbytes;
        char name[160];
        memcpy(name, u.name, u.name_len);
        name[u.name_len] = 0;
        wisp_st_tensor v;
        CHECK(wisp_st_find(&st, name, &v) && v.data == u.data, "find %s", name);
    }
    CHECK(off == st.data_len, "coverage");
    free(mem);
    free(b);
}

/* A file with one tensor of every dtype, written and read back. */
static void test_round_trip(void) {
    wisp_st_out_tensor ts[WISP_ST_DTYPE_COUNT + 1];
    char names[WISP_ST_DTYPE_COUNT + 1][32];
    size_t nt = 0;
    for (int d = 0; d < WISP_ST_DTYPE_COUNT; d++, nt++) {
        snprintf(names[nt], sizeof names[nt], "t.%s", wisp_st_dtype_name(d));
        wisp_st_out_tensor t = {names[nt], d, 3, {2, 3, 4}};
        ts[nt] = t;
    }
    wisp_st_out_tensor scalar = {"scalar", WISP_ST_F64, 0, {0}};
    ts[nt++] = scalar;
    const char *meta[] = {"format", "pt", "note", "line\nbreak"};
    wisp_sink count = wisp_count_sink_make();
    wisp_error err = {0};
    REQUIRE(wisp_st_write_header(&count, ts, nt, meta, 2, &err) == WISP_OK, "%s", err.message);
    uint64_t data = 0;
    for (size_t i = 0; i < nt; i++) data += wisp_st_out_bytes(&ts[i]);
    size_t total = (size_t)(count.written + data);
    unsigned char *buf = malloc(total);
    wisp_mem_sink m;
    wisp_sink s = wisp_mem_sink_make(&m, buf, total);
    REQUIRE(wisp_st_write_header(&s, ts, nt, meta, 2, &err) == WISP_OK, "%s", err.message);
    CHECK(s.written % 8 == 0, "header padded to 8: %llu", (unsigned long long)s.written);
    for (size_t i = 0; i < nt; i++) {
        uint64_t nb = wisp_st_out_bytes(&ts[i]);
        unsigned char tmp[256];
        for (uint64_t k = 0; k < nb; k++) tmp[k] = (unsigned char)(i * 31 + k);
        wisp_sink_write(&s, tmp, (size_t)nb, &err);
    }
    REQUIRE(m.len == total, "wrote %zu of %zu", m.len, total);
    wisp_safetensors st;
    void *mem;
    REQUIRE(open_st(&st, buf, total, &mem, &err) == WISP_OK, "%s", err.message);
    CHECK(st.n_tensors == nt, "count %zu", st.n_tensors);
    char v[32];
    CHECK(wisp_st_metadata(&st, "note", v, sizeof v) && strcmp(v, "line\nbreak") == 0, "metadata");
    CHECK(!wisp_st_metadata(&st, "absent", v, sizeof v), "absent metadata");
    for (size_t i = 0; i < nt; i++) {
        wisp_st_tensor t;
        REQUIRE(wisp_st_find(&st, ts[i].name, &t), "find %s", ts[i].name);
        CHECK(t.dtype == ts[i].dtype && t.n_dims == ts[i].n_dims && t.nbytes == wisp_st_out_bytes(&ts[i]), "%s",
              ts[i].name);
        CHECK(t.nbytes == 0 || t.data[t.nbytes - 1] == (unsigned char)(i * 31 + t.nbytes - 1), "%s data", ts[i].name);
    }
    CHECK(wisp_st_dtype_to_wisp(WISP_ST_BF16) == 30 && wisp_st_dtype_from_wisp(0) == WISP_ST_F32, "dtype mapping");
    free(mem);
    free(buf);
}

/* ---- hostile files -------------------------------------------------------- */

static size_t make_file(unsigned char *buf, size_t cap, const char *header, size_t data_len) {
    size_t h = strlen(header);
    if (8 + h + data_len > cap) return 0;
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(buf + 8, header, h);
    memset(buf + 8 + h, 0x3f, data_len);
    return 8 + h + data_len;
}

static void expect_bad(const char *header, size_t data_len, const char *needle) {
    static unsigned char buf[4096];
    size_t n = make_file(buf, sizeof buf, header, data_len);
    wisp_safetensors st;
    void *mem;
    wisp_error err = {0};
    wisp_status s = open_st(&st, buf, n, &mem, &err);
    CHECK(s != WISP_OK, "accepted: %s", header);
    CHECK(strstr(err.message, needle) != NULL, "'%s' should mention '%s' (%s)", err.message, needle, header);
    free(mem);
}

static void test_hostile(void) {
    const char *good = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"BF16\",\"shape\":[1,2],\"data_offsets\":[8,12]}}";
    {
        static unsigned char buf[512];
        size_t n = make_file(buf, sizeof buf, good, 12);
        wisp_safetensors st;
        void *mem;
        wisp_error err = {0};
        CHECK(open_st(&st, buf, n, &mem, &err) == WISP_OK, "control: %s", err.message);
        free(mem);
        /* every truncation fails cleanly */
        for (size_t cut = 0; cut < n; cut++) {
            unsigned char *copy = malloc(cut ? cut : 1);
            memcpy(copy, buf, cut);
            wisp_status s = open_st(&st, copy, cut, &mem, &err);
            CHECK(s == WISP_ERR_FORMAT, "truncated at %zu: %s (%s)", cut, wisp_status_name(s), err.message);
            free(mem);
            free(copy);
        }
        /* a header length beyond the file or the cap */
        memcpy(buf, "\xff\xff\xff\xff\xff\xff\xff\xff", 8);
        CHECK(open_st(&st, buf, n, &mem, &err) == WISP_ERR_FORMAT && strstr(err.message, "limit"), "%s", err.message);
        free(mem);
        uint64_t just_over = n - 8 + 1;
        for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(just_over >> (8 * i));
        CHECK(open_st(&st, buf, n, &mem, &err) == WISP_ERR_FORMAT && strstr(err.message, "truncated"), "%s",
              err.message);
        free(mem);
    }
    expect_bad("[1,2]   ", 0, "'{'");
    expect_bad("{\"a\":1,}", 0, "JSON");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x", 8, "trailing characters");
    expect_bad("{\"a\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype 'Q4'");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "shape[0]");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8, "shape[0]");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8, "shape must be an array");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "data_offsets");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "data_offsets");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,12]}}", 12, "needs 8 bytes");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "needs dtype, shape and data_offsets");
    expect_bad("{\"a\":[1]}", 0, "must be an object");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "past the data buffer");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 9, "trailing bytes");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "hole");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
               12, "overlap");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
               16, "duplicate");
    expect_bad("{\"a\\u0062\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "escapes");
    expect_bad("{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,1]}}", 1, "whole number of bytes");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
               "too large");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
               "dimensions");
    expect_bad("{\"__metadata__\":{\"k\":1},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
               "__metadata__");
    expect_bad("{\"__metadata__\":[],\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
               "__metadata__");
    /* the empty file is fine when empty: {} and no data */
    {
        static unsigned char buf[64];
        size_t n = make_file(buf, sizeof buf, "{}      ", 0);
        wisp_safetensors st;
        void *mem;
        wisp_error err = {0};
        CHECK(open_st(&st, buf, n, &mem, &err) == WISP_OK && st.n_tensors == 0, "empty: %s", err.message);
        free(mem);
    }
}

/* More members than the JSON reader checks for duplicates: the sort finds them. */
static void test_many_duplicates(void) {
    const size_t n_t = 5000;
    size_t cap = n_t * 96 + 64;
    char *h = malloc(cap);
    size_t len = 0;
    len += (size_t)snprintf(h + len, cap - len, "{");
    for (size_t i = 0; i < n_t; i++) {
        size_t id = i == n_t - 1 ? 17 : i; /* the last one repeats "t17" */
        len += (size_t)snprintf(h + len, cap - len, "%s\"t%zu\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[%zu,%zu]}",
                                i ? "," : "", id, i, i + 1);
    }
    len += (size_t)snprintf(h + len, cap - len, "}");
    unsigned char *buf = malloc(8 + len + n_t);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)len >> (8 * i));
    memcpy(buf + 8, h, len);
    memset(buf + 8 + len, 0, n_t);
    wisp_safetensors st;
    void *mem;
    wisp_error err = {0};
    CHECK(open_st(&st, buf, 8 + len + n_t, &mem, &err) == WISP_ERR_FORMAT && strstr(err.message, "t17"),
          "duplicate among %zu: %s", n_t, err.message);
    free(mem);
    free(buf);
    free(h);
}

static void test_writer_rejects(void) {
    wisp_sink s = wisp_count_sink_make();
    wisp_error err = {0};
    wisp_st_out_tensor two[2] = {{"x", WISP_ST_F32, 1, {2}}, {"x", WISP_ST_F32, 1, {2}}};
    CHECK(wisp_st_write_header(&s, two, 2, NULL, 0, &err) == WISP_ERR_ARG && strstr(err.message, "twice"), "%s",
          err.message);
    wisp_st_out_tensor bad = {"y", WISP_ST_F4, 1, {3}};
    CHECK(wisp_st_write_header(&s, &bad, 1, NULL, 0, &err) == WISP_ERR_ARG, "%s", err.message);
    wisp_st_out_tensor quoted = {"a\"b", WISP_ST_U8, 1, {1}};
    CHECK(wisp_st_write_header(&s, &quoted, 1, NULL, 0, &err) == WISP_ERR_ARG && strstr(err.message, "escap"), "%s",
          err.message);
    wisp_st_out_tensor meta = {"__metadata__", WISP_ST_U8, 1, {1}};
    CHECK(wisp_st_write_header(&s, &meta, 1, NULL, 0, &err) == WISP_ERR_ARG, "%s", err.message);
}

/* Random byte changes in the golden file's header: every result is a clean
 * status (run under ASan in CI's sanitizer build for memory safety). */
static void test_mutations(void) {
    const char *path = shared_path(GOLDEN);
    if (!path) return;
    size_t n;
    unsigned char *orig = read_file(path, &n);
    REQUIRE(orig, "read");
    unsigned char *b = malloc(n);
    uint64_t seed = 12345;
    int opened = 0;
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(b, orig, n);
        int flips = 1 + iter % 4;
        for (int k = 0; k < flips; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(seed >> 33) % 9300; /* the header and the start of the data */
            b[at] = (unsigned char)(seed >> 20);
        }
        wisp_safetensors st;
        void *mem;
        wisp_error err = {0};
        wisp_status s = open_st(&st, b, n, &mem, &err);
        CHECK(s == WISP_OK || s == WISP_ERR_FORMAT || s == WISP_ERR_UNSUPPORTED, "iteration %d: %s (%s)", iter,
              wisp_status_name(s), err.message);
        CHECK(s == WISP_OK || err.message[0], "iteration %d: failure without a message", iter);
        opened += s == WISP_OK;
        free(mem);
    }
    printf("header mutations: %d of 3000 still valid files, the rest rejected cleanly\n", opened);
    free(b);
    free(orig);
}

int main(void) {
    test_mutations();
    test_round_trip();
    test_hostile();
    test_many_duplicates();
    test_writer_rejects();
    test_golden();
    return check_report("test_safetensors");
}
