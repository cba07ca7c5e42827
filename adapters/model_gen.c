#include "model_gen.h"

#include <math.h>
#include <string.h>

#include "arch.h"
#include "gguf_write.h"
#include "half.h"
#include "types.h"

/* ---- shapes ------------------------------------------------------------------ */

/* From each model's published config.json. */
static const wisp_model_shape shapes[] = {
    {"smollm2-135m", "SmolLM2-135M", "llama", 576, 30, 9, 3, 1536, 49152, 8192, 100000.0f, 1e-5f, true, false, .head_dim = 0},
    {"tinyllama-1.1b", "TinyLlama-1.1B", "llama", 2048, 22, 32, 4, 5632, 32000, 2048, 10000.0f, 1e-5f, false, false, .head_dim = 0},
    {"qwen2.5-0.5b", "Qwen2.5-0.5B", "qwen2", 896, 24, 14, 2, 4864, 151936, 32768, 1000000.0f, 1e-6f, true, true, .head_dim = 0},
    {"llama-3.2-1b", "Llama-3.2-1B", "llama", 2048, 16, 32, 8, 8192, 128256, 131072, 500000.0f, 1e-5f, true, false,
     .rope_freqs = true},
    {"qwen3-0.6b", "Qwen3-0.6B", "qwen3", 1024, 28, 16, 8, 3072, 151936, 40960, 1000000.0f, 1e-6f, true, false,
     .head_dim = 128},
    {"gemma-3-270m", "Gemma-3-270M", "gemma3", 640, 18, 4, 1, 2048, 262144, 32768, 1000000.0f, 1e-6f, true, false,
     .head_dim = 256, .window = 512, .rope_base_swa = 10000.0f},
    {"gemma-3-1b", "Gemma-3-1B", "gemma3", 1152, 26, 4, 1, 6912, 262144, 32768, 1000000.0f, 1e-6f, true, false,
     .head_dim = 256, .window = 512, .rope_base_swa = 10000.0f},
    {"phi-3-mini", "Phi-3-mini-4k", "phi3", 3072, 32, 32, 32, 8192, 32064, 4096, 10000.0f, 1e-5f, false, false,
     .window = 2047},
};
#define N_SHAPES ((int)(sizeof shapes / sizeof shapes[0]))

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

static bool same_name(const char *a, const char *b) {
    while (*a && lower((unsigned char)*a) == lower((unsigned char)*b)) a++, b++;
    return !*a && !*b;
}

const wisp_model_shape *wisp_model_shapes(int *count) {
    *count = N_SHAPES;
    return shapes;
}

const wisp_model_shape *wisp_model_shape_find(const char *name) {
    for (int i = 0; name && i < N_SHAPES; i++)
        if (same_name(shapes[i].name, name)) return &shapes[i];
    return NULL;
}

/* ---- the tensor list ------------------------------------------------------------ */

enum role { R_WEIGHT, R_NORM, R_BIAS };

typedef struct gen_tensor {
    char name[48];
    int64_t cols, rows; /* ne[0], ne[1] (rows = 1 for vectors) */
    uint32_t n_dims;
    int32_t type;
    int32_t fell_back; /* the chosen type did not fit the row length */
    enum role role;
} gen_tensor;

static const wisp_arch_row *row_of(const wisp_model_shape *s) {
    const wisp_arch_row *r = wisp_arch_find(s->arch, strlen(s->arch));
    return r ? r : wisp_arch_at(0);
}

/* The layer tensors (WISP_LT bits) of the shape's architecture. */
static uint32_t layer_mask(const wisp_model_shape *s) {
    const wisp_arch_row *r = row_of(s);
    uint32_t biases = WISP_LT(BIAS_Q) | WISP_LT(BIAS_K) | WISP_LT(BIAS_V);
    return r->required | (s->qkv_bias ? r->optional & biases : 0);
}

static int popcount32(uint32_t m) {
    int n = 0;
    for (; m; m &= m - 1) n++;
    return n;
}

