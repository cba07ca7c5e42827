/* GGUF LoRA adapters: the golden llama.cpp adapter read in place and
 * rewritten byte for byte; seeded adapters (mixed ranks, rsLoRA, F16/BF16)
 * round-tripped with llama.cpp's scale rule checked; hostile files rejected
 * with messages that name the problem. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "gguf.h"
#include "gguf_write.h"
#include "lora_gguf.h"
#include "test_lora_gguf_fixture.h"

static const char *ADAPTER = "golden/adapters/stories260K-r4/adapter.gguf";
static const char *BASE = "models/stories260K.gguf";

/* Read a GGUF LoRA held in `bytes` into malloc'd pairs. */
static wisp_status read_adapter(const void *bytes, size_t n, const wisp_hparams *base, wisp_gguf *g,
                                wisp_lora_pair **pairs, wisp_lora *l, wisp_error *err) {
    *pairs = NULL;
    wisp_status st = wisp_gguf_open(g, bytes, n, err);
    if (st) return st;
    wisp_lora_gguf_info info;
    if ((st = wisp_lora_gguf_plan(g, &info, err))) return st;
    *pairs = malloc(info.pairs_bytes ? info.pairs_bytes : 1);
    return wisp_lora_gguf_read(g, base, *pairs, (size_t)info.n_pairs, l, err);
}

static unsigned char *write_adapter(const wisp_lora *l, const char *arch, size_t *n, wisp_lora_gguf_written *w) {
    wisp_error err = {0};
    wisp_sink count = wisp_count_sink_make();
    if (wisp_lora_gguf_write(l, arch, NULL, &count, w, &err)) {
        fprintf(stderr, "write (count): %s\n", err.message);
        return NULL;
    }
    unsigned char *buf = malloc((size_t)count.written);
    wisp_mem_sink m;
    wisp_sink s = wisp_mem_sink_make(&m, buf, (size_t)count.written);
    if (wisp_lora_gguf_write(l, arch, NULL, &s, w, &err)) {
        fprintf(stderr, "write: %s\n", err.message);
        free(buf);
        return NULL;
    }
    *n = m.len;
    return buf;
}

static void test_golden(void) {
    const char *path = shared_path_or_skip("test_lora_gguf", ADAPTER);
    wisp_hparams hp;
    REQUIRE(fixture_hparams(shared_path_or_skip("test_lora_gguf", BASE), &hp), "base hparams");
    size_t n;
    unsigned char *bytes = read_file(path, &n);
    REQUIRE(bytes, "read %s", path);
    wisp_gguf g;
    wisp_lora_pair *pairs;
    wisp_lora l;
    wisp_error err = {0};
    wisp_status st = read_adapter(bytes, n, &hp, &g, &pairs, &l, &err);
    REQUIRE(st == WISP_OK, "%s", err.message);
    CHECK(l.n_pairs == 35 && l.max_rank == 4 && !l.rslora, "%d pairs, max rank %d", l.n_pairs, l.max_rank);
    for (int32_t i = 0; i < l.n_pairs; i++) {
        const wisp_lora_pair *p = &l.pairs[i];
        CHECK(p->layer == i / 7 && p->proj == i % 7, "pair %d is blk.%d proj %d", i, p->layer, p->proj);
        CHECK(p->rank == 4 && p->alpha == 8.0f && p->scale == 2.0f && p->type == WISP_TYPE_F32, "pair %d facts", i);
        int32_t n_in, n_out;
        wisp_lora_proj_shape(&hp, p->proj, &n_in, &n_out);
        CHECK(p->n_in == n_in && p->n_out == n_out, "pair %d shape", i);
        /* used in place: the pointers are the file's bytes */
        char name[96];
        wisp_gguf_tensor t;
        snprintf(name, sizeof name, "blk.%d.%s.weight.lora_b", p->layer, wisp_proj_gguf_name(p->proj));
        CHECK(wisp_gguf_find_tensor(&g, name, &t) && t.data == p->b, "%s in place", name);
    }
    /* rewriting gives back llama.cpp's file, byte for byte */
    size_t n2;
    wisp_lora_gguf_written w;
    unsigned char *again = write_adapter(&l, "llama", &n2, &w);
    REQUIRE(again, "rewrite");
    CHECK(w.alpha == 8.0f && w.n_folded == 0, "alpha %g folded %d", (double)w.alpha, w.n_folded);
    CHECK(n2 == n && memcmp(again, bytes, n) == 0, "rewritten adapter differs from the original (%zu vs %zu bytes)", n2,
          n);
    free(again);
    free(pairs);
    free(bytes);
}

