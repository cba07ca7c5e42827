/* Embeddings (wisp_embed_tokens over cfg.hidden_states):
 *   - mean and last pooling equal the same pooling of the float64 reference's final hidden
 *     states (tests/lib/ref_model.c, after output_norm) within rel RMS 1e-4;
 *   - the vector does not depend on how the text is cut into forward steps (batch 1, 7, 64);
 *   - normalized vectors have length 1 and point where the raw pooled vector points;
 *   - mean and last pooling differ; the context keeps no logits in this mode; a context
 *     without hidden_states embeds alike and is left empty, still computing logits after;
 *     an empty text and one longer than n_ctx are refused.
 * On stories260K and two synthetic models. */
#include <math.h>
#include <string.h>

#include "test_train_util.h"

#define N_TOK 40

static double norm_of(const float *v, int32_t n) {
    double s = 0;
    for (int32_t i = 0; i < n; i++) s += (double)v[i] * v[i];
    return sqrt(s);
}

/* The reference's pooled vector, normalized if asked. */
static void ref_pool(const double *hidden, int32_t n, int32_t dim, wisp_pooling pooling, bool normalize, double *out) {
    memset(out, 0, sizeof(double) * (size_t)dim);
    for (int32_t t = pooling == WISP_POOL_MEAN ? 0 : n - 1; t < n; t++)
        for (int32_t i = 0; i < dim; i++) out[i] += hidden[(size_t)t * dim + i];
    double ss = 0;
    for (int32_t i = 0; i < dim; i++) {
        if (pooling == WISP_POOL_MEAN) out[i] /= n;
        ss += out[i] * out[i];
    }
    for (int32_t i = 0; i < dim && normalize; i++) out[i] /= sqrt(ss);
}

static bool embed(train_env *env, const int32_t *tok, int32_t n, wisp_pooling pooling, bool normalize, float *out) {
    wisp_error err = {0};
    if (wisp_embed_tokens(env->ctx, tok, n, pooling, normalize, out, &err)) {
        fprintf(stderr, "embed: %s\n", err.message);
        return false;
    }
    return true;
}

