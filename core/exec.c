#include "exec.h"

#include <string.h>

void wisp_exec_setup(wisp_exec *e, const wisp_kernels *k, const wisp_threads *threads) {
    memset(e, 0, sizeof *e);
    e->k = k ? *k : *wisp_kernels_reference();
    wisp_kernels_complete(&e->k);
    if (threads) e->threads = *threads;
    if (e->threads.n_threads < 1 || !e->threads.run) e->threads.n_threads = 1;
}

size_t wisp_exec_act_row_bytes(int w_type, int64_t cols) {
    const wisp_type_info *ti = wisp_type_info_of(w_type);
    if (!ti || ti->act_type == WISP_TYPE_F32 || ti->act_type < 0) return 0;
    return wisp_type_row_bytes(ti->act_type, cols);
}

void wisp_exec_pieces(const wisp_exec *e, wisp_job_fn fn, void *arg, int n) {
    if (n > 1 && e->threads.run && e->threads.n_threads > 1) {
        e->threads.run(e->threads.pool, fn, arg, n);
        return;
    }
    for (int i = 0; i < n; i++) fn(arg, i, n);
}

void wisp_exec_parallel(const wisp_exec *e, wisp_job_fn fn, void *arg) {
    wisp_exec_pieces(e, fn, arg, e->threads.n_threads);
}

typedef struct convert_job {
    const wisp_exec *e;
    int act_type;
    const float *x;
    int64_t ldx, cols, n_tok;
    size_t row_bytes;
} convert_job;

static void convert_rows(void *arg, int ith, int nth) {
    const convert_job *j = arg;
    int64_t lo, hi;
    wisp_split(j->n_tok, ith, nth, &lo, &hi);
    for (int64_t t = lo; t < hi; t++)
        j->e->k.quantize_row[j->act_type](j->x + t * j->ldx, j->e->act + (size_t)t * j->row_bytes, j->cols);
}

typedef struct matmul_job {
    const wisp_exec *e;
    wisp_matmul_args a;
    int64_t rows;
} matmul_job;

/* Rows are handed out in whole groups of 16 (SIMD kernels work on row
 * groups); the split never changes any row's arithmetic. */
#define ROW_GROUP 16

static void matmul_rows(void *arg, int ith, int nth) {
    const matmul_job *j = arg;
    int64_t groups = (j->rows + ROW_GROUP - 1) / ROW_GROUP, lo, hi;
    wisp_split(groups, ith, nth, &lo, &hi);
    lo *= ROW_GROUP;
    hi *= ROW_GROUP;
    if (hi > j->rows) hi = j->rows;
    if (lo < hi) j->e->k.matmul[j->a.w_type](&j->a, lo, hi);
}

/* Converting a small batch of activations on the calling thread is cheaper
 * than a parallel job's synchronisation (a decode step's rows are a few
 * thousand elements; a parallel job costs about a microsecond). */
#define SERIAL_CONVERT_ELEMS ((int64_t)1 << 15)

/* Pieces per matmul: decode splits finer so that a thread that starts late
 * leaves its share to the others; prefill keeps one piece per thread, since
 * each piece prepares the batch's activation facts once. */
static int matmul_pieces(const wisp_exec *e, int64_t rows, int64_t n_tok) {
    if (e->threads.n_threads <= 1) return 1;
    int64_t groups = (rows + ROW_GROUP - 1) / ROW_GROUP;
    int64_t want = (int64_t)e->threads.n_threads * (n_tok <= 2 ? 4 : 1);
    return (int)(groups < want ? groups : want);
}

void wisp_exec_matmul(wisp_exec *e, const wisp_weight *w, const float *x, int64_t ldx, int64_t n_tok, float *y,
                      int64_t ldy) {
    const wisp_type_info *ti = wisp_type_info_of(w->type);
    matmul_job j;
    j.e = e;
    j.rows = w->rows;
    j.a.w = w->data;
    j.a.w_row_bytes = w->row_bytes;
    j.a.w_type = w->type;
    j.a.n_in = w->cols;
    j.a.n_tok = n_tok;
    j.a.y = y;
    j.a.ldy = ldy;
    if (ti->act_type == WISP_TYPE_F32) {
        j.a.x = (const uint8_t *)x;
        j.a.x_row_bytes = (size_t)ldx * sizeof(float);
    } else {
        convert_job c = {e, ti->act_type, x, ldx, w->cols, n_tok, wisp_type_row_bytes(ti->act_type, w->cols)};
        if (n_tok * w->cols <= SERIAL_CONVERT_ELEMS) convert_rows(&c, 0, 1);
        else wisp_exec_parallel(e, convert_rows, &c);
        j.a.x = e->act;
        j.a.x_row_bytes = c.row_bytes;
    }
    wisp_exec_pieces(e, matmul_rows, &j, matmul_pieces(e, w->rows, n_tok));
}
