/* Hyperparameters and weight tables of the architectures of arch.c. */
#include "model.h"

#include <math.h>
#include <string.h>

#include "half.h"
#include "types.h"

static const char *const proj_gguf_names[WISP_PROJ_COUNT] = {
    "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
static const char *const proj_hf_names[WISP_PROJ_COUNT] = {
    "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

const char *wisp_proj_gguf_name(int proj) { return proj >= 0 && proj < WISP_PROJ_COUNT ? proj_gguf_names[proj] : "?"; }
const char *wisp_proj_hf_name(int proj) { return proj >= 0 && proj < WISP_PROJ_COUNT ? proj_hf_names[proj] : "?"; }

int wisp_proj_from_name(const char *name, size_t len) {
    for (int p = 0; p < WISP_PROJ_COUNT; p++) {
        if (strlen(proj_gguf_names[p]) == len && memcmp(proj_gguf_names[p], name, len) == 0) return p;
        if (strlen(proj_hf_names[p]) == len && memcmp(proj_hf_names[p], name, len) == 0) return p;
    }
    return -1;
}

const char *wisp_arch_name(wisp_arch a) {
    const wisp_arch_row *r = wisp_arch_at((int)a);
    return r ? r->name : "?";
}

const wisp_arch_row *wisp_hparams_row(const wisp_hparams *hp) {
    const wisp_arch_row *r = wisp_arch_at((int)hp->arch);
    return r ? r : wisp_arch_at(0);
}

bool wisp_layer_windowed(const wisp_hparams *hp, int32_t l) {
    if (hp->window <= 0) return false;
    switch (wisp_hparams_row(hp)->window) {
    case WISP_WINDOW_ALL: return true;
    case WISP_WINDOW_EVEN: return l % 2 == 0;
    case WISP_WINDOW_PATTERN: return hp->window_pattern > 1 && l % hp->window_pattern < hp->window_pattern - 1;
    default: return false;
    }
}

int32_t wisp_layer_kv_positions(const wisp_hparams *hp, int32_t l, int32_t n_ctx, int32_t n_batch) {
    if (!wisp_layer_windowed(hp, l)) return n_ctx;
    int64_t ring = ((int64_t)hp->window - 1 + n_batch + WISP_KV_RING_ALIGN - 1) / WISP_KV_RING_ALIGN * WISP_KV_RING_ALIGN;
    return ring < n_ctx ? (int32_t)ring : n_ctx;
}

int64_t wisp_layer_vec_len(const wisp_hparams *hp, int v) {
    switch (v) {
    case WISP_VEC_BIAS_Q: return (int64_t)hp->n_heads * hp->head_dim;
    case WISP_VEC_BIAS_K:
    case WISP_VEC_BIAS_V: return (int64_t)hp->n_kv_heads * hp->head_dim;
    case WISP_VEC_Q_NORM:
    case WISP_VEC_K_NORM: return hp->head_dim;
    default: return hp->dim;
    }
}

const float *wisp_model_rope_factors(const wisp_model *m, int32_t n_ctx) {
    if (m->rope_freqs) return m->rope_freqs;
    if (m->rope_long && n_ctx > m->hp.rope_orig_ctx) return m->rope_long; /* llama.cpp's rule */
    return m->rope_short;
}

void wisp_proj_source(const wisp_hparams *hp, int proj, const char **suffix, int64_t *row0, int64_t *rows,
                      int64_t *cols) {
    const wisp_arch_row *r = wisp_hparams_row(hp);
    int64_t q = (int64_t)hp->n_heads * hp->head_dim, kv = (int64_t)hp->n_kv_heads * hp->head_dim;
    const int64_t out[WISP_PROJ_COUNT] = {q, kv, kv, hp->dim, hp->ffn_dim, hp->ffn_dim, hp->dim};
    const int64_t in[WISP_PROJ_COUNT] = {hp->dim, hp->dim, hp->dim, q, hp->dim, hp->dim, hp->ffn_dim};
    *rows = out[proj];
    *cols = in[proj];
    *row0 = 0;
    *suffix = proj_gguf_names[proj];
    if (proj <= WISP_PROJ_V && (r->required & WISP_LT(QKV))) {
        *suffix = "attn_qkv";
        *row0 = proj == WISP_PROJ_Q ? 0 : proj == WISP_PROJ_K ? q : q + kv;
    } else if ((proj == WISP_PROJ_GATE || proj == WISP_PROJ_UP) && (r->required & WISP_LT(GATE_UP))) {
        *suffix = "ffn_up";
        *row0 = proj == WISP_PROJ_GATE ? 0 : hp->ffn_dim;
    }
}

/* "<arch>.<suffix>" into buf */
static const char *arch_key(char *buf, size_t cap, const char *arch, const char *suffix) {
    wisp_format(buf, cap, "%s.%s", arch, suffix);
    return buf;
}

static wisp_status need_u32(const wisp_gguf *g, const char *arch, const char *suffix, int32_t *out,
                            uint32_t lo, uint32_t hi, wisp_error *err) {
    char key[128];
    uint32_t v;
    if (!wisp_gguf_get_u32(g, arch_key(key, sizeof key, arch, suffix), &v))
        return wisp_fail(err, WISP_ERR_NOT_FOUND, "metadata '%s' is missing or not an integer", key);
    if (v < lo || v > hi)
        return wisp_fail(err, WISP_ERR_FORMAT, "metadata '%s' = %u is outside %u..%u", key, v, lo, hi);
    *out = (int32_t)v;
    return WISP_OK;
}

static int32_t opt_u32(const wisp_gguf *g, const char *arch, const char *suffix, int32_t fallback) {
    char key[128];
    uint32_t v;
    if (wisp_gguf_get_u32(g, arch_key(key, sizeof key, arch, suffix), &v) && v <= INT32_MAX) return (int32_t)v;
    return fallback;
}

static float opt_f32(const wisp_gguf *g, const char *arch, const char *suffix, float fallback) {
    char key[128];
    float v;
    return wisp_gguf_get_f32(g, arch_key(key, sizeof key, arch, suffix), &v) ? v : fallback;
}

/* ---- metadata that changes the math ----
 * Every "<arch>.<suffix>" key is looked up here. A key listed with a NULL
 * test is refused whenever its value does something (nonzero, true, or a
 * string other than "none"); one with a test is accepted when the row
 * implements it. Keys not listed (vocab_size, context_length, ...) do not
 * change the logits and stay accepted. Prefix entries end in '.' or '_'. */
typedef bool (*row_test)(const wisp_arch_row *r);
static bool has_window(const wisp_arch_row *r) { return r->window != WISP_WINDOW_NONE; }
static bool has_pattern(const wisp_arch_row *r) { return r->window == WISP_WINDOW_PATTERN; }
static bool has_softcaps(const wisp_arch_row *r) { return r->softcaps; }
static bool has_base_swa(const wisp_arch_row *r) { return r->rope_base_swa; }
static bool has_attn_factor(const wisp_arch_row *r) { return r->longrope || r->yarn; }
static bool always(const wisp_arch_row *r) { return r != NULL; }

static const struct {
    const char *suffix;
    row_test implemented;
} math_keys[] = {
    {"attention.sliding_window", has_window},
    {"attention.sliding_window_pattern", has_pattern},
    {"attn_logit_softcapping", has_softcaps},
    {"final_logit_softcapping", has_softcaps},
    {"rope.freq_base_swa", has_base_swa},
    {"rope.scaling.attn_factor", has_attn_factor},
    {"rope.scaling.type", always},   /* value checked in read_rope_scaling */
    {"rope.scaling.factor", always}, /* likewise */
    {"rope.scaling.original_context_length", always},
    {"rope.scaling.finetuned", always},
    {"rope.scaling.yarn_", NULL}, /* llama.cpp c392e509 reads yarn_log_multiplier for deepseek2 only */
    {"rope.scaling.beta_", NULL},
    {"rope.dimension_sections", NULL},
    {"rope.scale_linear", NULL},
    {"expert_", NULL},
    {"leading_dense_block_count", NULL},
    {"moe_every_n_layers", NULL},
    {"interleave_moe_layer_step", NULL},
    {"no_rope_layer_step", NULL},
    {"full_attention_interval", NULL},
    {"attention.layer_norm_epsilon", NULL}, /* LayerNorm, not RMSNorm */
    {"attention.clamp_kqv", NULL},
    {"attention.max_alibi_bias", NULL},
    {"attention.scale", NULL},
    {"attention.q_lora_rank", NULL},
    {"attention.kv_lora_rank", NULL},
    {"attention.temperature_", NULL},
    {"attention.shared_kv_layers", NULL},
    {"use_parallel_residual", NULL},
    {"logit_scale", NULL},
    {"embedding_scale", NULL},
    {"residual_scale", NULL},
    {"swin_norm", NULL},
    {"ssm.", NULL},
    {"wkv.", NULL},
    {"shortconv.", NULL},
    {"altup.", NULL},
    {"laurel_rank", NULL},
    {"per_layer_", NULL},
};

static bool suffix_matches(const char *pattern, const char *s, size_t len) {
    size_t n = strlen(pattern);
    char last = pattern[n - 1];
    if (last == '.' || last == '_') return len >= n && memcmp(s, pattern, n) == 0;
    return len == n && memcmp(s, pattern, n) == 0;
}

/* Whether a key's value does anything: nonzero numbers, true, non-"none" strings, non-empty arrays. */
static bool value_active(const wisp_gguf_kv *kv) {
    if (kv->type == WISP_GGUF_STRING) {
        wisp_str v = {(const char *)kv->value + 8, wisp_load_u64(kv->value)};
        return !(v.len == 0 || wisp_str_eq(v, "none"));
    }
    if (kv->type == WISP_GGUF_ARRAY) return kv->count > 0;
    double d;
    return !wisp_gguf_kv_number(kv, 0, &d) || d != 0.0;
}

static wisp_status check_math_keys(const wisp_gguf *g, const wisp_arch_row *row, wisp_error *err) {
    size_t prefix = strlen(row->name), cur = 0;
    wisp_gguf_kv kv;
    while (wisp_gguf_next_kv(g, &cur, &kv)) {
        if (kv.key.len <= prefix + 1 || memcmp(kv.key.ptr, row->name, prefix) != 0 || kv.key.ptr[prefix] != '.') continue;
        const char *suffix = kv.key.ptr + prefix + 1;
        size_t len = kv.key.len - prefix - 1;
        for (size_t i = 0; i < sizeof math_keys / sizeof math_keys[0]; i++) {
            if (!suffix_matches(math_keys[i].suffix, suffix, len)) continue;
            if (math_keys[i].implemented ? math_keys[i].implemented(row) : !value_active(&kv)) break;
            return wisp_fail(err, WISP_ERR_UNSUPPORTED,
                             "metadata '%.*s' changes the computation in a way wisp does not implement for "
                             "architecture '%s'", (int)(kv.key.len > 96 ? 96 : kv.key.len), kv.key.ptr, row->name);
        }
    }
    return WISP_OK;
}

/* The rope.scaling.* keys as llama.cpp reads them: factor f gives
 * freq_scale 1/f for every type but "none" and longrope; type yarn also
 * turns on YaRN's per-pair mix (ext_factor 1, beta_fast 32 and beta_slow 1 as
 * llama.cpp fixes them) around original_context_length; attn_factor scales
 * cos and sin whatever the type. */
static wisp_status read_rope_scaling(const wisp_gguf *g, const wisp_arch_row *row, wisp_hparams *hp, wisp_error *err) {
    char key[128];
    const char *arch = row->name;
    hp->rope_freq_scale = 1.0f;
    hp->rope_attn_factor = 1.0f;
    hp->rope_ext_factor = 0.0f;
    wisp_str type = {"linear", 6};
    bool typed = wisp_gguf_get_str(g, arch_key(key, sizeof key, arch, "rope.scaling.type"), &type);
    bool longrope = typed && wisp_str_eq(type, "longrope") && row->longrope;
    bool yarn = typed && wisp_str_eq(type, "yarn") && row->yarn;
    if (typed && !wisp_str_eq(type, "none") && !wisp_str_eq(type, "linear") && !longrope && !yarn)
        return wisp_fail(err, WISP_ERR_UNSUPPORTED,
                         "metadata '%s' = '%.*s': rope scaling of that type is not implemented for '%s' (wisp has "
                         "linear, Llama 3 rope_freqs, YaRN for llama and qwen2, Phi-3 LongRoPE)", key,
                         (int)(type.len > 32 ? 32 : type.len), type.ptr, arch);
    /* llama.cpp's rope.scaling.factor sets freq_scale for every type; "none"
     * then resets it, and Phi-3's LongRoPE factors replace it */
    float factor = opt_f32(g, arch, "rope.scaling.factor", 0.0f);
    if (factor != 0.0f && !longrope) {
        if (!(factor > 0.0f) || factor > 1e6f)
            return wisp_fail(err, WISP_ERR_FORMAT, "metadata '%s.rope.scaling.factor' = %g is not a sensible factor", arch,
                             (double)factor);
        if (!(typed && wisp_str_eq(type, "none"))) hp->rope_freq_scale = 1.0f / factor;
    }
    if (yarn) hp->rope_ext_factor = 1.0f;
    hp->rope_orig_ctx = opt_u32(g, arch, "rope.scaling.original_context_length", hp->ctx_train);
    if (hp->rope_orig_ctx < 1)
        return wisp_fail(err, WISP_ERR_FORMAT, "metadata '%s.rope.scaling.original_context_length' must be positive",
                         arch);
    if (has_attn_factor(row)) {
        hp->rope_attn_factor = opt_f32(g, arch, "rope.scaling.attn_factor", 1.0f);
        if (!(hp->rope_attn_factor > 0.0f) || hp->rope_attn_factor > 100.0f)
            return wisp_fail(err, WISP_ERR_FORMAT, "metadata '%s.rope.scaling.attn_factor' = %g is not sensible", arch,
                             (double)hp->rope_attn_factor);
    }
    return WISP_OK;
}

/* Windows, soft-caps, scales: the attention variants of the row. */
static wisp_status read_attention_variants(const wisp_gguf *g, const wisp_arch_row *row, wisp_hparams *hp,
                                           wisp_error *err) {
    const char *arch = row->name;
    char key[128];
    hp->window = row->window != WISP_WINDOW_NONE ? opt_u32(g, arch, "attention.sliding_window", 0) : 0;
    hp->window_pattern = 6;
    wisp_gguf_kv kv;
    if (wisp_gguf_find_kv(g, arch_key(key, sizeof key, arch, "attention.sliding_window_pattern"), &kv)) {
        uint32_t v;
        if (kv.type == WISP_GGUF_ARRAY || !wisp_gguf_get_u32(g, key, &v) || v < 1 || v > 4096)
            return wisp_fail(err, WISP_ERR_UNSUPPORTED, "metadata '%s' must be a layer period in 1..4096 "
                                                        "(per-layer lists are not implemented)", key);
        hp->window_pattern = (int32_t)v;
    }
    if (hp->window < 0 || hp->window > (1 << 24))
        return wisp_fail(err, WISP_ERR_FORMAT, "metadata '%s.attention.sliding_window' = %d is not sensible", arch,
                         hp->window);
    hp->attn_softcap = row->softcaps ? opt_f32(g, arch, "attn_logit_softcapping", 0.0f) : 0.0f;
    hp->final_softcap = row->softcaps ? opt_f32(g, arch, "final_logit_softcapping", 0.0f) : 0.0f;
    if (!(hp->attn_softcap >= 0.0f && hp->attn_softcap < 1e6f) || !(hp->final_softcap >= 0.0f && hp->final_softcap < 1e6f))
        return wisp_fail(err, WISP_ERR_FORMAT, "the soft-capping values of '%s' must be in [0, 1e6)", arch);
    hp->rope_base_swa = row->rope_base_swa ? opt_f32(g, arch, "rope.freq_base_swa", 10000.0f) : hp->rope_base;
    if (!(hp->rope_base_swa > 1.0f) || hp->rope_base_swa > 1e12f)
        return wisp_fail(err, WISP_ERR_FORMAT, "rope.freq_base_swa %g is not a sensible base", (double)hp->rope_base_swa);
    int32_t pre_attn = row->scale_by_dim_layers && hp->n_layers == row->scale_by_dim_layers ? hp->dim / hp->n_heads
                                                                                            : hp->head_dim;
    hp->attn_scale = 1.0f / sqrtf((float)pre_attn);
    hp->embed_scale = row->embed_scale ? sqrtf((float)hp->dim) : 1.0f;
    return WISP_OK;
}

wisp_status wisp_hparams_read(const wisp_gguf *g, wisp_hparams *hp, wisp_error *err) {
    memset(hp, 0, sizeof *hp);
    wisp_status whole = wisp_gguf_check_whole(g, err);
    if (whole) return whole;
    wisp_str arch_s;
    if (!wisp_gguf_get_str(g, "general.architecture", &arch_s))
        return wisp_fail(err, WISP_ERR_NOT_FOUND, "metadata 'general.architecture' is missing");
    const wisp_arch_row *row = wisp_arch_find(arch_s.ptr, arch_s.len);
    if (!row)
        return wisp_fail(err, WISP_ERR_UNSUPPORTED,
                         "architecture '%.*s' is not supported (wisp runs llama, qwen2, qwen3, gemma2, gemma3, phi3)",
                         (int)(arch_s.len > 64 ? 64 : arch_s.len), arch_s.ptr);
    for (int i = 0; wisp_arch_at(i); i++)
        if (wisp_arch_at(i) == row) hp->arch = (wisp_arch)i;
    const char *arch = row->name;

    wisp_status s;
    if ((s = check_math_keys(g, row, err))) return s;
    const uint32_t big = 1u << 20;
    if ((s = need_u32(g, arch, "embedding_length", &hp->dim, 1, big, err))) return s;
    if ((s = need_u32(g, arch, "block_count", &hp->n_layers, 1, 4096, err))) return s;
    if ((s = need_u32(g, arch, "feed_forward_length", &hp->ffn_dim, 1, big, err))) return s;
    if ((s = need_u32(g, arch, "attention.head_count", &hp->n_heads, 1, 4096, err))) return s;
    hp->n_kv_heads = opt_u32(g, arch, "attention.head_count_kv", hp->n_heads);
    if (hp->n_kv_heads < 1 || hp->n_kv_heads > hp->n_heads || hp->n_heads % hp->n_kv_heads)
        return wisp_fail(err, WISP_ERR_FORMAT, "%d attention heads cannot share %d key/value heads",
                         hp->n_heads, hp->n_kv_heads);
    hp->head_dim = opt_u32(g, arch, "attention.key_length", hp->dim % hp->n_heads ? 0 : hp->dim / hp->n_heads);
    int32_t v_len = opt_u32(g, arch, "attention.value_length", hp->head_dim);
    if (hp->head_dim <= 0 || hp->head_dim % 2 || hp->head_dim > 4096 || v_len != hp->head_dim)
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "head size %d (value size %d): must be even, equal, and at most 4096",
                         hp->head_dim, v_len);
    hp->rope_dim = opt_u32(g, arch, "rope.dimension_count", hp->head_dim);
    if (hp->rope_dim <= 0 || hp->rope_dim > hp->head_dim || hp->rope_dim % 2)
        return wisp_fail(err, WISP_ERR_FORMAT, "rope.dimension_count %d must be even and at most the head size %d",
                         hp->rope_dim, hp->head_dim);
    hp->ctx_train = opt_u32(g, arch, "context_length", 2048);
    if (hp->ctx_train < 1) hp->ctx_train = 2048;

    char key[128];
    float f;
    hp->rope_base = 10000.0f;
    if (wisp_gguf_get_f32(g, arch_key(key, sizeof key, arch, "rope.freq_base"), &f)) hp->rope_base = f;
    if (!(hp->rope_base > 1.0f) || hp->rope_base > 1e12f)
        return wisp_fail(err, WISP_ERR_FORMAT, "rope.freq_base %g is not a sensible base", (double)hp->rope_base);
    hp->rms_eps = 1e-5f;
    if (wisp_gguf_get_f32(g, arch_key(key, sizeof key, arch, "attention.layer_norm_rms_epsilon"), &f)) hp->rms_eps = f;
    if (!(hp->rms_eps > 0.0f) || hp->rms_eps > 1.0f)
        return wisp_fail(err, WISP_ERR_FORMAT, "layer_norm_rms_epsilon %g must be in (0, 1]", (double)hp->rms_eps);
    hp->rope_neox = row->rope_neox;
    if ((s = read_rope_scaling(g, row, hp, err))) return s;
    if ((s = read_attention_variants(g, row, hp, err))) return s;

    wisp_gguf_tensor t;
    if (!wisp_gguf_find_tensor(g, "token_embd.weight", &t))
        return wisp_fail(err, WISP_ERR_NOT_FOUND, "tensor 'token_embd.weight' is missing");
    if (t.ne[1] < 1 || t.ne[1] > (1 << 24))
        return wisp_fail(err, WISP_ERR_SHAPE, "token_embd.weight has %lld rows", (long long)t.ne[1]);
    hp->n_vocab = (int32_t)t.ne[1];
    hp->tied_output = !wisp_gguf_find_tensor(g, "output.weight", &t);
    return WISP_OK;
}

static wisp_status shape_error(wisp_error *err, const wisp_gguf_tensor *t, int64_t want0, int64_t want1) {
    return wisp_fail(err, WISP_ERR_SHAPE, "tensor '%.*s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                     (int)t->name.len, t->name.ptr, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                     (long long)t->ne[3], (long long)want0, (long long)want1);
}

/* Find `name` and check it is a [cols, rows] matrix of a type wisp can use. */
static wisp_status get_weight(const wisp_gguf *g, const char *name, int64_t cols, int64_t rows, wisp_weight *w,
                              wisp_error *err) {
    wisp_gguf_tensor t;
    if (!wisp_gguf_find_tensor(g, name, &t)) return wisp_fail(err, WISP_ERR_NOT_FOUND, "tensor '%s' is missing", name);
    if (t.ne[0] != cols || t.ne[1] != rows || t.ne[2] != 1 || t.ne[3] != 1) return shape_error(err, &t, cols, rows);
    if (!wisp_type_is_weight((int)t.type)) {
        const wisp_type_info *ti = wisp_type_info_of((int)t.type);
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "tensor '%s' has type %s, which wisp cannot compute with yet",
                         name, ti ? ti->name : "?");
    }
    w->data = (const uint8_t *)t.data;
    w->type = (int32_t)t.type;
    w->rows = (int32_t)rows;
    w->cols = (int32_t)cols;
    w->row_bytes = wisp_type_row_bytes((int)t.type, cols);
    return WISP_OK;
}

/* Norms and biases are used as plain floats, in place. */
static wisp_status get_vector(const wisp_gguf *g, const char *name, int64_t n, bool required, const float **out,
                              wisp_error *err) {
    wisp_gguf_tensor t;
    *out = NULL;
    if (!wisp_gguf_find_tensor(g, name, &t)) {
        if (!required) return WISP_OK;
        return wisp_fail(err, WISP_ERR_NOT_FOUND, "tensor '%s' is missing", name);
    }
    if (t.ne[0] != n || t.ne[1] != 1 || t.ne[2] != 1 || t.ne[3] != 1) return shape_error(err, &t, n, 1);
    if (t.type != WISP_TYPE_F32)
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "tensor '%s' must be F32 (it is %s)", name,
                         wisp_type_info_of((int)t.type)->name);
    if ((uintptr_t)t.data % 4)
        return wisp_fail(err, WISP_ERR_ARG, "model bytes must be at least 4-byte aligned in memory");
    *out = (const float *)t.data;
    return WISP_OK;
}

