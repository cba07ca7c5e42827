/* Attaching LoRA adapters to a context and adding their contribution after
 * each adapted projection (see lora_apply.h). */
#include "lora_apply.h"

#include <math.h>
#include <string.h>

#include "context.h"
#include "dora.h"
#include "quant.h"

void wisp_adapters_layout(wisp_layout *lay, wisp_adapter_set *set, int32_t n_layers, int32_t max_adapters,
                          int32_t max_rank, int32_t n_batch) {
    if (set) memset(set, 0, sizeof *set);
    if (max_adapters <= 0) return;
    size_t cells = (size_t)n_layers * WISP_PROJ_COUNT;
    wisp_adapter_slot *slots = wisp_layout_take(lay, (size_t)max_adapters, sizeof(wisp_adapter_slot), WISP_PART_ADAPTERS);
    wisp_adapter_entry *entries =
        wisp_layout_take(lay, cells * (size_t)max_adapters, sizeof(wisp_adapter_entry), WISP_PART_ADAPTERS);
    int32_t *counts = wisp_layout_take(lay, cells, sizeof(int32_t), WISP_PART_ADAPTERS);
    float *h = wisp_layout_take(lay, (size_t)n_batch * (size_t)max_rank, sizeof(float), WISP_PART_ADAPTERS);
    if (!set) return;
    set->slots = slots, set->entries = entries, set->counts = counts, set->h = h;
    set->max_adapters = max_adapters;
    set->max_rank = max_rank;
    set->n_batch = n_batch;
    set->n_layers = n_layers;
}

float wisp_lora_row_dot(const wisp_kernels *k, int32_t type, const void *row, const float *x, int64_t n) {
    if (type == WISP_TYPE_F32) return k->dot_f32((const float *)row, x, n);
    if (type == WISP_TYPE_F16) return k->dot_f16_f32((const uint16_t *)row, x, n);
    return wisp_dot_bf16_f32(row, x, n);
}

static size_t lora_elem_bytes(int32_t type) { return type == WISP_TYPE_F32 ? 4 : 2; }

wisp_status wisp_lora_pair_check(const wisp_model *m, const wisp_lora_pair *p, int32_t max_rank, wisp_error *err) {
    const wisp_hparams *hp = &m->hp;
    if (p->layer < 0 || p->layer >= hp->n_layers)
        return wisp_fail(err, WISP_ERR_SHAPE, "adapter pair for layer %d, but the model has layers 0..%d", p->layer,
                         hp->n_layers - 1);
    if (p->proj < 0 || p->proj >= WISP_PROJ_COUNT)
        return wisp_fail(err, WISP_ERR_SHAPE, "blk.%d: adapter pair for projection %d, which does not exist", p->layer,
                         p->proj);
    const char *name = wisp_proj_gguf_name(p->proj);
    const wisp_weight *w = &m->layers[p->layer].proj[p->proj];
    if (p->n_in != w->cols || p->n_out != w->rows)
        return wisp_fail(err, WISP_ERR_SHAPE,
                         "blk.%d.%s: adapter is %d inputs x %d outputs but the weight has %d columns x %d rows",
                         p->layer, name, p->n_in, p->n_out, w->cols, w->rows);
    if (p->rank < 1 || p->rank > max_rank)
        return wisp_fail(err, WISP_ERR_CAPACITY, "blk.%d.%s: adapter rank %d is outside 1..%d (max_lora_rank)",
                         p->layer, name, p->rank, max_rank);
    if (p->type != WISP_TYPE_F32 && p->type != WISP_TYPE_F16 && p->type != WISP_TYPE_BF16)
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "blk.%d.%s: adapter tensors are %s; wisp applies F32, F16 or BF16",
                         p->layer, name, wisp_type_info_of(p->type) ? wisp_type_info_of(p->type)->name : "unknown");
    if (!p->a || !p->b) return wisp_fail(err, WISP_ERR_ARG, "blk.%d.%s: adapter pair without A or B data", p->layer, name);
    if (!isfinite(p->scale))
        return wisp_fail(err, WISP_ERR_NUMERIC, "blk.%d.%s: adapter scale is not finite", p->layer, name);
    return WISP_OK;
}

/* DoRA's row norms of W + s B A for every pair at the attached scale, one
 * dequantized row at a time in the idle activation scratch (attach time:
 * no forward pass runs). */
