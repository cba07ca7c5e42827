/* The pieces of a training step checked one by one:
 *  - the transposed product dX += W^T dY of every weight type against a
 *    float64 product of the dequantized weights, and split over columns in
 *    any way it gives the same bits (threads split it so);
 *  - learning-rate schedules against their closed forms;
 *  - AdamW and SGD with momentum against a step written out by hand;
 *  - gradient accumulation, clipping, and F16 loss scaling's skip on overflow. */
#include <math.h>
#include <stdio.h>

#include "matmul_t.h"
#include "quant.h"
#include "test_train_util.h"

/* dX += W^T dY through transposed tiles and the F32 matmul, against float64;
 * split over columns in whole tiles, and with other tile sizes, it stays exact */
static void check_matmul_t(int type) {
    const wisp_type_info *ti = wisp_type_info_of(type);
    wisp_kernels table = *wisp_kernels_reference();
    wisp_kernels_complete(&table);
    const wisp_kernels *k = &table;
    int64_t cols = ti->block_elems >= 256 ? 768 : 320, rows = 37, n_tok = 5, cb = wisp_matmul_t_cols(type);
    size_t row_bytes = wisp_type_row_bytes(type, cols);
    uint8_t *w = malloc(row_bytes * (size_t)rows);
    float *wf = malloc(sizeof(float) * (size_t)(rows * cols)), *deq = malloc(sizeof(float) * (size_t)(rows * cols));
    float *dy = malloc(sizeof(float) * (size_t)(n_tok * rows)), *tile = malloc(sizeof(float) * 32 * 256);
    float *out = malloc(sizeof(float) * (size_t)(n_tok * cb));
    float *dx0 = malloc(sizeof(float) * (size_t)(n_tok * cols)), *dx1 = malloc(sizeof(float) * (size_t)(n_tok * cols));
    uint64_t rng = 3 + (uint64_t)type;
    for (int64_t i = 0; i < rows * cols; i++) wf[i] = (float)(2 * ref_uniform(&rng) - 1);
    for (int64_t i = 0; i < n_tok * rows; i++) dy[i] = (float)(2 * ref_uniform(&rng) - 1);
    for (int64_t i = 0; i < n_tok * cols; i++) dx0[i] = dx1[i] = (float)(ref_uniform(&rng) - 0.5);
    for (int64_t r = 0; r < rows; r++) ti->quantize(wf + r * cols, w + (size_t)r * row_bytes, cols);
    for (int64_t r = 0; r < rows; r++) ti->dequantize(w + (size_t)r * row_bytes, deq + r * cols, cols);
    /* the transposed tile holds exactly the dequantized values */
    k->dequant_t[type](w, row_bytes, type, 3, 20, cb, 2 * cb, tile, 17);
    bool exact = true;
    for (int64_t c = 0; c < cb; c++)
        for (int64_t r = 0; r < 17; r++) exact &= tile[c * 17 + r] == deq[(r + 3) * cols + cb + c];
    CHECK(exact, "%s: a transposed tile differs from the dequantized rows", ti->name);
    double *want = malloc(sizeof(double) * (size_t)(n_tok * cols)), err = 0, top = 0;
    for (int64_t i = 0; i < n_tok * cols; i++) want[i] = dx0[i];
    for (int64_t r = 0; r < rows; r++)
        for (int64_t t = 0; t < n_tok; t++)
            for (int64_t c = 0; c < cols; c++) want[t * cols + c] += (double)deq[r * cols + c] * dy[t * rows + r];
    wisp_weight wt = {.data = w, .type = type, .rows = (int32_t)rows, .cols = (int32_t)cols, .row_bytes = row_bytes};
    wisp_matmul_t_range(k, &wt, dy, rows, n_tok, dx0, cols, 0, cols, tile, 16 * cb, out);
    /* the same columns in two pieces (one tile, then the rest) */
    wisp_matmul_t_range(k, &wt, dy, rows, n_tok, dx1, cols, cb, cols, tile, 16 * cb, out);
    wisp_matmul_t_range(k, &wt, dy, rows, n_tok, dx1, cols, 0, cb, tile, 16 * cb, out);
    for (int64_t i = 0; i < n_tok * cols; i++) {
        if (fabs(dx0[i] - want[i]) > err) err = fabs(dx0[i] - want[i]);
        if (fabs(want[i]) > top) top = fabs(want[i]);
    }
    CHECK(err <= 1e-5 * top, "%s: transposed product off by %.3g (max %.3g)", ti->name, err, top);
    CHECK(memcmp(dx0, dx1, sizeof(float) * (size_t)(n_tok * cols)) == 0, "%s: a column split changes the result",
          ti->name);
    printf("matmul_t %-6s max error %.2e of %.2e, split-invariant\n", ti->name, err, top);
    free(w), free(wf), free(deq), free(dy), free(tile), free(out), free(dx0), free(dx1), free(want);
}

