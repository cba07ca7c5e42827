#include "gguf_write.h"

#include <string.h>

#include "half.h"
#include "types.h"

static wisp_status put_u32(wisp_sink *s, uint32_t v, wisp_error *err) {
    uint8_t b[4];
    wisp_store_u32(b, v);
    return wisp_sink_write(s, b, 4, err);
}

static wisp_status put_u64(wisp_sink *s, uint64_t v, wisp_error *err) {
    uint8_t b[8];
    memcpy(b, &v, 8);
    return wisp_sink_write(s, b, 8, err);
}

static wisp_status put_str(wisp_sink *s, const char *str, uint64_t len, wisp_error *err) {
    wisp_status st = put_u64(s, len, err);
    return st ? st : wisp_sink_write(s, str, (size_t)len, err);
}

static wisp_status put_key(wisp_sink *s, const char *key, uint32_t type, wisp_error *err) {
    wisp_status st = put_str(s, key, strlen(key), err);
    return st ? st : put_u32(s, type, err);
}

wisp_status wisp_gguf_write_header(wisp_sink *s, uint64_t n_tensors, uint64_t n_kv, wisp_error *err) {
    wisp_status st;
    if ((st = wisp_sink_write(s, "GGUF", 4, err))) return st;
    if ((st = put_u32(s, 3, err))) return st;
    if ((st = put_u64(s, n_tensors, err))) return st;
    return put_u64(s, n_kv, err);
}

wisp_status wisp_gguf_write_kv_strn(wisp_sink *s, const char *key, const char *value, uint64_t len, wisp_error *err) {
    wisp_status st = put_key(s, key, WISP_GGUF_STRING, err);
    return st ? st : put_str(s, value, len, err);
}

wisp_status wisp_gguf_write_kv_str(wisp_sink *s, const char *key, const char *value, wisp_error *err) {
    return wisp_gguf_write_kv_strn(s, key, value, strlen(value), err);
}

wisp_status wisp_gguf_write_kv_u32(wisp_sink *s, const char *key, uint32_t value, wisp_error *err) {
    wisp_status st = put_key(s, key, WISP_GGUF_U32, err);
    return st ? st : put_u32(s, value, err);
}

wisp_status wisp_gguf_write_kv_i32(wisp_sink *s, const char *key, int32_t value, wisp_error *err) {
    wisp_status st = put_key(s, key, WISP_GGUF_I32, err);
    return st ? st : put_u32(s, (uint32_t)value, err);
}

wisp_status wisp_gguf_write_kv_f32(wisp_sink *s, const char *key, float value, wisp_error *err) {
    wisp_status st = put_key(s, key, WISP_GGUF_F32, err);
    return st ? st : put_u32(s, wisp_f32_bits(value), err);
}

wisp_status wisp_gguf_write_kv_bool(wisp_sink *s, const char *key, bool value, wisp_error *err) {
    wisp_status st = put_key(s, key, WISP_GGUF_BOOL, err);
    uint8_t b = value ? 1 : 0;
    return st ? st : wisp_sink_write(s, &b, 1, err);
}

wisp_status wisp_gguf_write_kv_array_begin(wisp_sink *s, const char *key, uint32_t elem_type, uint64_t count,
                                           wisp_error *err) {
    wisp_status st;
    if ((st = put_key(s, key, WISP_GGUF_ARRAY, err))) return st;
    if ((st = put_u32(s, elem_type, err))) return st;
    return put_u64(s, count, err);
}

wisp_status wisp_gguf_write_kv_array(wisp_sink *s, const char *key, uint32_t elem_type, const void *data,
                                     uint64_t count, wisp_error *err) {
    size_t es = wisp_gguf_vtype_size(elem_type);
    if (!es) return wisp_fail(err, WISP_ERR_ARG, "array '%s': element type %u is not a fixed-size type", key, elem_type);
    wisp_status st = wisp_gguf_write_kv_array_begin(s, key, elem_type, count, err);
    return st ? st : wisp_sink_write(s, data, (size_t)(count * es), err);
}

wisp_status wisp_gguf_write_kv_str_array(wisp_sink *s, const char *key, uint64_t count,
                                         wisp_str (*get)(void *user, uint64_t i), void *user, wisp_error *err) {
    wisp_status st = wisp_gguf_write_kv_array_begin(s, key, WISP_GGUF_STRING, count, err);
    if (st) return st;
    for (uint64_t i = 0; i < count; i++) {
        wisp_str v = get(user, i);
        if ((st = put_str(s, v.ptr, v.len, err))) return st;
    }
    return WISP_OK;
}

wisp_status wisp_gguf_write_kv_copy(wisp_sink *s, const wisp_gguf_kv *kv, wisp_error *err) {
    wisp_status st;
    if ((st = put_u64(s, kv->key.len, err))) return st;
    if ((st = wisp_sink_write(s, kv->key.ptr, (size_t)kv->key.len, err))) return st;
    if ((st = put_u32(s, kv->type, err))) return st;
    if (kv->type == WISP_GGUF_ARRAY) {
        if ((st = put_u32(s, kv->elem_type, err))) return st;
        if ((st = put_u64(s, kv->count, err))) return st;
    }
    return wisp_sink_write(s, kv->value, kv->value_bytes, err);
}

uint64_t wisp_gguf_tensor_bytes(const wisp_gguf_out_tensor *t) {
    const wisp_type_info *ti = wisp_type_info_of((int)t->type);
    if (!ti) return 0;
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) n *= (uint64_t)t->ne[d];
    return n / (uint64_t)ti->block_elems * (uint64_t)ti->block_bytes;
}

uint64_t wisp_gguf_tensor_padded_bytes(const wisp_gguf_out_tensor *t, uint32_t alignment) {
    uint64_t bytes = wisp_gguf_tensor_bytes(t);
    return bytes + (alignment - bytes % alignment) % alignment;
}

wisp_status wisp_gguf_write_tensor_info(wisp_sink *s, const wisp_gguf_out_tensor *t, uint64_t offset, wisp_error *err) {
    const wisp_type_info *ti = wisp_type_info_of((int)t->type);
    if (!ti || t->n_dims < 1 || t->n_dims > WISP_GGUF_MAX_DIMS || t->ne[0] % ti->block_elems)
        return wisp_fail(err, WISP_ERR_ARG, "tensor '%s': invalid type or shape for writing", t->name);
    wisp_status st;
    if ((st = put_str(s, t->name, strlen(t->name), err))) return st;
    if ((st = put_u32(s, t->n_dims, err))) return st;
    for (uint32_t d = 0; d < t->n_dims; d++)
        if ((st = put_u64(s, (uint64_t)t->ne[d], err))) return st;
    if ((st = put_u32(s, t->type, err))) return st;
    return put_u64(s, offset, err);
}

wisp_status wisp_gguf_write_tensor_infos(wisp_sink *s, const wisp_gguf_out_tensor *ts, uint64_t n, uint32_t alignment,
                                         wisp_error *err) {
    uint64_t offset = 0;
    for (uint64_t i = 0; i < n; i++) {
        wisp_status st = wisp_gguf_write_tensor_info(s, &ts[i], offset, err);
        if (st) return st;
        offset += wisp_gguf_tensor_padded_bytes(&ts[i], alignment);
    }
    return wisp_sink_pad(s, alignment, err);
}
