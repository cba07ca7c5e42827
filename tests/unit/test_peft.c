/* PEFT adapters: the golden PEFT folder (true HF order) and the golden
 * llama.cpp GGUF adapter map to byte-identical wisp tensors once q/k rows are
 * reordered (the permutation proof at the tensor level); seeded adapters go
 * wisp -> PEFT -> wisp exactly; config semantics (patterns, rsLoRA, refused
 * features, unknown fields) and hostile files give clear results. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "lora_gguf.h"
#include "peft.h"
#include "safetensors.h"
#include "test_lora_gguf_fixture.h"

static const char *DIR = "golden/adapters/stories260K-r4";

typedef struct loaded {
    wisp_peft p;
    void *index, *mem;
    wisp_lora lora;
} loaded;

static wisp_status load_peft(loaded *L, const char *cfg, size_t cfg_len, const void *st, size_t st_len,
                             const wisp_hparams *base, wisp_error *err) {
    memset(L, 0, sizeof *L);
    size_t ib;
    wisp_status s = wisp_peft_index_bytes(cfg, cfg_len, st, st_len, &ib, err);
    if (s) return s;
    L->index = malloc(ib ? ib : 8);
    if ((s = wisp_peft_open(&L->p, cfg, cfg_len, st, st_len, base, L->index, ib, err))) return s;
    L->mem = malloc(L->p.lora_bytes ? L->p.lora_bytes : 8);
    return wisp_peft_read(&L->p, L->mem, L->p.lora_bytes, &L->lora, err);
}

static void unload(loaded *L) {
    free(L->index);
    free(L->mem);
    memset(L, 0, sizeof *L);
}

/* Export `l` to PEFT bytes (config text and safetensors), malloc'd. */
static bool export_peft(const wisp_lora *l, const wisp_hparams *hp, char **cfg, size_t *cfg_len, unsigned char **st,
                        size_t *st_len) {
    wisp_error err = {0};
    size_t n;
    wisp_peft_write_config(l, hp, "test/base", NULL, 0, &n, &err);
    *cfg = malloc(n + 1);
    if (wisp_peft_write_config(l, hp, "test/base", *cfg, n + 1, cfg_len, &err)) {
        fprintf(stderr, "config: %s\n", err.message);
        return false;
    }
    size_t sb = wisp_peft_export_bytes(l);
    void *scratch = malloc(sb ? sb : 8);
    wisp_sink count = wisp_count_sink_make();
    if (wisp_peft_write_safetensors(l, hp, scratch, sb, &count, &err)) {
        fprintf(stderr, "safetensors: %s\n", err.message);
        free(scratch);
        return false;
    }
    *st = malloc((size_t)count.written);
    wisp_mem_sink m;
    wisp_sink s = wisp_mem_sink_make(&m, *st, (size_t)count.written);
    bool ok = wisp_peft_write_safetensors(l, hp, scratch, sb, &s, &err) == WISP_OK;
    *st_len = m.len;
    free(scratch);
    return ok;
}

static bool same_pairs(const wisp_lora *x, const wisp_lora *y, bool check_b) {
    if (x->n_pairs != y->n_pairs) return false;
    for (int32_t i = 0; i < x->n_pairs; i++) {
        const wisp_lora_pair *p = &x->pairs[i], *q = &y->pairs[i];
        if (p->layer != q->layer || p->proj != q->proj || p->rank != q->rank || p->n_in != q->n_in ||
            p->n_out != q->n_out || p->type != q->type || p->scale != q->scale) {
            fprintf(stderr, "pair %d: blk.%d.%d vs blk.%d.%d, scale %.9g vs %.9g\n", i, p->layer, p->proj, q->layer,
                    q->proj, (double)p->scale, (double)q->scale);
            return false;
        }
        if (memcmp(p->a, q->a, fixture_a_bytes(p)) != 0) {
            fprintf(stderr, "pair %d (blk.%d.%s): A differs\n", i, p->layer, wisp_proj_gguf_name(p->proj));
            return false;
        }
        if (check_b && memcmp(p->b, q->b, fixture_b_bytes(p)) != 0) {
            fprintf(stderr, "pair %d (blk.%d.%s): B differs\n", i, p->layer, wisp_proj_gguf_name(p->proj));
            return false;
        }
    }
    return true;
}