static void check_model(const char *rel) {
    const char *path = shared_path(rel);
    REQUIRE(path, "%s is missing", rel);
    wisp_config cfg = wisp_config_default();
    cfg.n_ctx = 64;
    cfg.n_batch = 7; /* 40 tokens: five steps of 7 and one of 5 */
    cfg.kv_type = WISP_TYPE_F32;
    cfg.hidden_states = true;
    train_env env = {0};
    REQUIRE(train_open(&env, path, &cfg), "open %s", rel);
    const wisp_hparams *hp = wisp_ctx_hparams(env.ctx);
    const int32_t dim = hp->dim;
    int32_t tok[N_TOK];
    random_tokens(tok, N_TOK, hp->n_vocab < 512 ? hp->n_vocab : 512, 11);
    tok[0] = 1;

    ref_model r;
    REQUIRE(ref_model_load(&r, wisp_ctx_model(env.ctx)), "reference");
    r.n_ctx = cfg.n_ctx;
    double *hidden = malloc(sizeof(double) * N_TOK * (size_t)dim), *want = malloc(sizeof(double) * (size_t)dim);
    float *got = malloc(sizeof(float) * (size_t)dim), *raw = malloc(sizeof(float) * (size_t)dim);
    float *other = malloc(sizeof(float) * (size_t)dim);
    ref_hidden(&r, tok, N_TOK, hidden);

    const wisp_pooling poolings[2] = {WISP_POOL_MEAN, WISP_POOL_LAST};
    const char *names[2] = {"mean", "last"};
    for (int p = 0; p < 2; p++) {
        for (int normalize = 0; normalize < 2; normalize++) {
            REQUIRE(embed(&env, tok, N_TOK, poolings[p], normalize, got), "%s: embed", rel);
            ref_pool(hidden, N_TOK, dim, poolings[p], normalize, want);
            double e = rel_rms_ref(got, want, dim);
            CHECK(e < 1e-4, "%s: %s pooling%s: rel RMS %.2e against float64", rel, names[p],
                  normalize ? ", normalized" : "", e);
            printf("%s: %s%s: rel RMS %.1e vs float64\n", rel, names[p], normalize ? " normalized" : "", e);
        }
        /* normalization: length 1, same direction as the raw pooled vector */
        REQUIRE(embed(&env, tok, N_TOK, poolings[p], false, raw) && embed(&env, tok, N_TOK, poolings[p], true, got),
                "%s: embed", rel);
        double len = norm_of(got, dim), raw_len = norm_of(raw, dim), worst = 0;
        CHECK(fabs(len - 1.0) < 1e-5, "%s: %s: normalized length %.8f", rel, names[p], len);
        CHECK(fabs(raw_len - 1.0) > 1e-3, "%s: %s: the raw vector already has length 1 (%.6f)", rel, names[p], raw_len);
        for (int32_t i = 0; i < dim; i++) worst = fmax(worst, fabs(got[i] - raw[i] / raw_len));
        CHECK(worst < 1e-6, "%s: %s: normalized differs from raw/|raw| by %.2e", rel, names[p], worst);
    }
    REQUIRE(embed(&env, tok, N_TOK, WISP_POOL_MEAN, true, got) && embed(&env, tok, N_TOK, WISP_POOL_LAST, true, other),
            "%s: embed", rel);
    double diff = 0;
    for (int32_t i = 0; i < dim; i++) diff = fmax(diff, fabs(got[i] - other[i]));
    CHECK(diff > 1e-3, "%s: mean and last pooling give the same vector", rel);
    CHECK(wisp_logits(env.ctx, -1) == NULL, "%s: logits kept in hidden_states mode", rel);
    CHECK(wisp_hidden(env.ctx, -1) != NULL && wisp_hidden(env.ctx, 5) == NULL, "%s: wisp_hidden rows", rel);

    /* batch independence: the same vector whether the text takes 40 steps, 6 or 1 */
    const int32_t batches[2] = {1, 64};
    for (int b = 0; b < 2; b++) {
        train_env env2 = {0};
        cfg.n_batch = batches[b];
        REQUIRE(train_open(&env2, path, &cfg), "open %s (batch %d)", rel, batches[b]);
        for (int p = 0; p < 2; p++) {
            REQUIRE(embed(&env, tok, N_TOK, poolings[p], true, got) && embed(&env2, tok, N_TOK, poolings[p], true, other),
                    "%s: embed", rel);
            double worst = 0;
            for (int32_t i = 0; i < dim; i++) worst = fmax(worst, fabs(got[i] - other[i]));
            CHECK(worst < 1e-5, "%s: %s: batch 7 and batch %d differ by %.2e", rel, names[p], batches[b], worst);
            printf("%s: %s: batch 7 vs %d: max |diff| %.1e\n", rel, names[p], batches[b], worst);
        }
        train_close(&env2);
    }

    /* refusals */
    wisp_error err = {0};
    CHECK(wisp_embed_tokens(env.ctx, tok, 0, WISP_POOL_MEAN, true, got, &err) == WISP_ERR_ARG, "%s: empty text", rel);
    int32_t *long_text = calloc(65, sizeof(int32_t));
    REQUIRE(long_text, "alloc");
    CHECK(wisp_embed_tokens(env.ctx, long_text, 65, WISP_POOL_MEAN, true, got, &err) == WISP_ERR_CAPACITY,
          "%s: a text longer than n_ctx", rel);
    free(long_text);
    /* a context without hidden_states embeds too, gives the same vector, and is left empty */
    train_env plain = {0};
    cfg.hidden_states = false;
    cfg.n_batch = 7;
    REQUIRE(train_open(&plain, path, &cfg), "open %s (no hidden states)", rel);
    REQUIRE(embed(&env, tok, N_TOK, WISP_POOL_MEAN, true, got) && embed(&plain, tok, N_TOK, WISP_POOL_MEAN, true, other),
            "%s: embed", rel);
    CHECK(memcmp(got, other, sizeof(float) * (size_t)dim) == 0, "%s: a logits context embeds otherwise", rel);
    CHECK(wisp_n_past(plain.ctx) == 0 && wisp_logits(plain.ctx, -1) == NULL && wisp_hidden(plain.ctx, -1) == NULL,
          "%s: a logits context is not left empty after embedding", rel);
    CHECK(wisp_n_past(env.ctx) == N_TOK, "%s: a hidden_states context keeps the text", rel);
    /* and it still computes logits afterwards */
    CHECK(wisp_eval(plain.ctx, tok, 3, &err) == WISP_OK && wisp_logits(plain.ctx, -1) != NULL,
          "%s: no logits after embedding", rel);
    train_close(&plain);

    ref_model_free(&r);
    free(hidden), free(want), free(got), free(raw), free(other);
    train_close(&env);
}

int main(void) {
    check_model("models/stories260K.gguf");
    check_model("models/synthetic/syn-llama-gqa-f32.gguf");
    check_model("models/synthetic/syn-qwen3-f16.gguf");
    return check_report("test_embedding");
}
