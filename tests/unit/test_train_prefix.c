/* Prefix tuning (PEFT PREFIX_TUNING): learned keys and values every layer
 * attends to first.
 *
 * The engine's loss and the prefix's gradient are compared with central
 * differences of the float64 reference (tests/lib/ref_model.c with its
 * prefix: the tokens at positions n_prefix.., the prefix keys used as stored,
 * unrotated) across families (grouped-query attention, qwen2 biases, qwen3
 * head norms), checkpointing, reduced storage, masked batches and a
 * quantized base; with PEFT's reparameterization MLP (prefix_projection),
 * the gradients of its embeddings, weights and biases. The inference path (wisp_eval_kv_prefix, then tokens) gives
 * the reference's logits. Also: the plan is exact (one byte less fails by
 * name), an optimizer step moves only the prefix, and what prefix tuning does
 * not implement is refused by name. */
#include "virtual_tokens_check.h"

static size_t prefix_width(const wisp_hparams *hp) {
    return 2 * (size_t)hp->n_layers * (size_t)hp->n_kv_heads * (size_t)hp->head_dim;
}

/* the first and last layer's key and value, the rest anywhere */
static void pick_prefix_entry(const wisp_hparams *hp, size_t width, int32_t n_virtual, int k, uint64_t *rng, size_t *row,
                              size_t *col) {
    size_t KV = width / (2 * (size_t)hp->n_layers);
    *row = (size_t)(ref_uniform(rng) * n_virtual);
    if (k < 4) *col = (k / 2 ? width - 2 * KV : 0) + (size_t)(k % 2) * KV + (size_t)(ref_uniform(rng) * (double)KV);
    else *col = (size_t)(ref_uniform(rng) * (double)width);
}

static const vt_kind PREFIX = {"prefix", true, 77, 0.8, 12, prefix_width, pick_prefix_entry};

/* PEFT's reparameterization (prefix_projection): prefix = W2 tanh(W1 e + b1)
 * + b2; the gradients of e, W1, b1, W2 and b2 against central differences of
 * the float64 reference fed the MLP's output computed in double. */
typedef struct proj_ref {
    size_t N, K, H, W;
} proj_ref;

static void ref_project(const proj_ref *p, const double *v, double *prefix) {
    const double *e = v, *w1 = e + p->N * p->K, *b1 = w1 + p->H * p->K, *w2 = b1 + p->H, *b2 = w2 + p->W * p->H;
    double *h = malloc(sizeof(double) * p->H);
    for (size_t i = 0; i < p->N; i++) {
        for (size_t k = 0; k < p->H; k++) {
            double s = b1[k];
            for (size_t j = 0; j < p->K; j++) s += w1[k * p->K + j] * e[i * p->K + j];
            h[k] = tanh(s);
        }
        for (size_t r = 0; r < p->W; r++) {
            double s = b2[r];
            for (size_t k = 0; k < p->H; k++) s += w2[r * p->H + k] * h[k];
            prefix[i * p->W + r] = s;
        }
    }
    free(h);
}

