/* Planning and carving everything LoRA training needs, from one layout
 * function so that the plan and the carve can never disagree: in planning
 * mode it only adds up sizes per part, in carving mode it takes the same
 * sizes from the arena in the same order. Also the config defaults and the
 * adapter's PEFT-style initialisation. */
#include <math.h>
#include <string.h>

#include "attention.h"
#include "matmul_t.h"
#include "rope.h"
#include "train.h"
#include "train_rng.h"

static wisp_status bad(wisp_error *err, const char *what) { return wisp_fail(err, WISP_ERR_ARG, "training: %s", what); }

wisp_status wisp_train_resolve(const wisp_hparams *hp, wisp_config *cfg, wisp_error *err) {
    wisp_train_config *c = &cfg->train;
    if (c->seq_len == 0) return WISP_OK;
    if (c->seq_len < 1 || c->seq_len > 65536) return bad(err, "seq_len must be in 1..65536");
    if (c->micro_batch == 0) c->micro_batch = 1;
    if (c->micro_batch < 1 || c->micro_batch > 4096) return bad(err, "micro_batch must be in 1..4096");
    if (c->virtual_tokens < 0 || c->virtual_tokens > 4096) return bad(err, "virtual_tokens must be in 0..4096");
    int64_t positions = (int64_t)c->seq_len + c->virtual_tokens; /* per sequence, the prompt's included */
    if (positions > 65536) return bad(err, "seq_len + virtual_tokens must be at most 65536");
    if (positions * c->micro_batch > (1 << 20))
        return bad(err, "(seq_len + virtual_tokens) x micro_batch must be at most 1048576 positions");
    if (c->rank == 0) c->rank = 8;
    if (c->rank < 1 || c->rank > 4096) return bad(err, "rank must be in 1..4096");
    if (c->prefix && c->virtual_tokens < 1) return bad(err, "prefix tuning needs virtual_tokens > 0");
    if (c->virtual_tokens > 0) { /* prompt (or prefix) tuning trains the prompt alone */
        const char *what = c->prefix ? "prefix tuning" : "prompt tuning";
        if (c->dora) return wisp_fail(err, WISP_ERR_ARG, "training: %s and DoRA do not combine (choose one method)", what);
        if (c->dropout > 0)
            return wisp_fail(err, WISP_ERR_ARG, "training: LoRA dropout does not apply to %s (use dropout 0)", what);
        if (c->objective != WISP_OBJECTIVE_CAUSAL_LM)
            return wisp_fail(err, WISP_ERR_ARG, "training: DPO with %s is not implemented", what);
        /* a windowed layer would drop the prefix from its ring (and HF's sliding-window masks differ per version) */
        if (c->prefix && hp->window > 0)
            return wisp_fail(err, WISP_ERR_UNSUPPORTED,
                             "training: prefix tuning of a model with sliding-window layers is not implemented");
        if (c->prefix_projection && !c->prefix) return bad(err, "prefix_projection belongs to prefix tuning");
        if (c->prefix_projection && c->encoder_hidden_size == 0) c->encoder_hidden_size = hp->n_kv_heads * hp->head_dim;
        if (c->prefix_projection && (c->encoder_hidden_size < 1 || c->encoder_hidden_size > 65536))
            return bad(err, "encoder_hidden_size must be in 1..65536");
        c->targets = 0;
    } else if (c->targets == 0) {
        c->targets = WISP_TARGETS_ALL;
    }
    if (c->targets & ~WISP_TARGETS_ALL) return bad(err, "targets has bits beyond the seven projections");
    if (c->optimizer != WISP_OPTIMIZER_ADAMW && c->optimizer != WISP_OPTIMIZER_SGD)
        return bad(err, "unknown optimizer");
    if (c->act_type != WISP_TYPE_F32 && c->act_type != WISP_TYPE_BF16 && c->act_type != WISP_TYPE_F16)
        return bad(err, "saved activations must be F32, BF16 or F16");
    int32_t T = (int32_t)positions * c->micro_batch;
    if (c->loss_chunk == 0) { /* each chunk dequantizes the output weight once in the backward pass */
        int64_t fit = ((int64_t)16 << 20) / ((int64_t)hp->n_vocab * 4);
        c->loss_chunk = fit < 1 ? 1 : fit > T ? T : (int32_t)fit;
    }
    if (c->loss_chunk < 1 || c->loss_chunk > T)
        return bad(err, "loss_chunk must be in 1..(seq_len + virtual_tokens) x micro_batch");
    if (c->backward_tile == 0) c->backward_tile = 32768;
    if (c->backward_tile < 256 || c->backward_tile > (1 << 24)) return bad(err, "backward_tile must be in 256..16777216");
    if (c->alpha == 0) c->alpha = 2.0f * (float)c->rank;
    if (!isfinite(c->alpha)) return bad(err, "alpha is not finite");
    if (!(c->dropout >= 0 && c->dropout < 1)) return bad(err, "dropout must be in [0, 1)");
    /* PEFT's DoRA with dropout adds (m/n - 1) W dropout(x) to W x: a second
     * base product wisp does not implement, so it is refused, not approximated */
    if (c->dora && c->dropout > 0) return bad(err, "DoRA with LoRA dropout is not implemented yet (use dropout 0)");
    if (c->lr == 0) c->lr = 1e-3f;
    if (!(c->lr > 0 && isfinite(c->lr))) return bad(err, "the learning rate must be positive");
    if (c->beta1 == 0) c->beta1 = 0.9f;
    if (c->beta2 == 0) c->beta2 = 0.999f;
    if (c->eps == 0) c->eps = 1e-8f;
    if (!(c->beta1 > 0 && c->beta1 < 1 && c->beta2 > 0 && c->beta2 < 1 && c->eps > 0 && isfinite(c->eps)))
        return bad(err, "AdamW needs betas in (0, 1) and a positive eps");
    if (!(c->weight_decay >= 0 && isfinite(c->weight_decay))) return bad(err, "weight_decay must be >= 0");
    if (c->momentum == 0) c->momentum = 0.9f;
    if (c->momentum < 0) c->momentum = -1.0f; /* none, and stays so when resolved again */
    if (!(c->momentum < 1)) return bad(err, "momentum must be below 1");
    if (c->schedule < WISP_SCHEDULE_CONSTANT || c->schedule > WISP_SCHEDULE_ONECYCLE) return bad(err, "unknown schedule");
    if (c->warmup_steps < 0 || c->total_steps < 0) return bad(err, "warmup and total steps must not be negative");
    if (c->schedule != WISP_SCHEDULE_CONSTANT && c->total_steps < 1)
        return bad(err, "this learning-rate schedule needs total_steps");
    if (!(c->min_lr_ratio >= 0 && c->min_lr_ratio <= 1)) return bad(err, "min_lr_ratio must be in [0, 1]");
    if (!(c->clip_norm >= 0 && isfinite(c->clip_norm))) return bad(err, "clip_norm must be >= 0");
    if (c->loss_scale == 0) c->loss_scale = 65536.0f;
    if (!(c->loss_scale >= 1 && isfinite(c->loss_scale))) return bad(err, "loss_scale must be >= 1");
    if (c->loss_scale_window == 0) c->loss_scale_window = 1000;
    if (c->loss_scale_window < 1) return bad(err, "loss_scale_window must be positive");
    if (c->loss_scale_hysteresis == 0) c->loss_scale_hysteresis = 2;
    if (c->loss_scale_hysteresis < 1) return bad(err, "loss_scale_hysteresis must be positive");
    if (c->min_loss_scale == 0) c->min_loss_scale = 1;
    if (!(c->min_loss_scale >= 1 && c->min_loss_scale <= c->loss_scale))
        return bad(err, "min_loss_scale must be in [1, loss_scale]");
    if (c->objective != WISP_OBJECTIVE_CAUSAL_LM && c->objective != WISP_OBJECTIVE_DPO) return bad(err, "unknown objective");
    if (c->objective == WISP_OBJECTIVE_DPO) {
        if (c->micro_batch % 2) return bad(err, "DPO needs an even micro_batch (a chosen and a rejected sequence per pair)");
        if (c->dpo_beta == 0) c->dpo_beta = 0.1f;
        if (!(c->dpo_beta > 0 && isfinite(c->dpo_beta))) return bad(err, "DPO beta must be positive");
        if (c->dpo_loss != WISP_DPO_SIGMOID && c->dpo_loss != WISP_DPO_IPO) return bad(err, "unknown DPO loss type");
        if (!(c->dpo_label_smoothing >= 0 && c->dpo_label_smoothing < 0.5f))
            return bad(err, "DPO label smoothing must be in [0, 0.5)");
        if (c->dpo_loss == WISP_DPO_IPO && c->dpo_label_smoothing != 0)
            return bad(err, "label smoothing applies to the sigmoid DPO loss, not to IPO");
    }
    /* the trained adapter can be attached for generation in the same context */
    if (cfg->max_adapters < 1) cfg->max_adapters = 1;
    if (cfg->max_lora_rank < c->rank) cfg->max_lora_rank = c->rank;
    return WISP_OK;
}

