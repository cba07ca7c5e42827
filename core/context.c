/* Planning and carving the arena, both from one layout function, and the
 * context's small public surface. */
#include "context.h"

#include <math.h>
#include <string.h>

#include "attention.h"
#include "packed_weights.h"
#include "train.h"

wisp_config wisp_config_default(void) {
    wisp_config c;
    memset(&c, 0, sizeof c);
    c.kv_type = WISP_TYPE_F16;
    return c;
}

static wisp_status resolve_config(const wisp_hparams *hp, const wisp_config *in, wisp_config *c, wisp_error *err) {
    *c = *in;
    if (c->n_ctx < 0 || c->n_batch < 0) return wisp_fail(err, WISP_ERR_ARG, "n_ctx and n_batch must not be negative");
    if (c->n_ctx == 0) c->n_ctx = hp->ctx_train < 4096 ? hp->ctx_train : 4096;
    if (c->n_ctx > (1 << 20)) return wisp_fail(err, WISP_ERR_ARG, "n_ctx %d is more than wisp supports (1048576)", c->n_ctx);
    if (c->n_batch == 0) c->n_batch = c->n_ctx < 64 ? c->n_ctx : 64;
    if (c->n_batch > c->n_ctx) c->n_batch = c->n_ctx;
    if (c->kv_type != WISP_TYPE_F32 && c->kv_type != WISP_TYPE_F16)
        return wisp_fail(err, WISP_ERR_ARG, "the KV cache type must be F32 or F16");
    if (c->max_text_bytes == 0) c->max_text_bytes = 4096;
    if (c->threads.n_threads < 1 || !c->threads.run) c->threads.n_threads = 1;
    if (c->threads.n_threads > 1024) return wisp_fail(err, WISP_ERR_ARG, "more than 1024 threads");
    if (c->max_adapters < 0 || c->max_adapters > 4096 || c->max_lora_rank < 0 || c->max_lora_rank > 65536)
        return wisp_fail(err, WISP_ERR_ARG, "max_adapters must be in 0..4096 and max_lora_rank in 0..65536");
    if (c->max_adapters == 0) c->max_lora_rank = 0;
    else if (c->max_lora_rank == 0) c->max_lora_rank = 64;
    return wisp_train_resolve(hp, c, err);
}

/* Widest converted activation row over every weight of the model. */
static size_t act_row_max(const wisp_gguf *g) {
    size_t best = 0, cur = 0;
    wisp_gguf_tensor t;
    while (wisp_gguf_next_tensor(g, &cur, &t)) {
        if (t.n_dims < 2) continue;
        size_t b = wisp_exec_act_row_bytes((int)t.type, t.ne[0]);
        if (b > best) best = b;
    }
    return best;
}

/* Cached positions of layers [0, l): the whole context per layer, or a
 * windowed layer's ring (wisp_layer_kv_positions). */
static size_t kv_positions_below(const wisp_hparams *hp, const wisp_config *c, int32_t l) {
    if (hp->window <= 0) return (size_t)l * (size_t)c->n_ctx;
    size_t n = 0;
    for (int32_t i = 0; i < l; i++) n += (size_t)wisp_layer_kv_positions(hp, i, c->n_ctx, c->n_batch);
    return n;
}

size_t wisp_ctx_kv_layer_offset(const wisp_ctx *ctx, int32_t l) {
    const wisp_hparams *hp = &ctx->model.hp;
    return kv_positions_below(hp, &ctx->cfg, l) * (size_t)hp->n_kv_heads * (size_t)hp->head_dim * ctx->kv_elem_bytes;
}

/* Elements of the key cache (and of the value cache), every layer. */
static size_t kv_elems(const wisp_hparams *hp, const wisp_config *c) {
    return kv_positions_below(hp, c, hp->n_layers) * (size_t)hp->n_kv_heads * (size_t)hp->head_dim;
}

/* The kernels whose packing the context uses (NULL: none). */
static const wisp_kernels *packing_kernels(const wisp_config *c) { return c->in_place_weights ? NULL : c->kernels; }