static void check_schedules(void) {
    wisp_train_config c;
    memset(&c, 0, sizeof c);
    c.lr = 1e-3f;
    c.warmup_steps = 10;
    c.total_steps = 110;
    c.schedule = WISP_SCHEDULE_COSINE;
    CHECK(wisp_train_lr_at(&c, 0) == 0.0f, "warmup starts at 0 (as Hugging Face's)");
    CHECK(fabsf(wisp_train_lr_at(&c, 5) - 5e-4f) < 1e-9f, "half way through warmup");
    CHECK(fabsf(wisp_train_lr_at(&c, 10) - 1e-3f) < 1e-9f, "peak after warmup");
    CHECK(fabsf(wisp_train_lr_at(&c, 60) - 5e-4f) < 1e-9f, "cosine half way: %g", wisp_train_lr_at(&c, 60));
    CHECK(wisp_train_lr_at(&c, 110) < 1e-9f, "cosine ends at 0");
    c.min_lr_ratio = 0.1f;
    CHECK(fabsf(wisp_train_lr_at(&c, 110) - 1e-4f) < 1e-9f, "cosine floor");
    c.min_lr_ratio = 0;
    c.schedule = WISP_SCHEDULE_LINEAR;
    CHECK(fabsf(wisp_train_lr_at(&c, 35) - 7.5e-4f) < 1e-9f, "linear at a quarter: %g", wisp_train_lr_at(&c, 35));
    c.schedule = WISP_SCHEDULE_CONSTANT;
    CHECK(wisp_train_lr_at(&c, 1000) == 1e-3f, "constant after warmup");
    c.schedule = WISP_SCHEDULE_ONECYCLE; /* PyTorch OneCycleLR: starts at lr/25, peaks at step warmup-1, ends at lr/25e4 */
    CHECK(fabsf(wisp_train_lr_at(&c, 0) - 4e-5f) < 1e-10f, "1cycle start %g", wisp_train_lr_at(&c, 0));
    CHECK(fabsf(wisp_train_lr_at(&c, 9) - 1e-3f) < 1e-9f, "1cycle peak %g", wisp_train_lr_at(&c, 9));
    CHECK(fabsf(wisp_train_lr_at(&c, 109) - 4e-9f) < 1e-12f, "1cycle end %g", wisp_train_lr_at(&c, 109));
}

/* One micro-step and one optimizer step; returns params before and after
 * and the gradient (malloc'd copies). */
typedef struct step_result {
    float *before, *after, *grad;
    size_t n;
    wisp_train_step_info info;
} step_result;

static size_t adapter_size(const wisp_lora *l) {
    size_t n = 0;
    for (int32_t i = 0; i < l->n_pairs; i++)
        n += (size_t)l->pairs[i].rank * ((size_t)l->pairs[i].n_in + (size_t)l->pairs[i].n_out) +
             (l->pairs[i].magnitude ? (size_t)l->pairs[i].n_out : 0);
    return n;
}

static void flatten(const wisp_lora *l, float *out) {
    for (int32_t i = 0; i < l->n_pairs; i++) {
        const wisp_lora_pair *p = &l->pairs[i];
        size_t na = (size_t)p->rank * p->n_in, nb = (size_t)p->rank * p->n_out;
        memcpy(out, p->a, na * sizeof(float));
        memcpy(out + na, p->b, nb * sizeof(float));
        out += na + nb;
        if (p->magnitude) memcpy(out, p->magnitude, (size_t)p->n_out * sizeof(float)), out += p->n_out;
    }
}

