/* Never silently wrong: a GGUF carrying a metadata key or a tensor that
 * changes the math in a way wisp does not implement is refused with an error
 * that names it; keys that change nothing stay accepted; keys and tensors a
 * family implements are taken. Each case copies a tiny generated model
 * (adapters/model_gen.c) and adds one key or one tensor. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf_extras.h"
#include "model.h"

typedef struct blob {
    unsigned char *bytes;
    size_t n;
} blob;

static blob make_tiny(const char *arch, int32_t head_dim) {
    wisp_model_shape shape = {"tiny", "tiny", arch, 32, 2, 4, 2, 64, 264, 64, 10000.0f, 1e-5f, true, false,
                              .head_dim = head_dim};
    wisp_error err = {0};
    blob b = {NULL, 0};
    b.bytes = gguf_tiny_model(&shape, &b.n, &err);
    if (!b.bytes) b.n = 0;
    return b;
}


/* Load base + x[0..n_x); returns the status and fills err. */
static wisp_status load_with(const blob *base, const gguf_extra *x, int n_x, wisp_error *err, wisp_hparams *hp_out) {
    size_t n;
    unsigned char *bytes = gguf_with_extras(base->bytes, base->n, x, n_x, &n, err);
    if (!bytes) return WISP_ERR_FORMAT;
    wisp_gguf g2;
    wisp_status st = wisp_gguf_open(&g2, bytes, n, err);
    if (!st) {
        static _Alignas(64) unsigned char mem[1 << 16];
        wisp_arena a;
        wisp_arena_init(&a, mem, sizeof mem);
        wisp_model m;
        st = wisp_model_init(&m, &g2, &a, err);
        if (!st && hp_out) *hp_out = m.hp;
    }
    free(bytes);
    return st;
}

static void expect_refused(const blob *base, const char *what, gguf_extra x) {
    wisp_error err = {0};
    wisp_status st = load_with(base, &x, 1, &err, NULL);
    CHECK(st != WISP_OK, "%s was accepted", what);
    CHECK(strstr(err.message, what) != NULL, "the error for %s does not name it: %s", what, err.message);
}

static void expect_accepted(const blob *base, const char *what, gguf_extra x, wisp_hparams *hp) {
    wisp_error err = {0};
    wisp_status st = load_with(base, &x, 1, &err, hp);
    CHECK(st == WISP_OK, "%s was refused: %s", what, err.message);
}