/* The activations of one forward step, in carving order; taken into `s`. */
static void scratch_layout(wisp_layout *lay, const wisp_hparams *hp, const wisp_config *c, wisp_scratch *s) {
    const int P = WISP_PART_SCRATCH;
    size_t T = (size_t)c->n_batch, f = sizeof(float);
    size_t q_dim = (size_t)hp->n_heads * hp->head_dim, kv_dim = (size_t)hp->n_kv_heads * hp->head_dim;
    size_t dim = (size_t)hp->dim, ffn = (size_t)hp->ffn_dim, rope = (size_t)hp->rope_dim;
    memset(s, 0, sizeof *s);
    s->x = wisp_layout_take(lay, T * dim, f, P);
    s->xb = wisp_layout_take(lay, T * (q_dim > dim ? q_dim : dim), f, P);
    s->q = wisp_layout_take(lay, T * q_dim, f, P);
    s->k = wisp_layout_take(lay, T * kv_dim, f, P);
    s->v = wisp_layout_take(lay, T * kv_dim, f, P);
    s->proj = wisp_layout_take(lay, T * dim, f, P);
    s->gate = wisp_layout_take(lay, T * ffn, f, P);
    s->up = wisp_layout_take(lay, T * ffn, f, P);
    s->rope = wisp_layout_take(lay, T * rope, f, P);
    /* windowed layers with their own base rotate by their own table (else NULL: the one base) */
    if (wisp_hparams_row(hp)->rope_base_swa) s->rope_swa = wisp_layout_take(lay, T * rope, f, P);
    const bool kv_f16 = c->kv_type == WISP_TYPE_F16;
    size_t nth = (size_t)c->threads.n_threads;
    size_t score_rows = (size_t)wisp_attention_score_rows(c->kernels, kv_f16, hp->n_heads, hp->n_kv_heads);
    s->attn = wisp_layout_take(lay, nth * WISP_ATTN_BLOCK * score_rows, f, P);
    /* grouped attention converts a block of keys and of values at a time (else NULL: per head) */
    if (wisp_attention_grouped(c->kernels, kv_f16, hp->n_heads, hp->n_kv_heads))
        s->attn_kv = wisp_layout_take(lay, nth * 2 * WISP_ATTN_BLOCK * (size_t)hp->head_dim, f, P);
}

/* Where measuring fills the structs that carving fills in the context. Each
 * is needed for one part only, in turn, so they share their bytes: a
 * firmware's stack is 8 KiB. */
typedef union standin {
    wisp_model model;
    wisp_tokenizer tok;
    wisp_scratch s;
} standin;

static wisp_status model_part(wisp_layout *lay, const wisp_gguf *g, wisp_ctx *ctx, standin *in, wisp_error *err) {
    return wisp_model_layout(ctx ? &ctx->model : &in->model, g, lay, err);
}

/* Also gives the rounded bytes of the text scratch the tokenizer needs. */
static wisp_status tokenizer_part(wisp_layout *lay, const wisp_gguf *g, const wisp_hparams *hp, const wisp_config *c,
                                  wisp_ctx *ctx, standin *in, size_t *text_bytes, wisp_error *err) {
    wisp_tokenizer *tok = ctx ? &ctx->tok : &in->tok;
    wisp_status s = wisp_tokenizer_layout(tok, g, lay, err);
    if (s) return s;
    if (ctx && wisp_tokenizer_n_vocab(tok) > hp->n_vocab)
        return wisp_fail(err, WISP_ERR_SHAPE, "the tokenizer has %d tokens but token_embd.weight only %d rows",
                         wisp_tokenizer_n_vocab(tok), hp->n_vocab);
    *text_bytes = wisp_arena_round(wisp_tokenizer_scratch_bytes(tok, c->max_text_bytes));
    return WISP_OK;
}

static void packed_part(wisp_layout *lay, const wisp_gguf *g, const wisp_config *c, wisp_ctx *ctx, standin *in) {
    const wisp_kernels *k = packing_kernels(c);
    if (ctx) {
        wisp_packed_weights_layout(lay, &ctx->model, k, &ctx->exec, c->weight_packed, c->weight_packed_user);
        return;
    }
    if (!k) return;
    wisp_layout table = {.arena = NULL}; /* the model is read again; its table was measured in model_part */
    wisp_model_layout(&in->model, g, &table, NULL);
    wisp_packed_weights_layout(lay, &in->model, k, NULL, NULL, NULL);
}

/* Everything a context holds, in carving order, from the one function that
 * both measures it (lay->arena NULL: into lay's per-part counts) and carves
 * it (sets *out to the context, whose struct is the first piece). `hp` and
 * `cfg` are the plan's (read from g, resolved). */
