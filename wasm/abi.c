/* The thin C ABI the npm package (web/src/engine.mjs) calls through
 * Emscripten. It is a platform layer like cli/: it owns the model bytes, one
 * arena sized by the planner, and a few fixed buffers JS exchanges data
 * through, all allocated at open/init. Generation and training then run on
 * that memory only, so wasm memory grows while a model loads and never while
 * it generates or trains (web/test checks HEAP8.buffer.byteLength).
 *
 * Memory a JS caller must know about:
 *   - model bytes: JS copies the GGUF once into ww_alloc'ed wasm memory (a JS
 *     ArrayBuffer cannot be read by wasm in place); ww_open takes ownership.
 *   - the I/O buffer (ww_io): prompts in, token pieces and text out.
 *   - the id buffer (ww_ids): token ids in and out, n_ctx entries.
 *   - records (configuration in, plan figures out, ...): the structs of
 *     abi_structs.h, in blocks JS allocates once; JS finds their fields by
 *     name in the layout table of abi_layout.c.
 * Calls return 0 / a count on success and a negative value (or NULL) on
 * failure, with the message in ww_error(). Sizes cross as uint32 (wasm32). */
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "simd.h"
#include "tokenizer.h"

/* Errors of calls that have no model yet (open, plan from a header). */
static wisp_error open_error;

enum { WW_END = -2, WW_FULL = -3 }; /* ww_next: end of generation, context full */

enum { WW_ALIGN = 64 };

API void *ww_alloc(size_t n) {
    /* 64-byte alignment: GGUF data is aligned relative to the file start, and
     * the arena wants cache-line carving. */
    size_t bytes = (n + WW_ALIGN - 1) & ~(size_t)(WW_ALIGN - 1);
    if (bytes < n || bytes + WW_ALIGN < bytes) return NULL;
    /* Emscripten 3.1.6's emmalloc, when no free block fits, takes from sbrk
     * only the size asked for plus its headers, forgetting the alignment
     * (fixed upstream later). When the new block's start is not 64-aligned
     * the aligned allocation then does not fit it, emmalloc asks sbrk for the
     * whole size again, and past 2 GiB that fails: a 2.2 GB model would not
     * load although 4 GiB is enough (it depended on where the heap top was).
     * So a free block with room for the alignment is made first: a plain
     * allocation (8-byte alignment, which any new block satisfies) of the
     * size plus the alignment, given back at once; the aligned allocation
     * then fits it. (volatile: compilers drop a malloc whose block is only
     * freed.) */
    void *volatile room = malloc(bytes + WW_ALIGN);
    if (!room) return NULL;
    free(room);
    return aligned_alloc(WW_ALIGN, bytes);
}

API void ww_free(void *p) { free(p); }

API const char *ww_error(ww_model *m) { return m ? m->err.message : open_error.message; }
/* The status of the last error as a short stable code for JS (WispError.code). */
API const char *ww_error_code(ww_model *m) {
    static const char *const codes[] = {"ok", "arg", "format", "unsupported", "shape", "not_found",
                                        "arena", "capacity", "numeric", "io", "aborted", "internal"};
    unsigned s = (unsigned)(m ? m->err.status : open_error.status);
    return s < sizeof codes / sizeof codes[0] ? codes[s] : "internal";
}

const wisp_kernels *ww_pick_kernels(const char *name, wisp_error *err) {
    wisp_cpu_features cpu;
    memset(&cpu, 0, sizeof cpu);
#ifdef __wasm_simd128__
    cpu.wasm_simd128 = true;
#endif
    const wisp_kernels *k = NULL;
    if (wisp_simd_select(&cpu, name, &k, err)) return NULL;
    return k;
}

/* ---- the GGUF header, for planning before the whole file is read ---- */

typedef struct walker {
    const uint8_t *b;
    size_t n, pos, need;
} walker;

static bool take(walker *w, uint64_t k) {
    if (k > (uint64_t)(w->n - w->pos)) {
        uint64_t want = (uint64_t)w->pos + k;
        w->need = want > (uint64_t)SIZE_MAX ? SIZE_MAX : (size_t)want;
        return false;
    }
    w->pos += (size_t)k;
    return true;
}