static int32_t rank4(int l, int p) { (void)l; (void)p; return 4; }
static int32_t mixed_rank(int l, int p) { return 1 + (l * 7 + p) % 6; }

/* Write, read back, and compare: identical tensors where no folding was
 * needed; where it was, llama.cpp's s * B' equals wisp's scale * B. */
static void round_trip(const wisp_hparams *hp, int type, int32_t (*rank_of)(int, int), float alpha, bool rslora,
                       bool expect_fold) {
    fixture_lora f = fixture_make(hp, type, 0x7f, rank_of, alpha, rslora, 1234 + (uint64_t)type);
    size_t n;
    wisp_lora_gguf_written w;
    unsigned char *bytes = write_adapter(&f.lora, wisp_arch_name(hp->arch), &n, &w);
    REQUIRE(bytes, "write");
    wisp_gguf g;
    wisp_lora_pair *pairs;
    wisp_lora l;
    wisp_error err = {0};
    REQUIRE(read_adapter(bytes, n, hp, &g, &pairs, &l, &err) == WISP_OK, "%s", err.message);
    REQUIRE(l.n_pairs == f.lora.n_pairs, "pair count");
    CHECK(l.rslora == rslora && l.max_rank == f.lora.max_rank, "flags");
    CHECK(expect_fold ? w.n_folded > 0 : w.n_folded == 0, "type %d rslora %d: %d folded", type, rslora, w.n_folded);
    for (int32_t i = 0; i < l.n_pairs; i++) {
        const wisp_lora_pair *p = &l.pairs[i], *q = &f.lora.pairs[i];
        CHECK(p->layer == q->layer && p->proj == q->proj && p->rank == q->rank && p->type == q->type, "pair %d", i);
        CHECK(p->alpha == q->alpha, "pair %d nominal alpha %g vs %g", i, (double)p->alpha, (double)q->alpha);
        /* llama.cpp's rule, evaluated as it does: alpha / (float)rank */
        CHECK(p->scale == w.alpha / (float)p->rank, "pair %d scale follows the file alpha", i);
        CHECK(memcmp(p->a, q->a, fixture_a_bytes(q)) == 0, "pair %d: A differs", i);
        if (p->scale == q->scale) {
            CHECK(memcmp(p->b, q->b, fixture_b_bytes(q)) == 0, "pair %d: B differs", i);
        } else {
            double worst = 0;
            for (size_t k = 0; k < (size_t)q->rank * (size_t)q->n_out; k++) {
                double want = (double)q->scale * fixture_get(q->b, type, k);
                double got = (double)p->scale * fixture_get(p->b, type, k);
                double e = fabs(got - want) / (fabs(want) + 1e-30);
                if (want != 0 && e > worst) worst = e;
            }
            double tol = type == WISP_TYPE_F32 ? 1e-7 : type == WISP_TYPE_F16 ? 1e-3 : 8e-3;
            CHECK(worst <= tol, "pair %d: folded B off by %g relative", i, worst);
        }
    }
    free(pairs);
    free(bytes);
    fixture_free(&f);
}