static void projection_check(const char *rel, int32_t n_virtual, int32_t hidden, bool ckpt) {
    const char *path = shared_path(rel);
    REQUIRE(path, "%s missing", rel);
    enum { SEQ = 10 };
    train_env e = {0};
    wisp_config cfg = train_config(SEQ, 8, 3);
    cfg.n_ctx = SEQ + n_virtual + 1;
    cfg.train.micro_batch = 2;
    cfg.train.checkpointing = ckpt;
    cfg.train.virtual_tokens = n_virtual;
    cfg.train.prefix = true;
    cfg.train.prefix_projection = true;
    cfg.train.encoder_hidden_size = hidden;
    REQUIRE(train_open(&e, path, &cfg), "%s: cannot open", rel);
    const wisp_hparams *hp = wisp_ctx_hparams(e.ctx);
    wisp_train *tr = e.ctx->train;
    proj_ref p = {(size_t)n_virtual, (size_t)hp->n_kv_heads * hp->head_dim,
                  (size_t)(hidden ? hidden : hp->n_kv_heads * hp->head_dim), prefix_width(hp)};
    size_t n_v = p.N * p.K + p.H * p.K + p.H + p.W * p.H + p.W;
    CHECK(tr->n_virtual_params == n_v, "%s: %zu reparameterization parameters, want %zu", rel, tr->n_virtual_params, n_v);
    /* the initial prefix is the MLP's output of the initial parameters */
    double *v = malloc(sizeof(double) * n_v), *prefix = malloc(sizeof(double) * p.N * p.W);
    for (size_t i = 0; i < n_v; i++) v[i] = tr->virtual_params[i];
    ref_project(&p, v, prefix);
    const float *now = wisp_train_prompt(e.ctx, NULL);
    double worst = 0;
    for (size_t i = 0; i < p.N * p.W; i++)
        if (fabs(now[i] - prefix[i]) > worst) worst = fabs(now[i] - prefix[i]);
    CHECK(worst < 1e-5, "%s: the initial prefix differs from its MLP's output by %.3g", rel, worst);
    uint64_t rng = 11;
    for (size_t i = 0; i < n_v; i++) v[i] = tr->virtual_params[i] = (float)((2 * ref_uniform(&rng) - 1) * 0.6);
    wisp_error err = {0};
    CHECK(wisp_train_set_prompt(e.ctx, now, NULL, 0, &err) == WISP_ERR_UNSUPPORTED, "setting a reparameterized prefix: %s",
          err.message);

    int32_t tok[2 * (SEQ + 1)];
    random_tokens(tok, 2 * (SEQ + 1), hp->n_vocab, 8);
    double loss = 0;
    REQUIRE(!wisp_train_micro_step(e.ctx, tok, NULL, 2, &loss, NULL, &err), "micro-step: %s", err.message);
    ref_model r;
    REQUIRE(ref_model_load(&r, wisp_ctx_model(e.ctx)), "reference");
    r.n_ctx = wisp_ctx_config(e.ctx)->n_ctx;
    r.prefix = prefix;
    r.n_prefix = n_virtual;
    ref_project(&p, v, prefix);
    double ref = ref_batch_loss(&r, tok, NULL, 2, SEQ), loss_err = fabs(loss - ref) / fabs(ref);
    CHECK(loss_err < 1e-5, "%s projection: loss %.9g vs reference %.9g", rel, loss, ref);
    const float *g = tr->virtual_grad;
    double top = 0;
    for (size_t i = 0; i < n_v; i++)
        if (fabs(g[i]) > top) top = fabs(g[i]);
    CHECK(top > 0, "%s projection: zero gradient", rel);
    /* samples in each of e, W1, b1, W2, b2 */
    size_t start[5] = {0, p.N * p.K, p.N * p.K + p.H * p.K, p.N * p.K + p.H * p.K + p.H,
                       p.N * p.K + p.H * p.K + p.H + p.W * p.H};
    size_t len[5] = {p.N * p.K, p.H * p.K, p.H, p.W * p.H, p.W};
    double gworst = 0;
    for (int k = 0; k < 15; k++) {
        size_t idx = start[k % 5] + (size_t)(ref_uniform(&rng) * len[k % 5]);
        double saved = v[idx], h = 1e-4;
        v[idx] = saved + h;
        ref_project(&p, v, prefix);
        double up = ref_batch_loss(&r, tok, NULL, 2, SEQ);
        v[idx] = saved - h;
        ref_project(&p, v, prefix);
        double down = ref_batch_loss(&r, tok, NULL, 2, SEQ);
        v[idx] = saved;
        double fd = (up - down) / (2 * h), rel_err = fabs(g[idx] - fd) / top;
        if (rel_err > gworst) gworst = rel_err;
        CHECK(rel_err < 1e-4, "%s projection: d param %zu (part %d) = %.6g, finite difference %.6g (%.2e of max %.3g)", rel,
              idx, k % 5, g[idx], fd, rel_err, top);
    }
    ref_project(&p, v, prefix);
    printf("%-42s %-14s loss rel err %.1e, worst gradient err %.1e of tensor max\n", rel,
           ckpt ? "proj ckpt" : "projection", loss_err, gworst);
    /* a step moves the parameters and the prefix follows its MLP at once */
    wisp_train_step_info info;
    REQUIRE(!wisp_train_optimizer_step(e.ctx, &info, &err), "optimizer: %s", err.message);
    for (size_t i = 0; i < n_v; i++) v[i] = tr->virtual_params[i];
    ref_project(&p, v, prefix);
    worst = 0;
    for (size_t i = 0; i < p.N * p.W; i++)
        if (fabs(now[i] - prefix[i]) > worst) worst = fabs(now[i] - prefix[i]);
    CHECK(worst < 1e-5, "%s: after a step the prefix differs from its MLP's output by %.3g", rel, worst);
    CHECK(guard_intact(&e), "%s projection: training wrote past the planned arena", rel);
    free(v);
    free(prefix);
    ref_model_free(&r);
    train_close(&e);
}

