/* Training inside the plan:
 *  - for many configurations, the planned arena trains (and nothing is
 *    written past it), one byte less fails cleanly, and the saved-activation
 *    part is exactly what the layout says (checkpointing shrinks it to the
 *    layer inputs, 16-bit storage halves it);
 *  - the same run with 1, 2, 3 or 5 workers gives a bit-identical adapter;
 *  - a run saved after k steps and resumed in a fresh context ends
 *    bit-identical to the uninterrupted run, and bad states are refused. */
#include <stdio.h>

#include "arena.h"
#include "sink.h"
#include "test_train_util.h"

#define SEQ 16

static size_t r64(size_t n) { return wisp_bytes_of(n, 1); }

/* ACTIVATIONS as the header of core/train.h describes it. */
static size_t expected_activations(const wisp_hparams *hp, const wisp_train_config *c) {
    size_t T = (size_t)c->seq_len * c->micro_batch, e = c->act_type == WISP_TYPE_F32 ? 4 : 2;
    size_t D = hp->dim, Q = (size_t)hp->n_heads * hp->head_dim, KV = (size_t)hp->n_kv_heads * hp->head_dim;
    size_t per = r64(T * D * e);
    if (!c->checkpointing) {
        per += 2 * r64(T * Q * e) + 2 * r64(T * KV * e) + r64(T * D * e) + 2 * r64(T * hp->ffn_dim * e);
        per += r64(T * hp->n_heads * 4);
        for (int p = 0; p < WISP_PROJ_COUNT; p++)
            if (c->targets & (1u << p)) per += r64(T * (size_t)c->rank * 4);
    }
    return per * (size_t)hp->n_layers;
}

static void run_steps(wisp_ctx *ctx, int steps, int accum, uint64_t data_seed, wisp_error *err, bool *ok) {
    const wisp_config *c = wisp_ctx_config(ctx);
    int32_t n_seq = c->train.micro_batch, per = c->train.seq_len + 1;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(n_seq * per));
    for (int s = 0; s < steps && *ok; s++)
        for (int m = 0; m < accum && *ok; m++) {
            random_tokens(tok, (size_t)(n_seq * per), wisp_ctx_hparams(ctx)->n_vocab, data_seed + (uint64_t)(s * 7 + m));
            double loss;
            int32_t n;
            *ok = !wisp_train_micro_step(ctx, tok, NULL, n_seq, &loss, &n, err);
            if (*ok && m + 1 == accum) *ok = !wisp_train_optimizer_step(ctx, NULL, err);
        }
    free(tok);
}

static void check_plan(const char *path, const wisp_config *cfg, const char *what) {
    train_env e = {0};
    REQUIRE(train_open(&e, path, cfg), "%s: %s", path, what);
    const wisp_config *c = wisp_ctx_config(e.ctx);
    size_t want = expected_activations(wisp_ctx_hparams(e.ctx), &c->train);
    CHECK(e.plan.part[WISP_PART_ACTIVATIONS] == want, "%s: activations planned %zu, layout says %zu", what,
          e.plan.part[WISP_PART_ACTIVATIONS], want);
    wisp_error err = {0};
    bool ok = true;
    run_steps(e.ctx, 2, 2, 1, &err, &ok);
    CHECK(ok, "%s: training in the planned arena: %s", what, err.message);
    CHECK(guard_intact(&e), "%s: training wrote past the plan", what);
    wisp_ctx *ctx;
    wisp_status s = wisp_init(&ctx, &e.g, cfg, e.arena, e.plan.total - 1, &err);
    CHECK(s == WISP_ERR_ARENA && strstr(err.message, "short"), "%s: one byte less: status %d '%s'", what, s, err.message);
    printf("%-34s arena %9zu bytes (activations %8zu, scratch %8zu, lora+grad+opt %7zu)\n", what, e.plan.total,
           e.plan.part[WISP_PART_ACTIVATIONS], e.plan.part[WISP_PART_TRAIN_SCRATCH],
           e.plan.part[WISP_PART_LORA] + e.plan.part[WISP_PART_GRADIENTS] + e.plan.part[WISP_PART_OPTIMIZER]);
    train_close(&e);
}