/* The tensors outside the layers that the row reads, in the order checked. */
static bool global_tensor_known(const wisp_arch_row *row, wisp_str name) {
    if (wisp_str_eq(name, "token_embd.weight") || wisp_str_eq(name, "output.weight") ||
        wisp_str_eq(name, "output_norm.weight"))
        return true;
    if (row->rope_freqs && wisp_str_eq(name, "rope_freqs.weight")) return true;
    return row->longrope && (wisp_str_eq(name, "rope_factors_long.weight") || wisp_str_eq(name, "rope_factors_short.weight"));
}

/* "blk.<l>.<suffix>" with l < n_layers and suffix a tensor the row reads. */
static bool layer_tensor_known(const wisp_arch_row *row, const wisp_hparams *hp, wisp_str name) {
    if (name.len < 6 || memcmp(name.ptr, "blk.", 4) != 0) return false;
    size_t i = 4;
    int64_t l = 0;
    while (i < name.len && name.ptr[i] >= '0' && name.ptr[i] <= '9' && l < 100000) l = l * 10 + (name.ptr[i++] - '0');
    if (i == 4 || i >= name.len || name.ptr[i] != '.' || l >= hp->n_layers) return false;
    wisp_str rest = {name.ptr + i + 1, name.len - i - 1};
    for (int lt = 0; lt < WISP_LT_COUNT; lt++)
        if (((row->required | row->optional) >> lt & 1u) && wisp_str_eq(rest, wisp_layer_tensor_name(lt))) return true;
    return false;
}