static void test_round_trips(void) {
    wisp_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.arch = WISP_ARCH_LLAMA;
    hp.dim = 64, hp.n_layers = 3, hp.n_heads = 8, hp.n_kv_heads = 4, hp.head_dim = 8, hp.ffn_dim = 96;
    round_trip(&hp, WISP_TYPE_F32, rank4, 16.0f, false, false);
    round_trip(&hp, WISP_TYPE_F16, rank4, 8.0f, false, false);
    round_trip(&hp, WISP_TYPE_BF16, rank4, 8.0f, false, false);
    /* rsLoRA with one rank: the file alpha absorbs sqrt(r), B stays exact */
    round_trip(&hp, WISP_TYPE_F32, rank4, 16.0f, true, false);
    /* mixed ranks: alpha / r is exact for them all without folding */
    round_trip(&hp, WISP_TYPE_F16, mixed_rank, 6.0f, false, false);
    /* mixed ranks with rsLoRA: alpha / sqrt(r) cannot come from one alpha */
    round_trip(&hp, WISP_TYPE_F32, mixed_rank, 6.0f, true, true);
    round_trip(&hp, WISP_TYPE_F16, mixed_rank, 6.0f, true, true);
    round_trip(&hp, WISP_TYPE_BF16, mixed_rank, 6.0f, true, true);
    hp.arch = WISP_ARCH_QWEN2;
    round_trip(&hp, WISP_TYPE_F32, rank4, 8.0f, false, false);
}

/* ---- hostile files -------------------------------------------------------- */

typedef struct bad_tensor {
    const char *name;
    uint32_t n_dims;
    int64_t ne0, ne1;
    uint32_t type;
    bool nan;
} bad_tensor;

typedef struct bad_file {
    const char *general_type, *adapter_type, *arch; /* NULL: key absent */
    bad_tensor t[4];
    int n_t;
} bad_file;

static size_t build_bad(const bad_file *b, unsigned char *buf, size_t cap) {
    wisp_mem_sink m;
    wisp_sink s = wisp_mem_sink_make(&m, buf, cap);
    wisp_error err;
    uint64_t n_kv = 1 + (b->general_type != NULL) + (b->adapter_type != NULL) + (b->arch != NULL);
    wisp_gguf_write_header(&s, (uint64_t)b->n_t, n_kv, &err);
    if (b->arch) wisp_gguf_write_kv_str(&s, "general.architecture", b->arch, &err);
    if (b->general_type) wisp_gguf_write_kv_str(&s, "general.type", b->general_type, &err);
    if (b->adapter_type) wisp_gguf_write_kv_str(&s, "adapter.type", b->adapter_type, &err);
    wisp_gguf_write_kv_f32(&s, "adapter.lora.alpha", 8.0f, &err);
    wisp_gguf_out_tensor ts[4];
    for (int i = 0; i < b->n_t; i++) {
        wisp_gguf_out_tensor t = {b->t[i].name, b->t[i].n_dims, {b->t[i].ne0, b->t[i].ne1, 1, 1}, b->t[i].type};
        ts[i] = t;
    }
    wisp_gguf_write_tensor_infos(&s, ts, (uint64_t)b->n_t, 32, &err);
    for (int i = 0; i < b->n_t; i++) {
        size_t bytes = (size_t)wisp_gguf_tensor_bytes(&ts[i]);
        unsigned char data[64 * 64 * 4];
        memset(data, 0, bytes);
        if (b->t[i].nan) wisp_store_f32(data + 4, NAN);
        wisp_sink_write(&s, data, bytes, &err);
        wisp_sink_pad(&s, 32, &err);
    }
    return m.len;
}

static void expect_bad(const wisp_hparams *hp, const bad_file *b, wisp_status want, const char *needle) {
    static unsigned char buf[1 << 16];
    size_t n = build_bad(b, buf, sizeof buf);
    wisp_gguf g;
    wisp_lora_pair *pairs = NULL;
    wisp_lora l;
    wisp_error err = {0};
    wisp_status st = read_adapter(buf, n, hp, &g, &pairs, &l, &err);
    CHECK(st == want, "expected status %s, got %s (%s)", wisp_status_name(want), wisp_status_name(st), err.message);
    CHECK(strstr(err.message, needle) != NULL, "message '%s' should mention '%s'", err.message, needle);
    free(pairs);
}

