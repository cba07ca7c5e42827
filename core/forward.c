/* One forward step of a model of the architecture table over a batch of
 * tokens: embeddings (x sqrt(dim) for gemma), then per layer RMSNorm ->
 * q,k,v (+bias) -> per-head q/k norms (qwen3, gemma3) -> RoPE -> KV cache ->
 * flash attention (windowed, soft-capped where the family says) -> output
 * projection (-> post-norm) + residual -> RMSNorm -> gated FFN (SiLU or
 * GELU-tanh) (-> post-norm) + residual; then the final norm, the logits and
 * their soft-cap. Each variant costs nothing where the family lacks it. */
#include <math.h>
#include <string.h>

#include "attention.h"
#include "context.h"
#include "half.h"
#include "layer_ops.h"
#include "rope.h"

#define UNPACKED_BLOCK_MAX 256 /* bytes: the largest block a level packs (Q6_K, 210) */

/* Row `id` of the token embedding as floats (any weight type). A packed
 * embedding (the tied output's copy) is read there, a block at a time,
 * since the file's pages under it were released after packing. */
void wisp_embed_row(const wisp_exec *e, const wisp_weight *w, int32_t id, float *out) {
    const wisp_type_info *ti = wisp_type_info_of(w->type);
    if (w->packed && e->k.packing[w->type].unpack_block && ti->block_bytes <= UNPACKED_BLOCK_MAX) {
        uint8_t block[UNPACKED_BLOCK_MAX];
        for (int64_t b = 0; b < w->cols / ti->block_elems; b++) {
            e->k.packing[w->type].unpack_block(w->packed, w->cols, id, b, block);
            ti->dequantize(block, out + b * ti->block_elems, ti->block_elems);
        }
        return;
    }
    const uint8_t *row = w->data + (size_t)id * w->row_bytes;
    switch (w->type) {
    case WISP_TYPE_F32: memcpy(out, row, (size_t)w->cols * sizeof(float)); break;
    case WISP_TYPE_F16: e->k.f16_to_f32((const uint16_t *)(const void *)row, out, w->cols); break;
    case WISP_TYPE_BF16: e->k.bf16_to_f32((const uint16_t *)(const void *)row, out, w->cols); break;
    default: ti->dequantize(row, out, w->cols); break;
    }
}

static void add_rows(float *y, const float *x, int32_t n_rows, int32_t n) {
    for (size_t i = 0; i < (size_t)n_rows * (size_t)n; i++) y[i] += x[i];
}

static void add_bias(float *y, const float *b, int32_t n_rows, int32_t n) {
    if (!b) return;
    for (int32_t t = 0; t < n_rows; t++)
        for (int32_t i = 0; i < n; i++) y[(size_t)t * n + i] += b[i];
}

/* Copy this step's keys and values into the cache, per kv head; `rows` is
 * the layer's positions per head (a ring when fewer than n_ctx). */
static void store_kv(wisp_ctx *ctx, int32_t layer, int32_t T, int32_t rows) {
    const wisp_hparams *hp = &ctx->model.hp;
    int32_t hd = hp->head_dim;
    size_t elem = ctx->kv_elem_bytes, layer_off = wisp_ctx_kv_layer_offset(ctx, layer);
    for (int32_t h = 0; h < hp->n_kv_heads; h++) {
        size_t head = (size_t)h * (size_t)rows;
        for (int32_t t = 0; t < T; t++) {
            int32_t pos = ctx->n_past + t;
            size_t off = layer_off + (head + (size_t)(rows < ctx->cfg.n_ctx ? pos % rows : pos)) * hd * elem;
            const float *ks = ctx->s.k + (size_t)t * ctx->kv_dim + (size_t)h * hd;
            const float *vs = ctx->s.v + (size_t)t * ctx->kv_dim + (size_t)h * hd;
            uint8_t *kd = (uint8_t *)ctx->k_cache + off, *vd = (uint8_t *)ctx->v_cache + off;
            if (elem == 2) {
                ctx->exec.k.f32_to_f16(ks, (uint16_t *)(void *)kd, hd);
                ctx->exec.k.f32_to_f16(vs, (uint16_t *)(void *)vd, hd);
            } else {
                memcpy(kd, ks, (size_t)hd * sizeof(float));
                memcpy(vd, vs, (size_t)hd * sizeof(float));
            }
        }
    }
}

