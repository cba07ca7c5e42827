/* What one parallel job costs in the CLI's thread pool: the time from
 * handing a job to the pool until every piece has run, for empty pieces
 * (pure synchronisation) and for pieces of about a microsecond of work (the
 * size of a decode step's smaller matmuls). A decode step runs a few
 * hundred such jobs per token, so this is the per-token threading tax.
 * Prints one line per case; `make bench` runs it.
 *
 * usage: pool_overhead [THREADS [JOBS]] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "thread_pool.h"

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct work {
    volatile float sink[64][16]; /* one cache line per piece: no false sharing */
    int spin;                    /* multiply-adds per piece */
} work;

static void piece(void *arg, int i, int n) {
    work *w = arg;
    float x = (float)i, y = 1.0f;
    for (int k = 0; k < w->spin; k++) y = y * 0.999f + x;
    w->sink[i % 64][0] = y;
    (void)n;
}

static void measure(cli_pool *pool, int n_threads, int pieces, int spin, int jobs) {
    work w;
    w.spin = spin;
    for (int j = 0; j < jobs / 10; j++) cli_pool_run(pool, piece, &w, pieces); /* warm up */
    double t0 = seconds();
    for (int j = 0; j < jobs; j++) cli_pool_run(pool, piece, &w, pieces);
    double per_job = (seconds() - t0) / jobs;
    /* the same work run serially, to separate the work from the overhead */
    t0 = seconds();
    for (int j = 0; j < jobs / 10; j++)
        for (int i = 0; i < pieces; i++) piece(&w, i, pieces);
    double serial = (seconds() - t0) / (jobs / 10);
    printf("threads %d, %2d pieces of %4d madds: %7.2f us per job (work alone, serially: %6.2f us)\n", n_threads, pieces,
           spin, per_job * 1e6, serial * 1e6);
}

int main(int argc, char **argv) {
    int max_threads = argc > 1 ? atoi(argv[1]) : 2, jobs = argc > 2 ? atoi(argv[2]) : 20000;
    for (int t = 1; t <= max_threads; t++) {
        cli_pool *pool = cli_pool_create(t);
        if (!pool) {
            fprintf(stderr, "pool_overhead: cannot start %d threads\n", t);
            return 1;
        }
        measure(pool, t, t, 0, jobs);
        measure(pool, t, 8, 0, jobs);
        measure(pool, t, 8, 250, jobs);
        cli_pool_destroy(pool);
    }
    return 0;
}