static void test_golden_permutation(void) {
    char path[3][512];
    snprintf(path[0], sizeof path[0], "%s/peft/adapter_config.json", DIR);
    snprintf(path[1], sizeof path[1], "%s/peft/adapter_model.safetensors", DIR);
    snprintf(path[2], sizeof path[2], "%s/adapter.gguf", DIR);
    wisp_hparams hp;
    REQUIRE(fixture_hparams(shared_path_or_skip("test_peft", "models/stories260K.gguf"), &hp), "hparams");
    size_t n_cfg, n_st, n_gguf;
    char *cfg = (char *)read_file(shared_path_or_skip("test_peft", path[0]), &n_cfg);
    unsigned char *st = read_file(shared_path_or_skip("test_peft", path[1]), &n_st);
    unsigned char *gg = read_file(shared_path_or_skip("test_peft", path[2]), &n_gguf);
    REQUIRE(cfg && st && gg, "read golden files");
    loaded L;
    wisp_error err = {0};
    REQUIRE(load_peft(&L, cfg, n_cfg, st, n_st, &hp, &err) == WISP_OK, "%s", err.message);
    CHECK(L.p.info.r == 4 && L.p.info.lora_alpha == 8.0 && !L.p.info.use_rslora && L.p.info.notes.n == 0,
          "config facts (%d notes)", L.p.info.notes.n);
    CHECK(L.p.lora_bytes == 35 * sizeof(wisp_lora_pair) + 5 * (64 + 32) * 4 * 4, "lora bytes %zu", L.p.lora_bytes);
    wisp_gguf g;
    REQUIRE(wisp_gguf_open(&g, gg, n_gguf, &err) == WISP_OK, "%s", err.message);
    wisp_lora_pair gpairs[35];
    wisp_lora gl;
    REQUIRE(wisp_lora_gguf_read(&g, &hp, gpairs, 35, &gl, &err) == WISP_OK, "%s", err.message);
    /* the proof: HF-order PEFT tensors, reordered, are llama.cpp's GGUF tensors byte for byte */
    CHECK(same_pairs(&L.lora, &gl, true), "PEFT (reordered) and GGUF adapters differ");
    /* and the reordering is not a no-op: the raw PEFT q rows differ from GGUF's */
    wisp_st_tensor raw;
    REQUIRE(wisp_st_find(&L.p.st, "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight", &raw), "q B");
    CHECK(memcmp(raw.data, gpairs[0].b, (size_t)raw.nbytes) != 0, "q_proj B needs the permutation");
    CHECK(L.lora.pairs[0].b != raw.data && L.lora.pairs[2].b != gpairs[2].b, "moved q, in-place v");

    /* GGUF -> PEFT export reproduces the golden PEFT tensors byte for byte */
    char *cfg2;
    unsigned char *st2;
    size_t n_cfg2, n_st2;
    REQUIRE(export_peft(&gl, &hp, &cfg2, &n_cfg2, &st2, &n_st2), "export");
    wisp_safetensors a, b;
    void *ma = malloc(1 << 20), *mb = malloc(1 << 20);
    REQUIRE(wisp_st_open(&a, st, n_st, ma, 1 << 20, &err) == WISP_OK, "%s", err.message);
    REQUIRE(wisp_st_open(&b, st2, n_st2, mb, 1 << 20, &err) == WISP_OK, "%s", err.message);
    CHECK(a.n_tensors == b.n_tensors, "tensor count %zu vs %zu", a.n_tensors, b.n_tensors);
    for (size_t i = 0; i < a.n_tensors; i++) {
        wisp_st_tensor x, y;
        wisp_st_tensor_at(&a, i, &x);
        char name[200];
        snprintf(name, sizeof name, "%.*s", (int)x.name_len, x.name);
        REQUIRE(wisp_st_find(&b, name, &y), "exported file lacks %s", name);
        CHECK(x.dtype == y.dtype && x.shape[0] == y.shape[0] && x.shape[1] == y.shape[1] && x.nbytes == y.nbytes &&
                  memcmp(x.data, y.data, (size_t)x.nbytes) == 0,
              "%s differs from the golden PEFT tensor", name);
    }
    loaded L2;
    REQUIRE(load_peft(&L2, cfg2, n_cfg2, st2, n_st2, &hp, &err) == WISP_OK, "%s", err.message);
    CHECK(same_pairs(&L2.lora, &gl, true), "GGUF -> PEFT -> wisp is not exact");
    CHECK(strcmp(L2.p.info.base_model, "test/base") == 0, "base model name");
    unload(&L2);
    free(ma);
    free(mb);
    free(cfg2);
    free(st2);
    unload(&L);
    free(cfg);
    free(st);
    free(gg);
}

