/* The backward pass's transposed product with a frozen weight of any type,
 *   dx[t * lddx + c] += sum over rows r of W[r][c] * dy[t * lddy + r],
 * without ever dequantizing the weight whole: a tile of cols x rows
 * (whole blocks of columns, a chunk of rows) is dequantized transposed into
 * `tile` and multiplied with the F32 matmul kernel, which every SIMD table
 * accelerates. For given tile sizes the arithmetic of each dx element is
 * fixed (row chunks in ascending order), so splitting the columns between
 * threads in whole tiles never changes a result. */
#ifndef WISP_MATMUL_T_H
#define WISP_MATMUL_T_H

#include <stdint.h>

#include "kernels.h"
#include "model.h"

/* Columns per tile for a weight type: whole blocks, at least 64. */
int64_t wisp_matmul_t_cols(int32_t type);

/* Columns [c0, c1) (c0 a multiple of wisp_matmul_t_cols) for all n_tok rows.
 * Scratch: `tile` of tile_floats (>= wisp_matmul_t_cols) floats and `out` of
 * n_tok x wisp_matmul_t_cols floats. */
void wisp_matmul_t_range(const wisp_kernels *k, const wisp_weight *w, const float *dy, int64_t lddy, int64_t n_tok,
                         float *dx, int64_t lddx, int64_t c0, int64_t c1, float *tile, int64_t tile_floats, float *out);

#endif
