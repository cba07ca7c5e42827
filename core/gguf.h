/* GGUF v2/v3, read in place. `wisp_gguf_open` walks and bounds-checks the
 * whole header once (every length, count, offset and tensor extent against the
 * buffer size); afterwards lookups trust those checks and never copy data.
 * Nothing is allocated: the parsed view is a fixed-size struct, and strings
 * point into the caller's bytes (they are NOT NUL-terminated). */
#ifndef WISP_GGUF_H
#define WISP_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef enum wisp_gguf_vtype {
    WISP_GGUF_U8 = 0,
    WISP_GGUF_I8 = 1,
    WISP_GGUF_U16 = 2,
    WISP_GGUF_I16 = 3,
    WISP_GGUF_U32 = 4,
    WISP_GGUF_I32 = 5,
    WISP_GGUF_F32 = 6,
    WISP_GGUF_BOOL = 7,
    WISP_GGUF_STRING = 8,
    WISP_GGUF_ARRAY = 9,
    WISP_GGUF_U64 = 10,
    WISP_GGUF_I64 = 11,
    WISP_GGUF_F64 = 12,
    WISP_GGUF_VTYPE_COUNT = 13
} wisp_gguf_vtype;

#define WISP_GGUF_MAX_DIMS 4
#define WISP_GGUF_DEFAULT_ALIGNMENT 32

/* A byte string inside the file. */
typedef struct wisp_str {
    const char *ptr;
    uint64_t len;
} wisp_str;

bool wisp_str_eq(wisp_str s, const char *cstr);

typedef struct wisp_gguf {
    const uint8_t *bytes;
    size_t size;
    uint32_t version;
    uint64_t n_tensors;
    uint64_t n_kv;
    size_t kv_start;      /* offset of the first metadata pair */
    size_t tensors_start; /* offset of the first tensor info */
    size_t data_start;    /* offset of the (aligned) data section */
    uint32_t alignment;
    /* llama.cpp's gguf-split: the first shard of a model split over several
     * files links every shard here (wisp_gguf_link_shards); tensor walks and
     * lookups then cover all of them, each tensor pointing into its own
     * shard's bytes, while metadata comes from the first shard alone. NULL
     * for a model in one file. n_tensors and size stay this file's own. */
    const struct wisp_gguf *shards; /* [n_shards], shards[0] being this file */
    uint32_t n_shards;
} wisp_gguf;

typedef struct wisp_gguf_kv {
    wisp_str key;
    uint32_t type;       /* wisp_gguf_vtype */
    uint32_t elem_type;  /* for arrays: element type */
    uint64_t count;      /* for arrays: element count; 1 otherwise */
    const uint8_t *value;/* first byte of the value (for arrays: of the first element) */
    size_t value_bytes;  /* total bytes of the value (elements only, for arrays) */
} wisp_gguf_kv;

typedef struct wisp_gguf_tensor {
    wisp_str name;
    uint32_t n_dims;
    int64_t ne[WISP_GGUF_MAX_DIMS]; /* unused dims are 1; ne[0] is the row length */
    uint32_t type;                  /* wisp_type */
    uint64_t offset;                /* relative to the data section */
    const void *data;               /* bytes + data_start + offset */
    uint64_t nbytes;
} wisp_gguf_tensor;

/* wisp_gguf_open (validate and index a GGUF in place) and wisp_gguf_size are
 * public: wisp.h, which status.h brings in. */

/* Link the n shards of a gguf-split model, each already opened with
 * wisp_gguf_open, given in file order (NAME-00001-of-0000N first). Checks
 * that split.count = n in every shard, that shard i has split.no = i (so each
 * is present exactly once), that the shards' tensor counts add up to
 * split.tensors.count, that no tensor name appears in two shards, and that
 * the later shards hold no metadata but split.* (and general.alignment): the
 * model's metadata is the first shard's. On success shards[0] is the whole
 * model (pass it wherever one file's wisp_gguf goes); `shards` must outlive
 * it and every copy. On failure *bad_shard (if given) is the index of the
 * shard the message names. n = 1 links a lone file with split.count 1. */
wisp_status wisp_gguf_link_shards(wisp_gguf *shards, uint32_t n, uint32_t *bad_shard, wisp_error *err);

/* Shards of the model g is (1 for one file) and its tensors over all of them. */
uint32_t wisp_gguf_shard_count(const wisp_gguf *g);
uint64_t wisp_gguf_tensor_count(const wisp_gguf *g);
/* File bytes over all shards. */
uint64_t wisp_gguf_total_bytes(const wisp_gguf *g);

/* Refuse a shard of a split model opened on its own (split.count > 1, not
 * linked): its tensors are only part of the model. Named, never guessed. */
wisp_status wisp_gguf_check_whole(const wisp_gguf *g, wisp_error *err);

/* Bytes of a value of scalar type `t` (0 for string/array/invalid). */
size_t wisp_gguf_vtype_size(uint32_t t);
const char *wisp_gguf_vtype_name(uint32_t t);

/* Sequential walks (O(1) per step, O(shards) for a split model). Start with
 * cursor = 0; return false at end. The tensor walk covers every linked shard,
 * in shard order; its cursor is a position in the shards' headers laid end
 * to end. */
bool wisp_gguf_next_kv(const wisp_gguf *g, size_t *cursor, wisp_gguf_kv *kv);
bool wisp_gguf_next_tensor(const wisp_gguf *g, size_t *cursor, wisp_gguf_tensor *t);

/* Lookups by name (linear scans: metadata and tensor lists are short). */
bool wisp_gguf_find_kv(const wisp_gguf *g, const char *key, wisp_gguf_kv *kv);
bool wisp_gguf_find_tensor(const wisp_gguf *g, const char *name, wisp_gguf_tensor *t);

/* Typed getters: false if the key is absent or not convertible. Integers of
 * any width (and bool) convert when the value fits; floats accept f32/f64. */
bool wisp_gguf_get_u64(const wisp_gguf *g, const char *key, uint64_t *out);
bool wisp_gguf_get_u32(const wisp_gguf *g, const char *key, uint32_t *out);
bool wisp_gguf_get_i64(const wisp_gguf *g, const char *key, int64_t *out);
bool wisp_gguf_get_f32(const wisp_gguf *g, const char *key, float *out);
bool wisp_gguf_get_bool(const wisp_gguf *g, const char *key, bool *out);
bool wisp_gguf_get_str(const wisp_gguf *g, const char *key, wisp_str *out);

/* Scalar value of a kv (or of element i of a numeric array) as a double /
 * int64; false if not numeric. */
bool wisp_gguf_kv_number(const wisp_gguf_kv *kv, uint64_t i, double *out);
bool wisp_gguf_kv_int(const wisp_gguf_kv *kv, uint64_t i, int64_t *out);

/* Walk the strings of a string array: start with *pos = kv->value; each call
 * returns the next string and advances. The open-time checks guarantee that
 * exactly kv->count strings fit. */
wisp_str wisp_gguf_next_array_str(const uint8_t **pos);

#endif