/* Every tensor of the file must be one wisp computes with: an unknown one
 * (an extra norm, an expert, a bias wisp would not add) would otherwise be
 * ignored and the logits silently wrong. */
static wisp_status check_tensors(const wisp_gguf *g, const wisp_hparams *hp, wisp_error *err) {
    const wisp_arch_row *row = wisp_hparams_row(hp);
    size_t cur = 0;
    wisp_gguf_tensor t;
    while (wisp_gguf_next_tensor(g, &cur, &t))
        if (!global_tensor_known(row, t.name) && !layer_tensor_known(row, hp, t.name))
            return wisp_fail(err, WISP_ERR_UNSUPPORTED,
                             "tensor '%.*s' is not part of architecture '%s' as wisp implements it; refusing to "
                             "compute without it", (int)(t.name.len > 96 ? 96 : t.name.len), t.name.ptr, row->name);
    return WISP_OK;
}

/* Which layer vector a vector tensor fills (-1: a matrix). */
static int vec_of(int lt) {
    switch (lt) {
    case WISP_LT_ATTN_NORM: return WISP_VEC_ATTN_NORM;
    case WISP_LT_FFN_NORM: return WISP_VEC_FFN_NORM;
    case WISP_LT_BIAS_Q: return WISP_VEC_BIAS_Q;
    case WISP_LT_BIAS_K: return WISP_VEC_BIAS_K;
    case WISP_LT_BIAS_V: return WISP_VEC_BIAS_V;
    case WISP_LT_Q_NORM: return WISP_VEC_Q_NORM;
    case WISP_LT_K_NORM: return WISP_VEC_K_NORM;
    case WISP_LT_POST_ATTN_NORM: return WISP_VEC_POST_ATTN_NORM;
    case WISP_LT_POST_FFN_NORM: return WISP_VEC_POST_FFN_NORM;
    default: return -1;
    }
}