static int32_t rank4(int l, int p) { (void)l; (void)p; return 4; }
static int32_t mixed_rank(int l, int p) { return 1 + (l * 7 + p) % 6; }

static void round_trip(const wisp_hparams *hp, int type, unsigned mask, int32_t (*rank_of)(int, int), float alpha,
                       bool rslora, int tweak_alpha_pair) {
    fixture_lora f = fixture_make(hp, type, mask, rank_of, alpha, rslora, 99 + (uint64_t)type);
    if (tweak_alpha_pair >= 0) { /* one pair with its own alpha, as alpha_pattern makes */
        wisp_lora_pair *q = &f.pairs[tweak_alpha_pair];
        q->alpha = 3.0f;
        q->scale = wisp_lora_scale_of(3.0, q->rank, rslora);
    }
    char *cfg;
    unsigned char *st;
    size_t n_cfg, n_st;
    REQUIRE(export_peft(&f.lora, hp, &cfg, &n_cfg, &st, &n_st), "export");
    loaded L;
    wisp_error err = {0};
    wisp_status s = load_peft(&L, cfg, n_cfg, st, n_st, hp, &err);
    CHECK(s == WISP_OK, "import: %s\n%s", err.message, cfg);
    if (s == WISP_OK) {
        CHECK(same_pairs(&L.lora, &f.lora, true), "wisp -> PEFT -> wisp differs (type %d, rslora %d)\n%s", type,
              rslora, cfg);
        CHECK(L.lora.rslora == rslora && L.p.info.notes.n == 0, "flags, %d notes", L.p.info.notes.n);
    }
    unload(&L);
    free(cfg);
    free(st);
    fixture_free(&f);
}

static void test_round_trips(void) {
    wisp_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.arch = WISP_ARCH_LLAMA;
    hp.dim = 64, hp.n_layers = 3, hp.n_heads = 8, hp.n_kv_heads = 2, hp.head_dim = 8, hp.ffn_dim = 96;
    round_trip(&hp, WISP_TYPE_F32, 0x7f, rank4, 16.0f, false, -1);
    round_trip(&hp, WISP_TYPE_F16, 0x7f, mixed_rank, 8.0f, false, -1);
    round_trip(&hp, WISP_TYPE_BF16, 0x7f, mixed_rank, 8.0f, true, 5);
    round_trip(&hp, WISP_TYPE_F32, 0x0b, rank4, 7.0f, true, 0); /* q, k, o only */
    hp.arch = WISP_ARCH_QWEN2;
    round_trip(&hp, WISP_TYPE_F32, 0x7f, mixed_rank, 8.0f, false, 3);
}

/* DoRA: magnitudes survive wisp -> PEFT -> wisp exactly (q/k rows moved to
 * HF order and back for llama), the config says use_dora, and exporting the
 * import again gives the same bytes. */
