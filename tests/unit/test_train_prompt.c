/* Prompt tuning (PEFT PROMPT_TUNING): the learned virtual-token embeddings.
 *
 * The engine's loss and the prompt's gradient (the sum over sequences of the
 * gradient reaching the input embeddings at the virtual positions) are
 * compared with central differences of the float64 reference
 * (tests/lib/ref_model.c with its prompt rows) across families (gemma2's
 * embedding scale, qwen2 biases, windowed attention), checkpointing, reduced
 * storage, masked batches and a quantized base. Also: the TEXT init is the
 * embedding rows of the text's tokens repeated and truncated (PEFT's), the
 * plan is exact (one byte less fails by name), an optimizer step moves only
 * the prompt, and combinations prompt tuning does not implement are refused. */
#include <math.h>
#include <stdio.h>

#include "test_train_util.h"
#include "train.h"

#define MAX_SEQ 20
#define N_SAMPLES 10

typedef struct variant {
    const char *name;
    int32_t act_type;
    bool checkpointing;
    int32_t n_seq;
    bool masked;
    int32_t n_virtual;
} variant;

static void fd_check(const char *rel, const variant *v, int32_t seq, double tol_loss, double tol_grad) {
    const char *path = shared_path(rel);
    REQUIRE(path, "%s missing under WISP_SHARED", rel);
    train_env e = {0};
    wisp_config cfg = train_config(seq, 8, 3);
    cfg.n_ctx = seq + v->n_virtual + 1;
    cfg.train.micro_batch = v->n_seq;
    cfg.train.act_type = v->act_type;
    cfg.train.checkpointing = v->checkpointing;
    cfg.train.virtual_tokens = v->n_virtual;
    REQUIRE(train_open(&e, path, &cfg), "%s: cannot open", rel);
    const wisp_hparams *hp = wisp_ctx_hparams(e.ctx);
    int32_t n_virtual = 0, D = hp->dim;
    REQUIRE(wisp_train_prompt(e.ctx, &n_virtual) && n_virtual == v->n_virtual, "%s: no prompt of %d rows", rel,
            v->n_virtual);
    CHECK(wisp_train_lora(e.ctx)->n_pairs == 0, "%s: prompt tuning must train no LoRA pair", rel);
    size_t n_p = (size_t)n_virtual * (size_t)D;
    float *rows = malloc(sizeof(float) * n_p);
    double *ref_rows = malloc(sizeof(double) * n_p);
    uint64_t rng = 31;
    for (size_t i = 0; i < n_p; i++) ref_rows[i] = rows[i] = (float)((2 * ref_uniform(&rng) - 1) * 0.5);
    wisp_error err = {0};
    REQUIRE(!wisp_train_set_prompt(e.ctx, rows, NULL, 0, &err), "set_prompt: %s", err.message);

    int32_t tok[4 * (MAX_SEQ + 1)];
    uint8_t mask[4 * (MAX_SEQ + 1)];
    random_tokens(tok, (size_t)v->n_seq * (seq + 1), hp->n_vocab, 5);
    for (int32_t i = 0; i < v->n_seq * (seq + 1); i++) mask[i] = (uint8_t)(i % 3 != 1);
    const uint8_t *m = v->masked ? mask : NULL;
    double loss = 0;
    int32_t n_scored = 0;
    REQUIRE(!wisp_train_micro_step(e.ctx, tok, m, v->n_seq, &loss, &n_scored, &err), "micro-step: %s", err.message);

    ref_model r;
    REQUIRE(ref_model_load(&r, wisp_ctx_model(e.ctx)), "reference");
    r.n_ctx = wisp_ctx_config(e.ctx)->n_ctx;
    r.prompt = ref_rows;
    r.n_prompt = n_virtual;
    double ref = ref_batch_loss(&r, tok, m, v->n_seq, seq);
    double loss_err = fabs(loss - ref) / fabs(ref);
    CHECK(loss_err < tol_loss, "%s %s: loss %.9g vs reference %.9g (relative %.2e)", rel, v->name, loss, ref, loss_err);

    /* a prompt changes the loss: without it the reference differs */
    r.n_prompt = 0;
    double bare = ref_batch_loss(&r, tok, m, v->n_seq, seq);
    r.n_prompt = n_virtual;
    CHECK(fabs(bare - ref) > 1e-6, "%s %s: the prompt does not change the loss (%.9g)", rel, v->name, bare);

    const float *grad = wisp_train_prompt_gradient(e.ctx);
    float inv_scale = 1.0f / wisp_train_loss_scale(e.ctx);
    double top = 0, worst = 0;
    for (size_t i = 0; i < n_p; i++)
        if (fabs(grad[i] * inv_scale) > top) top = fabs(grad[i] * inv_scale);
    CHECK(top > 0, "%s %s: the prompt's gradient is zero", rel, v->name);
    for (int k = 0; k < N_SAMPLES; k++) {
        /* rows first and last, the rest anywhere */
        size_t row = k == 0 ? 0 : k == 1 ? (size_t)n_virtual - 1 : (size_t)(ref_uniform(&rng) * n_virtual);
        size_t idx = row * (size_t)D + (size_t)(ref_uniform(&rng) * D);
        double saved = ref_rows[idx], h = 1e-4;
        ref_rows[idx] = saved + h;
        double up = ref_batch_loss(&r, tok, m, v->n_seq, seq);
        ref_rows[idx] = saved - h;
        double down = ref_batch_loss(&r, tok, m, v->n_seq, seq);
        ref_rows[idx] = saved;
        double fd = (up - down) / (2 * h), got = grad[idx] * inv_scale, rel_err = fabs(got - fd) / top;
        if (rel_err > worst) worst = rel_err;
        CHECK(rel_err < tol_grad, "%s %s: d prompt[%zu][%zu] = %.6g, finite difference %.6g (%.2e of the max %.3g)", rel,
              v->name, row, idx % (size_t)D, got, fd, rel_err, top);
    }
    printf("%-42s %-14s loss rel err %.1e, worst gradient err %.1e of tensor max\n", rel, v->name, loss_err, worst);

    /* one optimizer step moves the prompt and nothing else can move */
    wisp_train_step_info info;
    REQUIRE(!wisp_train_optimizer_step(e.ctx, &info, &err), "optimizer: %s", err.message);
    const float *now = wisp_train_prompt(e.ctx, NULL);
    size_t moved = 0;
    for (size_t i = 0; i < n_p; i++) moved += now[i] != rows[i];
    CHECK(moved > n_p / 2, "%s %s: the optimizer moved %zu of %zu prompt values", rel, v->name, moved, n_p);
    CHECK(guard_intact(&e), "%s %s: training wrote past the planned arena", rel, v->name);
    free(rows);
    free(ref_rows);
    ref_model_free(&r);
    train_close(&e);
}

