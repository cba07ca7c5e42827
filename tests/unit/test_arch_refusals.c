/* Never silently wrong: a GGUF carrying a metadata key or a tensor that
 * changes the math in a way wisp does not implement is refused with an error
 * that names it; keys that change nothing stay accepted; keys and tensors a
 * family implements are taken. Each case copies a tiny generated model
 * (adapters/model_gen.c) and adds one key or one tensor. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf_write.h"
#include "model.h"
#include "model_gen.h"

typedef struct blob {
    unsigned char *bytes;
    size_t n;
} blob;

static blob make_tiny(const char *arch, int32_t head_dim) {
    int32_t vocab = 264;
    wisp_model_shape shape = {"tiny", "tiny", arch, 32, 2, 4, 2, 64, 264, 64, 10000.0f, 1e-5f, true, false,
                              .head_dim = head_dim};
    wisp_model_gen g;
    memset(&g, 0, sizeof g);
    g.shape = &shape;
    wisp_qtarget_parse("f32", &g.target);
    g.seed = 3;
    g.n_vocab = vocab;
    g.vocab_kv = WISP_SYNTHETIC_VOCAB_KV;
    g.write_vocab = wisp_synthetic_vocab_write;
    g.vocab_user = &vocab;
    size_t scratch_bytes = wisp_model_gen_scratch_bytes(&g);
    void *scratch = malloc(scratch_bytes);
    wisp_error err = {0};
    wisp_sink count = wisp_count_sink_make();
    blob b = {NULL, 0};
    if (wisp_model_gen_write(&g, &count, scratch, scratch_bytes, &err)) return b;
    b.n = (size_t)count.written;
    b.bytes = malloc(b.n);
    wisp_mem_sink m;
    wisp_sink s = wisp_mem_sink_make(&m, b.bytes, b.n);
    if (wisp_model_gen_write(&g, &s, scratch, scratch_bytes, &err)) b.n = 0;
    free(scratch);
    return b;
}

/* One addition: a key of some type, or an F32 tensor of `len` floats. */
typedef struct extra {
    const char *key;
    uint32_t vtype;  /* WISP_GGUF_U32, F32, BOOL, STRING */
    double number;
    const char *str;
    const char *tensor;
    int64_t len;
} extra;

/* The base file with `x` added, written through a sink of `cap` bytes (count first). */
static wisp_status write_with(const wisp_gguf *g, const extra *x, wisp_sink *s, wisp_error *err) {
    wisp_status st;
    uint64_t n_t = g->n_tensors + (x->tensor != NULL), n_kv = g->n_kv + (x->key != NULL);
    if ((st = wisp_gguf_write_header(s, n_t, n_kv, err))) return st;
    size_t cur = 0;
    wisp_gguf_kv kv;
    while (wisp_gguf_next_kv(g, &cur, &kv))
        if ((st = wisp_gguf_write_kv_copy(s, &kv, err))) return st;
    if (x->key) {
        switch (x->vtype) {
        case WISP_GGUF_U32: st = wisp_gguf_write_kv_u32(s, x->key, (uint32_t)x->number, err); break;
        case WISP_GGUF_F32: st = wisp_gguf_write_kv_f32(s, x->key, (float)x->number, err); break;
        case WISP_GGUF_BOOL: st = wisp_gguf_write_kv_bool(s, x->key, x->number != 0, err); break;
        default: st = wisp_gguf_write_kv_str(s, x->key, x->str, err); break;
        }
        if (st) return st;
    }
    wisp_gguf_out_tensor *ts = calloc((size_t)n_t, sizeof *ts);
    char (*names)[96] = calloc((size_t)n_t, sizeof *names);
    const void **data = calloc((size_t)n_t, sizeof *data);
    wisp_gguf_tensor t;
    cur = 0;
    uint64_t i = 0;
    while (wisp_gguf_next_tensor(g, &cur, &t)) {
        memcpy(names[i], t.name.ptr, t.name.len);
        ts[i] = (wisp_gguf_out_tensor){names[i], t.n_dims, {t.ne[0], t.ne[1], t.ne[2], t.ne[3]}, t.type};
        data[i++] = t.data;
    }
    float *ones = NULL;
    if (x->tensor) {
        snprintf(names[i], sizeof names[i], "%s", x->tensor);
        ts[i] = (wisp_gguf_out_tensor){names[i], 1, {x->len, 1, 1, 1}, WISP_TYPE_F32};
        ones = malloc((size_t)x->len * sizeof(float));
        for (int64_t j = 0; j < x->len; j++) ones[j] = 1.0f;
        data[i++] = ones;
    }
    st = wisp_gguf_write_tensor_infos(s, ts, n_t, WISP_GGUF_DEFAULT_ALIGNMENT, err);
    for (uint64_t k = 0; k < n_t && !st; k++) {
        st = wisp_sink_write(s, data[k], (size_t)wisp_gguf_tensor_bytes(&ts[k]), err);
        if (!st) st = wisp_sink_pad(s, WISP_GGUF_DEFAULT_ALIGNMENT, err);
    }
    free(ones);
    free(data);
    free(names);
    free(ts);
    return st;
}