static int32_t head_of(const wisp_model_shape *s) { return s->head_dim ? s->head_dim : s->dim / s->n_heads; }
static int n_global(const wisp_model_shape *s) { return 2 + !s->tied_output + s->rope_freqs; }
static int per_layer(const wisp_model_shape *s) { return popcount32(layer_mask(s)); }

static uint64_t tensor_count(const wisp_model_shape *s) {
    return (uint64_t)n_global(s) + (uint64_t)per_layer(s) * (uint64_t)s->n_layers;
}

static void describe(const wisp_model_gen *g, uint64_t index, gen_tensor *t) {
    const wisp_model_shape *s = g->shape;
    int64_t dim = s->dim, head = head_of(s), q_dim = head * s->n_heads, kv = head * s->n_kv_heads, ffn = s->ffn_dim;
    memset(t, 0, sizeof *t);
    if (index < (uint64_t)n_global(s)) {
        static const char *const names[4] = {"token_embd.weight", "output_norm.weight", "output.weight",
                                             "rope_freqs.weight"};
        int which = (int)index;
        if (which >= 2 && s->tied_output) which++;
        wisp_format(t->name, sizeof t->name, "%s", names[which]);
        t->role = which == 0 || which == 2 ? R_WEIGHT : R_NORM; /* factors scatter around 1 like norms */
        t->cols = which == 3 ? head / 2 : dim;
        t->rows = t->role == R_NORM ? 1 : g->n_vocab;
    } else {
        uint64_t k = (index - (uint64_t)n_global(s)) % (uint64_t)per_layer(s);
        int layer = (int)((index - (uint64_t)n_global(s)) / (uint64_t)per_layer(s));
        uint32_t mask = layer_mask(s);
        int lt = 0;
        for (uint64_t seen = 0; lt < WISP_LT_COUNT; lt++)
            if ((mask >> lt & 1u) && seen++ == k) break;
        /* [input, output] of each layer tensor; vectors have output 1 */
        int64_t in = dim, out = 1;
        switch (lt) {
        case WISP_LT_Q: out = q_dim; break;
        case WISP_LT_K:
        case WISP_LT_V: out = kv; break;
        case WISP_LT_QKV: out = q_dim + 2 * kv; break;
        case WISP_LT_O: in = q_dim, out = dim; break;
        case WISP_LT_BIAS_Q: in = q_dim; break;
        case WISP_LT_BIAS_K:
        case WISP_LT_BIAS_V: in = kv; break;
        case WISP_LT_Q_NORM:
        case WISP_LT_K_NORM: in = head; break;
        case WISP_LT_GATE:
        case WISP_LT_UP: out = ffn; break;
        case WISP_LT_GATE_UP: out = 2 * ffn; break;
        case WISP_LT_DOWN: in = ffn, out = dim; break;
        default: break;
        }
        wisp_format(t->name, sizeof t->name, "blk.%d.%s", layer, wisp_layer_tensor_name(lt));
        t->role = wisp_layer_tensor_is_matrix(lt) ? R_WEIGHT
                  : (lt == WISP_LT_BIAS_Q || lt == WISP_LT_BIAS_K || lt == WISP_LT_BIAS_V) ? R_BIAS : R_NORM;
        t->cols = in;
        t->rows = out;
    }
    t->n_dims = t->rows == 1 && (t->role == R_NORM || t->role == R_BIAS) ? 1 : 2;
    /* the type a quantizer would give it, as `wisp quantize` decides */
    wisp_gguf_tensor as_read = {{t->name, strlen(t->name)}, t->n_dims, {t->cols, t->rows, 1, 1}, WISP_TYPE_F32, 0,
                                NULL, 0};
    int wanted;
    t->type = wisp_qtarget_tensor_type(&g->target, &as_read, s->n_layers, s->tied_output, &wanted);
    t->fell_back = t->type != wanted;
}