static void llama_refusals(void) {
    blob b = make_tiny("llama", 0);
    REQUIRE(b.n > 0, "no tiny llama model");
    /* keys that change the math, not implemented for llama */
    const gguf_extra keys[] = {
        EXTRA_U32("llama.attention.sliding_window", 16),
        EXTRA_U32("llama.attention.sliding_window_pattern", 6),
        EXTRA_F32("llama.attn_logit_softcapping", 50),
        EXTRA_F32("llama.final_logit_softcapping", 30),
        EXTRA_F32("llama.rope.freq_base_swa", 10000),
        EXTRA_F32("llama.rope.scaling.yarn_log_multiplier", 0.1), /* llama.cpp reads it for deepseek2 only */
        EXTRA_F32("llama.rope.scaling.yarn_beta_fast", 32),       /* later llama.cpp keys, not implemented */
        EXTRA_F32("llama.rope.scaling.yarn_beta_slow", 1),
        EXTRA_F32("llama.rope.scaling.yarn_ext_factor", 1),
        EXTRA_F32("llama.rope.scaling.yarn_attn_factor", 1),
        EXTRA_F32("llama.rope.scaling.beta_fast", 32),
        EXTRA_U32("llama.expert_count", 8),
        EXTRA_U32("llama.expert_used_count", 2),
        EXTRA_U32("llama.expert_feed_forward_length", 128),
        EXTRA_F32("llama.attention.layer_norm_epsilon", 1e-5),
        EXTRA_F32("llama.attention.clamp_kqv", 8),
        EXTRA_F32("llama.attention.scale", 0.1),
        EXTRA_F32("llama.logit_scale", 0.5),
        EXTRA_F32("llama.embedding_scale", 12),
        EXTRA_F32("llama.residual_scale", 0.2),
        EXTRA_BOOL("llama.use_parallel_residual", 1),
        EXTRA_U32("llama.ssm.state_size", 16),
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) expect_refused(&b, keys[i].key, keys[i]);
    expect_refused(&b, "llama.rope.scaling.type", EXTRA_STR("llama.rope.scaling.type", "longrope"));
    expect_refused(&b, "llama.rope.scaling.type", EXTRA_STR("llama.rope.scaling.type", "dynamic"));

    /* tensors llama does not have */
    const char *tensors[] = {"blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight", "blk.0.post_attention_norm.weight",
                             "blk.1.post_ffw_norm.weight", "blk.0.attn_output.bias", "blk.0.ffn_down.bias",
                             "blk.0.ffn_gate_inp.weight", "blk.0.layer_output_norm.weight", "blk.2.attn_norm.weight",
                             "output_norm.bias", "rope_factors_long.weight", "token_types.weight"};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) expect_refused(&b, tensors[i], EXTRA_TENSOR(tensors[i], 32));

    /* harmless keys stay accepted; implemented ones are taken */
    wisp_hparams hp;
    expect_accepted(&b, "an unknown harmless key", EXTRA_U32("llama.some_future_count", 3), &hp);
    expect_accepted(&b, "expert_count 0", EXTRA_U32("llama.expert_count", 0), &hp);
    expect_accepted(&b, "rope.scaling.type none", EXTRA_STR("llama.rope.scaling.type", "none"), &hp);
    expect_accepted(&b, "rope.scaling.factor 4", EXTRA_F32("llama.rope.scaling.factor", 4), &hp);
    CHECK(hp.rope_freq_scale == 0.25f && hp.rope_ext_factor == 0.0f, "linear rope scaling factor 4 gave freq scale %g",
          (double)hp.rope_freq_scale);
    /* llama.cpp never scales when the type is "none", whatever the factor */
    const gguf_extra none4[] = {EXTRA_STR("llama.rope.scaling.type", "none"), EXTRA_F32("llama.rope.scaling.factor", 4)};
    wisp_error err = {0};
    CHECK(load_with(&b, none4, 2, &err, &hp) == WISP_OK && hp.rope_freq_scale == 1.0f,
          "type none with factor 4: freq scale %g (%s)", (double)hp.rope_freq_scale, err.message);
    /* YaRN (tests/unit/test_rope_yarn.c checks its logits) and its magnitude */
    const gguf_extra yarn[] = {EXTRA_STR("llama.rope.scaling.type", "yarn"), EXTRA_F32("llama.rope.scaling.factor", 8),
                               EXTRA_U32("llama.rope.scaling.original_context_length", 32),
                               EXTRA_F32("llama.rope.scaling.attn_factor", 0.9)};
    CHECK(load_with(&b, yarn, 4, &err, &hp) == WISP_OK && hp.rope_ext_factor == 1.0f && hp.rope_freq_scale == 0.125f &&
              hp.rope_orig_ctx == 32 && hp.rope_attn_factor == 0.9f,
          "YaRN keys: ext %g, freq scale %g, original context %d, attn factor %g (%s)", (double)hp.rope_ext_factor,
          (double)hp.rope_freq_scale, hp.rope_orig_ctx, (double)hp.rope_attn_factor, err.message);
    CHECK(load_with(&b, yarn, 2, &err, &hp) == WISP_OK && hp.rope_orig_ctx == 64 && hp.rope_attn_factor == 1.0f,
          "YaRN without original_context_length takes context_length (64): %d", hp.rope_orig_ctx);
    expect_accepted(&b, "rope.scaling.attn_factor", EXTRA_F32("llama.rope.scaling.attn_factor", 1.19), &hp);
    CHECK(hp.rope_attn_factor == 1.19f && hp.rope_ext_factor == 0.0f, "attn_factor alone: %g",
          (double)hp.rope_attn_factor);
    expect_accepted(&b, "rope_freqs.weight", EXTRA_TENSOR("rope_freqs.weight", 4), &hp);
    expect_refused(&b, "rope_freqs.weight", EXTRA_TENSOR("rope_freqs.weight", 5)); /* rope_dim/2 = 4 values */
    free(b.bytes);
}

