/* GGUF reader: one validating pass at open time, then cheap lookups. */
#include "gguf.h"

#include <string.h>

#include "half.h"
#include "types.h"

bool wisp_str_eq(wisp_str s, const char *cstr) {
    size_t n = strlen(cstr);
    return s.len == n && memcmp(s.ptr, cstr, n) == 0;
}

size_t wisp_gguf_vtype_size(uint32_t t) {
    switch (t) {
    case WISP_GGUF_U8: case WISP_GGUF_I8: case WISP_GGUF_BOOL: return 1;
    case WISP_GGUF_U16: case WISP_GGUF_I16: return 2;
    case WISP_GGUF_U32: case WISP_GGUF_I32: case WISP_GGUF_F32: return 4;
    case WISP_GGUF_U64: case WISP_GGUF_I64: case WISP_GGUF_F64: return 8;
    default: return 0;
    }
}

const char *wisp_gguf_vtype_name(uint32_t t) {
    static const char *const names[WISP_GGUF_VTYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
    return t < WISP_GGUF_VTYPE_COUNT ? names[t] : "invalid";
}

static bool next_tensor_in(const wisp_gguf *g, size_t *cursor, wisp_gguf_tensor *t);

/* A bounds-checked cursor over the header bytes. Every read checks that the
 * bytes exist; `what` names the field in the error message. */
typedef struct reader {
    const uint8_t *bytes;
    size_t size, pos;
    wisp_error *err;
} reader;

static wisp_status need(reader *r, uint64_t n, const char *what) {
    if (n > r->size - r->pos)
        return wisp_fail(r->err, WISP_ERR_FORMAT,
                         "truncated: %s needs %llu bytes at offset %zu but the file has %zu",
                         what, (unsigned long long)n, r->pos, r->size);
    return WISP_OK;
}

static wisp_status read_u32(reader *r, uint32_t *v, const char *what) {
    wisp_status s = need(r, 4, what);
    if (s) return s;
    *v = wisp_load_u32(r->bytes + r->pos);
    r->pos += 4;
    return WISP_OK;
}

static wisp_status read_u64(reader *r, uint64_t *v, const char *what) {
    wisp_status s = need(r, 8, what);
    if (s) return s;
    *v = wisp_load_u64(r->bytes + r->pos);
    r->pos += 8;
    return WISP_OK;
}

static wisp_status read_str(reader *r, wisp_str *out, const char *what) {
    uint64_t len;
    wisp_status s = read_u64(r, &len, what);
    if (s) return s;
    if ((s = need(r, len, what))) return s;
    out->ptr = (const char *)r->bytes + r->pos;
    out->len = len;
    r->pos += (size_t)len;
    return WISP_OK;
}

/* Skip (and check) one value of type t; arrays of arrays are rejected. */
static wisp_status skip_value(reader *r, uint32_t t, wisp_gguf_kv *kv) {
    wisp_status s;
    kv->type = t;
    kv->elem_type = t;
    kv->count = 1;
    if (t == WISP_GGUF_STRING) {
        wisp_str str;
        if ((s = read_str(r, &str, "string value"))) return s;
        kv->value = (const uint8_t *)str.ptr - 8;
        kv->value_bytes = (size_t)str.len + 8;
        return WISP_OK;
    }
    if (t == WISP_GGUF_ARRAY) {
        uint32_t et;
        uint64_t count;
        if ((s = read_u32(r, &et, "array element type"))) return s;
        if ((s = read_u64(r, &count, "array length"))) return s;
        kv->elem_type = et;
        kv->count = count;
        kv->value = r->bytes + r->pos;
        if (et == WISP_GGUF_STRING) {
            /* each string needs at least its 8-byte length */
            if (count > (r->size - r->pos) / 8)
                return wisp_fail(r->err, WISP_ERR_FORMAT, "string array of %llu elements cannot fit in the file",
                                 (unsigned long long)count);
            for (uint64_t i = 0; i < count; i++) {
                wisp_str str;
                if ((s = read_str(r, &str, "string array element"))) return s;
            }
        } else {
            size_t es = wisp_gguf_vtype_size(et);
            if (es == 0)
                return wisp_fail(r->err, WISP_ERR_FORMAT, "array of invalid element type %u", et);
            if (count > (r->size - r->pos) / es)
                return wisp_fail(r->err, WISP_ERR_FORMAT, "truncated: array of %llu %s does not fit in the file",
                                 (unsigned long long)count, wisp_gguf_vtype_name(et));
            r->pos += (size_t)count * es;
        }
        kv->value_bytes = (size_t)(r->bytes + r->pos - kv->value);
        return WISP_OK;
    }
    size_t sz = wisp_gguf_vtype_size(t);
    if (sz == 0) return wisp_fail(r->err, WISP_ERR_FORMAT, "invalid value type %u", t);
    if ((s = need(r, sz, "value"))) return s;
    kv->value = r->bytes + r->pos;
    kv->value_bytes = sz;
    r->pos += sz;
    return WISP_OK;
}

static wisp_status read_kv(reader *r, wisp_gguf_kv *kv) {
    wisp_status s;
    uint32_t t;
    if ((s = read_str(r, &kv->key, "metadata key"))) return s;
    if ((s = read_u32(r, &t, "metadata value type"))) return s;
    if (t >= WISP_GGUF_VTYPE_COUNT)
        return wisp_fail(r->err, WISP_ERR_FORMAT, "metadata '%.*s' has invalid type %u",
                         (int)kv->key.len, kv->key.ptr, t);
    return skip_value(r, t, kv);
}

static wisp_status read_tensor_info(reader *r, wisp_gguf_tensor *t) {
    wisp_status s;
    if ((s = read_str(r, &t->name, "tensor name"))) return s;
    if ((s = read_u32(r, &t->n_dims, "tensor dimension count"))) return s;
    if (t->n_dims == 0 || t->n_dims > WISP_GGUF_MAX_DIMS)
        return wisp_fail(r->err, WISP_ERR_FORMAT, "tensor '%.*s' has %u dimensions (1..4 allowed)",
                         (int)t->name.len, t->name.ptr, t->n_dims);
    for (uint32_t d = 0; d < WISP_GGUF_MAX_DIMS; d++) {
        uint64_t v = 1;
        if (d < t->n_dims && (s = read_u64(r, &v, "tensor dimension"))) return s;
        t->ne[d] = (int64_t)v;
    }
    if ((s = read_u32(r, &t->type, "tensor type"))) return s;
    return read_u64(r, &t->offset, "tensor offset");
}

/* Size the tensor and check it lies inside the data section. */
static wisp_status check_tensor_extent(const wisp_gguf *g, wisp_gguf_tensor *t, wisp_error *err) {
    const wisp_type_info *ti = wisp_type_info_of((int)t->type);
    if (!ti)
        return wisp_fail(err, WISP_ERR_FORMAT, "tensor '%.*s' has unknown type id %u",
                         (int)t->name.len, t->name.ptr, t->type);
    uint64_t n = 1;
    for (int d = 0; d < WISP_GGUF_MAX_DIMS; d++) {
        uint64_t e = (uint64_t)t->ne[d];
        if (t->ne[d] <= 0 || e > (UINT64_C(1) << 40) || (n != 0 && e > (UINT64_C(1) << 62) / n))
            return wisp_fail(err, WISP_ERR_FORMAT, "tensor '%.*s' has an invalid or overflowing shape",
                             (int)t->name.len, t->name.ptr);
        n *= e;
    }
    if (t->ne[0] % ti->block_elems != 0)
        return wisp_fail(err, WISP_ERR_FORMAT, "tensor '%.*s' row length %lld is not a multiple of the %s block (%d)",
                         (int)t->name.len, t->name.ptr, (long long)t->ne[0], ti->name, (int)ti->block_elems);
    t->nbytes = n / (uint64_t)ti->block_elems * (uint64_t)ti->block_bytes;
    if (t->offset % g->alignment != 0)
        return wisp_fail(err, WISP_ERR_FORMAT, "tensor '%.*s' offset %llu is not a multiple of the alignment %u",
                         (int)t->name.len, t->name.ptr, (unsigned long long)t->offset, g->alignment);
    uint64_t avail = g->size - g->data_start;
    if (t->offset > avail || t->nbytes > avail - t->offset)
        return wisp_fail(err, WISP_ERR_FORMAT,
                         "truncated: tensor '%.*s' needs bytes %llu..%llu of the data section, which has %llu",
                         (int)t->name.len, t->name.ptr, (unsigned long long)t->offset,
                         (unsigned long long)(t->offset + t->nbytes), (unsigned long long)avail);
    t->data = g->bytes + g->data_start + t->offset;
    return WISP_OK;
}

/* A one-hash Bloom filter over names: returns true if the name's bit was
 * already set (a repeat is possible), and sets it. */
#define SEEN_FILTER_BYTES 512
static bool seen_before(uint8_t *filter, wisp_str name) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (uint64_t i = 0; i < name.len; i++) h = (h ^ (uint8_t)name.ptr[i]) * 16777619u;
    h %= SEEN_FILTER_BYTES * 8;
    bool was = (filter[h >> 3] >> (h & 7)) & 1;
    filter[h >> 3] |= (uint8_t)(1u << (h & 7));
    return was;
}

