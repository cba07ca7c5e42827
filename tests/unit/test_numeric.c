/* Numerical faults: a NaN or Inf weight, in memory as a damaged file would
 * give it, must never pass silently.
 *   - Inference: wisp_eval fails with WISP_ERR_NUMERIC naming where the
 *     non-finite activation appeared, leaves the context as it was (cached
 *     positions, no logits), and works again once the weight is repaired.
 *     Checked for a NaN in an F32 weight, and for an Inf block scale in a
 *     quantized weight (whose NaN output an 8-bit activation quantizer would
 *     otherwise launder into finite garbage).
 *   - Training (F32 and F16 saved activations): a step whose gradient is not
 *     finite is skipped and reported (info.skipped), changes neither the
 *     adapter nor the optimizer state nor the step count, and the next good
 *     step trains normally.
 *   - Writers and loaders: a GGUF LoRA with a NaN is never written, a training
 *     state holding a NaN is never loaded. */
#include <math.h>
#include <string.h>

#include "lora_gguf.h"
#include "test_lora_gguf_fixture.h"
#include "test_train_util.h"

/* The bytes of one element (or, for a quantized type, the fp16 block scale
 * d at offset 0 of its block) of a tensor, inside the loaded file. */
static unsigned char *element_of(const wisp_gguf *g, const char *name, uint64_t index, size_t *width) {
    wisp_gguf_tensor t;
    if (!wisp_gguf_find_tensor(g, name, &t)) return NULL;
    const wisp_type_info *ti = wisp_type_info_of((int)t.type);
    unsigned char *data = (unsigned char *)(uintptr_t)t.data;
    if (t.type == WISP_TYPE_F32) return *width = 4, data + 4 * index;
    /* Q4_K and the legacy quants keep d first in each block */
    return *width = 2, data + index / (uint64_t)ti->block_elems * (uint64_t)ti->block_bytes;
}

static void poison(unsigned char *at, size_t width, bool nan) {
    if (width == 4) wisp_store_u32(at, nan ? 0x7fc00000u : 0x7f800000u);
    else wisp_store_u16(at, nan ? 0x7e00u : 0x7c00u);
}

static void inference(const char *rel, const char *tensor, bool nan) {
    const char *path = shared_path(rel);
    if (!path) {
        printf("note: %s absent\n", rel);
        return;
    }
    train_env e = {0};
    wisp_config cfg = wisp_config_default();
    cfg.n_ctx = 32;
    REQUIRE(train_open(&e, path, &cfg), "open %s", rel);
    size_t width;
    unsigned char *at = element_of(&e.g, tensor, 5, &width), saved[4];
    REQUIRE(at, "%s: no tensor %s", rel, tensor);
    memcpy(saved, at, width);
    int32_t ids[5] = {1, 300, 301, 302, 303};
    wisp_error err = {0};
    REQUIRE(wisp_eval(e.ctx, ids, 2, &err) == WISP_OK && wisp_eval(e.ctx, ids + 2, 1, &err) == WISP_OK,
            "%s: clean prefix: %s", rel, err.message);
    float clean = wisp_logits(e.ctx, -1)[7];

    poison(at, width, nan);
    wisp_status st = wisp_eval(e.ctx, ids + 3, 2, &err);
    CHECK(st == WISP_ERR_NUMERIC, "%s with a %s in %s: status %d", rel, nan ? "NaN" : "Inf", tensor, st);
    CHECK(strstr(err.message, "NaN") || strstr(err.message, "infinite"), "message: %s", err.message);
    CHECK(wisp_n_past(e.ctx) == 3 && wisp_logits(e.ctx, -1) == NULL, "%s: a failed eval changed the context (%d cached)",
          rel, wisp_n_past(e.ctx));
    printf("%s, %s in %s: %s\n", rel, nan ? "NaN" : "Inf", tensor, err.message);

    memcpy(at, saved, width); /* repaired: the same context goes on as if nothing happened */
    wisp_rewind(e.ctx, 2);
    CHECK(wisp_eval(e.ctx, ids + 2, 1, &err) == WISP_OK && wisp_logits(e.ctx, -1)[7] == clean,
          "%s: after the repair the context gives the clean logits again: %s", rel, err.message);
    train_close(&e);
}

