#include "safetensors.h"

#include <string.h>

#include "half.h"
#include "types.h"

#define NAME_SHOWN 80

typedef struct dtype_row {
    const char *name;
    uint32_t bits;
    int wisp_type;
} dtype_row;

static const dtype_row dtypes[WISP_ST_DTYPE_COUNT] = {
    [WISP_ST_BOOL] = {"BOOL", 8, -1},          [WISP_ST_U8] = {"U8", 8, -1},
    [WISP_ST_I8] = {"I8", 8, WISP_TYPE_I8},    [WISP_ST_I16] = {"I16", 16, WISP_TYPE_I16},
    [WISP_ST_U16] = {"U16", 16, -1},           [WISP_ST_F16] = {"F16", 16, WISP_TYPE_F16},
    [WISP_ST_BF16] = {"BF16", 16, WISP_TYPE_BF16}, [WISP_ST_I32] = {"I32", 32, WISP_TYPE_I32},
    [WISP_ST_U32] = {"U32", 32, -1},           [WISP_ST_F32] = {"F32", 32, WISP_TYPE_F32},
    [WISP_ST_F64] = {"F64", 64, WISP_TYPE_F64}, [WISP_ST_I64] = {"I64", 64, WISP_TYPE_I64},
    [WISP_ST_U64] = {"U64", 64, -1},           [WISP_ST_F8_E4M3] = {"F8_E4M3", 8, -1},
    [WISP_ST_F8_E5M2] = {"F8_E5M2", 8, -1},    [WISP_ST_F8_E8M0] = {"F8_E8M0", 8, -1},
    [WISP_ST_F4] = {"F4", 4, -1},              [WISP_ST_F6_E2M3] = {"F6_E2M3", 6, -1},
    [WISP_ST_F6_E3M2] = {"F6_E3M2", 6, -1},    [WISP_ST_C64] = {"C64", 64, -1},
};

const char *wisp_st_dtype_name(int dtype) {
    return dtype >= 0 && dtype < WISP_ST_DTYPE_COUNT ? dtypes[dtype].name : NULL;
}

uint32_t wisp_st_dtype_bits(int dtype) {
    return dtype >= 0 && dtype < WISP_ST_DTYPE_COUNT ? dtypes[dtype].bits : 0;
}

int wisp_st_dtype_to_wisp(int dtype) {
    return dtype >= 0 && dtype < WISP_ST_DTYPE_COUNT ? dtypes[dtype].wisp_type : -1;
}

int wisp_st_dtype_from_wisp(int type) {
    for (int d = 0; d < WISP_ST_DTYPE_COUNT; d++)
        if (dtypes[d].wisp_type == type && type >= 0) return d;
    return -1;
}

/* Data bytes of n elements of `dtype`; false when they do not fill whole bytes or overflow. */
static bool dtype_bytes(int dtype, uint64_t n, uint64_t *out) {
    uint64_t bits = wisp_st_dtype_bits(dtype);
    if (bits == 0 || (n && n > UINT64_MAX / bits)) return false;
    if ((n * bits) % 8) return false;
    *out = n * bits / 8;
    return true;
}

/* ---- reading ------------------------------------------------------------ */

static wisp_status frame(const void *bytes, size_t size, uint64_t *n_header, wisp_error *err) {
    if (size < 8)
        return wisp_fail(err, WISP_ERR_FORMAT, "truncated: a safetensors file starts with an 8-byte header length "
                                               "(the file has %zu bytes)",
                         size);
    uint64_t n = wisp_load_u64(bytes);
    if (n > WISP_ST_MAX_HEADER)
        return wisp_fail(err, WISP_ERR_FORMAT, "safetensors header of %llu bytes exceeds the %u-byte limit",
                         (unsigned long long)n, WISP_ST_MAX_HEADER);
    if (n > size - 8)
        return wisp_fail(err, WISP_ERR_FORMAT, "truncated: the header claims %llu bytes but the file has %zu after "
                                               "the length",
                         (unsigned long long)n, size - 8);
    if (n < 2 || ((const char *)bytes)[8] != '{')
        return wisp_fail(err, WISP_ERR_FORMAT, "the safetensors header must be a JSON object starting with '{'");
    *n_header = n;
    return WISP_OK;
}

