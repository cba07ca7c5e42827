/* A fixed pool of worker threads for core's (ith, nth) jobs. The caller's
 * thread takes share 0, workers take the rest. Workers spin briefly between
 * jobs (a decode step issues hundreds of small jobs per token) and then
 * sleep on a condition variable so an idle pool costs no CPU. */
#ifndef WISP_CLI_THREAD_POOL_H
#define WISP_CLI_THREAD_POOL_H

#include "exec.h"

typedef struct cli_pool cli_pool;

/* n_threads includes the calling thread; 1 means no workers. NULL on failure. */
cli_pool *cli_pool_create(int n_threads);
void cli_pool_destroy(cli_pool *p);

/* Matches wisp_threads.run: fn(arg, i, nth) for every i, returns when done. */
void cli_pool_run(void *pool, wisp_job_fn fn, void *arg, int nth);

/* A wisp_threads for this pool (serial when p is NULL). */
wisp_threads cli_pool_threads(cli_pool *p);

/* Threads to use when the user did not say: online CPUs, at most 8. */
int cli_default_threads(void);

#endif