static size_t n_floats(const wisp_lora *l) {
    size_t n = 0;
    for (int32_t i = 0; i < l->n_pairs; i++)
        n += (size_t)l->pairs[i].rank * (size_t)(l->pairs[i].n_in + l->pairs[i].n_out);
    return n;
}

static unsigned char *save_state(wisp_ctx *ctx, size_t *n) {
    *n = wisp_train_state_bytes(ctx);
    unsigned char *b = malloc(*n);
    wisp_mem_sink m;
    wisp_sink s = wisp_mem_sink_make(&m, b, *n);
    wisp_error err = {0};
    if (wisp_train_state_save(ctx, &s, &err)) {
        fprintf(stderr, "save: %s\n", err.message);
        free(b);
        return NULL;
    }
    return b;
}

/* Offsets in a training state (core/train_state.c): i64 micro_total at 76,
 * i32 good_steps at 84, f32 loss_scale at 88, i32 hysteresis_left at 92,
 * i64 skipped_steps at 96, the arrays from 104. */
enum { STATE_MICRO_TOTAL = 76, STATE_LOSS_SCALE = 88, STATE_ARRAYS = 104 };

/* Two states alike but for the counters a skipped step may move: the
 * micro-step count (its batch still counts for the dropout stream, so a
 * resume replays it), the run of good steps and the loss scale. */
static bool same_state(const unsigned char *a, const unsigned char *b, size_t n) {
    return memcmp(a, b, STATE_MICRO_TOTAL) == 0 && memcmp(a + STATE_ARRAYS, b + STATE_ARRAYS, n - STATE_ARRAYS) == 0;
}

static void training(int act_type) {
    const char *path = shared_path("models/stories260K.gguf");
    if (!path) return;
    wisp_config cfg = train_config(16, 4, 1);
    cfg.train.act_type = act_type;
    cfg.train.loss_scale_hysteresis = 1; /* every overflow halves the scale (DeepSpeed's default 2 would wait one) */
    train_env e = {0};
    REQUIRE(train_open(&e, path, &cfg), "open");
    const char *label = act_type == WISP_TYPE_F16 ? "F16 activations" : "F32 activations";
    int32_t tok[17];
    random_tokens(tok, 17, wisp_ctx_hparams(e.ctx)->n_vocab, 5);
    wisp_error err = {0};
    wisp_train_step_info info;
    double loss;
    int32_t n;
    /* until one step counts (F16 loss scaling may first skip while its scale settles) */
    for (int i = 0; i < 32 && wisp_train_steps(e.ctx) == 0; i++)
        REQUIRE(!wisp_train_micro_step(e.ctx, tok, NULL, 1, &loss, &n, &err) &&
                    !wisp_train_optimizer_step(e.ctx, &info, &err), "%s: a clean step: %s", label, err.message);
    REQUIRE(wisp_train_steps(e.ctx) == 1, "%s: a clean step counted", label);
    size_t n_state;
    unsigned char *before = save_state(e.ctx, &n_state);
    REQUIRE(before, "save");

    size_t width;
    unsigned char *at = element_of(&e.g, "blk.2.ffn_up.weight", 17, &width), saved[4];
    memcpy(saved, at, width);
    poison(at, width, true);
    REQUIRE(!wisp_train_micro_step(e.ctx, tok, NULL, 1, &loss, &n, &err), "%s: micro-step: %s", label, err.message);
    wisp_status st = wisp_train_optimizer_step(e.ctx, &info, &err);
    CHECK(st == WISP_OK && info.skipped && info.step == 1 && wisp_train_steps(e.ctx) == 1,
          "%s: a NaN gradient must skip the step (status %d, skipped %d, step %lld)", label, st, info.skipped,
          (long long)info.step);
    CHECK(isnan(loss), "%s: the loss with a NaN weight is %g", label, loss);
    size_t n_after;
    unsigned char *after = save_state(e.ctx, &n_after);
    REQUIRE(after && n_after == n_state, "save after");
    float s0, s1;
    memcpy(&s0, before + STATE_LOSS_SCALE, 4), memcpy(&s1, after + STATE_LOSS_SCALE, 4);
    if (act_type == WISP_TYPE_F16) CHECK(s1 == s0 / 2, "%s: the loss scale went from %g to %g", label, s0, s1);
    else CHECK(s1 == 1 && s0 == 1, "%s: the loss scale is %g, then %g", label, s0, s1);
    CHECK(same_state(before, after, n_state), "%s: a skipped step changed the adapter or the optimizer state", label);

    memcpy(at, saved, width); /* repaired: training goes on */
    REQUIRE(!wisp_train_micro_step(e.ctx, tok, NULL, 1, &loss, &n, &err) && !wisp_train_optimizer_step(e.ctx, &info, &err),
            "%s: after the repair: %s", label, err.message);
    CHECK(!info.skipped && info.step == 2 && isfinite(loss), "%s: the next clean step counts (skipped %d, step %lld)",
          label, info.skipped, (long long)info.step);
    const wisp_lora *l = wisp_train_lora(e.ctx);
    size_t bad = 0, total = n_floats(l);
    for (int32_t i = 0; i < l->n_pairs; i++) {
        const wisp_lora_pair *p = &l->pairs[i];
        bad += !wisp_lora_all_finite(p->a, p->type, (size_t)p->rank * p->n_in);
        bad += !wisp_lora_all_finite(p->b, p->type, (size_t)p->rank * p->n_out);
    }
    CHECK(bad == 0, "%s: %zu matrices of the adapter (%zu floats) are not finite", label, bad, total);
    printf("%s: the NaN step was skipped (adapter and moments unchanged), training went on\n", label);

    /* a state with a NaN in it is refused, and the context keeps its own */
    unsigned char *good = save_state(e.ctx, &n_after);
    wisp_store_u32(after + STATE_ARRAYS + 4 * 3, 0x7fc00000u);
    size_t used;
    CHECK(wisp_train_state_load(e.ctx, after, n_after, &used, &err) == WISP_ERR_NUMERIC, "%s: a NaN state was loaded",
          label);
    unsigned char *still = save_state(e.ctx, &n_after);
    CHECK(still && memcmp(good, still, n_after) == 0, "%s: a refused state changed the context", label);
    free(before), free(after), free(good), free(still);
    train_close(&e);
}