static wisp_status layout(wisp_layout *lay, const wisp_gguf *g, const wisp_hparams *hp, const wisp_config *cfg,
                          wisp_ctx **out, wisp_error *err) {
    wisp_status s;
    wisp_ctx *ctx = wisp_layout_take(lay, 1, sizeof(wisp_ctx), WISP_PART_CONTEXT);
    if (lay->arena && !ctx) return wisp_fail(err, WISP_ERR_INTERNAL, "no room for the context in the planned arena");
    if (ctx) ctx->cfg = *cfg;
    const wisp_config *c = ctx ? &ctx->cfg : cfg;
    standin in;

    if ((s = model_part(lay, g, ctx, &in, err))) return s;
    size_t text_bytes = 0;
    if ((s = tokenizer_part(lay, g, hp, c, ctx, &in, &text_bytes, err))) return s;
    size_t kv_elem = c->kv_type == WISP_TYPE_F16 ? 2 : 4;
    void *k_cache = wisp_layout_take(lay, kv_elems(hp, c), kv_elem, WISP_PART_KV_CACHE);
    void *v_cache = wisp_layout_take(lay, kv_elems(hp, c), kv_elem, WISP_PART_KV_CACHE);
    scratch_layout(lay, hp, c, ctx ? &ctx->s : &in.s);
    size_t act_row = act_row_max(g);
    void *act = wisp_layout_take(lay, (size_t)c->n_batch, act_row, WISP_PART_SCRATCH);
    size_t n_logits = (size_t)(c->logits_all ? c->n_batch : 1) * (size_t)hp->n_vocab;
    void *logits = wisp_layout_take(lay, n_logits, sizeof(float), WISP_PART_LOGITS);
    void *candidates = wisp_layout_take(lay, wisp_sampler_scratch_bytes(hp->n_vocab), 1, WISP_PART_SAMPLER);
    void *text = wisp_layout_take(lay, text_bytes, 1, WISP_PART_TEXT);
    if (ctx) {
        ctx->q_dim = hp->n_heads * hp->head_dim;
        ctx->kv_dim = hp->n_kv_heads * hp->head_dim;
        ctx->kv_elem_bytes = kv_elem;
        ctx->k_cache = k_cache, ctx->v_cache = v_cache;
        wisp_exec_setup(&ctx->exec, c->kernels, &c->threads);
        ctx->exec.act = (uint8_t *)act;
        ctx->exec.act_bytes = wisp_bytes_of((size_t)c->n_batch, act_row);
        ctx->logits = (float *)logits;
        ctx->candidates = (wisp_candidate *)candidates;
        ctx->text_scratch = text;
        ctx->text_scratch_bytes = text_bytes;
    }
    wisp_adapters_layout(lay, ctx ? &ctx->adapters : NULL, hp->n_layers, c->max_adapters, c->max_lora_rank, c->n_batch);
    if ((s = wisp_train_layout(lay, ctx, g, hp, c, act_row, err))) return s;
    packed_part(lay, g, c, ctx, &in);
    if (out) *out = ctx;
    return WISP_OK;
}

wisp_status wisp_plan(const wisp_gguf *g, const wisp_config *cfg, wisp_memory_plan *plan, wisp_error *err) {
    memset(plan, 0, sizeof *plan);
    wisp_status s;
    if ((s = wisp_hparams_read(g, &plan->hp, err))) return s;
    if ((s = resolve_config(&plan->hp, cfg, &plan->cfg, err))) return s;
    wisp_layout lay = {.arena = NULL};
    if ((s = layout(&lay, g, &plan->hp, &plan->cfg, NULL, err))) return s;
    memcpy(plan->part, lay.part_bytes, sizeof plan->part);
    plan->total = lay.bytes;

    size_t cur = 0;
    wisp_gguf_tensor t;
    while (wisp_gguf_next_tensor(g, &cur, &t)) plan->weight_bytes += t.nbytes;
    if (plan->total == SIZE_MAX) return wisp_fail(err, WISP_ERR_ARG, "the plan does not fit in this machine's address space");
    return WISP_OK;
}

static wisp_status arena_short(wisp_error *err, const wisp_memory_plan *plan, size_t size) {
    char detail[200];
    size_t n = 0;
    detail[0] = 0;
    for (int i = 0; i < WISP_PART_COUNT; i++)
        if (plan->part[i] && n + 1 < sizeof detail)
            n += wisp_format(detail + n, sizeof detail - n, "%s%s %zu", n ? ", " : "", wisp_part_name(i), plan->part[i]);
    return wisp_fail(err, WISP_ERR_ARENA, "arena of %zu bytes is %zu bytes short of the plan's %zu (%s)", size,
                     plan->total - size, plan->total, detail);
}

