/* Choosing the next token: greedy, temperature, top-k, top-p, min-p and a
 * repetition penalty, driven by a seeded generator so the same seed gives
 * the same tokens on every target. */
#ifndef WISP_SAMPLER_H
#define WISP_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

typedef struct wisp_sampler_params {
    float temperature;    /* <= 0: greedy (argmax) */
    int32_t top_k;        /* keep the k most likely; 0: off */
    float top_p;          /* keep the smallest set with this much probability; 1: off */
    float min_p;          /* drop tokens below min_p x the best probability; 0: off */
    float repeat_penalty; /* divide positive / multiply negative logits of recent tokens; 1: off */
    int32_t repeat_last_n;/* how many recent tokens the penalty looks at */
    uint64_t seed;
} wisp_sampler_params;

struct wisp_guide;

typedef struct wisp_sampler {
    wisp_sampler_params p;
    uint64_t rng; /* the whole generator state: saving it resumes the sequence */
    /* optional stage: only tokens this grammar guide allows (NULL: off). The
     * sampler advances the guide past every token it returns; -1 when no
     * token may follow (the reason is in guide->error). See guide.h. */
    struct wisp_guide *guide;
} wisp_sampler;

typedef struct wisp_candidate {
    int32_t id;
    float logit;
} wisp_candidate;

/* llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, no penalty. */
wisp_sampler_params wisp_sampler_defaults(void);
void wisp_sampler_init(wisp_sampler *s, const wisp_sampler_params *p);

/* Next value of a 64-bit generator (splitmix64) and a uniform float in [0,1). */
uint64_t wisp_rng_next(uint64_t *state);
float wisp_rng_uniform(uint64_t *state);

size_t wisp_sampler_scratch_bytes(int32_t n_vocab);

/* Sample from `logits` (not modified); `scratch` holds n_vocab candidates. */
int32_t wisp_sample_logits(const float *logits, int32_t n_vocab, wisp_sampler *s, const int32_t *history,
                           size_t n_history, wisp_candidate *scratch);

#endif