static int32_t rank2(int layer, int proj) {
    (void)layer, (void)proj;
    return 2;
}

static void writer(void) {
    const char *path = shared_path("models/stories260K.gguf");
    if (!path) return;
    wisp_hparams hp;
    REQUIRE(fixture_hparams(path, &hp), "hparams");
    fixture_lora f = fixture_make(&hp, WISP_TYPE_F16, 0x7f, rank2, 4.0f, false, 3);
    wisp_sink count = wisp_count_sink_make();
    wisp_error err = {0};
    wisp_lora_gguf_written w;
    CHECK(wisp_lora_gguf_write(&f.lora, "llama", NULL, &count, &w, &err) == WISP_OK, "a finite adapter: %s", err.message);
    wisp_store_u16((unsigned char *)(uintptr_t)f.pairs[9].b + 2, 0x7c00u); /* +Inf */
    count = wisp_count_sink_make();
    CHECK(wisp_lora_gguf_write(&f.lora, "llama", NULL, &count, &w, &err) == WISP_ERR_NUMERIC && count.written == 0,
          "an adapter with an Inf must not be written (%llu bytes written)", (unsigned long long)count.written);
    CHECK(strstr(err.message, "blk.1.") != NULL, "the message names the pair: %s", err.message);
    fixture_free(&f);
}

int main(void) {
    shared_path_or_skip("test_numeric", "models/stories260K.gguf");
    inference("models/stories260K.gguf", "blk.1.attn_q.weight", true);
    inference("models/stories260K.gguf", "output_norm.weight", false);
    inference("models/synthetic/syn-llama-gqa-q4_k_m.gguf", "blk.0.attn_q.weight", false);
    inference("models/synthetic/syn-llama-gqa-q8_0.gguf", "blk.1.ffn_down.weight", true);
    training(WISP_TYPE_F32);
    training(WISP_TYPE_F16);
    writer();
    return check_report("test_numeric");
}