/* Load base + x; returns the status and fills err. */
static wisp_status load_with(const blob *base, const extra *x, wisp_error *err, wisp_hparams *hp_out) {
    wisp_gguf g;
    if (wisp_gguf_open(&g, base->bytes, base->n, err)) return WISP_ERR_FORMAT;
    wisp_sink count = wisp_count_sink_make();
    wisp_status st = write_with(&g, x, &count, err);
    if (st) return st;
    size_t n = (size_t)count.written;
    void *bytes = aligned_alloc(64, (n + 63) & ~(size_t)63);
    wisp_mem_sink ms;
    wisp_sink s = wisp_mem_sink_make(&ms, bytes, n);
    if ((st = write_with(&g, x, &s, err)) == WISP_OK) {
        wisp_gguf g2;
        st = wisp_gguf_open(&g2, bytes, n, err);
        if (!st) {
            static _Alignas(64) unsigned char mem[1 << 16];
            wisp_arena a;
            wisp_arena_init(&a, mem, sizeof mem);
            wisp_model m;
            st = wisp_model_init(&m, &g2, &a, err);
            if (!st && hp_out) *hp_out = m.hp;
        }
    }
    free(bytes);
    return st;
}

static void expect_refused(const blob *base, const char *what, extra x) {
    wisp_error err = {0};
    wisp_status st = load_with(base, &x, &err, NULL);
    CHECK(st != WISP_OK, "%s was accepted", what);
    CHECK(strstr(err.message, what) != NULL, "the error for %s does not name it: %s", what, err.message);
}

static void expect_accepted(const blob *base, const char *what, extra x, wisp_hparams *hp) {
    wisp_error err = {0};
    wisp_status st = load_with(base, &x, &err, hp);
    CHECK(st == WISP_OK, "%s was refused: %s", what, err.message);
}

#define KEY_U32(k, v) (extra){.key = (k), .vtype = WISP_GGUF_U32, .number = (v)}
#define KEY_F32(k, v) (extra){.key = (k), .vtype = WISP_GGUF_F32, .number = (v)}
#define KEY_BOOL(k, v) (extra){.key = (k), .vtype = WISP_GGUF_BOOL, .number = (v)}
#define KEY_STR(k, v) (extra){.key = (k), .vtype = WISP_GGUF_STRING, .str = (v)}
#define TENSOR(n, l) (extra){.tensor = (n), .len = (l)}

static void llama_refusals(void) {
    blob b = make_tiny("llama", 0);
    REQUIRE(b.n > 0, "no tiny llama model");
    /* keys that change the math, not implemented for llama */
    const extra keys[] = {
        KEY_U32("llama.attention.sliding_window", 16),
        KEY_U32("llama.attention.sliding_window_pattern", 6),
        KEY_F32("llama.attn_logit_softcapping", 50),
        KEY_F32("llama.final_logit_softcapping", 30),
        KEY_F32("llama.rope.freq_base_swa", 10000),
        KEY_F32("llama.rope.scaling.attn_factor", 1.19),
        KEY_F32("llama.rope.scaling.yarn_log_multiplier", 0.1),
        KEY_U32("llama.expert_count", 8),
        KEY_U32("llama.expert_used_count", 2),
        KEY_U32("llama.expert_feed_forward_length", 128),
        KEY_F32("llama.attention.layer_norm_epsilon", 1e-5),
        KEY_F32("llama.attention.clamp_kqv", 8),
        KEY_F32("llama.attention.scale", 0.1),
        KEY_F32("llama.logit_scale", 0.5),
        KEY_F32("llama.embedding_scale", 12),
        KEY_F32("llama.residual_scale", 0.2),
        KEY_BOOL("llama.use_parallel_residual", 1),
        KEY_U32("llama.ssm.state_size", 16),
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) expect_refused(&b, keys[i].key, keys[i]);
    expect_refused(&b, "llama.rope.scaling.type", KEY_STR("llama.rope.scaling.type", "yarn"));
    expect_refused(&b, "llama.rope.scaling.type", KEY_STR("llama.rope.scaling.type", "longrope"));

    /* tensors llama does not have */
    const char *tensors[] = {"blk.0.attn_q_norm.weight", "blk.0.attn_k_norm.weight", "blk.0.post_attention_norm.weight",
                             "blk.1.post_ffw_norm.weight", "blk.0.attn_output.bias", "blk.0.ffn_down.bias",
                             "blk.0.ffn_gate_inp.weight", "blk.0.layer_output_norm.weight", "blk.2.attn_norm.weight",
                             "output_norm.bias", "rope_factors_long.weight", "token_types.weight"};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) expect_refused(&b, tensors[i], TENSOR(tensors[i], 32));

    /* harmless keys stay accepted; implemented ones are taken */
    wisp_hparams hp;
    expect_accepted(&b, "an unknown harmless key", KEY_U32("llama.some_future_count", 3), &hp);
    expect_accepted(&b, "expert_count 0", KEY_U32("llama.expert_count", 0), &hp);
    expect_accepted(&b, "rope.scaling.type none", KEY_STR("llama.rope.scaling.type", "none"), &hp);
    expect_accepted(&b, "rope.scaling.factor 4", KEY_F32("llama.rope.scaling.factor", 4), &hp);
    CHECK(hp.rope_freq_scale == 0.25f, "linear rope scaling factor 4 gave freq scale %g", (double)hp.rope_freq_scale);
    expect_accepted(&b, "rope_freqs.weight", TENSOR("rope_freqs.weight", 4), &hp);
    expect_refused(&b, "rope_freqs.weight", TENSOR("rope_freqs.weight", 5)); /* rope_dim/2 = 4 values */
    free(b.bytes);
}