static size_t index_entries(size_t n_nodes) { return n_nodes / 2 + 1; }

static size_t plan_bytes(size_t n_nodes) {
    size_t nodes = n_nodes * sizeof(wisp_json_node);
    nodes = (nodes + 7) & ~(size_t)7;
    return nodes + 2 * index_entries(n_nodes) * sizeof(uint32_t);
}

wisp_status wisp_st_plan_memory(const void *bytes, size_t size, wisp_st_plan *plan, wisp_error *err) {
    memset(plan, 0, sizeof *plan);
    uint64_t n = 0;
    wisp_status st = frame(bytes, size, &n, err);
    if (st) return st;
    wisp_json j;
    size_t needed = 0;
    st = wisp_json_parse(&j, (const char *)bytes + 8, (size_t)n, NULL, 0, &needed, err);
    if (st && st != WISP_ERR_CAPACITY) {
        wisp_error_prefix(err, "safetensors header");
        return st;
    }
    plan->n_nodes = needed;
    plan->max_tensors = index_entries(needed);
    plan->bytes = plan_bytes(needed);
    return WISP_OK;
}

typedef struct sorter {
    const wisp_json *j;
    bool by_offset; /* else by name */
} sorter;

/* A validated entry's data_offsets[0], read again from the JSON (no memory kept per tensor). */
static uint64_t begin_of(const wisp_json *j, uint32_t key) {
    int64_t offs = wisp_json_get(j, key + 1, "data_offsets");
    int64_t v = 0;
    wisp_json_int(j, wisp_json_at(j, offs, 0), &v);
    return (uint64_t)v;
}

static int compare_names(const wisp_json *j, uint32_t a, uint32_t b) {
    const wisp_json_node *x = &j->nodes[a], *y = &j->nodes[b];
    size_t la = x->end - x->start, lb = y->end - y->start;
    int c = memcmp(j->text + x->start, j->text + y->start, la < lb ? la : lb);
    return c ? c : (la < lb ? -1 : la > lb);
}

static bool less(const sorter *s, uint32_t a, uint32_t b) {
    if (s->by_offset) return begin_of(s->j, a) < begin_of(s->j, b);
    return compare_names(s->j, a, b) < 0;
}

/* Heap sort: O(n log n) with no memory and no recursion (hostile inputs
 * cannot make it quadratic). */
static void sift(const sorter *s, uint32_t *v, size_t root, size_t n) {
    for (;;) {
        size_t child = 2 * root + 1;
        if (child >= n) return;
        if (child + 1 < n && less(s, v[child], v[child + 1])) child++;
        if (!less(s, v[root], v[child])) return;
        uint32_t t = v[root];
        v[root] = v[child];
        v[child] = t;
        root = child;
    }
}

static void heap_sort(const sorter *s, uint32_t *v, size_t n) {
    for (size_t i = n / 2; i-- > 0;) sift(s, v, i, n);
    for (size_t end = n; end-- > 1;) {
        uint32_t t = v[0];
        v[0] = v[end];
        v[end] = t;
        sift(s, v, 0, end);
    }
}

static int dtype_from_json(const wisp_json *j, int64_t node) {
    for (int d = 0; d < WISP_ST_DTYPE_COUNT; d++)
        if (wisp_json_string_eq(j, node, dtypes[d].name)) return d;
    return -1;
}

