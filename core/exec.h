/* How work runs: the kernel table in use, the caller's thread pool, and the
 * buffer that activations are converted into before quantized products.
 * Shared by inference and training. */
#ifndef WISP_EXEC_H
#define WISP_EXEC_H

#include <stdint.h>

#include "kernels.h"
#include "model.h"
#include "wisp.h"

/* wisp_threads and wisp_job_fn, the caller's thread pool, are public: wisp.h */

typedef struct wisp_exec {
    wisp_kernels k;       /* completed: no NULL entries */
    wisp_threads threads;
    uint8_t *act;         /* converted activation rows */
    size_t act_bytes;
} wisp_exec;

void wisp_exec_setup(wisp_exec *e, const wisp_kernels *k, const wisp_threads *threads);

/* Bytes of one activation row converted for a product with weights of
 * `w_type` and `cols` columns (0 when the weights take floats directly). */
size_t wisp_exec_act_row_bytes(int w_type, int64_t cols);

/* fn over n_threads pieces (piece i may use worker scratch slot i). */
void wisp_exec_parallel(const wisp_exec *e, wisp_job_fn fn, void *arg);

/* fn over n pieces (serially when there is no pool). */
void wisp_exec_pieces(const wisp_exec *e, wisp_job_fn fn, void *arg, int n);

/* y[t*ldy + r] = (W x_t)[r] for t < n_tok, r < W.rows; x_t = x + t*ldx.
 * Converts x into e->act first when W is quantized, and reads W's packed
 * copy (W.packed, made with e's kernels) when it has one. */
void wisp_exec_matmul(wisp_exec *e, const wisp_weight *w, const float *x, int64_t ldx, int64_t n_tok, float *y,
                      int64_t ldy);

/* The same for n weights that take the same input (a layer's q, k and v, or
 * its gate and up): y[m] = W[m] x. The input is converted once and all their
 * rows form one job (one synchronisation, threads balanced over all the
 * rows) when the weights take it in the same form and n is at most
 * WISP_EXEC_MAX_FUSED; otherwise each product runs on its own. Every row's
 * arithmetic is the same either way. */
#define WISP_EXEC_MAX_FUSED 3
void wisp_exec_matmuls(wisp_exec *e, int n, const wisp_weight *const w[], const float *x, int64_t ldx,
                       int64_t n_tok, float *const y[], const int64_t ldy[]);

/* The range [*lo, *hi) of n items that worker ith of nth handles. */
static inline void wisp_split(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    int64_t per = n / nth, extra = n % nth;
    *lo = ith * per + (ith < extra ? ith : extra);
    *hi = *lo + per + (ith < extra ? 1 : 0);
}

#endif