/* Inference: the prefix put into the cache, then tokens (in two steps, so a
 * step starting past the prefix is covered), give the reference's logits. */
static void inference_check(const char *rel, int32_t kv_type, double tol) {
    const char *path = shared_path(rel);
    REQUIRE(path, "%s missing", rel);
    size_t size = 0;
    unsigned char *bytes = read_file(path, &size);
    wisp_gguf g;
    wisp_error err = {0};
    REQUIRE(bytes && !wisp_gguf_open(&g, bytes, size, &err), "open: %s", err.message);
    enum { N_PREFIX = 5, N_TOK = 9 };
    wisp_config cfg = wisp_config_default();
    cfg.n_ctx = N_PREFIX + N_TOK;
    cfg.n_batch = 6;
    cfg.kv_type = kv_type;
    cfg.logits_all = true;
    wisp_memory_plan plan;
    REQUIRE(!wisp_plan(&g, &cfg, &plan, &err), "plan: %s", err.message);
    unsigned char *arena = aligned_alloc(64, (plan.total + 63) / 64 * 64);
    wisp_ctx *ctx = NULL;
    REQUIRE(!wisp_init(&ctx, &g, &cfg, arena, plan.total, &err), "init: %s", err.message);
    const wisp_hparams *hp = wisp_ctx_hparams(ctx);
    size_t W = prefix_width(hp), n_p = N_PREFIX * W;
    float *rows = malloc(sizeof(float) * n_p);
    double *ref_rows = malloc(sizeof(double) * n_p);
    uint64_t rng = 5;
    for (size_t i = 0; i < n_p; i++) ref_rows[i] = rows[i] = (float)((2 * ref_uniform(&rng) - 1));
    int32_t tok[N_TOK];
    random_tokens(tok, N_TOK, hp->n_vocab, 3);
    REQUIRE(!wisp_eval_kv_prefix(ctx, rows, N_PREFIX, &err), "kv prefix: %s", err.message);
    CHECK(wisp_n_past(ctx) == N_PREFIX && !wisp_logits(ctx, -1), "the prefix takes %d positions and has no logits",
          N_PREFIX);
    ref_model r;
    REQUIRE(ref_model_load(&r, wisp_ctx_model(ctx)), "reference");
    r.n_ctx = cfg.n_ctx;
    r.prefix = ref_rows;
    r.n_prefix = N_PREFIX;
    double *want = malloc(sizeof(double) * N_TOK * (size_t)hp->n_vocab);
    ref_forward(&r, tok, N_TOK, want);
    double worst = 0;
    for (int32_t done = 0; done < N_TOK;) {
        int32_t n = N_TOK - done < 4 ? N_TOK - done : 4;
        REQUIRE(!wisp_eval(ctx, tok + done, n, &err), "eval: %s", err.message);
        for (int32_t t = 0; t < n; t++) {
            const float *z = wisp_logits(ctx, t);
            for (int32_t o = 0; o < hp->n_vocab; o++) {
                double d = fabs(z[o] - want[(size_t)(done + t) * hp->n_vocab + o]);
                if (d > worst) worst = d;
            }
        }
        done += n;
    }
    CHECK(worst < tol, "%s: logits after the prefix differ from the reference by %.3g", rel, worst);
    printf("%-42s inference (kv %s) worst logit err %.1e\n", rel, kv_type == WISP_TYPE_F16 ? "f16" : "f32", worst);
    /* a full context refuses, changing nothing */
    wisp_rewind(ctx, 0);
    CHECK(wisp_eval_kv_prefix(ctx, rows, cfg.n_ctx + 1, &err) == WISP_ERR_CAPACITY && wisp_n_past(ctx) == 0,
          "a prefix past n_ctx must be refused: %s", err.message);
    rows[3] = NAN;
    CHECK(wisp_eval_kv_prefix(ctx, rows, 1, &err) == WISP_ERR_NUMERIC && wisp_n_past(ctx) == 0, "NaN prefix: %s",
          err.message);
    free(want);
    free(rows);
    free(ref_rows);
    ref_model_free(&r);
    free(arena);
    free(bytes);
}