/* PEFT's TEXT init: rows of the text's token ids, repeated and truncated. */
static void text_init(void) {
    const char *path = shared_path("models/stories260K.gguf");
    REQUIRE(path, "stories260K missing");
    train_env e = {0};
    wisp_config cfg = train_config(8, 8, 1);
    cfg.n_ctx = 8 + 7 + 1;
    cfg.train.virtual_tokens = 7;
    REQUIRE(train_open(&e, path, &cfg), "open");
    const int32_t ids[3] = {1, 50, 300};
    wisp_error err = {0};
    REQUIRE(!wisp_train_set_prompt(e.ctx, NULL, ids, 3, &err), "text init: %s", err.message);
    ref_model r;
    REQUIRE(ref_model_load(&r, wisp_ctx_model(e.ctx)), "reference");
    const float *p = wisp_train_prompt(e.ctx, NULL);
    int32_t D = r.hp.dim;
    double worst = 0;
    for (int32_t i = 0; i < 7; i++)
        for (int32_t k = 0; k < D; k++) {
            double d = fabs(p[(size_t)i * D + k] - r.embd[(size_t)ids[i % 3] * D + k]);
            if (d > worst) worst = d;
        }
    CHECK(worst < 1e-6, "text init differs from the embedding rows by %.3g", worst);
    const int32_t bad_id[1] = {1 << 30};
    CHECK(wisp_train_set_prompt(e.ctx, NULL, bad_id, 1, &err) == WISP_ERR_ARG && strstr(err.message, "vocabulary"),
          "an id outside the vocabulary must be refused: %s", err.message);
    /* the random init is N(0, 1): mean near 0, variance near 1 */
    train_env e2 = {0};
    REQUIRE(train_open(&e2, path, &cfg), "open");
    const float *q = wisp_train_prompt(e2.ctx, NULL);
    double sum = 0, sq = 0;
    size_t n = (size_t)7 * D;
    for (size_t i = 0; i < n; i++) sum += q[i], sq += (double)q[i] * q[i];
    double mean = sum / n, var = sq / n - mean * mean;
    CHECK(fabs(mean) < 0.15 && fabs(var - 1) < 0.2, "random init: mean %.3f, variance %.3f (want N(0, 1))", mean, var);
    ref_model_free(&r);
    train_close(&e);
    train_close(&e2);
}

