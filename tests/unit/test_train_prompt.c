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
#include "virtual_tokens_check.h"

static size_t prompt_width(const wisp_hparams *hp) { return (size_t)hp->dim; }

/* rows first and last, the rest anywhere */
static void pick_prompt_entry(const wisp_hparams *hp, size_t width, int32_t n_virtual, int k, uint64_t *rng, size_t *row,
                              size_t *col) {
    (void)hp;
    *row = k == 0 ? 0 : k == 1 ? (size_t)n_virtual - 1 : (size_t)(ref_uniform(rng) * n_virtual);
    *col = (size_t)(ref_uniform(rng) * (double)width);
}

static const vt_kind PROMPT = {"prompt", false, 31, 0.5, 10, prompt_width, pick_prompt_entry};

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
    wisp_gguf g;
    wisp_config cfg;
    unsigned char *bytes;
    vt_open_plan_model(&PROMPT, &g, &cfg, &bytes);
    if (!bytes) return;
    wisp_error err = {0};
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
    vt_variant all[5];
    vt_fd_check_variants(&PROMPT, (const int32_t[5]){5, 4, 1, 5, 3}, all);
    const vt_variant plain = all[0];
    /* gemma2: the embedding scale (the prompt is scaled as a token is), windowed attention, soft-caps */
    vt_fd_check(&PROMPT, "models/synthetic/syn-gemma2-f32.gguf", &plain, VT_MAX_SEQ - 5, 1e-5, 1e-4);
    vt_fd_check(&PROMPT, "models/synthetic/syn-qwen3-f16.gguf", &all[1], VT_MAX_SEQ - 4, 1e-5, 1e-4);
    vt_fd_check(&PROMPT, "models/synthetic/syn-llama-gqa-q4_k.gguf", &plain, 12, 5e-2, 0.1);
    text_init();
    plan_exact_and_refusals();
    return check_report("test_train_prompt");
}
