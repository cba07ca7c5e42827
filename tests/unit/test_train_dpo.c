/* DPO (core/train_dpo.c) against an independent float64 reference.
 *
 * 1. The loss of one pair and its derivatives: the engine's wisp_dpo_pair
 *    against trl's formulas written out here in the plainest form (sigmoid
 *    with and without label smoothing, IPO), derivatives against central
 *    differences of those formulas.
 * 2. The whole objective on a real model: policy log-probs from the float64
 *    reference model with the adapter, reference log-probs from the same
 *    model without it; the engine's loss must equal the formula on them, and
 *    its LoRA gradients the central differences of that loss. Variants:
 *    sigmoid, label smoothing, IPO (per-token averages), dropout with
 *    checkpointing, F16 storage (loss scaling), and reference log-probs
 *    passed in (cached) instead of computed. */
#include <math.h>
#include <stdio.h>

#include "test_train_util.h"
#include "train.h"

#define SEQ 12
#define RANK 3
#define PAIRS 2
#define N_SAMPLES 8

/* ---- 1. the formula ---- */

typedef struct plain_dpo {
    double beta, smoothing;
    bool ipo;
} plain_dpo;

/* trl: logits = (pi_c - pi_r) - (ref_c - ref_r); sigmoid uses beta x logits, ipo (logits - 1/(2 beta))^2 */
static double plain_loss(const plain_dpo *p, double pc, double pr, double rc, double rr) {
    double logits = (pc - pr) - (rc - rr);
    if (p->ipo) return (logits - 1 / (2 * p->beta)) * (logits - 1 / (2 * p->beta));
    double sig_pos = 1 / (1 + exp(-p->beta * logits)), sig_neg = 1 / (1 + exp(p->beta * logits));
    return -log(sig_pos) * (1 - p->smoothing) - log(sig_neg) * p->smoothing;
}

static wisp_train_config config_of(const plain_dpo *p) {
    wisp_train_config c;
    memset(&c, 0, sizeof c);
    c.objective = WISP_OBJECTIVE_DPO;
    c.dpo_beta = (float)p->beta;
    c.dpo_label_smoothing = (float)p->smoothing;
    c.dpo_loss = p->ipo ? WISP_DPO_IPO : WISP_DPO_SIGMOID;
    return c;
}

static void formula_checks(void) {
    const plain_dpo kinds[] = {{0.125, 0, false}, {0.5, 0.125, false}, {0.25, 0.375, false}, {0.0625, 0, true}, {1.0, 0, true}};
    uint64_t rng = 7;
    double worst_loss = 0, worst_grad = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        const plain_dpo *p = &kinds[k];
        /* betas are floats in the config: the kinds use values floats hold exactly */
        wisp_train_config c = config_of(p);
        plain_dpo q = {c.dpo_beta, c.dpo_label_smoothing, p->ipo};
        for (int i = 0; i < 200; i++) {
            double v[4];
            for (int j = 0; j < 4; j++) v[j] = -40 * ref_uniform(&rng); /* summed log-probs of a few dozen tokens */
            if (p->ipo)
                for (int j = 0; j < 4; j++) v[j] /= 20; /* per-token averages */
            wisp_dpo_pair_terms t = wisp_dpo_pair(&c, v[0], v[1], v[2], v[3]);
            double want = plain_loss(&q, v[0], v[1], v[2], v[3]), e = fabs(t.loss - want) / fmax(fabs(want), 1e-3);
            if (e > worst_loss) worst_loss = e;
            CHECK(e < 1e-12, "kind %zu pair %d: loss %.17g, formula %.17g", k, i, t.loss, want);
            const double h = 1e-5;
            double fd_c = (plain_loss(&q, v[0] + h, v[1], v[2], v[3]) - plain_loss(&q, v[0] - h, v[1], v[2], v[3])) / (2 * h);
            double fd_r = (plain_loss(&q, v[0], v[1] + h, v[2], v[3]) - plain_loss(&q, v[0], v[1] - h, v[2], v[3])) / (2 * h);
            double ec = fabs(t.d_chosen - fd_c) / fmax(fabs(fd_c), 1e-3), er = fabs(t.d_rejected - fd_r) / fmax(fabs(fd_r), 1e-3);
            if (fmax(ec, er) > worst_grad) worst_grad = fmax(ec, er);
            CHECK(ec < 1e-6 && er < 1e-6, "kind %zu pair %d: dL/dpi %.9g %.9g, finite differences %.9g %.9g", k, i,
                  t.d_chosen, t.d_rejected, fd_c, fd_r);
            CHECK(fabs(t.reward_chosen - q.beta * (v[0] - v[2])) < 1e-12 &&
                      fabs(t.reward_rejected - q.beta * (v[1] - v[3])) < 1e-12,
                  "kind %zu pair %d: rewards", k, i);
        }
    }
    printf("DPO formula: 1000 pairs, worst loss error %.1e, worst derivative error %.1e\n", worst_loss, worst_grad);
}

