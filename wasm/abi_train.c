/* Fine-tuning through the C ABI: LoRA, rsLoRA, DoRA and DPO (a LoRA adapter
 * trained on preference pairs), the methods of `wisp finetune --method`.
 *
 * A fine-tuning session is a second context over the same GGUF bytes (the
 * weights are shared, never copied), planned for training: trainable
 * adapter, gradients, optimizer moments, saved activations. Everything the
 * session needs is allocated by ww_train_begin — the training arena, the
 * tokenized data (adapters/train_data.h, the same windows `wisp finetune`
 * trains on), the batch, and the adapter the result is copied into — so wasm
 * memory grows there and never during the steps. The model's own context is
 * untouched: generation with attached adapters works as before, and
 * ww_train_finish hands back an ordinary adapter for it. */
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include "abi.h"
#include "preference_batches.h"
#include "preference_pairs.h"
#include "train_data.h"

typedef struct ww_train {
    ww_model *m;
    wisp_memory_plan plan;
    void *arena;
    wisp_ctx *ctx;          /* the training context */
    int32_t S, B;           /* seq_len, micro_batch (sequences: 2 per pair for DPO) */
    bool dpo;
    wisp_train_data data;   /* windows and their shuffled order (DPO: the chosen answers) */
    wisp_data_memory mem;   /* its arrays, owned */
    wisp_train_data rejected; /* DPO: the rejected answers, in lockstep with data (preference_pairs.h) */
    wisp_data_memory rejected_mem;
    double *ref;            /* DPO: [2][pairs] the reference's log-probs (chosen, then rejected), or NULL */
    double *batch_ref;      /* DPO: [B] the references of the batch's sequences */
    int32_t *batch;         /* [B][S + 1] */
    uint8_t *mask;          /* [B][S + 1] */
    ww_adapter *out;        /* the result, allocated at begin */
} ww_train;

/* The engine configuration of a session, as `wisp finetune` builds it. */
static void train_config(ww_model *m, const ww_train_in *ti, wisp_config *c) {
    *c = wisp_config_default();
    /* before init (a plan from the header) the level loadModel picks by default */
    c->kernels = m->kernels ? m->kernels : ww_pick_kernels(NULL, &m->err);
    /* the training context never generates: its inference parts stay minimal */
    c->n_ctx = 1;
    c->n_batch = 1;
    c->max_text_bytes = 16;
    /* the model's pool once loaded; before that, planning for ti->threads */
    c->threads = ww_threads(m, ti->threads);
    wisp_train_config *t = &c->train;
    t->seq_len = ti->seq_len;
    t->micro_batch = ti->micro_batch;
    t->rank = ti->rank;
    t->total_steps = ti->steps;
    t->seed = (uint64_t)ti->seed_hi << 32 | ti->seed_lo;
    t->schedule = ti->schedule;
    t->warmup_steps = ti->warmup;
    t->alpha = ti->alpha;
    t->lr = ti->lr;
    t->clip_norm = ti->clip;
    t->optimizer = WISP_OPTIMIZER_ADAMW;
    /* the method table of `wisp finetune` (cli/finetune_settings.c), for the methods the package offers */
    t->rslora = ti->method == WW_METHOD_RSLORA;
    t->dora = ti->method == WW_METHOD_DORA;
    t->prefix = ti->method == WW_METHOD_PREFIX; /* without PEFT's reparameterization MLP (refused in JS) */
    t->virtual_tokens = ti->method == WW_METHOD_PROMPT || t->prefix ? ti->num_virtual_tokens : 0;
    if (ti->method == WW_METHOD_DPO) {
        t->objective = WISP_OBJECTIVE_DPO;
        t->micro_batch = ti->micro_batch * 2; /* a chosen and a rejected answer per pair */
        t->dpo_beta = ti->dpo_beta;
        t->dpo_label_smoothing = ti->label_smoothing;
        t->dpo_loss = ti->dpo_loss;
    }
}

/* The plan of a training session (the training context's arena) into the
 * plan figures at `out` (see ww_plan). */
API int32_t ww_train_plan(ww_model *m, const ww_train_in *ti, ww_plan_figures *out) {
    wisp_config c;
    train_config(m, ti, &c);
    wisp_memory_plan p;
    if (wisp_plan(&m->gguf, &c, &p, &m->err)) return -1;
    ww_plan_out(m, &p, out);
    return 0;
}