static void attention(wisp_ctx *ctx, int32_t layer, int32_t T, int32_t window, int32_t rows) {
    const wisp_hparams *hp = &ctx->model.hp;
    size_t layer_off = wisp_ctx_kv_layer_offset(ctx, layer);
    wisp_attention_args a = {
        .k = &ctx->exec.k,
        .q = ctx->s.q,
        .out = ctx->s.xb,
        .k_cache = (const uint8_t *)ctx->k_cache + layer_off,
        .v_cache = (const uint8_t *)ctx->v_cache + layer_off,
        .kv_stride = rows,
        .kv_ring = rows < ctx->cfg.n_ctx ? rows : 0,
        .kv_f16 = ctx->kv_elem_bytes == 2,
        .n_tok = T,
        .pos0 = ctx->n_past,
        .n_heads = hp->n_heads,
        .n_kv_heads = hp->n_kv_heads,
        .head_dim = hp->head_dim,
        .scale = hp->attn_scale,
        .softcap = hp->attn_softcap,
        .window = window,
        .scores = ctx->s.attn,
        .block = WISP_ATTN_BLOCK,
        .scores_rows = wisp_attention_score_rows(&ctx->exec.k, ctx->kv_elem_bytes == 2, hp->n_heads, hp->n_kv_heads),
        .kv_f32 = ctx->s.attn_kv,
        .lse = NULL,
    };
    wisp_exec_parallel(&ctx->exec, wisp_attention_job, &a);
}

/* y[i] = W x for n of a layer's projections that read the same input x
 * (proj[i]), plus any attached adapters: one job for the n products. */
static void project(wisp_ctx *ctx, int32_t layer, int n, const int proj[], const float *x, int32_t n_in, int32_t T,
                    float *const y[], const int32_t n_out[]) {
    const wisp_weight *w[WISP_EXEC_MAX_FUSED] = {0};
    int64_t ldy[WISP_EXEC_MAX_FUSED] = {0};
    for (int i = 0; i < n; i++) {
        w[i] = &ctx->model.layers[layer].proj[proj[i]];
        ldy[i] = n_out[i];
    }
    wisp_exec_matmuls(&ctx->exec, n, w, x, n_in, T, y, ldy);
    for (int i = 0; i < n; i++)
        wisp_adapters_apply(&ctx->adapters, &ctx->exec, layer, proj[i], x, n_in, T, y[i], n_out[i]);
}

/* A NaN or Inf weight, or an activation that overflowed, must be an error,
 * never silently sampled from. Checking every matmul's input (and the
 * logits) catches them all: a non-finite product flows into the next input,
 * while quantizing a NaN activation to 8 bits would launder it into finite
 * garbage. The cost is O(dim) per token and layer, next to O(dim^2) work. */
static bool all_finite(const float *v, size_t n) {
    /* An exponent of all ones (Inf or NaN) plus one carries into bit 31.
     * Branch-free blocks of 16 so that the common, all-finite case vectorizes. */
    uint32_t bad = 0, u[16];
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        memcpy(u, v + i, sizeof u);
        for (int k = 0; k < 16; k++) bad |= (u[k] & 0x7f800000u) + 0x00800000u;
    }
    for (; i < n; i++) {
        memcpy(u, v + i, 4);
        bad |= (u[0] & 0x7f800000u) + 0x00800000u;
    }
    return !(bad & 0x80000000u);
}