static void plan_exact_and_refusals(void) {
    wisp_gguf g;
    wisp_config cfg;
    unsigned char *bytes;
    vt_open_plan_model(&PREFIX, &g, &cfg, &bytes);
    if (!bytes) return;
    wisp_error err = {0};
    wisp_memory_plan plan, prompt_plan;
    REQUIRE(!wisp_plan(&g, &cfg, &plan, &err), "plan: %s", err.message);
    wisp_config prompt = cfg;
    prompt.train.prefix = false;
    REQUIRE(!wisp_plan(&g, &prompt, &prompt_plan, &err), "plan: %s", err.message);
    CHECK(plan.total != prompt_plan.total, "prefix tuning plans the same bytes as prompt tuning");
    unsigned char *arena = aligned_alloc(64, (plan.total + 63) / 64 * 64);
    wisp_ctx *ctx = NULL;
    CHECK(wisp_init(&ctx, &g, &cfg, arena, plan.total - 1, &err) == WISP_ERR_ARENA, "one byte less must fail");
    REQUIRE(!wisp_init(&ctx, &g, &cfg, arena, plan.total, &err), "the planned size must do: %s", err.message);
    int32_t tok[2 * 17];
    random_tokens(tok, 2 * 17, wisp_ctx_hparams(ctx)->n_vocab, 9);
    double loss = 0;
    CHECK(!wisp_train_micro_step(ctx, tok, NULL, 2, &loss, NULL, &err) && isfinite(loss), "train in the planned size: %s",
          err.message);
    const int32_t ids[2] = {1, 2};
    CHECK(wisp_train_set_prompt(ctx, NULL, ids, 2, &err) == WISP_ERR_UNSUPPORTED && strstr(err.message, "text init"),
          "a text init of a prefix must be refused: %s", err.message);
    free(arena);
    /* with the reparameterization too (its parameters, the MLP's output and hidden layer) */
    wisp_config proj = cfg;
    proj.train.prefix_projection = true;
    proj.train.encoder_hidden_size = 48;
    wisp_memory_plan pp;
    REQUIRE(!wisp_plan(&g, &proj, &pp, &err), "plan: %s", err.message);
    CHECK(pp.total > plan.total, "the reparameterization plans no more bytes (%zu vs %zu)", pp.total, plan.total);
    arena = aligned_alloc(64, (pp.total + 63) / 64 * 64);
    CHECK(wisp_init(&ctx, &g, &proj, arena, pp.total - 1, &err) == WISP_ERR_ARENA, "one byte less must fail (projection)");
    REQUIRE(!wisp_init(&ctx, &g, &proj, arena, pp.total, &err), "the planned size must do: %s", err.message);
    CHECK(!wisp_train_micro_step(ctx, tok, NULL, 2, &loss, NULL, &err) && isfinite(loss), "projection in its plan: %s",
          err.message);
    free(arena);
    proj = prompt;
    proj.train.prefix_projection = true;
    CHECK(wisp_plan(&g, &proj, &pp, &err) == WISP_ERR_ARG && strstr(err.message, "prefix_projection"),
          "prompt tuning with a projection: %s", err.message);

    wisp_config c2 = cfg;
    c2.train.dora = true;
    CHECK(wisp_plan(&g, &c2, &plan, &err) == WISP_ERR_ARG && strstr(err.message, "prefix tuning and DoRA"),
          "prefix + DoRA: %s", err.message);
    c2 = cfg;
    c2.train.objective = WISP_OBJECTIVE_DPO;
    CHECK(wisp_plan(&g, &c2, &plan, &err) == WISP_ERR_ARG && strstr(err.message, "DPO with prefix tuning"),
          "prefix + DPO: %s", err.message);
    c2 = cfg;
    c2.train.virtual_tokens = 0;
    CHECK(wisp_plan(&g, &c2, &plan, &err) == WISP_ERR_ARG && strstr(err.message, "virtual_tokens"), "no rows: %s",
          err.message);
    free(bytes);

    /* sliding-window layers would drop the prefix: refused in training and at inference */
    const char *gpath = shared_path("models/synthetic/syn-gemma2-f32.gguf");
    REQUIRE(gpath, "syn-gemma2 missing");
    size_t size = 0;
    bytes = read_file(gpath, &size);
    REQUIRE(bytes && !wisp_gguf_open(&g, bytes, size, &err), "open: %s", err.message);
    c2 = cfg;
    CHECK(wisp_plan(&g, &c2, &plan, &err) == WISP_ERR_UNSUPPORTED && strstr(err.message, "sliding-window"),
          "prefix tuning of gemma2: %s", err.message);
    wisp_config inf = wisp_config_default();
    inf.n_ctx = 8;
    REQUIRE(!wisp_plan(&g, &inf, &plan, &err), "plan: %s", err.message);
    arena = aligned_alloc(64, (plan.total + 63) / 64 * 64);
    REQUIRE(!wisp_init(&ctx, &g, &inf, arena, plan.total, &err), "init: %s", err.message);
    float row[4096] = {0};
    REQUIRE(prefix_width(wisp_ctx_hparams(ctx)) <= 4096, "gemma2 prefix row too wide for the test");
    CHECK(wisp_eval_kv_prefix(ctx, row, 1, &err) == WISP_ERR_UNSUPPORTED && strstr(err.message, "sliding-window"),
          "kv prefix on gemma2: %s", err.message);
    free(arena);
    free(bytes);
}

