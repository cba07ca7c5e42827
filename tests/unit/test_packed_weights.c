/* Packed weights (kernels.h wisp_packing) against the scalar reference, on
 * every x86 level the CPU has that packs a type: the product over the
 * packed form equals wisp_matmul_reference over the original bit for bit,
 * for rows around the 16-row groups (1..100), rows of 1..48 blocks and the
 * longest packed (16384 elements), 1..19
 * activation rows around the 8-row passes (more than one pass over
 * matrices larger than a tile: the groups then go tile by tile), realistic and raw-byte weights,
 * any row range (group-aligned splits and ragged ones), packing in pieces;
 * nothing outside [r0, r1) is written; a packed weight is as large as the
 * original rounded up to whole groups, and rows too long are left in place;
 * every block reads back from the packed form as the original's bytes. */
#include "check.h"
#include "half.h"
#include "kernels.h"
#include "quant.h"
#include "simd.h"
#include "test_rng.h"
#include "types.h"

#include <stdlib.h>
#include <string.h>

#define MAX_TOK 19
#define SENTINEL -12345.0f

/* rows x cols weights of `type`: quantized normals, or random bytes with
 * sane fp16 scales (every level pattern, Q8_0's -128 included, and
 * every K-quant sub-block scale and min). */
static uint8_t *make_weights(int type, int64_t rows, int64_t cols, int raw) {
    const wisp_type_info *ti = wisp_type_info_of(type);
    size_t rb = wisp_type_row_bytes(type, cols);
    uint8_t *w = malloc(rb * (size_t)rows);
    float *row = malloc(sizeof(float) * (size_t)cols);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *wr = w + (size_t)r * rb;
        if (raw) {
            for (size_t i = 0; i < rb; i++) wr[i] = (uint8_t)(rng_next() >> 40);
            /* where the fp16 scales lie: d first, Q4_K's dmin next, Q6_K's d last */
            const size_t d_at = type == WISP_TYPE_Q6_K ? 208 : 0, scales = type == WISP_TYPE_Q4_K ? 2 : 1;
            for (int64_t b = 0; b < cols / ti->block_elems; b++)
                for (size_t s = 0; s < scales; s++)
                    wisp_store_u16(wr + (size_t)b * ti->block_bytes + d_at + 2 * s, wisp_f32_to_f16(0.01f * rng_normal()));
        } else {
            for (int64_t i = 0; i < cols; i++) row[i] = 0.05f * rng_normal();
            ti->quantize(row, wr, cols);
        }
    }
    free(row);
    return w;
}

