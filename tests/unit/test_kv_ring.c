/* Sliding-window layers keep their keys and values in a ring of
 * window - 1 + batch positions (in whole attention blocks):
 *   - logits over 150 positions (the ring of 64 wraps twice) agree with the
 *     float64 reference (tests/lib/ref_model.c) and with a context whose
 *     layers all keep the full history (a batch large enough that no ring is
 *     planned), bit for bit;
 *   - rewinding to a position whose window the ring still holds keeps the
 *     cache, and continuing from there gives the bytes of an uninterrupted
 *     run; rewinding further back forgets the whole cache (wisp_n_past 0)
 *     instead of attending to overwritten keys.
 * On syn-gemma3-f16 (window 16, layers 0-4 local) and syn-gemma2-f32 (even
 * layers local, soft-caps). */
#include <math.h>
#include <string.h>

#include "test_train_util.h"

#define N_TOK 150

static void logits_of(wisp_ctx *ctx, const int32_t *tok, int32_t n, int32_t step, float *out, int32_t V) {
    wisp_error err = {0};
    for (int32_t i = 0; i < n; i += step) {
        int32_t k = n - i < step ? n - i : step;
        if (wisp_eval(ctx, tok + i, k, &err)) {
            fprintf(stderr, "eval: %s\n", err.message);
            return;
        }
        for (int32_t j = 0; j < k; j++) memcpy(out + (size_t)(i + j) * V, wisp_logits(ctx, j), sizeof(float) * (size_t)V);
    }
}

static void check_model(const char *rel) {
    const char *path = shared_path(rel);
    REQUIRE(path, "%s is missing", rel);
    int32_t tok[N_TOK];
    random_tokens(tok, N_TOK, 512, 3);
    tok[0] = 1;

    /* a ring: ctx 256, batch 4 -> window 16 - 1 + 4 in one block of 64 */
    train_env ring = {0};
    wisp_config cfg = wisp_config_default();
    cfg.n_ctx = 256;
    cfg.n_batch = 4;
    cfg.logits_all = true;
    cfg.kv_type = WISP_TYPE_F32;
    REQUIRE(train_open(&ring, path, &cfg), "open %s", rel);
    const wisp_hparams *hp = wisp_ctx_hparams(ring.ctx);
    REQUIRE(hp->window == 16, "%s: window %d", rel, hp->window);
    int32_t windowed = -1;
    for (int32_t l = 0; l < hp->n_layers && windowed < 0; l++)
        if (wisp_layer_windowed(hp, l)) windowed = l;
    REQUIRE(windowed >= 0 && wisp_layer_kv_positions(hp, windowed, 256, 4) == 64, "%s: no ring of 64 planned", rel);
    int32_t V = hp->n_vocab;
    float *a = malloc(sizeof(float) * N_TOK * (size_t)V), *b = malloc(sizeof(float) * N_TOK * (size_t)V);
    logits_of(ring.ctx, tok, N_TOK, 4, a, V);

    /* no ring: batch 256 makes the ring as long as the context */
    train_env full = {0};
    cfg.n_batch = 256;
    REQUIRE(train_open(&full, path, &cfg), "open %s (no ring)", rel);
    REQUIRE(wisp_layer_kv_positions(hp, windowed, 256, 256) == 256, "%s: a ring planned at batch 256", rel);
    logits_of(full.ctx, tok, N_TOK, 4, b, V);
    CHECK(memcmp(a, b, sizeof(float) * N_TOK * (size_t)V) == 0, "%s: ring and full caches give other logits", rel);

    /* the float64 reference, all positions */
    ref_model r;
    REQUIRE(ref_model_load(&r, wisp_ctx_model(full.ctx)), "reference");
    r.n_ctx = 256;
    double *ref = malloc(sizeof(double) * N_TOK * (size_t)V), num = 0, den = 0;
    ref_forward(&r, tok, N_TOK, ref);
    for (size_t i = 0; i < (size_t)N_TOK * (size_t)V; i++) {
        num += (a[i] - ref[i]) * (a[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    double rel_rms = sqrt(num / den);
    CHECK(rel_rms < 1e-4, "%s: rel RMS %.2e against the float64 reference over %d positions", rel, rel_rms, N_TOK);
    printf("%s: ring of 64 over %d positions: rel RMS %.1e vs float64, identical to a full cache\n", rel, N_TOK, rel_rms);

    /* rewind within what the ring holds: positions [150 - 64, 150) remain; 140 needs 125.. */
    wisp_rewind(ring.ctx, 140);
    CHECK(wisp_n_past(ring.ctx) == 140, "%s: rewind to 140 kept %d", rel, wisp_n_past(ring.ctx));
    logits_of(ring.ctx, tok + 140, 10, 4, b, V);
    CHECK(memcmp(a + (size_t)140 * V, b, sizeof(float) * 10 * (size_t)V) == 0, "%s: continuing after a rewind differs",
          rel);
    /* rewind past it: position 60 needs keys from 45, long overwritten */
    wisp_rewind(ring.ctx, 60);
    CHECK(wisp_n_past(ring.ctx) == 0, "%s: rewind to 60 kept %d positions whose keys the ring lost", rel,
          wisp_n_past(ring.ctx));
    CHECK(guard_intact(&ring) && guard_intact(&full), "%s: wrote past the planned arena", rel);
    free(ref);
    ref_model_free(&r);
    free(a);
    free(b);
    train_close(&ring);
    train_close(&full);
}

int main(void) {
    check_model("models/synthetic/syn-gemma3-f16.gguf");
    check_model("models/synthetic/syn-gemma2-f32.gguf");
    return check_report("test_kv_ring");
}
