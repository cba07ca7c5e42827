#include "preference_batches.h"

wisp_status wisp_pairs_reference(wisp_ctx *ctx, const wisp_train_data *chosen, const wisp_train_data *rejected,
                                 int32_t seqs, int32_t width, int32_t *tok, uint8_t *mask, double *ref, wisp_error *err) {
    int32_t n = wisp_data_count(chosen, WISP_SPLIT_TRAIN);
    const wisp_train_data *sides[2] = {chosen, rejected};
    for (int s = 0; s < 2; s++) /* one side at a time: a sequence's log-prob does not depend on its neighbours */
        for (int32_t i = 0; i < n; i += seqs) {
            int32_t k = n - i < seqs ? n - i : seqs;
            for (int32_t j = 0; j < k; j++)
                wisp_data_get(sides[s], WISP_SPLIT_TRAIN, i + j, tok + (size_t)j * width, mask + (size_t)j * width);
            wisp_status st = wisp_train_sequence_logps(ctx, tok, mask, k, false, ref + (size_t)s * n + i, NULL, err);
            if (st) return st;
        }
    return WISP_OK;
}

void wisp_pairs_next(wisp_train_data *chosen, wisp_train_data *rejected, const double *ref, int32_t n, int32_t width,
                     int32_t *tok, uint8_t *mask, double *batch_ref) {
    enum { RUN = 64 };
    int32_t index[2][RUN], n_train = wisp_data_count(chosen, WISP_SPLIT_TRAIN);
    for (int32_t at = 0; at < n; at += RUN) { /* in runs: the indices of a run, then their references */
        int32_t k = n - at < RUN ? n - at : RUN;
        wisp_data_next_indexed(chosen, k, tok + (size_t)at * width, mask + (size_t)at * width, index[0]);
        wisp_data_next_indexed(rejected, k, tok + (size_t)(n + at) * width, mask + (size_t)(n + at) * width, index[1]);
        for (int32_t j = 0; ref && j < k; j++) {
            batch_ref[at + j] = ref[index[0][j]];
            batch_ref[n + at + j] = ref[(size_t)n_train + (size_t)index[1][j]];
        }
    }
}