API void ww_train_free(ww_train *t) {
    if (!t) return;
    free(t->arena);
    free(t->mem.tokens);
    free(t->mem.examples);
    free(t->mem.order);
    free(t->mem.nodes);
    free(t->mem.text);
    free(t->mem.tok_scratch);
    wisp_data_memory *r = &t->rejected_mem;
    free(r->tokens);
    free(r->examples);
    free(r->order);
    free(r->nodes);
    free(r->text);
    free(r->tok_scratch);
    free(t->ref);
    free(t->batch_ref);
    free(t->batch);
    free(t->mask);
    if (t->out) ww_adapter_free(t->m, t->out);
    free(t);
}

/* The adapter record the trained weights will be copied into: same pairs as
 * the training context's, with A and B in one block of their own. */
static ww_adapter *result_adapter(ww_model *m, const wisp_lora *l) {
    size_t floats = 0;
    for (int32_t i = 0; i < l->n_pairs; i++) /* A, B, and DoRA's magnitudes and room for its row norms */
        floats += (size_t)l->pairs[i].rank * (size_t)(l->pairs[i].n_in + l->pairs[i].n_out) +
                  (l->pairs[i].magnitude ? 2 * (size_t)l->pairs[i].n_out : 0);
    size_t table = ((size_t)l->n_pairs * sizeof(wisp_lora_pair) + 63) & ~(size_t)63;
    ww_adapter *a = calloc(1, sizeof *a);
    if (!a || !(a->mem = ww_alloc(table + floats * sizeof(float)))) {
        free(a);
        wisp_fail(&m->err, WISP_ERR_CAPACITY, "out of wasm memory for the trained adapter (%zu floats)", floats);
        return NULL;
    }
    wisp_lora_pair *pairs = a->mem;
    float *w = (float *)((uint8_t *)a->mem + table);
    for (int32_t i = 0; i < l->n_pairs; i++) {
        pairs[i] = l->pairs[i];
        size_t na = (size_t)pairs[i].rank * (size_t)pairs[i].n_in, nb = (size_t)pairs[i].n_out * (size_t)pairs[i].rank;
        pairs[i].a = w;
        pairs[i].b = w + na;
        w += na + nb;
        if (pairs[i].magnitude) {
            pairs[i].magnitude = w;
            pairs[i].norm = w + pairs[i].n_out;
            w += 2 * (size_t)pairs[i].n_out;
        }
    }
    a->lora = *l;
    a->lora.pairs = pairs;
    return a;
}

/* Floats per virtual position of a prompt- or prefix-tuning context:
 * dim, or a prefix's key and value of every layer. */
static size_t virtual_width(const wisp_ctx *ctx) {
    const wisp_hparams *hp = wisp_ctx_hparams(ctx);
    return wisp_ctx_config(ctx)->train.prefix ? (size_t)hp->n_layers * 2 * (size_t)hp->n_kv_heads * (size_t)hp->head_dim
                                              : (size_t)hp->dim;
}

/* A prompt- or prefix-tuning result: the virtual positions' rows in a block
 * of their own, and its init text (PEFT records it). */
static ww_adapter *prompt_result(ww_model *m, const wisp_ctx *ctx, const char *init, uint32_t init_len) {
    int32_t n = 0;
    wisp_train_prompt(ctx, &n);
    size_t floats = (size_t)n * virtual_width(ctx);
    ww_adapter *a = calloc(1, sizeof *a);
    if (a) a->mem = ww_alloc(floats * sizeof(float));
    if (a && a->mem && init_len) {
        a->init_text = malloc(init_len + 1);
        if (a->init_text) memcpy(a->init_text, init, init_len), a->init_text[init_len] = 0;
    }
    if (!a || !a->mem || (init_len && !a->init_text)) {
        if (a) ww_free(a->mem), free(a);
        wisp_fail(&m->err, WISP_ERR_CAPACITY, "out of wasm memory for the trained prompt (%zu floats)", floats);
        return NULL;
    }
    a->prompt_rows = a->mem;
    a->n_virtual = n;
    a->prefix = wisp_ctx_config(ctx)->train.prefix;
    return a;
}

/* PEFT's TEXT init: the embeddings of the text's tokens as its tokenizer
 * call gives them (BOS when the model adds one), as `wisp finetune
 * --prompt-init-text` does. */