static wisp_gguf_out_tensor out_tensor(const gen_tensor *t) {
    wisp_gguf_out_tensor o = {t->name, t->n_dims, {t->cols, t->rows, 1, 1}, (uint32_t)t->type};
    return o;
}

int32_t wisp_model_gen_fallbacks(const wisp_model_gen *g) {
    int32_t n = 0;
    gen_tensor t;
    for (uint64_t i = 0; i < tensor_count(g->shape); i++) {
        describe(g, i, &t);
        n += t.fell_back;
    }
    return n;
}

/* ---- scratch ----------------------------------------------------------------------- */

#define CHUNK_BYTES ((size_t)8 << 20) /* quantized rows handed to the sink at a time */

static int64_t widest_row(const wisp_model_shape *s) {
    int64_t q = (int64_t)head_of(s) * s->n_heads, w = s->dim > s->ffn_dim ? s->dim : s->ffn_dim;
    return q > w ? q : w;
}

static size_t row_floats_bytes(const wisp_model_gen *g) {
    return ((size_t)widest_row(g->shape) * sizeof(float) + 63) & ~(size_t)63;
}

static int n_workers(const wisp_model_gen *g) {
    return g->threads.run && g->threads.n_threads > 1 ? g->threads.n_threads : 1;
}

size_t wisp_model_gen_scratch_bytes(const wisp_model_gen *g) {
    size_t widest = (size_t)widest_row(g->shape) * sizeof(float); /* an F32 row is the widest possible */
    return CHUNK_BYTES + widest + (size_t)n_workers(g) * row_floats_bytes(g);
}

/* ---- random values -------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Approximately standard normal: the sum of four uniform 16-bit draws
 * (Irwin-Hall), centred and scaled to unit variance. One 64-bit draw per
 * value keeps a billion-weight model quick to make. */