static void family_refusals(void) {
    blob g3 = make_tiny("gemma3", 16);
    REQUIRE(g3.n > 0, "no tiny gemma3 model");
    wisp_hparams hp;
    expect_accepted(&g3, "gemma3's window", KEY_U32("gemma3.attention.sliding_window", 4), &hp);
    CHECK(hp.window == 4 && hp.head_dim == 16 && hp.embed_scale > 5.6f && hp.embed_scale < 5.7f,
          "gemma3 hparams: window %d head %d embed scale %g", hp.window, hp.head_dim, (double)hp.embed_scale);
    CHECK(wisp_layer_windowed(&hp, 0) && wisp_layer_windowed(&hp, 1), "gemma3 layers 0 and 1 are local");
    expect_refused(&g3, "gemma3.attn_logit_softcapping", KEY_F32("gemma3.attn_logit_softcapping", 50));
    expect_refused(&g3, "blk.0.attn_q.bias", TENSOR("blk.0.attn_q.bias", 64));
    free(g3.bytes);

    blob g2 = make_tiny("gemma2", 0);
    REQUIRE(g2.n > 0, "no tiny gemma2 model");
    expect_accepted(&g2, "gemma2's soft-cap", KEY_F32("gemma2.attn_logit_softcapping", 50), &hp);
    CHECK(hp.attn_softcap == 50.0f, "gemma2 attention soft-cap %g", (double)hp.attn_softcap);
    expect_accepted(&g2, "gemma2's window", KEY_U32("gemma2.attention.sliding_window", 8), &hp);
    CHECK(wisp_layer_windowed(&hp, 0) && !wisp_layer_windowed(&hp, 1), "gemma2: even layers local, odd global");
    expect_refused(&g2, "gemma2.rope.freq_base_swa", KEY_F32("gemma2.rope.freq_base_swa", 10000));
    expect_refused(&g2, "blk.0.attn_q_norm.weight", TENSOR("blk.0.attn_q_norm.weight", 8));
    free(g2.bytes);

    blob q3 = make_tiny("qwen3", 16);
    REQUIRE(q3.n > 0, "no tiny qwen3 model");
    expect_refused(&q3, "qwen3.attention.sliding_window", KEY_U32("qwen3.attention.sliding_window", 4096));
    expect_refused(&q3, "qwen3.expert_count", KEY_U32("qwen3.expert_count", 128));
    expect_refused(&q3, "blk.1.ffn_gate_exps.weight", TENSOR("blk.1.ffn_gate_exps.weight", 32));
    free(q3.bytes);

    blob p3 = make_tiny("phi3", 0);
    REQUIRE(p3.n > 0, "no tiny phi3 model");
    expect_accepted(&p3, "phi3's attn_factor", KEY_F32("phi3.rope.scaling.attn_factor", 1.19), &hp);
    expect_refused(&p3, "blk.0.attn_q.weight", TENSOR("blk.0.attn_q.weight", 32));
    expect_refused(&p3, "rope_factors_short.weight", TENSOR("rope_factors_long.weight", 4)); /* one set without the other */
    free(p3.bytes);
}

int main(void) {
    llama_refusals();
    family_refusals();
    return check_report("test_arch_refusals");
}