static bool read_u64(walker *w, uint64_t *v) {
    if (!take(w, 8)) return false;
    memcpy(v, w->b + w->pos - 8, 8);
    return true;
}

static bool read_u32(walker *w, uint32_t *v) {
    if (!take(w, 4)) return false;
    memcpy(v, w->b + w->pos - 4, 4);
    return true;
}

static bool skip_string(walker *w) {
    uint64_t len;
    return read_u64(w, &len) && take(w, len);
}

/* Header lengths beyond this are malformed, not large: they could not fit
 * in wasm memory next to the weights anyway. */
#define HEADER_MAX ((uint64_t)1 << 30)

/* Returns the header's length when prefix[0..n) holds it all, 0 with
 * *need set when more bytes are needed, and 0 with need = 0 (message in
 * open_error) when the header is malformed. Walks the same grammar as
 * core/gguf.c but stops at the end of the tensor infos; core then parses
 * those bytes for real. */
static size_t header_walk(const uint8_t *prefix, size_t n, size_t *need) {
    walker w = {prefix, n, 0, 0};
    uint32_t version;
    uint64_t n_tensors, n_kv;
    *need = 0;
    if (n >= 4 && memcmp(prefix, "GGUF", 4) != 0) {
        wisp_fail(&open_error, WISP_ERR_FORMAT, "not a GGUF file (the first bytes are not 'GGUF')");
        return 0;
    }
    if (!take(&w, 4) || !read_u32(&w, &version) || !read_u64(&w, &n_tensors) || !read_u64(&w, &n_kv)) goto more;
    if (version < 2 || version > 3 || n_tensors > HEADER_MAX / 24 || n_kv > HEADER_MAX / 12) {
        wisp_fail(&open_error, WISP_ERR_FORMAT, "GGUF header: version %u with %llu tensors and %llu metadata keys is not readable",
                  version, (unsigned long long)n_tensors, (unsigned long long)n_kv);
        return 0;
    }
    for (uint64_t i = 0; i < n_kv; i++) {
        uint32_t type, elem;
        uint64_t count = 1;
        if (!skip_string(&w) || !read_u32(&w, &type)) goto more;
        elem = type;
        if (type == WISP_GGUF_ARRAY && (!read_u32(&w, &elem) || !read_u64(&w, &count))) goto more;
        if (elem == WISP_GGUF_STRING) {
            for (uint64_t j = 0; j < count; j++)
                if (!skip_string(&w)) goto more;
        } else {
            size_t es = wisp_gguf_vtype_size(elem);
            if (es == 0 || count > HEADER_MAX / es) {
                wisp_fail(&open_error, WISP_ERR_FORMAT, "GGUF header: metadata %llu has an unreadable type %u",
                          (unsigned long long)i, elem);
                return 0;
            }
            if (!take(&w, count * es)) goto more;
        }
        if (w.pos > HEADER_MAX) break;
    }
    for (uint64_t i = 0; i < n_tensors && w.pos <= HEADER_MAX; i++) {
        uint32_t n_dims, type;
        uint64_t offset;
        if (!skip_string(&w) || !read_u32(&w, &n_dims)) goto more;
        if (n_dims > WISP_GGUF_MAX_DIMS) {
            wisp_fail(&open_error, WISP_ERR_FORMAT, "GGUF header: tensor %llu has %u dimensions (at most %d)",
                      (unsigned long long)i, n_dims, WISP_GGUF_MAX_DIMS);
            return 0;
        }
        if (!take(&w, 8 * (uint64_t)n_dims) || !read_u32(&w, &type) || !read_u64(&w, &offset)) goto more;
    }
    if (w.pos > HEADER_MAX) {
        wisp_fail(&open_error, WISP_ERR_FORMAT, "GGUF header: longer than %llu bytes", (unsigned long long)HEADER_MAX);
        return 0;
    }
    return w.pos;
more:
    if (w.need > HEADER_MAX) {
        wisp_fail(&open_error, WISP_ERR_FORMAT, "GGUF header: a length field asks for %zu bytes", w.need);
        *need = 0;
        return 0;
    }
    *need = w.need;
    return 0;
}

