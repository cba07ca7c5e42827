/* What most commands do first: map a GGUF, plan, allocate exactly one
 * arena, and initialise a context, reporting any failure as
 * "wisp: PATH: message". */
#ifndef WISP_CLI_SESSION_H
#define WISP_CLI_SESSION_H

#include <stdbool.h>

#include "args.h"
#include "clock.h"
#include "file_map.h"
#include "thread_pool.h"
#include "simd.h"
#include "wisp.h"

/* Options every model-running command shares. */
typedef struct cli_model_opts {
    const char *model;
    int32_t ctx;
    int32_t batch;
    int32_t threads;
    size_t arena;        /* 0: exactly the planned size */
    const char *kv_type; /* "f16" or "f32" */
    bool in_place_weights;
} cli_model_opts;

#define CLI_MODEL_OPTS(o)                                                                                        \
    {"model", 'm', OPT_STR, &(o)->model, "PATH", "GGUF model file"},                                          \
    {"ctx", 'c', OPT_INT, &(o)->ctx, "N", "context length in tokens; 0: the model's, at most 4096"},           \
    {"batch", 'b', OPT_INT, &(o)->batch, "N", "tokens per forward step; 0: min(ctx, 64)"},                    \
    {"threads", 't', OPT_INT, &(o)->threads, "N", "worker threads; 0: online CPUs, at most 8"},               \
    {"kv-type", 0, OPT_STR, &(o)->kv_type, "f16|f32", "KV cache element type"},                                \
    {"arena", 0, OPT_SIZE, &(o)->arena, "BYTES", "use exactly one arena of this size (default: the plan)"},     \
    {"in-place-weights", 0, OPT_FLAG, &(o)->in_place_weights, NULL,                                          \
     "read every weight from the file; no packed copies in the arena (less memory, slower on AVX-512)"}

void cli_model_opts_default(cli_model_opts *o);

typedef struct cli_session {
    cli_file file;
    wisp_gguf gguf;
    wisp_config cfg;
    wisp_memory_plan plan;
    void *arena;
    size_t arena_size;
    wisp_ctx *ctx;
    cli_pool *pool;
} cli_session;

/* Fill cfg's threading, kernels and sizes from the options (cfg's other
 * fields are kept), open, plan and init. Prints and returns false on error. */
bool cli_session_open(cli_session *s, const cli_model_opts *o, const wisp_config *cfg);
void cli_session_close(cli_session *s);

/* Map and parse a GGUF only (for commands that need no context). A path
 * named like a gguf-split shard (NAME-00002-of-00003.gguf, any of the
 * shards) maps all N shards and links them into one model (cli/gguf_shards.c). */
bool cli_open_gguf(cli_file *f, wisp_gguf *g, const char *path);

/* The kernel table for this machine (or as forced by WISP_KERNELS). */
const wisp_kernels *cli_kernels(void);

/* The tokenizer text budget for a prompt of n bytes: the library default
 * (4096) unless the prompt is longer, so `wisp plan` with default settings
 * matches what run/logits carve for ordinary prompts. */
uint32_t cli_text_bytes_for(size_t n);

/* Print "wisp: <what>: <message>" to stderr. */
void cli_report(const char *what, const wisp_error *err);

/* Exit statuses: 0 ok, 1 runtime failure, 2 usage error. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

#endif