/* `poison`: make one gradient element infinite before the optimizer step, as an overflow would */
static bool one_step(const char *path, wisp_config *cfg, int micro_steps, bool poison, step_result *res) {
    train_env e = {0};
    if (!train_open(&e, path, cfg)) return false;
    ref_lora refs[64];
    const wisp_lora *l = wisp_train_lora(e.ctx);
    if (l->n_pairs > 64 || !set_random_lora(e.ctx, 11, 0.1, refs)) return false;
    for (int32_t i = 0; i < l->n_pairs; i++) ref_lora_free(&refs[i]);
    int32_t tok[33];
    random_tokens(tok, 33, wisp_ctx_hparams(e.ctx)->n_vocab, 8);
    res->n = adapter_size(l);
    res->before = malloc(sizeof(float) * res->n);
    res->after = malloc(sizeof(float) * res->n);
    res->grad = malloc(sizeof(float) * res->n);
    flatten(l, res->before);
    wisp_error err = {0};
    double loss;
    int32_t n;
    for (int i = 0; i < micro_steps; i++)
        if (wisp_train_micro_step(e.ctx, tok, NULL, 1, &loss, &n, &err)) return false;
    if (poison) *(float *)(uintptr_t)wisp_train_gradients(e.ctx)->pairs[0].b = INFINITY;
    flatten(wisp_train_gradients(e.ctx), res->grad);
    float scale = wisp_train_loss_scale(e.ctx) * (float)micro_steps;
    for (size_t i = 0; i < res->n; i++) res->grad[i] /= scale;
    if (wisp_train_optimizer_step(e.ctx, &res->info, &err)) return false;
    flatten(l, res->after);
    train_close(&e);
    return true;
}

static void free_result(step_result *r) { free(r->before), free(r->after), free(r->grad); }

/* F16 storage: after loss_scale_window finite steps the scale doubles again */
static void check_scale_growth(const char *path) {
    wisp_config cfg = train_config(16, 2, 1);
    cfg.train.act_type = WISP_TYPE_F16;
    cfg.train.loss_scale = 256;
    cfg.train.loss_scale_window = 2;
    train_env e = {0};
    REQUIRE(train_open(&e, path, &cfg), "open");
    int32_t tok[17];
    random_tokens(tok, 17, wisp_ctx_hparams(e.ctx)->n_vocab, 3);
    float scales[3];
    wisp_error err = {0};
    for (int i = 0; i < 3; i++) {
        double loss;
        int32_t n;
        wisp_train_step_info info;
        REQUIRE(!wisp_train_micro_step(e.ctx, tok, NULL, 1, &loss, &n, &err) &&
                    !wisp_train_optimizer_step(e.ctx, &info, &err),
                "step: %s", err.message);
        scales[i] = info.loss_scale;
    }
    CHECK(scales[0] == 256 && scales[1] == 512 && scales[2] == 512, "loss scale %g %g %g, want 256 512 512", scales[0],
          scales[1], scales[2]);
    train_close(&e);
}

