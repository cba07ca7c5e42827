#include "model_rewrite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic_file.h"
#include "file_map.h"
#if CLI_HAVE_MMAP
#include <sys/mman.h>
#endif
#include "lora_layout.h"
#include "merge.h"
#include "session.h"
#include "thread_pool.h"
#include "types.h"

#define CHUNK_BYTES (4u << 20) /* output bytes converted per parallel step */

typedef struct chunk_job {
    const wisp_gguf_tensor *t;
    int out_type;
    const wisp_merge_term *terms;
    int n_terms;
    int64_t r0, r1;
    size_t out_row;
    uint8_t *out;
    float **scratch; /* one row of floats per thread */
} chunk_job;

static void run_chunk(void *arg, int ith, int nth) {
    const chunk_job *j = arg;
    int64_t lo, hi;
    wisp_split(j->r1 - j->r0, ith, nth, &lo, &hi);
    if (lo < hi)
        wisp_model_rewrite_rows(j->t, j->out_type, j->terms, j->n_terms, j->r0 + lo, j->r0 + hi, j->scratch[ith],
                                j->out + (size_t)lo * j->out_row);
}

/* Tell the kernel the mapped pages of a finished tensor can go, so resident
 * memory stays near one tensor however large the model (they are re-read
 * from the file if touched again). */
static void release_pages(const wisp_gguf_tensor *t) {
#if !CLI_HAVE_MMAP /* nothing is mapped: the file was read into memory */
    (void)t;
#else
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)t->data + page - 1) & ~(page - 1), hi = ((uintptr_t)t->data + t->nbytes) & ~(page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
#endif
}

static const char *type_name(int t) {
    const wisp_type_info *ti = wisp_type_info_of(t);
    return ti ? ti->name : "?";
}

/* The terms merged into tensor t (none unless it is an adapted projection). */
static int terms_for(const cli_rewrite *r, const wisp_gguf_tensor *t, wisp_merge_term *terms) {
    if (!r->n_adapters || !r->hp) return 0;
    return wisp_merge_terms_for_tensor(r->adapters, r->user_scales, r->n_adapters, r->hp, t->name.ptr,
                                       (size_t)t->name.len, terms, WISP_MERGE_MAX_TERMS);
}

static void print_summary(const cli_rewrite *r, const uint32_t *out_types, uint64_t bytes, double secs,
                          int n_merged) {
    int count[WISP_TYPE_COUNT] = {0};
    for (uint64_t i = 0; i < wisp_gguf_tensor_count(r->in); i++)
        if (out_types[i] < WISP_TYPE_COUNT) count[out_types[i]]++;
    fprintf(stderr, "wrote %s: %llu tensors (", r->out_path, (unsigned long long)wisp_gguf_tensor_count(r->in));
    bool first = true;
    for (int t = 0; t < WISP_TYPE_COUNT; t++)
        if (count[t]) {
            fprintf(stderr, "%s%d %s", first ? "" : ", ", count[t], type_name(t));
            first = false;
        }
    fprintf(stderr, "), %.1f MB -> %.1f MB in %.1f s", (double)wisp_gguf_total_bytes(r->in) / 1e6, (double)bytes / 1e6, secs);
    if (n_merged) fprintf(stderr, "; %d adapter pairs merged", n_merged);
    fprintf(stderr, "\n");
}

/* Tell the user which tensors could not take the type they asked for. */
static void print_fallbacks(const cli_rewrite *r, const uint32_t *out_types) {
    size_t cursor = 0;
    wisp_gguf_tensor t;
    int n = 0;
    for (uint64_t i = 0; wisp_gguf_next_tensor(r->in, &cursor, &t); i++) {
        int wanted;
        wisp_qtarget_tensor_type(&r->target, &t, r->n_layers, r->tied, &wanted);
        if (wanted == (int)out_types[i]) continue;
        if (n++ < 4)
            fprintf(stderr, "note: %.*s: rows of %lld do not split into %s blocks; stored as %s\n", (int)t.name.len,
                    t.name.ptr, (long long)t.ne[0], type_name(wanted), type_name((int)out_types[i]));
    }
    if (n > 4) fprintf(stderr, "note: ... and %d more tensors like that\n", n - 4);
}

void cli_rewrite_layers(const wisp_gguf *g, int32_t *n_layers, bool *tied) {
    size_t cursor = 0;
    wisp_gguf_tensor t;
    int32_t n = 0;
    *tied = true;
    while (wisp_gguf_next_tensor(g, &cursor, &t)) {
        if (wisp_str_eq(t.name, "output.weight")) *tied = false;
        if (t.name.len < 5 || memcmp(t.name.ptr, "blk.", 4) != 0) continue;
        int32_t layer = 0;
        for (size_t i = 4; i < t.name.len && t.name.ptr[i] >= '0' && t.name.ptr[i] <= '9' && layer < 1000000; i++)
            layer = layer * 10 + (t.name.ptr[i] - '0');
        if (layer + 1 > n) n = layer + 1;
    }
    *n_layers = n;
}

