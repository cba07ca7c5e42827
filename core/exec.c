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

/* Rows are handed out in whole groups of 16 (SIMD kernels and packed
 * weights work on row groups); the split never changes any row's arithmetic. */
#define ROW_GROUP WISP_PACK_GROUP

/* The products of one job: up to WISP_EXEC_MAX_FUSED weights, one after the
 * other in a single range of row groups. */
typedef struct matmul_job {
    const wisp_exec *e;
    int n;
    int shares; /* > 0: decode's pieces (decode_piece), over this many threads' shares */
    wisp_matmul_fn fn[WISP_EXEC_MAX_FUSED];
    wisp_matmul_args a[WISP_EXEC_MAX_FUSED];
    int64_t rows[WISP_EXEC_MAX_FUSED];
    int64_t groups[WISP_EXEC_MAX_FUSED];
    int64_t total_groups;
} matmul_job;

static int64_t row_groups(int64_t rows) { return (rows + ROW_GROUP - 1) / ROW_GROUP; }

/* Decode's pieces. Each thread's first claim is one long contiguous run,
 * DECODE_FIRST_EIGHTHS/8 of its share of the rows; the rest of every share
 * is cut into DECODE_TAIL_PARTS pieces that whichever thread is free takes,
 * so a thread that starts late or runs slower leaves work to the others.
 * Why not equal pieces: on the bench VM, in the states where its two CPUs
 * read memory at twice the bandwidth or more, the products read a larger
 * fraction of the read-only roofline the longer each thread's runs of
 * consecutive rows (bench/decode_bandwidth.c with each split timed in the
 * same rounds, medians of 22: one piece per thread 93%, 7/8 + tail 91%,
 * 3/4 + tail 88%, two equal pieces per thread 84%, four 80%). 3/4 keeps a
 * quarter of the work for balancing. */
#define DECODE_FIRST_EIGHTHS 6
#define DECODE_TAIL_PARTS 2

static int decode_pieces(int threads) { return threads * (1 + DECODE_TAIL_PARTS); }

static void decode_piece(int64_t groups, int threads, int piece, int64_t *lo, int64_t *hi) {
    const int share = piece < threads ? piece : (piece - threads) % threads;
    int64_t s0, s1;
    wisp_split(groups, share, threads, &s0, &s1);
    const int64_t tail = s0 + (s1 - s0) * DECODE_FIRST_EIGHTHS / 8;
    if (piece < threads) {
        *lo = s0;
        *hi = tail;
        return;
    }
    wisp_split(s1 - tail, (piece - threads) / threads, DECODE_TAIL_PARTS, lo, hi);
    *lo += tail;
    *hi += tail;
}

static void matmul_rows(void *arg, int ith, int nth) {
    const matmul_job *j = arg;
    int64_t lo, hi, first = 0;
    if (j->shares) decode_piece(j->total_groups, j->shares, ith, &lo, &hi);
    else wisp_split(j->total_groups, ith, nth, &lo, &hi);
    for (int m = 0; m < j->n; first += j->groups[m], m++) {
        const int64_t last = first + j->groups[m]; /* this weight's groups: [first, last) */
        const int64_t g0 = (lo > first ? lo : first) - first, g1 = (hi < last ? hi : last) - first;
        if (g0 >= g1) continue;
        int64_t r1 = g1 * ROW_GROUP < j->rows[m] ? g1 * ROW_GROUP : j->rows[m];
        j->fn[m](&j->a[m], g0 * ROW_GROUP, r1);
    }
}

/* Converting a small batch of activations on the calling thread is cheaper
 * than a parallel job's synchronisation (a decode step's rows are a few
 * thousand elements; a parallel job costs about a microsecond). */
#define SERIAL_CONVERT_ELEMS ((int64_t)1 << 15)

/* Pieces per matmul: decode's (decode_piece) when every piece has a row
 * group, setting j->shares; else one piece per thread, since each piece
 * prepares the batch's activation facts once (prefill). */
static int matmul_pieces(const wisp_exec *e, matmul_job *j, int64_t n_tok) {
    const int threads = e->threads.n_threads;
    j->shares = 0;
    if (threads <= 1) return 1;
    /* a share's first piece and each tail piece get at least one group */
    if (n_tok <= 2 && j->total_groups >= (int64_t)threads * 8) {
        j->shares = threads;
        return decode_pieces(threads);
    }
    return (int)(j->total_groups < threads ? j->total_groups : threads);
}

/* The activations as the weights take them: x itself for float weights,
 * else converted into e->act. Returns the row pointer and sets the row bytes. */
static const uint8_t *matmul_input(wisp_exec *e, int act_type, const float *x, int64_t ldx, int64_t cols,
                                   int64_t n_tok, size_t *row_bytes) {
    if (act_type == WISP_TYPE_F32) {
        *row_bytes = (size_t)ldx * sizeof(float);
        return (const uint8_t *)x;
    }
    convert_job c = {e, act_type, x, ldx, cols, n_tok, wisp_type_row_bytes(act_type, cols)};
    if (n_tok * cols <= SERIAL_CONVERT_ELEMS) convert_rows(&c, 0, 1);
    else wisp_exec_parallel(e, convert_rows, &c);
    *row_bytes = c.row_bytes;
    return e->act;
}

void wisp_exec_matmuls(wisp_exec *e, int n, const wisp_weight *const w[], const float *x, int64_t ldx,
                       int64_t n_tok, float *const y[], const int64_t ldy[]) {
    int act_type = wisp_type_info_of(w[0]->type)->act_type;
    bool shared = n <= WISP_EXEC_MAX_FUSED;
    for (int m = 1; m < n && shared; m++)
        shared = w[m]->cols == w[0]->cols && wisp_type_info_of(w[m]->type)->act_type == act_type;
    if (!shared) { /* each weight wants its own conversion: one job each */
        for (int m = 0; m < n; m++) wisp_exec_matmuls(e, 1, &w[m], x, ldx, n_tok, &y[m], &ldy[m]);
        return;
    }
    matmul_job j;
    j.e = e;
    j.n = n;
    j.total_groups = 0;
    size_t row_bytes;
    const uint8_t *in = matmul_input(e, act_type, x, ldx, w[0]->cols, n_tok, &row_bytes);
    for (int m = 0; m < n; m++) {
        const bool packed = w[m]->packed && e->k.packing[w[m]->type].matmul;
        j.fn[m] = packed ? e->k.packing[w[m]->type].matmul : e->k.matmul[w[m]->type];
        j.a[m] = (wisp_matmul_args){.w = packed ? w[m]->packed : w[m]->data, .w_row_bytes = w[m]->row_bytes,
                                    .w_type = w[m]->type, .n_in = w[m]->cols, .x = in, .x_row_bytes = row_bytes,
                                    .n_tok = n_tok, .y = y[m], .ldy = ldy[m]};
        j.rows[m] = w[m]->rows;
        j.groups[m] = row_groups(w[m]->rows);
        j.total_groups += j.groups[m];
    }
    wisp_exec_pieces(e, matmul_rows, &j, matmul_pieces(e, &j, n_tok));
}

void wisp_exec_matmul(wisp_exec *e, const wisp_weight *w, const float *x, int64_t ldx, int64_t n_tok, float *y,
                      int64_t ldy) {
    wisp_exec_matmuls(e, 1, &w, x, ldx, n_tok, &y, &ldy);
}