/* wisp.h promises callers that 16-byte aligned memory holds a handle. */
_Static_assert(_Alignof(wisp_gguf) <= 16, "wisp_gguf needs more than the 16-byte alignment wisp.h promises");

size_t wisp_gguf_size(void) { return sizeof(wisp_gguf); }

wisp_status wisp_gguf_open(wisp_gguf *g, const void *bytes, size_t size, wisp_error *err) {
    if (!g) return wisp_fail(err, WISP_ERR_ARG, "no wisp_gguf given (wisp_gguf_size() bytes)");
    memset(g, 0, sizeof *g);
    if (!bytes) return wisp_fail(err, WISP_ERR_ARG, "no bytes given");
    reader r = {(const uint8_t *)bytes, size, 0, err};
    wisp_status s;
    if (size < 4 || memcmp(bytes, "GGUF", 4) != 0)
        return wisp_fail(err, WISP_ERR_FORMAT, "not a GGUF file (the first 4 bytes are not 'GGUF')");
    r.pos = 4;
    if ((s = read_u32(&r, &g->version, "version"))) return s;
    if (g->version != 2 && g->version != 3)
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "GGUF version %u (wisp reads versions 2 and 3)", g->version);
    if ((s = read_u64(&r, &g->n_tensors, "tensor count"))) return s;
    if ((s = read_u64(&r, &g->n_kv, "metadata count"))) return s;
    g->bytes = r.bytes;
    g->size = size;
    g->alignment = WISP_GGUF_DEFAULT_ALIGNMENT;
    /* every pair and every tensor info takes at least 12 / 24 bytes */
    if (g->n_kv > size / 12 || g->n_tensors > size / 24)
        return wisp_fail(err, WISP_ERR_FORMAT, "counts (%llu metadata, %llu tensors) cannot fit in %zu bytes",
                         (unsigned long long)g->n_kv, (unsigned long long)g->n_tensors, size);

    uint8_t seen_keys[SEEN_FILTER_BYTES] = {0};
    g->kv_start = r.pos;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        wisp_gguf_kv kv;
        size_t at = r.pos;
        if ((s = read_kv(&r, &kv))) return wisp_error_prefix(err, "metadata pair %llu", (unsigned long long)i);
        /* reject duplicate keys: a second value would silently shadow the
         * first. The filter makes the common case linear; only a possible
         * repeat rescans the earlier keys. */
        if (seen_before(seen_keys, kv.key)) {
            reader dup = {r.bytes, at, g->kv_start, NULL};
            wisp_gguf_kv prev;
            while (dup.pos < at && read_kv(&dup, &prev) == WISP_OK)
                if (prev.key.len == kv.key.len && memcmp(prev.key.ptr, kv.key.ptr, kv.key.len) == 0)
                    return wisp_fail(err, WISP_ERR_FORMAT, "metadata key '%.*s' appears twice",
                                     (int)kv.key.len, kv.key.ptr);
        }
        if (wisp_str_eq(kv.key, "general.alignment")) {
            int64_t a;
            if (!wisp_gguf_kv_int(&kv, 0, &a) || kv.type == WISP_GGUF_ARRAY || a <= 0 || a > 65536 || (a & (a - 1)))
                return wisp_fail(err, WISP_ERR_FORMAT, "general.alignment must be a power of two up to 65536");
            g->alignment = (uint32_t)a;
        }
    }

    g->tensors_start = r.pos;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        wisp_gguf_tensor t;
        if ((s = read_tensor_info(&r, &t))) return wisp_error_prefix(err, "tensor info %llu", (unsigned long long)i);
    }
    size_t data_start = r.pos + (g->alignment - r.pos % g->alignment) % g->alignment;
    if (g->n_tensors > 0 && data_start > size)
        return wisp_fail(err, WISP_ERR_FORMAT, "truncated: the data section would start at %zu, past the end (%zu)",
                         data_start, size);
    g->data_start = data_start > size ? size : data_start;

    /* second pass: extents and duplicate names */
    uint8_t seen_names[SEEN_FILTER_BYTES] = {0};
    size_t cur = 0;
    wisp_gguf_tensor t;
    while (next_tensor_in(g, &cur, &t)) {
        if ((s = check_tensor_extent(g, &t, err))) return s;
        if (!seen_before(seen_names, t.name)) continue;
        size_t cur2 = 0;
        wisp_gguf_tensor u;
        while (next_tensor_in(g, &cur2, &u) && cur2 < cur)
            if (u.name.len == t.name.len && memcmp(u.name.ptr, t.name.ptr, t.name.len) == 0)
                return wisp_fail(err, WISP_ERR_FORMAT, "tensor '%.*s' appears twice", (int)t.name.len, t.name.ptr);
    }
    return WISP_OK;
}