static void dora_refresh(wisp_ctx *ctx, const wisp_lora *lora, float user_scale) {
    const wisp_hparams *hp = &ctx->model.hp;
    size_t room_gate = (size_t)ctx->cfg.n_batch * (size_t)hp->ffn_dim;
    for (int32_t i = 0; i < lora->n_pairs; i++) {
        const wisp_lora_pair *p = &lora->pairs[i];
        if (!p->magnitude) continue;
        const wisp_weight *w = &ctx->model.layers[p->layer].proj[p->proj];
        float *row = (size_t)p->n_in <= room_gate ? ctx->s.gate : ctx->s.xb;
        size_t room = (size_t)p->n_in <= room_gate ? room_gate : (size_t)ctx->cfg.n_batch * (size_t)(hp->dim > ctx->q_dim ? hp->dim : ctx->q_dim);
        if ((size_t)ctx->exec.threads.n_threads * (size_t)p->n_in <= room)
            wisp_dora_norms(&ctx->exec, w, p, user_scale * p->scale, row, p->norm);
        else
            wisp_dora_norm_rows(&ctx->exec, w, p, user_scale * p->scale, row, 0, p->n_out, p->norm);
    }
}

static bool is_dora(const wisp_lora *l) { return l->n_pairs > 0 && l->pairs[0].magnitude; }

static wisp_adapter_slot *find_slot(wisp_adapter_set *set, int32_t handle) {
    for (int32_t i = 0; i < set->max_adapters; i++)
        if (set->slots[i].lora && set->slots[i].handle == handle) return &set->slots[i];
    return NULL;
}

wisp_status wisp_adapter_attach(wisp_ctx *ctx, const wisp_lora *lora, float scale, int32_t *handle, wisp_error *err) {
    wisp_adapter_set *set = &ctx->adapters;
    const wisp_model *m = &ctx->model;
    if (handle) *handle = 0;
    if (!lora || (lora->n_pairs > 0 && !lora->pairs) || lora->n_pairs < 0)
        return wisp_fail(err, WISP_ERR_ARG, "no adapter given");
    if (!isfinite(scale)) return wisp_fail(err, WISP_ERR_NUMERIC, "the adapter scale is not finite");
    if (set->max_adapters == 0)
        return wisp_fail(err, WISP_ERR_CAPACITY, "this context was planned without adapters (set max_adapters)");
    int32_t free_slot = -1;
    for (int32_t i = 0; i < set->max_adapters && free_slot < 0; i++)
        if (!set->slots[i].lora) free_slot = i;
    if (free_slot < 0)
        return wisp_fail(err, WISP_ERR_CAPACITY, "all %d adapter slots are in use (plan a larger max_adapters)",
                         set->max_adapters);
    if (set->last_handle == INT32_MAX)
        return wisp_fail(err, WISP_ERR_CAPACITY, "this context has handed out every adapter handle");
    /* validate everything before changing anything */
    for (int32_t i = 0; i < lora->n_pairs; i++) {
        const wisp_lora_pair *p = &lora->pairs[i];
        wisp_status s = wisp_lora_pair_check(m, p, set->max_rank, err);
        if (s) return s;
        for (int32_t j = 0; j < i; j++)
            if (lora->pairs[j].layer == p->layer && lora->pairs[j].proj == p->proj)
                return wisp_fail(err, WISP_ERR_FORMAT, "blk.%d.%s: the adapter adapts this projection twice", p->layer,
                                 wisp_proj_gguf_name(p->proj));
        if (!p->magnitude != !lora->pairs[0].magnitude)
            return wisp_fail(err, WISP_ERR_FORMAT, "blk.%d.%s: an adapter is DoRA in all its pairs or in none",
                             p->layer, wisp_proj_gguf_name(p->proj));
        if (p->magnitude && !p->norm)
            return wisp_fail(err, WISP_ERR_ARG, "blk.%d.%s: DoRA pair without room for its row norms", p->layer,
                             wisp_proj_gguf_name(p->proj));
    }
    /* DoRA normalizes W + (its own) s B A: another adapter on the same
     * weights would change what it normalizes, so a DoRA adapter stays alone */
    bool dora_attached = false;
    for (int32_t i = 0; i < set->max_adapters; i++) dora_attached |= set->slots[i].lora && is_dora(set->slots[i].lora);
    if (dora_attached || (is_dora(lora) && set->n_attached > 0))
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "a DoRA adapter is applied alone: %s",
                         dora_attached ? "one is attached already (detach it first)"
                                       : "detach the other adapters first (or merge them into the base)");
    if (is_dora(lora)) dora_refresh(ctx, lora, scale);
    for (int32_t i = 0; i < lora->n_pairs; i++) {
        const wisp_lora_pair *p = &lora->pairs[i];
        size_t cell = (size_t)p->layer * WISP_PROJ_COUNT + (size_t)p->proj;
        wisp_adapter_entry *e = &set->entries[cell * (size_t)set->max_adapters + (size_t)set->counts[cell]++];
        e->pair = p;
        e->slot = free_slot;
    }
    wisp_adapter_slot *slot = &set->slots[free_slot];
    slot->lora = lora;
    slot->scale = scale;
    slot->handle = ++set->last_handle;
    set->n_attached++;
    if (handle) *handle = slot->handle;
    return WISP_OK;
}