/* Projection p of a layer: its own tensor, or its rows of a fused one. */
static wisp_status get_proj(const wisp_gguf *g, const wisp_hparams *hp, int l, int p, wisp_weight *w, wisp_error *err) {
    const char *suffix;
    int64_t row0, rows, cols;
    wisp_proj_source(hp, p, &suffix, &row0, &rows, &cols);
    char name[96];
    wisp_format(name, sizeof name, "blk.%d.%s.weight", l, suffix);
    if (row0 == 0 && strcmp(suffix, proj_gguf_names[p]) == 0) return get_weight(g, name, cols, rows, w, err);
    /* fused: the whole tensor is q+k+v or gate+up rows */
    int64_t total = p <= WISP_PROJ_V ? (int64_t)(hp->n_heads + 2 * hp->n_kv_heads) * hp->head_dim : 2 * (int64_t)hp->ffn_dim;
    wisp_status s = get_weight(g, name, cols, total, w, err);
    if (s) return s;
    w->data += (size_t)row0 * w->row_bytes;
    w->rows = (int32_t)rows;
    return WISP_OK;
}

static wisp_status get_factors(const wisp_gguf *g, const wisp_hparams *hp, const char *name, const float **out,
                               wisp_error *err) {
    return get_vector(g, name, hp->rope_dim / 2, false, out, err);
}