/* ---- 2. the whole objective on a model ---- */

typedef struct variant {
    const char *name;
    plain_dpo dpo;
    int32_t act_type;
    bool checkpointing;
    float dropout;
    bool cached_ref;
} variant;

/* The engine's dropout masks of micro-step 0: the reference model numbers
 * positions per sequence, the engine token rows over the batch. */
typedef struct keep_map {
    const wisp_train *tr;
    int32_t row0; /* the first token row of the sequence being evaluated */
} keep_map;

static bool keep_of_engine(void *user, int32_t layer, int32_t proj, int32_t t, int32_t i) {
    const keep_map *k = user;
    return wisp_train_keep(k->tr, 0, layer, proj, k->row0 + t, i);
}

static int32_t scored_of(const uint8_t *m) {
    int32_t n = 0;
    for (int32_t j = 1; j <= SEQ; j++) n += m[j] != 0;
    return n;
}

/* Summed (or, for IPO, averaged) log-prob of each sequence under r, with its adapters or without. */
static void ref_logps(ref_model *r, int32_t n_lora, const int32_t *tok, const uint8_t *mask, bool average, double *out) {
    int32_t saved = r->n_lora;
    r->n_lora = n_lora;
    for (int32_t b = 0; b < 2 * PAIRS; b++) {
        const uint8_t *m = mask + b * (SEQ + 1);
        int32_t n = scored_of(m);
        if (r->keep) ((keep_map *)r->keep_user)->row0 = b * SEQ;
        double mean_ce = ref_loss(r, tok + b * (SEQ + 1), SEQ + 1, m);
        out[b] = average ? -mean_ce : -mean_ce * n;
    }
    r->n_lora = saved;
}

static double ref_dpo_loss(ref_model *r, const plain_dpo *p, const int32_t *tok, const uint8_t *mask, const double *ref) {
    double pol[2 * PAIRS], total = 0;
    ref_logps(r, r->n_lora, tok, mask, p->ipo, pol);
    for (int32_t i = 0; i < PAIRS; i++) total += plain_loss(p, pol[i], pol[PAIRS + i], ref[i], ref[PAIRS + i]);
    return total / PAIRS;
}