static void proj_shape(const wisp_hparams *hp, int proj, int32_t *n_in, int32_t *n_out) {
    int32_t q = hp->n_heads * hp->head_dim, kv = hp->n_kv_heads * hp->head_dim;
    static const int8_t in_is_q[WISP_PROJ_COUNT] = {0, 0, 0, 1, 0, 0, 0};
    *n_in = proj == WISP_PROJ_DOWN ? hp->ffn_dim : in_is_q[proj] ? q : hp->dim;
    switch (proj) {
    case WISP_PROJ_Q: *n_out = q; break;
    case WISP_PROJ_K:
    case WISP_PROJ_V: *n_out = kv; break;
    case WISP_PROJ_GATE:
    case WISP_PROJ_UP: *n_out = hp->ffn_dim; break;
    default: *n_out = hp->dim; break;
    }
}

static size_t mul(size_t a, size_t b) { return a && b > SIZE_MAX / a ? SIZE_MAX : a * b; }

static void *take(wisp_layout *l, size_t count, size_t elem, int part) {
    return wisp_layout_take(l, count, elem, part);
}

static int popcount7(uint32_t m) {
    int n = 0;
    for (int p = 0; p < WISP_PROJ_COUNT; p++) n += (m >> p) & 1u;
    return n;
}

static size_t param_count(const wisp_hparams *hp, const wisp_train_config *c) {
    size_t per_layer = 0;
    for (int p = 0; p < WISP_PROJ_COUNT; p++) {
        if (!(c->targets & (1u << p))) continue;
        int32_t n_in, n_out;
        proj_shape(hp, p, &n_in, &n_out);
        per_layer += (size_t)c->rank * ((size_t)n_in + (size_t)n_out) + (c->dora ? (size_t)n_out : 0);
    }
    size_t kv = (size_t)hp->n_kv_heads * (size_t)hp->head_dim, width = 2 * (size_t)hp->n_layers * kv;
    size_t per_virtual = c->prefix ? width : (size_t)hp->dim, virt = (size_t)c->virtual_tokens * per_virtual;
    if (c->prefix_projection) { /* e, W1, b1, W2, b2 (the prefix itself is scratch) */
        size_t h = (size_t)c->encoder_hidden_size;
        virt = (size_t)c->virtual_tokens * kv + h * kv + h + mul(width, h) + width;
    }
    return mul(per_layer, (size_t)hp->n_layers) + virt;
}