static void dora_round_trip(const wisp_hparams *hp, int type) {
    fixture_lora f = fixture_make(hp, type, 0x7f, mixed_rank, 8.0f, false, 7);
    float *mags = malloc(sizeof(float) * (size_t)f.lora.n_pairs * 256);
    for (int32_t i = 0; i < f.lora.n_pairs; i++) {
        float *m = mags + (size_t)i * 256;
        for (int32_t o = 0; o < f.pairs[i].n_out; o++) m[o] = 0.5f + 0.01f * (float)((i * 31 + o * 7) % 97);
        f.pairs[i].magnitude = m;
    }
    char *cfg, *cfg2;
    unsigned char *st, *st2;
    size_t n_cfg, n_st, n_cfg2, n_st2;
    REQUIRE(export_peft(&f.lora, hp, &cfg, &n_cfg, &st, &n_st), "export DoRA");
    CHECK(strstr(cfg, "\"use_dora\": true") != NULL, "use_dora not set:\n%s", cfg);
    loaded L;
    wisp_error err = {0};
    REQUIRE(load_peft(&L, cfg, n_cfg, st, n_st, hp, &err) == WISP_OK, "import DoRA: %s", err.message);
    CHECK(L.p.info.use_dora && same_pairs(&L.lora, &f.lora, true), "DoRA pairs differ after the round trip");
    for (int32_t i = 0; i < L.lora.n_pairs; i++) {
        const wisp_lora_pair *p = &L.lora.pairs[i];
        CHECK(p->magnitude && p->norm && memcmp(p->magnitude, f.pairs[i].magnitude, sizeof(float) * (size_t)p->n_out) == 0,
              "blk.%d.%s: magnitude differs after the round trip", p->layer, wisp_proj_gguf_name(p->proj));
    }
    if (hp->arch == WISP_ARCH_LLAMA) { /* the stored q magnitude is in HF order: not the GGUF one */
        wisp_st_tensor raw;
        REQUIRE(wisp_st_find(&L.p.st, "base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector", &raw),
                "q magnitude under PEFT's name");
        CHECK(raw.n_dims == 1 && memcmp(raw.data, f.pairs[0].magnitude, (size_t)raw.nbytes) != 0,
              "q_proj magnitude was not permuted to HF order");
    }
    REQUIRE(export_peft(&L.lora, hp, &cfg2, &n_cfg2, &st2, &n_st2), "export again");
    CHECK(n_st == n_st2 && memcmp(st, st2, n_st) == 0 && n_cfg == n_cfg2 && memcmp(cfg, cfg2, n_cfg) == 0,
          "DoRA PEFT round trip is not byte-identical");
    unload(&L);
    free(cfg), free(cfg2), free(st), free(st2), free(mags);
    fixture_free(&f);
}

static void test_dora(void) {
    wisp_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.arch = WISP_ARCH_LLAMA;
    hp.dim = 64, hp.n_layers = 2, hp.n_heads = 8, hp.n_kv_heads = 2, hp.head_dim = 8, hp.ffn_dim = 96;
    dora_round_trip(&hp, WISP_TYPE_F32);
    dora_round_trip(&hp, WISP_TYPE_BF16);
    hp.arch = WISP_ARCH_QWEN2;
    dora_round_trip(&hp, WISP_TYPE_F16);
}

