/* The training forward pass of one layer over all T token rows of a
 * micro-step (B sequences of S positions, each attending causally to its
 * own earlier positions), saving what the backward pass needs. The
 * arithmetic is the inference path's (forward.c): the same kernels, the same
 * flash attention job, the same order of additions, so a trained adapter
 * sees at inference exactly what it was trained on. */
#include <math.h>
#include <string.h>

#include "attention.h"
#include "rope.h"
#include "train.h"

static bool views_in_scratch(const wisp_train *tr) {
    return tr->cfg.checkpointing || tr->cfg.act_type != WISP_TYPE_F32;
}

void wisp_train_views_of(wisp_train *tr, int32_t l, train_views *v) {
    const train_saved *s = &tr->saved[l];
    bool f32 = tr->cfg.act_type == WISP_TYPE_F32;
    memset(v, 0, sizeof *v);
    v->xin = f32 ? (float *)s->x_in : tr->x;
    v->xout = f32 && l + 1 < tr->L ? (float *)tr->saved[l + 1].x_in : tr->x;
    if (!views_in_scratch(tr)) {
        v->q = s->q, v->kh = s->kh, v->vh = s->vh, v->o = s->o, v->xmid = s->x_mid, v->g = s->g, v->u = s->u;
    } else {
        v->q = tr->w_q, v->kh = tr->w_kh, v->vh = tr->w_vh, v->o = tr->w_o;
        v->xmid = tr->w_xmid, v->g = tr->w_g, v->u = tr->w_u;
    }
    v->lse = tr->cfg.checkpointing ? tr->w_lse : s->lse;
    for (int p = 0; p < WISP_PROJ_COUNT; p++) v->h[p] = tr->cfg.checkpointing ? tr->w_h[p] : s->h[p];
}

void wisp_train_embed(wisp_train *tr) {
    train_views v;
    wisp_train_views_of(tr, 0, &v);
    for (int32_t t = 0; t < tr->T; t++) {
        int32_t b = t / tr->S, s = t % tr->S;
        float *row = v.xin + (size_t)t * tr->D;
        if (s < tr->n_virtual && tr->prefix) /* prefix tuning: an input nobody reads (train_prefix.c) */
            memset(row, 0, (size_t)tr->D * sizeof(float));
        else if (s < tr->n_virtual) /* prompt tuning: the learned rows come first (in the embedding's unscaled space) */
            memcpy(row, tr->prompt + (size_t)s * tr->D, (size_t)tr->D * sizeof(float));
        else
            wisp_embed_row(&tr->exec, &tr->model->tok_embd, tr->tokens[(size_t)b * tr->stride + s - tr->n_virtual], row);
    }
    float scale = tr->model->hp.embed_scale;
    if (scale != 1.0f) tr->exec.k.scale_f32(v.xin, scale, (int64_t)tr->T * tr->D);
}

bool wisp_train_layer_windowed(const wisp_train *tr, int32_t l) { return wisp_layer_windowed(&tr->model->hp, l); }

const float *wisp_train_rope_of(const wisp_train *tr, int32_t l) {
    return tr->rope_swa && wisp_train_layer_windowed(tr, l) ? tr->rope_swa : tr->rope;
}

static void add_rows(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}

static void attention(wisp_train *tr, const train_views *v, int32_t window) {
    size_t seq_q = (size_t)tr->S * tr->Q, seq_kv = (size_t)tr->S * tr->KV;
    for (int32_t b = 0; b < tr->n_seq; b++) {
        wisp_attention_args a = {
            .k = &tr->exec.k,
            .q = v->q + b * seq_q,
            .out = v->o + b * seq_q,
            .k_cache = v->kh + b * seq_kv,
            .v_cache = v->vh + b * seq_kv,
            .kv_stride = tr->S,
            .kv_f16 = 0,
            .n_tok = tr->S,
            .pos0 = 0,
            .n_heads = tr->H,
            .n_kv_heads = tr->KVH,
            .head_dim = tr->hd,
            .scale = tr->model->hp.attn_scale,
            .softcap = tr->model->hp.attn_softcap,
            .window = window,
            .scores = tr->scores,
            .block = WISP_ATTN_BLOCK,
            .lse = v->lse + (size_t)b * tr->S * tr->H,
        };
        wisp_exec_parallel(&tr->exec, wisp_attention_job, &a);
    }
}

/* The arrays a layer saves in reduced precision, with their views and widths. */
typedef struct saved_array {
    void *saved;
    float *view;
    int32_t width;
} saved_array;

enum { N_SAVED_ARRAYS = 7 };

static void saved_arrays(const wisp_train *tr, const train_saved *s, const train_views *v, saved_array a[N_SAVED_ARRAYS]) {
    a[0] = (saved_array){s->q, v->q, tr->Q};
    a[1] = (saved_array){s->kh, v->kh, tr->KV};
    a[2] = (saved_array){s->vh, v->vh, tr->KV};
    a[3] = (saved_array){s->o, v->o, tr->Q};
    a[4] = (saved_array){s->x_mid, v->xmid, tr->D};
    a[5] = (saved_array){s->g, v->g, tr->F};
    a[6] = (saved_array){s->u, v->u, tr->F};
}