bool wisp_gguf_next_kv(const wisp_gguf *g, size_t *cursor, wisp_gguf_kv *kv) {
    size_t pos = *cursor ? *cursor : g->kv_start;
    if (pos >= g->tensors_start) return false;
    reader r = {g->bytes, g->size, pos, NULL};
    if (read_kv(&r, kv) != WISP_OK) return false; /* cannot happen after open */
    *cursor = r.pos;
    return true;
}

/* The tensor walk of one file, its cursor a position in that file. */
static bool next_tensor_in(const wisp_gguf *g, size_t *cursor, wisp_gguf_tensor *t) {
    size_t pos = *cursor ? *cursor : g->tensors_start;
    if (pos >= g->data_start || g->n_tensors == 0) return false;
    reader r = {g->bytes, g->size, pos, NULL};
    if (read_tensor_info(&r, t) != WISP_OK) return false;
    *cursor = r.pos;
    /* the end of the last info is followed only by alignment padding */
    if (r.pos > g->data_start) return false;
    const wisp_type_info *ti = wisp_type_info_of((int)t->type);
    t->nbytes = 0;
    t->data = NULL;
    if (ti) {
        uint64_t n = 1;
        for (int d = 0; d < WISP_GGUF_MAX_DIMS; d++) n *= (uint64_t)t->ne[d];
        t->nbytes = n / (uint64_t)ti->block_elems * (uint64_t)ti->block_bytes;
        if (t->offset <= g->size - g->data_start) t->data = g->bytes + g->data_start + t->offset;
    }
    return true;
}