wisp_status wisp_adapter_set_scale(wisp_ctx *ctx, int32_t handle, float scale, wisp_error *err) {
    wisp_adapter_slot *slot = ctx->adapters.max_adapters ? find_slot(&ctx->adapters, handle) : NULL;
    if (!slot) return wisp_fail(err, WISP_ERR_ARG, "no adapter with handle %d is attached", handle);
    if (!isfinite(scale)) return wisp_fail(err, WISP_ERR_NUMERIC, "the adapter scale is not finite");
    slot->scale = scale;
    if (is_dora(slot->lora)) dora_refresh(ctx, slot->lora, scale); /* the norms are of W + scale s B A */
    return WISP_OK;
}

wisp_status wisp_adapter_detach(wisp_ctx *ctx, int32_t handle, wisp_error *err) {
    wisp_adapter_set *set = &ctx->adapters;
    wisp_adapter_slot *slot = set->max_adapters ? find_slot(set, handle) : NULL;
    if (!slot) return wisp_fail(err, WISP_ERR_ARG, "no adapter with handle %d is attached", handle);
    int32_t id = (int32_t)(slot - set->slots);
    size_t cells = (size_t)set->n_layers * WISP_PROJ_COUNT;
    for (size_t c = 0; c < cells; c++) { /* remove its entries, keeping the others in order */
        wisp_adapter_entry *e = &set->entries[c * (size_t)set->max_adapters];
        int32_t kept = 0;
        for (int32_t i = 0; i < set->counts[c]; i++)
            if (e[i].slot != id) e[kept++] = e[i];
        set->counts[c] = kept;
    }
    slot->lora = NULL;
    set->n_attached--;
    return WISP_OK;
}

int32_t wisp_adapter_count(const wisp_ctx *ctx) { return ctx->adapters.n_attached; }

typedef struct apply_job {
    const wisp_kernels *k;
    const wisp_lora_pair *p;
    const float *x;
    int64_t ldx;
    int32_t n_tok;
    float *h; /* [n_tok][rank] */
    float *y;
    int64_t ldy;
    float scale;
} apply_job;

/* h[t][r] = A_r . x_t, one (t, r) item per call */
static void down_job(void *arg, int ith, int nth) {
    const apply_job *j = arg;
    const wisp_lora_pair *p = j->p;
    size_t row = (size_t)p->n_in * lora_elem_bytes(p->type);
    int64_t lo, hi;
    wisp_split((int64_t)j->n_tok * p->rank, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        int64_t t = i / p->rank, r = i % p->rank;
        j->h[i] = wisp_lora_row_dot(j->k, p->type, (const uint8_t *)p->a + (size_t)r * row, j->x + t * j->ldx, p->n_in);
    }
}

/* y[t][o] += scale * B_o . h_t, split over output rows */
static void up_job(void *arg, int ith, int nth) {
    const apply_job *j = arg;
    const wisp_lora_pair *p = j->p;
    size_t row = (size_t)p->rank * lora_elem_bytes(p->type);
    int64_t lo, hi;
    wisp_split(p->n_out, ith, nth, &lo, &hi);
    for (int32_t t = 0; t < j->n_tok; t++) {
        const float *h = j->h + (size_t)t * p->rank;
        float *y = j->y + t * j->ldy;
        for (int64_t o = lo; o < hi; o++)
            y[o] += j->scale * wisp_lora_row_dot(j->k, p->type, (const uint8_t *)p->b + (size_t)o * row, h, p->rank);
    }
}

/* Below this many multiply-adds a job costs more to hand out than to run. */
#define LORA_PARALLEL_MIN 32768

void wisp_adapters_apply(const wisp_adapter_set *set, wisp_exec *e, int32_t layer, int proj, const float *x,
                         int64_t ldx, int32_t n_tok, float *y, int64_t ldy) {
    if (set->n_attached == 0) return;
    size_t cell = (size_t)layer * WISP_PROJ_COUNT + (size_t)proj;
    const wisp_adapter_entry *entries = &set->entries[cell * (size_t)set->max_adapters];
    for (int32_t i = 0; i < set->counts[cell]; i++) {
        const wisp_lora_pair *p = entries[i].pair;
        apply_job j = {&e->k, p, x, ldx, n_tok, set->h, y, ldy, set->slots[entries[i].slot].scale * p->scale};
        bool wide = (int64_t)n_tok * p->rank * (p->n_in + p->n_out) >= LORA_PARALLEL_MIN;
        if (wide) wisp_exec_parallel(e, down_job, &j);
        else down_job(&j, 0, 1);
        if (wide) wisp_exec_parallel(e, up_job, &j);
        else up_job(&j, 0, 1);
        if (p->magnitude) wisp_dora_scale_rows(p, y, ldy, n_tok); /* alone on its projection (attach) */
    }
}