/* Widest backward tile (columns) over the model's weights. */
static size_t tile_cols_max(const wisp_gguf *g) {
    size_t best = 64, cur = 0;
    wisp_gguf_tensor t;
    while (wisp_gguf_next_tensor(g, &cur, &t))
        if (t.n_dims >= 2 && wisp_type_info_of((int)t.type) && (size_t)wisp_matmul_t_cols((int32_t)t.type) > best)
            best = (size_t)wisp_matmul_t_cols((int32_t)t.type);
    return best;
}

/* The whole training layout; `tr` (the struct, taken by the caller) is NULL
 * when measuring. */
static void layout(wisp_layout *c, const wisp_gguf *g, const wisp_hparams *hp, const wisp_config *cfg,
                   size_t act_row_bytes, wisp_train *tr) {
    const wisp_train_config *tc = &cfg->train;
    size_t S = (size_t)tc->seq_len + (size_t)tc->virtual_tokens; /* positions per sequence */
    size_t f = sizeof(float), T = S * (size_t)tc->micro_batch;
    size_t D = (size_t)hp->dim, Q = (size_t)hp->n_heads * hp->head_dim, KV = (size_t)hp->n_kv_heads * hp->head_dim;
    size_t F = (size_t)hp->ffn_dim, H = (size_t)hp->n_heads, L = (size_t)hp->n_layers, r = (size_t)tc->rank;
    size_t DQ = D > Q ? D : Q, max_in = DQ > F ? DQ : F;
    size_t elem = tc->act_type == WISP_TYPE_F32 ? 4 : 2;
    size_t n_pairs = mul(L, (size_t)popcount7(tc->targets)), n_params = param_count(hp, tc);
    bool views_in_scratch = tc->checkpointing || tc->act_type != WISP_TYPE_F32;

    /* the adapter, its gradients and moments */
    void *params = take(c, n_params, f, WISP_PART_LORA);
    void *pairs = take(c, n_pairs, sizeof(wisp_lora_pair), WISP_PART_LORA);
    void *pair_of = take(c, L * WISP_PROJ_COUNT, sizeof(int32_t), WISP_PART_LORA);
    size_t n_rows = 0, max_out = 0; /* output rows of all pairs (DoRA), and of the widest */
    for (int p = 0; p < WISP_PROJ_COUNT; p++) {
        int32_t n_in, n_out;
        proj_shape(hp, p, &n_in, &n_out);
        if (!(tc->targets & (1u << p))) continue;
        n_rows += (size_t)n_out * L;
        if ((size_t)n_out > max_out) max_out = (size_t)n_out;
    }
    void *dora_norm = tc->dora ? take(c, n_rows, f, WISP_PART_LORA) : NULL;
    void *grad = take(c, n_params, f, WISP_PART_GRADIENTS);
    void *grad_pairs = take(c, n_pairs, sizeof(wisp_lora_pair), WISP_PART_GRADIENTS);
    bool adam = tc->optimizer == WISP_OPTIMIZER_ADAMW;
    void *m1 = adam || tc->momentum > 0 ? take(c, n_params, f, WISP_PART_OPTIMIZER) : NULL;
    void *m2 = adam ? take(c, n_params, f, WISP_PART_OPTIMIZER) : NULL;

    /* saved activations */
    train_saved *saved = take(c, L, sizeof(train_saved), WISP_PART_TRAIN_SCRATCH);
    for (size_t l = 0; l < L; l++) {
        train_saved s;
        memset(&s, 0, sizeof s);
        s.x_in = take(c, T * D, elem, WISP_PART_ACTIVATIONS);
        if (!tc->checkpointing) {
            s.q = take(c, T * Q, elem, WISP_PART_ACTIVATIONS);
            s.kh = take(c, T * KV, elem, WISP_PART_ACTIVATIONS);
            s.vh = take(c, T * KV, elem, WISP_PART_ACTIVATIONS);
            s.o = take(c, T * Q, elem, WISP_PART_ACTIVATIONS);
            s.x_mid = take(c, T * D, elem, WISP_PART_ACTIVATIONS);
            s.g = take(c, T * F, elem, WISP_PART_ACTIVATIONS);
            s.u = take(c, T * F, elem, WISP_PART_ACTIVATIONS);
            s.lse = take(c, T * H, f, WISP_PART_ACTIVATIONS);
            for (int p = 0; p < WISP_PROJ_COUNT; p++)
                if (tc->targets & (1u << p)) s.h[p] = take(c, T * r, f, WISP_PART_ACTIVATIONS);
        }
        if (saved) saved[l] = s;
    }

    /* scratch */
    int P = WISP_PART_TRAIN_SCRATCH;
    wisp_train w;
    memset(&w, 0, sizeof w);
    if (views_in_scratch) {
        w.w_xmid = take(c, T * D, f, P);
        w.w_q = take(c, T * Q, f, P);
        w.w_kh = take(c, T * KV, f, P);
        w.w_vh = take(c, T * KV, f, P);
        w.w_o = take(c, T * Q, f, P);
        w.w_g = take(c, T * F, f, P);
        w.w_u = take(c, T * F, f, P);
    }
    if (tc->checkpointing) {
        w.w_lse = take(c, T * H, f, P);
        for (int p = 0; p < WISP_PROJ_COUNT; p++)
            if (tc->targets & (1u << p)) w.w_h[p] = take(c, T * r, f, P);
    }
    w.x = take(c, T * D, f, P);
    w.xn = take(c, T * DQ, f, P);
    w.k = take(c, T * KV, f, P);
    w.v = take(c, T * KV, f, P);
    w.act = take(c, T * F, f, P);
    w.dact = take(c, T * F, f, P);
    w.dx = take(c, T * D, f, P);
    w.dxn = take(c, T * DQ, f, P);
    w.dout = take(c, T * Q, f, P);
    w.dq = take(c, T * Q, f, P);
    w.dkh = take(c, T * KV, f, P);
    w.dvh = take(c, T * KV, f, P);
    w.dsum = take(c, T * H, f, P);
    w.dh = take(c, T * r, f, P);
    if (max_out > 0 && r > 0) w.lora_bt = take(c, max_out * r, f, P);
    if (tc->dropout > 0) w.drop = take(c, T * max_in, f, P);
    if (tc->dora) {
        w.dora_z = take(c, T * max_out, f, P);
        w.dora_row = take(c, (size_t)cfg->threads.n_threads * max_in, f, P);
    }
    if (tc->prefix_projection) { /* the MLP's output and the gradient reaching it; its hidden layer both ways */
        size_t N = (size_t)tc->virtual_tokens, width = 2 * L * KV;
        w.prompt = take(c, N * width, f, P);
        w.prompt_grad = take(c, N * width, f, P);
        w.proj_h = take(c, N * (size_t)tc->encoder_hidden_size, f, P);
        w.proj_dh = take(c, N * (size_t)tc->encoder_hidden_size, f, P);
    }
    w.logits = take(c, (size_t)tc->loss_chunk * (size_t)hp->n_vocab, f, P);
    w.tok_loss = take(c, T, sizeof(double), P);
    w.rope = take(c, S * (size_t)hp->rope_dim, f, P);
    if (tc->objective == WISP_OBJECTIVE_DPO) {
        size_t B = (size_t)tc->micro_batch;
        w.tok_weight = take(c, T, f, P);
        w.seq_logp = take(c, B, sizeof(double), P);
        w.seq_ref = take(c, B, sizeof(double), P);
        w.seq_scored = take(c, B, sizeof(int32_t), P);
    }
    const wisp_arch_row *row = wisp_hparams_row(hp);
    if (row->rope_base_swa) w.rope_swa = take(c, S * (size_t)hp->rope_dim, f, P);
    if (row->required & WISP_LT(Q_NORM)) {
        w.qraw = take(c, T * Q, f, P);
        w.kraw = take(c, T * KV, f, P);
    }
    if (row->required & WISP_LT(POST_ATTN_NORM)) {
        w.po = take(c, T * D, f, P);
        w.dpo = take(c, T * D, f, P);
    }
    w.scores = take(c, (size_t)cfg->threads.n_threads * 3 * WISP_ATTN_BLOCK, f, P); /* attention, both ways */
    size_t nth = (size_t)cfg->threads.n_threads, tile_cols = tile_cols_max(g);
    w.tile = take(c, nth * (size_t)tc->backward_tile, f, P);
    w.tile_out = take(c, nth * T * tile_cols, f, P);
    void *exec_act = take(c, T, act_row_bytes, P);
    if (!tr) return;

    /* carving: keep what was taken; the struct itself was carved by the caller */
    w.saved = saved;
    w.params = params, w.grad = grad, w.m1 = m1, w.m2 = m2, w.n_params = n_params;
    w.dora_norm = dora_norm;
    w.pairs = pairs, w.grad_pairs = grad_pairs, w.pair_of = pair_of, w.n_pairs = (int32_t)n_pairs;
    w.exec.act = exec_act;
    w.exec.act_bytes = mul(T, act_row_bytes);
    w.tile_out_floats = T * tile_cols;
    *tr = w;
}

