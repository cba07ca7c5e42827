#include "gguf_extras.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"

/* Write through a counting sink first, then into a buffer of that size. */
typedef wisp_status (*write_fn)(const void *user, wisp_sink *s, wisp_error *err);

static unsigned char *write_twice(write_fn fn, const void *user, size_t *size, wisp_error *err) {
    wisp_sink count = wisp_count_sink_make();
    if (fn(user, &count, err)) return NULL;
    size_t n = (size_t)count.written;
    unsigned char *bytes = aligned_alloc(64, (n + 63) & ~(size_t)63);
    if (!bytes) return NULL;
    wisp_mem_sink m;
    wisp_sink s = wisp_mem_sink_make(&m, bytes, n);
    if (fn(user, &s, err)) {
        free(bytes);
        return NULL;
    }
    *size = n;
    return bytes;
}

typedef struct tiny_job {
    wisp_model_gen g;
    void *scratch;
    size_t scratch_bytes;
} tiny_job;

static wisp_status write_tiny(const void *user, wisp_sink *s, wisp_error *err) {
    const tiny_job *j = user;
    return wisp_model_gen_write(&j->g, s, j->scratch, j->scratch_bytes, err);
}

unsigned char *gguf_tiny_model(const wisp_model_shape *shape, size_t *size, wisp_error *err) {
    int32_t vocab = shape->n_vocab;
    tiny_job j;
    memset(&j, 0, sizeof j);
    j.g.shape = shape;
    wisp_qtarget_parse("f32", &j.g.target);
    j.g.seed = 3;
    j.g.n_vocab = vocab;
    j.g.vocab_kv = WISP_SYNTHETIC_VOCAB_KV;
    j.g.write_vocab = wisp_synthetic_vocab_write;
    j.g.vocab_user = &vocab;
    j.scratch_bytes = wisp_model_gen_scratch_bytes(&j.g);
    j.scratch = malloc(j.scratch_bytes);
    unsigned char *bytes = j.scratch ? write_twice(write_tiny, &j, size, err) : NULL;
    free(j.scratch);
    return bytes;
}

typedef struct extras_job {
    const wisp_gguf *g;
    const gguf_extra *x;
    int n;
} extras_job;

static wisp_status write_key(wisp_sink *s, const gguf_extra *x, wisp_error *err) {
    switch (x->vtype) {
    case WISP_GGUF_U32: return wisp_gguf_write_kv_u32(s, x->key, (uint32_t)x->number, err);
    case WISP_GGUF_F32: return wisp_gguf_write_kv_f32(s, x->key, (float)x->number, err);
    case WISP_GGUF_BOOL: return wisp_gguf_write_kv_bool(s, x->key, x->number != 0, err);
    default: return wisp_gguf_write_kv_str(s, x->key, x->str, err);
    }
}

