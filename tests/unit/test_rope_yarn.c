/* YaRN rope scaling (rope.scaling.type yarn, as llama.cpp runs it): the
 * engine's logits for small random models carrying the YaRN keys agree with
 * the float64 reference (tests/lib/ref_model.c, which implements the per-pair
 * ramp and magnitude from the formulas), at every kernel level this build
 * offers, over 64 positions fed in uneven batches (so each batch's table
 * starts at another position). Variants: llama (adjacent pairs) with an
 * attn_factor, qwen2 (NEOX pairs, q/k/v biases), and llama with Llama 3
 * rope_freqs factors under YaRN. The comparison would notice YaRN done as
 * plain linear scaling, or not at all: the reference's logits for those
 * differ from YaRN's by far more than the tolerance, which is checked too. */
#include <math.h>
#include <string.h>

#include "gguf_extras.h"
#include "rope.h"
#include "simd.h"
#include "test_train_util.h"

#define N_TOK 64
#define N_CTX 128
#define TOL 1e-5 /* relative RMS; the F32 bar is 2e-3 */

typedef struct variant {
    const char *name;
    const char *arch;
    bool qkv_bias, rope_freqs;
    float attn_factor; /* 0: no key */
} variant;

/* The engine's logits for tok at one kernel level, in batches of 1, 7, 13, 16, 3, 1, ... */
static bool engine_logits(train_env *e, const wisp_kernels *k, const int32_t *tok, float *out, int32_t V) {
    wisp_config cfg = wisp_config_default();
    cfg.n_ctx = N_CTX;
    cfg.n_batch = 16;
    cfg.logits_all = true;
    cfg.kv_type = WISP_TYPE_F32;
    cfg.kernels = k;
    if (!train_open(e, "(in memory)", &cfg)) return false;
    wisp_error err = {0};
    static const int32_t steps[] = {1, 7, 13, 16, 3};
    for (int32_t i = 0, b = 0, n; i < N_TOK; i += n, b++) {
        n = N_TOK - i < steps[b % 5] ? N_TOK - i : steps[b % 5];
        if (wisp_eval(e->ctx, tok + i, n, &err)) {
            fprintf(stderr, "eval: %s\n", err.message);
            return false;
        }
        for (int32_t j = 0; j < n; j++) memcpy(out + (size_t)(i + j) * V, wisp_logits(e->ctx, j), sizeof(float) * (size_t)V);
    }
    return guard_intact(e);
}

