/* The pool for builds without threads (WISP_CLI_THREADS == 0, e.g. WASI):
 * a pool of N "threads" runs the N shares of each job in turn on the
 * calling thread. Planning, scratch sizes and results are those of N real
 * threads, so `wisp plan -t 2` still describes `wisp run -t 2`; only the
 * parallelism is missing. Without -t the CLI uses one share. */
#include "thread_pool.h"

#if !WISP_CLI_THREADS
#include <stdlib.h>

struct cli_pool {
    int n_threads;
};

cli_pool *cli_pool_create(int n_threads) {
    cli_pool *p = malloc(sizeof *p);
    if (p) p->n_threads = n_threads < 1 ? 1 : n_threads;
    return p;
}

void cli_pool_destroy(cli_pool *p) { free(p); }

void cli_pool_run(void *pool, wisp_job_fn fn, void *arg, int nth) {
    (void)pool;
    for (int i = 0; i < nth; i++) fn(arg, i, nth);
}

int cli_pool_size(const cli_pool *p) { return p ? p->n_threads : 1; }

int cli_default_threads(void) { return 1; }
#endif