/* How many bytes of a GGUF's start planning needs: 0 when prefix[0..n)
 * already holds the header, more than n when it does not, -1 if malformed. */
API int32_t ww_header_need(const uint8_t *prefix, size_t n) {
    size_t need;
    if (header_walk(prefix, n, &need)) return 0;
    return need ? (int32_t)need : -1;
}

/* ---- opening, planning, initialising ---- */

static ww_model *model_new(void) {
    ww_model *m = calloc(1, sizeof *m);
    if (!m) wisp_fail(&open_error, WISP_ERR_CAPACITY, "out of wasm memory for the model record");
    else m->pending = -1;
    return m;
}

/* Parse the GGUF in `bytes` (from ww_alloc), taking ownership of them even
 * on failure. */
API ww_model *ww_open(uint8_t *bytes, size_t size) {
    ww_model *m = model_new();
    if (!m) {
        free(bytes);
        return NULL;
    }
    m->bytes = bytes;
    m->size = size;
    if (wisp_gguf_open(&m->gguf, bytes, size, &open_error)) {
        free(bytes);
        free(m);
        return NULL;
    }
    return m;
}

/* A model record over only the header of a file of `file_size` bytes, good
 * for planning and metadata but not for init. header_walk proved the header
 * lies within prefix[0..n), and the GGUF reader reads nothing past it. */
API ww_model *ww_open_header(const uint8_t *prefix, size_t n, size_t file_size) {
    size_t need;
    size_t len = header_walk(prefix, n, &need);
    if (!len) {
        if (need) wisp_fail(&open_error, WISP_ERR_FORMAT, "GGUF header: truncated (%zu bytes given, %zu needed)", n, need);
        return NULL;
    }
    if (file_size < len) {
        wisp_fail(&open_error, WISP_ERR_FORMAT, "GGUF header of %zu bytes is longer than the file (%zu bytes)", len,
                  file_size);
        return NULL;
    }
    ww_model *m = model_new();
    if (!m) return NULL;
    if (wisp_gguf_open(&m->gguf, prefix, file_size, &open_error)) {
        free(m);
        return NULL;
    }
    return m;
}

API void ww_close(ww_model *m) {
    if (!m) return;
    ww_threads_stop(m);
    ww_guide_clear(m);
    free(m->arena);
    free(m->cached);
    free(m->ids);
    free(m->io);
    free(m->embedding);
    ww_shards_free(m);
    free(m->bytes);
    free(m);
}

static void config_from(wisp_config *c, const ww_config_in *f, const wisp_kernels *k, wisp_threads threads) {
    *c = wisp_config_default();
    c->n_ctx = f->n_ctx;
    c->n_batch = f->n_batch;
    c->kv_type = f->kv_f32 ? WISP_TYPE_F32 : WISP_TYPE_F16;
    c->max_text_bytes = f->max_text_bytes > 0 ? (uint32_t)f->max_text_bytes : 0;
    c->max_adapters = f->max_adapters;
    c->max_lora_rank = f->max_lora_rank;
    c->kernels = k;
    c->threads = threads;
}

void ww_plan_out(const ww_model *m, const wisp_memory_plan *p, ww_plan_figures *out) {
    out->total = (double)p->total;
    for (int i = 0; i < WISP_PART_COUNT; i++) out->part[i] = (double)p->part[i];
    out->weights = (double)p->weight_bytes;
    out->file_bytes = (double)wisp_gguf_total_bytes(&m->gguf); /* every shard's */
    out->n_ctx = p->cfg.n_ctx;
    out->n_batch = p->cfg.n_batch;
    out->kv_f32 = p->cfg.kv_type == WISP_TYPE_F32;
    out->max_text_bytes = p->cfg.max_text_bytes;
    out->max_adapters = p->cfg.max_adapters;
    out->max_lora_rank = p->cfg.max_lora_rank;
    out->n_vocab = p->hp.n_vocab;
    out->dim = p->hp.dim;
    out->n_layers = p->hp.n_layers;
    out->n_heads = p->hp.n_heads;
    out->n_kv_heads = p->hp.n_kv_heads;
    out->head_dim = p->hp.head_dim;
    out->ffn_dim = p->hp.ffn_dim;
    out->ctx_train = p->hp.ctx_train;
}