/* Shard k of g's model; shard 0 is g itself (a copy of shards[0] works). */
static const wisp_gguf *shard_at(const wisp_gguf *g, uint32_t k) { return k == 0 ? g : &g->shards[k]; }

uint32_t wisp_gguf_shard_count(const wisp_gguf *g) { return g->shards && g->n_shards > 1 ? g->n_shards : 1; }

bool wisp_gguf_next_tensor(const wisp_gguf *g, size_t *cursor, wisp_gguf_tensor *t) {
    /* shard k's header occupies [base_k, base_k + data_start_k) of the cursor
     * space: its own position p maps to base_k + p, and base_k itself (p = 0)
     * is its start, which is also where the previous shard's walk ends */
    size_t base = 0;
    for (uint32_t k = 0, n = wisp_gguf_shard_count(g); k < n; k++) {
        const wisp_gguf *s = shard_at(g, k);
        size_t end = base + s->data_start;
        if (*cursor < end) {
            size_t local = *cursor > base ? *cursor - base : 0;
            if (next_tensor_in(s, &local, t)) {
                *cursor = base + local;
                return true;
            }
            *cursor = end;
        }
        base = end;
    }
    return false;
}

uint64_t wisp_gguf_tensor_count(const wisp_gguf *g) {
    uint64_t n = 0;
    for (uint32_t k = 0; k < wisp_gguf_shard_count(g); k++) n += shard_at(g, k)->n_tensors;
    return n;
}

uint64_t wisp_gguf_total_bytes(const wisp_gguf *g) {
    uint64_t n = 0;
    for (uint32_t k = 0; k < wisp_gguf_shard_count(g); k++) n += shard_at(g, k)->size;
    return n;
}

bool wisp_gguf_find_kv(const wisp_gguf *g, const char *key, wisp_gguf_kv *kv) {
    size_t cur = 0;
    while (wisp_gguf_next_kv(g, &cur, kv))
        if (wisp_str_eq(kv->key, key)) return true;
    return false;
}

bool wisp_gguf_find_tensor(const wisp_gguf *g, const char *name, wisp_gguf_tensor *t) {
    size_t cur = 0;
    while (wisp_gguf_next_tensor(g, &cur, t))
        if (wisp_str_eq(t->name, name)) return true;
    return false;
}

