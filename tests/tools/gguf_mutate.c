/* gguf_mutate IN OUT MODE ... : write a damaged copy of a GGUF for error tests.
 *   truncate N          keep the first N bytes
 *   flip SEED COUNT     flip COUNT random bits (seeded) anywhere in the file
 *   flip-header SEED COUNT   flip bits only before the data section
 *   shape TENSOR        add 1 to ne[1] (or ne[0] for vectors) of TENSOR
 *   type TENSOR ID      change TENSOR's type id
 *   u32 KEY VALUE       overwrite an integer metadata value in place
 *   nan TENSOR INDEX    make element INDEX of TENSOR a NaN (for a quantized
 *   inf TENSOR INDEX    type: the fp16 scale d of the block holding it, so
 *                       the whole block dequantizes to NaN / Inf)
 * Works on a copy; IN is never modified. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf.h"
#include "half.h"
#include "types.h"

static uint64_t rng_state;
static uint64_t next_rand(void) {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Byte offset, within a block, of the fp16 scale d of each block type. */
static int scale_offset(int type) {
    switch (type) {
    case WISP_TYPE_Q4_0: case WISP_TYPE_Q4_1: case WISP_TYPE_Q5_0: case WISP_TYPE_Q5_1: case WISP_TYPE_Q8_0:
    case WISP_TYPE_Q4_K: case WISP_TYPE_Q5_K: case WISP_TYPE_IQ4_NL: return 0;
    case WISP_TYPE_Q2_K: return 80;
    case WISP_TYPE_Q3_K: return 108;
    case WISP_TYPE_Q6_K: return 208;
    default: return -1;
    }
}

/* Write a NaN or an Inf over element `index` of tensor `t` (inside b). */
static bool poison(unsigned char *b, const wisp_gguf *g, const wisp_gguf_tensor *t, uint64_t index, bool nan) {
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) n *= (uint64_t)t->ne[d];
    if (index >= n) return false;
    unsigned char *data = b + ((const uint8_t *)t->data - g->bytes);
    if (t->type == WISP_TYPE_F32) {
        wisp_store_u32(data + 4 * index, nan ? 0x7fc00000u : 0x7f800000u);
    } else if (t->type == WISP_TYPE_F16) {
        wisp_store_u16(data + 2 * index, nan ? 0x7e00u : 0x7c00u);
    } else if (t->type == WISP_TYPE_BF16) {
        wisp_store_u16(data + 2 * index, nan ? 0x7fc0u : 0x7f80u);
    } else {
        const wisp_type_info *ti = wisp_type_info_of((int)t->type);
        int off = scale_offset((int)t->type);
        if (!ti || off < 0) return false;
        wisp_store_u16(data + index / (uint64_t)ti->block_elems * (uint64_t)ti->block_bytes + (uint64_t)off,
                       nan ? 0x7e00u : 0x7c00u);
    }
    return true;
}

/* Offset of the ne[] fields of a tensor info (the reader gives us the name pointer). */
static size_t tensor_info_offset(const wisp_gguf *g, const char *name) {
    size_t cur = 0;
    wisp_gguf_tensor t;
    while (wisp_gguf_next_tensor(g, &cur, &t))
        if (wisp_str_eq(t.name, name)) return (size_t)((const uint8_t *)t.name.ptr - g->bytes) + t.name.len;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: gguf_mutate IN OUT MODE ARGS...\n");
        return 2;
    }
    size_t n;
    unsigned char *b = read_file(argv[1], &n);
    if (!b) { fprintf(stderr, "cannot read %s\n", argv[1]); return 1; }
    const char *mode = argv[3];
    wisp_gguf g;
    wisp_error err;
    bool parsed = wisp_gguf_open(&g, b, n, &err) == WISP_OK;
    if (strcmp(mode, "truncate") == 0 && argc == 5) {
        size_t keep = strtoull(argv[4], NULL, 10);
        if (keep < n) n = keep;
    } else if ((strcmp(mode, "flip") == 0 || strcmp(mode, "flip-header") == 0) && argc == 6) {
        rng_state = strtoull(argv[4], NULL, 10);
        int count = atoi(argv[5]);
        size_t limit = strcmp(mode, "flip") == 0 || !parsed ? n : g.data_start;
        for (int i = 0; i < count && limit; i++) {
            size_t at = next_rand() % limit;
            b[at] ^= (unsigned char)(1u << (next_rand() % 8));
        }
    } else if (strcmp(mode, "shape") == 0 && argc == 5 && parsed) {
        size_t off = tensor_info_offset(&g, argv[4]);
        if (!off) { fprintf(stderr, "no tensor %s\n", argv[4]); return 1; }
        uint32_t nd = wisp_load_u32(b + off);
        size_t at = off + 4 + (nd > 1 ? 8 : 0);
        uint64_t v = wisp_load_u64(b + at) + 1;
        memcpy(b + at, &v, 8);
    } else if (strcmp(mode, "type") == 0 && argc == 6 && parsed) {
        size_t off = tensor_info_offset(&g, argv[4]);
        if (!off) { fprintf(stderr, "no tensor %s\n", argv[4]); return 1; }
        uint32_t nd = wisp_load_u32(b + off);
        wisp_store_u32(b + off + 4 + 8 * nd, (uint32_t)atoi(argv[5]));
    } else if (strcmp(mode, "u32") == 0 && argc == 6 && parsed) {
        wisp_gguf_kv kv;
        if (!wisp_gguf_find_kv(&g, argv[4], &kv) || kv.value_bytes != 4) { fprintf(stderr, "no u32 key %s\n", argv[4]); return 1; }
        wisp_store_u32(b + (kv.value - g.bytes), (uint32_t)strtoul(argv[5], NULL, 10));
    } else if ((strcmp(mode, "nan") == 0 || strcmp(mode, "inf") == 0) && argc == 6 && parsed) {
        wisp_gguf_tensor t;
        if (!wisp_gguf_find_tensor(&g, argv[4], &t) || !poison(b, &g, &t, strtoull(argv[5], NULL, 10), mode[0] == 'n')) {
            fprintf(stderr, "no tensor %s, index out of range, or a type without a block scale\n", argv[4]);
            return 1;
        }
    } else {
        fprintf(stderr, "bad mode or arguments (or the input does not parse)\n");
        return 2;
    }
    FILE *f = fopen(argv[2], "wb");
    if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0) { fprintf(stderr, "cannot write %s\n", argv[2]); return 1; }
    free(b);
    return 0;
}