/* The plan for this configuration into *out, with the kernel
 * table `kernels` names (as ww_init); NULL: the loaded model's, or before
 * init the best available. The level matters: attention's scratch depends
 * on it (core/attention.h). */
API int32_t ww_plan(ww_model *m, const ww_config_in *cfg, const char *kernels, ww_plan_figures *out) {
    const wisp_kernels *k = kernels || !m->kernels ? ww_pick_kernels(kernels, &m->err) : m->kernels;
    if (!k) return -1;
    wisp_config c;
    config_from(&c, cfg, k, ww_threads(m, cfg->threads));
    wisp_memory_plan p;
    if (wisp_plan(&m->gguf, &c, &p, &m->err)) return -1;
    ww_plan_out(m, &p, out);
    return 0;
}

/* Text in a GGUF string metadata key (NUL-terminated, truncated to cap-1)
 * into buf; its length, or -1 when absent. */
API int32_t ww_meta_str(ww_model *m, const char *key, char *buf, size_t cap) {
    wisp_str s;
    if (!wisp_gguf_get_str(&m->gguf, key, &s)) return -1;
    size_t n = s.len < cap ? (size_t)s.len : cap - 1;
    memcpy(buf, s.ptr, n);
    buf[n] = 0;
    return (int32_t)s.len;
}

/* An integer GGUF metadata key (the first element of an array), or -1 when
 * absent or not a number. */
API double ww_meta_int(ww_model *m, const char *key) {
    wisp_gguf_kv kv;
    int64_t v;
    return wisp_gguf_find_kv(&m->gguf, key, &kv) && wisp_gguf_kv_int(&kv, 0, &v) ? (double)v : -1;
}

/* Allocate the planned arena and the exchange buffers, then initialise.
 * `kernels` names a kernel table ("scalar", "wasm-simd128"; NULL or "auto":
 * the best). This is where wasm memory grows; nothing allocates after it. */
API int32_t ww_init(ww_model *m, const ww_config_in *cfg, const char *kernels) {
    if (!m->bytes) return wisp_fail(&m->err, WISP_ERR_ARG, "this model record holds only a header (plan only)"), -1;
    if (m->ctx) return wisp_fail(&m->err, WISP_ERR_ARG, "the model is already initialised"), -1;
    if (!(m->kernels = ww_pick_kernels(kernels, &m->err))) return -1;
    if (ww_threads_start(m, cfg->threads)) return -1;
    wisp_config c;
    config_from(&c, cfg, m->kernels, ww_threads(m, 1));
    if (wisp_plan(&m->gguf, &c, &m->plan, &m->err)) return -1;
    size_t n = (size_t)m->plan.cfg.n_ctx;
    m->io_cap = (size_t)m->plan.cfg.max_text_bytes + 1 > 4096 ? (size_t)m->plan.cfg.max_text_bytes + 1 : 4096;
    m->arena = ww_alloc(m->plan.total);
    m->cached = malloc(n * sizeof(int32_t));
    m->ids = malloc(n * sizeof(int32_t));
    m->io = malloc(m->io_cap);
    if (!m->arena || !m->cached || !m->ids || !m->io) {
        wisp_fail(&m->err, WISP_ERR_CAPACITY, "out of wasm memory: the plan needs an arena of %zu bytes", m->plan.total);
        goto fail;
    }
    if (wisp_init(&m->ctx, &m->gguf, &c, m->arena, m->plan.total, &m->err)) goto fail;
    wisp_sampler_params sp = wisp_sampler_defaults();
    wisp_sampler_init(&m->sampler, &sp);
    return 0;
fail:
    free(m->arena);
    free(m->cached);
    free(m->ids);
    free(m->io);
    m->arena = m->cached = m->ids = NULL;
    m->io = NULL;
    m->ctx = NULL;
    return -1;
}

API ww_plan_figures *ww_plan_of(ww_model *m, ww_plan_figures *out) {
    ww_plan_out(m, &m->plan, out);
    return out;
}