static void plan_exact_and_refusals(void) {
    const char *path = shared_path("models/stories260K.gguf");
    REQUIRE(path, "stories260K missing");
    size_t size = 0;
    unsigned char *bytes = read_file(path, &size);
    wisp_gguf g;
    wisp_error err = {0};
    REQUIRE(bytes && !wisp_gguf_open(&g, bytes, size, &err), "open: %s", err.message);
    wisp_config cfg = train_config(16, 8, 1);
    cfg.n_ctx = 16 + 20 + 1;
    cfg.train.virtual_tokens = 20;
    cfg.train.micro_batch = 2;
    wisp_memory_plan plan, lora_plan;
    REQUIRE(!wisp_plan(&g, &cfg, &plan, &err), "plan: %s", err.message);
    wisp_config lora = cfg;
    lora.train.virtual_tokens = 0;
    REQUIRE(!wisp_plan(&g, &lora, &lora_plan, &err), "plan: %s", err.message);
    CHECK(plan.total != lora_plan.total, "prompt tuning plans the same bytes as LoRA");
    unsigned char *arena = aligned_alloc(64, (plan.total + 63) / 64 * 64);
    wisp_ctx *ctx = NULL;
    CHECK(wisp_init(&ctx, &g, &cfg, arena, plan.total - 1, &err) == WISP_ERR_ARENA, "one byte less must fail");
    REQUIRE(!wisp_init(&ctx, &g, &cfg, arena, plan.total, &err), "the planned size must do: %s", err.message);
    int32_t tok[2 * 17];
    random_tokens(tok, 2 * 17, wisp_ctx_hparams(ctx)->n_vocab, 9);
    double loss = 0;
    CHECK(!wisp_train_micro_step(ctx, tok, NULL, 2, &loss, NULL, &err) && isfinite(loss), "train in the planned size: %s",
          err.message);
    free(arena);

    wisp_config c2 = cfg;
    c2.train.dora = true;
    CHECK(wisp_plan(&g, &c2, &plan, &err) == WISP_ERR_ARG && strstr(err.message, "DoRA"), "prompt + DoRA: %s", err.message);
    c2 = cfg;
    c2.train.objective = WISP_OBJECTIVE_DPO;
    CHECK(wisp_plan(&g, &c2, &plan, &err) == WISP_ERR_ARG && strstr(err.message, "DPO"), "prompt + DPO: %s", err.message);
    c2 = cfg;
    c2.train.dropout = 0.1f;
    CHECK(wisp_plan(&g, &c2, &plan, &err) == WISP_ERR_ARG && strstr(err.message, "dropout"), "prompt + dropout: %s",
          err.message);
    c2 = cfg;
    c2.train.virtual_tokens = -1;
    CHECK(wisp_plan(&g, &c2, &plan, &err) == WISP_ERR_ARG && strstr(err.message, "virtual_tokens"), "negative: %s",
          err.message);
    free(bytes);
}

int main(void) {
    shared_path_or_skip("test_train_prompt", "models/stories260K.gguf");
    const variant plain = {"prompt", WISP_TYPE_F32, false, 1, false, 5};
    const variant all[] = {
        plain,
        {"prompt ckpt", WISP_TYPE_F32, true, 2, true, 4},
        {"prompt 1 row", WISP_TYPE_F32, false, 2, false, 1},
        {"prompt bf16", WISP_TYPE_BF16, false, 1, false, 5},
        {"prompt f16", WISP_TYPE_F16, true, 2, true, 3},
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        bool reduced = all[i].act_type != WISP_TYPE_F32;
        fd_check("models/stories260K.gguf", &all[i], 12, 1e-5, reduced ? 5e-2 : 1e-4);
        fd_check("models/synthetic/syn-qwen2-f32.gguf", &all[i], 12, 1e-5, reduced ? 5e-2 : 1e-4);
    }
    /* gemma2: the embedding scale (the prompt is scaled as a token is), windowed attention, soft-caps */
    fd_check("models/synthetic/syn-gemma2-f32.gguf", &plain, MAX_SEQ - 5, 1e-5, 1e-4);
    fd_check("models/synthetic/syn-qwen3-f16.gguf", &all[1], MAX_SEQ - 4, 1e-5, 1e-4);
    fd_check("models/synthetic/syn-llama-gqa-q4_k.gguf", &plain, 12, 5e-2, 0.1);
    text_init();
    plan_exact_and_refusals();
    return check_report("test_train_prompt");
}
