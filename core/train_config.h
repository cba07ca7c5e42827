/* Training's internal state beside its configuration: the dynamic loss
 * scaler the optimizer step keeps for F16 storage. What a context trains
 * (wisp_train_config: shapes, objective, hyperparameters) is public and
 * declared in wisp.h. */
#ifndef WISP_TRAIN_CONFIG_H
#define WISP_TRAIN_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "wisp.h" /* wisp_train_config and its enums */

/* The dynamic loss scale's state, and its policy (DeepSpeed's
 * DynamicLossScaler with consecutive_hysteresis off, README "Mixed precision"):
 *  - overflow: the step is skipped; if hysteresis_left is 1 the scale halves
 *    (not below min_loss_scale), else hysteresis_left drops by one; the run
 *    of good steps restarts;
 *  - good step: after loss_scale_window good steps in a row the scale
 *    doubles (at most 2^24) and hysteresis_left is restored. */
typedef struct wisp_loss_scaler {
    float scale;
    int32_t good_steps;      /* good steps since the last overflow or doubling */
    int32_t hysteresis_left; /* overflows still tolerated at this scale */
} wisp_loss_scaler;
void wisp_loss_scaler_update(const struct wisp_train_config *c, wisp_loss_scaler *s, bool overflow);

#endif
