/* safetensors, read in place and written through a sink.
 *
 * The file: u64 little-endian header length N, N bytes of JSON (an object,
 * possibly padded with trailing spaces), then the data buffer. The JSON maps
 * each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}
 * (offsets relative to the data buffer) and may hold "__metadata__", an
 * object of strings. The reader enforces what the format promises and
 * nothing more:
 *   - N at most WISP_ST_MAX_HEADER bytes, and within the file;
 *   - strict JSON whose top level is an object;
 *   - every dtype recognised, every shape a list of non-negative integers,
 *     end - begin == elements x element size (exactly, without overflow);
 *   - the tensors, ordered by offset, cover the data buffer exactly: the
 *     first begins at 0, each begins where the previous ended, the last ends
 *     at the end of the file (no holes, no overlaps, no trailing bytes);
 *   - names unique; no alignment assumed (data may start at any address).
 * Tensor names with JSON escapes are refused, by the writer too (no real writer produces them,
 * and comparing them exactly would need unescaping every name).
 *
 * Memory: the caller provides it, sized by wisp_st_plan (the JSON node table
 * plus two index arrays, one in file order and one by name for lookups). */
#ifndef WISP_SAFETENSORS_H
#define WISP_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "sink.h"
#include "status.h"

#define WISP_ST_MAX_HEADER 100000000u /* 100 MB, as the reference implementation caps it */
#define WISP_ST_MAX_DIMS 16

typedef enum wisp_st_dtype {
    WISP_ST_BOOL, WISP_ST_U8, WISP_ST_I8, WISP_ST_I16, WISP_ST_U16, WISP_ST_F16, WISP_ST_BF16, WISP_ST_I32,
    WISP_ST_U32, WISP_ST_F32, WISP_ST_F64, WISP_ST_I64, WISP_ST_U64, WISP_ST_F8_E4M3, WISP_ST_F8_E5M2,
    WISP_ST_F8_E8M0, WISP_ST_F4, WISP_ST_F6_E2M3, WISP_ST_F6_E3M2, WISP_ST_C64,
    WISP_ST_DTYPE_COUNT
} wisp_st_dtype;

/* "F32" for WISP_ST_F32; NULL when out of range. */
const char *wisp_st_dtype_name(int dtype);
/* Bits per element (sub-byte types pack: F4 is 4, F6_* are 6). */
uint32_t wisp_st_dtype_bits(int dtype);
/* The wisp_type of F32/F16/BF16/F64/I8/I16/I32/I64 data, -1 for others. */
int wisp_st_dtype_to_wisp(int dtype);
/* The dtype of a wisp_type (F32/F16/BF16 and the plain integer types), -1 otherwise. */
int wisp_st_dtype_from_wisp(int type);

typedef struct wisp_safetensors {
    const uint8_t *bytes;
    size_t size;
    const char *header;   /* JSON text (inside bytes) */
    size_t header_len;
    const uint8_t *data;  /* the data buffer (inside bytes, any alignment) */
    uint64_t data_len;
    wisp_json json;
    size_t n_tensors;
    int64_t metadata;     /* JSON node of __metadata__, -1 if absent */
    const uint32_t *by_offset; /* key node of each tensor, in data order */
    const uint32_t *by_name;   /* the same, sorted by name bytes */
} wisp_safetensors;

typedef struct wisp_st_tensor {
    const char *name;     /* inside the header; NOT NUL-terminated */
    size_t name_len;
    int dtype;            /* wisp_st_dtype */
    uint32_t n_dims;
    int64_t shape[WISP_ST_MAX_DIMS]; /* outermost first (row-major) */
    uint64_t n_elements;
    const uint8_t *data;
    uint64_t nbytes;
} wisp_st_tensor;

typedef struct wisp_st_plan {
    size_t n_nodes;     /* JSON nodes of the header */
    size_t max_tensors; /* an upper bound, from the top-level members */
    size_t bytes;     /* memory wisp_st_open needs (for any 8-byte aligned block) */
} wisp_st_plan;

/* Check the framing and size the memory. Fails for a truncated file, an
 * oversized header, or malformed JSON. */
wisp_status wisp_st_plan_memory(const void *bytes, size_t size, wisp_st_plan *plan, wisp_error *err);

/* Validate everything listed above and index the tensors. `mem` (8-byte
 * aligned, at least plan.bytes) must outlive `st`, as must `bytes`. */
wisp_status wisp_st_open(wisp_safetensors *st, const void *bytes, size_t size, void *mem, size_t mem_bytes,
                         wisp_error *err);

/* The i-th tensor in data order (i < n_tensors). */
void wisp_st_tensor_at(const wisp_safetensors *st, size_t i, wisp_st_tensor *t);
/* Find by exact name (binary search); false if absent. */
bool wisp_st_find(const wisp_safetensors *st, const char *name, wisp_st_tensor *t);
/* A __metadata__ value, unescaped into buf (NUL-terminated); false if absent. */
bool wisp_st_metadata(const wisp_safetensors *st, const char *key, char *buf, size_t cap);

/* ---- writing ---------------------------------------------------------- */

typedef struct wisp_st_out_tensor {
    const char *name;
    int dtype;
    uint32_t n_dims;
    int64_t shape[WISP_ST_MAX_DIMS];
} wisp_st_out_tensor;

/* Bytes of a tensor's data; 0 for an invalid shape or dtype. */
uint64_t wisp_st_out_bytes(const wisp_st_out_tensor *t);

/* Write the length prefix and the JSON header for `n` tensors whose data
 * will follow in this order, back to back (offsets are assigned here), plus
 * `n_meta` metadata string pairs (meta[2k] = key, meta[2k+1] = value). The
 * header is padded with spaces so the data buffer starts at a multiple of 8
 * bytes. Afterwards the caller writes each tensor's wisp_st_out_bytes bytes
 * in order. Fails on duplicate names or invalid shapes. */
wisp_status wisp_st_write_header(wisp_sink *sink, const wisp_st_out_tensor *ts, size_t n, const char *const *meta,
                                 size_t n_meta, wisp_error *err);

#endif
