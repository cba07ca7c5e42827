/* A fixed pool of worker threads for core's jobs: fn(arg, i, n) for every
 * piece i < n, on whichever thread (the caller's included) claims it first,
 * so a thread that is slow to start or was descheduled leaves its pieces to
 * the others. Workers spin briefly between jobs (a decode step issues a few
 * hundred small jobs per token) and then sleep on a condition variable so
 * an idle pool costs no CPU. bench/pool_overhead.c measures a job's cost. */
#ifndef WISP_CLI_THREAD_POOL_H
#define WISP_CLI_THREAD_POOL_H

#include "exec.h"

/* WASI (wasm32-wasi) has no threads: there the pool is serial
 * (thread_pool_serial.c) and runs every share of a job in turn on the
 * calling thread, with the memory and results of that many threads.
 * -DWISP_CLI_THREADS=0 chooses the serial pool anywhere. */
#ifndef WISP_CLI_THREADS
#if defined(__wasi__)
#define WISP_CLI_THREADS 0
#else
#define WISP_CLI_THREADS 1
#endif
#endif

typedef struct cli_pool cli_pool;

/* n_threads includes the calling thread; 1 means no workers. NULL on failure. */
cli_pool *cli_pool_create(int n_threads);
void cli_pool_destroy(cli_pool *p);

/* Matches wisp_threads.run: fn(arg, i, nth) for every i < nth (any nth),
 * returns when all have run. */
void cli_pool_run(void *pool, wisp_job_fn fn, void *arg, int nth);

/* Threads of the pool, the calling one included (1 for NULL). */
int cli_pool_size(const cli_pool *p);

/* A wisp_threads for this pool (serial when p is NULL or has one thread). */
static inline wisp_threads cli_pool_threads(cli_pool *p) {
    wisp_threads t = {NULL, NULL, 1};
    const int n = cli_pool_size(p);
    if (n > 1) {
        t.run = cli_pool_run;
        t.pool = p;
        t.n_threads = n;
    }
    return t;
}

/* Threads to use when the user did not say: online CPUs, at most 8. */
int cli_default_threads(void);

#endif