/* A partial set (not layers x projections): target_modules lists module names. */
static void test_partial_set(void) {
    wisp_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.arch = WISP_ARCH_LLAMA;
    hp.dim = 32, hp.n_layers = 4, hp.n_heads = 4, hp.n_kv_heads = 4, hp.head_dim = 8, hp.ffn_dim = 48;
    fixture_lora f = fixture_make(&hp, WISP_TYPE_F32, 0x7f, rank4, 8.0f, false, 5);
    /* keep layer 0 (all) and layer 2's v_proj only */
    wisp_lora_pair keep[8];
    int n = 0;
    for (int32_t i = 0; i < f.lora.n_pairs; i++)
        if (f.pairs[i].layer == 0 || (f.pairs[i].layer == 2 && f.pairs[i].proj == WISP_PROJ_V)) keep[n++] = f.pairs[i];
    wisp_lora sub = {keep, n, 4, false};
    char *cfg;
    unsigned char *st;
    size_t n_cfg, n_st;
    REQUIRE(export_peft(&sub, &hp, &cfg, &n_cfg, &st, &n_st), "export");
    CHECK(strstr(cfg, "\"model.layers.2.self_attn.v_proj\"") != NULL, "module list:\n%s", cfg);
    loaded L;
    wisp_error err = {0};
    CHECK(load_peft(&L, cfg, n_cfg, st, n_st, &hp, &err) == WISP_OK && same_pairs(&L.lora, &sub, true), "%s",
          err.message);
    unload(&L);
    free(cfg);
    free(st);
    /* layers 1 and 3, every projection: layers_to_transform */
    sub.n_pairs = 0;
    wisp_lora_pair odd[14];
    for (int32_t i = 0; i < f.lora.n_pairs; i++)
        if (f.pairs[i].layer % 2 == 1) odd[sub.n_pairs++] = f.pairs[i];
    sub.pairs = odd;
    REQUIRE(export_peft(&sub, &hp, &cfg, &n_cfg, &st, &n_st), "export");
    CHECK(strstr(cfg, "\"layers_to_transform\": null") == NULL, "layers_to_transform:\n%s", cfg);
    CHECK(load_peft(&L, cfg, n_cfg, st, n_st, &hp, &err) == WISP_OK && same_pairs(&L.lora, &sub, true), "%s",
          err.message);
    unload(&L);
    free(cfg);
    free(st);
    fixture_free(&f);
}

/* ---- config semantics and hostile files ----------------------------------- */

typedef struct mini {
    wisp_hparams hp;
    fixture_lora f;
    unsigned char *st;
    size_t n_st;
} mini;

/* A one-layer llama adapter on q and v, exported; tests then vary the config. */
static void mini_make(mini *m) {
    memset(&m->hp, 0, sizeof m->hp);
    m->hp.arch = WISP_ARCH_LLAMA;
    m->hp.dim = 16, m->hp.n_layers = 1, m->hp.n_heads = 2, m->hp.n_kv_heads = 2, m->hp.head_dim = 8,
    m->hp.ffn_dim = 32;
    m->f = fixture_make(&m->hp, WISP_TYPE_F32, 0x5, rank4, 8.0f, false, 11);
    char *cfg;
    size_t n_cfg;
    export_peft(&m->f.lora, &m->hp, &cfg, &n_cfg, &m->st, &m->n_st);
    free(cfg);
}

static void mini_free(mini *m) {
    fixture_free(&m->f);
    free(m->st);
}

static wisp_status try_cfg(const mini *m, const char *cfg, loaded *L, wisp_error *err) {
    return load_peft(L, cfg, strlen(cfg), m->st, m->n_st, &m->hp, err);
}

static void expect_cfg(const mini *m, const char *cfg, wisp_status want, const char *needle) {
    loaded L;
    wisp_error err = {0};
    wisp_status s = try_cfg(m, cfg, &L, &err);
    CHECK(s == want, "%s: expected %s, got %s (%s)", cfg, wisp_status_name(want), wisp_status_name(s), err.message);
    CHECK(strstr(err.message, needle) != NULL, "%s: message '%s' should mention '%s'", cfg, err.message, needle);
    unload(&L);
}

#define BASE_CFG "\"peft_type\": \"LORA\", \"r\": 4, \"lora_alpha\": 8"

