/* The scalar reference of transposed tile dequantization (kernels.h): each
 * row's column range is dequantized with the type's own routine, a block at
 * a time, and scattered into the tile's columns. Dequantization is exact,
 * so any faster version must give the same bits. */
#include "kernels.h"

#define PIECE 256 /* floats: one K-quant super-block, several legacy blocks */

void wisp_dequant_t_reference(const uint8_t *w, size_t row_bytes, int32_t type, int64_t r0, int64_t r1, int64_t c0,
                              int64_t c1, float *out, int64_t ld) {
    const wisp_type_info *ti = wisp_type_info_of(type);
    int64_t be = ti->block_elems, piece = PIECE / be * be;
    float buf[PIECE];
    for (int64_t r = r0; r < r1; r++)
        for (int64_t cs = c0; cs < c1; cs += piece) {
            int64_t n = c1 - cs < piece ? c1 - cs : piece;
            ti->dequantize(w + (size_t)r * row_bytes + (size_t)(cs / be) * (size_t)ti->block_bytes, buf, n);
            for (int64_t j = 0; j < n; j++) out[(cs - c0 + j) * ld + (r - r0)] = buf[j];
        }
}
