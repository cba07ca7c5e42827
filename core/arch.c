/* The rows of the architecture table (arch.h). The order is wisp_arch's. */
#include "arch.h"

#include <string.h>

#define LLAMA_LAYER (WISP_LT(ATTN_NORM) | WISP_LT(Q) | WISP_LT(K) | WISP_LT(V) | WISP_LT(O) | WISP_LT(FFN_NORM) | \
                     WISP_LT(GATE) | WISP_LT(UP) | WISP_LT(DOWN))
#define QKV_BIASES (WISP_LT(BIAS_Q) | WISP_LT(BIAS_K) | WISP_LT(BIAS_V))
#define QK_NORMS (WISP_LT(Q_NORM) | WISP_LT(K_NORM))
#define POST_NORMS (WISP_LT(POST_ATTN_NORM) | WISP_LT(POST_FFN_NORM))

static const wisp_arch_row rows[] = {
    /* llama.cpp's llama takes optional q/k/v biases; Llama 3.x adds rope_freqs */
    {.name = "llama", .required = LLAMA_LAYER, .optional = QKV_BIASES, .act = WISP_ACT_SILU, .rope_freqs = true,
     .yarn = true},
    /* Qwen2.5's long-context GGUFs carry YaRN keys */
    {.name = "qwen2", .required = LLAMA_LAYER | QKV_BIASES, .act = WISP_ACT_SILU, .rope_neox = true, .yarn = true},
    /* per-head q/k RMSNorm before RoPE; head_dim from attention.key_length */
    {.name = "qwen3", .required = LLAMA_LAYER | QK_NORMS, .act = WISP_ACT_SILU, .rope_neox = true},
    {.name = "gemma2", .required = LLAMA_LAYER | POST_NORMS, .act = WISP_ACT_GELU_TANH, .rope_neox = true,
     .embed_scale = true, .softcaps = true, .window = WISP_WINDOW_EVEN, .scale_by_dim_layers = 46},
    {.name = "gemma3", .required = LLAMA_LAYER | POST_NORMS | QK_NORMS, .act = WISP_ACT_GELU_TANH, .rope_neox = true,
     .embed_scale = true, .window = WISP_WINDOW_PATTERN, .rope_base_swa = true, .scale_by_dim_layers = 62},
    /* fused attn_qkv (rows q, k, v) and ffn_up (rows gate, up) */
    {.name = "phi3",
     .required = WISP_LT(ATTN_NORM) | WISP_LT(QKV) | WISP_LT(O) | WISP_LT(FFN_NORM) | WISP_LT(GATE_UP) | WISP_LT(DOWN),
     .act = WISP_ACT_SILU, .rope_neox = true, .longrope = true, .window = WISP_WINDOW_ALL},
};
#define N_ROWS ((int)(sizeof rows / sizeof rows[0]))

const wisp_arch_row *wisp_arch_find(const char *name, size_t len) {
    for (int i = 0; i < N_ROWS; i++)
        if (strlen(rows[i].name) == len && memcmp(rows[i].name, name, len) == 0) return &rows[i];
    return NULL;
}

const wisp_arch_row *wisp_arch_at(int i) { return i >= 0 && i < N_ROWS ? &rows[i] : NULL; }

static const struct {
    const char *name;
    bool matrix;
} layer_tensors[WISP_LT_COUNT] = {
    [WISP_LT_ATTN_NORM] = {"attn_norm.weight", false},
    [WISP_LT_Q] = {"attn_q.weight", true},
    [WISP_LT_K] = {"attn_k.weight", true},
    [WISP_LT_V] = {"attn_v.weight", true},
    [WISP_LT_QKV] = {"attn_qkv.weight", true},
    [WISP_LT_O] = {"attn_output.weight", true},
    [WISP_LT_BIAS_Q] = {"attn_q.bias", false},
    [WISP_LT_BIAS_K] = {"attn_k.bias", false},
    [WISP_LT_BIAS_V] = {"attn_v.bias", false},
    [WISP_LT_Q_NORM] = {"attn_q_norm.weight", false},
    [WISP_LT_K_NORM] = {"attn_k_norm.weight", false},
    [WISP_LT_POST_ATTN_NORM] = {"post_attention_norm.weight", false},
    [WISP_LT_FFN_NORM] = {"ffn_norm.weight", false},
    [WISP_LT_GATE] = {"ffn_gate.weight", true},
    [WISP_LT_UP] = {"ffn_up.weight", true},
    [WISP_LT_GATE_UP] = {"ffn_up.weight", true}, /* phi3: gate and up stacked in one tensor */
    [WISP_LT_DOWN] = {"ffn_down.weight", true},
    [WISP_LT_POST_FFN_NORM] = {"post_ffw_norm.weight", false},
};

const char *wisp_layer_tensor_name(int lt) { return lt >= 0 && lt < WISP_LT_COUNT ? layer_tensors[lt].name : "?"; }
bool wisp_layer_tensor_is_matrix(int lt) { return lt >= 0 && lt < WISP_LT_COUNT && layer_tensors[lt].matrix; }