static void check_variant(const variant *v) {
    wisp_error err = {0};
    size_t n;
    unsigned char *bytes = gguf_yarn_model(v->arch, v->qkv_bias, v->rope_freqs, v->attn_factor, &n, &err);
    REQUIRE(bytes, "%s: %s", v->name, err.message);

    int32_t tok[N_TOK];
    random_tokens(tok, N_TOK, 264, 11);
    tok[0] = 1;
    int32_t V = 264;
    size_t n_logits = (size_t)N_TOK * (size_t)V;
    float *got = malloc(sizeof(float) * n_logits);
    float *alt = malloc(sizeof(float) * n_logits);
    double *ref = malloc(sizeof(double) * n_logits), *alt64 = malloc(sizeof(double) * n_logits);

    wisp_cpu_features cpu;
    wisp_cpu_detect(&cpu);
    const char *names[8];
    int n_levels = wisp_simd_levels(&cpu, names, 8);
    ref_model r;
    bool have_ref = false;
    for (int li = 0; li < n_levels; li++) {
        const wisp_kernels *k;
        if (wisp_simd_select(&cpu, names[li], &k, &err)) continue;
        train_env e = {0};
        e.bytes = malloc(n);
        memcpy(e.bytes, bytes, n);
        e.size = n;
        REQUIRE(!wisp_gguf_open(&e.g, e.bytes, e.size, &err), "%s: open: %s", v->name, err.message);
        bool ok = engine_logits(&e, k, tok, got, V);
        CHECK(ok, "%s at %s: evaluation failed or wrote past the planned arena", v->name, names[li]);
        const wisp_hparams *hp = wisp_ctx_hparams(e.ctx);
        CHECK(hp->rope_ext_factor == 1.0f && hp->rope_freq_scale == 0.25f && hp->rope_orig_ctx == 256,
              "%s: YaRN read as ext %g, freq scale %g, original context %d", v->name, (double)hp->rope_ext_factor,
              (double)hp->rope_freq_scale, hp->rope_orig_ctx);
        if (!have_ref) {
            REQUIRE(ref_model_load(&r, wisp_ctx_model(e.ctx)), "reference");
            r.n_ctx = N_CTX;
            ref_forward(&r, tok, N_TOK, ref);
            have_ref = true;
        }
        double worst = 0;
        for (size_t i = 0; i < n_logits; i++)
            if (fabs(got[i] - ref[i]) > worst) worst = fabs(got[i] - ref[i]);
        double err_rms = rel_rms_ref(got, ref, n_logits);
        CHECK(ok && err_rms < TOL, "%s at %s: rel RMS %.2e against the float64 reference", v->name, names[li], err_rms);
        printf("%-26s %-13s max abs %.1e, rel RMS %.1e vs float64 over %d positions\n", v->name, names[li], worst,
               err_rms, N_TOK);
        if (li == 0) {
            /* what the comparison tells apart: the same factor as linear
             * scaling, and no scaling at all */
            wisp_hparams yarn = r.hp;
            r.hp.rope_ext_factor = 0.0f;
            ref_forward(&r, tok, N_TOK, alt64);
            for (size_t i = 0; i < n_logits; i++) alt[i] = (float)alt64[i];
            double linear = rel_rms_ref(alt, ref, n_logits);
            r.hp.rope_freq_scale = 1.0f;
            r.hp.rope_attn_factor = 1.0f;
            ref_forward(&r, tok, N_TOK, alt64);
            for (size_t i = 0; i < n_logits; i++) alt[i] = (float)alt64[i];
            double none = rel_rms_ref(alt, ref, n_logits);
            r.hp = yarn;
            CHECK(linear > 100 * TOL && none > 100 * TOL, "%s: YaRN is too close to linear (%.1e) or no scaling (%.1e)",
                  v->name, linear, none);
            printf("%-26s YaRN differs from linear scaling by rel RMS %.2g, from no scaling by %.2g\n", v->name, linear,
                   none);
        }
        train_close(&e);
    }
    REQUIRE(have_ref, "%s: no kernel level ran", v->name);
    ref_model_free(&r);
    free(got);
    free(ref);
    free(alt);
    free(alt64);
    free(bytes);
}

/* The correction range for known numbers: head size 128, base 500000 and
 * an original context of 8192 (Llama 3's): d(32) = 18.08, d(1) = 34.98 */
static void check_dims(void) {
    wisp_rope_spec s = {.dim = 128, .base = 500000.0f, .orig_ctx = 8192};
    double lo, hi;
    wisp_rope_yarn_dims(&s, &lo, &hi);
    CHECK(lo == 18 && hi == 35, "YaRN dims for 128/500000/8192: %g..%g, want 18..35", lo, hi);
    s = (wisp_rope_spec){.dim = 32, .base = 10000.0f, .orig_ctx = 256};
    wisp_rope_yarn_dims(&s, &lo, &hi);
    CHECK(lo == 0 && hi == 7, "YaRN dims for 32/10000/256: %g..%g, want 0..7 (clamped at 0)", lo, hi);
    s = (wisp_rope_spec){.dim = 32, .base = 10.0f, .orig_ctx = 1 << 20};
    wisp_rope_yarn_dims(&s, &lo, &hi);
    CHECK(hi == 31, "YaRN dims clamp at dim - 1: %g", hi);
}

int main(void) {
    check_dims();
    static const variant variants[] = {
        {"llama yarn x4 attn 0.9", "llama", false, false, 0.9f},
        {"qwen2 yarn x4 (neox)", "qwen2", true, false, 0},
        {"llama yarn x4 + rope_freqs", "llama", false, true, 0},
    };
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) check_variant(&variants[i]);
    return check_report("test_rope_yarn");
}