static void test_hostile(void) {
    wisp_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.arch = WISP_ARCH_LLAMA;
    hp.dim = 64, hp.n_layers = 2, hp.n_heads = 8, hp.n_kv_heads = 4, hp.head_dim = 8, hp.ffn_dim = 96;
    const uint32_t F32 = WISP_TYPE_F32;
    const bad_tensor qa = {"blk.0.attn_q.weight.lora_a", 2, 64, 4, F32, false};
    const bad_tensor qb = {"blk.0.attn_q.weight.lora_b", 2, 4, 64, F32, false};
    bad_file ok = {"adapter", "lora", "llama", {qa, qb}, 2};
    {   /* the control: this one is fine */
        static unsigned char buf[1 << 16];
        size_t n = build_bad(&ok, buf, sizeof buf);
        wisp_gguf g;
        wisp_lora_pair *pairs;
        wisp_lora l;
        wisp_error err = {0};
        CHECK(read_adapter(buf, n, &hp, &g, &pairs, &l, &err) == WISP_OK && l.n_pairs == 1, "control: %s", err.message);
        free(pairs);
    }
    bad_file b = ok;
    b.general_type = "model";
    expect_bad(&hp, &b, WISP_ERR_FORMAT, "general.type");
    b = ok, b.general_type = NULL;
    expect_bad(&hp, &b, WISP_ERR_NOT_FOUND, "general.type");
    b = ok, b.adapter_type = "control_vector";
    expect_bad(&hp, &b, WISP_ERR_UNSUPPORTED, "adapter.type");
    b = ok, b.arch = NULL;
    expect_bad(&hp, &b, WISP_ERR_NOT_FOUND, "general.architecture");
    b = ok, b.arch = "qwen2";
    expect_bad(&hp, &b, WISP_ERR_SHAPE, "architecture 'qwen2'");
    b = ok, b.t[1].ne0 = 3;
    expect_bad(&hp, &b, WISP_ERR_SHAPE, "rank mismatch");
    b = ok, b.t[0].ne0 = 32;
    expect_bad(&hp, &b, WISP_ERR_SHAPE, "wrong base model");
    b = ok, b.t[1].ne1 = 32;
    expect_bad(&hp, &b, WISP_ERR_SHAPE, "wrong base model");
    b = ok, b.n_t = 1;
    expect_bad(&hp, &b, WISP_ERR_FORMAT, ".lora_b tensors");
    b = ok, b.t[1].name = "blk.1.attn_q.weight.lora_b";
    expect_bad(&hp, &b, WISP_ERR_NOT_FOUND, "no partner");
    b = ok, b.t[0].name = "blk.0.attn_qq.weight.lora_a", b.t[1].name = "blk.0.attn_qq.weight.lora_b";
    expect_bad(&hp, &b, WISP_ERR_UNSUPPORTED, "names no projection");
    b = ok, b.t[0].name = "output.weight.lora_a", b.t[1].name = "output.weight.lora_b";
    expect_bad(&hp, &b, WISP_ERR_UNSUPPORTED, "output.weight.lora_a");
    b = ok, b.t[0].name = "blk.5.attn_q.weight.lora_a", b.t[1].name = "blk.5.attn_q.weight.lora_b";
    expect_bad(&hp, &b, WISP_ERR_SHAPE, "only 2 layers");
    b = ok, b.t[0].name = "blk.00.attn_q.weight.lora_a", b.t[1].name = "blk.00.attn_q.weight.lora_b";
    expect_bad(&hp, &b, WISP_ERR_UNSUPPORTED, "names no projection");
    b = ok, b.t[2] = (bad_tensor){"blk.0.attn_norm.weight", 1, 64, 1, F32, false}, b.n_t = 3;
    expect_bad(&hp, &b, WISP_ERR_UNSUPPORTED, "norms");
    b = ok, b.t[2] = (bad_tensor){"blk.0.attn_q.weight", 2, 64, 64, F32, false}, b.n_t = 3;
    expect_bad(&hp, &b, WISP_ERR_FORMAT, "neither");
    b = ok, b.t[1].type = WISP_TYPE_F16;
    expect_bad(&hp, &b, WISP_ERR_UNSUPPORTED, "lora_b is F16");
    b = ok, b.t[0].type = b.t[1].type = WISP_TYPE_Q8_0, b.t[0].ne0 = 64, b.t[1].ne0 = 32, b.t[0].ne1 = 32;
    expect_bad(&hp, &b, WISP_ERR_UNSUPPORTED, "Q8_0");
    b = ok, b.t[1].nan = true;
    expect_bad(&hp, &b, WISP_ERR_NUMERIC, "NaN");
    b = ok, b.t[0].n_dims = 1, b.t[0].ne1 = 1;
    expect_bad(&hp, &b, WISP_ERR_SHAPE, "2-D");
    /* a table that is too small is refused, not overrun */
    {
        static unsigned char buf[1 << 16];
        size_t n = build_bad(&ok, buf, sizeof buf);
        wisp_gguf g;
        wisp_lora l;
        wisp_error err = {0};
        wisp_lora_pair one;
        CHECK(wisp_gguf_open(&g, buf, n, &err) == WISP_OK, "open");
        CHECK(wisp_lora_gguf_read(&g, &hp, &one, 0, &l, &err) == WISP_ERR_CAPACITY, "capacity: %s", err.message);
    }
}

