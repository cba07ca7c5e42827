/* The streaming driver behind `wisp quantize` and `wisp merge`: decides
 * each tensor's output type, writes the GGUF header, then converts tensors
 * in chunks of rows on a thread pool (rows are independent, so the output is
 * identical for any thread count), printing progress. Memory stays bounded:
 * one float row per thread plus one output chunk, whatever the model size.
 * The output replaces OUT only when everything succeeded. */
#ifndef WISP_CLI_MODEL_REWRITE_H
#define WISP_CLI_MODEL_REWRITE_H

#include <stdbool.h>

#include "gguf.h"
#include "lora.h"
#include "quantize_model.h"

typedef struct cli_rewrite {
    const char *out_path;
    const wisp_gguf *in;
    wisp_qtarget target;
    int n_threads;               /* 0: the default */
    const wisp_lora *const *adapters; /* merged into their projections (may be none) */
    const float *user_scales;
    int n_adapters;
    const wisp_hparams *hp;      /* the base's, to find adapted tensors (required with adapters) */
    int32_t n_layers;            /* for the recipes' layer rules */
    bool tied;                   /* no output.weight: the embedding is the output */
    bool quiet;                  /* no progress line */
    bool input_mapped;           /* `in` views an mmap'd file: pages done with are released */
} cli_rewrite;

/* Layer count (1 + the largest N of blk.N.* tensors) and whether the output
 * is tied (no output.weight), as the recipes need them. */
void cli_rewrite_layers(const wisp_gguf *g, int32_t *n_layers, bool *tied);

/* Prints errors as "wisp: ..." and returns false on failure. */
bool cli_rewrite_run(const cli_rewrite *r);

#endif