/* A uniform in +-1/sqrt(n_in) (PEFT's kaiming_uniform with a = sqrt(5)),
 * B zero; one counter-based stream per pair so pairs are independent. DoRA's
 * magnitude starts as the row norms of W (PEFT's, B being zero), so the
 * adapted model starts equal to the base. */
static void init_adapter(wisp_train *tr) {
    memset(tr->params, 0, tr->n_params * sizeof(float));
    if (tr->n_virtual > 0) { /* PEFT's RANDOM init (and its PrefixEncoder's): an nn.Embedding's N(0, 1), by Box-Muller */
        uint64_t key = wisp_hash2(tr->cfg.seed, 0x2000u);
        size_t n = (size_t)tr->n_virtual * (size_t)(tr->proj_hidden ? tr->KV : tr->prompt_width);
        for (size_t j = 0; j < n; j++) {
            float u1 = wisp_unit_float(wisp_hash2(key, 2 * j)), u2 = wisp_unit_float(wisp_hash2(key, 2 * j + 1));
            tr->virtual_params[j] = sqrtf(-2.0f * logf(1.0f - u1)) * cosf(6.28318530718f * u2);
        }
        /* the reparameterization's two nn.Linear: weights and biases uniform in +-1/sqrt(fan_in) */
        if (tr->proj_hidden) {
            size_t H = (size_t)tr->proj_hidden, K = (size_t)tr->KV, W = (size_t)tr->prompt_width;
            float *w1 = tr->virtual_params + n, *w2 = w1 + H * K + H;
            uint64_t k1 = wisp_hash2(tr->cfg.seed, 0x2001u), k2 = wisp_hash2(tr->cfg.seed, 0x2002u);
            for (size_t j = 0; j < H * K + H; j++)
                w1[j] = (2.0f * wisp_unit_float(wisp_hash2(k1, j)) - 1.0f) / sqrtf((float)K);
            for (size_t j = 0; j < W * H + W; j++)
                w2[j] = (2.0f * wisp_unit_float(wisp_hash2(k2, j)) - 1.0f) / sqrtf((float)H);
        }
        wisp_train_prefix_project(tr);
    }
    for (int32_t i = 0; i < tr->n_pairs; i++) {
        const wisp_lora_pair *p = &tr->pairs[i];
        float *a = (float *)(uintptr_t)p->a, bound = 1.0f / sqrtf((float)p->n_in);
        uint64_t key = wisp_hash2(tr->cfg.seed, 0x1000u + (uint64_t)p->layer * WISP_PROJ_COUNT + (uint64_t)p->proj);
        for (size_t j = 0; j < (size_t)p->rank * (size_t)p->n_in; j++)
            a[j] = (2.0f * wisp_unit_float(wisp_hash2(key, j)) - 1.0f) * bound;
    }
    if (!tr->cfg.dora) return;
    wisp_train_dora_norms(tr);
    for (int32_t i = 0; i < tr->n_pairs; i++)
        memcpy((float *)(uintptr_t)tr->pairs[i].magnitude, tr->pairs[i].norm, (size_t)tr->pairs[i].n_out * sizeof(float));
}