static void check_plans(const char *path) {
    wisp_config base = train_config(SEQ, 4, 2);
    check_plan(path, &base, "f32");
    wisp_config c = base;
    c.train.checkpointing = true;
    check_plan(path, &c, "f32 checkpointing");
    c = base;
    c.train.act_type = WISP_TYPE_BF16;
    check_plan(path, &c, "bf16");
    c.train.act_type = WISP_TYPE_F16;
    c.train.checkpointing = true;
    check_plan(path, &c, "f16 checkpointing");
    c = base;
    c.train.micro_batch = 3;
    c.train.dropout = 0.2f;
    c.train.targets = (1u << WISP_PROJ_Q) | (1u << WISP_PROJ_V) | (1u << WISP_PROJ_UP);
    c.train.optimizer = WISP_OPTIMIZER_SGD;
    c.train.momentum = -1;
    c.train.loss_chunk = 5;
    check_plan(path, &c, "batch 3, dropout, q/v/up, sgd");
    c = base;
    c.train.dora = true;
    check_plan(path, &c, "dora");
    c.train.checkpointing = true;
    c.train.act_type = WISP_TYPE_BF16;
    c.train.targets = (1u << WISP_PROJ_K) | (1u << WISP_PROJ_DOWN);
    check_plan(path, &c, "dora, bf16 checkpointing, k/down");

    /* the parts move as they should */
    wisp_memory_plan p0, p1, p2;
    wisp_error err = {0};
    size_t size;
    unsigned char *bytes = read_file(path, &size);
    wisp_gguf g;
    REQUIRE(bytes && !wisp_gguf_open(&g, bytes, size, &err), "open");
    c = base;
    REQUIRE(!wisp_plan(&g, &c, &p0, &err), "plan");
    c.train.checkpointing = true;
    REQUIRE(!wisp_plan(&g, &c, &p1, &err), "plan");
    c.train.checkpointing = false;
    c.train.act_type = WISP_TYPE_BF16;
    REQUIRE(!wisp_plan(&g, &c, &p2, &err), "plan");
    CHECK(p1.part[WISP_PART_ACTIVATIONS] * 4 < p0.part[WISP_PART_ACTIVATIONS], "checkpointing shrinks activations");
    CHECK(p2.part[WISP_PART_ACTIVATIONS] < p0.part[WISP_PART_ACTIVATIONS] * 6 / 10, "bf16 about halves activations");
    c = base;
    c.train.optimizer = WISP_OPTIMIZER_SGD;
    REQUIRE(!wisp_plan(&g, &c, &p1, &err), "plan");
    CHECK(p1.part[WISP_PART_OPTIMIZER] * 2 == p0.part[WISP_PART_OPTIMIZER], "SGD keeps one moment, AdamW two");
    c = base;
    c.train.rank = 0;
    c.train.seq_len = -3;
    CHECK(wisp_plan(&g, &c, &p1, &err) == WISP_ERR_ARG && strstr(err.message, "seq_len"), "bad seq_len: %s", err.message);
    c = base;
    c.train.schedule = WISP_SCHEDULE_COSINE;
    CHECK(wisp_plan(&g, &c, &p1, &err) == WISP_ERR_ARG && strstr(err.message, "total_steps"), "cosine without total");
    c = base;
    c.train.dropout = 1.0f;
    CHECK(wisp_plan(&g, &c, &p1, &err) == WISP_ERR_ARG, "dropout 1 accepted");
    c = base;
    c.train.dora = true;
    c.train.dropout = 0.1f;
    CHECK(wisp_plan(&g, &c, &p1, &err) == WISP_ERR_ARG && strstr(err.message, "DoRA with LoRA dropout"),
          "DoRA with dropout: %s", err.message);
    c.train.dropout = 0;
    REQUIRE(!wisp_plan(&g, &c, &p1, &err), "plan dora");
    CHECK(p1.part[WISP_PART_OPTIMIZER] > p0.part[WISP_PART_OPTIMIZER] &&
              p1.part[WISP_PART_GRADIENTS] > p0.part[WISP_PART_GRADIENTS] &&
              p1.part[WISP_PART_TRAIN_SCRATCH] > p0.part[WISP_PART_TRAIN_SCRATCH],
          "DoRA adds magnitudes (with gradients and moments) and scratch");
    free(bytes);
}

