/* Training state as bytes: what it takes to continue a run bit-identically.
 *
 *   "WISPTRS1"  u32 version  u32 header bytes
 *   u32 n_layers, dim, n_vocab, rank, targets, optimizer, n_pairs, has_m1, has_m2
 *   u64 n_params  u64 seed
 *   i64 step  i64 micro_total  i32 good_steps  f32 loss_scale
 *   i32 hysteresis_left  i64 skipped_steps                (version 2 on)
 *   f32 params[n_params]  (f32 m1[n_params])  (f32 m2[n_params])
 *
 * Little-endian, the byte order of every target wisp runs on. Gradients are
 * not part of it: states are taken between optimizer steps, when they are
 * zero. The dropout masks follow from (seed, micro_total). Version 1 states
 * (92-byte header, before the loss scale had hysteresis) still load: they
 * resume with full hysteresis and no skipped steps counted. */
#include <string.h>

#include "half.h"
#include "sink.h"
#include "train.h"

#define STATE_MAGIC "WISPTRS1"
#define STATE_VERSION 2u
#define HEADER_BYTES 104u
#define HEADER_BYTES_V1 92u

/* the nine u32 fields, in file order */
enum { H_LAYERS, H_DIM, H_VOCAB, H_RANK, H_TARGETS, H_OPTIMIZER, H_PAIRS, H_M1, H_M2, H_COUNT };

typedef struct state_header {
    uint32_t u[H_COUNT];
    uint64_t n_params, seed;
    int64_t step, micro_total;
    int32_t good_steps;
    float loss_scale;
    int32_t hysteresis_left;
    int64_t skipped_steps;
} state_header;

static state_header header_of(const wisp_train *tr) {
    state_header h = {{(uint32_t)tr->L, (uint32_t)tr->D, (uint32_t)tr->V, (uint32_t)tr->cfg.rank, tr->cfg.targets,
                       (uint32_t)tr->cfg.optimizer, (uint32_t)tr->n_pairs, tr->m1 != NULL, tr->m2 != NULL},
                      tr->n_params, tr->cfg.seed, tr->step, tr->micro_total, tr->good_steps, tr->loss_scale,
                      tr->hysteresis_left, tr->skipped_steps};
    return h;
}

static size_t arrays_of(const state_header *h) { return 1 + h->u[H_M1] + h->u[H_M2]; }

size_t wisp_train_state_bytes(const wisp_ctx *ctx) {
    if (!ctx->train) return 0;
    state_header h = header_of(ctx->train);
    return HEADER_BYTES + arrays_of(&h) * h.n_params * sizeof(float);
}

static void put(uint8_t **p, const void *v, size_t n) {
    memcpy(*p, v, n);
    *p += n;
}

wisp_status wisp_train_state_save(const wisp_ctx *ctx, wisp_sink *sink, wisp_error *err) {
    const wisp_train *tr = ctx->train;
    if (!tr) return wisp_fail(err, WISP_ERR_ARG, "this context does not train");
    if (tr->micro_in_accum)
        return wisp_fail(err, WISP_ERR_ARG, "training state can only be saved between optimizer steps (%d micro-steps pending)",
                         tr->micro_in_accum);
    state_header h = header_of(tr);
    uint8_t buf[HEADER_BYTES], *p = buf;
    uint32_t version = STATE_VERSION, hb = HEADER_BYTES;
    put(&p, STATE_MAGIC, 8);
    put(&p, &version, 4);
    put(&p, &hb, 4);
    put(&p, h.u, sizeof h.u);
    put(&p, &h.n_params, 8);
    put(&p, &h.seed, 8);
    put(&p, &h.step, 8);
    put(&p, &h.micro_total, 8);
    put(&p, &h.good_steps, 4);
    put(&p, &h.loss_scale, 4);
    put(&p, &h.hysteresis_left, 4);
    put(&p, &h.skipped_steps, 8);
    wisp_status s = wisp_sink_write(sink, buf, sizeof buf, err);
    const float *arrays[3] = {tr->params, tr->m1, tr->m2};
    for (int i = 0; i < 3 && !s; i++)
        if (arrays[i]) s = wisp_sink_write(sink, arrays[i], tr->n_params * sizeof(float), err);
    return s;
}

static void get(const uint8_t **p, void *v, size_t n) {
    memcpy(v, *p, n);
    *p += n;
}

