/* The backward pass of one layer. On entry tr->dx holds the gradient of the
 * layer's output; on exit the gradient of its input (when a lower layer
 * still has adapters), and every adapted projection of the layer has added
 * its dA and dB. Base weights are frozen: gradients flow through them with
 * the transposed products (dequantized on the fly) but are never formed for
 * them. Work that no gradient depends on is skipped: below the lowest
 * adapted layer, and into the attention block of the lowest one when it has
 * no attention adapter. */
#include "train.h"

/* A block's output y = rmsnorm(p) w where p = W x (+ adapter): recompute p
 * into tr->po and turn dy into dp, in tr->dpo; returns the gradient the
 * projection sees (dy itself without a post-norm). */
static const float *post_norm_back(wisp_train *tr, int32_t l, const train_views *v, int proj, const float *x,
                                   const float *w, const float *dy) {
    if (!w) return dy;
    wisp_train_project(tr, l, proj, x, tr->po, v->h[proj], NULL); /* A x is rewritten with the same values */
    wisp_train_rmsnorm_backward(tr, tr->dpo, tr->po, w, dy, tr->T, false);
    return tr->dpo;
}

void wisp_train_backward_layer(wisp_train *tr, int32_t l, const train_views *v) {
    const wisp_layer *W = &tr->model->layers[l];
    const int32_t *pair = tr->pair_of + (size_t)l * WISP_PROJ_COUNT, T = tr->T;
    /* prompt tuning: down to the input embeddings; prefix tuning: into every layer's attention */
    bool below = l > tr->lowest_layer || (tr->n_virtual > 0 && !tr->prefix);
    bool need_attn = below || tr->prefix || pair[WISP_PROJ_Q] >= 0 || pair[WISP_PROJ_K] >= 0 || pair[WISP_PROJ_V] >= 0 ||
                     pair[WISP_PROJ_O] >= 0;
    bool need_ffn_in = need_attn || pair[WISP_PROJ_GATE] >= 0 || pair[WISP_PROJ_UP] >= 0;

    /* ---- feed-forward block: out = x_mid + W_down (silu(g) u) ---- */
    if (!tr->cfg.checkpointing) wisp_train_act_mul_rows(tr, tr->act, v->g, v->u); /* recomputing did it */
    const float *d_down = post_norm_back(tr, l, v, WISP_PROJ_DOWN, tr->act, W->post_ffn_norm, tr->dx);
    d_down = wisp_train_dora_backward(tr, l, WISP_PROJ_DOWN, tr->act, v->h[WISP_PROJ_DOWN], d_down, NULL);
    if (need_ffn_in) wisp_train_matmul_t(tr, &W->proj[WISP_PROJ_DOWN], d_down, T, tr->dact, false);
    if (pair[WISP_PROJ_DOWN] >= 0)
        wisp_train_lora_backward(tr, pair[WISP_PROJ_DOWN], l, tr->act, v->h[WISP_PROJ_DOWN], d_down,
                                 need_ffn_in ? tr->dact : NULL);
    if (!need_ffn_in) return;
    wisp_train_act_mul_backward(tr, tr->dact, tr->act, v->g, v->u); /* dact := d g, act := d u */
    wisp_train_rmsnorm_rows(tr, tr->xn, v->xmid, W->ffn_norm, T);
    /* DoRA turns d g and d u into the gradients of W x + s B A x, in place */
    wisp_train_dora_backward(tr, l, WISP_PROJ_GATE, tr->xn, v->h[WISP_PROJ_GATE], tr->dact, tr->dact);
    wisp_train_dora_backward(tr, l, WISP_PROJ_UP, tr->xn, v->h[WISP_PROJ_UP], tr->act, tr->act);
    float *dxn = need_attn ? tr->dxn : NULL;
    if (need_attn) {
        wisp_train_matmul_t(tr, &W->proj[WISP_PROJ_GATE], tr->dact, T, tr->dxn, false);
        wisp_train_matmul_t(tr, &W->proj[WISP_PROJ_UP], tr->act, T, tr->dxn, true);
    }
    if (pair[WISP_PROJ_GATE] >= 0)
        wisp_train_lora_backward(tr, pair[WISP_PROJ_GATE], l, tr->xn, v->h[WISP_PROJ_GATE], tr->dact, dxn);
    if (pair[WISP_PROJ_UP] >= 0)
        wisp_train_lora_backward(tr, pair[WISP_PROJ_UP], l, tr->xn, v->h[WISP_PROJ_UP], tr->act, dxn);
    if (!need_attn) return;
    wisp_train_rmsnorm_backward(tr, tr->dx, v->xmid, W->ffn_norm, tr->dxn, T, true); /* + the residual's */

    /* ---- attention block: x_mid = x_in + W_o attention(rope(W_q xn), rope(W_k xn), W_v xn) ---- */
    bool need_qkv = below || tr->prefix || pair[WISP_PROJ_Q] >= 0 || pair[WISP_PROJ_K] >= 0 || pair[WISP_PROJ_V] >= 0;
    const float *d_o = post_norm_back(tr, l, v, WISP_PROJ_O, v->o, W->post_attn_norm, tr->dx);
    d_o = wisp_train_dora_backward(tr, l, WISP_PROJ_O, v->o, v->h[WISP_PROJ_O], d_o, NULL);
    if (need_qkv) wisp_train_matmul_t(tr, &W->proj[WISP_PROJ_O], d_o, T, tr->dout, false);
    if (pair[WISP_PROJ_O] >= 0)
        wisp_train_lora_backward(tr, pair[WISP_PROJ_O], l, v->o, v->h[WISP_PROJ_O], d_o, need_qkv ? tr->dout : NULL);
    if (!need_qkv) return;
    wisp_train_attention_backward(tr, v, tr->dout, wisp_train_layer_windowed(tr, l) ? tr->model->hp.window : 0);
    wisp_train_from_heads(tr, tr->dkh, tr->k);
    wisp_train_from_heads(tr, tr->dvh, tr->v);
    if (tr->prefix) {
        wisp_train_prefix_backward(tr, l);
        if (!below) return; /* layer 0: no adapter wants the input's gradient */
    }
    wisp_train_rmsnorm_rows(tr, tr->xn, v->xin, W->attn_norm, T);
    if (W->q_norm) { /* the head norms' inputs: recomputed (A x is rewritten with the same values) */
        wisp_train_project(tr, l, WISP_PROJ_Q, tr->xn, tr->qraw, v->h[WISP_PROJ_Q], W->bias_q);
        wisp_train_project(tr, l, WISP_PROJ_K, tr->xn, tr->kraw, v->h[WISP_PROJ_K], W->bias_k);
    }
    wisp_train_qk_rope_backward(tr, l, tr->dq, tr->k, tr->qraw, tr->kraw);
    const float *dy[3] = {tr->dq, tr->k, tr->v};
    for (int p = WISP_PROJ_Q; p <= WISP_PROJ_V; p++) /* DoRA: in place, these are free after */
        wisp_train_dora_backward(tr, l, p, tr->xn, v->h[p], dy[p], (float *)(uintptr_t)dy[p]);
    dxn = below ? tr->dxn : NULL;
    if (below) {
        wisp_train_matmul_t(tr, &W->proj[WISP_PROJ_Q], tr->dq, T, tr->dxn, false);
        wisp_train_matmul_t(tr, &W->proj[WISP_PROJ_K], tr->k, T, tr->dxn, true);
        wisp_train_matmul_t(tr, &W->proj[WISP_PROJ_V], tr->v, T, tr->dxn, true);
    }
    for (int p = WISP_PROJ_Q; p <= WISP_PROJ_V; p++)
        if (pair[p] >= 0) wisp_train_lora_backward(tr, pair[p], l, tr->xn, v->h[p], dy[p], dxn);
    if (below) wisp_train_rmsnorm_backward(tr, tr->dx, v->xin, W->attn_norm, tr->dxn, T, true);
}