static wisp_status init_prompt_from_text(ww_train *t, const char *text, uint32_t len, wisp_error *err) {
    const wisp_tokenizer *tok = wisp_ctx_tokenizer(t->ctx);
    unsigned flags = wisp_tokenizer_add_bos_default(tok) ? WISP_TOKENIZE_ADD_BOS : 0;
    size_t n = 0;
    wisp_status s = wisp_tokenize_text(t->ctx, text, len, flags, NULL, 0, &n, err);
    if (s && s != WISP_ERR_CAPACITY) return wisp_error_prefix(err, "promptInitText");
    int32_t *ids = malloc(sizeof(int32_t) * (n ? n : 1));
    if (!ids) return wisp_fail(err, WISP_ERR_CAPACITY, "out of wasm memory for %zu token ids", n);
    s = wisp_tokenize_text(t->ctx, text, len, flags, ids, n, &n, err);
    if (!s) s = wisp_train_set_prompt(t->ctx, NULL, ids, (int32_t)n, err);
    free(ids);
    return s ? wisp_error_prefix(err, "promptInitText") : WISP_OK;
}

/* Copy the training context's adapter values into the result's own block. */
static void copy_weights(ww_adapter *a, const wisp_lora *l) {
    wisp_lora_pair *dst = (wisp_lora_pair *)a->lora.pairs;
    for (int32_t i = 0; i < l->n_pairs; i++) {
        size_t na = (size_t)dst[i].rank * (size_t)dst[i].n_in, nb = (size_t)dst[i].n_out * (size_t)dst[i].rank;
        memcpy((void *)dst[i].a, l->pairs[i].a, na * sizeof(float));
        memcpy((void *)dst[i].b, l->pairs[i].b, nb * sizeof(float));
        if (dst[i].magnitude) memcpy((void *)dst[i].magnitude, l->pairs[i].magnitude, (size_t)dst[i].n_out * sizeof(float));
    }
}

/* The data's arrays, sized by its plan, then the index. */
static wisp_status build_data_in(wisp_train_data *d, wisp_data_memory *mem, const wisp_tokenizer *tok, const char *bytes,
                                 size_t n, const wisp_data_options *o, const wisp_data_plan_info *info,
                                 const wisp_data_chat *chat, wisp_error *err) {
    mem->cap_tokens = info->max_tokens;
    mem->cap_examples = info->max_examples;
    mem->cap_nodes = info->json_nodes;
    mem->text_bytes = info->text_bytes;
    mem->tok_scratch_bytes = info->tok_scratch;
    mem->tokens = malloc((info->max_tokens ? info->max_tokens : 1) * sizeof(int32_t));
    mem->examples = malloc((info->max_examples ? info->max_examples : 1) * sizeof(wisp_data_example));
    mem->order = malloc((info->max_examples ? info->max_examples : 1) * sizeof(int32_t));
    mem->nodes = malloc((info->json_nodes ? info->json_nodes : 1) * sizeof(wisp_json_node));
    mem->text = malloc(info->text_bytes ? info->text_bytes : 1);
    mem->tok_scratch = ww_alloc(info->tok_scratch ? info->tok_scratch : 1);
    if (!mem->tokens || !mem->examples || !mem->order || !mem->nodes || !mem->text || !mem->tok_scratch)
        return wisp_fail(err, WISP_ERR_CAPACITY, "out of wasm memory for the training data (%zu tokens at most)",
                         info->max_tokens);
    return chat ? wisp_data_build_chat(d, tok, bytes, n, o, mem, chat, err) : wisp_data_build(d, tok, bytes, n, o, mem, err);
}

/* The chat template for JSONL conversations ({"messages"}): the one `spec`
 * chooses (see ww_template_source), else the model's. In one block *mem with
 * its BOS/EOS texts after the template's planned memory; *mem NULL when no
 * spec is given and the model has no usable template (conversations are then
 * refused by name). A chosen template that cannot be used is an error. The
 * caller frees the block. The date is fixed: the data must not change with
 * the day. */