static float normalish(uint64_t *state) {
    uint64_t r = splitmix64(state);
    uint32_t s = (uint32_t)(r & 0xffff) + (uint32_t)((r >> 16) & 0xffff) + (uint32_t)((r >> 32) & 0xffff) +
                 (uint32_t)(r >> 48);
    return ((float)s * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
}

#define WEIGHT_STD 0.02f

static void fill_row(const wisp_model_gen *g, uint64_t tensor, int64_t row, enum role role, float *x, int64_t n) {
    uint64_t state = g->seed;
    uint64_t key = splitmix64(&state) ^ (tensor << 40) ^ (uint64_t)row;
    state = splitmix64(&key);
    /* norms scatter around 1 (as trained ones do); everything else around 0 */
    float base = role == R_NORM ? 1.0f : 0.0f;
    for (int64_t i = 0; i < n; i++) x[i] = base + WEIGHT_STD * normalish(&state);
}

/* ---- writing ------------------------------------------------------------------------- */

typedef struct fill_job {
    const wisp_model_gen *g;
    const gen_tensor *t;
    uint64_t tensor;
    int64_t row0, n_rows;
    size_t row_bytes;
    uint8_t *out;
    uint8_t *floats; /* per worker: row_floats_bytes each */
    size_t floats_stride;
} fill_job;

static void fill_rows(void *arg, int ith, int nth) {
    const fill_job *j = arg;
    float *x = (float *)(void *)(j->floats + (size_t)ith * j->floats_stride);
    wisp_quantize_fn quantize = wisp_type_info_of(j->t->type)->quantize;
    int64_t lo, hi;
    wisp_split(j->n_rows, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        fill_row(j->g, j->tensor, j->row0 + r, j->t->role, x, j->t->cols);
        quantize(x, j->out + (size_t)r * j->row_bytes, j->t->cols);
    }
}

static wisp_status write_metadata(const wisp_model_gen *g, wisp_sink *s, wisp_error *err);

wisp_status wisp_model_gen_write(const wisp_model_gen *g, wisp_sink *sink, void *scratch, size_t scratch_bytes,
                                 wisp_error *err) {
    const wisp_model_shape *sh = g->shape;
    if (!sh) return wisp_fail(err, WISP_ERR_ARG, "no model shape given");
    if (g->target.recipe == WISP_QRECIPE_KEEP) return wisp_fail(err, WISP_ERR_ARG, "a made model needs a weight type");
    if (g->n_vocab < 1) return wisp_fail(err, WISP_ERR_ARG, "the vocabulary is empty");
    if (scratch_bytes < wisp_model_gen_scratch_bytes(g))
        return wisp_fail(err, WISP_ERR_CAPACITY, "model generation needs %zu bytes of scratch, got %zu",
                         wisp_model_gen_scratch_bytes(g), scratch_bytes);
    const uint64_t n_tensors = tensor_count(sh);
    wisp_status st;
    if ((st = write_metadata(g, sink, err))) return st;
    gen_tensor t;
    uint64_t offset = 0;
    for (uint64_t i = 0; i < n_tensors; i++) {
        describe(g, i, &t);
        wisp_gguf_out_tensor o = out_tensor(&t);
        if ((st = wisp_gguf_write_tensor_info(sink, &o, offset, err))) return st;
        offset += wisp_gguf_tensor_padded_bytes(&o, WISP_GGUF_DEFAULT_ALIGNMENT);
    }
    if ((st = wisp_sink_pad(sink, WISP_GGUF_DEFAULT_ALIGNMENT, err))) return st;

    const uint64_t total = offset;
    uint64_t done = 0;
    uint8_t *chunk = scratch;
    size_t chunk_cap = wisp_model_gen_scratch_bytes(g) - (size_t)n_workers(g) * row_floats_bytes(g);
    fill_job j = {g, &t, 0, 0, 0, 0, chunk, chunk + chunk_cap, row_floats_bytes(g)};
    for (uint64_t i = 0; i < n_tensors; i++) {
        describe(g, i, &t);
        j.tensor = i;
        j.row_bytes = wisp_type_row_bytes(t.type, t.cols);
        int64_t per_chunk = (int64_t)(chunk_cap / j.row_bytes);
        for (j.row0 = 0; j.row0 < t.rows; j.row0 += j.n_rows) {
            j.n_rows = t.rows - j.row0 < per_chunk ? t.rows - j.row0 : per_chunk;
            if (g->threads.run && g->threads.n_threads > 1) g->threads.run(g->threads.pool, fill_rows, &j, g->threads.n_threads);
            else fill_rows(&j, 0, 1);
            size_t bytes = (size_t)j.n_rows * j.row_bytes;
            if ((st = wisp_sink_write(sink, chunk, bytes, err))) return st;
            done += bytes;
            if (g->progress) g->progress(g->progress_user, done, total);
        }
        uint64_t before = sink->written;
        if ((st = wisp_sink_pad(sink, WISP_GGUF_DEFAULT_ALIGNMENT, err))) return st;
        done += sink->written - before;
    }
    if (done != total) return wisp_fail(err, WISP_ERR_INTERNAL, "wrote %llu bytes of tensor data, planned %llu",
                                        (unsigned long long)done, (unsigned long long)total);
    return WISP_OK;
}

/* Pairs write_metadata writes itself: 14, plus the family's. */
static uint64_t own_kv(const wisp_model_shape *s) {
    return 14 + 2 * (s->head_dim != 0) + (s->window != 0) + (s->rope_base_swa != 0) + (s->attn_softcap != 0) +
           (s->final_softcap != 0);
}

static wisp_status write_metadata(const wisp_model_gen *g, wisp_sink *s, wisp_error *err) {
    const wisp_model_shape *sh = g->shape;
    char key[80];
    wisp_status st;
    if ((st = wisp_gguf_write_header(s, tensor_count(sh), own_kv(sh) + g->vocab_kv, err))) return st;
    if ((st = wisp_gguf_write_kv_str(s, "general.architecture", sh->arch, err))) return st;
    if ((st = wisp_gguf_write_kv_str(s, "general.name", g->name ? g->name : sh->label, err))) return st;
    if ((st = wisp_gguf_write_kv_u32(s, "general.file_type", wisp_qtarget_file_type(&g->target), err))) return st;
    if ((st = wisp_gguf_write_kv_u32(s, "general.quantization_version", 2, err))) return st;
    const struct { const char *suffix; uint32_t value; } ints[] = {
        {"context_length", (uint32_t)sh->ctx_len},
        {"embedding_length", (uint32_t)sh->dim},
        {"block_count", (uint32_t)sh->n_layers},
        {"feed_forward_length", (uint32_t)sh->ffn_dim},
        {"attention.head_count", (uint32_t)sh->n_heads},
        {"attention.head_count_kv", (uint32_t)sh->n_kv_heads},
        {"rope.dimension_count", (uint32_t)head_of(sh)},
        {"vocab_size", (uint32_t)g->n_vocab},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        wisp_format(key, sizeof key, "%s.%s", sh->arch, ints[i].suffix);
        if ((st = wisp_gguf_write_kv_u32(s, key, ints[i].value, err))) return st;
    }
    wisp_format(key, sizeof key, "%s.rope.freq_base", sh->arch);
    if ((st = wisp_gguf_write_kv_f32(s, key, sh->rope_base, err))) return st;
    wisp_format(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", sh->arch);
    if ((st = wisp_gguf_write_kv_f32(s, key, sh->rms_eps, err))) return st;
    const struct { const char *suffix; uint32_t value; } family_ints[] = {
        {"attention.key_length", (uint32_t)sh->head_dim},
        {"attention.value_length", (uint32_t)sh->head_dim},
        {"attention.sliding_window", (uint32_t)sh->window},
    };
    for (size_t i = 0; i < sizeof family_ints / sizeof family_ints[0]; i++) {
        if (!family_ints[i].value) continue;
        wisp_format(key, sizeof key, "%s.%s", sh->arch, family_ints[i].suffix);
        if ((st = wisp_gguf_write_kv_u32(s, key, family_ints[i].value, err))) return st;
    }
    const struct { const char *suffix; float value; } family_floats[] = {
        {"rope.freq_base_swa", sh->rope_base_swa},
        {"attn_logit_softcapping", sh->attn_softcap},
        {"final_logit_softcapping", sh->final_softcap},
    };
    for (size_t i = 0; i < sizeof family_floats / sizeof family_floats[0]; i++) {
        if (family_floats[i].value == 0.0f) continue;
        wisp_format(key, sizeof key, "%s.%s", sh->arch, family_floats[i].suffix);
        if ((st = wisp_gguf_write_kv_f32(s, key, family_floats[i].value, err))) return st;
    }
    uint64_t before = s->written;
    if ((st = g->write_vocab(g->vocab_user, s, err))) return st;
    if (s->written == before && g->vocab_kv)
        return wisp_fail(err, WISP_ERR_INTERNAL, "the vocabulary writer wrote nothing");
    return WISP_OK;
}

/* ---- synthetic vocabulary ------------------------------------------------------------ */

#define SPECIALS 3   /* <unk> <s> </s> */
#define BYTE_TOKENS 256

typedef struct synth_walk {
    char buf[32];
} synth_walk;

/* Token i: the specials, then <0x00>..<0xFF>, then "▁" + a bijective
 * base-26 word (a, b, ..., z, aa, ab, ...), all distinct. */
static wisp_str synth_token(void *user, uint64_t i) {
    synth_walk *w = user;
    static const char *const special[SPECIALS] = {"<unk>", "<s>", "</s>"};
    size_t n = 0;
    if (i < SPECIALS) {
        n = wisp_format(w->buf, sizeof w->buf, "%s", special[i]);
    } else if (i < SPECIALS + BYTE_TOKENS) {
        static const char hex[] = "0123456789ABCDEF";
        unsigned b = (unsigned)(i - SPECIALS);
        memcpy(w->buf, "<0x", 3);
        w->buf[3] = hex[b >> 4];
        w->buf[4] = hex[b & 15];
        w->buf[5] = '>';
        n = 6;
    } else {
        char letters[16];
        int k = 0;
        for (uint64_t v = i - SPECIALS - BYTE_TOKENS + 1; v > 0 && k < 16; v = (v - 1) / 26)
            letters[k++] = (char)('a' + (v - 1) % 26);
        memcpy(w->buf, "\xe2\x96\x81", 3);
        n = 3;
        while (k > 0) w->buf[n++] = letters[--k];
    }
    wisp_str s = {w->buf, n};
    return s;
}

wisp_status wisp_synthetic_vocab_write(void *user, wisp_sink *s, wisp_error *err) {
    const int32_t n = *(const int32_t *)user;
    wisp_status st;
    if (n < SPECIALS + BYTE_TOKENS)
        return wisp_fail(err, WISP_ERR_ARG, "a synthetic vocabulary needs at least %d tokens, not %d",
                         SPECIALS + BYTE_TOKENS, n);
    if ((st = wisp_gguf_write_kv_str(s, "tokenizer.ggml.model", "llama", err))) return st;
    synth_walk w;
    if ((st = wisp_gguf_write_kv_str_array(s, "tokenizer.ggml.tokens", (uint64_t)n, synth_token, &w, err))) return st;
    /* scores: later pieces rank lower; types: unknown, control x2, byte x256, normal */
    if ((st = wisp_gguf_write_kv_array_begin(s, "tokenizer.ggml.scores", WISP_GGUF_F32, (uint64_t)n, err))) return st;
    for (int32_t i = 0; i < n; i++) {
        uint8_t v[4];
        wisp_store_f32(v, i < SPECIALS + BYTE_TOKENS ? 0.0f : -(float)(i - SPECIALS - BYTE_TOKENS));
        if ((st = wisp_sink_write(s, v, 4, err))) return st;
    }
    if ((st = wisp_gguf_write_kv_array_begin(s, "tokenizer.ggml.token_type", WISP_GGUF_I32, (uint64_t)n, err)))
        return st;
    for (int32_t i = 0; i < n; i++) {
        uint8_t v[4];
        wisp_store_u32(v, i == 0 ? 2u : i < SPECIALS ? 3u : i < SPECIALS + BYTE_TOKENS ? 6u : 1u);
        if ((st = wisp_sink_write(s, v, 4, err))) return st;
    }
    if ((st = wisp_gguf_write_kv_u32(s, "tokenizer.ggml.unknown_token_id", 0, err))) return st;
    if ((st = wisp_gguf_write_kv_u32(s, "tokenizer.ggml.bos_token_id", 1, err))) return st;
    return wisp_gguf_write_kv_u32(s, "tokenizer.ggml.eos_token_id", 2, err);
}

static bool is_tokenizer_key(wisp_str k) { return k.len > 10 && memcmp(k.ptr, "tokenizer.", 10) == 0; }

uint64_t wisp_gguf_vocab_kv_count(const wisp_gguf *g) {
    uint64_t n = 0;
    size_t cur = 0;
    wisp_gguf_kv kv;
    while (wisp_gguf_next_kv(g, &cur, &kv)) n += is_tokenizer_key(kv.key);
    return n;
}

wisp_status wisp_gguf_vocab_copy_write(void *user, wisp_sink *s, wisp_error *err) {
    const wisp_gguf *g = user;
    size_t cur = 0;
    wisp_gguf_kv kv;
    while (wisp_gguf_next_kv(g, &cur, &kv)) {
        if (!is_tokenizer_key(kv.key)) continue;
        wisp_status st = wisp_gguf_write_kv_copy(s, &kv, err);
        if (st) return st;
    }
    return WISP_OK;
}
