/* Split GGUFs (core/gguf_shards.c): three small shards written in memory are
 * linked into one view whose walks and lookups cover every shard, with each
 * tensor's data in its own shard's bytes; every broken set is refused with a
 * message naming the shard and the key, and a lone shard is refused as part
 * of a split model. */
#include <string.h>

#include "check.h"
#include "gguf.h"
#include "gguf_write.h"
#include "types.h"

#define N 3
#define CAP 4096

/* How a shard is written, and the ways to break it. */
typedef struct shard_spec {
    int no, count, total; /* split.no, split.count, split.tensors.count */
    int first, n_tensors; /* its tensors: t<first> .. t<first + n_tensors - 1> */
    bool extra_key;       /* a metadata key other than split.* */
    bool no_count_key;    /* leave split.count out */
} shard_spec;

static _Alignas(64) uint8_t files[N][CAP];
static size_t sizes[N];

/* A u16 pair, as gguf-split writes split.no and split.count (the writer has no u16). */
static void kv_u16(wisp_sink *s, const char *key, uint16_t v, wisp_error *err) {
    uint64_t len = strlen(key);
    uint32_t type = WISP_GGUF_U16;
    uint8_t le[2] = {(uint8_t)(v & 0xff), (uint8_t)(v >> 8)};
    uint8_t len_le[8], type_le[4];
    for (int i = 0; i < 8; i++) len_le[i] = (uint8_t)(len >> (8 * i));
    for (int i = 0; i < 4; i++) type_le[i] = (uint8_t)(type >> (8 * i));
    wisp_sink_write(s, len_le, 8, err);
    wisp_sink_write(s, key, len, err);
    wisp_sink_write(s, type_le, 4, err);
    wisp_sink_write(s, le, 2, err);
}

static void write_shard(int k, const shard_spec *sp) {
    wisp_mem_sink m;
    wisp_sink s = wisp_mem_sink_make(&m, files[k], CAP);
    wisp_error err = {0};
    char names[8][8];
    wisp_gguf_out_tensor ts[8];
    for (int i = 0; i < sp->n_tensors; i++) {
        wisp_format(names[i], sizeof names[i], "t%d", sp->first + i);
        ts[i] = (wisp_gguf_out_tensor){names[i], 1, {8, 1, 1, 1}, WISP_TYPE_F32};
    }
    uint64_t n_kv = 2 + !sp->no_count_key + (k == 0 ? 1 : 0) + sp->extra_key;
    wisp_gguf_write_header(&s, (uint64_t)sp->n_tensors, n_kv, &err);
    if (k == 0) wisp_gguf_write_kv_str(&s, "general.architecture", "llama", &err);
    uint16_t no = (uint16_t)sp->no, count = (uint16_t)sp->count;
    kv_u16(&s, "split.no", no, &err);
    if (!sp->no_count_key) kv_u16(&s, "split.count", count, &err);
    wisp_gguf_write_kv_i32(&s, "split.tensors.count", sp->total, &err);
    if (sp->extra_key) wisp_gguf_write_kv_str(&s, "general.name", "stray", &err);
    wisp_gguf_write_tensor_infos(&s, ts, (uint64_t)sp->n_tensors, 32, &err);
    for (int i = 0; i < sp->n_tensors; i++) {
        float v[8];
        for (int j = 0; j < 8; j++) v[j] = (float)(100 * (sp->first + i) + j);
        wisp_sink_write(&s, v, sizeof v, &err);
        wisp_sink_pad(&s, 32, &err);
    }
    REQUIRE(err.status == WISP_OK, "writing shard %d: %s", k, err.message);
    sizes[k] = m.len;
}

static void default_specs(shard_spec *sp) {
    for (int k = 0; k < N; k++) sp[k] = (shard_spec){k, N, 6, 2 * k, 2, false, false};
}

/* Write the specs, open each shard and link them; the status, with the message in err. */
static wisp_status build_and_link(const shard_spec *sp, int n, wisp_gguf *views, uint32_t *bad, wisp_error *err) {
    for (int k = 0; k < n; k++) {
        write_shard(k, &sp[k]);
        wisp_status s = wisp_gguf_open(&views[k], files[k], sizes[k], err);
        CHECK(s == WISP_OK, "open shard %d: %s", k, err->message);
        if (s) return s;
    }
    return wisp_gguf_link_shards(views, (uint32_t)n, bad, err);
}