static void check_case(const wisp_kernels *k, int type, int64_t rows, int64_t cols, int raw) {
    const wisp_packing *pk = &k->packing[type];
    const char *tn = wisp_type_info_of(type)->name;
    const int act = wisp_type_info_of(type)->act_type;
    const size_t rb = wisp_type_row_bytes(type, cols), xb = wisp_type_row_bytes(act, cols);
    const int64_t groups = (rows + WISP_PACK_GROUP - 1) / WISP_PACK_GROUP;
    size_t bytes = pk->bytes(rows, cols);
    CHECK(bytes == (size_t)groups * WISP_PACK_GROUP * rb, "%s %s %lldx%lld: packed %zu bytes, want %zu", k->name, tn,
          (long long)rows, (long long)cols, bytes, (size_t)groups * WISP_PACK_GROUP * rb);
    if (!bytes) return;
    uint8_t *w = make_weights(type, rows, cols, raw);
    uint8_t *packed = malloc(bytes);
    memset(packed, 0xa5, bytes);
    int64_t mid = groups / 2; /* packed in two pieces, the second first */
    pk->pack(packed, w, rb, rows, cols, mid, groups);
    pk->pack(packed, w, rb, rows, cols, 0, mid);
    /* every block of every row reads back as the original's bytes (the tied embedding's rows) */
    const wisp_type_info *info = wisp_type_info_of(type);
    int64_t unlike = 0;
    uint8_t back[256];
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < cols / info->block_elems; b++) {
            memset(back, 0x5a, sizeof back);
            pk->unpack_block(packed, cols, r, b, back);
            unlike += memcmp(back, w + (size_t)r * rb + (size_t)b * info->block_bytes, info->block_bytes) != 0;
        }
    CHECK(!unlike, "%s %s %s %lldx%lld: %lld blocks read back from the packed form differ from the original", k->name,
          tn, raw ? "raw" : "quantized", (long long)rows, (long long)cols, (long long)unlike);

    float *xf = malloc(sizeof(float) * (size_t)cols);
    uint8_t *x = malloc(xb * MAX_TOK);
    for (int t = 0; t < MAX_TOK; t++) {
        for (int64_t i = 0; i < cols; i++) xf[i] = rng_normal();
        wisp_type_info_of(act)->quantize(xf, x + (size_t)t * xb, cols);
    }
    float *want = malloc(sizeof(float) * (size_t)rows * MAX_TOK), *got = malloc(sizeof(float) * (size_t)rows * MAX_TOK);
    static const int toks[] = {1, 2, 7, 8, 9, MAX_TOK};
    for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++) {
        const int n_tok = toks[ti];
        wisp_matmul_args ref = {w, rb, type, cols, x, xb, n_tok, want, rows};
        wisp_matmul_reference(&ref, 0, rows);
        /* whole, split at a group boundary (second half first), and a ragged range */
        const int64_t cut = rows > WISP_PACK_GROUP ? WISP_PACK_GROUP : rows;
        const int64_t ranges[4][2] = {{0, rows}, {cut, rows}, {0, cut}, {rows / 3, rows - rows / 4}};
        for (int pass = 0; pass < 2; pass++) {
            for (size_t i = 0; i < (size_t)rows * MAX_TOK; i++) got[i] = SENTINEL;
            wisp_matmul_args a = {packed, 0, type, cols, x, xb, n_tok, got, rows};
            int64_t lo, hi;
            if (pass == 0) {
                lo = 0, hi = rows;
                pk->matmul(&a, ranges[1][0], ranges[1][1]);
                pk->matmul(&a, ranges[2][0], ranges[2][1]);
            } else {
                lo = ranges[3][0], hi = ranges[3][1];
                pk->matmul(&a, lo, hi);
            }
            int bad = 0, stray = 0;
            for (int t = 0; t < MAX_TOK; t++)
                for (int64_t r = 0; r < rows; r++) {
                    const float g = got[t * rows + r];
                    if (t < n_tok && r >= lo && r < hi) bad += memcmp(&g, &want[t * rows + r], sizeof g) != 0;
                    else stray += g != SENTINEL;
                }
            CHECK(!bad, "%s %s %s %lldx%lld, %d tokens, rows [%lld, %lld): %d results differ from the reference",
                  k->name, tn, raw ? "raw" : "quantized", (long long)rows, (long long)cols, n_tok, (long long)lo,
                  (long long)hi, bad);
            CHECK(!stray, "%s %s %lldx%lld, %d tokens, rows [%lld, %lld): %d values written outside", k->name, tn,
                  (long long)rows, (long long)cols, n_tok, (long long)lo, (long long)hi, stray);
        }
    }
    free(w);
    free(packed);
    free(xf);
    free(x);
    free(want);
    free(got);
}

static int check_level(const wisp_kernels *k) {
    int types = 0;
    for (int type = 0; type < WISP_TYPE_COUNT; type++) {
        const wisp_packing *pk = &k->packing[type];
        if (!pk->bytes) continue;
        CHECK(pk->pack && pk->matmul && pk->unpack_block, "%s packs %s but has no pack, matmul or unpack_block",
              k->name, wisp_type_info_of(type)->name);
        if (!pk->pack || !pk->matmul || !pk->unpack_block) continue;
        int before = check_failures;
        /* a packed row holds at most 16384 elements: 512 blocks of 32, 64 super-blocks of 256 */
        const int64_t len = wisp_type_info_of(type)->block_elems, most = 16384 / len;
        static const int64_t rows[] = {1, 15, 16, 17, 40, 100};
        const int64_t blocks[] = {1, 2, 3, 17, 18, 48, most};
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
            for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++)
                for (int raw = 0; raw < 2; raw++)
                    /* the longest rows at 100 rows: a prompt's product then runs in tiles of groups */
                    if (blocks[b] < most || rows[r] == 17 || rows[r] == 100)
                        check_case(k, type, rows[r], blocks[b] * len, raw);
        CHECK(pk->bytes(16, (most + 1) * len) == 0, "%s %s: rows of %lld blocks should stay in place", k->name,
              wisp_type_info_of(type)->name, (long long)(most + 1));
        printf("  %s %s packed: %s\n", k->name, wisp_type_info_of(type)->name,
               check_failures == before ? "bit-exact with the reference" : "FAILED");
        types++;
    }
    return types;
}

int main(void) {
    static const char *const levels[] = {"avx512", "avx2"};
    wisp_cpu_features cpu;
    wisp_cpu_detect(&cpu);
    int tested = 0;
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        const wisp_kernels *table;
        wisp_error err = {0};
        if (wisp_simd_select(&cpu, levels[i], &table, &err) != WISP_OK) {
            printf("  skipped %s: %s\n", levels[i], err.message);
            continue;
        }
        tested += check_level(table);
    }
    if (!tested) check_skip_platform("test_packed_weights", "no kernel level this CPU has packs weights (AVX-512 VNNI does)");
    return check_report("test_packed_weights");
}
