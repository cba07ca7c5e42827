/* Negative log-likelihood of one target under a row of logits, with the
 * log-sum-exp in double; shared by perplexity and eval (and the same
 * formula as the training loss head, so all three report one number). */
#ifndef WISP_CLI_TOKEN_LOSS_H
#define WISP_CLI_TOKEN_LOSS_H

#include <stdint.h>

double cli_token_nll(const float *logits, int32_t n_vocab, int32_t target);

#endif
