#include "thread_pool.h"

#if WISP_CLI_THREADS

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* How a job runs: the caller publishes (fn, arg, n) and a claim word
 * holding the job's number and the next unclaimed piece; every thread,
 * the caller included, claims pieces one at a time with a compare-and-swap
 * until none are left, so a thread that is late (descheduled, still waking
 * up) simply claims fewer. A claim carries the job number, so a thread that
 * wakes up after its job ended cannot take a piece of the next job by
 * mistake, and fn/arg are read only after a successful claim, when they are
 * certain to belong to that job. Which thread runs a piece never changes
 * what the piece computes, so results do not depend on timing.
 *
 * Idle workers spin (with pause) for a while before sleeping on a condition
 * variable: decode issues a job every few microseconds, and waking a
 * sleeping thread costs tens of microseconds. */

#define SPIN_ROUNDS (1 << 15) /* pause loops before a worker sleeps (~0.5 ms) */
#define YIELD_ROUNDS (1 << 12) /* pause loops before the caller yields while waiting */

struct cli_pool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    /* the job: written by the caller before the claim word is published */
    wisp_job_fn fn;
    void *arg;
    _Alignas(64) atomic_uint_fast64_t claim; /* job number << 32 | pieces claimed << 16 | pieces */
    _Alignas(64) atomic_int done;            /* pieces finished */
    _Alignas(64) atomic_uint generation;     /* job number, for waking workers */
    atomic_int sleepers;
    atomic_bool stop;
    uint32_t job;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Run pieces of job `job` until none are left. */
static void work_on(cli_pool *p, uint32_t job) {
    uint_fast64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
    for (;;) {
        uint32_t n = (uint32_t)(c & 0xffff), next = (uint32_t)((c >> 16) & 0xffff);
        if ((uint32_t)(c >> 32) != job || next >= n) return;
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &c, c + (1u << 16), memory_order_acq_rel,
                                                   memory_order_acquire))
            continue; /* c now holds the current value */
        p->fn(p->arg, (int)next, (int)n);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
        c = atomic_load_explicit(&p->claim, memory_order_acquire);
    }
}

static void *worker_main(void *raw) {
    cli_pool *p = raw;
    unsigned seen = atomic_load(&p->generation);
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen &&
               !atomic_load_explicit(&p->stop, memory_order_relaxed)) {
            if (++spins < SPIN_ROUNDS) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&p->lock);
            atomic_fetch_add(&p->sleepers, 1); /* seq_cst: pairs with the caller's generation bump */
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->wake, &p->lock);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->lock);
            spins = 0;
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = g;
        work_on(p, g);
    }
}

cli_pool *cli_pool_create(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    cli_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = 1;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads - 1, sizeof(pthread_t));
        if (!p->threads) {
            cli_pool_destroy(p);
            return NULL;
        }
        for (int i = 1; i < n_threads; i++) {
            if (pthread_create(&p->threads[i - 1], NULL, worker_main, p) != 0) {
                cli_pool_destroy(p);
                return NULL;
            }
            p->n_threads = i + 1;
        }
    }
    return p;
}

void cli_pool_destroy(cli_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->stop, true);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->threads[i - 1], NULL);
    free(p->threads);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    free(p);
}

void cli_pool_run(void *pool, wisp_job_fn fn, void *arg, int nth) {
    cli_pool *p = pool;
    if (!p || p->n_threads <= 1 || nth <= 1 || nth > 0xffff) {
        for (int i = 0; i < nth; i++) fn(arg, i, nth);
        return;
    }
    uint32_t job = ++p->job;
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->claim, ((uint_fast64_t)job << 32) | (uint_fast64_t)nth, memory_order_release);
    atomic_store(&p->generation, job); /* seq_cst: a worker about to sleep either sees it or is counted */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->lock);
    }
    work_on(p, job);
    /* pieces other threads claimed may still be running */
    int spins = 0;
    while (atomic_load_explicit(&p->done, memory_order_acquire) < nth) {
        if (++spins < YIELD_ROUNDS) cpu_relax();
        else sched_yield(); /* a worker holding a piece may be waiting for this CPU */
    }
}

int cli_pool_size(const cli_pool *p) { return p ? p->n_threads : 1; }

int cli_default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    return n > 8 ? 8 : (int)n;
}

#endif /* WISP_CLI_THREADS */