/* Check one tensor entry; on success fills t (without the data pointer). */
static wisp_status check_entry(const wisp_json *j, uint32_t key, uint64_t data_len, wisp_st_tensor *t,
                               uint64_t *begin, wisp_error *err) {
    const wisp_json_node *k = &j->nodes[key];
    const char *name = j->text + k->start;
    int nl = (int)(k->end - k->start > NAME_SHOWN ? NAME_SHOWN : k->end - k->start);
    if (memchr(name, '\\', k->end - k->start))
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "tensor name '%.*s' uses JSON escapes, which wisp does not accept",
                         nl, name);
    int64_t v = key + 1;
    if (!wisp_json_is(j, v, WISP_JSON_OBJECT))
        return wisp_fail(err, WISP_ERR_FORMAT, "tensor '%.*s': entry must be an object", nl, name);
    int64_t dt = wisp_json_get(j, v, "dtype"), shape = wisp_json_get(j, v, "shape"),
            offs = wisp_json_get(j, v, "data_offsets");
    if (dt < 0 || shape < 0 || offs < 0)
        return wisp_fail(err, WISP_ERR_FORMAT, "tensor '%.*s': needs dtype, shape and data_offsets", nl, name);
    memset(t, 0, sizeof *t);
    t->name = name;
    t->name_len = k->end - k->start;
    t->dtype = dtype_from_json(j, dt);
    if (t->dtype < 0) {
        char d[32];
        wisp_json_string(j, dt, d, sizeof d);
        return wisp_fail(err, WISP_ERR_FORMAT, "tensor '%.*s': unknown dtype '%s'", nl, name, d);
    }
    if (!wisp_json_is(j, shape, WISP_JSON_ARRAY))
        return wisp_fail(err, WISP_ERR_FORMAT, "tensor '%.*s': shape must be an array", nl, name);
    uint32_t nd = j->nodes[shape].count;
    if (nd > WISP_ST_MAX_DIMS)
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "tensor '%.*s' has %u dimensions; wisp reads at most %d", nl, name,
                         nd, WISP_ST_MAX_DIMS);
    uint64_t elems = 1;
    bool overflow = false;
    for (uint32_t i = 0; i < nd; i++) {
        int64_t d;
        if (!wisp_json_int(j, wisp_json_at(j, shape, i), &d) || d < 0)
            return wisp_fail(err, WISP_ERR_FORMAT, "tensor '%.*s': shape[%u] is not a non-negative integer", nl, name,
                             i);
        t->shape[i] = d;
        if (d && elems > UINT64_MAX / (uint64_t)d) overflow = true;
        else elems *= (uint64_t)d;
    }
    t->n_dims = nd;
    int64_t b, e;
    if (!wisp_json_is(j, offs, WISP_JSON_ARRAY) || j->nodes[offs].count != 2 ||
        !wisp_json_int(j, wisp_json_at(j, offs, 0), &b) || !wisp_json_int(j, wisp_json_at(j, offs, 1), &e) || b < 0 ||
        e < b)
        return wisp_fail(err, WISP_ERR_FORMAT, "tensor '%.*s': data_offsets must be [begin, end] with 0 <= begin <= end",
                         nl, name);
    uint64_t bytes = 0;
    if (overflow || !dtype_bytes(t->dtype, elems, &bytes))
        return wisp_fail(err, WISP_ERR_FORMAT, "tensor '%.*s': shape too large or not a whole number of bytes", nl,
                         name);
    if ((uint64_t)(e - b) != bytes)
        return wisp_fail(err, WISP_ERR_FORMAT, "tensor '%.*s': %s with %llu elements needs %llu bytes, data_offsets "
                                               "span %llu",
                         nl, name, dtypes[t->dtype].name, (unsigned long long)elems, (unsigned long long)bytes,
                         (unsigned long long)(e - b));
    if ((uint64_t)e > data_len)
        return wisp_fail(err, WISP_ERR_FORMAT, "tensor '%.*s': data_offsets end %lld is past the data buffer (%llu "
                                               "bytes; truncated file?)",
                         nl, name, (long long)e, (unsigned long long)data_len);
    t->n_elements = elems;
    t->nbytes = bytes;
    *begin = (uint64_t)b;
    return WISP_OK;
}