wisp_status wisp_train_layout(wisp_layout *lay, wisp_ctx *ctx, const wisp_gguf *g, const wisp_hparams *hp,
                              const wisp_config *cfg, size_t act_row_bytes, wisp_error *err) {
    const wisp_train_config *tc = &cfg->train;
    if (tc->seq_len == 0) return WISP_OK;
    wisp_train *tr = take(lay, 1, sizeof(wisp_train), WISP_PART_TRAIN_SCRATCH);
    layout(lay, g, hp, cfg, act_row_bytes, tr);
    if (!lay->arena) return WISP_OK;
    if (!tr || !tr->params || !tr->exec.act)
        return wisp_fail(err, WISP_ERR_INTERNAL, "training buffers did not fit the planned arena");
    void *act = tr->exec.act;
    size_t act_bytes = tr->exec.act_bytes;
    tr->exec = ctx->exec;
    tr->exec.act = act;
    tr->exec.act_bytes = act_bytes;
    tr->cfg = *tc;
    tr->model = &ctx->model;
    tr->n_virtual = tc->virtual_tokens, tr->stride = tc->seq_len + 1;
    tr->S = tc->seq_len + tc->virtual_tokens, tr->B = tc->micro_batch, tr->D = hp->dim, tr->F = hp->ffn_dim, tr->V = hp->n_vocab;
    tr->H = hp->n_heads, tr->KVH = hp->n_kv_heads, tr->hd = hp->head_dim, tr->L = hp->n_layers;
    tr->Q = tr->H * tr->hd, tr->KV = tr->KVH * tr->hd;
    tr->prefix = tc->prefix, tr->prompt_width = tc->prefix ? 2 * tr->L * tr->KV : tr->D;
    tr->proj_hidden = tc->prefix_projection ? tc->encoder_hidden_size : 0;
    tr->loss_chunk = tc->loss_chunk;
    tr->act_elem = tc->act_type == WISP_TYPE_F32 ? 4 : 2;
    tr->scale = tc->rslora ? tc->alpha / sqrtf((float)tc->rank) : tc->alpha / (float)tc->rank;
    tr->loss_scale = tc->act_type == WISP_TYPE_F16 ? tc->loss_scale : 1.0f;
    tr->hysteresis_left = tc->loss_scale_hysteresis;
    const wisp_rope_spec rope = wisp_rope_spec_of(&ctx->model, cfg->n_ctx, false);
    wisp_rope_table(tr->rope, 0, tr->S, &rope);
    if (tr->rope_swa) {
        const wisp_rope_spec rope_swa = wisp_rope_spec_of(&ctx->model, cfg->n_ctx, true);
        wisp_rope_table(tr->rope_swa, 0, tr->S, &rope_swa);
    }

    /* pairs in (layer, projection) order over one flat parameter array */
    size_t off = 0, norm_off = 0;
    int32_t n = 0;
    tr->lowest_layer = tr->L;
    for (int32_t l = 0; l < tr->L; l++)
        for (int p = 0; p < WISP_PROJ_COUNT; p++) {
            tr->pair_of[l * WISP_PROJ_COUNT + p] = -1;
            if (!(tc->targets & (1u << p))) continue;
            const wisp_weight *w = &ctx->model.layers[l].proj[p];
            wisp_lora_pair pr = {l, p, tc->rank, w->cols, w->rows, WISP_TYPE_F32, NULL, NULL, tc->alpha, tr->scale, NULL, NULL};
            size_t na = (size_t)tc->rank * (size_t)w->cols, nb = (size_t)tc->rank * (size_t)w->rows;
            size_t nm = tc->dora ? (size_t)w->rows : 0;
            pr.a = tr->params + off, pr.b = tr->params + off + na;
            if (nm) pr.magnitude = tr->params + off + na + nb, pr.norm = tr->dora_norm + norm_off;
            tr->pairs[n] = pr;
            pr.a = tr->grad + off, pr.b = tr->grad + off + na;
            if (nm) pr.magnitude = tr->grad + off + na + nb;
            tr->grad_pairs[n] = pr;
            tr->pair_of[l * WISP_PROJ_COUNT + p] = n++;
            off += na + nb + nm;
            norm_off += nm;
            if (l < tr->lowest_layer) tr->lowest_layer = l;
        }
    if (tr->n_virtual > 0) { /* the prompt (or what makes it) is the whole of params: no pairs */
        size_t N = (size_t)tr->n_virtual, W = (size_t)tr->prompt_width, H = (size_t)tr->proj_hidden, K = (size_t)tr->KV;
        tr->virtual_params = tr->params + off, tr->virtual_grad = tr->grad + off;
        tr->n_virtual_params = H ? N * K + H * K + H + W * H + W : N * W;
        if (!H) tr->prompt = tr->params + off, tr->prompt_grad = tr->grad + off; /* else scratch: the MLP's output */
        tr->lowest_layer = 0; /* the gradient must reach the input embeddings (or layer 0's attention) */
        off += tr->n_virtual_params;
    }
    if (off != tr->n_params || n != tr->n_pairs)
        return wisp_fail(err, WISP_ERR_INTERNAL, "adapter layout mismatch: %zu of %zu parameters", off, tr->n_params);
    tr->lora = (wisp_lora){tr->pairs, n, tc->rank, tc->rslora};
    tr->grads = (wisp_lora){tr->grad_pairs, n, tc->rank, tc->rslora};
    init_adapter(tr);
    ctx->train = tr;
    return WISP_OK;
}