static void model_check(const char *rel, const variant *v, double tol_grad) {
    const char *path = shared_path(rel);
    REQUIRE(path, "%s missing", rel);
    train_env e = {0};
    wisp_config cfg = train_config(SEQ, RANK, 3);
    cfg.train.micro_batch = 2 * PAIRS;
    cfg.train.objective = WISP_OBJECTIVE_DPO;
    cfg.train.dpo_beta = (float)v->dpo.beta;
    cfg.train.dpo_label_smoothing = (float)v->dpo.smoothing;
    cfg.train.dpo_loss = v->dpo.ipo ? WISP_DPO_IPO : WISP_DPO_SIGMOID;
    cfg.train.act_type = v->act_type;
    cfg.train.checkpointing = v->checkpointing;
    cfg.train.dropout = v->dropout;
    REQUIRE(train_open(&e, path, &cfg), "%s: cannot open", rel);
    const wisp_hparams *hp = wisp_ctx_hparams(e.ctx);
    const wisp_lora *lora = wisp_train_lora(e.ctx), *grads = wisp_train_gradients(e.ctx);
    ref_lora *refs = calloc((size_t)lora->n_pairs, sizeof *refs);
    REQUIRE(set_random_lora(e.ctx, 77, 0.15, refs), "random adapter");

    /* pairs share a prompt (5 unscored targets) and differ in their completions */
    int32_t tok[2 * PAIRS * (SEQ + 1)];
    uint8_t mask[2 * PAIRS * (SEQ + 1)];
    random_tokens(tok, sizeof tok / sizeof tok[0], hp->n_vocab, 5);
    for (int32_t i = 0; i < PAIRS; i++)
        memcpy(tok + (PAIRS + i) * (SEQ + 1), tok + i * (SEQ + 1), 6 * sizeof(int32_t));
    for (int32_t b = 0; b < 2 * PAIRS; b++)
        for (int32_t j = 0; j <= SEQ; j++) mask[b * (SEQ + 1) + j] = j >= 6 && !(b == 1 && j == SEQ); /* one shorter */

    ref_model r;
    REQUIRE(ref_model_load(&r, wisp_ctx_model(e.ctx)), "reference");
    r.lora = refs;
    r.n_ctx = wisp_ctx_config(e.ctx)->n_ctx;
    r.n_lora = lora->n_pairs;
    keep_map km = {e.ctx->train, 0};
    if (v->dropout > 0) {
        r.keep = keep_of_engine;
        r.keep_user = &km;
        r.keep_scale = (double)(1.0f / (1.0f - v->dropout));
    }
    plain_dpo p = {cfg.train.dpo_beta, cfg.train.dpo_label_smoothing, v->dpo.ipo};
    double ref[2 * PAIRS], ref_sums[2 * PAIRS];
    ref_logps(&r, 0, tok, mask, p.ipo, ref);
    ref_logps(&r, 0, tok, mask, false, ref_sums);

    /* the engine's reference log-probs: the base alone */
    wisp_error err = {0};
    double got_ref[2 * PAIRS];
    int32_t got_n[2 * PAIRS];
    REQUIRE(!wisp_train_sequence_logps(e.ctx, tok, mask, 2 * PAIRS, false, got_ref, got_n, &err), "logps: %s", err.message);
    for (int32_t b = 0; b < 2 * PAIRS; b++) {
        CHECK(got_n[b] == scored_of(mask + b * (SEQ + 1)), "%s: sequence %d scored %d", v->name, b, got_n[b]);
        CHECK(fabs(got_ref[b] - ref_sums[b]) < 1e-5 * fabs(ref_sums[b]), "%s: reference logp %d: %.9g vs %.9g", v->name,
              b, got_ref[b], ref_sums[b]);
    }

    wisp_dpo_result res;
    REQUIRE(!wisp_train_dpo_micro_step(e.ctx, tok, mask, PAIRS, v->cached_ref ? got_ref : NULL, &res, &err),
            "dpo micro-step: %s", err.message);
    double want = ref_dpo_loss(&r, &p, tok, mask, ref);
    double loss_err = fabs(res.loss - want) / fmax(fabs(want), 1e-6);
    CHECK(loss_err < 1e-5, "%s %s: loss %.9g vs reference %.9g (relative %.2e)", rel, v->name, res.loss, want, loss_err);
    /* the metrics, from the reference's log-probs */
    double pol[2 * PAIRS], rc = 0, rr = 0, acc = 0;
    ref_logps(&r, r.n_lora, tok, mask, p.ipo, pol);
    for (int32_t i = 0; i < PAIRS; i++) {
        double a = p.beta * (pol[i] - ref[i]), b = p.beta * (pol[PAIRS + i] - ref[PAIRS + i]);
        rc += a / PAIRS, rr += b / PAIRS, acc += (a > b) / (double)PAIRS;
    }
    CHECK(fabs(res.rewards_chosen - rc) < 1e-4 * fmax(fabs(rc), 1e-2) && fabs(res.rewards_rejected - rr) < 1e-4 * fmax(fabs(rr), 1e-2) &&
              fabs(res.rewards_margins - (rc - rr)) < 1e-4 * fmax(fabs(rc - rr), 1e-2) && res.rewards_accuracies == acc,
          "%s: rewards %.6g %.6g acc %.2f, reference %.6g %.6g acc %.2f", v->name, res.rewards_chosen,
          res.rewards_rejected, res.rewards_accuracies, rc, rr, acc);

    float inv_scale = 1.0f / wisp_train_loss_scale(e.ctx);
    double worst = 0;
    uint64_t rng = 99;
    for (int k = 0; k < N_SAMPLES; k++) {
        int32_t pi = (int32_t)(ref_uniform(&rng) * lora->n_pairs);
        bool is_b = k % 2;
        const wisp_lora_pair *g = &grads->pairs[pi];
        size_t n = (size_t)g->rank * (size_t)(is_b ? g->n_out : g->n_in);
        size_t idx = (size_t)(ref_uniform(&rng) * (double)n);
        double *val = is_b ? &refs[pi].b[idx] : &refs[pi].a[idx];
        double saved = *val, h = 1e-4;
        *val = saved + h;
        double up = ref_dpo_loss(&r, &p, tok, mask, ref);
        *val = saved - h;
        double down = ref_dpo_loss(&r, &p, tok, mask, ref);
        *val = saved;
        double fd = (up - down) / (2 * h);
        const float *gt = is_b ? g->b : g->a;
        double got = gt[idx] * inv_scale, top = max_abs(gt, n) * inv_scale;
        double rel_err = fabs(got - fd) / (top > 0 ? top : 1);
        if (rel_err > worst) worst = rel_err;
        CHECK(rel_err < tol_grad, "%s %s: blk.%d.%s d%s[%zu] = %.6g, finite difference %.6g (%.2e of the tensor's max %.3g)",
              rel, v->name, g->layer, wisp_proj_gguf_name(g->proj), is_b ? "B" : "A", idx, got, fd, rel_err, top);
    }
    printf("%-32s %-22s loss %.6f rel err %.1e, worst gradient err %.1e of tensor max\n", rel, v->name, res.loss,
           loss_err, worst);
    CHECK(guard_intact(&e), "%s %s: training wrote past the planned arena", rel, v->name);
    for (int32_t i = 0; i < lora->n_pairs; i++) ref_lora_free(&refs[i]);
    free(refs);
    ref_model_free(&r);
    train_close(&e);
}