static wisp_status check_metadata(const wisp_json *j, int64_t m, wisp_error *err) {
    if (!wisp_json_is(j, m, WISP_JSON_OBJECT))
        return wisp_fail(err, WISP_ERR_FORMAT, "__metadata__ must be an object of strings");
    for (int64_t k = wisp_json_first(j, m); k >= 0; k = wisp_json_next(j, k + 1))
        if (!wisp_json_is(j, k + 1, WISP_JSON_STRING)) {
            char key[64];
            wisp_json_string(j, k, key, sizeof key);
            return wisp_fail(err, WISP_ERR_FORMAT, "__metadata__ value of '%s' must be a string", key);
        }
    return WISP_OK;
}

wisp_status wisp_st_open(wisp_safetensors *st, const void *bytes, size_t size, void *mem, size_t mem_bytes,
                         wisp_error *err) {
    memset(st, 0, sizeof *st);
    wisp_st_plan plan;
    wisp_status s = wisp_st_plan_memory(bytes, size, &plan, err);
    if (s) return s;
    if (mem_bytes < plan.bytes || !mem || (uintptr_t)mem % 8)
        return wisp_fail(err, WISP_ERR_CAPACITY, "safetensors index needs %zu bytes (8-byte aligned), got %zu",
                         plan.bytes, mem_bytes);
    uint64_t n_header = wisp_load_u64(bytes);
    const char *text = (const char *)bytes + 8;
    wisp_json_node *nodes = mem;
    size_t node_bytes = (plan.n_nodes * sizeof(wisp_json_node) + 7) & ~(size_t)7;
    uint32_t *by_offset = (uint32_t *)((uint8_t *)mem + node_bytes);
    uint32_t *by_name = by_offset + plan.max_tensors;
    if ((s = wisp_json_parse(&st->json, text, (size_t)n_header, nodes, plan.n_nodes, NULL, err))) {
        wisp_error_prefix(err, "safetensors header");
        return s;
    }
    const wisp_json *j = &st->json;
    if (!wisp_json_is(j, 0, WISP_JSON_OBJECT))
        return wisp_fail(err, WISP_ERR_FORMAT, "the safetensors header must be a JSON object");
    st->bytes = bytes;
    st->size = size;
    st->header = text;
    st->header_len = (size_t)n_header;
    st->data = (const uint8_t *)bytes + 8 + n_header;
    st->data_len = size - 8 - n_header;
    st->metadata = -1;

    size_t n = 0;
    for (int64_t k = wisp_json_first(j, 0); k >= 0; k = wisp_json_next(j, k + 1)) {
        if (wisp_json_string_eq(j, k, "__metadata__")) {
            if ((s = check_metadata(j, k + 1, err))) return s;
            st->metadata = k + 1;
            continue;
        }
        wisp_st_tensor t;
        uint64_t begin;
        if ((s = check_entry(j, (uint32_t)k, st->data_len, &t, &begin, err))) return s;
        if (n >= plan.max_tensors) return wisp_fail(err, WISP_ERR_INTERNAL, "safetensors index overflow");
        by_offset[n] = by_name[n] = (uint32_t)k;
        n++;
    }
    st->n_tensors = n;

    /* exact coverage: in offset order each tensor starts where the previous ended */
    sorter so = {j, true};
    heap_sort(&so, by_offset, n);
    uint64_t expect = 0;
    for (size_t i = 0; i < n; i++) {
        wisp_st_tensor t;
        uint64_t begin;
        check_entry(j, by_offset[i], st->data_len, &t, &begin, NULL);
        if (begin != expect) {
            const wisp_json_node *k = &j->nodes[by_offset[i]];
            int nl = (int)(k->end - k->start > NAME_SHOWN ? NAME_SHOWN : k->end - k->start);
            return wisp_fail(err, WISP_ERR_FORMAT, "tensor '%.*s' starts at %llu but the previous data ends at %llu (%s)",
                             nl, j->text + k->start, (unsigned long long)begin, (unsigned long long)expect,
                             begin < expect ? "overlap" : "hole");
        }
        expect = begin + t.nbytes;
    }
    if (expect != st->data_len)
        return wisp_fail(err, WISP_ERR_FORMAT, "the tensors cover %llu bytes but the data buffer has %llu (%s)",
                         (unsigned long long)expect, (unsigned long long)st->data_len,
                         expect < st->data_len ? "trailing bytes" : "truncated");

    /* unique names (the JSON reader's own duplicate check stops at 4096 keys) */
    so.by_offset = false;
    heap_sort(&so, by_name, n);
    for (size_t i = 1; i < n; i++)
        if (compare_names(j, by_name[i - 1], by_name[i]) == 0) {
            const wisp_json_node *k = &j->nodes[by_name[i]];
            int nl = (int)(k->end - k->start > NAME_SHOWN ? NAME_SHOWN : k->end - k->start);
            return wisp_fail(err, WISP_ERR_FORMAT, "tensor name '%.*s' appears twice", nl, j->text + k->start);
        }
    st->by_offset = by_offset;
    st->by_name = by_name;
    return WISP_OK;
}