void wisp_train_forward_layer(wisp_train *tr, int32_t l, const train_views *v, train_pass pass) {
    const wisp_layer *W = &tr->model->layers[l];
    const train_saved *s = &tr->saved[l];
    size_t T = (size_t)tr->T;
    if (pass == TRAIN_PASS_SAVE && s->x_in != v->xin) wisp_train_save_rows(tr, s->x_in, v->xin, T * (size_t)tr->D);

    wisp_train_rmsnorm_rows(tr, tr->xn, v->xin, W->attn_norm, tr->T);
    wisp_train_project(tr, l, WISP_PROJ_Q, tr->xn, v->q, v->h[WISP_PROJ_Q], W->bias_q);
    wisp_train_project(tr, l, WISP_PROJ_K, tr->xn, tr->k, v->h[WISP_PROJ_K], W->bias_k);
    wisp_train_project(tr, l, WISP_PROJ_V, tr->xn, tr->v, v->h[WISP_PROJ_V], W->bias_v);
    wisp_train_qk_rope_rows(tr, l, v->q, tr->k);
    if (tr->prefix) wisp_train_prefix_forward(tr, l);
    wisp_train_to_heads(tr, tr->k, v->kh);
    wisp_train_to_heads(tr, tr->v, v->vh);
    attention(tr, v, wisp_train_layer_windowed(tr, l) ? tr->model->hp.window : 0);
    if (W->post_attn_norm) {
        wisp_train_project(tr, l, WISP_PROJ_O, v->o, tr->po, v->h[WISP_PROJ_O], NULL);
        wisp_train_rmsnorm_rows(tr, v->xmid, tr->po, W->post_attn_norm, tr->T);
    } else {
        wisp_train_project(tr, l, WISP_PROJ_O, v->o, v->xmid, v->h[WISP_PROJ_O], NULL);
    }
    add_rows(v->xmid, v->xin, T * (size_t)tr->D);

    wisp_train_rmsnorm_rows(tr, tr->xn, v->xmid, W->ffn_norm, tr->T);
    wisp_train_project(tr, l, WISP_PROJ_GATE, tr->xn, v->g, v->h[WISP_PROJ_GATE], NULL);
    wisp_train_project(tr, l, WISP_PROJ_UP, tr->xn, v->u, v->h[WISP_PROJ_UP], NULL);
    wisp_train_act_mul_rows(tr, tr->act, v->g, v->u);
    int32_t down = tr->pair_of[l * WISP_PROJ_COUNT + WISP_PROJ_DOWN];
    if (pass == TRAIN_PASS_RECOMPUTE) { /* the layer's output is known; only A x of ffn_down is missing */
        if (down >= 0) wisp_train_lora_forward(tr, down, l, tr->act, v->h[WISP_PROJ_DOWN], NULL);
        return;
    }
    if (W->post_ffn_norm) {
        wisp_train_project(tr, l, WISP_PROJ_DOWN, tr->act, tr->po, v->h[WISP_PROJ_DOWN], NULL);
        wisp_train_rmsnorm_rows(tr, v->xout, tr->po, W->post_ffn_norm, tr->T);
    } else {
        wisp_train_project(tr, l, WISP_PROJ_DOWN, tr->act, v->xout, v->h[WISP_PROJ_DOWN], NULL);
    }
    add_rows(v->xout, v->xmid, T * (size_t)tr->D);

    if (pass != TRAIN_PASS_SAVE || tr->cfg.checkpointing || tr->cfg.act_type == WISP_TYPE_F32) return;
    saved_array a[N_SAVED_ARRAYS];
    saved_arrays(tr, s, v, a);
    for (int i = 0; i < N_SAVED_ARRAYS; i++) wisp_train_save_rows(tr, a[i].saved, a[i].view, T * (size_t)a[i].width);
}

void wisp_train_load_layer(wisp_train *tr, int32_t l, const train_views *v) {
    const train_saved *s = &tr->saved[l];
    size_t T = (size_t)tr->T;
    if (s->x_in != v->xin) wisp_train_load_rows(tr, v->xin, s->x_in, T * (size_t)tr->D);
    if (tr->cfg.checkpointing) {
        wisp_train_forward_layer(tr, l, v, TRAIN_PASS_RECOMPUTE);
        return;
    }
    if (tr->cfg.act_type == WISP_TYPE_F32) return;
    saved_array a[N_SAVED_ARRAYS];
    saved_arrays(tr, s, v, a);
    for (int i = 0; i < N_SAVED_ARRAYS; i++) wisp_train_load_rows(tr, a[i].view, a[i].saved, T * (size_t)a[i].width);
}