/* The adapter after a few steps, as one flat copy. */
static float *adapter_copy(wisp_ctx *ctx, size_t *n) {
    const wisp_lora *l = wisp_train_lora(ctx);
    *n = 0;
    for (int32_t i = 0; i < l->n_pairs; i++)
        *n += (size_t)l->pairs[i].rank * ((size_t)l->pairs[i].n_in + (size_t)l->pairs[i].n_out);
    float *out = malloc(sizeof(float) * *n), *o = out;
    for (int32_t i = 0; i < l->n_pairs; i++) {
        const wisp_lora_pair *p = &l->pairs[i];
        memcpy(o, p->a, sizeof(float) * (size_t)p->rank * p->n_in);
        o += (size_t)p->rank * p->n_in;
        memcpy(o, p->b, sizeof(float) * (size_t)p->rank * p->n_out);
        o += (size_t)p->rank * p->n_out;
    }
    return out;
}

static void check_threads(const char *path, int32_t act_type) {
    float *first = NULL;
    size_t n0 = 0;
    for (int nth = 1; nth <= 5; nth += nth == 3 ? 2 : 1) {
        train_env e = {0};
        wisp_config c = train_config(SEQ, 4, nth);
        c.train.micro_batch = 2;
        c.train.dropout = 0.1f;
        c.train.act_type = act_type;
        REQUIRE(train_open(&e, path, &c), "open");
        wisp_error err = {0};
        bool ok = true;
        run_steps(e.ctx, 3, 2, 40, &err, &ok);
        REQUIRE(ok, "train: %s", err.message);
        size_t n;
        float *a = adapter_copy(e.ctx, &n);
        if (!first) first = a, n0 = n;
        else {
            CHECK(n == n0 && memcmp(a, first, n * sizeof(float)) == 0, "%s: %d workers give another adapter", path, nth);
            free(a);
        }
        train_close(&e);
    }
    printf("%s: adapters after 3 steps identical with 1, 2, 3, 5 workers\n", path);
    free(first);
}

typedef struct buffer {
    unsigned char *data;
    size_t len, cap;
} buffer;

static wisp_status buffer_write(void *user, const void *data, size_t n, wisp_error *err) {
    buffer *b = user;
    if (b->len + n > b->cap) return wisp_fail(err, WISP_ERR_IO, "buffer full");
    memcpy(b->data + b->len, data, n);
    b->len += n;
    return WISP_OK;
}