static void fill(const wisp_safetensors *st, uint32_t key, wisp_st_tensor *t) {
    uint64_t begin = 0;
    check_entry(&st->json, key, st->data_len, t, &begin, NULL); /* validated at open */
    t->data = st->data + begin;
}

void wisp_st_tensor_at(const wisp_safetensors *st, size_t i, wisp_st_tensor *t) {
    fill(st, st->by_offset[i], t);
}

bool wisp_st_find(const wisp_safetensors *st, const char *name, wisp_st_tensor *t) {
    size_t lo = 0, hi = st->n_tensors, n = strlen(name);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const wisp_json_node *k = &st->json.nodes[st->by_name[mid]];
        size_t len = k->end - k->start;
        int c = memcmp(st->json.text + k->start, name, len < n ? len : n);
        if (!c) c = len < n ? -1 : len > n;
        if (c == 0) {
            fill(st, st->by_name[mid], t);
            return true;
        }
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return false;
}

bool wisp_st_metadata(const wisp_safetensors *st, const char *key, char *buf, size_t cap) {
    int64_t v = wisp_json_get(&st->json, st->metadata, key);
    if (v < 0) return false;
    wisp_json_string(&st->json, v, buf, cap);
    return true;
}

/* ---- writing ------------------------------------------------------------ */

/* Data bytes of an output tensor; false for an invalid dtype or shape. */
static bool out_bytes(const wisp_st_out_tensor *t, uint64_t *bytes) {
    if (t->n_dims > WISP_ST_MAX_DIMS) return false;
    uint64_t elems = 1;
    for (uint32_t i = 0; i < t->n_dims; i++) {
        if (t->shape[i] < 0 || (t->shape[i] && elems > UINT64_MAX / (uint64_t)t->shape[i])) return false;
        elems *= (uint64_t)t->shape[i];
    }
    return dtype_bytes(t->dtype, elems, bytes);
}

uint64_t wisp_st_out_bytes(const wisp_st_out_tensor *t) {
    uint64_t bytes;
    return out_bytes(t, &bytes) ? bytes : 0;
}

#define HEADER_CHUNK 4096

/* Hand what the JSON writer has buffered to the sink (NULL: only count). */
static wisp_status flush(wisp_json_writer *w, wisp_sink *sink, uint64_t *total, wisp_error *err) {
    if (w->overflow)
        return wisp_fail(err, WISP_ERR_ARG, "a safetensors header entry is longer than %d bytes", HEADER_CHUNK);
    wisp_status st = sink ? wisp_sink_write(sink, w->buf, w->len, err) : WISP_OK;
    *total += w->len;
    w->len = 0;
    return st;
}

/* The header JSON, streamed: the writer fills a small buffer that is flushed
 * after every entry, so no header-sized memory is needed. */