bool cli_rewrite_run(const cli_rewrite *r) {
    const wisp_gguf *in = r->in;
    const double start = cli_now();
    uint32_t *out_types = calloc(wisp_gguf_tensor_count(in) ? wisp_gguf_tensor_count(in) : 1, sizeof *out_types);
    int n_threads = r->n_threads > 0 ? r->n_threads : cli_default_threads();
    float **scratch = calloc((size_t)n_threads, sizeof *scratch);
    if (!out_types || !scratch) {
        fprintf(stderr, "wisp: out of memory\n");
        free(out_types);
        free(scratch);
        return false;
    }
    /* types, the widest row, and the output size */
    size_t cursor = 0;
    wisp_gguf_tensor t;
    int64_t max_cols = 1;
    uint64_t total = 0;
    bool ok = true;
    for (uint64_t i = 0; ok && wisp_gguf_next_tensor(in, &cursor, &t); i++) {
        out_types[i] = (uint32_t)wisp_qtarget_tensor_type(&r->target, &t, r->n_layers, r->tied, NULL);
        if (t.ne[0] > max_cols) max_cols = t.ne[0];
        total += wisp_type_row_bytes((int)out_types[i], t.ne[0]) * (uint64_t)wisp_tensor_rows(&t);
        /* a tensor that changes needs both directions of its types */
        wisp_merge_term terms[WISP_MERGE_MAX_TERMS];
        const wisp_type_info *ti = wisp_type_info_of((int)t.type), *to = wisp_type_info_of((int)out_types[i]);
        if ((terms_for(r, &t, terms) || out_types[i] != t.type) &&
            (!ti || !ti->dequantize || !to || !to->quantize)) {
            fprintf(stderr, "wisp: %.*s: wisp cannot rewrite %s weights as %s\n", (int)t.name.len, t.name.ptr,
                    ti ? ti->name : "?", to ? to->name : "?");
            ok = false;
        }
    }
    if (!ok) {
        free(out_types);
        free(scratch);
        return false;
    }
    print_fallbacks(r, out_types);
    for (int i = 0; i < n_threads && ok; i++) ok = (scratch[i] = malloc(sizeof(float) * (size_t)max_cols)) != NULL;
    uint8_t *chunk = ok ? malloc(CHUNK_BYTES + (size_t)max_cols * 8) : NULL;
    cli_pool *pool = ok && chunk ? cli_pool_create(n_threads) : NULL;
    if (!pool) {
        fprintf(stderr, "wisp: out of memory or threads\n");
        ok = false;
    }
    cli_atomic_file af;
    memset(&af, 0, sizeof af);
    wisp_error err = {0};
    if (ok && (ok = cli_atomic_open(&af, r->out_path))) {
        if (wisp_model_rewrite_header(in, &r->target, out_types, &af.sink, &err)) {
            cli_report(r->out_path, &err);
            ok = false;
        }
    }
    const bool progress = !r->quiet && isatty(2);
    double last_print = 0;
    int n_merged = 0;
    uint64_t done = 0;
    cursor = 0;
    for (uint64_t i = 0; ok && wisp_gguf_next_tensor(in, &cursor, &t); i++) {
        wisp_merge_term terms[WISP_MERGE_MAX_TERMS];
        int n_terms = terms_for(r, &t, terms);
        n_merged += n_terms;
        int out_type = (int)out_types[i];
        size_t out_row = wisp_type_row_bytes(out_type, t.ne[0]);
        int64_t rows = wisp_tensor_rows(&t), per_chunk = (int64_t)(CHUNK_BYTES / (out_row ? out_row : 1));
        if (per_chunk < 1) per_chunk = 1;
        for (int64_t r0 = 0; ok && r0 < rows; r0 += per_chunk) {
            chunk_job job = {&t, out_type, terms, n_terms, r0, r0 + per_chunk < rows ? r0 + per_chunk : rows,
                             out_row, chunk, scratch};
            cli_pool_run(pool, run_chunk, &job, n_threads);
            size_t bytes = (size_t)(job.r1 - job.r0) * out_row;
            if (wisp_sink_write(&af.sink, chunk, bytes, &err)) {
                cli_report(r->out_path, &err);
                ok = false;
            }
            done += bytes;
            double now = cli_now();
            if (progress && now - last_print > 0.2) {
                fprintf(stderr, "\r[%3llu/%3llu] %-32.*s %-6s %3d%%", (unsigned long long)i + 1,
                        (unsigned long long)wisp_gguf_tensor_count(in), (int)(t.name.len > 32 ? 32 : t.name.len), t.name.ptr,
                        type_name(out_type), total ? (int)(100.0 * (double)done / (double)total) : 100);
                fflush(stderr);
                last_print = now;
            }
        }
        if (ok && wisp_sink_pad(&af.sink, in->alignment, &err)) {
            cli_report(r->out_path, &err);
            ok = false;
        }
        if (r->input_mapped) release_pages(&t);
    }
    if (progress) fprintf(stderr, "\r%70s\r", "");
    /* every pair must have found its tensor: an adapter half merged is a wrong model */
    int n_pairs = 0;
    for (int i = 0; i < r->n_adapters; i++) n_pairs += r->adapters[i]->n_pairs;
    if (ok && n_merged != n_pairs) {
        fprintf(stderr, "wisp: %s: only %d of the adapters' %d pairs found their tensor; nothing written\n",
                r->out_path, n_merged, n_pairs);
        ok = false;
    }
    if (af.f) {
        if (ok) ok = cli_atomic_commit(&af);
        else cli_atomic_abort(&af);
    }
    if (ok) print_summary(r, out_types, af.sink.written, cli_now() - start, n_merged);
    cli_pool_destroy(pool);
    for (int i = 0; i < n_threads; i++) free(scratch[i]);
    free(scratch);
    free(chunk);
    free(out_types);
    return ok;
}