static wisp_status finite_or_fail(const float *v, int32_t rows, int32_t row_len, int32_t layer, const char *weight,
                                  int32_t pos0, wisp_error *err) {
    if (all_finite(v, (size_t)rows * (size_t)row_len)) return WISP_OK;
    for (size_t i = 0; i < (size_t)rows * (size_t)row_len; i++)
        if (!isfinite(v[i])) {
            const char *what = isnan(v[i]) ? "NaN" : "infinite";
            int32_t pos = pos0 + (int32_t)(i / (size_t)row_len);
            if (!weight)
                return wisp_fail(err, WISP_ERR_NUMERIC, "the logits at position %d are %s: a weight of the model is NaN "
                                                        "or infinite, or an activation overflowed", pos, what);
            char name[48];
            if (layer >= 0) wisp_format(name, sizeof name, "blk.%d.%s", layer, weight);
            else wisp_format(name, sizeof name, "%s", weight);
            return wisp_fail(err, WISP_ERR_NUMERIC, "%s activation reached %s at position %d: a weight of the model "
                                                    "is NaN or infinite, or an activation overflowed",
                             isnan(v[i]) ? "a NaN" : "an infinite", name, pos);
        }
    return WISP_OK;
}

static void norm_rows(const wisp_exec *e, float *y, const float *x, const float *w, int32_t T, int32_t n, float eps) {
    for (int32_t t = 0; t < T; t++) e->k.rmsnorm(y + (size_t)t * n, x + (size_t)t * n, w, n, eps);
}

