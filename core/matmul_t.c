#include "matmul_t.h"

int64_t wisp_matmul_t_cols(int32_t type) {
    int64_t be = wisp_type_info_of(type)->block_elems;
    return be >= 64 ? be : 64 / be * be;
}

void wisp_matmul_t_range(const wisp_kernels *k, const wisp_weight *w, const float *dy, int64_t lddy, int64_t n_tok,
                         float *dx, int64_t lddx, int64_t c0, int64_t c1, float *tile, int64_t tile_floats, float *out) {
    int64_t cb = wisp_matmul_t_cols(w->type), rc = tile_floats / cb;
    for (int64_t cs = c0; cs < c1; cs += cb) {
        int64_t nc = c1 - cs < cb ? c1 - cs : cb;
        for (int64_t rs = 0; rs < w->rows; rs += rc) {
            int64_t nr = w->rows - rs < rc ? w->rows - rs : rc;
            k->dequant_t[w->type](w->data, w->row_bytes, w->type, rs, rs + nr, cs, cs + nc, tile, nr);
            /* out[t][j] = sum over this row chunk of tile[j][r] dy[t][rs + r] */
            wisp_matmul_args a = {(const uint8_t *)tile, (size_t)nr * sizeof(float), WISP_TYPE_F32, nr,
                                  (const uint8_t *)(dy + rs), (size_t)lddy * sizeof(float), n_tok, out, nc};
            k->matmul[WISP_TYPE_F32](&a, 0, nc);
            for (int64_t t = 0; t < n_tok; t++)
                for (int64_t j = 0; j < nc; j++) dx[t * lddx + cs + j] += out[t * nc + j];
        }
    }
}
