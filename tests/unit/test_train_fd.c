/* Finite-difference checks of the whole backward pass, for every weight type.
 *
 * The engine's loss and its LoRA gradients are compared with central
 * differences of an independent float64 reference of the same model
 * (tests/lib/ref_model.c: textbook formulas, dequantized weights). Together
 * the models cover every backward operation: embedding gather, RMSNorm,
 * RoPE in both conventions (llama adjacent pairs, qwen2 halves) and YaRN-scaled, GQA
 * attention, q/k/v biases (qwen2), SwiGLU, tied (qwen2) and untied output,
 * cross-entropy with loss masks over several sequences, LoRA with dropout,
 * and the transposed products of every quantized type. Variants cover
 * checkpointing and BF16/F16 storage of saved activations, and DoRA (its
 * magnitude's gradient too, against differences taken with the row norms
 * held constant as PEFT detaches them).
 *
 * Quantized bases: the engine's forward quantizes activations to 8 bits in
 * their products (as llama.cpp does) while the reference is exact, so their
 * tolerances are the README's quantized ones. */
#include <math.h>
#include <stdio.h>

#include "gguf_extras.h"
#include "test_train_util.h"
#include "train.h"

#define SEQ 12     /* positions per sequence for llama/qwen2 */
#define MAX_SEQ 20 /* the windowed families get sequences longer than their window (16) */
#define RANK 3
#define N_SAMPLES 8

typedef struct variant {
    const char *name;
    int32_t act_type;
    bool checkpointing;
    float dropout;
    int32_t n_seq;
    bool masked;
    bool dora;
} variant;

static bool keep_of_engine(void *user, int32_t layer, int32_t proj, int32_t t, int32_t i) {
    return wisp_train_keep((const wisp_train *)user, 0, layer, proj, t, i);
}