API const char *ww_kernels_name(ww_model *m) { return m->ctx ? wisp_ctx_kernels_name(m->ctx) : ""; }
API char *ww_io(ww_model *m) { return m->io; }
API uint32_t ww_io_cap(ww_model *m) { return (uint32_t)m->io_cap; }
API int32_t *ww_ids(ww_model *m) { return m->ids; }
/* Positions left for tokens: a prompt-tuning adapter's virtual tokens take the first ones. */
API int32_t ww_n_ctx(ww_model *m) { return m->ctx ? wisp_ctx_config(m->ctx)->n_ctx - m->n_virtual : 0; }
API int32_t ww_n_cached(ww_model *m) { return m->n_cached; }
API int32_t ww_bos(ww_model *m) { return wisp_tokenizer_bos(wisp_ctx_tokenizer(m->ctx)); }
API int32_t ww_eos(ww_model *m) { return wisp_tokenizer_eos(wisp_ctx_tokenizer(m->ctx)); }
API int32_t ww_add_bos_default(ww_model *m) { return wisp_tokenizer_add_bos_default(wisp_ctx_tokenizer(m->ctx)); }

/* ---- text ---- */

/* Tokenize io[0..len) into ids; the count, or -1. */
API int32_t ww_tokenize(ww_model *m, uint32_t len, int32_t add_bos, int32_t parse_special) {
    unsigned flags = (add_bos ? WISP_TOKENIZE_ADD_BOS : 0) | (parse_special ? WISP_TOKENIZE_PARSE_SPECIAL : 0);
    size_t cap = (size_t)wisp_ctx_config(m->ctx)->n_ctx, n = 0;
    wisp_status s = wisp_tokenize_text(m->ctx, m->io, len, flags, m->ids, cap, &n, &m->err);
    if (s == WISP_ERR_CAPACITY && n > cap)
        wisp_fail(&m->err, s, "the text is %zu tokens but the context holds %zu (load the model with a larger ctx)", n, cap);
    return s ? -1 : (int32_t)n;
}

/* The bytes of ids[0..n) into io (truncated to io_cap); the full length.
 * With strip_prefix, the space SPM put before the text is removed, so this
 * inverts ww_tokenize. */
API uint32_t ww_detokenize(ww_model *m, int32_t n, int32_t special, int32_t strip_prefix) {
    unsigned flags = (special ? WISP_DETOKENIZE_SPECIAL : 0) | (strip_prefix ? WISP_DETOKENIZE_STRIP_PREFIX : 0);
    return (uint32_t)wisp_detokenize(wisp_ctx_tokenizer(m->ctx), m->ids, (size_t)n, flags, m->io, m->io_cap);
}

/* The bytes of one token into io; their count. */
API uint32_t ww_token_piece(ww_model *m, int32_t id) {
    size_t len = wisp_token_piece(wisp_ctx_tokenizer(m->ctx), id, m->io, m->io_cap);
    return (uint32_t)(len < m->io_cap ? len : m->io_cap);
}

/* ---- running the model ---- */

API void ww_sampler(ww_model *m, float temperature, int32_t top_k, float top_p, float min_p, float repeat_penalty,
                    int32_t repeat_last_n, uint32_t seed_lo, uint32_t seed_hi) {
    wisp_sampler_params p = {temperature, top_k, top_p, min_p, repeat_penalty, repeat_last_n,
                             (uint64_t)seed_hi << 32 | seed_lo};
    wisp_sampler_init(&m->sampler, &p);
}

/* Forget the cache (after anything that changes what the model computes,
 * such as attaching an adapter). */
API void ww_reset(ww_model *m) {
    wisp_rewind(m->ctx, 0);
    m->n_cached = 0;
    m->pending = -1;
    m->virtual_cached = false;
}

/* With a prompt-tuning adapter attached and nothing cached: its virtual
 * tokens first, at positions 0..n_virtual-1 (a prefix-tuning adapter's keys
 * and values go straight into the cache there). 0 or -1. */
static int32_t eval_virtual(ww_model *m) {
    if (!m->virtual_rows || m->virtual_cached) return 0;
    wisp_rewind(m->ctx, 0);
    m->n_cached = 0;
    if (m->virtual_prefix ? wisp_eval_kv_prefix(m->ctx, m->virtual_rows, m->n_virtual, &m->err)
                          : wisp_eval_embeddings(m->ctx, m->virtual_rows, m->n_virtual, &m->err)) {
        ww_reset(m);
        return -1;
    }
    m->virtual_cached = true;
    return 0;
}