/* The writer refuses adapters that no reader could load. */
static void test_write_rejects(void) {
    wisp_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.arch = WISP_ARCH_LLAMA;
    hp.dim = 16, hp.n_layers = 1, hp.n_heads = 2, hp.n_kv_heads = 2, hp.head_dim = 8, hp.ffn_dim = 32;
    fixture_lora f = fixture_make(&hp, WISP_TYPE_F32, 0x3, rank4, 8.0f, false, 7);
    wisp_sink s = wisp_count_sink_make();
    wisp_error err = {0};
    f.pairs[1].proj = WISP_PROJ_Q;
    CHECK(wisp_lora_gguf_write(&f.lora, "llama", NULL, &s, NULL, &err) == WISP_ERR_FORMAT &&
              strstr(err.message, "twice"),
          "duplicate pair: %s", err.message);
    f.pairs[1].proj = WISP_PROJ_K;
    f.pairs[1].type = WISP_TYPE_Q4_0;
    CHECK(wisp_lora_gguf_write(&f.lora, "llama", NULL, &s, NULL, &err) == WISP_ERR_UNSUPPORTED, "type: %s",
          err.message);
    f.pairs[1].type = WISP_TYPE_F32;
    CHECK(wisp_lora_gguf_write(&f.lora, NULL, NULL, &s, NULL, &err) == WISP_ERR_ARG, "no arch: %s", err.message);
    CHECK(wisp_lora_gguf_write(&f.lora, "llama", NULL, &s, NULL, &err) == WISP_OK, "fine again: %s", err.message);
    fixture_free(&f);
}

/* Random byte changes in the golden adapter's header: reading never
 * crashes and every failure says why. */
static void test_mutations(void) {
    const char *path = shared_path(ADAPTER);
    const char *base = shared_path(BASE);
    if (!path || !base) return;
    wisp_hparams hp;
    REQUIRE(fixture_hparams(base, &hp), "hparams");
    size_t n;
    unsigned char *orig = read_file(path, &n);
    REQUIRE(orig, "read");
    unsigned char *b = malloc(n);
    uint64_t seed = 777;
    int read_ok = 0;
    for (int iter = 0; iter < 2000; iter++) {
        memcpy(b, orig, n);
        for (int k = 0; k < 1 + iter % 3; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            b[(size_t)(seed >> 33) % 4200] = (unsigned char)(seed >> 20); /* metadata and tensor infos */
        }
        wisp_gguf g;
        wisp_lora_pair *pairs = NULL;
        wisp_lora l;
        wisp_error err = {0};
        wisp_status s = read_adapter(b, n, &hp, &g, &pairs, &l, &err);
        CHECK(s == WISP_OK || err.message[0], "iteration %d: failure without a message", iter);
        CHECK(s != WISP_ERR_INTERNAL && s != WISP_ERR_CAPACITY, "iteration %d: %s", iter, err.message);
        read_ok += s == WISP_OK;
        free(pairs);
    }
    printf("header mutations: %d of 2000 still valid adapters, the rest rejected cleanly\n", read_ok);
    free(b);
    free(orig);
}

int main(void) {
    test_mutations();
    test_round_trips();
    test_hostile();
    test_write_rejects();
    test_golden();
    return check_report("test_lora_gguf");
}
