/* How close decode's matrix product alone comes to the read-only roofline
 * at a given thread count, with nothing else of a forward step around it.
 *
 * Why a program of its own: `wisp bench` measures the read test after the
 * decode run, and this VM's memory bandwidth changes state within seconds
 * (two threads read 33-44 GB/s in one state, 53-74 and 80-92 in others), so a
 * whole-model roofline fraction can compare a decode in one state with a
 * read test in another. Here each round measures the read test and then,
 * right after it, the products, so every fraction compares like with like.
 *
 * Each round streams a set of 8192 x 2048 matrices (together well past the
 * last-level cache) through one-token products two ways:
 *   engine  wisp_exec_matmul, the pieces decode uses (a long first run
 *           per thread, then a tail in pieces claimed as threads come free);
 *   halves  one contiguous piece per thread (the longest runs of rows).
 * The matrices are packed by the kernel level as the engine packs them.
 *
 * usage: decode_bandwidth [THREADS [ROUNDS [TYPE]]]   (defaults 2, 20, Q4_0)
 * WISP_KERNELS=avx2|avx512|... forces a kernel level, as for wisp itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache_size.h"
#include "clock.h"
#include "exec.h"
#include "huge_alloc.h"
#include "median.h"
#include "membw.h"
#include "thread_pool.h"

#define ROWS 8192
#define COLS 2048
#define SECONDS_PER_WAY 0.5

typedef struct halves_job {
    wisp_matmul_fn fn;
    wisp_matmul_args a;
} halves_job;

static void halves_piece(void *arg, int ith, int nth) {
    const halves_job *j = arg;
    int64_t lo, hi;
    wisp_split(ROWS / WISP_PACK_GROUP, ith, nth, &lo, &hi);
    j->fn(&j->a, lo * WISP_PACK_GROUP, hi * WISP_PACK_GROUP);
}

int main(int argc, char **argv) {
    const int threads = argc > 1 ? atoi(argv[1]) : 2, rounds = argc > 2 ? atoi(argv[2]) : 20;
    const int type = wisp_type_from_name(argc > 3 ? argv[3] : "Q4_0");
    const wisp_type_info *ti = type >= 0 ? wisp_type_info_of(type) : NULL;
    /* quantized types only: the halves way hands the kernels the activations as converted into e.act */
    if (threads < 1 || rounds < 1 || !ti || !ti->quantize || !wisp_type_is_weight(type) ||
        !wisp_exec_act_row_bytes(type, COLS)) {
        fprintf(stderr, "usage: decode_bandwidth [THREADS [ROUNDS [TYPE]]]  (TYPE a quantized weight type: Q4_0, "
                        "Q8_0, Q4_K, Q6_K, ...)\n");
        return 2;
    }
    wisp_cpu_features cpu;
    wisp_cpu_detect(&cpu);
    const wisp_kernels *k;
    wisp_error err = {0};
    if (wisp_simd_select(&cpu, getenv("WISP_KERNELS"), &k, &err)) {
        fprintf(stderr, "decode_bandwidth: WISP_KERNELS: %s\n", err.message);
        return 2;
    }
    cli_pool *pool = cli_pool_create(threads);
    if (!pool) {
        fprintf(stderr, "decode_bandwidth: cannot start %d threads\n", threads);
        return 1;
    }
    wisp_exec e;
    wisp_exec_setup(&e, k, &(wisp_threads){cli_pool_run, pool, threads});

    /* One matrix quantized from random values, copied into every slot: each
     * copy is its own memory, which is all a bandwidth test needs. */
    const size_t row_bytes = wisp_type_row_bytes(type, COLS), plain_bytes = row_bytes * ROWS;
    const bool packed = k->packing[type].matmul && k->packing[type].bytes(ROWS, COLS);
    const size_t matrix_bytes = packed ? k->packing[type].bytes(ROWS, COLS) : plain_bytes;
    const size_t llc = cli_llc_bytes(), want = 4 * (llc ? llc : (size_t)32 << 20);
    const int n_mat = (int)((want + matrix_bytes - 1) / matrix_bytes);
    float *values = malloc(sizeof(float) * COLS), *x = malloc(sizeof(float) * COLS), *y = malloc(sizeof(float) * ROWS);
    uint8_t *plain = malloc(plain_bytes);
    wisp_weight *w = calloc((size_t)n_mat, sizeof *w);
    e.act_bytes = wisp_exec_act_row_bytes(type, COLS);
    e.act = malloc(e.act_bytes);
    if (!values || !x || !y || !plain || !w || !e.act) {
        fprintf(stderr, "decode_bandwidth: out of memory\n");
        return 1;
    }
    srand(1);
    for (int64_t r = 0; r < ROWS; r++) {
        for (int c = 0; c < COLS; c++) values[c] = (float)(rand() % 2001 - 1000) / 1000.0f;
        ti->quantize(values, plain + (size_t)r * row_bytes, COLS);
    }
    for (int c = 0; c < COLS; c++) x[c] = (float)(rand() % 2001 - 1000) / 1000.0f;
    for (int m = 0; m < n_mat; m++) {
        uint8_t *mem = cli_huge_alloc(matrix_bytes);
        if (!mem) {
            fprintf(stderr, "decode_bandwidth: out of memory for %d matrices of %zu bytes\n", n_mat, matrix_bytes);
            return 1;
        }
        if (packed) k->packing[type].pack(mem, plain, row_bytes, ROWS, COLS, 0, ROWS / WISP_PACK_GROUP);
        else memcpy(mem, plain, plain_bytes);
        w[m] = (wisp_weight){.data = packed ? plain : mem, .type = type, .rows = ROWS, .cols = COLS,
                             .row_bytes = row_bytes, .packed = packed ? mem : NULL};
    }
    const double streamed = (double)matrix_bytes * n_mat;
    printf("decode_bandwidth: %s, %d thread%s, %d matrices of %d x %d (%s, %.0f MiB in all), %s kernels\n", ti->name,
           threads, threads == 1 ? "" : "s", n_mat, ROWS, COLS, packed ? "packed" : "in place", streamed / 1048576.0,
           k->name);

    double *read = malloc(sizeof(double) * rounds), *engine = malloc(sizeof(double) * rounds),
           *halves = malloc(sizeof(double) * rounds), *frac_e = malloc(sizeof(double) * rounds),
           *frac_h = malloc(sizeof(double) * rounds);
    if (!read || !engine || !halves || !frac_e || !frac_h) {
        fprintf(stderr, "decode_bandwidth: out of memory for %d rounds\n", rounds);
        return 1;
    }
    wisp_exec_matmul(&e, &w[0], x, COLS, 1, y, ROWS); /* converts x into e.act, which halves reuses */
    for (int r = 0; r < rounds; r++) {
        read[r] = cli_read_bandwidth(threads, want);
        for (int step = 0; step < 2; step++) {
            /* the way measured first alternates, and each way is timed after
             * a warm-up pass: the read test's own threads ran last, and the
             * pool's workers were asleep */
            const int way = (step + r) % 2;
            long passes = -1;
            double t0 = 0, t = 0;
            do {
                if (passes == 0) t0 = cli_now();
                for (int m = 0; m < n_mat; m++) {
                    if (way == 0) {
                        wisp_exec_matmul(&e, &w[m], x, COLS, 1, y, ROWS);
                        continue;
                    }
                    halves_job j = {packed ? k->packing[type].matmul : e.k.matmul[type],
                                    {.w = packed ? w[m].packed : w[m].data, .w_row_bytes = row_bytes, .w_type = type,
                                     .n_in = COLS, .x = e.act, .x_row_bytes = e.act_bytes, .n_tok = 1, .y = y,
                                     .ldy = ROWS}};
                    cli_pool_run(pool, halves_piece, &j, threads);
                }
                passes++;
            } while (passes == 0 || (t = cli_now() - t0) < SECONDS_PER_WAY);
            (way == 0 ? engine : halves)[r] = streamed * (double)passes / t;
        }
        printf("round %2d: read %5.1f GB/s | engine %5.1f GB/s (%3.0f%%) | halves %5.1f GB/s (%3.0f%%)\n", r + 1,
               read[r] / 1e9, engine[r] / 1e9, 100 * engine[r] / read[r], halves[r] / 1e9, 100 * halves[r] / read[r]);
        fflush(stdout);
    }
    for (int r = 0; r < rounds; r++) {
        frac_e[r] = engine[r] / read[r];
        frac_h[r] = halves[r] / read[r];
    }
    printf("median of %d rounds: read %.1f GB/s; of the read test: engine %.0f%%, halves %.0f%%\n", rounds,
           cli_median_sorting(read, rounds) / 1e9, 100 * cli_median_sorting(frac_e, rounds),
           100 * cli_median_sorting(frac_h, rounds));
    cli_pool_destroy(pool);
    return 0;
}
