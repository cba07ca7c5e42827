/* Split models (llama.cpp's gguf-split) in the engine. JS opens shard 1 as
 * any model (ww_open, or ww_open_header for a plan), adds shards 2..N in
 * order (ww_add_shard / ww_add_shard_header), then links them
 * (ww_link_shards): from there the model record stands for all N files,
 * each shard's tensors used in place in its own bytes. */
#include <stdlib.h>
#include <string.h>

#include "abi.h"

typedef struct ww_shards {
    uint32_t n;       /* views in use: [0] is shard 1 (a copy of m->gguf at link time) */
    uint32_t cap;
    bool linked;
    wisp_gguf *views; /* [cap] */
    uint8_t **bytes;  /* [cap] each shard's bytes, owned (NULL: a header only, the caller's) */
} ww_shards;

void ww_shards_free(ww_model *m) {
    ww_shards *s = m->shards;
    if (!s) return;
    for (uint32_t i = 0; i < s->n; i++) free(s->bytes[i]);
    free(s->views);
    free(s->bytes);
    free(s);
    m->shards = NULL;
}

/* Room for one more shard; its view (or NULL with m->err set). */
static wisp_gguf *next_view(ww_model *m) {
    ww_shards *s = m->shards;
    if (!s && !(s = m->shards = calloc(1, sizeof *s))) goto oom;
    if (s->linked) {
        wisp_fail(&m->err, WISP_ERR_ARG, "the shards are already linked");
        return NULL;
    }
    if (s->n == 0) s->n = 1; /* [0] is shard 1, filled in when linking */
    if (s->n >= s->cap) {
        uint32_t cap = s->cap ? 2 * s->cap : 4;
        wisp_gguf *v = realloc(s->views, cap * sizeof *v);
        if (v) s->views = v;
        uint8_t **b = realloc(s->bytes, cap * sizeof *b);
        if (b) s->bytes = b;
        if (!v || !b) goto oom;
        s->cap = cap;
    }
    s->bytes[s->n] = NULL;
    s->bytes[0] = NULL; /* shard 1's bytes are m->bytes */
    return &s->views[s->n];
oom:
    wisp_fail(&m->err, WISP_ERR_CAPACITY, "out of wasm memory for the shard table");
    return NULL;
}

/* Add the next shard from `bytes` (from ww_alloc), taking ownership of them
 * even on failure. 0, or -1 with the message in ww_error(m). */
API int32_t ww_add_shard(ww_model *m, uint8_t *bytes, size_t size) {
    wisp_gguf *v = next_view(m);
    if (!v) {
        free(bytes);
        return -1;
    }
    ww_shards *s = m->shards;
    if (wisp_gguf_open(v, bytes, size, &m->err)) {
        wisp_error_prefix(&m->err, "shard %u", s->n + 1);
        free(bytes);
        return -1;
    }
    s->bytes[s->n++] = bytes;
    return 0;
}

/* Add the next shard from only its header: prefix[0..n) of a file of
 * file_size bytes, good for planning (the caller keeps prefix alive as long
 * as the model record). */
API int32_t ww_add_shard_header(ww_model *m, const uint8_t *prefix, size_t n, size_t file_size) {
    wisp_gguf *v = next_view(m);
    if (!v) return -1;
    ww_shards *s = m->shards;
    if (ww_header_need(prefix, n) != 0 || file_size < n) {
        wisp_fail(&m->err, WISP_ERR_FORMAT, "shard %u: the GGUF header is not all in the %zu bytes given", s->n + 1, n);
        return -1;
    }
    if (wisp_gguf_open(v, prefix, file_size, &m->err)) {
        wisp_error_prefix(&m->err, "shard %u", s->n + 1);
        return -1;
    }
    s->bytes[s->n++] = NULL;
    return 0;
}

/* Check and link the shards (core/gguf_shards.c): 0, or -1 - k when shard
 * k + 1 is the one at fault (message in ww_error(m)). */
API int32_t ww_link_shards(ww_model *m) {
    ww_shards *s = m->shards;
    if (!s || s->n < 2) {
        wisp_fail(&m->err, WISP_ERR_ARG, "no shards were added");
        return -1;
    }
    s->views[0] = m->gguf;
    uint32_t bad = 0;
    if (wisp_gguf_link_shards(s->views, s->n, &bad, &m->err)) return -1 - (int32_t)bad;
    s->linked = true;
    m->gguf = s->views[0];
    return 0;
}
