/* llama.cpp's gguf-split models: one model over N GGUF files. Each shard is
 * a complete GGUF (its own header, its own data section that its tensor
 * offsets are relative to); the first carries the model's metadata, every
 * shard carries split.no / split.count / split.tensors.count. Linking only
 * checks the set and records it: tensors stay where they lie, in each
 * shard's bytes, and the walks of gguf.c follow the links. */
#include <string.h>

#include "gguf.h"

#define KEY_NO "split.no"
#define KEY_COUNT "split.count"
#define KEY_TENSORS "split.tensors.count"

static wisp_status fail_at(uint32_t *bad, uint32_t k, wisp_status s) {
    if (bad) *bad = k;
    return s;
}

/* An integer split.* key of shard k (1-based in messages, like the file names). */
static wisp_status split_int(const wisp_gguf *g, uint32_t k, uint32_t n, const char *key, int64_t *out,
                             wisp_error *err) {
    wisp_gguf_kv kv;
    if (!wisp_gguf_find_kv(g, key, &kv))
        return wisp_fail(err, WISP_ERR_FORMAT, "shard %u of %u has no '%s': not a gguf-split shard", k + 1, n, key);
    if (kv.type == WISP_GGUF_ARRAY || !wisp_gguf_kv_int(&kv, 0, out) || *out < 0)
        return wisp_fail(err, WISP_ERR_FORMAT, "shard %u of %u: '%s' is not a non-negative integer", k + 1, n, key);
    return WISP_OK;
}

static bool is_split_key(wisp_str key) {
    return key.len > 6 && memcmp(key.ptr, "split.", 6) == 0;
}

/* Whether `name` is a tensor of shards[0..k). */
static bool in_earlier_shard(const wisp_gguf *shards, uint32_t k, wisp_str name, uint32_t *where) {
    for (uint32_t j = 0; j < k; j++) {
        size_t cur = 0;
        wisp_gguf_tensor t;
        while (wisp_gguf_next_tensor(&shards[j], &cur, &t))
            if (t.name.len == name.len && memcmp(t.name.ptr, name.ptr, name.len) == 0) {
                *where = j;
                return true;
            }
    }
    return false;
}

/* One hash bit per name: only a possible repeat pays for the scan of the
 * earlier shards (the same filter idea as wisp_gguf_open's). */
#define NAME_FILTER_BYTES 1024
static bool maybe_seen(uint8_t *filter, wisp_str name) {
    uint32_t h = 2166136261u;
    for (uint64_t i = 0; i < name.len; i++) h = (h ^ (uint8_t)name.ptr[i]) * 16777619u;
    h %= NAME_FILTER_BYTES * 8;
    bool was = (filter[h >> 3] >> (h & 7)) & 1;
    filter[h >> 3] |= (uint8_t)(1u << (h & 7));
    return was;
}

wisp_status wisp_gguf_link_shards(wisp_gguf *shards, uint32_t n, uint32_t *bad_shard, wisp_error *err) {
    if (!shards || n == 0 || n > 65535)
        return fail_at(bad_shard, 0, wisp_fail(err, WISP_ERR_ARG, "a split model needs 1..65535 shards (%u given)", n));
    for (uint32_t k = 0; k < n; k++) { /* until linked, each walk covers its own file */
        shards[k].shards = NULL;
        shards[k].n_shards = 0;
    }
    int64_t total = 0, count;
    wisp_status s;
    for (uint32_t k = 0; k < n; k++) {
        const wisp_gguf *g = &shards[k];
        int64_t no;
        if ((s = split_int(g, k, n, KEY_COUNT, &count, err))) return fail_at(bad_shard, k, s);
        if (count != (int64_t)n)
            return fail_at(bad_shard, k, wisp_fail(err, WISP_ERR_FORMAT, "shard %u of %u says '%s' = %lld", k + 1, n,
                                                   KEY_COUNT, (long long)count));
        if ((s = split_int(g, k, n, KEY_NO, &no, err))) return fail_at(bad_shard, k, s);
        if (no != (int64_t)k)
            return fail_at(bad_shard, k, wisp_fail(err, WISP_ERR_FORMAT,
                                                   "shard %u of %u has '%s' = %lld (shard %lld): each shard must be "
                                                   "given once, in order", k + 1, n, KEY_NO, (long long)no,
                                                   (long long)no + 1));
        int64_t want;
        if ((s = split_int(g, k, n, KEY_TENSORS, &want, err))) return fail_at(bad_shard, k, s);
        if (k == 0) total = want;
        else if (want != total)
            return fail_at(bad_shard, k, wisp_fail(err, WISP_ERR_FORMAT, "shard %u of %u says '%s' = %lld, shard 1 says %lld",
                                                   k + 1, n, KEY_TENSORS, (long long)want, (long long)total));
        if (k == 0) continue;
        /* the model's metadata is the first shard's: anything else in a later
         * one would be ignored, so it is refused */
        size_t cur = 0;
        wisp_gguf_kv kv;
        while (wisp_gguf_next_kv(g, &cur, &kv))
            if (!is_split_key(kv.key) && !wisp_str_eq(kv.key, "general.alignment"))
                return fail_at(bad_shard, k, wisp_fail(err, WISP_ERR_UNSUPPORTED,
                                                       "shard %u of %u has metadata '%.*s': wisp takes a split model's "
                                                       "metadata from shard 1 only", k + 1, n,
                                                       (int)(kv.key.len > 96 ? 96 : kv.key.len), kv.key.ptr));
    }
    uint64_t sum = 0;
    for (uint32_t k = 0; k < n; k++) sum += shards[k].n_tensors;
    if (sum != (uint64_t)total)
        return fail_at(bad_shard, 0, wisp_fail(err, WISP_ERR_FORMAT,
                                               "the %u shards hold %llu tensors but '%s' = %lld", n,
                                               (unsigned long long)sum, KEY_TENSORS, (long long)total));
    uint8_t filter[NAME_FILTER_BYTES] = {0};
    for (uint32_t k = 0; k < n; k++) {
        size_t cur = 0;
        wisp_gguf_tensor t;
        while (wisp_gguf_next_tensor(&shards[k], &cur, &t)) {
            uint32_t j;
            if (maybe_seen(filter, t.name) && in_earlier_shard(shards, k, t.name, &j))
                return fail_at(bad_shard, k, wisp_fail(err, WISP_ERR_FORMAT, "tensor '%.*s' is in shard %u and in shard %u",
                                                       (int)(t.name.len > 96 ? 96 : t.name.len), t.name.ptr, j + 1, k + 1));
        }
    }
    if (n > 1) { /* only the first shard stands for the model */
        shards[0].shards = shards;
        shards[0].n_shards = n;
    }
    return WISP_OK;
}

wisp_status wisp_gguf_check_whole(const wisp_gguf *g, wisp_error *err) {
    if (wisp_gguf_shard_count(g) > 1) return WISP_OK;
    uint32_t count;
    if (!wisp_gguf_get_u32(g, KEY_COUNT, &count) || count <= 1) return WISP_OK;
    uint32_t no = 0;
    wisp_gguf_get_u32(g, KEY_NO, &no);
    return wisp_fail(err, WISP_ERR_UNSUPPORTED,
                     "this file is shard %u of %u of a split model ('%s' = %u): open all its shards together "
                     "(NAME-00001-of-%05u.gguf ...)", no + 1, count, KEY_COUNT, count, count);
}