/* e: the model's bytes read and opened (e.bytes, e.g); closed here. */
static void fd_check_env(train_env e, const char *rel, const variant *v, double tol_loss, double tol_grad, int32_t seq) {
    wisp_config cfg = train_config(seq, RANK, 3);
    cfg.train.micro_batch = v->n_seq;
    cfg.train.act_type = v->act_type;
    cfg.train.checkpointing = v->checkpointing;
    cfg.train.dropout = v->dropout;
    cfg.train.dora = v->dora;
    if (!train_open(&e, rel, &cfg)) {
        train_close(&e);
        REQUIRE(false, "%s: cannot open", rel);
    }
    const wisp_hparams *hp = wisp_ctx_hparams(e.ctx);
    const wisp_lora *lora = wisp_train_lora(e.ctx), *grads = wisp_train_gradients(e.ctx);
    ref_lora *refs = calloc((size_t)lora->n_pairs, sizeof *refs);
    REQUIRE(set_random_lora(e.ctx, 77, 0.15, refs), "random adapter");
    int32_t tok[4 * (MAX_SEQ + 1)];
    uint8_t mask[4 * (MAX_SEQ + 1)];
    random_tokens(tok, (size_t)v->n_seq * (seq + 1), hp->n_vocab, 5);
    for (int32_t i = 0; i < v->n_seq * (seq + 1); i++) mask[i] = (uint8_t)(i % 3 != 1);
    double loss = 0;
    int32_t n_scored = 0;
    wisp_error err = {0};
    REQUIRE(!wisp_train_micro_step(e.ctx, tok, v->masked ? mask : NULL, v->n_seq, &loss, &n_scored, &err),
            "micro-step: %s", err.message);

    ref_model r;
    REQUIRE(ref_model_load(&r, wisp_ctx_model(e.ctx)), "reference");
    r.lora = refs;
    r.n_ctx = wisp_ctx_config(e.ctx)->n_ctx;
    r.n_lora = lora->n_pairs;
    if (v->dropout > 0) {
        r.keep = keep_of_engine;
        r.keep_user = e.ctx->train;
        r.keep_scale = (double)(1.0f / (1.0f - v->dropout)); /* the engine's float factor */
    }
    const uint8_t *m = v->masked ? mask : NULL;
    double ref = ref_batch_loss(&r, tok, m, v->n_seq, seq);
    double loss_err = fabs(loss - ref) / fabs(ref);
    CHECK(loss_err < tol_loss, "%s %s: loss %.9g vs reference %.9g (relative %.2e)", rel, v->name, loss, ref, loss_err);

    /* DoRA: the engine's gradients hold the row norms constant (PEFT detaches
     * them), so the differences are taken with the norms frozen at this point */
    double **norms = calloc((size_t)lora->n_pairs, sizeof *norms);
    for (int32_t i = 0; v->dora && i < lora->n_pairs; i++) {
        norms[i] = malloc(sizeof(double) * (size_t)refs[i].n_out);
        ref_dora_norms(&r, &refs[i], norms[i]);
        refs[i].norm = norms[i];
    }
    float inv_scale = 1.0f / wisp_train_loss_scale(e.ctx);
    double worst = 0;
    uint64_t rng = 99;
    for (int k = 0; k < (v->dora ? 12 : N_SAMPLES); k++) {
        int32_t pi = (int32_t)(ref_uniform(&rng) * lora->n_pairs);
        int which = k % (v->dora ? 3 : 2); /* A, B, DoRA's magnitude */
        bool is_b = which == 1;
        const wisp_lora_pair *g = &grads->pairs[pi];
        size_t n = which == 2 ? (size_t)g->n_out : (size_t)g->rank * (size_t)(is_b ? g->n_out : g->n_in);
        size_t idx = (size_t)(ref_uniform(&rng) * (double)n);
        double *val = which == 2 ? &refs[pi].m[idx] : is_b ? &refs[pi].b[idx] : &refs[pi].a[idx];
        double saved = *val, h = 1e-4;
        *val = saved + h;
        double up = ref_batch_loss(&r, tok, m, v->n_seq, seq);
        *val = saved - h;
        double down = ref_batch_loss(&r, tok, m, v->n_seq, seq);
        *val = saved;
        double fd = (up - down) / (2 * h);
        const float *gt = which == 2 ? g->magnitude : is_b ? g->b : g->a;
        double got = gt[idx] * inv_scale, top = max_abs(gt, n) * inv_scale;
        double rel_err = fabs(got - fd) / (top > 0 ? top : 1);
        if (rel_err > worst) worst = rel_err;
        CHECK(rel_err < tol_grad, "%s %s: blk.%d.%s d%s[%zu] = %.6g, finite difference %.6g (%.2e of the tensor's max %.3g)",
              rel, v->name, g->layer, wisp_proj_gguf_name(g->proj), which == 2 ? "m" : is_b ? "B" : "A", idx, got, fd,
              rel_err, top);
    }
    printf("%-42s %-14s loss rel err %.1e, worst gradient err %.1e of tensor max\n", rel, v->name, loss_err, worst);
    CHECK(guard_intact(&e), "%s %s: training wrote past the planned arena", rel, v->name);
    for (int32_t i = 0; i < lora->n_pairs; i++) {
        ref_lora_free(&refs[i]);
        free(norms[i]);
    }
    free(norms);
    free(refs);
    ref_model_free(&r);
    train_close(&e);
}

static void fd_check_seq(const char *rel, const variant *v, double tol_loss, double tol_grad, int32_t seq) {
    const char *path = shared_path(rel);
    REQUIRE(path, "%s is missing", rel);
    train_env e = {0};
    wisp_error err = {0};
    e.bytes = read_file(path, &e.size);
    REQUIRE(e.bytes && !wisp_gguf_open(&e.g, e.bytes, e.size, &err), "%s: %s", rel, err.message);
    fd_check_env(e, rel, v, tol_loss, tol_grad, seq);
}

/* YaRN rope scaling (rope.scaling.type yarn, factor 4, an original context
 * of 256, attn_factor 0.9) on a small generated llama: the rotation table
 * training shares with inference */
static void fd_check_yarn(const variant *v) {
    train_env e = {0};
    wisp_error err = {0};
    e.bytes = gguf_yarn_model("llama", false, false, 0.9f, &e.size, &err);
    REQUIRE(e.bytes && !wisp_gguf_open(&e.g, e.bytes, e.size, &err), "yarn model: %s", err.message);
    fd_check_env(e, "generated llama, YaRN x4", v, 1e-5, 1e-3, MAX_SEQ);
}

static void fd_check(const char *rel, const variant *v, double tol_loss, double tol_grad) {
    fd_check_seq(rel, v, tol_loss, tol_grad, SEQ);
}

