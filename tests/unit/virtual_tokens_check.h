/* The finite-difference check both kinds of virtual-token tuning share
 * (prompt tuning's embedding rows, prefix tuning's per-layer keys and
 * values): random rows set in the engine and in the float64 reference
 * (tests/lib/ref_model.c), one micro-step, the loss against the reference's,
 * the rows' gradient against central differences at sampled entries, then one
 * optimizer step that must move the rows. What differs between the kinds (the
 * row width, which entries to sample, the reference's field) is the kind's. */
#ifndef WISP_TEST_VIRTUAL_TOKENS_CHECK_H
#define WISP_TEST_VIRTUAL_TOKENS_CHECK_H

#include <math.h>
#include <stdio.h>

#include "test_train_util.h"
#include "train.h"

#define VT_MAX_SEQ 20

typedef struct vt_variant {
    const char *name;
    int32_t act_type;
    bool checkpointing;
    int32_t n_seq;
    bool masked;
    int32_t n_virtual;
} vt_variant;

typedef struct vt_kind {
    const char *what; /* "prompt" or "prefix", in messages */
    bool prefix;
    uint64_t seed; /* of the rows and the sampled entries */
    double amp;    /* rows are uniform in [-amp, amp] */
    int n_samples;
    size_t (*width)(const wisp_hparams *hp); /* values per row */
    /* the k-th entry to check: its row and column */
    void (*pick)(const wisp_hparams *hp, size_t width, int32_t n_virtual, int k, uint64_t *rng, size_t *row, size_t *col);
} vt_kind;

static inline void vt_fd_check(const vt_kind *kind, const char *rel, const vt_variant *v, int32_t seq, double tol_loss,
                               double tol_grad) {
    const char *path = shared_path(rel);
    REQUIRE(path, "%s missing under WISP_SHARED", rel);
    train_env e = {0};
    wisp_config cfg = train_config(seq, 8, 3);
    cfg.n_ctx = seq + v->n_virtual + 1;
    cfg.train.micro_batch = v->n_seq;
    cfg.train.act_type = v->act_type;
    cfg.train.checkpointing = v->checkpointing;
    cfg.train.virtual_tokens = v->n_virtual;
    cfg.train.prefix = kind->prefix;
    REQUIRE(train_open(&e, path, &cfg), "%s: cannot open", rel);
    const wisp_hparams *hp = wisp_ctx_hparams(e.ctx);
    int32_t n_virtual = 0;
    REQUIRE(wisp_train_prompt(e.ctx, &n_virtual) && n_virtual == v->n_virtual, "%s: no %s of %d rows", rel, kind->what,
            v->n_virtual);
    CHECK(wisp_train_lora(e.ctx)->n_pairs == 0, "%s: %s tuning must train no LoRA pair", rel, kind->what);
    size_t W = kind->width(hp), n_p = (size_t)n_virtual * W;
    float *rows = malloc(sizeof(float) * n_p);
    double *ref_rows = malloc(sizeof(double) * n_p);
    uint64_t rng = kind->seed;
    for (size_t i = 0; i < n_p; i++) ref_rows[i] = rows[i] = (float)((2 * ref_uniform(&rng) - 1) * kind->amp);
    wisp_error err = {0};
    REQUIRE(!wisp_train_set_prompt(e.ctx, rows, NULL, 0, &err), "set_prompt: %s", err.message);

    int32_t tok[4 * (VT_MAX_SEQ + 1)];
    uint8_t mask[4 * (VT_MAX_SEQ + 1)];
    REQUIRE(v->n_seq <= 4 && seq <= VT_MAX_SEQ, "variant too large for the check's buffers");
    random_tokens(tok, (size_t)v->n_seq * (seq + 1), hp->n_vocab, 5);
    for (int32_t i = 0; i < v->n_seq * (seq + 1); i++) mask[i] = (uint8_t)(i % 3 != 1);
    const uint8_t *m = v->masked ? mask : NULL;
    double loss = 0;
    int32_t n_scored = 0;
    REQUIRE(!wisp_train_micro_step(e.ctx, tok, m, v->n_seq, &loss, &n_scored, &err), "micro-step: %s", err.message);

    ref_model r;
    REQUIRE(ref_model_load(&r, wisp_ctx_model(e.ctx)), "reference");
    r.n_ctx = wisp_ctx_config(e.ctx)->n_ctx;
    const double **ref_field = kind->prefix ? &r.prefix : &r.prompt;
    int32_t *ref_count = kind->prefix ? &r.n_prefix : &r.n_prompt;
    *ref_field = ref_rows;
    *ref_count = n_virtual;
    double ref = ref_batch_loss(&r, tok, m, v->n_seq, seq);
    double loss_err = fabs(loss - ref) / fabs(ref);
    CHECK(loss_err < tol_loss, "%s %s: loss %.9g vs reference %.9g (relative %.2e)", rel, v->name, loss, ref, loss_err);

    /* the rows change the loss: without them the reference differs */
    *ref_count = 0;
    double bare = ref_batch_loss(&r, tok, m, v->n_seq, seq);
    *ref_count = n_virtual;
    CHECK(fabs(bare - ref) > 1e-6, "%s %s: the %s does not change the loss (%.9g)", rel, v->name, kind->what, bare);

    const float *grad = wisp_train_prompt_gradient(e.ctx);
    float inv_scale = 1.0f / wisp_train_loss_scale(e.ctx);
    double top = 0, worst = 0;
    for (size_t i = 0; i < n_p; i++)
        if (fabs(grad[i] * inv_scale) > top) top = fabs(grad[i] * inv_scale);
    CHECK(top > 0, "%s %s: the %s's gradient is zero", rel, v->name, kind->what);
    for (int k = 0; k < kind->n_samples; k++) {
        size_t row = 0, col = 0;
        kind->pick(hp, W, n_virtual, k, &rng, &row, &col);
        size_t idx = row * W + col;
        double saved = ref_rows[idx], h = 1e-4;
        ref_rows[idx] = saved + h;
        double up = ref_batch_loss(&r, tok, m, v->n_seq, seq);
        ref_rows[idx] = saved - h;
        double down = ref_batch_loss(&r, tok, m, v->n_seq, seq);
        ref_rows[idx] = saved;
        double fd = (up - down) / (2 * h), got = grad[idx] * inv_scale, rel_err = fabs(got - fd) / top;
        if (rel_err > worst) worst = rel_err;
        CHECK(rel_err < tol_grad, "%s %s: d %s[%zu][%zu] = %.6g, finite difference %.6g (%.2e of the max %.3g)", rel,
              v->name, kind->what, row, col, got, fd, rel_err, top);
    }
    printf("%-42s %s %-8s loss rel err %.1e, worst gradient err %.1e of tensor max\n", rel, kind->what, v->name, loss_err,
           worst);

    /* one optimizer step moves the rows (and nothing else can move) */
    wisp_train_step_info info;
    REQUIRE(!wisp_train_optimizer_step(e.ctx, &info, &err), "optimizer: %s", err.message);
    const float *now = wisp_train_prompt(e.ctx, NULL);
    size_t moved = 0;
    for (size_t i = 0; i < n_p; i++) moved += now[i] != rows[i];
    CHECK(moved > n_p / 2, "%s %s: the optimizer moved %zu of %zu %s values", rel, v->name, moved, n_p, kind->what);
    CHECK(guard_intact(&e), "%s %s: training wrote past the planned arena", rel, v->name);
    free(rows);
    free(ref_rows);
    ref_model_free(&r);
    train_close(&e);
}