/* Make the cache hold exactly the prompt ids[0..n) and its logits ready:
 * positions shared with what is cached are kept, the rest is evaluated (at
 * least the last token, whose logits sampling needs). Returns the number of
 * tokens evaluated, or -1. */
API int32_t ww_prompt(ww_model *m, int32_t n) {
    m->pending = -1;
    if (n <= 0) return wisp_fail(&m->err, WISP_ERR_ARG, "the prompt is empty (and no BOS token was added)"), -1;
    int32_t keep = 0, v = m->virtual_cached ? m->n_virtual : 0; /* cache positions before the tokens */
    while (keep < m->n_cached && keep < n - 1 && m->cached[keep] == m->ids[keep]) keep++;
    wisp_rewind(m->ctx, v + keep);
    if (wisp_n_past(m->ctx) < v + keep) keep = wisp_n_past(m->ctx) - v; /* a sliding window's ring forgot it */
    if (keep < 0 || (m->virtual_rows && !m->virtual_cached)) ww_reset(m), keep = 0; /* the virtual tokens go first */
    m->n_cached = keep;
    if (eval_virtual(m)) return -1;
    if (wisp_eval(m->ctx, m->ids + keep, n - keep, &m->err)) {
        ww_reset(m);
        return -1;
    }
    memcpy(m->cached + keep, m->ids + keep, (size_t)(n - keep) * sizeof(int32_t));
    m->n_cached = n;
    return n - keep;
}

/* One generation step: evaluate the token returned last time (if any), then
 * sample the next one. Returns its id, WW_END at an end-of-generation token,
 * WW_FULL when the context has no room for the previous token, or -1. */
API int32_t ww_next(ww_model *m) {
    if (m->pending >= 0) {
        int32_t t = m->pending;
        m->pending = -1;
        if (m->n_cached >= ww_n_ctx(m)) return WW_FULL;
        if (wisp_eval(m->ctx, &t, 1, &m->err)) return -1;
        m->cached[m->n_cached++] = t;
    }
    if (m->n_cached == 0) return wisp_fail(&m->err, WISP_ERR_ARG, "no prompt was evaluated"), -1;
    int32_t next = wisp_sample(m->ctx, &m->sampler, m->cached, (size_t)m->n_cached);
    if (next < 0 && m->sampler.guide) return ww_guide_finished(m) ? WW_END : -1;
    if (next < 0) return wisp_fail(&m->err, WISP_ERR_NUMERIC, "no logits to sample from (the last step kept none)"), -1;
    if (wisp_tokenizer_is_eog(wisp_ctx_tokenizer(m->ctx), next)) return WW_END;
    m->pending = next;
    return next;
}

/* Evaluate ids[0..n) after the cache (low level); 0 or -1. */
API int32_t ww_eval(ww_model *m, int32_t n) {
    m->pending = -1;
    if (n > 0 && n > ww_n_ctx(m) - m->n_cached) {
        wisp_fail(&m->err, WISP_ERR_CAPACITY, "context full: %d cached + %d new tokens exceed n_ctx %d%s", m->n_cached, n,
                  ww_n_ctx(m), !m->n_virtual ? "" : m->virtual_prefix ? " (after the prefix-tuning adapter's positions)"
                                                       : " (after the prompt-tuning adapter's virtual tokens)");
        return -1;
    }
    if (m->n_cached == 0 && eval_virtual(m)) return -1;
    if (wisp_eval(m->ctx, m->ids, n, &m->err)) return -1;
    memcpy(m->cached + m->n_cached, m->ids, (size_t)n * sizeof(int32_t));
    m->n_cached += n;
    return 0;
}

/* The last step's logits (n_vocab floats), or NULL. */
API const float *ww_logits(ww_model *m) { return wisp_logits(m->ctx, -1); }
API int32_t ww_n_vocab(ww_model *m) { return wisp_ctx_hparams(m->ctx)->n_vocab; }