static wisp_status chat_template_of(ww_model *m, const wisp_tokenizer *tok, const char *spec, uint32_t spec_len,
                                    wisp_data_chat *chat, void **block, wisp_error *err) {
    wisp_str src;
    size_t bytes = 0;
    wisp_error own = {0};
    memset(chat, 0, sizeof *chat);
    *block = NULL;
    if (spec_len == 0) { /* the model's, if it has one that works */
        if (!wisp_gguf_get_str(&m->gguf, "tokenizer.chat_template", &src) || wisp_template_plan(src.ptr, src.len, NULL, &bytes, &own))
            return WISP_OK;
    } else {
        if (!ww_template_source(m, spec, spec_len, &src)) return m->err.status ? m->err.status : WISP_ERR_ARG;
        wisp_status s = wisp_template_plan(src.ptr, src.len, NULL, &bytes, err);
        if (s) return wisp_error_prefix(err, "chat template");
    }
    int32_t ids[2] = {wisp_tokenizer_bos(tok), wisp_tokenizer_eos(tok)};
    wisp_str texts[2] = {{"", 0}, {"", 0}};
    for (int k = 0; k < 2; k++)
        if (ids[k] >= 0) texts[k] = wisp_token_text(tok, ids[k]);
    char *mem = ww_alloc(bytes + texts[0].len + texts[1].len + 2);
    wisp_status s = mem ? wisp_template_init(&chat->tpl, mem, bytes, src.ptr, src.len, NULL, err)
                        : wisp_fail(err, WISP_ERR_CAPACITY, "out of wasm memory for the chat template");
    if (s) {
        ww_free(mem);
        chat->tpl = NULL;
        return spec_len ? s : WISP_OK;
    }
    char *at = mem + bytes;
    for (int k = 0; k < 2; k++) {
        if (ids[k] < 0) continue;
        memcpy(at, texts[k].ptr, texts[k].len);
        at[texts[k].len] = 0;
        if (k == 0) chat->bos_token = at;
        else chat->eos_token = at;
        at += texts[k].len + 1;
    }
    chat->year = 2024, chat->month = 7, chat->day = 26;
    *block = mem;
    return WISP_OK;
}

/* Tokenize and index the training data (plain text or JSONL, see
 * train_data.h) into arrays sized by its plan. */
static wisp_status build_data(ww_train *t, const char *bytes, size_t n, const ww_train_in *ti, const char *spec,
                              uint32_t spec_len, wisp_error *err) {
    const wisp_tokenizer *tok = wisp_ctx_tokenizer(t->ctx);
    wisp_data_options o = {ti->jsonl ? WISP_DATA_JSONL : WISP_DATA_TEXT, ti->blank_line_docs ? WISP_DOCS_BLANK_LINE : WISP_DOCS_FILE,
                           t->S, 0.0f, t->plan.cfg.train.seed, 0, ti->packing != 0};
    wisp_data_chat chat;
    void *chat_mem = NULL;
    if (spec_len && o.format != WISP_DATA_JSONL)
        return wisp_fail(err, WISP_ERR_ARG, "a chat template is for conversation records (JSONL), not plain text");
    wisp_status s = o.format == WISP_DATA_JSONL ? chat_template_of(t->m, tok, spec, spec_len, &chat, &chat_mem, err) : WISP_OK;
    if (s) return s;
    wisp_data_plan_info info;
    s = chat_mem ? wisp_data_plan_chat(tok, bytes, n, &o, &chat, &info, err) : wisp_data_plan(tok, bytes, n, &o, &info, err);
    if (!s) s = build_data_in(&t->data, &t->mem, tok, bytes, n, &o, &info, chat_mem ? &chat : NULL, err);
    ww_free(chat_mem);
    t->data.chat = NULL; /* the template was needed to build only */
    return s;
}

/* DPO: the pairs {prompt, chosen, rejected} (JSONL) as two pipelines of
 * prompt/completion records built with the same options and seed, so example
 * i of each is pair i (adapters/preference_pairs.h), as `wisp finetune
 * --method dpo` builds them; conversational pairs (lists of messages) are
 * rendered with the template spec[0..spec_len) chooses, else the model's. */
