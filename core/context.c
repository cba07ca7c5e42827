/* Planning and carving the arena, and the context's small public surface. */
#include "context.h"

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

/* The scratch arrays of one forward step, in carving order. */
enum { S_X, S_XB, S_Q, S_K, S_V, S_PROJ, S_GATE, S_UP, S_ROPE, S_ROPE_SWA, S_ATTN, S_ATTN_KV, S_COUNT };

static void scratch_sizes(const wisp_hparams *hp, const wisp_config *c, size_t bytes[S_COUNT]) {
    size_t T = (size_t)c->n_batch, f = sizeof(float);
    size_t q_dim = (size_t)hp->n_heads * hp->head_dim, kv_dim = (size_t)hp->n_kv_heads * hp->head_dim;
    size_t dim = (size_t)hp->dim;
    bytes[S_X] = wisp_bytes_of(T * dim, f);
    bytes[S_XB] = wisp_bytes_of(T * (q_dim > dim ? q_dim : dim), f);
    bytes[S_Q] = wisp_bytes_of(T * q_dim, f);
    bytes[S_K] = wisp_bytes_of(T * kv_dim, f);
    bytes[S_V] = wisp_bytes_of(T * kv_dim, f);
    bytes[S_PROJ] = wisp_bytes_of(T * dim, f);
    bytes[S_GATE] = wisp_bytes_of(T * (size_t)hp->ffn_dim, f);
    bytes[S_UP] = wisp_bytes_of(T * (size_t)hp->ffn_dim, f);
    bytes[S_ROPE] = wisp_bytes_of(T * (size_t)hp->rope_dim, f);
    bytes[S_ROPE_SWA] = wisp_hparams_row(hp)->rope_base_swa ? bytes[S_ROPE] : 0;
    const bool kv_f16 = c->kv_type == WISP_TYPE_F16;
    size_t score_rows = (size_t)wisp_attention_score_rows(c->kernels, kv_f16, hp->n_heads, hp->n_kv_heads);
    bytes[S_ATTN] = wisp_bytes_of((size_t)c->threads.n_threads * WISP_ATTN_BLOCK * score_rows, f);
    bool grouped = wisp_attention_grouped(c->kernels, kv_f16, hp->n_heads, hp->n_kv_heads);
    size_t kv_block = (size_t)2 * WISP_ATTN_BLOCK * hp->head_dim; /* a block of keys and of values */
    bytes[S_ATTN_KV] = grouped ? wisp_bytes_of((size_t)c->threads.n_threads * kv_block, f) : 0;
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

static size_t kv_bytes(const wisp_hparams *hp, const wisp_config *c) {
    size_t elem = c->kv_type == WISP_TYPE_F16 ? 2 : 4;
    size_t n = kv_positions_below(hp, c, hp->n_layers) * (size_t)hp->n_kv_heads * (size_t)hp->head_dim;
    return wisp_bytes_of(n, elem);
}

/* The kernels whose packing the context uses (NULL: none). */
static const wisp_kernels *packing_kernels(const wisp_config *c) { return c->in_place_weights ? NULL : c->kernels; }

wisp_status wisp_plan(const wisp_gguf *g, const wisp_config *cfg, wisp_memory_plan *plan, wisp_error *err) {
    memset(plan, 0, sizeof *plan);
    wisp_status s;
    if ((s = wisp_hparams_read(g, &plan->hp, err))) return s;
    if ((s = resolve_config(&plan->hp, cfg, &plan->cfg, err))) return s;
    const wisp_hparams *hp = &plan->hp;
    const wisp_config *c = &plan->cfg;
    size_t tok_bytes;
    if ((s = wisp_tokenizer_plan(g, &tok_bytes, err))) return s;

    size_t *p = plan->part;
    p[WISP_PART_CONTEXT] = wisp_bytes_add(wisp_arena_round(sizeof(wisp_ctx)), wisp_model_table_bytes(hp));
    p[WISP_PART_TOKENIZER] = tok_bytes;
    p[WISP_PART_KV_CACHE] = wisp_bytes_add(kv_bytes(hp, c), kv_bytes(hp, c));
    size_t sb[S_COUNT];
    scratch_sizes(hp, c, sb);
    for (int i = 0; i < S_COUNT; i++) p[WISP_PART_SCRATCH] = wisp_bytes_add(p[WISP_PART_SCRATCH], sb[i]);
    p[WISP_PART_SCRATCH] = wisp_bytes_add(p[WISP_PART_SCRATCH], wisp_bytes_of((size_t)c->n_batch, act_row_max(g)));
    p[WISP_PART_LOGITS] = wisp_bytes_of((size_t)(c->logits_all ? c->n_batch : 1) * (size_t)hp->n_vocab, sizeof(float));
    p[WISP_PART_SAMPLER] = wisp_sampler_scratch_bytes(hp->n_vocab);
    size_t text;
    if ((s = wisp_tokenizer_plan_scratch(g, c->max_text_bytes, &text, err))) return s;
    p[WISP_PART_TEXT] = wisp_arena_round(text);
    p[WISP_PART_ADAPTERS] = wisp_adapters_plan_bytes(hp->n_layers, c->max_adapters, c->max_lora_rank, c->n_batch);
    wisp_train_plan(g, hp, c, act_row_max(g), p);
    p[WISP_PART_PACKED_WEIGHTS] = wisp_packed_weights_plan(g, hp, packing_kernels(c));
    for (int i = 0; i < WISP_PART_COUNT; i++) plan->total = wisp_bytes_add(plan->total, p[i]);

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
    wisp_ctx *ctx = (wisp_ctx *)wisp_arena_alloc(&a, sizeof(wisp_ctx), WISP_PART_CONTEXT);
    ctx->cfg = plan.cfg;
    const wisp_config *c = &ctx->cfg;
    if ((s = wisp_model_init(&ctx->model, g, &a, err))) return s;
    if ((s = wisp_tokenizer_init(&ctx->tok, g, &a, err))) return s;
    const wisp_hparams *hp = &ctx->model.hp;
    if (wisp_tokenizer_n_vocab(&ctx->tok) > hp->n_vocab)
        return wisp_fail(err, WISP_ERR_SHAPE, "the tokenizer has %d tokens but token_embd.weight only %d rows",
                         wisp_tokenizer_n_vocab(&ctx->tok), hp->n_vocab);
    ctx->q_dim = hp->n_heads * hp->head_dim;
    ctx->kv_dim = hp->n_kv_heads * hp->head_dim;
    ctx->kv_elem_bytes = c->kv_type == WISP_TYPE_F16 ? 2 : 4;
    ctx->k_cache = wisp_arena_alloc(&a, kv_bytes(hp, c), WISP_PART_KV_CACHE);
    ctx->v_cache = wisp_arena_alloc(&a, kv_bytes(hp, c), WISP_PART_KV_CACHE);

    size_t sb[S_COUNT];
    scratch_sizes(hp, c, sb);
    float **slots[S_COUNT] = {&ctx->s.x, &ctx->s.xb, &ctx->s.q, &ctx->s.k, &ctx->s.v, &ctx->s.proj,
                              &ctx->s.gate, &ctx->s.up, &ctx->s.rope, &ctx->s.rope_swa, &ctx->s.attn, &ctx->s.attn_kv};
    for (int i = 0; i < S_COUNT; i++) *slots[i] = (float *)wisp_arena_alloc(&a, sb[i], WISP_PART_SCRATCH);
    if (!sb[S_ATTN_KV]) ctx->s.attn_kv = NULL; /* attention converts per head */
    if (!sb[S_ROPE_SWA]) ctx->s.rope_swa = NULL; /* every layer rotates with the one base */
    wisp_exec_setup(&ctx->exec, c->kernels, &c->threads);
    ctx->exec.act_bytes = wisp_bytes_of((size_t)c->n_batch, act_row_max(g));
    ctx->exec.act = (uint8_t *)wisp_arena_alloc(&a, ctx->exec.act_bytes, WISP_PART_SCRATCH);
    ctx->logits = (float *)wisp_arena_alloc(&a, plan.part[WISP_PART_LOGITS], WISP_PART_LOGITS);
    ctx->candidates = (wisp_candidate *)wisp_arena_alloc(&a, plan.part[WISP_PART_SAMPLER], WISP_PART_SAMPLER);
    ctx->text_scratch_bytes = plan.part[WISP_PART_TEXT];
    ctx->text_scratch = wisp_arena_alloc(&a, ctx->text_scratch_bytes, WISP_PART_TEXT);
    wisp_adapters_carve(&ctx->adapters, &a, hp->n_layers, c->max_adapters, c->max_lora_rank, c->n_batch);
    if ((s = wisp_train_carve(ctx, g, &a, act_row_max(g), err))) return s;
    if (packing_kernels(c)) wisp_packed_weights_make(&ctx->model, &ctx->exec, &a, c->weight_packed, c->weight_packed_user);

    /* The carve must match the plan byte for byte, part by part. */
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
