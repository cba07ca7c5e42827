/* DPO batches from the two lockstep pipelines of preference_pairs.h (the
 * chosen and the rejected answers, example i of each being pair i): the
 * reference's log-probs of every pair scored once up front (trl's
 * precompute_ref_log_probs), and the next pairs of a micro-step with their
 * cached references. Shared by `wisp finetune --method dpo` and the npm
 * package, so both take the same pairs in the same order with the same
 * references. The caller gives all memory. */
#ifndef WISP_PREFERENCE_BATCHES_H
#define WISP_PREFERENCE_BATCHES_H

#include <stdint.h>

#include "train_data.h"
#include "wisp.h"

/* ref[2][n] (n: training pairs; chosen, then rejected) from the base without
 * the adapter, `seqs` sequences (the context's micro_batch) at a time through
 * tok/mask [seqs][width]. */
wisp_status wisp_pairs_reference(wisp_ctx *ctx, const wisp_train_data *chosen, const wisp_train_data *rejected,
                                 int32_t seqs, int32_t width, int32_t *tok, uint8_t *mask, double *ref, wisp_error *err);

/* The next n pairs: n chosen windows, then n rejected ones, into tok/mask
 * (2 x n windows of width ids), and, when ref (from wisp_pairs_reference) is
 * given, their references into batch_ref[2 x n]. */
void wisp_pairs_next(wisp_train_data *chosen, wisp_train_data *rejected, const double *ref, int32_t n, int32_t width,
                     int32_t *tok, uint8_t *mask, double *batch_ref);

#endif