static void test_linked_view(void) {
    shard_spec sp[N];
    default_specs(sp);
    wisp_gguf views[N];
    uint32_t bad = 99;
    wisp_error err = {0};
    REQUIRE(build_and_link(sp, N, views, &bad, &err) == WISP_OK, "link: %s", err.message);
    wisp_gguf model = views[0]; /* a copy stands for the model, as in wisp_model */
    CHECK(wisp_gguf_shard_count(&model) == N, "shard count %u", wisp_gguf_shard_count(&model));
    CHECK(wisp_gguf_tensor_count(&model) == 6, "tensor count %llu", (unsigned long long)wisp_gguf_tensor_count(&model));
    CHECK(wisp_gguf_total_bytes(&model) == sizes[0] + sizes[1] + sizes[2], "total bytes");
    CHECK(model.n_tensors == 2, "n_tensors stays the first file's own");
    /* the walk: every tensor once, in shard order, data in its own shard */
    size_t cur = 0;
    wisp_gguf_tensor t;
    int seen = 0;
    while (wisp_gguf_next_tensor(&model, &cur, &t)) {
        char want[8];
        wisp_format(want, sizeof want, "t%d", seen);
        CHECK(wisp_str_eq(t.name, want), "tensor %d is '%.*s'", seen, (int)t.name.len, t.name.ptr);
        const uint8_t *lo = files[seen / 2], *hi = lo + sizes[seen / 2];
        CHECK((const uint8_t *)t.data >= lo && (const uint8_t *)t.data + t.nbytes <= hi, "t%d lies in shard %d", seen,
              seen / 2);
        float v0;
        memcpy(&v0, t.data, 4);
        CHECK(v0 == (float)(100 * seen), "t%d's first value %g", seen, (double)v0);
        seen++;
    }
    CHECK(seen == 6, "walked %d tensors", seen);
    CHECK(wisp_gguf_find_tensor(&model, "t5", &t) && t.nbytes == 32, "find a tensor of the last shard");
    CHECK(!wisp_gguf_find_tensor(&model, "t6", &t), "no such tensor");
    wisp_str arch;
    CHECK(wisp_gguf_get_str(&model, "general.architecture", &arch) && wisp_str_eq(arch, "llama"), "metadata of shard 1");
    CHECK(wisp_gguf_check_whole(&model, &err) == WISP_OK, "the linked model is whole");
    /* a shard on its own is not */
    wisp_gguf lone;
    REQUIRE(wisp_gguf_open(&lone, files[0], sizes[0], &err) == WISP_OK, "%s", err.message);
    CHECK(wisp_gguf_check_whole(&lone, &err) == WISP_ERR_UNSUPPORTED && strstr(err.message, "shard 1 of 3"),
          "a lone shard: %s", err.message);
}

/* Break the default set with `edit`; linking must fail at shard `at` with `want` in the message. */
static void expect_refused(const char *what, void (*edit)(shard_spec *sp, int *n), uint32_t at, const char *want) {
    shard_spec sp[N];
    default_specs(sp);
    int n = N;
    edit(sp, &n);
    wisp_gguf views[N];
    uint32_t bad = 99;
    wisp_error err = {0};
    wisp_status s = build_and_link(sp, n, views, &bad, &err);
    CHECK(s != WISP_OK, "%s: accepted", what);
    CHECK(bad == at, "%s: blamed shard %u, not %u", what, bad, at);
    CHECK(strstr(err.message, want) != NULL, "%s: '%s' not in: %s", what, want, err.message);
    CHECK(views[0].shards == NULL, "%s: nothing linked", what);
}

static void wrong_count(shard_spec *sp, int *n) { (void)n, sp[1].count = 4; }
static void repeated(shard_spec *sp, int *n) { (void)n, sp[2] = sp[1]; }
static void missing(shard_spec *sp, int *n) { (void)sp, *n = 2; }
static void dup_tensor(shard_spec *sp, int *n) {
    (void)n;
    sp[1].first = 1; /* t1 in shards 1 and 2 */
}
static void total_off(shard_spec *sp, int *n) {
    (void)n;
    for (int k = 0; k < N; k++) sp[k].total = 7;
}
static void total_disagrees(shard_spec *sp, int *n) { (void)n, sp[2].total = 5; }
static void stray_key(shard_spec *sp, int *n) { (void)n, sp[1].extra_key = true; }
static void no_count(shard_spec *sp, int *n) { (void)n, sp[2].no_count_key = true; }

static void test_refused(void) {
    expect_refused("wrong split.count", wrong_count, 1, "shard 2 of 3 says 'split.count' = 4");
    expect_refused("a shard twice", repeated, 2, "shard 3 of 3 has 'split.no' = 1");
    expect_refused("a shard missing", missing, 0, "shard 1 of 2 says 'split.count' = 3");
    expect_refused("a tensor in two shards", dup_tensor, 1, "tensor 't1' is in shard 1 and in shard 2");
    expect_refused("split.tensors.count off", total_off, 0, "hold 6 tensors but 'split.tensors.count' = 7");
    expect_refused("split.tensors.count disagreeing", total_disagrees, 2, "shard 3 of 3 says 'split.tensors.count' = 5");
    expect_refused("metadata after shard 1", stray_key, 1, "shard 2 of 3 has metadata 'general.name'");
    expect_refused("no split.count", no_count, 2, "shard 3 of 3 has no 'split.count'");
}

int main(void) {
    test_linked_view();
    test_refused();
    return check_report("test_gguf_shards");
}