static void check_resume(const char *path) {
    wisp_config c = train_config(SEQ, 4, 2);
    c.train.dropout = 0.2f;
    c.train.schedule = WISP_SCHEDULE_COSINE;
    c.train.warmup_steps = 1;
    c.train.total_steps = 5;
    wisp_error err = {0};
    bool ok = true;
    train_env full = {0}, part = {0};
    REQUIRE(train_open(&full, path, &c), "open");
    run_steps(full.ctx, 5, 2, 9, &err, &ok);
    REQUIRE(ok, "uninterrupted run: %s", err.message);
    size_t n;
    float *want = adapter_copy(full.ctx, &n);

    REQUIRE(train_open(&part, path, &c), "open");
    run_steps(part.ctx, 2, 2, 9, &err, &ok);
    buffer b = {NULL, 0, wisp_train_state_bytes(part.ctx)};
    b.data = malloc(b.cap);
    wisp_sink sink = {buffer_write, &b, 0};
    REQUIRE(ok && !wisp_train_state_save(part.ctx, &sink, &err), "save: %s", err.message);
    CHECK(b.len == b.cap, "state is %zu bytes, wisp_train_state_bytes said %zu", b.len, b.cap);
    train_close(&part);

    train_env resumed = {0};
    REQUIRE(train_open(&resumed, path, &c), "open");
    size_t used = 0;
    REQUIRE(!wisp_train_state_load(resumed.ctx, b.data, b.len, &used, &err), "load: %s", err.message);
    CHECK(used == b.len && wisp_train_steps(resumed.ctx) == 2, "used %zu, steps %lld", used,
          (long long)wisp_train_steps(resumed.ctx));
    /* the remaining steps see the batches the uninterrupted run saw */
    int32_t tok[SEQ + 1];
    for (int s = 2; s < 5 && ok; s++)
        for (int m = 0; m < 2 && ok; m++) {
            random_tokens(tok, SEQ + 1, wisp_ctx_hparams(resumed.ctx)->n_vocab, 9 + (uint64_t)(s * 7 + m));
            double loss;
            int32_t k;
            ok = !wisp_train_micro_step(resumed.ctx, tok, NULL, 1, &loss, &k, &err);
            if (ok && m == 1) ok = !wisp_train_optimizer_step(resumed.ctx, NULL, &err);
        }
    REQUIRE(ok, "resumed run: %s", err.message);
    float *got = adapter_copy(resumed.ctx, &n);
    CHECK(memcmp(got, want, n * sizeof(float)) == 0, "a resumed run differs from the uninterrupted one");
    printf("resume after 2 of 5 steps: adapter bit-identical to the uninterrupted run\n");

    /* refusals: bad magic, truncation, pending micro-steps, another shape, another seed */
    b.data[0] ^= 1;
    CHECK(wisp_train_state_load(resumed.ctx, b.data, b.len, &used, &err) == WISP_ERR_FORMAT, "bad magic accepted");
    b.data[0] ^= 1;
    CHECK(wisp_train_state_load(resumed.ctx, b.data, b.len - 1, &used, &err) == WISP_ERR_FORMAT &&
              strstr(err.message, "truncated"),
          "truncated state: %s", err.message);
    double loss;
    int32_t k;
    REQUIRE(!wisp_train_micro_step(resumed.ctx, tok, NULL, 1, &loss, &k, &err), "step");
    buffer b2 = {malloc(b.cap), 0, b.cap};
    wisp_sink s2 = {buffer_write, &b2, 0};
    CHECK(wisp_train_state_save(resumed.ctx, &s2, &err) == WISP_ERR_ARG, "saving mid-accumulation accepted");
    train_env other = {0};
    wisp_config c2 = c;
    c2.train.rank = 8;
    REQUIRE(train_open(&other, path, &c2), "open");
    CHECK(wisp_train_state_load(other.ctx, b.data, b.len, &used, &err) == WISP_ERR_SHAPE, "another rank accepted");
    c2 = c;
    c2.train.seed = 5;
    REQUIRE(train_open(&other, path, &c2), "open");
    CHECK(wisp_train_state_load(other.ctx, b.data, b.len, &used, &err) == WISP_ERR_ARG, "another seed accepted");
    train_close(&other);
    free(b.data), free(b2.data), free(got), free(want);
    train_close(&full);
    train_close(&resumed);
}

int main(void) {
    const char *stories = shared_path_or_skip("test_train_plan", "models/stories260K.gguf");
    check_plans(stories);
    const char *q8 = shared_path("models/synthetic/syn-qwen2-q8_0.gguf");
    if (q8) check_plans(q8);
    check_threads(stories, WISP_TYPE_F32);
    const char *q4k = shared_path("models/synthetic/syn-llama-gqa-q4_k.gguf");
    if (q4k) check_threads(q4k, WISP_TYPE_BF16);
    check_resume(stories);
    return check_report("test_train_plan");
}
