/* libFuzzer harness: hostile training states (the engine part of a
 * `wisp finetune` checkpoint.bin). Random bytes almost never get past the
 * magic, so the harness mutates a real state instead: at start-up it trains
 * a LoRA on the first base named by WISP_FUZZ_BASES for two steps and saves
 * the state; each input is then
 *     u32 keep   (the state is cut to keep % (size + 1) bytes)
 *     then pairs (u16 offset, u8 value): byte offset % size becomes value
 * and the result is loaded into the context. When the load succeeds, one more
 * training step runs and the state is saved again, which must succeed (a
 * state that loads is one the engine can continue from). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "sink.h"

static unsigned char *model_bytes;
static wisp_gguf model_g;
static wisp_ctx *ctx;
static unsigned char *state;
static size_t state_size;
static int32_t window[2 * 9];

static void set_up(void) {
    const char *list = getenv("WISP_FUZZ_BASES");
    char path[4096];
    snprintf(path, sizeof path, "%s", list ? list : "");
    char *colon = strchr(path, ':');
    if (colon) *colon = 0;
    size_t size;
    wisp_error err = {0};
    wisp_config cfg = wisp_config_default();
    cfg.n_ctx = 9;
    cfg.train.seq_len = 8;
    cfg.train.micro_batch = 2;
    cfg.train.rank = 2;
    cfg.train.seed = 5;
    wisp_memory_plan plan;
    void *arena = NULL;
    if (!(model_bytes = fuzz_slurp(path, &size)) || wisp_gguf_open(&model_g, model_bytes, size, &err) ||
        wisp_plan(&model_g, &cfg, &plan, &err) || !(arena = aligned_alloc(64, (plan.total + 63) & ~(size_t)63)) ||
        wisp_init(&ctx, &model_g, &cfg, arena, plan.total, &err)) {
        fprintf(stderr, "fuzz_train_state: set WISP_FUZZ_BASES to a small model (%s: %s)\n", path, err.message);
        abort();
    }
    for (size_t i = 0; i < sizeof window / sizeof window[0]; i++) window[i] = 3 + (int32_t)(i * 37 % 200);
    wisp_train_step_info info;
    for (int s = 0; s < 2; s++)
        if (wisp_train_micro_step(ctx, window, NULL, 2, NULL, NULL, &err) ||
            wisp_train_optimizer_step(ctx, &info, &err)) {
            fprintf(stderr, "fuzz_train_state: training the reference state failed: %s\n", err.message);
            abort();
        }
    state_size = wisp_train_state_bytes(ctx);
    state = malloc(state_size);
    wisp_mem_sink m;
    wisp_sink sink = wisp_mem_sink_make(&m, state, state_size);
    if (wisp_train_state_save(ctx, &sink, &err)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!ctx) set_up();
    if (size < 4) return 0;
    uint32_t keep;
    memcpy(&keep, data, 4);
    size_t n = keep % (state_size + 1);
    unsigned char *s = fuzz_exact(n);
    memcpy(s, state, n);
    for (size_t i = 4; i + 3 <= size && n; i += 3) s[(data[i] | (size_t)data[i + 1] << 8) % n] = data[i + 2];
    wisp_error err;
    size_t used;
    if (wisp_train_state_load(ctx, s, n, &used, &err) == WISP_OK) {
        if (used > n) abort();
        wisp_train_step_info info;
        if (wisp_train_micro_step(ctx, window, NULL, 2, NULL, NULL, &err) == WISP_OK)
            (void)wisp_train_optimizer_step(ctx, &info, &err);
        wisp_sink count = wisp_count_sink_make();
        if (wisp_train_state_save(ctx, &count, &err) || count.written != state_size) abort();
    }
    free(s);
    return 0;
}
