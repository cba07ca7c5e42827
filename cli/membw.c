#include "membw.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "huge_alloc.h"
#include "thread_pool.h"

#if WISP_CLI_THREADS /* thread_pool.h: off for WASI, where one thread measures */
#include <pthread.h>
#endif

#define PASSES 5

typedef struct bw_team {
    atomic_int pass;     /* workers start pass p once this exceeds p */
    atomic_int finished; /* workers done with the current pass */
} bw_team;

typedef struct bw_slice {
    unsigned char *dst; /* NULL: the read-only test */
    const unsigned char *src;
    size_t bytes;
    uint64_t sum; /* the read test's result, kept so the reads are not optimized away */
    bw_team *team;
} bw_slice;

/* Reads w[0, n) (n a multiple of 8) once: eight independent sums, so the
 * loads are not serialized behind one addition chain (the compiler keeps
 * them in registers or vector lanes). */
static uint64_t sum_words(const uint64_t *w, size_t n) {
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    for (size_t i = 0; i < n; i += 8) {
        a0 += w[i];
        a1 += w[i + 1];
        a2 += w[i + 2];
        a3 += w[i + 3];
        a4 += w[i + 4];
        a5 += w[i + 5];
        a6 += w[i + 6];
        a7 += w[i + 7];
    }
    return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7;
}

static void one_pass(bw_slice *s) {
    if (s->dst)
        memcpy(s->dst, s->src, s->bytes);
    else
        s->sum += sum_words((const uint64_t *)(const void *)s->src, s->bytes / 8);
}

#if WISP_CLI_THREADS
static void *bw_worker(void *raw) {
    bw_slice *s = raw;
    for (int p = 0; p < PASSES; p++) {
        while (atomic_load(&s->team->pass) <= p) {
        }
        one_pass(s);
        atomic_fetch_add(&s->team->finished, 1);
    }
    return NULL;
}
#endif

/* Best bytes per second over PASSES passes of n_threads threads each working
 * on its slice of src (and dst, when copying); `traffic` is the bytes moved
 * per byte of src (2 for a copy: read plus write). */
static double measure(int n_threads, unsigned char *dst, const unsigned char *src, size_t bytes, double traffic) {
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 64) n_threads = 64;
    if (!WISP_CLI_THREADS) n_threads = 1;
    bw_team team;
    atomic_init(&team.pass, 0);
    atomic_init(&team.finished, 0);
    bw_slice slice[64];
#if WISP_CLI_THREADS
    pthread_t tid[64];
#endif
    size_t per = bytes / (size_t)n_threads / 64 * 64;
    slice[0] = (bw_slice){dst, src, per, 0, &team};
    int started = 1; /* this thread takes slice 0; a worker that fails to start leaves its slice out */
#if WISP_CLI_THREADS
    for (int i = 1; i < n_threads; i++) {
        size_t at = (size_t)started * per;
        slice[started] = (bw_slice){dst ? dst + at : NULL, src + at, per, 0, &team};
        if (pthread_create(&tid[started], NULL, bw_worker, &slice[started]) == 0) started++;
    }
#endif
    double best = 0.0;
    for (int p = 0; p < PASSES; p++) {
        atomic_store(&team.finished, 0);
        double t0 = cli_now();
        atomic_store(&team.pass, p + 1);
        one_pass(&slice[0]);
        while (atomic_load(&team.finished) < started - 1) {
        }
        double secs = cli_now() - t0;
        double bw = secs > 0 ? traffic * (double)per * (double)started / secs : 0.0;
        if (bw > best) best = bw;
    }
    uint64_t sum = 0;
#if WISP_CLI_THREADS
    for (int i = 1; i < started; i++) pthread_join(tid[i], NULL);
#endif
    for (int i = 0; i < started; i++) sum += slice[i].sum;
    /* every byte is 1, so each pass sums to a known figure: a check that the
     * reads happened (and a use of the sum the compiler cannot drop) */
    if (!dst && sum != (uint64_t)PASSES * (per / 8) * (uint64_t)started * 0x0101010101010101ull) return 0.0;
    return best;
}

double cli_copy_bandwidth(int n_threads, size_t bytes) {
    /* the machine's best: in 2 MiB pages, as model files are mapped where
     * the kernel can (file_map.c) */
    unsigned char *src = cli_huge_alloc(bytes), *dst = cli_huge_alloc(bytes);
    double bw = 0.0;
    if (src && dst) {
        memset(src, 1, bytes); /* fault every page in before timing */
        memset(dst, 0, bytes);
        bw = measure(n_threads, dst, src, bytes, 2.0);
    }
    free(src);
    free(dst);
    return bw;
}

double cli_read_bandwidth(int n_threads, size_t bytes) {
    uint64_t *src = cli_huge_alloc(bytes);
    double bw = 0.0;
    if (src) {
        for (size_t i = 0; i < bytes / 8; i++) src[i] = 0x0101010101010101ull; /* faults every page in */
        bw = measure(n_threads, NULL, (const unsigned char *)src, bytes, 1.0);
    }
    free(src);
    return bw;
}