static void test_config(void) {
    mini m;
    mini_make(&m);
    loaded L;
    wisp_error err = {0};
    /* defaults, notes for unknown fields, harmless fields silent */
    REQUIRE(try_cfg(&m, "{" BASE_CFG ", \"lora_dropout\": 0.05, \"wibble\": 1, \"task_type\": \"SEQ_CLS\"}", &L,
                    &err) == WISP_OK,
            "%s", err.message);
    CHECK(L.p.info.notes.n == 2 && strstr(L.p.info.notes.text[0], "SEQ_CLS") && strstr(L.p.info.notes.text[1], "wibble"),
          "notes: %d", L.p.info.notes.n);
    unload(&L);
    REQUIRE(try_cfg(&m, "{\"peft_type\": \"LORA\", \"r\": 4}", &L, &err) == WISP_OK, "%s", err.message);
    CHECK(L.p.info.notes.n == 1 && L.lora.pairs[0].scale == 2.0f, "default alpha 8 -> scale 2");
    unload(&L);
    /* rsLoRA and alpha_pattern: v_proj gets its own alpha */
    REQUIRE(try_cfg(&m, "{" BASE_CFG ", \"use_rslora\": true, \"alpha_pattern\": {\"v_proj\": 2}}", &L, &err) ==
                WISP_OK,
            "%s", err.message);
    CHECK(L.lora.rslora && L.lora.pairs[0].scale == 4.0f && L.lora.pairs[1].scale == 1.0f, "scales %g %g",
          (double)L.lora.pairs[0].scale, (double)L.lora.pairs[1].scale);
    unload(&L);
    /* patterns match whole name segments, '.' as a wildcard, first match wins */
    REQUIRE(try_cfg(&m, "{" BASE_CFG ", \"alpha_pattern\": {\"proj\": 1, \"layers.0.self_attn.v.proj\": 4, "
                        "\"v_proj\": 16}}",
                    &L, &err) == WISP_OK,
            "%s", err.message);
    CHECK(L.lora.pairs[0].scale == 2.0f && L.lora.pairs[1].scale == 1.0f, "pattern order: %g %g",
          (double)L.lora.pairs[0].scale, (double)L.lora.pairs[1].scale);
    unload(&L);
    expect_cfg(&m, "{" BASE_CFG ", \"alpha_pattern\": {\"v_pro*\": 2}}", WISP_ERR_UNSUPPORTED, "regex");
    expect_cfg(&m, "{" BASE_CFG ", \"rank_pattern\": {\"v_proj\": 8}}", WISP_ERR_SHAPE, "rank_pattern");
    expect_cfg(&m, "{\"peft_type\": \"LORA\", \"r\": 8}", WISP_ERR_SHAPE, "says 8");
    expect_cfg(&m, "{" BASE_CFG ", \"use_dora\": true}", WISP_ERR_FORMAT, "no lora_magnitude_vector");
    expect_cfg(&m, "{" BASE_CFG ", \"use_dora\": 1}", WISP_ERR_FORMAT, "use_dora must be true or false");
    expect_cfg(&m, "{" BASE_CFG ", \"modules_to_save\": [\"lm_head\"]}", WISP_ERR_UNSUPPORTED, "modules_to_save");
    expect_cfg(&m, "{" BASE_CFG ", \"bias\": \"all\"}", WISP_ERR_UNSUPPORTED, "bias");
    expect_cfg(&m, "{" BASE_CFG ", \"fan_in_fan_out\": true}", WISP_ERR_UNSUPPORTED, "fan_in_fan_out");
    expect_cfg(&m, "{\"peft_type\": \"IA3\"}", WISP_ERR_UNSUPPORTED, "IA3");
    expect_cfg(&m, "{\"r\": 4}", WISP_ERR_FORMAT, "peft_type");
    expect_cfg(&m, "{" BASE_CFG ", \"target_modules\": [\"q_proj\", \"k_proj\"]}", WISP_ERR_FORMAT,
               "model.layers.0.self_attn.v_proj");
    expect_cfg(&m, "{" BASE_CFG ", \"layers_to_transform\": [1]}", WISP_ERR_FORMAT, "layers_to_transform");
    expect_cfg(&m, "{" BASE_CFG ", \"r\": 4}", WISP_ERR_FORMAT, "duplicate key");
    expect_cfg(&m, "{" BASE_CFG ",}", WISP_ERR_FORMAT, "adapter_config.json: JSON");
    expect_cfg(&m, "[1]", WISP_ERR_FORMAT, "JSON object");
    expect_cfg(&m, "{\"peft_type\": \"LORA\", \"r\": 4, \"lora_alpha\": \"eight\"}", WISP_ERR_FORMAT, "a number");
    expect_cfg(&m, "{\"peft_type\": \"LORA\", \"r\": -4}", WISP_ERR_FORMAT, "positive integer");
    REQUIRE(try_cfg(&m, "{" BASE_CFG ", \"target_modules\": [\"q_proj\", \"v_proj\"], \"layers_to_transform\": 0, "
                        "\"modules_to_save\": null, \"use_dora\": false, \"bias\": \"none\"}",
                    &L, &err) == WISP_OK,
            "%s", err.message);
    unload(&L);
    /* the base model must fit */
    wisp_hparams other = m.hp;
    other.dim = 32;
    loaded L2;
    wisp_status s = load_peft(&L2, "{" BASE_CFG "}", strlen("{" BASE_CFG "}"), m.st, m.n_st, &other, &err);
    CHECK(s == WISP_ERR_SHAPE && strstr(err.message, "wrong base model"), "%s", err.message);
    unload(&L2);
    s = load_peft(&L2, "{" BASE_CFG "}", strlen("{" BASE_CFG "}"), m.st, m.n_st, NULL, &err);
    CHECK(s == WISP_ERR_ARG, "needs a base: %s", err.message);
    unload(&L2);
    mini_free(&m);
}