/* The tensors outside the layers: the embedding, the output and its norm,
 * the RoPE factors. */
static wisp_status read_globals(wisp_model *m, const wisp_gguf *g, wisp_error *err) {
    const wisp_hparams *hp = &m->hp;
    wisp_status s;
    if ((s = get_weight(g, "token_embd.weight", hp->dim, hp->n_vocab, &m->tok_embd, err))) return s;
    if (hp->tied_output) m->output = m->tok_embd;
    else if ((s = get_weight(g, "output.weight", hp->dim, hp->n_vocab, &m->output, err))) return s;
    if ((s = get_vector(g, "output_norm.weight", hp->dim, true, &m->output_norm, err))) return s;
    if ((s = get_factors(g, hp, "rope_freqs.weight", &m->rope_freqs, err))) return s;
    if ((s = get_factors(g, hp, "rope_factors_long.weight", &m->rope_long, err))) return s;
    if ((s = get_factors(g, hp, "rope_factors_short.weight", &m->rope_short, err))) return s;
    if (!m->rope_long != !m->rope_short)
        return wisp_fail(err, WISP_ERR_NOT_FOUND, "tensor '%s' is missing (LongRoPE needs both factor sets)",
                         m->rope_long ? "rope_factors_short.weight" : "rope_factors_long.weight");
    return WISP_OK;
}

