/* Choosing the next token: greedy, temperature, top-k, top-p, min-p and a
 * repetition penalty, driven by a seeded generator so the same seed gives
 * the same tokens on every target. */
#ifndef WISP_SAMPLER_H
#define WISP_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "wisp.h"

/* wisp_sampler_params, wisp_sampler, wisp_sampler_defaults and
 * wisp_sampler_init are public: wisp.h. What follows is core's own. */

typedef struct wisp_candidate {
    int32_t id;
    float logit;
} wisp_candidate;

/* Next value of a 64-bit generator (splitmix64) and a uniform float in [0,1). */
uint64_t wisp_rng_next(uint64_t *state);
float wisp_rng_uniform(uint64_t *state);

size_t wisp_sampler_scratch_bytes(int32_t n_vocab);

/* Sample from `logits` (not modified); `scratch` holds n_vocab candidates. */
int32_t wisp_sample_logits(const float *logits, int32_t n_vocab, wisp_sampler *s, const int32_t *history,
                           size_t n_history, wisp_candidate *scratch);

#endif
