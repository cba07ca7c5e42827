#include "sampler.h"

#include <math.h>

#include "arena.h"
#include "guide.h"

wisp_sampler_params wisp_sampler_defaults(void) {
    wisp_sampler_params p = {0.8f, 40, 0.95f, 0.05f, 1.0f, 64, 0};
    return p;
}

void wisp_sampler_init(wisp_sampler *s, const wisp_sampler_params *p) {
    s->p = *p;
    s->rng = p->seed;
    s->guide = NULL;
}

uint64_t wisp_rng_next(uint64_t *state) {
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

float wisp_rng_uniform(uint64_t *state) {
    return (float)(wisp_rng_next(state) >> 40) * (1.0f / 16777216.0f);
}

size_t wisp_sampler_scratch_bytes(int32_t n_vocab) {
    return wisp_bytes_of((size_t)n_vocab, sizeof(wisp_candidate));
}

/* "a ranks before b": higher logit first, lower id on ties (deterministic). */
static int before(const wisp_candidate *a, const wisp_candidate *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static void swap(wisp_candidate *a, wisp_candidate *b) {
    wisp_candidate t = *a;
    *a = *b;
    *b = t;
}

/* Sift down in a heap whose root is the candidate that ranks LAST, so the
 * heap keeps the best k seen so far. */
static void sift_worst(wisp_candidate *h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && before(&h[w], &h[l])) w = l;
        if (r < n && before(&h[w], &h[r])) w = r;
        if (w == i) return;
        swap(&h[i], &h[w]);
        i = w;
    }
}

/* Move the best k of c[0..n) to the front, sorted best first. O(n log k). */
static void select_top(wisp_candidate *c, size_t n, size_t k) {
    for (size_t i = k / 2; i-- > 0;) sift_worst(c, k, i);
    for (size_t i = k; i < n; i++)
        if (before(&c[i], &c[0])) {
            swap(&c[i], &c[0]);
            sift_worst(c, k, 0);
        }
    /* heap of the k best with the worst at the root: pop into sorted order */
    for (size_t end = k; end > 1; end--) {
        swap(&c[0], &c[end - 1]);
        sift_worst(c, end - 1, 0);
    }
}

/* One draw; with `allowed` (a bit per token), only among those tokens. */
static int32_t draw(const float *logits, int32_t n_vocab, wisp_sampler *s, const int32_t *history, size_t n_history,
                    wisp_candidate *c, const uint32_t *allowed) {
    const wisp_sampler_params *p = &s->p;
    size_t n = (size_t)n_vocab;
    if (allowed) {
        /* only the allowed tokens, so that top-k and the cut-offs only ever see them (a word of the
         * mask at a time: inside a grammar most words are empty or full) */
        size_t k = 0;
        for (size_t w = 0; w * 32 < n; w++)
            for (uint32_t bits = allowed[w]; bits; bits &= bits - 1) {
                size_t i = w * 32 + (size_t)__builtin_ctz(bits);
                if (i >= n) break;
                c[k].id = (int32_t)i;
                c[k++].logit = logits[i] == logits[i] ? logits[i] : -INFINITY; /* a NaN never wins */
            }
        n = k;
        if (n == 0) return -1;
    } else
        for (size_t i = 0; i < n; i++) {
            c[i].id = (int32_t)i;
            c[i].logit = logits[i] == logits[i] ? logits[i] : -INFINITY;
        }
    if (p->repeat_penalty != 1.0f && history && p->repeat_last_n != 0) {
        size_t look = p->repeat_last_n < 0 ? n_history : (size_t)p->repeat_last_n;
        size_t from = n_history > look ? n_history - look : 0;
        /* each distinct token is penalised once, however often it repeats */
        for (size_t h = from; h < n_history; h++) {
            int32_t id = history[h];
            if (id < 0 || id >= n_vocab) continue;
            if (allowed && !((allowed[id >> 5] >> (id & 31)) & 1u)) continue;
            int seen = 0;
            for (size_t e = from; e < h && !seen; e++) seen = history[e] == id;
            if (seen) continue;
            wisp_candidate *cand = &c[id];
            if (allowed) { /* the kept candidates are in id order: binary search */
                size_t lo = 0, hi = n;
                while (lo < hi) {
                    size_t mid = (lo + hi) / 2;
                    if (c[mid].id < id) lo = mid + 1;
                    else hi = mid;
                }
                cand = &c[lo];
            }
            float *l = &cand->logit;
            *l = *l > 0 ? *l / p->repeat_penalty : *l * p->repeat_penalty;
        }
    }
    if (p->temperature <= 0.0f) {
        size_t best = 0;
        for (size_t i = 1; i < n; i++)
            if (before(&c[i], &c[best])) best = i;
        return c[best].id;
    }
    size_t k = (p->top_k > 0 && (size_t)p->top_k < n) ? (size_t)p->top_k : n;
    select_top(c, n, k);
    n = k;
    /* probabilities of the survivors, at temperature 1, for top-p and min-p */
    float maxl = c[0].logit;
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += exp((double)(c[i].logit - maxl));
    if (p->top_p < 1.0f) {
        double cum = 0;
        size_t keep = n;
        for (size_t i = 0; i < n; i++) {
            cum += exp((double)(c[i].logit - maxl)) / sum;
            if (cum >= p->top_p) { keep = i + 1; break; }
        }
        n = keep;
    }
    if (p->min_p > 0.0f) {
        /* p_i >= min_p * p_max  <=>  logit_i >= maxl + log(min_p) */
        float floor_l = maxl + logf(p->min_p);
        size_t keep = 1;
        while (keep < n && c[keep].logit >= floor_l) keep++;
        n = keep;
    }
    double total = 0;
    for (size_t i = 0; i < n; i++) total += exp((double)(c[i].logit - maxl) / p->temperature);
    double r = (double)wisp_rng_uniform(&s->rng) * total;
    double acc = 0;
    for (size_t i = 0; i < n; i++) {
        acc += exp((double)(c[i].logit - maxl) / p->temperature);
        if (r < acc) return c[i].id;
    }
    return c[n - 1].id;
}

int32_t wisp_sample_logits(const float *logits, int32_t n_vocab, wisp_sampler *s, const int32_t *history,
                           size_t n_history, wisp_candidate *c) {
    wisp_guide *g = s->guide;
    if (!g) return draw(logits, n_vocab, s, history, n_history, c, NULL);
    /* one way to continue: emit it without drawing */
    int32_t id = wisp_guide_forced(g);
    if (id < 0) {
        /* draw as if unconstrained; most draws are allowed, and checking one token is cheap */
        id = draw(logits, n_vocab, s, history, n_history, c, NULL);
        if (!wisp_guide_allows(g, id)) {
            uint32_t n_allowed = wisp_guide_mask(g, &g->error);
            if (n_allowed == 0) {
                if (!g->error.message[0])
                    wisp_fail(&g->error, WISP_ERR_ARG, "grammar: no token of the vocabulary can continue the text");
                return -1;
            }
            id = draw(logits, n_vocab, s, history, n_history, c, g->mask);
        }
    }
    if (id < 0 || wisp_guide_accept(g, id, &g->error)) return -1;
    return id;
}