/* stories260K opened for a kind's plan checks (its bytes in *bytes, for the caller to free; NULL
 * when it cannot be opened, a failed check), and the configuration they plan: 20 virtual tokens
 * of the kind before sequences of 16, in pairs. */
static inline void vt_open_plan_model(const vt_kind *kind, wisp_gguf *g, wisp_config *cfg, unsigned char **bytes) {
    const char *path = shared_path("models/stories260K.gguf");
    *bytes = NULL;
    REQUIRE(path, "stories260K missing");
    size_t size = 0;
    wisp_error err = {0};
    unsigned char *b = read_file(path, &size);
    if (b && wisp_gguf_open(g, b, size, &err)) free(b), b = NULL;
    REQUIRE(b, "open: %s", err.message);
    *bytes = b;
    *cfg = train_config(16, 8, 1);
    cfg->n_ctx = 16 + 20 + 1;
    cfg->train.virtual_tokens = 20;
    cfg->train.prefix = kind->prefix;
    cfg->train.micro_batch = 2;
}

/* The variants both kinds are checked in, each on stories260K and on qwen2 (biases): plain,
 * checkpointed with masked batches of two, one row, BF16 and F16 storage; n_rows[i] virtual tokens
 * in variant i. The variants go to `out` for the kind's own further checks. */
static inline void vt_fd_check_variants(const vt_kind *kind, const int32_t n_rows[5], vt_variant out[5]) {
    const vt_variant all[5] = {
        {"plain", WISP_TYPE_F32, false, 1, false, n_rows[0]}, {"ckpt", WISP_TYPE_F32, true, 2, true, n_rows[1]},
        {"1 row", WISP_TYPE_F32, false, 2, false, n_rows[2]}, {"bf16", WISP_TYPE_BF16, false, 1, false, n_rows[3]},
        {"f16", WISP_TYPE_F16, true, 2, true, n_rows[4]},
    };
    for (size_t i = 0; i < 5; i++) {
        bool reduced = all[i].act_type != WISP_TYPE_F32;
        vt_fd_check(kind, "models/stories260K.gguf", &all[i], 12, 1e-5, reduced ? 5e-2 : 1e-4);
        vt_fd_check(kind, "models/synthetic/syn-qwen2-f32.gguf", &all[i], 12, 1e-5, reduced ? 5e-2 : 1e-4);
        out[i] = all[i];
    }
}

#endif
