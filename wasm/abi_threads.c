/* Threads of the wasm engine. The threaded build (emcc -pthread: Emscripten
 * runs pthreads as Web Workers, worker threads in Node, over one shared
 * memory) runs core's jobs on the native CLI's pool, cli/thread_pool.c: the
 * caller publishes a job and every thread, the caller included, claims its
 * pieces one at a time, so results are those of one thread bit for bit and a
 * worker that is slow to wake only claims fewer pieces. The threaded wasm64
 * build (no Emscripten) has a pool of its own that works the same way,
 * wasm/wasm64/pool.c. The single-thread builds have no pool; all plan the
 * memory of n threads with a serial stand-in. */
#include <stdlib.h>

#include "abi.h"

#ifdef __EMSCRIPTEN_PTHREADS__
#include <emscripten/threading.h>
#include <stdatomic.h>

#include "cli/thread_pool.h"
#elif defined(WISP_WASM64_THREADS)
#include "wasm/wasm64/pool.h"
#endif

/* 1 when this build runs threads (JS picks the build; this confirms it). */
API int32_t ww_threaded(void) {
#if defined(__EMSCRIPTEN_PTHREADS__) || defined(WISP_WASM64_THREADS)
    return 1;
#else
    return 0;
#endif
}

static void run_in_turn(void *pool, wisp_job_fn fn, void *arg, int nth) {
    (void)pool;
    for (int i = 0; i < nth; i++) fn(arg, i, nth);
}

wisp_threads ww_threads(const ww_model *m, int32_t n) {
    if (m->pool) return m->threads;
    wisp_threads t = {n > 1 ? run_in_turn : NULL, NULL, n > 1 ? n : 1};
    return t;
}

#ifdef __EMSCRIPTEN_PTHREADS__
/* The pool of a model, with a count of the pieces its workers (not the
 * calling thread) ran: the proof, for tests, that work really is shared. */
typedef struct ww_pool {
    cli_pool *pool;
    atomic_uint_fast64_t worker_pieces;
} ww_pool;

typedef struct counted_job {
    wisp_job_fn fn;
    void *arg;
    ww_pool *p;
} counted_job;

static void counted_piece(void *raw, int ith, int nth) {
    counted_job *j = raw;
    j->fn(j->arg, ith, nth);
    /* the instance's main runtime thread is the caller (the page, or the
     * worker that holds the model) */
    if (!emscripten_is_main_runtime_thread()) atomic_fetch_add_explicit(&j->p->worker_pieces, 1, memory_order_relaxed);
}

static void run_counted(void *raw, wisp_job_fn fn, void *arg, int nth) {
    ww_pool *p = raw;
    counted_job j = {fn, arg, p};
    cli_pool_run(p->pool, counted_piece, &j, nth);
}
#endif

int32_t ww_threads_start(ww_model *m, int32_t n) {
    if (n <= 1 || m->pool) return 0;
#ifdef __EMSCRIPTEN_PTHREADS__
    ww_pool *p = calloc(1, sizeof *p);
    if (!p) return wisp_fail(&m->err, WISP_ERR_CAPACITY, "out of wasm memory for a thread pool"), -1;
    /* pthread_create takes a worker Emscripten started with the instance
     * (Module.wispWorkers = n - 1); it fails rather than wait when none is left */
    p->pool = cli_pool_create(n);
    if (!p->pool || cli_pool_size(p->pool) != n) {
        wisp_fail(&m->err, WISP_ERR_CAPACITY, "could not start %d threads (%d started)", n, cli_pool_size(p->pool));
        cli_pool_destroy(p->pool);
        free(p);
        return -1;
    }
    m->pool = p;
    m->threads = (wisp_threads){run_counted, p, n};
    return 0;
#elif defined(WISP_WASM64_THREADS)
    return ww_pool64_attach(m, n);
#else
    return wisp_fail(&m->err, WISP_ERR_UNSUPPORTED, "this engine build has no threads (%d asked for)", n), -1;
#endif
}

void ww_threads_stop(ww_model *m) {
#ifdef __EMSCRIPTEN_PTHREADS__
    ww_pool *p = m->pool;
    if (!p) return;
    cli_pool_destroy(p->pool);
    free(p);
    m->pool = NULL;
#elif defined(WISP_WASM64_THREADS)
    ww_pool64_detach(m);
#else
    (void)m;
#endif
}

API int32_t ww_n_threads(ww_model *m) { return m->pool ? m->threads.n_threads : 1; }

/* Pieces of jobs the pool's workers ran so far (0 without a pool). */
API double ww_worker_pieces(ww_model *m) {
#ifdef __EMSCRIPTEN_PTHREADS__
    if (m->pool) return (double)atomic_load(&((ww_pool *)m->pool)->worker_pieces);
#elif defined(WISP_WASM64_THREADS)
    return ww_pool64_worker_pieces(m);
#endif
    (void)m;
    return 0;
}