/* Safetensors with chosen tensors (all U8-sized dummies are F32 zeros). */
typedef struct tdesc {
    const char *name;
    int dtype;
    int64_t s0, s1;
} tdesc;

static unsigned char *make_st(const tdesc *ts, int n, size_t *len) {
    wisp_st_out_tensor out[8];
    uint64_t data = 0;
    for (int i = 0; i < n; i++) {
        wisp_st_out_tensor t = {ts[i].name, ts[i].dtype, 2, {ts[i].s0, ts[i].s1}};
        out[i] = t;
        data += wisp_st_out_bytes(&t);
    }
    wisp_sink c = wisp_count_sink_make();
    wisp_error err;
    wisp_st_write_header(&c, out, (size_t)n, NULL, 0, &err);
    size_t total = (size_t)(c.written + data);
    unsigned char *buf = calloc(total, 1);
    wisp_mem_sink m;
    wisp_sink s = wisp_mem_sink_make(&m, buf, total);
    wisp_st_write_header(&s, out, (size_t)n, NULL, 0, &err);
    *len = total;
    return buf;
}

static void expect_tensors(const tdesc *ts, int n, wisp_status want, const char *needle) {
    mini m;
    mini_make(&m);
    free(m.st);
    m.st = make_st(ts, n, &m.n_st);
    expect_cfg(&m, "{" BASE_CFG "}", want, needle);
    mini_free(&m);
}