/* One step over T inputs: token ids, or (tokens NULL) embedding rows. */
static wisp_status forward(wisp_ctx *ctx, const int32_t *tokens, const float *rows, int32_t T, wisp_error *err) {
    const wisp_model *m = &ctx->model;
    const wisp_hparams *hp = &m->hp;
    wisp_exec *e = &ctx->exec;
    wisp_scratch *s = &ctx->s;
    const int32_t dim = hp->dim, q_dim = ctx->q_dim, kv_dim = ctx->kv_dim, ffn = hp->ffn_dim;
    if (T <= 0 || T > ctx->cfg.n_batch || ctx->n_past + T > ctx->cfg.n_ctx)
        return wisp_fail(err, WISP_ERR_INTERNAL, "forward step of %d tokens does not fit", T);

    if (tokens)
        for (int32_t t = 0; t < T; t++) wisp_embed_row(e, &m->tok_embd, tokens[t], s->x + (size_t)t * dim);
    else
        memcpy(s->x, rows, (size_t)T * (size_t)dim * sizeof(float));
    if (hp->embed_scale != 1.0f) e->k.scale_f32(s->x, hp->embed_scale, (int64_t)T * dim);
    const wisp_rope_spec rope = wisp_rope_spec_of(m, ctx->cfg.n_ctx, false);
    wisp_rope_table(s->rope, ctx->n_past, T, &rope);
    if (s->rope_swa) {
        const wisp_rope_spec rope_swa = wisp_rope_spec_of(m, ctx->cfg.n_ctx, true);
        wisp_rope_table(s->rope_swa, ctx->n_past, T, &rope_swa);
    }
    const wisp_activation act = wisp_hparams_row(hp)->act;

    wisp_status st;
    const int32_t pos = ctx->n_past;
    for (int32_t l = 0; l < hp->n_layers; l++) {
        const wisp_layer *L = &m->layers[l];
        norm_rows(e, s->xb, s->x, L->attn_norm, T, dim, hp->rms_eps);
        if ((st = finite_or_fail(s->xb, T, dim, l, "attn_q", pos, err))) return st;
        project(ctx, l, 3, (const int[]){WISP_PROJ_Q, WISP_PROJ_K, WISP_PROJ_V}, s->xb, dim, T,
                (float *const[]){s->q, s->k, s->v}, (const int32_t[]){q_dim, kv_dim, kv_dim});
        add_bias(s->q, L->bias_q, T, q_dim);
        add_bias(s->k, L->bias_k, T, kv_dim);
        add_bias(s->v, L->bias_v, T, kv_dim);
        const bool windowed = wisp_layer_windowed(hp, l);
        const float *rope_table = windowed && s->rope_swa ? s->rope_swa : s->rope;
        for (int32_t t = 0; t < T; t++)
            wisp_layer_qk_rope(&e->k, hp, L, s->q + (size_t)t * q_dim, s->k + (size_t)t * kv_dim,
                               rope_table + (size_t)t * hp->rope_dim);
        const int32_t kv_rows = wisp_layer_kv_positions(hp, l, ctx->cfg.n_ctx, ctx->cfg.n_batch);
        store_kv(ctx, l, T, kv_rows);
        attention(ctx, l, T, windowed ? hp->window : 0, kv_rows);
        if ((st = finite_or_fail(s->xb, T, q_dim, l, "attn_output", pos, err))) return st;
        project(ctx, l, 1, (const int[]){WISP_PROJ_O}, s->xb, q_dim, T, &s->proj, &dim);
        if (L->post_attn_norm) norm_rows(e, s->proj, s->proj, L->post_attn_norm, T, dim, hp->rms_eps);
        add_rows(s->x, s->proj, T, dim);

        norm_rows(e, s->xb, s->x, L->ffn_norm, T, dim, hp->rms_eps);
        if ((st = finite_or_fail(s->xb, T, dim, l, "ffn_gate", pos, err))) return st;
        project(ctx, l, 2, (const int[]){WISP_PROJ_GATE, WISP_PROJ_UP}, s->xb, dim, T, (float *const[]){s->gate, s->up},
                (const int32_t[]){ffn, ffn});
        for (int32_t t = 0; t < T; t++) wisp_act_mul(&e->k, act, s->gate + (size_t)t * ffn, s->up + (size_t)t * ffn, ffn);
        if ((st = finite_or_fail(s->gate, T, ffn, l, "ffn_down", pos, err))) return st;
        project(ctx, l, 1, (const int[]){WISP_PROJ_DOWN}, s->gate, ffn, T, &s->proj, &dim);
        if (L->post_ffn_norm) norm_rows(e, s->proj, s->proj, L->post_ffn_norm, T, dim, hp->rms_eps);
        add_rows(s->x, s->proj, T, dim);
    }

    /* logits: every position when asked for, else only the last one; embeddings stop at the
     * normed hidden states, which stay in s->xb for wisp_hidden */
    const bool hidden = ctx->cfg.hidden_states;
    int32_t first = ctx->cfg.logits_all || hidden ? 0 : T - 1, n_out = T - first;
    norm_rows(e, s->xb, s->x + (size_t)first * dim, m->output_norm, n_out, dim, hp->rms_eps);
    if ((st = finite_or_fail(s->xb, n_out, dim, -1, "output.weight", pos + first, err))) return st;
    if (hidden) {
        ctx->n_past += T;
        ctx->last_step = T;
        return WISP_OK;
    }
    wisp_exec_matmul(e, &m->output, s->xb, dim, n_out, ctx->logits, hp->n_vocab);
    if (hp->final_softcap > 0) wisp_softcap(ctx->logits, (int64_t)n_out * hp->n_vocab, hp->final_softcap);
    if ((st = finite_or_fail(ctx->logits, n_out, hp->n_vocab, -1, NULL, pos + first, err))) return st;
    ctx->n_past += T;
    ctx->last_step = T;
    return WISP_OK;
}

wisp_status wisp_forward_step(wisp_ctx *ctx, const int32_t *tokens, int32_t T, wisp_error *err) {
    return forward(ctx, tokens, NULL, T, err);
}

wisp_status wisp_forward_embeddings(wisp_ctx *ctx, const float *rows, int32_t T, wisp_error *err) {
    return forward(ctx, NULL, rows, T, err);
}
