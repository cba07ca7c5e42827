/* The thread pool of the threaded wasm64 build (no Emscripten, so no
 * pthreads): JS starts a Worker per extra thread, each with an instance of
 * the same module over the one shared memory, and each calls
 * ww_pool64_worker, which never returns while the pool lives. Jobs run as on
 * the native pool (cli/thread_pool.c): the caller publishes a job and every
 * thread, the caller included, claims its pieces one at a time, so results
 * are those of one thread bit for bit and a worker slow to wake claims fewer.
 *
 * Idle workers spin a while, then sleep in memory.atomic.wait32 on the job
 * generation. The caller never sleeps: a browser's main thread may not block,
 * so it waits for the last pieces by spinning (as Emscripten's does). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "wasm/abi.h"

enum { SPIN_ROUNDS = 1 << 15 };

/* Pieces are claimed from one 64-bit word: the job's generation (high half)
 * and the next piece (low half). A worker claims only with a compare-and-swap
 * of the word it read, so a worker still looking at a finished job (a stale
 * generation) can never take a piece of the next one; and a new job is
 * published BLOCKED first (no piece can be claimed) while its function,
 * argument and count are written, then opened at piece 0. */
#define BLOCKED 0xffffffffu

typedef struct ww_pool64 {
    _Atomic uint64_t claim;      /* generation << 32 | next piece */
    _Atomic int32_t done;        /* pieces of the current job finished */
    _Atomic int32_t started;     /* workers inside ww_pool64_worker */
    _Atomic int32_t stop;
    _Atomic uint64_t worker_pieces; /* pieces workers (not the caller) ran */
    wisp_job_fn fn;
    void *arg;
    int32_t nth;
    int32_t n_threads; /* the caller included */
} ww_pool64;

static uint64_t claim_word(uint32_t generation, uint32_t piece) { return (uint64_t)generation << 32 | piece; }
static uint32_t generation_of(uint64_t w) { return (uint32_t)(w >> 32); }
/* The generation's half of the claim word (wasm is little-endian): what
 * sleeping workers wait on. */
static int32_t *generation_half(ww_pool64 *p) { return (int32_t *)(void *)&p->claim + 1; }

/* The pool JS is starting workers for (one per instance). */
static ww_pool64 *current;

/* A pool of n threads (the caller included), before its workers start; the
 * pool's address (NULL when out of memory). */
API ww_pool64 *ww_pool64_new(int32_t n) {
    if (current || n < 2) return NULL;
    ww_pool64 *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n;
    current = p;
    return p;
}

/* Workers inside their loop so far: JS waits for n - 1 before the pool runs. */
API int32_t ww_pool64_started(ww_pool64 *p) { return atomic_load(&p->started); }

/* Claims and runs pieces of job `generation` until none is left; how many. */
static int32_t claim_pieces(ww_pool64 *p, uint32_t generation) {
    int32_t ran = 0;
    uint64_t w = atomic_load(&p->claim);
    while (generation_of(w) == generation) {
        uint32_t i = (uint32_t)w;
        if (i == BLOCKED) { /* being published: open in a moment */
            w = atomic_load(&p->claim);
            continue;
        }
        if (i >= (uint32_t)p->nth) break;
        if (!atomic_compare_exchange_weak(&p->claim, &w, w + 1)) continue; /* w is the word now */
        p->fn(p->arg, (int)i, p->nth);
        ran++;
        atomic_fetch_add(&p->done, 1);
        w = atomic_load(&p->claim);
    }
    return ran;
}

/* A worker's life: wait for a job, claim its pieces, again; returns when
 * the pool stops. */
API void ww_pool64_worker(ww_pool64 *p) {
    uint32_t seen = generation_of(atomic_load(&p->claim));
    atomic_fetch_add(&p->started, 1);
    for (;;) {
        uint32_t g;
        int spins = 0;
        while ((g = generation_of(atomic_load(&p->claim))) == seen && !atomic_load(&p->stop)) {
            if (++spins < SPIN_ROUNDS) continue;
            /* sleep until the generation moves (the value checked again inside) */
            __builtin_wasm_memory_atomic_wait32(generation_half(p), (int32_t)seen, -1);
            spins = 0;
        }
        if (atomic_load(&p->stop)) return;
        seen = g;
        int32_t ran = claim_pieces(p, g);
        if (ran) atomic_fetch_add(&p->worker_pieces, (uint64_t)ran);
    }
}

/* wisp_threads.run: fn(arg, i, nth) for every i < nth, on every thread that
 * claims one; returns when all have run. */
static void pool64_run(void *raw, wisp_job_fn fn, void *arg, int nth) {
    ww_pool64 *p = raw;
    uint32_t g = generation_of(atomic_load(&p->claim)) + 1;
    atomic_store(&p->claim, claim_word(g, BLOCKED));
    p->fn = fn;
    p->arg = arg;
    p->nth = nth;
    atomic_store(&p->done, 0);
    atomic_store(&p->claim, claim_word(g, 0)); /* publishes fn, arg and nth (seq_cst) */
    __builtin_wasm_memory_atomic_notify(generation_half(p), (uint32_t)-1);
    claim_pieces(p, g);
    while (atomic_load(&p->done) < nth) {
    }
}

/* Stops the workers (they return from ww_pool64_worker; JS then ends them). */
API void ww_pool64_stop(ww_pool64 *p) {
    atomic_store(&p->stop, 1);
    atomic_store(&p->claim, claim_word(generation_of(atomic_load(&p->claim)) + 1, BLOCKED));
    __builtin_wasm_memory_atomic_notify(generation_half(p), (uint32_t)-1);
}

int32_t ww_pool64_attach(ww_model *m, int32_t n) {
    ww_pool64 *p = current;
    if (!p || p->n_threads != n || atomic_load(&p->started) != n - 1)
        return wisp_fail(&m->err, WISP_ERR_CAPACITY, "could not start %d threads (%d started)", n,
                         p ? (int)atomic_load(&p->started) + 1 : 1),
               -1;
    m->pool = p;
    m->threads = (wisp_threads){pool64_run, p, n};
    return 0;
}

void ww_pool64_detach(ww_model *m) {
    ww_pool64 *p = m->pool;
    if (!p) return;
    ww_pool64_stop(p);
    m->pool = NULL;
}

double ww_pool64_worker_pieces(const ww_model *m) {
    return m->pool ? (double)atomic_load(&((ww_pool64 *)m->pool)->worker_pieces) : 0;
}