int main(void) {
    shared_path_or_skip("test_train_fd", "models/stories260K.gguf");
    const variant plain = {"f32", WISP_TYPE_F32, false, 0, 1, false, false};
    const variant all[] = {
        plain,
        {"f32 ckpt", WISP_TYPE_F32, true, 0, 1, false, false},
        {"2 seq masked", WISP_TYPE_F32, false, 0, 2, true, false},
        {"dropout 0.3", WISP_TYPE_F32, false, 0.3f, 1, false, false},
        {"dropout ckpt", WISP_TYPE_F32, true, 0.3f, 1, false, false},
        {"bf16", WISP_TYPE_BF16, false, 0, 1, false, false},
        {"f16 ckpt", WISP_TYPE_F16, true, 0, 2, true, false},
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        bool reduced = all[i].act_type != WISP_TYPE_F32;
        fd_check("models/stories260K.gguf", &all[i], 1e-5, reduced ? 5e-2 : 1e-3);
        fd_check("models/synthetic/syn-qwen2-f32.gguf", &all[i], 1e-5, reduced ? 5e-2 : 1e-3);
    }
    static const char *types[] = {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1",
                                  "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q4_k_m"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char rel[96];
        snprintf(rel, sizeof rel, "models/synthetic/syn-llama-gqa-%s.gguf", types[i]);
        bool quant = types[i][0] == 'q';
        fd_check(rel, &plain, quant ? 5e-2 : 1e-5, quant ? 0.1 : 1e-3);
    }
    fd_check("models/synthetic/syn-qwen2-q8_0.gguf", &plain, 5e-2, 0.1);
    fd_check("models/synthetic/syn-qwen2-q4_k_m.gguf", &all[1], 5e-2, 0.1);
    /* the families of the architecture table, each op's backward: Llama 3 RoPE
     * factors; qwen3 per-head q/k norms; gemma2 embedding scale, GELU-tanh,
     * post-norms, attention and final soft-caps, windowed attention (window
     * 16 < 20 positions); gemma3 q/k norms, local RoPE base, window pattern;
     * phi3 fused q/k/v and gate/up, LongRoPE factors and magnitude */
    static const char *families[] = {"syn-llama3-rope-f32", "syn-qwen3-f16", "syn-gemma2-f32", "syn-gemma3-f16",
                                     "syn-phi3-longrope-f32"};
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        char rel[96];
        snprintf(rel, sizeof rel, "models/synthetic/%s.gguf", families[i]);
        fd_check_seq(rel, &all[0], 1e-5, 1e-3, MAX_SEQ);
        fd_check_seq(rel, &all[4], 1e-5, 1e-3, MAX_SEQ); /* dropout, checkpointing */
    }
    fd_check_yarn(&all[0]);
    fd_check_yarn(&all[4]); /* dropout, checkpointing */
    /* DoRA (magnitude per output row, detached row norms): plain, with q/k/v
     * biases (qwen2), checkpointing, masked batches, reduced storage,
     * quantized bases and gemma2's post-norms */
    const variant dora[] = {
        {"dora", WISP_TYPE_F32, false, 0, 1, false, true},
        {"dora ckpt", WISP_TYPE_F32, true, 0, 2, true, true},
        {"dora bf16", WISP_TYPE_BF16, false, 0, 1, false, true},
    };
    for (size_t i = 0; i < sizeof dora / sizeof dora[0]; i++) {
        bool reduced = dora[i].act_type != WISP_TYPE_F32;
        fd_check("models/stories260K.gguf", &dora[i], 1e-5, reduced ? 5e-2 : 1e-4);
        fd_check("models/synthetic/syn-qwen2-f32.gguf", &dora[i], 1e-5, reduced ? 5e-2 : 1e-4);
    }
    fd_check("models/synthetic/syn-llama-gqa-q4_k.gguf", &dora[0], 5e-2, 0.1);
    fd_check("models/synthetic/syn-llama-gqa-q8_0.gguf", &dora[1], 5e-2, 0.1);
    fd_check_seq("models/synthetic/syn-gemma2-f32.gguf", &dora[0], 1e-5, 1e-4, MAX_SEQ);
    fd_check_seq("models/synthetic/syn-qwen3-f16.gguf", &dora[1], 1e-5, 1e-4, MAX_SEQ);
    return check_report("test_train_fd");
}