static void family_refusals(void) {
    blob g3 = make_tiny("gemma3", 16);
    REQUIRE(g3.n > 0, "no tiny gemma3 model");
    wisp_hparams hp;
    expect_accepted(&g3, "gemma3's window", EXTRA_U32("gemma3.attention.sliding_window", 4), &hp);
    CHECK(hp.window == 4 && hp.head_dim == 16 && hp.embed_scale > 5.6f && hp.embed_scale < 5.7f,
          "gemma3 hparams: window %d head %d embed scale %g", hp.window, hp.head_dim, (double)hp.embed_scale);
    CHECK(wisp_layer_windowed(&hp, 0) && wisp_layer_windowed(&hp, 1), "gemma3 layers 0 and 1 are local");
    expect_refused(&g3, "gemma3.attn_logit_softcapping", EXTRA_F32("gemma3.attn_logit_softcapping", 50));
    expect_refused(&g3, "blk.0.attn_q.bias", EXTRA_TENSOR("blk.0.attn_q.bias", 64));
    free(g3.bytes);

    blob g2 = make_tiny("gemma2", 0);
    REQUIRE(g2.n > 0, "no tiny gemma2 model");
    expect_accepted(&g2, "gemma2's soft-cap", EXTRA_F32("gemma2.attn_logit_softcapping", 50), &hp);
    CHECK(hp.attn_softcap == 50.0f, "gemma2 attention soft-cap %g", (double)hp.attn_softcap);
    expect_accepted(&g2, "gemma2's window", EXTRA_U32("gemma2.attention.sliding_window", 8), &hp);
    CHECK(wisp_layer_windowed(&hp, 0) && !wisp_layer_windowed(&hp, 1), "gemma2: even layers local, odd global");
    expect_refused(&g2, "gemma2.rope.freq_base_swa", EXTRA_F32("gemma2.rope.freq_base_swa", 10000));
    expect_refused(&g2, "blk.0.attn_q_norm.weight", EXTRA_TENSOR("blk.0.attn_q_norm.weight", 8));
    free(g2.bytes);

    blob q3 = make_tiny("qwen3", 16);
    REQUIRE(q3.n > 0, "no tiny qwen3 model");
    expect_refused(&q3, "qwen3.attention.sliding_window", EXTRA_U32("qwen3.attention.sliding_window", 4096));
    expect_refused(&q3, "qwen3.expert_count", EXTRA_U32("qwen3.expert_count", 128));
    expect_refused(&q3, "blk.1.ffn_gate_exps.weight", EXTRA_TENSOR("blk.1.ffn_gate_exps.weight", 32));
    /* YaRN is taken where llama.cpp c392e509 runs it (llama, qwen2), not for qwen3 */
    expect_refused(&q3, "qwen3.rope.scaling.type", EXTRA_STR("qwen3.rope.scaling.type", "yarn"));
    expect_refused(&q3, "qwen3.rope.scaling.attn_factor", EXTRA_F32("qwen3.rope.scaling.attn_factor", 1.1));
    free(q3.bytes);

    blob p3 = make_tiny("phi3", 0);
    REQUIRE(p3.n > 0, "no tiny phi3 model");
    expect_accepted(&p3, "phi3's attn_factor", EXTRA_F32("phi3.rope.scaling.attn_factor", 1.19), &hp);
    expect_refused(&p3, "blk.0.attn_q.weight", EXTRA_TENSOR("blk.0.attn_q.weight", 32));
    expect_refused(&p3, "phi3.rope.scaling.type", EXTRA_STR("phi3.rope.scaling.type", "yarn"));
    expect_refused(&p3, "rope_factors_short.weight", EXTRA_TENSOR("rope_factors_long.weight", 4)); /* one set without the other */
    free(p3.bytes);
}

int main(void) {
    llama_refusals();
    family_refusals();
    return check_report("test_arch_refusals");
}