wisp_status wisp_model_read_layer(const wisp_gguf *g, const wisp_hparams *hp, int l, wisp_layer *L, wisp_error *err) {
    const wisp_arch_row *row = wisp_hparams_row(hp);
    wisp_status s;
    memset(L, 0, sizeof *L);
    for (int p = 0; p < WISP_PROJ_COUNT; p++)
        if ((s = get_proj(g, hp, l, p, &L->proj[p], err))) return s;
    for (int lt = 0; lt < WISP_LT_COUNT; lt++) {
        int v = vec_of(lt);
        if (v < 0 || !((row->required | row->optional) >> lt & 1u)) continue;
        char name[96];
        wisp_format(name, sizeof name, "blk.%d.%s", l, wisp_layer_tensor_name(lt));
        bool required = row->required >> lt & 1u;
        if ((s = get_vector(g, name, wisp_layer_vec_len(hp, v), required, &L->vec[v], err))) return s;
    }
    if (!L->bias_q != !L->bias_k || !L->bias_q != !L->bias_v)
        return wisp_fail(err, WISP_ERR_NOT_FOUND, "layer %d has some but not all of the q/k/v biases", l);
    return WISP_OK;
}

wisp_status wisp_model_layout(wisp_model *m, const wisp_gguf *g, wisp_layout *lay, wisp_error *err) {
    memset(m, 0, sizeof *m);
    m->gguf = *g;
    wisp_status s;
    if ((s = wisp_hparams_read(g, &m->hp, err))) return s;
    const wisp_hparams *hp = &m->hp;
    if (!lay->arena) {
        /* measuring: the table, and what of the tensors outside the layers
         * can be read (planners size from them; a model init refuses is
         * refused there, naming why) */
        wisp_layout_take(lay, (size_t)hp->n_layers, sizeof(wisp_layer), WISP_PART_CONTEXT);
        read_globals(m, g, NULL);
        return WISP_OK;
    }
    if ((s = check_tensors(g, hp, err))) return s;
    if ((s = read_globals(m, g, err))) return s;
    m->layers = (wisp_layer *)wisp_layout_take(lay, (size_t)hp->n_layers, sizeof(wisp_layer), WISP_PART_CONTEXT);
    if (!m->layers) return wisp_fail(err, WISP_ERR_ARENA, "no room for the layer table");
    for (int l = 0; l < hp->n_layers; l++)
        if ((s = wisp_model_read_layer(g, hp, l, &m->layers[l], err))) return s;
    return WISP_OK;
}

wisp_status wisp_model_init(wisp_model *m, const wisp_gguf *g, wisp_arena *arena, wisp_error *err) {
    wisp_layout lay = {.arena = arena};
    return wisp_model_layout(m, g, &lay, err);
}