/* A context planned for plain LoRA refuses DPO calls by name; DPO configs are checked. */
static void refusals(void) {
    const char *path = shared_path("models/stories260K.gguf");
    REQUIRE(path, "stories260K missing");
    train_env e = {0};
    wisp_config cfg = train_config(SEQ, RANK, 1);
    cfg.train.micro_batch = 2;
    REQUIRE(train_open(&e, path, &cfg), "open");
    int32_t tok[2 * (SEQ + 1)] = {0};
    wisp_error err = {0};
    wisp_dpo_result res;
    CHECK(wisp_train_dpo_micro_step(e.ctx, tok, NULL, 1, NULL, &res, &err) && strstr(err.message, "DPO"),
          "DPO on a LoRA context: %s", err.message);
    wisp_memory_plan plan;
    cfg.train.objective = WISP_OBJECTIVE_DPO;
    cfg.train.micro_batch = 3;
    CHECK(wisp_plan(&e.g, &cfg, &plan, &err) && strstr(err.message, "even"), "odd micro_batch: %s", err.message);
    cfg.train.micro_batch = 2;
    cfg.train.dpo_loss = WISP_DPO_IPO;
    cfg.train.dpo_label_smoothing = 0.1f;
    CHECK(wisp_plan(&e.g, &cfg, &plan, &err) && strstr(err.message, "IPO"), "IPO with smoothing: %s", err.message);
    cfg.train.dpo_loss = WISP_DPO_SIGMOID;
    cfg.train.dpo_label_smoothing = 0.5f;
    CHECK(wisp_plan(&e.g, &cfg, &plan, &err) && strstr(err.message, "smoothing"), "smoothing 0.5: %s", err.message);
    train_close(&e);
}

int main(void) {
    shared_path_or_skip("test_train_dpo", "models/stories260K.gguf");
    formula_checks();
    refusals();
    const variant all[] = {
        {"sigmoid beta 0.1", {0.1, 0, false}, WISP_TYPE_F32, false, 0, false},
        {"sigmoid smoothing 0.2", {0.5, 0.2, false}, WISP_TYPE_F32, false, 0, false},
        {"ipo beta 0.5", {0.5, 0, true}, WISP_TYPE_F32, false, 0, false},
        {"sigmoid dropout ckpt", {0.5, 0, false}, WISP_TYPE_F32, true, 0.3f, false},
        {"ipo cached reference", {0.1, 0, true}, WISP_TYPE_F32, false, 0, true},
        {"sigmoid f16 (scaled)", {0.5, 0, false}, WISP_TYPE_F16, false, 0, false},
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        bool reduced = all[i].act_type != WISP_TYPE_F32;
        model_check("models/stories260K.gguf", &all[i], reduced ? 5e-2 : 1e-4);
        model_check("models/synthetic/syn-qwen2-f32.gguf", &all[i], reduced ? 5e-2 : 1e-4);
    }
    return check_report("test_train_dpo");
}