static wisp_status build_pairs(ww_train *t, const char *bytes, size_t n, const ww_train_in *ti, const char *spec,
                               uint32_t spec_len, wisp_error *err) {
    const wisp_tokenizer *tok = wisp_ctx_tokenizer(t->ctx);
    if (!ti->jsonl) return wisp_fail(err, WISP_ERR_ARG, "DPO takes JSONL pairs {\"prompt\", \"chosen\", \"rejected\"}, not plain text");
    if (ti->packing) return wisp_fail(err, WISP_ERR_ARG, "DPO scores each answer in a window of its own: packing is not for DPO");
    wisp_data_options o = {WISP_DATA_JSONL, WISP_DOCS_FILE, t->S, 0.0f, t->plan.cfg.train.seed, 0, false};
    wisp_data_chat chat;
    void *chat_mem = NULL;
    size_t cap = 0, cap_nodes = 0, len = 0;
    wisp_status s = chat_template_of(t->m, tok, spec, spec_len, &chat, &chat_mem, err);
    if (!s) s = wisp_pairs_plan(bytes, n, &cap, &cap_nodes, err);
    if (s) {
        ww_free(chat_mem);
        return s;
    }
    char *text = malloc(cap ? cap : 1);
    wisp_json_node *nodes = malloc((cap_nodes ? cap_nodes : 1) * sizeof *nodes);
    if (!text || !nodes) s = wisp_fail(err, WISP_ERR_CAPACITY, "out of wasm memory for %zu bytes of pairs", cap);
    const wisp_pair_side sides[2] = {WISP_PAIR_CHOSEN, WISP_PAIR_REJECTED};
    wisp_train_data *data[2] = {&t->data, &t->rejected};
    wisp_data_memory *mem[2] = {&t->mem, &t->rejected_mem};
    const wisp_data_chat *with = chat_mem ? &chat : NULL;
    for (int k = 0; k < 2 && !s; k++) {
        wisp_data_plan_info info;
        s = wisp_pairs_side(bytes, n, sides[k], nodes, cap_nodes, text, cap, &len, err);
        if (!s) s = with ? wisp_data_plan_chat(tok, text, len, &o, with, &info, err) : wisp_data_plan(tok, text, len, &o, &info, err);
        if (!s) s = build_data_in(data[k], mem[k], tok, text, len, &o, &info, with, err);
        data[k]->chat = NULL; /* the template was needed to build only */
        if (s) wisp_error_prefix(err, k == 0 ? "the chosen answers" : "the rejected answers");
    }
    if (!s && t->data.n_examples != t->rejected.n_examples)
        s = wisp_fail(err, WISP_ERR_INTERNAL, "%d chosen but %d rejected answers", t->data.n_examples, t->rejected.n_examples);
    free(text);
    free(nodes);
    ww_free(chat_mem);
    return s;
}

/* DPO: the reference's log-probs of every pair (the base, the adapter
 * detached) when the run sees every pair at least once, as `wisp finetune`
 * does (trl's precompute_ref_log_probs); a shorter run scores the reference
 * in each step instead. */
static wisp_status reference_logps(ww_train *t, int64_t steps, wisp_error *err) {
    int32_t n = wisp_data_count(&t->data, WISP_SPLIT_TRAIN);
    if (steps * (t->B / 2) < n) return WISP_OK;
    if (!(t->ref = malloc(sizeof(double) * 2 * (size_t)(n > 0 ? n : 1))))
        return wisp_fail(err, WISP_ERR_CAPACITY, "out of wasm memory for %d reference log-probs", 2 * n);
    wisp_status s = wisp_pairs_reference(t->ctx, &t->data, &t->rejected, t->B, t->S + 1, t->batch, t->mask, t->ref, err);
    return s ? wisp_error_prefix(err, "reference log-probs") : WISP_OK;
}

/* Start a session on the training data in `bytes` (from ww_alloc; ownership
 * passes, even on failure: they are freed once tokenized). Conversations are
 * rendered with the template spec[0..spec_len) chooses (see
 * ww_template_source; "": the model's), which is needed during the call only.
 * Prompt tuning starts from the embeddings of init[0..init_len) when given
 * (PEFT's TEXT init), else from random rows. This is where wasm memory grows
 * for fine-tuning. */
