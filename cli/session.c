#include "session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "huge_alloc.h"
#include "simd.h"

void cli_model_opts_default(cli_model_opts *o) {
    memset(o, 0, sizeof *o);
    o->kv_type = "f16";
}

uint32_t cli_text_bytes_for(size_t n) {
    return n + 16 > 4096 ? (uint32_t)(n + 16) : 0;
}

void cli_report(const char *what, const wisp_error *err) {
    fprintf(stderr, "wisp: %s: %s\n", what, err->message);
}

/* Selected once per process: WISP_KERNELS forces a level (tests compare
 * levels this way); otherwise the best this CPU supports. */
const wisp_kernels *cli_kernels(void) {
    static const wisp_kernels *chosen;
    if (chosen) return chosen;
    wisp_cpu_features cpu;
    wisp_cpu_detect(&cpu);
    wisp_error err = {0};
    if (wisp_simd_select(&cpu, getenv("WISP_KERNELS"), &chosen, &err)) {
        fprintf(stderr, "wisp: WISP_KERNELS: %s\n", err.message);
        exit(2);
    }
    return chosen;
}

/* A packed weight's original is read again only for embedding rows, the
 * backward pass or merging: its pages need not stay in the process, which
 * keeps peak memory near one copy of the weights rather than two. Training
 * keeps them: its backward pass reads every original each step. */
static void release_packed_original(void *file, const void *data, size_t bytes) {
    cli_file_release((cli_file *)file, data, bytes);
}

bool cli_session_open(cli_session *s, const cli_model_opts *o, const wisp_config *cfg) {
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    if (o->kv_type && strcmp(o->kv_type, "f16") == 0) s->cfg.kv_type = WISP_TYPE_F16;
    else if (o->kv_type && strcmp(o->kv_type, "f32") == 0) s->cfg.kv_type = WISP_TYPE_F32;
    else {
        fprintf(stderr, "wisp: --kv-type must be f16 or f32\n");
        return false;
    }
    if (o->ctx < 0 || o->batch < 0 || o->threads < 0) {
        fprintf(stderr, "wisp: --ctx, --batch and --threads must not be negative\n");
        return false;
    }
    s->cfg.n_ctx = o->ctx;
    s->cfg.n_batch = o->batch;
    s->cfg.in_place_weights = o->in_place_weights;
    if (s->cfg.train.seq_len == 0) {
        s->cfg.weight_packed = release_packed_original;
        s->cfg.weight_packed_user = &s->file;
    }
    int n_threads = o->threads ? o->threads : cli_default_threads();
    if (n_threads > 1) {
        s->pool = cli_pool_create(n_threads);
        if (!s->pool) {
            fprintf(stderr, "wisp: could not start %d threads\n", n_threads);
            return false;
        }
    }
    s->cfg.threads = cli_pool_threads(s->pool);
    s->cfg.kernels = cli_kernels();
    if (!cli_open_gguf(&s->file, &s->gguf, o->model)) {
        cli_session_close(s);
        return false;
    }
    wisp_error err = {0};
    if (wisp_plan(&s->gguf, &s->cfg, &s->plan, &err)) {
        cli_report(o->model, &err);
        cli_session_close(s);
        return false;
    }
    s->arena_size = o->arena ? o->arena : s->plan.total;
    /* exactly the requested bytes, so --arena proves the plan */
    if ((s->arena = cli_huge_alloc(s->arena_size)) == NULL) {
        fprintf(stderr, "wisp: cannot allocate an arena of %zu bytes\n", s->arena_size);
        cli_session_close(s);
        return false;
    }
    if (wisp_init(&s->ctx, &s->gguf, &s->cfg, s->arena, s->arena_size, &err)) {
        cli_report(o->model, &err);
        cli_session_close(s);
        return false;
    }
    return true;
}

void cli_session_close(cli_session *s) {
    free(s->arena);
    if (s->file.data) cli_file_close(&s->file);
    cli_pool_destroy(s->pool);
    memset(s, 0, sizeof *s);
}
