/* Hyperparameters and weight tables of llama / qwen2 GGUF models. */
#include "model.h"

#include <string.h>

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

const char *wisp_arch_name(wisp_arch a) { return a == WISP_ARCH_QWEN2 ? "qwen2" : "llama"; }

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

wisp_status wisp_hparams_read(const wisp_gguf *g, wisp_hparams *hp, wisp_error *err) {
    memset(hp, 0, sizeof *hp);
    wisp_str arch_s;
    if (!wisp_gguf_get_str(g, "general.architecture", &arch_s))
        return wisp_fail(err, WISP_ERR_NOT_FOUND, "metadata 'general.architecture' is missing");
    char arch[32];
    if (wisp_str_eq(arch_s, "llama")) hp->arch = WISP_ARCH_LLAMA;
    else if (wisp_str_eq(arch_s, "qwen2")) hp->arch = WISP_ARCH_QWEN2;
    else
        return wisp_fail(err, WISP_ERR_UNSUPPORTED,
                         "architecture '%.*s' is not supported (wisp runs 'llama' and 'qwen2')",
                         (int)(arch_s.len > 64 ? 64 : arch_s.len), arch_s.ptr);
    wisp_format(arch, sizeof arch, "%s", wisp_arch_name(hp->arch));

    wisp_status s;
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
    wisp_str scaling;
    if (wisp_gguf_get_str(g, arch_key(key, sizeof key, arch, "rope.scaling.type"), &scaling) &&
        !wisp_str_eq(scaling, "none"))
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "rope scaling '%.*s' is not supported yet",
                         (int)(scaling.len > 32 ? 32 : scaling.len), scaling.ptr);
    hp->rope_neox = hp->arch == WISP_ARCH_QWEN2;

    wisp_gguf_tensor t;
    if (!wisp_gguf_find_tensor(g, "token_embd.weight", &t))
        return wisp_fail(err, WISP_ERR_NOT_FOUND, "tensor 'token_embd.weight' is missing");
    if (t.ne[1] < 1 || t.ne[1] > (1 << 24))
        return wisp_fail(err, WISP_ERR_SHAPE, "token_embd.weight has %lld rows", (long long)t.ne[1]);
    hp->n_vocab = (int32_t)t.ne[1];
    hp->tied_output = !wisp_gguf_find_tensor(g, "output.weight", &t);
    return WISP_OK;
}

size_t wisp_model_table_bytes(const wisp_hparams *hp) {
    return wisp_bytes_of((size_t)hp->n_layers, sizeof(wisp_layer));
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

wisp_status wisp_model_init(wisp_model *m, const wisp_gguf *g, wisp_arena *arena, wisp_error *err) {
    memset(m, 0, sizeof *m);
    m->gguf = *g;
    wisp_status s;
    if ((s = wisp_hparams_read(g, &m->hp, err))) return s;
    const wisp_hparams *hp = &m->hp;
    int64_t q_dim = (int64_t)hp->n_heads * hp->head_dim;
    int64_t kv_dim = (int64_t)hp->n_kv_heads * hp->head_dim;

    if ((s = get_weight(g, "token_embd.weight", hp->dim, hp->n_vocab, &m->tok_embd, err))) return s;
    if (hp->tied_output) m->output = m->tok_embd;
    else if ((s = get_weight(g, "output.weight", hp->dim, hp->n_vocab, &m->output, err))) return s;
    if ((s = get_vector(g, "output_norm.weight", hp->dim, true, &m->output_norm, err))) return s;

    m->layers = (wisp_layer *)wisp_arena_alloc(arena, wisp_model_table_bytes(hp), WISP_PART_CONTEXT);
    if (!m->layers) return wisp_fail(err, WISP_ERR_ARENA, "no room for the layer table");
    const int64_t shapes[WISP_PROJ_COUNT][2] = {
        {hp->dim, q_dim}, {hp->dim, kv_dim}, {hp->dim, kv_dim}, {q_dim, hp->dim},
        {hp->dim, hp->ffn_dim}, {hp->dim, hp->ffn_dim}, {hp->ffn_dim, hp->dim}};
    bool biases = hp->arch == WISP_ARCH_QWEN2;
    for (int l = 0; l < hp->n_layers; l++) {
        wisp_layer *L = &m->layers[l];
        char name[96];
        for (int p = 0; p < WISP_PROJ_COUNT; p++) {
            wisp_format(name, sizeof name, "blk.%d.%s.weight", l, proj_gguf_names[p]);
            if ((s = get_weight(g, name, shapes[p][0], shapes[p][1], &L->proj[p], err))) return s;
        }
        wisp_format(name, sizeof name, "blk.%d.attn_norm.weight", l);
        if ((s = get_vector(g, name, hp->dim, true, &L->attn_norm, err))) return s;
        wisp_format(name, sizeof name, "blk.%d.ffn_norm.weight", l);
        if ((s = get_vector(g, name, hp->dim, true, &L->ffn_norm, err))) return s;
        wisp_format(name, sizeof name, "blk.%d.attn_q.bias", l);
        if ((s = get_vector(g, name, q_dim, biases, &L->bias_q, err))) return s;
        wisp_format(name, sizeof name, "blk.%d.attn_k.bias", l);
        if ((s = get_vector(g, name, kv_dim, biases, &L->bias_k, err))) return s;
        wisp_format(name, sizeof name, "blk.%d.attn_v.bias", l);
        if ((s = get_vector(g, name, kv_dim, biases, &L->bias_v, err))) return s;
    }
    return WISP_OK;
}