int main(void) {
    shared_path_or_skip("test_train_prefix", "models/stories260K.gguf");
    vt_variant all[5];
    vt_fd_check_variants(&PREFIX, (const int32_t[5]){4, 3, 1, 4, 3}, all);
    const vt_variant plain = all[0];
    /* qwen3: head norms (the prefix keys bypass them as they bypass RoPE) */
    vt_fd_check(&PREFIX, "models/synthetic/syn-qwen3-f16.gguf", &all[1], VT_MAX_SEQ - 4, 1e-5, 1e-4);
    vt_fd_check(&PREFIX, "models/synthetic/syn-llama-gqa-f32.gguf", &plain, 12, 1e-5, 1e-4);
    vt_fd_check(&PREFIX, "models/synthetic/syn-llama-gqa-q4_k.gguf", &plain, 12, 5e-2, 0.1);
    /* PEFT's reparameterization, the hidden width its default (token_dim) and not */
    projection_check("models/stories260K.gguf", 3, 0, false);
    projection_check("models/synthetic/syn-qwen2-f32.gguf", 2, 7, true);
    inference_check("models/stories260K.gguf", WISP_TYPE_F32, 1e-4);
    inference_check("models/synthetic/syn-llama-gqa-f32.gguf", WISP_TYPE_F32, 1e-4);
    inference_check("models/synthetic/syn-qwen3-f16.gguf", WISP_TYPE_F32, 1e-4);
    inference_check("models/synthetic/syn-llama-gqa-f32.gguf", WISP_TYPE_F16, 2e-2);
    plan_exact_and_refusals();
    return check_report("test_train_prefix");
}