API ww_train *ww_train_begin(ww_model *m, const ww_train_in *ti, char *bytes, uint32_t n, const char *spec,
                             uint32_t spec_len, const char *init, uint32_t init_len) {
    ww_train *t = calloc(1, sizeof *t);
    if (!t) {
        free(bytes);
        wisp_fail(&m->err, WISP_ERR_CAPACITY, "out of wasm memory for a training session");
        return NULL;
    }
    t->m = m;
    t->dpo = ti->method == WW_METHOD_DPO;
    wisp_config c;
    train_config(m, ti, &c);
    if (wisp_plan(&m->gguf, &c, &t->plan, &m->err)) goto fail;
    t->S = t->plan.cfg.train.seq_len;
    t->B = t->plan.cfg.train.micro_batch;
    size_t per_batch = (size_t)t->B * ((size_t)t->S + 1);
    t->arena = ww_alloc(t->plan.total);
    t->batch = malloc(per_batch * sizeof(int32_t));
    t->mask = malloc(per_batch);
    t->batch_ref = malloc(sizeof(double) * (size_t)t->B);
    if (!t->arena || !t->batch || !t->mask || !t->batch_ref) {
        wisp_fail(&m->err, WISP_ERR_CAPACITY, "out of wasm memory: training needs an arena of %zu bytes", t->plan.total);
        goto fail;
    }
    if (wisp_init(&t->ctx, &m->gguf, &c, t->arena, t->plan.total, &m->err)) goto fail;
    if (init_len && ti->method != WW_METHOD_PROMPT) {
        wisp_fail(&m->err, WISP_ERR_ARG, "an init text is for prompt tuning");
        goto fail;
    }
    if (init_len && init_prompt_from_text(t, init, init_len, &m->err)) goto fail;
    if (t->dpo ? build_pairs(t, bytes, n, ti, spec, spec_len, &m->err) : build_data(t, bytes, n, ti, spec, spec_len, &m->err))
        goto fail;
    free(bytes);
    bytes = NULL;
    if (t->dpo && reference_logps(t, ti->steps, &m->err)) goto fail;
    t->out = ti->method == WW_METHOD_PROMPT || ti->method == WW_METHOD_PREFIX ? prompt_result(m, t->ctx, init, init_len) : result_adapter(m, wisp_train_lora(t->ctx));
    if (!t->out) goto fail;
    if (ww_adapter_prepare_export(m, t->out)) goto fail;
    return t;
fail:
    free(bytes);
    ww_train_free(t);
    return NULL;
}

/* Training windows (or JSONL records) in the data. */
API int32_t ww_train_examples(ww_train *t) { return wisp_data_count(&t->data, WISP_SPLIT_TRAIN); }

/* What the data became: records kept, windows, records cut to the window,
 * records left with nothing to score, scored targets. */
API void ww_train_data_report(ww_train *t, ww_train_data_out *out) {
    out->records = t->data.n_records;
    out->windows = t->data.n_examples;
    out->truncated = t->data.n_truncated;
    out->unscored = t->data.n_unscored;
    out->scored = (double)t->data.n_scored;
}

/* One optimizer step over the next micro_batch examples; what it did into *out. */
API int32_t ww_train_step(ww_train *t, ww_train_step_out *out) {
    ww_model *m = t->m;
    double loss = 0;
    int32_t scored = 0;
    wisp_train_step_info info;
    out->rewards_chosen = out->rewards_rejected = out->rewards_accuracies = out->rewards_margins = NAN;
    if (t->dpo) { /* scored: the pairs */
        wisp_pairs_next(&t->data, &t->rejected, t->ref, t->B / 2, t->S + 1, t->batch, t->mask, t->batch_ref);
        wisp_dpo_result r;
        if (wisp_train_dpo_micro_step(t->ctx, t->batch, t->mask, t->B / 2, t->ref ? t->batch_ref : NULL, &r, &m->err))
            return -1;
        loss = r.loss, scored = r.n_pairs;
        out->rewards_chosen = r.rewards_chosen, out->rewards_rejected = r.rewards_rejected;
        out->rewards_accuracies = r.rewards_accuracies, out->rewards_margins = r.rewards_margins;
    } else {
        wisp_data_next(&t->data, t->B, t->batch, t->mask);
        if (wisp_train_micro_step(t->ctx, t->batch, t->mask, t->B, &loss, &scored, &m->err)) return -1;
    }
    if (wisp_train_optimizer_step(t->ctx, &info, &m->err)) return -1;
    out->loss = loss;
    out->scored = scored;
    out->lr = info.lr;
    out->grad_norm = info.grad_norm;
    out->step = (double)info.step;
    out->epoch = (double)t->data.epoch;
    return 0;
}

/* End the session: the trained adapter (owned by the caller now); the
 * session's memory is released for reuse. */
API ww_adapter *ww_train_finish(ww_train *t) {
    ww_adapter *a = t->out;
    if (a->prompt_rows) {
        int32_t n = 0;
        const float *rows = wisp_train_prompt(t->ctx, &n);
        memcpy(a->prompt_rows, rows, (size_t)n * virtual_width(t->ctx) * sizeof(float));
    } else {
        copy_weights(a, wisp_train_lora(t->ctx));
    }
    t->out = NULL;
    ww_train_free(t);
    return a;
}