wisp_status wisp_init(wisp_ctx **out, const wisp_gguf *g, const wisp_config *cfg, void *mem, size_t size,
                      wisp_error *err) {
    *out = NULL;
    wisp_memory_plan plan;
    wisp_status s;
    if ((s = wisp_plan(g, cfg, &plan, err))) return s;
    if ((uintptr_t)mem % WISP_ARENA_BASE_ALIGN)
        return wisp_fail(err, WISP_ERR_ARG, "the arena must be %d-byte aligned", WISP_ARENA_BASE_ALIGN);
    if (!mem || size < plan.total) return arena_short(err, &plan, mem ? size : 0);
    wisp_arena a;
    wisp_arena_init(&a, mem, size);
    wisp_layout lay = {.arena = &a};
    wisp_ctx *ctx;
    if ((s = layout(&lay, g, &plan.hp, &plan.cfg, &ctx, err))) return s;

    /* The one layout makes plan and carve agree by construction; the check
     * stays as a guard against a piece taken only when carving (ctx set). */
    for (int i = 0; i < WISP_PART_COUNT; i++)
        if (a.part_bytes[i] != plan.part[i])
            return wisp_fail(err, WISP_ERR_INTERNAL, "plan mismatch in part '%s': planned %zu, carved %zu",
                             wisp_part_name(i), plan.part[i], a.part_bytes[i]);
    *out = ctx;
    return WISP_OK;
}

const wisp_hparams *wisp_ctx_hparams(const wisp_ctx *ctx) { return &ctx->model.hp; }
const wisp_model *wisp_ctx_model(const wisp_ctx *ctx) { return &ctx->model; }
const wisp_tokenizer *wisp_ctx_tokenizer(const wisp_ctx *ctx) { return &ctx->tok; }
const wisp_config *wisp_ctx_config(const wisp_ctx *ctx) { return &ctx->cfg; }
const char *wisp_ctx_kernels_name(const wisp_ctx *ctx) { return ctx->exec.k.name; }
int32_t wisp_n_past(const wisp_ctx *ctx) { return ctx->n_past; }
int32_t wisp_last_step_tokens(const wisp_ctx *ctx) { return ctx->last_step; }

void wisp_rewind(wisp_ctx *ctx, int32_t n) {
    if (n >= 0 && n < ctx->n_past) {
        /* a windowed layer's ring holds positions [n_past - ring, n_past); the
         * next query, at n, needs those from n - window + 1 on */
        const wisp_hparams *hp = &ctx->model.hp;
        for (int32_t l = 0; l < hp->n_layers && n > 0; l++) {
            int32_t ring = wisp_layer_kv_positions(hp, l, ctx->cfg.n_ctx, ctx->cfg.n_batch);
            int32_t need = n - hp->window + 1 > 0 ? n - hp->window + 1 : 0;
            if (ring < ctx->cfg.n_ctx && need < ctx->n_past - ring) n = 0; /* overwritten: start afresh */
        }
        ctx->n_past = n;
    }
    ctx->last_step = 0;
}

wisp_status wisp_tokenize_text(wisp_ctx *ctx, const char *text, size_t len, unsigned flags, int32_t *ids, size_t cap,
                               size_t *n_ids, wisp_error *err) {
    if (len > ctx->cfg.max_text_bytes)
        return wisp_fail(err, WISP_ERR_CAPACITY, "text of %zu bytes is longer than max_text_bytes (%u)", len,
                         ctx->cfg.max_text_bytes);
    return wisp_tokenize(&ctx->tok, text, len, flags, ids, cap, n_ids, ctx->text_scratch, ctx->text_scratch_bytes,
                         err);
}

wisp_status wisp_eval(wisp_ctx *ctx, const int32_t *tokens, int32_t n, wisp_error *err) {
    if (n <= 0) return wisp_fail(err, WISP_ERR_ARG, "no tokens to evaluate");
    if (n > ctx->cfg.n_ctx - ctx->n_past)
        return wisp_fail(err, WISP_ERR_CAPACITY, "context full: %d cached + %d new tokens exceed n_ctx %d", ctx->n_past,
                         n, ctx->cfg.n_ctx);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= ctx->model.hp.n_vocab)
            return wisp_fail(err, WISP_ERR_ARG, "token id %d is outside the vocabulary (0..%d)", tokens[i],
                             ctx->model.hp.n_vocab - 1);
    const int32_t start = ctx->n_past;
    for (int32_t done = 0; done < n;) {
        int32_t step = n - done < ctx->cfg.n_batch ? n - done : ctx->cfg.n_batch;
        wisp_status s = wisp_forward_step(ctx, tokens + done, step, err);
        if (s) {
            wisp_rewind(ctx, start); /* e.g. NaN activations (WISP_ERR_NUMERIC): as if the call had not happened */
            return s;
        }
        done += step;
    }
    return WISP_OK;
}