static wisp_status write_extras(const void *user, wisp_sink *s, wisp_error *err) {
    const extras_job *j = user;
    uint64_t n_t = j->g->n_tensors, n_kv = j->g->n_kv;
    for (int i = 0; i < j->n; i++) {
        n_t += j->x[i].tensor != NULL;
        n_kv += j->x[i].key != NULL;
    }
    wisp_status st = wisp_gguf_write_header(s, n_t, n_kv, err);
    size_t cur = 0;
    wisp_gguf_kv kv;
    while (!st && wisp_gguf_next_kv(j->g, &cur, &kv)) st = wisp_gguf_write_kv_copy(s, &kv, err);
    for (int i = 0; i < j->n && !st; i++)
        if (j->x[i].key) st = write_key(s, &j->x[i], err);
    if (st) return st;

    wisp_gguf_out_tensor *ts = calloc((size_t)n_t, sizeof *ts);
    char (*names)[96] = calloc((size_t)n_t, sizeof *names);
    const void **data = calloc((size_t)n_t, sizeof *data);
    float **ones = calloc((size_t)j->n + 1, sizeof *ones);
    if (!ts || !names || !data || !ones) st = wisp_fail(err, WISP_ERR_ARENA, "out of memory");
    wisp_gguf_tensor t;
    cur = 0;
    uint64_t k = 0;
    while (!st && wisp_gguf_next_tensor(j->g, &cur, &t)) {
        memcpy(names[k], t.name.ptr, t.name.len < 95 ? t.name.len : 95);
        ts[k] = (wisp_gguf_out_tensor){names[k], t.n_dims, {t.ne[0], t.ne[1], t.ne[2], t.ne[3]}, t.type};
        data[k++] = t.data;
    }
    for (int i = 0; i < j->n && !st; i++) {
        const gguf_extra *x = &j->x[i];
        if (!x->tensor) continue;
        snprintf(names[k], sizeof names[k], "%s", x->tensor);
        ts[k] = (wisp_gguf_out_tensor){names[k], 1, {x->len, 1, 1, 1}, WISP_TYPE_F32};
        if (!x->values) {
            ones[i] = malloc((size_t)x->len * sizeof(float));
            for (int64_t v = 0; ones[i] && v < x->len; v++) ones[i][v] = 1.0f;
        }
        data[k++] = x->values ? x->values : ones[i];
    }
    if (!st) st = wisp_gguf_write_tensor_infos(s, ts, n_t, WISP_GGUF_DEFAULT_ALIGNMENT, err);
    for (uint64_t i = 0; i < n_t && !st; i++) {
        st = wisp_sink_write(s, data[i], (size_t)wisp_gguf_tensor_bytes(&ts[i]), err);
        if (!st) st = wisp_sink_pad(s, WISP_GGUF_DEFAULT_ALIGNMENT, err);
    }
    for (int i = 0; ones && i < j->n; i++) free(ones[i]);
    free(ones);
    free(data);
    free(names);
    free(ts);
    return st;
}

unsigned char *gguf_with_extras(const unsigned char *base, size_t n, const gguf_extra *x, int n_extra, size_t *size,
                                wisp_error *err) {
    wisp_gguf g;
    if (wisp_gguf_open(&g, base, n, err)) return NULL;
    extras_job j = {&g, x, n_extra};
    return write_twice(write_extras, &j, size, err);
}

static wisp_model_shape yarn_shape(const char *arch, bool qkv_bias, bool rope_freqs) {
    wisp_model_shape shape = {"yarn", "yarn", arch, 128, 2, 4, 2, 256, 264, 4096, 10000.0f, 1e-5f, false, qkv_bias,
                              .rope_freqs = rope_freqs};
    return shape;
}

unsigned char *gguf_plain_yarn_model(const char *arch, bool qkv_bias, size_t *size, wisp_error *err) {
    wisp_model_shape shape = yarn_shape(arch, qkv_bias, false);
    return gguf_tiny_model(&shape, size, err);
}

unsigned char *gguf_yarn_model(const char *arch, bool qkv_bias, bool rope_freqs, float attn_factor, size_t *size,
                               wisp_error *err) {
    wisp_model_shape shape = yarn_shape(arch, qkv_bias, rope_freqs);
    char k_type[64], k_factor[64], k_orig[64], k_attn[64];
    snprintf(k_type, sizeof k_type, "%s.rope.scaling.type", arch);
    snprintf(k_factor, sizeof k_factor, "%s.rope.scaling.factor", arch);
    snprintf(k_orig, sizeof k_orig, "%s.rope.scaling.original_context_length", arch);
    snprintf(k_attn, sizeof k_attn, "%s.rope.scaling.attn_factor", arch);
    gguf_extra keys[] = {EXTRA_STR(k_type, "yarn"), EXTRA_F32(k_factor, 4), EXTRA_U32(k_orig, 256),
                         EXTRA_F32(k_attn, attn_factor)};
    size_t base_n;
    unsigned char *base = gguf_tiny_model(&shape, &base_n, err);
    if (!base) return NULL;
    unsigned char *bytes = gguf_with_extras(base, base_n, keys, attn_factor > 0 ? 4 : 3, size, err);
    free(base);
    return bytes;
}
