/* Embeddings for the npm package (model.embed): the vector of the ids JS put
 * in m->ids, pooled by core's wisp_embed_tokens. The output buffer is the
 * model's own, made at the first call and kept until ww_close. */
#include <stdlib.h>

#include "abi.h"

API int32_t ww_n_embd(ww_model *m) { return m->ctx ? wisp_ctx_hparams(m->ctx)->dim : 0; }

/* The embedding (ww_n_embd floats) of m->ids[0..n): pooling 0 mean, 1 last;
 * L2-normalized when normalize. Empties the KV cache (an embedding evaluates
 * the text alone), so the next prompt is evaluated afresh. NULL with m->err
 * filled on failure. */
API const float *ww_embed(ww_model *m, int32_t n, int32_t pooling, int32_t normalize) {
    if (m->virtual_rows) { /* the text alone would silently leave the attached adapter out */
        wisp_fail(&m->err, WISP_ERR_UNSUPPORTED, "embeddings with a %s-tuning adapter attached: detach it first",
                  m->virtual_prefix ? "prefix" : "prompt");
        return NULL;
    }
    if (!m->embedding && !(m->embedding = malloc(sizeof(float) * (size_t)ww_n_embd(m)))) {
        wisp_fail(&m->err, WISP_ERR_CAPACITY, "out of wasm memory for an embedding of %d floats", ww_n_embd(m));
        return NULL;
    }
    wisp_status st = wisp_embed_tokens(m->ctx, m->ids, n, pooling ? WISP_POOL_LAST : WISP_POOL_MEAN, normalize != 0,
                                       m->embedding, &m->err);
    ww_reset(m);
    return st ? NULL : m->embedding;
}
