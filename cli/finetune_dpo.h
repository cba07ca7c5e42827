/* The DPO side of `wisp finetune --method dpo`: preference pairs loaded as
 * two lockstep data pipelines (chosen and rejected answers, see
 * adapters/preference_pairs.h), micro-steps that take B pairs as 2 x B
 * sequences, and evaluation with trl's reward statistics. */
#ifndef WISP_CLI_FINETUNE_DPO_H
#define WISP_CLI_FINETUNE_DPO_H

#include <stdbool.h>

#include "train_data_load.h"
#include "train_log.h"
#include "wisp.h"

typedef struct ft_pairs {
    cli_data chosen, rejected;
    double *ref; /* [2][training pairs]: the reference's summed log-probs, chosen then rejected; NULL: none yet */
} ft_pairs;

/* Read a pairs JSONL file into both sides (prints why on failure);
 * conversational pairs are rendered with `chat` (NULL: refused by name). */
bool ft_pairs_load(ft_pairs *p, const char *path, const wisp_tokenizer *tok, const wisp_data_options *opt,
                   const wisp_data_chat *chat);
void ft_pairs_free(ft_pairs *p);

/* The reference (the base without the adapter) scores every training pair
 * once, b pairs at a time, so that training steps need not: trl's
 * precompute_ref_log_probs. False after printing why. */
bool ft_pairs_reference(wisp_ctx *ctx, ft_pairs *p, int32_t b, int32_t width, int32_t *tok, uint8_t *mask);

/* The next n pairs: n chosen windows, then n rejected ones, into tok/mask
 * (2 x n windows of width ids), and their cached reference log-probs into
 * ref[2 x n] (when ft_pairs_reference ran; else ref is left alone). */
void ft_pairs_next(ft_pairs *p, int32_t n, int32_t width, int32_t *tok, uint8_t *mask, double *ref);

/* Mean DPO loss and reward statistics over the pairs of `split` (at most
 * max_pairs of them, 0: all), b pairs at a time; false after printing why. */
bool ft_pairs_eval(wisp_ctx *ctx, const ft_pairs *p, wisp_data_split split, int32_t b, int32_t width, int32_t max_pairs,
                   int32_t *tok, uint8_t *mask, double *loss, cli_dpo_metrics *m);

/* Add one micro-step's result (weighted by its pairs) into running sums. */
void ft_dpo_accumulate(cli_dpo_metrics *sum, double *loss_sum, int32_t *pairs, const wisp_dpo_result *r);

#endif