static wisp_status emit_header(wisp_sink *sink, const wisp_st_out_tensor *ts, size_t n, const char *const *meta,
                               size_t n_meta, uint64_t *len, wisp_error *err) {
    char buf[HEADER_CHUNK];
    wisp_json_writer w;
    wisp_jw_init(&w, buf, sizeof buf, false);
    uint64_t total = 0, offset = 0;
    wisp_status st;
    wisp_jw_begin_object(&w);
    if (n_meta) {
        wisp_jw_key(&w, "__metadata__");
        wisp_jw_begin_object(&w);
        for (size_t i = 0; i < n_meta; i++) {
            wisp_jw_key(&w, meta[2 * i]);
            wisp_jw_string(&w, meta[2 * i + 1]);
            if ((st = flush(&w, sink, &total, err))) return st;
        }
        wisp_jw_end_object(&w);
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t bytes = wisp_st_out_bytes(&ts[i]);
        wisp_jw_key(&w, ts[i].name);
        wisp_jw_begin_object(&w);
        wisp_jw_key(&w, "dtype");
        wisp_jw_string(&w, wisp_st_dtype_name(ts[i].dtype));
        wisp_jw_key(&w, "shape");
        wisp_jw_begin_array(&w);
        for (uint32_t d = 0; d < ts[i].n_dims; d++) wisp_jw_int(&w, ts[i].shape[d]);
        wisp_jw_end_array(&w);
        wisp_jw_key(&w, "data_offsets");
        wisp_jw_begin_array(&w);
        wisp_jw_int(&w, (int64_t)offset);
        wisp_jw_int(&w, (int64_t)(offset + bytes));
        wisp_jw_end_array(&w);
        wisp_jw_end_object(&w);
        offset += bytes;
        if ((st = flush(&w, sink, &total, err))) return st;
    }
    wisp_jw_end_object(&w);
    if ((st = flush(&w, sink, &total, err))) return st;
    *len = total;
    return WISP_OK;
}

wisp_status wisp_st_write_header(wisp_sink *sink, const wisp_st_out_tensor *ts, size_t n, const char *const *meta,
                                 size_t n_meta, wisp_error *err) {
    for (size_t i = 0; i < n; i++) {
        uint64_t bytes;
        if (!ts[i].name || !out_bytes(&ts[i], &bytes))
            return wisp_fail(err, WISP_ERR_ARG, "safetensors tensor %zu ('%s') has no name, an unknown dtype or an "
                                                "invalid shape",
                             i, ts[i].name ? ts[i].name : "");
        for (const char *c = ts[i].name; *c; c++)
            if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
                return wisp_fail(err, WISP_ERR_ARG, "tensor name '%s' would need JSON escapes, which readers may refuse",
                                 ts[i].name);
        if (strcmp(ts[i].name, "__metadata__") == 0)
            return wisp_fail(err, WISP_ERR_ARG, "a tensor cannot be named __metadata__");
        for (size_t k = 0; k < i; k++)
            if (strcmp(ts[k].name, ts[i].name) == 0)
                return wisp_fail(err, WISP_ERR_ARG, "tensor name '%s' appears twice", ts[i].name);
    }
    uint64_t len;
    wisp_status st = emit_header(NULL, ts, n, meta, n_meta, &len, err);
    if (st) return st;
    /* pad with spaces so the data buffer starts 8-byte aligned in the file */
    uint64_t pad = (8 - (8 + len) % 8) % 8, total = len + pad;
    uint8_t prefix[8];
    for (int i = 0; i < 8; i++) prefix[i] = (uint8_t)(total >> (8 * i));
    if ((st = wisp_sink_write(sink, prefix, 8, err))) return st;
    if ((st = emit_header(sink, ts, n, meta, n_meta, &len, err))) return st;
    static const char spaces[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
    return wisp_sink_write(sink, spaces, (size_t)pad, err);
}