wisp_status wisp_eval_embeddings(wisp_ctx *ctx, const float *rows, int32_t n, wisp_error *err) {
    if (n <= 0 || !rows) return wisp_fail(err, WISP_ERR_ARG, "no embeddings to evaluate");
    if (n > ctx->cfg.n_ctx - ctx->n_past)
        return wisp_fail(err, WISP_ERR_CAPACITY, "context full: %d cached + %d new positions exceed n_ctx %d", ctx->n_past,
                         n, ctx->cfg.n_ctx);
    const int32_t dim = ctx->model.hp.dim, start = ctx->n_past;
    for (size_t i = 0; i < (size_t)n * (size_t)dim; i++)
        if (!isfinite(rows[i]))
            return wisp_fail(err, WISP_ERR_NUMERIC, "input embedding %zu, element %zu is not finite", i / (size_t)dim,
                             i % (size_t)dim);
    for (int32_t done = 0; done < n;) {
        int32_t step = n - done < ctx->cfg.n_batch ? n - done : ctx->cfg.n_batch;
        wisp_status s = wisp_forward_embeddings(ctx, rows + (size_t)done * (size_t)dim, step, err);
        if (s) {
            wisp_rewind(ctx, start);
            return s;
        }
        done += step;
    }
    return WISP_OK;
}

wisp_status wisp_eval_kv_prefix(wisp_ctx *ctx, const float *rows, int32_t n, wisp_error *err) {
    const wisp_hparams *hp = &ctx->model.hp;
    if (n <= 0 || !rows) return wisp_fail(err, WISP_ERR_ARG, "no prefix to put in the cache");
    if (hp->window > 0)
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "prefix tuning of a model with sliding-window layers is not implemented");
    if (n > ctx->cfg.n_ctx - ctx->n_past)
        return wisp_fail(err, WISP_ERR_CAPACITY, "context full: %d cached + %d prefix positions exceed n_ctx %d",
                         ctx->n_past, n, ctx->cfg.n_ctx);
    const size_t hd = (size_t)hp->head_dim, kv = (size_t)hp->n_kv_heads * hd, width = 2 * (size_t)hp->n_layers * kv;
    for (size_t i = 0; i < (size_t)n * width; i++)
        if (!isfinite(rows[i]))
            return wisp_fail(err, WISP_ERR_NUMERIC, "prefix row %zu, element %zu is not finite", i / width, i % width);
    const size_t elem = ctx->kv_elem_bytes, n_ctx = (size_t)ctx->cfg.n_ctx;
    for (int32_t l = 0; l < hp->n_layers; l++) {
        size_t layer_off = wisp_ctx_kv_layer_offset(ctx, l);
        for (int32_t i = 0; i < n; i++)
            for (int32_t h = 0; h < hp->n_kv_heads; h++) {
                const float *k = rows + (size_t)i * width + 2 * (size_t)l * kv + (size_t)h * hd, *v = k + kv;
                size_t off = layer_off + ((size_t)h * n_ctx + (size_t)(ctx->n_past + i)) * hd * elem;
                uint8_t *kd = (uint8_t *)ctx->k_cache + off, *vd = (uint8_t *)ctx->v_cache + off;
                if (elem == 2) {
                    ctx->exec.k.f32_to_f16(k, (uint16_t *)(void *)kd, (int64_t)hd);
                    ctx->exec.k.f32_to_f16(v, (uint16_t *)(void *)vd, (int64_t)hd);
                } else {
                    memcpy(kd, k, hd * sizeof(float));
                    memcpy(vd, v, hd * sizeof(float));
                }
            }
    }
    ctx->n_past += n;
    ctx->last_step = 0;
    return WISP_OK;
}

const float *wisp_logits(const wisp_ctx *ctx, int32_t i) {
    if (ctx->last_step == 0 || ctx->cfg.hidden_states) return NULL;
    if (i < 0) i = ctx->last_step - 1;
    if (i >= ctx->last_step) return NULL;
    if (!ctx->cfg.logits_all) return i == ctx->last_step - 1 ? ctx->logits : NULL;
    return ctx->logits + (size_t)i * ctx->model.hp.n_vocab;
}

const float *wisp_hidden(const wisp_ctx *ctx, int32_t i) {
    if (!ctx->cfg.hidden_states || ctx->last_step == 0) return NULL;
    if (i < 0) i = ctx->last_step - 1;
    if (i >= ctx->last_step) return NULL;
    return ctx->s.xb + (size_t)i * ctx->model.hp.dim;
}

int32_t wisp_sample(wisp_ctx *ctx, wisp_sampler *s, const int32_t *history, size_t n_history) {
    const float *l = wisp_logits(ctx, -1);
    if (!l) return -1;
    return wisp_sample_logits(l, ctx->model.hp.n_vocab, s, history, n_history, ctx->candidates);
}