wisp_status wisp_train_state_load(wisp_ctx *ctx, const void *bytes, size_t n, size_t *used, wisp_error *err) {
    wisp_train *tr = ctx->train;
    if (used) *used = 0;
    if (!tr) return wisp_fail(err, WISP_ERR_ARG, "this context does not train");
    if (!bytes || n < HEADER_BYTES_V1 || memcmp(bytes, STATE_MAGIC, 8) != 0)
        return wisp_fail(err, WISP_ERR_FORMAT, "not a wisp training state (bad magic or truncated header)");
    const uint8_t *p = (const uint8_t *)bytes + 8;
    uint32_t version, hb;
    get(&p, &version, 4);
    get(&p, &hb, 4);
    if (!(version == STATE_VERSION && hb == HEADER_BYTES) && !(version == 1 && hb == HEADER_BYTES_V1))
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "training state version %u (header %u bytes); this wisp reads versions 1 "
                         "and %u", version, hb, STATE_VERSION);
    if (n < hb) return wisp_fail(err, WISP_ERR_FORMAT, "training state truncated in its header");
    state_header h, want = header_of(tr);
    get(&p, h.u, sizeof h.u);
    get(&p, &h.n_params, 8);
    get(&p, &h.seed, 8);
    get(&p, &h.step, 8);
    get(&p, &h.micro_total, 8);
    get(&p, &h.good_steps, 4);
    get(&p, &h.loss_scale, 4);
    h.hysteresis_left = tr->cfg.loss_scale_hysteresis, h.skipped_steps = 0;
    if (version >= 2) {
        get(&p, &h.hysteresis_left, 4);
        get(&p, &h.skipped_steps, 8);
    }
    if (h.u[H_LAYERS] != want.u[H_LAYERS] || h.u[H_DIM] != want.u[H_DIM] || h.u[H_VOCAB] != want.u[H_VOCAB])
        return wisp_fail(err, WISP_ERR_SHAPE, "the state is for a model of %u layers, dim %u, vocab %u; this one has %u, %u, %u",
                         h.u[H_LAYERS], h.u[H_DIM], h.u[H_VOCAB], want.u[H_LAYERS], want.u[H_DIM], want.u[H_VOCAB]);
    if (h.u[H_RANK] != want.u[H_RANK] || h.u[H_TARGETS] != want.u[H_TARGETS] || h.u[H_PAIRS] != want.u[H_PAIRS] ||
        h.n_params != want.n_params)
        return wisp_fail(err, WISP_ERR_SHAPE, "the state's adapter (rank %u, targets 0x%x) differs from this context's (rank %u, targets 0x%x)",
                         h.u[H_RANK], h.u[H_TARGETS], want.u[H_RANK], want.u[H_TARGETS]);
    if (h.u[H_OPTIMIZER] != want.u[H_OPTIMIZER] || h.u[H_M1] != want.u[H_M1] || h.u[H_M2] != want.u[H_M2])
        return wisp_fail(err, WISP_ERR_SHAPE, "the state was saved with another optimizer configuration");
    if (h.seed != want.seed)
        return wisp_fail(err, WISP_ERR_ARG, "the state was trained with seed %llu, this context has seed %llu",
                         (unsigned long long)h.seed, (unsigned long long)want.seed);
    if (h.step < 0 || h.micro_total < 0 || !(h.loss_scale >= 1 && h.loss_scale <= 16777216.0f) ||
        h.hysteresis_left < 1 || h.hysteresis_left > tr->cfg.loss_scale_hysteresis || h.skipped_steps < 0)
        return wisp_fail(err, WISP_ERR_FORMAT, "the state's counters are corrupt");
    size_t total = hb + arrays_of(&h) * h.n_params * sizeof(float);
    if (n < total) return wisp_fail(err, WISP_ERR_FORMAT, "training state truncated: %zu of %zu bytes", n, total);
    /* a NaN or Inf here would poison every later step and the adapter written from them */
    for (size_t i = 0; i < arrays_of(&h) * h.n_params; i++)
        if ((wisp_load_u32(p + 4 * i) & 0x7f800000u) == 0x7f800000u)
            return wisp_fail(err, WISP_ERR_NUMERIC, "the training state holds a NaN or infinite value (float %zu)", i);
    float *arrays[3] = {tr->params, tr->m1, tr->m2};
    for (int i = 0; i < 3; i++)
        if (arrays[i]) get(&p, arrays[i], tr->n_params * sizeof(float));
    memset(tr->grad, 0, tr->n_params * sizeof(float));
    wisp_train_prefix_project(tr); /* a reparameterized prefix follows its parameters */
    tr->step = h.step;
    tr->micro_total = h.micro_total;
    tr->micro_in_accum = 0;
    tr->good_steps = h.good_steps;
    tr->loss_scale = tr->cfg.act_type == WISP_TYPE_F16 ? h.loss_scale : 1.0f;
    tr->hysteresis_left = h.hysteresis_left;
    tr->skipped_steps = h.skipped_steps;
    if (used) *used = total;
    return WISP_OK;
}