bool wisp_gguf_kv_int(const wisp_gguf_kv *kv, uint64_t i, int64_t *out) {
    uint32_t t = kv->type == WISP_GGUF_ARRAY ? kv->elem_type : kv->type;
    if (i >= kv->count) return false;
    size_t es = wisp_gguf_vtype_size(t);
    const uint8_t *p = kv->value + i * es;
    switch (t) {
    case WISP_GGUF_U8: case WISP_GGUF_BOOL: *out = p[0]; return true;
    case WISP_GGUF_I8: *out = (int8_t)p[0]; return true;
    case WISP_GGUF_U16: *out = wisp_load_u16(p); return true;
    case WISP_GGUF_I16: *out = (int16_t)wisp_load_u16(p); return true;
    case WISP_GGUF_U32: *out = wisp_load_u32(p); return true;
    case WISP_GGUF_I32: *out = (int32_t)wisp_load_u32(p); return true;
    case WISP_GGUF_I64: *out = (int64_t)wisp_load_u64(p); return true;
    case WISP_GGUF_U64: {
        uint64_t v = wisp_load_u64(p);
        if (v > (uint64_t)INT64_MAX) return false;
        *out = (int64_t)v;
        return true;
    }
    default: return false;
    }
}

bool wisp_gguf_kv_number(const wisp_gguf_kv *kv, uint64_t i, double *out) {
    uint32_t t = kv->type == WISP_GGUF_ARRAY ? kv->elem_type : kv->type;
    if (i >= kv->count) return false;
    if (t == WISP_GGUF_F32) { *out = wisp_load_f32(kv->value + i * 4); return true; }
    if (t == WISP_GGUF_F64) {
        uint64_t b = wisp_load_u64(kv->value + i * 8);
        double d;
        memcpy(&d, &b, 8);
        *out = d;
        return true;
    }
    if (t == WISP_GGUF_U64) { *out = (double)wisp_load_u64(kv->value + i * 8); return true; }
    int64_t v;
    if (!wisp_gguf_kv_int(kv, i, &v)) return false;
    *out = (double)v;
    return true;
}

bool wisp_gguf_get_i64(const wisp_gguf *g, const char *key, int64_t *out) {
    wisp_gguf_kv kv;
    return wisp_gguf_find_kv(g, key, &kv) && kv.type != WISP_GGUF_ARRAY && wisp_gguf_kv_int(&kv, 0, out);
}

bool wisp_gguf_get_u64(const wisp_gguf *g, const char *key, uint64_t *out) {
    wisp_gguf_kv kv;
    if (!wisp_gguf_find_kv(g, key, &kv) || kv.type == WISP_GGUF_ARRAY) return false;
    if (kv.type == WISP_GGUF_U64) { *out = wisp_load_u64(kv.value); return true; }
    int64_t v;
    if (!wisp_gguf_kv_int(&kv, 0, &v) || v < 0) return false;
    *out = (uint64_t)v;
    return true;
}

bool wisp_gguf_get_u32(const wisp_gguf *g, const char *key, uint32_t *out) {
    uint64_t v;
    if (!wisp_gguf_get_u64(g, key, &v) || v > UINT32_MAX) return false;
    *out = (uint32_t)v;
    return true;
}

bool wisp_gguf_get_f32(const wisp_gguf *g, const char *key, float *out) {
    wisp_gguf_kv kv;
    double d;
    if (!wisp_gguf_find_kv(g, key, &kv) || kv.type == WISP_GGUF_ARRAY) return false;
    if (kv.type != WISP_GGUF_F32 && kv.type != WISP_GGUF_F64) return false;
    if (!wisp_gguf_kv_number(&kv, 0, &d)) return false;
    *out = (float)d;
    return true;
}

bool wisp_gguf_get_bool(const wisp_gguf *g, const char *key, bool *out) {
    wisp_gguf_kv kv;
    int64_t v;
    if (!wisp_gguf_find_kv(g, key, &kv) || kv.type == WISP_GGUF_ARRAY || kv.type == WISP_GGUF_STRING) return false;
    if (!wisp_gguf_kv_int(&kv, 0, &v)) return false;
    *out = v != 0;
    return true;
}

bool wisp_gguf_get_str(const wisp_gguf *g, const char *key, wisp_str *out) {
    wisp_gguf_kv kv;
    if (!wisp_gguf_find_kv(g, key, &kv) || kv.type != WISP_GGUF_STRING) return false;
    out->len = wisp_load_u64(kv.value);
    out->ptr = (const char *)kv.value + 8;
    return true;
}

wisp_str wisp_gguf_next_array_str(const uint8_t **pos) {
    wisp_str s;
    s.len = wisp_load_u64(*pos);
    s.ptr = (const char *)*pos + 8;
    *pos += 8 + s.len;
    return s;
}