static void test_hostile_tensors(void) {
    const char *qa = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight";
    const char *qb = "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight";
    const int F32 = WISP_ST_F32;
    {
        tdesc t[] = {{qa, F32, 4, 16}, {qb, F32, 16, 4}};
        expect_tensors(t, 2, WISP_OK, "");
    }
    {
        tdesc t[] = {{"model.layers.0.self_attn.q_proj.lora_A.weight", F32, 4, 16},
                     {"model.layers.0.self_attn.q_proj.lora_B.weight", F32, 16, 4}};
        expect_tensors(t, 2, WISP_OK, ""); /* without the base_model.model. prefix */
    }
    {
        tdesc t[] = {{qa, F32, 4, 16}, {qb, F32, 16, 3}};
        expect_tensors(t, 2, WISP_ERR_SHAPE, "rank mismatch");
    }
    {
        tdesc t[] = {{qa, F32, 4, 12}, {qb, F32, 16, 4}};
        expect_tensors(t, 2, WISP_ERR_SHAPE, "wrong base model");
    }
    {
        tdesc t[] = {{qa, F32, 4, 16}};
        expect_tensors(t, 1, WISP_ERR_NOT_FOUND, "no lora_B");
    }
    {
        tdesc t[] = {{qb, F32, 16, 4}};
        expect_tensors(t, 1, WISP_ERR_FORMAT, "0 lora_A but 1 lora_B");
    }
    {
        tdesc t[] = {{qa, F32, 4, 16}, {qb, F32, 16, 4}, {"base_model.model.lm_head.lora_A.weight", F32, 4, 16}};
        expect_tensors(t, 3, WISP_ERR_UNSUPPORTED, "output layer");
    }
    {
        tdesc t[] = {{qa, F32, 4, 16}, {qb, F32, 16, 4},
                     {"base_model.model.model.layers.0.self_attn.q_proj.lora_magnitude_vector", F32, 1, 16}};
        expect_tensors(t, 3, WISP_ERR_FORMAT, "does not set use_dora");
    }
    {
        tdesc t[] = {{"base_model.model.model.layers.0.mlp.q_proj.lora_A.weight", F32, 4, 16},
                     {"base_model.model.model.layers.0.mlp.q_proj.lora_B.weight", F32, 16, 4}};
        expect_tensors(t, 2, WISP_ERR_UNSUPPORTED, "module wisp does not adapt");
    }
    {
        tdesc t[] = {{"base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight", F32, 4, 16},
                     {"base_model.model.model.layers.3.self_attn.q_proj.lora_B.weight", F32, 16, 4}};
        expect_tensors(t, 2, WISP_ERR_SHAPE, "only 1 layers");
    }
    {
        tdesc t[] = {{qa, WISP_ST_F64, 4, 16}, {qb, WISP_ST_F64, 16, 4}};
        expect_tensors(t, 2, WISP_ERR_UNSUPPORTED, "F64");
    }
    {
        tdesc t[] = {{qa, WISP_ST_F16, 4, 16}, {qb, F32, 16, 4}};
        expect_tensors(t, 2, WISP_ERR_UNSUPPORTED, "lora_A is F16");
    }
    /* truncated safetensors under a good config */
    mini m;
    mini_make(&m);
    for (size_t cut = 0; cut < m.n_st; cut += 7) {
        loaded L;
        wisp_error err = {0};
        wisp_status s = load_peft(&L, "{" BASE_CFG "}", strlen("{" BASE_CFG "}"), m.st, cut, &m.hp, &err);
        CHECK(s == WISP_ERR_FORMAT && strstr(err.message, "adapter_model.safetensors"), "cut %zu: %s", cut,
              err.message);
        unload(&L);
    }
    mini_free(&m);
}

/* Random byte changes in the golden config and safetensors header. */
static void test_mutations(void) {
    char path[2][512];
    snprintf(path[0], sizeof path[0], "%s/peft/adapter_config.json", DIR);
    snprintf(path[1], sizeof path[1], "%s/peft/adapter_model.safetensors", DIR);
    const char *cp = shared_path(path[0]), *sp = shared_path(path[1]), *bp = shared_path("models/stories260K.gguf");
    if (!cp || !sp || !bp) return;
    wisp_hparams hp;
    REQUIRE(fixture_hparams(bp, &hp), "hparams");
    size_t n_cfg, n_st;
    char *cfg = (char *)read_file(cp, &n_cfg);
    unsigned char *st = read_file(sp, &n_st);
    char *c2 = malloc(n_cfg);
    unsigned char *s2 = malloc(n_st);
    uint64_t seed = 4242;
    int loaded_ok = 0;
    for (int iter = 0; iter < 1500; iter++) {
        memcpy(c2, cfg, n_cfg);
        memcpy(s2, st, n_st);
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        if (iter % 2) c2[(size_t)(seed >> 33) % n_cfg] = (char)(seed >> 20);
        else s2[(size_t)(seed >> 33) % 9300] = (unsigned char)(seed >> 20);
        loaded L;
        wisp_error err = {0};
        wisp_status s = load_peft(&L, c2, n_cfg, s2, n_st, &hp, &err);
        CHECK(s == WISP_OK || err.message[0], "iteration %d: failure without a message", iter);
        CHECK(s != WISP_ERR_INTERNAL && s != WISP_ERR_CAPACITY, "iteration %d: %s", iter, err.message);
        loaded_ok += s == WISP_OK;
        unload(&L);
    }
    printf("config/header mutations: %d of 1500 still valid adapters, the rest rejected cleanly\n", loaded_ok);
    free(c2);
    free(s2);
    free(cfg);
    free(st);
}

int main(void) {
    test_mutations();
    test_round_trips();
    test_dora();
    test_partial_set();
    test_config();
    test_hostile_tensors();
    test_golden_permutation();
    return check_report("test_peft");
}
