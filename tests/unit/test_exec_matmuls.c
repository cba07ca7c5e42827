/* wisp_exec_matmuls (a layer's q/k/v or gate/up as one job) gives every
 * output bit for bit what one wisp_exec_matmul per weight gives:
 *  - with the CPU's best kernels and the reference kernels;
 *  - for 1, 2, 3 and 5 threads, pieces run in any order (a fake pool that
 *    runs them backwards), so that pieces straddle the weights' boundaries;
 *  - for decode (1 token) and prefill (7 tokens) batches;
 *  - for weights whose activations are converted alike (Q4_0 with Q8_0;
 *    Q4_K with Q6_K; Q5_K with Q6_K, which x86 decodes in place; F16 with
 *    F32) and for a mix that is not (Q4_0 with Q4_K), which falls back to
 *    one job each;
 *  - with row counts that are not multiples of the 16-row groups;
 *  - with enough row groups for decode's pieces (a long first run per
 *    thread, then a tail cut in pieces), so that every row is computed once
 *    whatever the thread count. */
#include "check.h"
#include "exec.h"
#include "simd.h"
#include "types.h"

#include <stdlib.h>
#include <string.h>

#define COLS 512
#define MAX_TOK 7

static uint64_t rng = 12345;

static float uniform(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

/* A weight of `rows` x COLS in `type`, quantized from random floats. */
static wisp_weight make_weight(int type, int32_t rows) {
    const wisp_type_info *ti = wisp_type_info_of(type);
    size_t row_bytes = wisp_type_row_bytes(type, COLS);
    uint8_t *data = malloc((size_t)rows * row_bytes);
    float src[COLS];
    for (int32_t r = 0; r < rows; r++) {
        for (int c = 0; c < COLS; c++) src[c] = uniform();
        ti->quantize(src, data + (size_t)r * row_bytes, COLS);
    }
    return (wisp_weight){.data = data, .type = type, .rows = rows, .cols = COLS, .row_bytes = row_bytes};
}

/* Runs the pieces last to first, on the calling thread. */
static void backwards_pool(void *pool, wisp_job_fn fn, void *arg, int nth) {
    (void)pool;
    for (int i = nth - 1; i >= 0; i--) fn(arg, i, nth);
}

static void setup(wisp_exec *e, const wisp_kernels *k, int n_threads, uint8_t *act, size_t act_bytes) {
    wisp_threads th = {backwards_pool, NULL, n_threads};
    wisp_exec_setup(e, k, &th);
    e->act = act;
    e->act_bytes = act_bytes;
}

static void check_set(const char *label, const wisp_kernels *k, const int types[], const int32_t rows[], int n) {
    wisp_weight w[WISP_EXEC_MAX_FUSED] = {0};
    const wisp_weight *wp[WISP_EXEC_MAX_FUSED] = {0};
    float *alone[WISP_EXEC_MAX_FUSED] = {0}, *fused[WISP_EXEC_MAX_FUSED] = {0};
    int64_t ldy[WISP_EXEC_MAX_FUSED] = {0};
    static float x[MAX_TOK * COLS];
    static uint8_t act[MAX_TOK * COLS * 2];
    for (int i = 0; i < MAX_TOK * COLS; i++) x[i] = 3.0f * uniform();
    for (int m = 0; m < n; m++) {
        w[m] = make_weight(types[m], rows[m]);
        wp[m] = &w[m];
        ldy[m] = rows[m] + 3; /* output rows wider than the weight: nothing may be written past it */
        alone[m] = calloc((size_t)MAX_TOK * (size_t)ldy[m], sizeof(float));
        fused[m] = calloc((size_t)MAX_TOK * (size_t)ldy[m], sizeof(float));
    }
    const int64_t batches[] = {1, MAX_TOK};
    const int threads[] = {1, 2, 3, 5};
    for (int b = 0; b < 2; b++) {
        const int64_t n_tok = batches[b];
        wisp_exec e;
        setup(&e, k, 1, act, sizeof act);
        for (int m = 0; m < n; m++) wisp_exec_matmul(&e, &w[m], x, COLS, n_tok, alone[m], ldy[m]);
        for (int t = 0; t < 4; t++) {
            setup(&e, k, threads[t], act, sizeof act);
            for (int m = 0; m < n; m++) memset(fused[m], 0xff, (size_t)MAX_TOK * (size_t)ldy[m] * sizeof(float));
            wisp_exec_matmuls(&e, n, wp, x, COLS, n_tok, fused, ldy);
            bool same = true;
            for (int m = 0; m < n; m++)
                for (int64_t tok = 0; tok < n_tok; tok++) {
                    const float *a = alone[m] + tok * ldy[m], *f = fused[m] + tok * ldy[m];
                    same = same && memcmp(a, f, (size_t)rows[m] * sizeof(float)) == 0;
                    uint32_t pad;
                    memcpy(&pad, f + rows[m], sizeof pad);
                    same = same && pad == 0xffffffffu;
                }
            CHECK(same, "%s: %d weights, %lld token(s), %d threads: fused outputs equal the separate ones", label, n,
                  (long long)n_tok, threads[t]);
        }
    }
    for (int m = 0; m < n; m++) {
        free((void *)w[m].data);
        free(alone[m]);
        free(fused[m]);
    }
}

static void check_kernels(const char *level, const wisp_kernels *k) {
    char label[64];
    snprintf(label, sizeof label, "%s, q/k/v Q4_0", level);
    check_set(label, k, (const int[]){WISP_TYPE_Q4_0, WISP_TYPE_Q4_0, WISP_TYPE_Q4_0}, (const int32_t[]){72, 24, 24}, 3);
    snprintf(label, sizeof label, "%s, q/k/v Q4_0, 47 row groups", level);
    check_set(label, k, (const int[]){WISP_TYPE_Q4_0, WISP_TYPE_Q4_0, WISP_TYPE_Q4_0}, (const int32_t[]){403, 200, 120},
              3);
    snprintf(label, sizeof label, "%s, Q8_0 + Q4_0", level);
    check_set(label, k, (const int[]){WISP_TYPE_Q8_0, WISP_TYPE_Q4_0}, (const int32_t[]){37, 50}, 2);
    snprintf(label, sizeof label, "%s, Q4_K + Q6_K + Q4_K", level);
    check_set(label, k, (const int[]){WISP_TYPE_Q4_K, WISP_TYPE_Q6_K, WISP_TYPE_Q4_K}, (const int32_t[]){33, 16, 9}, 3);
    snprintf(label, sizeof label, "%s, Q5_K + Q6_K + Q5_K", level);
    check_set(label, k, (const int[]){WISP_TYPE_Q5_K, WISP_TYPE_Q6_K, WISP_TYPE_Q5_K}, (const int32_t[]){31, 9, 15}, 3);
    snprintf(label, sizeof label, "%s, F16 + F32", level);
    check_set(label, k, (const int[]){WISP_TYPE_F16, WISP_TYPE_F32}, (const int32_t[]){20, 13}, 2);
    snprintf(label, sizeof label, "%s, Q4_0 + Q4_K (converted apart)", level);
    check_set(label, k, (const int[]){WISP_TYPE_Q4_0, WISP_TYPE_Q4_K}, (const int32_t[]){40, 17}, 2);
}

int main(void) {
    check_kernels("reference", wisp_kernels_reference());
    wisp_cpu_features cpu;
    wisp_cpu_detect(&cpu);
    const wisp_kernels *best;
    wisp_error err = {0};
    if (wisp_simd_select(&cpu, NULL, &best, &err) == WISP_OK) check_kernels("best level", best);
    else CHECK(false, "selecting this CPU's kernels: %s", err.message);
    return check_report("test_exec_matmuls");
}
