/* The architecture table: one row per GGUF `general.architecture` that wisp
 * runs, holding every fact in which the families differ — the tensors of a
 * layer (and which are optional), the activation, the RoPE pairing and
 * scaling it accepts, the attention variants, the embedding scale and the
 * metadata keys that change the math. Model loading, planning, weight
 * packing, the forward pass and training read the row; adding a family that
 * needs no new operation is adding a row.
 *
 * Norm convention: every family's norms are RMSNorm `x / rms(x) * w` with
 * `w` exactly as stored. Gemma's HF weights compute `x * (1 + w)`, but
 * llama.cpp's converter already stores `1 + w`, so no row adds anything. */
#ifndef WISP_ARCH_H
#define WISP_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Tensors of one layer ("blk.N.<name>"), as bits of a row's masks. */
typedef enum wisp_layer_tensor {
    WISP_LT_ATTN_NORM, WISP_LT_Q, WISP_LT_K, WISP_LT_V, WISP_LT_QKV, WISP_LT_O,
    WISP_LT_BIAS_Q, WISP_LT_BIAS_K, WISP_LT_BIAS_V, WISP_LT_Q_NORM, WISP_LT_K_NORM, WISP_LT_POST_ATTN_NORM,
    WISP_LT_FFN_NORM, WISP_LT_GATE, WISP_LT_UP, WISP_LT_GATE_UP, WISP_LT_DOWN, WISP_LT_POST_FFN_NORM,
    WISP_LT_COUNT
} wisp_layer_tensor;

#define WISP_LT(x) (1u << WISP_LT_##x)

typedef enum wisp_activation { WISP_ACT_SILU, WISP_ACT_GELU_TANH } wisp_activation;

/* Which layers `<arch>.attention.sliding_window` restricts. */
typedef enum wisp_window_rule {
    WISP_WINDOW_NONE,    /* the key is refused */
    WISP_WINDOW_ALL,     /* every layer (phi3) */
    WISP_WINDOW_EVEN,    /* layers 0, 2, 4, ... (gemma2) */
    WISP_WINDOW_PATTERN  /* layer l iff l % pattern < pattern - 1 (gemma3; attention.sliding_window_pattern, default 6) */
} wisp_window_rule;

typedef struct wisp_arch_row {
    const char *name;        /* general.architecture */
    uint32_t required;       /* WISP_LT bits every layer must have */
    uint32_t optional;       /* WISP_LT bits a layer may have */
    wisp_activation act;     /* of the gated feed-forward: act(gate) * up */
    bool rope_neox;          /* rotate (i, i + n/2) pairs, else (2i, 2i + 1) */
    bool rope_freqs;         /* accepts rope_freqs.weight (Llama 3.x frequency factors) */
    bool longrope;           /* accepts rope_factors_long/short.weight and rope.scaling.attn_factor (Phi-3) */
    bool yarn;               /* accepts rope.scaling.type yarn and rope.scaling.attn_factor (llama.cpp's
                              * builder for the family passes YaRN's parameters to its RoPE) */
    bool embed_scale;        /* the embedding is multiplied by sqrt(dim) */
    bool softcaps;           /* attn_logit_softcapping and final_logit_softcapping keys */
    wisp_window_rule window;
    bool rope_base_swa;      /* windowed layers rotate with rope.freq_base_swa (default 10000) */
    /* query_pre_attn_scalar is dim / heads instead of head_dim for this many
     * layers (gemma2 27B: 46, gemma3 27B: 62), as llama.cpp decides; 0: never */
    int32_t scale_by_dim_layers;
} wisp_arch_row;

/* The row of `name` (length len), or NULL when wisp does not run it. */
const wisp_arch_row *wisp_arch_find(const char *name, size_t len);
/* Row i of the table (NULL past the end), for listings. */
const wisp_arch_row *wisp_arch_at(int i);

/* "attn_q", "attn_qkv", ... of a layer tensor, and whether it is a weight
 * (2-D) rather than a norm or bias vector. */
const char *wisp_layer_tensor_name(int lt);
bool wisp_layer_tensor_is_matrix(int lt);

#endif
