/* One forward step of a llama / qwen2 model over a batch of tokens:
 * embeddings, then per layer RMSNorm -> q,k,v (+bias) -> RoPE -> KV cache ->
 * flash attention -> output projection + residual -> RMSNorm -> SwiGLU FFN +
 * residual; then the final norm and the logits. */
#include <math.h>
#include <string.h>

#include "attention.h"
#include "context.h"
#include "half.h"
#include "rope.h"

/* Row `id` of the token embedding as floats (any weight type). */
static void embed_row(const wisp_exec *e, const wisp_weight *w, int32_t id, float *out) {
    const uint8_t *row = w->data + (size_t)id * w->row_bytes;
    switch (w->type) {
    case WISP_TYPE_F32: memcpy(out, row, (size_t)w->cols * sizeof(float)); break;
    case WISP_TYPE_F16: e->k.f16_to_f32((const uint16_t *)(const void *)row, out, w->cols); break;
    case WISP_TYPE_BF16: e->k.bf16_to_f32((const uint16_t *)(const void *)row, out, w->cols); break;
    default: wisp_type_info_of(w->type)->dequantize(row, out, w->cols); break;
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

/* Copy this step's keys and values into the cache, per kv head. */
static void store_kv(wisp_ctx *ctx, int32_t layer, int32_t T) {
    const wisp_hparams *hp = &ctx->model.hp;
    int32_t hd = hp->head_dim;
    size_t elem = ctx->kv_elem_bytes;
    for (int32_t h = 0; h < hp->n_kv_heads; h++) {
        size_t head = ((size_t)layer * hp->n_kv_heads + h) * (size_t)ctx->cfg.n_ctx;
        for (int32_t t = 0; t < T; t++) {
            size_t off = (head + (size_t)(ctx->n_past + t)) * hd * elem;
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

static void attention(wisp_ctx *ctx, int32_t layer, int32_t T) {
    const wisp_hparams *hp = &ctx->model.hp;
    size_t head_bytes = (size_t)ctx->cfg.n_ctx * hp->head_dim * ctx->kv_elem_bytes;
    size_t layer_off = (size_t)layer * hp->n_kv_heads * head_bytes;
    wisp_attention_args a = {
        .k = &ctx->exec.k,
        .q = ctx->s.q,
        .out = ctx->s.xb,
        .k_cache = (const uint8_t *)ctx->k_cache + layer_off,
        .v_cache = (const uint8_t *)ctx->v_cache + layer_off,
        .kv_stride = ctx->cfg.n_ctx,
        .kv_f16 = ctx->kv_elem_bytes == 2,
        .n_tok = T,
        .pos0 = ctx->n_past,
        .n_heads = hp->n_heads,
        .n_kv_heads = hp->n_kv_heads,
        .head_dim = hp->head_dim,
        .scale = 1.0f / sqrtf((float)hp->head_dim),
        .scores = ctx->s.attn,
        .block = WISP_ATTN_BLOCK,
        .lse = NULL,
    };
    wisp_exec_parallel(&ctx->exec, wisp_attention_job, &a);
}

static void norm_rows(const wisp_exec *e, float *y, const float *x, const float *w, int32_t T, int32_t n, float eps) {
    for (int32_t t = 0; t < T; t++) e->k.rmsnorm(y + (size_t)t * n, x + (size_t)t * n, w, n, eps);
}

wisp_status wisp_forward_step(wisp_ctx *ctx, const int32_t *tokens, int32_t T, wisp_error *err) {
    const wisp_model *m = &ctx->model;
    const wisp_hparams *hp = &m->hp;
    wisp_exec *e = &ctx->exec;
    wisp_scratch *s = &ctx->s;
    const int32_t dim = hp->dim, q_dim = ctx->q_dim, kv_dim = ctx->kv_dim, ffn = hp->ffn_dim;
    if (T <= 0 || T > ctx->cfg.n_batch || ctx->n_past + T > ctx->cfg.n_ctx)
        return wisp_fail(err, WISP_ERR_INTERNAL, "forward step of %d tokens does not fit", T);

    for (int32_t t = 0; t < T; t++) embed_row(e, &m->tok_embd, tokens[t], s->x + (size_t)t * dim);
    wisp_rope_table(s->rope, ctx->n_past, T, hp->rope_dim, hp->rope_base);

    for (int32_t l = 0; l < hp->n_layers; l++) {
        const wisp_layer *L = &m->layers[l];
        norm_rows(e, s->xb, s->x, L->attn_norm, T, dim, hp->rms_eps);
        wisp_exec_matmul(e, &L->proj[WISP_PROJ_Q], s->xb, dim, T, s->q, q_dim);
        wisp_exec_matmul(e, &L->proj[WISP_PROJ_K], s->xb, dim, T, s->k, kv_dim);
        wisp_exec_matmul(e, &L->proj[WISP_PROJ_V], s->xb, dim, T, s->v, kv_dim);
        add_bias(s->q, L->bias_q, T, q_dim);
        add_bias(s->k, L->bias_k, T, kv_dim);
        add_bias(s->v, L->bias_v, T, kv_dim);
        for (int32_t t = 0; t < T; t++) {
            const float *cs = s->rope + (size_t)t * hp->rope_dim;
            wisp_rope_apply(s->q + (size_t)t * q_dim, hp->n_heads, hp->head_dim, hp->rope_dim, cs, hp->rope_neox, false);
            wisp_rope_apply(s->k + (size_t)t * kv_dim, hp->n_kv_heads, hp->head_dim, hp->rope_dim, cs, hp->rope_neox,
                            false);
        }
        store_kv(ctx, l, T);
        attention(ctx, l, T);
        wisp_exec_matmul(e, &L->proj[WISP_PROJ_O], s->xb, q_dim, T, s->proj, dim);
        add_rows(s->x, s->proj, T, dim);

        norm_rows(e, s->xb, s->x, L->ffn_norm, T, dim, hp->rms_eps);
        wisp_exec_matmul(e, &L->proj[WISP_PROJ_GATE], s->xb, dim, T, s->gate, ffn);
        wisp_exec_matmul(e, &L->proj[WISP_PROJ_UP], s->xb, dim, T, s->up, ffn);
        for (int32_t t = 0; t < T; t++) e->k.silu_mul(s->gate + (size_t)t * ffn, s->up + (size_t)t * ffn, ffn);
        wisp_exec_matmul(e, &L->proj[WISP_PROJ_DOWN], s->gate, ffn, T, s->proj, dim);
        add_rows(s->x, s->proj, T, dim);
    }

    /* logits: every position when asked for, else only the last one */
    int32_t first = ctx->cfg.logits_all ? 0 : T - 1, n_out = T - first;
    norm_rows(e, s->xb, s->x + (size_t)first * dim, m->output_norm, n_out, dim, hp->rms_eps);
    wisp_exec_matmul(e, &m->output, s->xb, dim, n_out, ctx->logits, hp->n_vocab);
    ctx->n_past += T;
    ctx->last_step = T;
    return WISP_OK;
}
