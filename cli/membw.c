#include "membw.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "huge_alloc.h"
#include "session.h"

#if WISP_CLI_THREADS /* thread_pool.h: off for WASI, where one thread copies */
#include <pthread.h>
#endif

#define PASSES 5

typedef struct copy_team {
    atomic_int pass;     /* workers start pass p once this exceeds p */
    atomic_int finished; /* workers done with the current pass */
} copy_team;

typedef struct copy_slice {
    unsigned char *dst;
    const unsigned char *src;
    size_t bytes;
    copy_team *team;
} copy_slice;

#if WISP_CLI_THREADS
static void *copy_worker(void *raw) {
    copy_slice *s = raw;
    for (int p = 0; p < PASSES; p++) {
        while (atomic_load(&s->team->pass) <= p) {
        }
        memcpy(s->dst, s->src, s->bytes);
        atomic_fetch_add(&s->team->finished, 1);
    }
    return NULL;
}
#endif

double cli_copy_bandwidth(int n_threads, size_t bytes) {
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 64) n_threads = 64;
    if (!WISP_CLI_THREADS) n_threads = 1;
    /* the machine's best: in 2 MiB pages, as model files are mapped where
     * the kernel can (file_map.c) */
    unsigned char *src = cli_huge_alloc(bytes), *dst = cli_huge_alloc(bytes);
    if (!src || !dst) {
        free(src);
        free(dst);
        return 0.0;
    }
    memset(src, 1, bytes); /* fault every page in before timing */
    memset(dst, 0, bytes);
    copy_team team;
    atomic_init(&team.pass, 0);
    atomic_init(&team.finished, 0);
#if WISP_CLI_THREADS
    copy_slice slice[64];
    pthread_t tid[64];
#endif
    size_t per = bytes / (size_t)n_threads / 64 * 64;
    int started = 1; /* this thread takes slice 0; a worker that fails to start leaves its slice out */
#if WISP_CLI_THREADS
    for (int i = 1; i < n_threads; i++) {
        slice[started] = (copy_slice){dst + (size_t)started * per, src + (size_t)started * per, per, &team};
        if (pthread_create(&tid[started], NULL, copy_worker, &slice[started]) == 0) started++;
    }
#endif
    double best = 0.0;
    for (int p = 0; p < PASSES; p++) {
        atomic_store(&team.finished, 0);
        double t0 = cli_now();
        atomic_store(&team.pass, p + 1);
        memcpy(dst, src, per);
        while (atomic_load(&team.finished) < started - 1) {
        }
        double secs = cli_now() - t0;
        double bw = secs > 0 ? 2.0 * (double)per * (double)started / secs : 0.0;
        if (bw > best) best = bw;
    }
#if WISP_CLI_THREADS
    for (int i = 1; i < started; i++) pthread_join(tid[i], NULL);
#endif
    free(src);
    free(dst);
    return best;
}
