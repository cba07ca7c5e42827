/* Writing GGUF v3 through a sink, in file order: header, metadata, tensor
 * infos (offsets computed here), then each tensor's data padded to the
 * alignment. The caller streams data, so nothing is held in memory. */
#ifndef WISP_GGUF_WRITE_H
#define WISP_GGUF_WRITE_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"
#include "sink.h"

typedef struct wisp_gguf_out_tensor {
    const char *name;
    uint32_t n_dims;
    int64_t ne[WISP_GGUF_MAX_DIMS];
    uint32_t type;
} wisp_gguf_out_tensor;

wisp_status wisp_gguf_write_header(wisp_sink *s, uint64_t n_tensors, uint64_t n_kv, wisp_error *err);

wisp_status wisp_gguf_write_kv_str(wisp_sink *s, const char *key, const char *value, wisp_error *err);
wisp_status wisp_gguf_write_kv_strn(wisp_sink *s, const char *key, const char *value, uint64_t len, wisp_error *err);
wisp_status wisp_gguf_write_kv_u32(wisp_sink *s, const char *key, uint32_t value, wisp_error *err);
wisp_status wisp_gguf_write_kv_i32(wisp_sink *s, const char *key, int32_t value, wisp_error *err);
wisp_status wisp_gguf_write_kv_f32(wisp_sink *s, const char *key, float value, wisp_error *err);
wisp_status wisp_gguf_write_kv_bool(wisp_sink *s, const char *key, bool value, wisp_error *err);
/* An array of fixed-size elements (u8..f64), `count` elements at `data` (little-endian). */
wisp_status wisp_gguf_write_kv_array(wisp_sink *s, const char *key, uint32_t elem_type, const void *data,
                                     uint64_t count, wisp_error *err);
/* A string array, element i produced by get(user, i). */
wisp_status wisp_gguf_write_kv_str_array(wisp_sink *s, const char *key, uint64_t count,
                                         wisp_str (*get)(void *user, uint64_t i), void *user, wisp_error *err);
/* Start an array whose `count` elements the caller then writes itself with
 * wisp_sink_write (for streaming large arrays without a buffer). */
wisp_status wisp_gguf_write_kv_array_begin(wisp_sink *s, const char *key, uint32_t elem_type, uint64_t count,
                                           wisp_error *err);
/* Copy a pair read from another GGUF, unchanged. */
wisp_status wisp_gguf_write_kv_copy(wisp_sink *s, const wisp_gguf_kv *kv, wisp_error *err);

/* Bytes of a tensor's data. */
uint64_t wisp_gguf_tensor_bytes(const wisp_gguf_out_tensor *t);

/* Bytes a tensor occupies in the data section, padding included. */
uint64_t wisp_gguf_tensor_padded_bytes(const wisp_gguf_out_tensor *t, uint32_t alignment);

/* One tensor info with a given data-section offset. */
wisp_status wisp_gguf_write_tensor_info(wisp_sink *s, const wisp_gguf_out_tensor *t, uint64_t offset, wisp_error *err);

/* Write all tensor infos (offsets assigned in order, each aligned) and pad
 * to the start of the data section. */
wisp_status wisp_gguf_write_tensor_infos(wisp_sink *s, const wisp_gguf_out_tensor *ts, uint64_t n, uint32_t alignment,
                                         wisp_error *err);

/* After the infos: write one tensor's bytes (may be called repeatedly for
 * parts of it), then wisp_sink_pad(s, alignment) before the next tensor. */

#endif