static void check_optimizers(const char *path) {
    wisp_config cfg = train_config(32, 2, 1);
    cfg.train.targets = (1u << WISP_PROJ_V) | (1u << WISP_PROJ_DOWN);
    cfg.train.lr = 0.01f;
    cfg.train.weight_decay = 0.1f;
    step_result r;
    REQUIRE(one_step(path, &cfg, 1, false, &r), "AdamW step");
    /* first AdamW step: m = (1-b1) g, v = (1-b2) g^2, bias-corrected: p' = p (1 - lr wd) - lr g / (|g| + eps') */
    double worst = 0;
    for (size_t i = 0; i < r.n; i++) {
        double g = r.grad[i], p = r.before[i] * (1.0 - 0.01 * 0.1);
        double m = 0.1 * g / 0.1, v = 0.001 * g * g / 0.001;
        double want = p - 0.01 * m / (sqrt(v) + 1e-8);
        double e = fabs(r.after[i] - want);
        if (e > worst) worst = e;
    }
    CHECK(worst < 1e-6, "AdamW first step off by %.3g", worst);
    CHECK(r.info.step == 1 && r.info.lr == 0.01f && !r.info.skipped && !r.info.clipped, "AdamW step info");
    free_result(&r);

    cfg.train.optimizer = WISP_OPTIMIZER_SGD;
    cfg.train.momentum = 0.9f;
    REQUIRE(one_step(path, &cfg, 1, false, &r), "SGD step");
    worst = 0;
    for (size_t i = 0; i < r.n; i++) { /* first step: buf = g + wd p */
        double want = r.before[i] - 0.01 * ((double)r.grad[i] + 0.1 * r.before[i]);
        if (fabs(r.after[i] - want) > worst) worst = fabs(r.after[i] - want);
    }
    CHECK(worst < 1e-6, "SGD first step off by %.3g", worst);

    /* clipping: plain SGD moves the adapter by exactly lr x clip_norm */
    cfg.train.momentum = -1;
    cfg.train.weight_decay = 0;
    cfg.train.clip_norm = 1e-3f;
    step_result c;
    REQUIRE(one_step(path, &cfg, 1, false, &c), "clipped step");
    double moved = 0;
    for (size_t i = 0; i < c.n; i++) moved += (double)(c.after[i] - c.before[i]) * (c.after[i] - c.before[i]);
    CHECK(c.info.clipped && c.info.grad_norm > 1e-3f, "the step was clipped (norm %g)", c.info.grad_norm);
    CHECK(fabs(sqrt(moved) - 0.01 * 1e-3) < 1e-7, "clipped update norm %.6g, want %.6g", sqrt(moved), 1e-5);
    /* DoRA: the magnitudes are trained parameters, so the clipped norm covers them too */
    cfg.train.dora = true;
    step_result d;
    REQUIRE(one_step(path, &cfg, 1, false, &d), "clipped DoRA step");
    double moved_d = 0, norm_d = 0;
    for (size_t i = 0; i < d.n; i++) {
        moved_d += (double)(d.after[i] - d.before[i]) * (d.after[i] - d.before[i]);
        norm_d += (double)d.grad[i] * d.grad[i];
    }
    CHECK(fabs(d.info.grad_norm - sqrt(norm_d)) < 1e-5 * sqrt(norm_d), "DoRA gradient norm %.8g, want %.8g over A, B and m",
          d.info.grad_norm, sqrt(norm_d));
    CHECK(d.info.clipped && fabs(sqrt(moved_d) - 0.01 * 1e-3) < 1e-7, "clipped DoRA update norm %.6g, want %.6g",
          sqrt(moved_d), 1e-5);
    cfg.train.dora = false;
    free_result(&d);

    /* accumulating the same batch twice averages to the same gradient (up to the order of float sums) */
    cfg.train.clip_norm = 0;
    step_result a1, a2;
    REQUIRE(one_step(path, &cfg, 1, false, &a1) && one_step(path, &cfg, 2, false, &a2), "accumulation steps");
    worst = 0;
    for (size_t i = 0; i < a1.n; i++) {
        double step_len = fabs((double)a1.after[i] - a1.before[i]);
        if (step_len > 0 && fabs((double)a2.after[i] - a1.after[i]) / step_len > worst)
            worst = fabs((double)a2.after[i] - a1.after[i]) / step_len;
    }
    CHECK(worst < 1e-4, "2 identical micro-steps move the adapter %.3g (relative) away from 1", worst);

    /* F16 storage: an overflowing gradient skips the step and (hysteresis 1) halves the loss scale */
    cfg.train.act_type = WISP_TYPE_F16;
    cfg.train.loss_scale = 1024;
    cfg.train.loss_scale_hysteresis = 1;
    step_result o;
    REQUIRE(one_step(path, &cfg, 1, true, &o), "overflowing step");
    CHECK(o.info.skipped && o.info.loss_scale == 512 && o.info.step == 0, "skipped %d, scale %g, step %lld",
          o.info.skipped, o.info.loss_scale, (long long)o.info.step);
    CHECK(memcmp(o.before, o.after, sizeof(float) * o.n) == 0, "a skipped step changed the adapter");
    check_scale_growth(path);
    free_result(&r), free_result(&c), free_result(&a1), free_result(&a2), free_result(&o);
}

int main(void) {
    static const int types[] = {WISP_TYPE_F32, WISP_TYPE_F16, WISP_TYPE_BF16, WISP_TYPE_Q4_0, WISP_TYPE_Q4_1,
                                WISP_TYPE_Q5_0, WISP_TYPE_Q5_1, WISP_TYPE_Q8_0, WISP_TYPE_Q2_K, WISP_TYPE_Q3_K,
                                WISP_TYPE_Q4_K, WISP_TYPE_Q5_K, WISP_TYPE_Q6_K, WISP_TYPE_IQ4_NL};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) check_matmul_t(types[i]);
    check_schedules();
    const char *stories = shared_path("models/stories260K.gguf");
    if (stories) check_optimizers(stories);
    else fprintf(stderr, "note: models/stories260K.gguf missing: optimizer checks skipped\n");
    return check_report("test_train_ops");
}
