/* guided_sample VOCAB.gguf (SCHEMA.json | GRAMMAR.gbnf) SEEDS OUT_PREFIX [--exact] [--brute-force] [--times PREFIX]: constrained
 * sampling without a model. Each step draws fresh random logits (a seeded
 * normal-ish distribution over the whole vocabulary: what a random-weight
 * model's output looks like, minus the cost of its forward pass) and samples
 * through the sampler's grammar stage, exactly as `wisp run --json-schema`
 * does; writes OUT_PREFIX.SEED.json per seed. The vocabulary and its trie
 * are built once, so 20 seeds of every schema take seconds. Prints, in this
 * thread's CPU time: the compile time (schema JSON -> GBNF -> compiled grammar
 * -> guide); the guide's cost per generated token, as the sampler pays it
 * (forced-token check, the drawn token checked, the full mask only when that
 * is refused, the token accepted: a second guide replays the sampler's calls
 * under the clock, and must agree with its choices); and the mean, p99 and
 * worst time of a full mask computed at every step. SEEDS 0 only compiles.
 * --brute-force checks every full
 * mask against asking each token of the vocabulary byte by byte (slow: the
 * reference, not the bench), for the first BRUTE_MASKS masks of each seed;
 * the text is then cut there, so it need not finish. --times appends every
 * per-token and every full-mask time (microseconds, one a line) to
 * PREFIX.tokens and PREFIX.masks, for percentiles over many runs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "gguf.h"
#include "guide.h"
#include "json.h"
#include "json_schema.h"
#include "sampler.h"
#include "tokenizer.h"

#define BRUTE_MASKS 60 /* masks checked per seed with --brute-force (each asks every token: slow) */

/* this thread's CPU time: on a shared, busy machine wall-clock figures mostly measure the others */
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int die(const char *what, const wisp_error *err) {
    fprintf(stderr, "guided_sample: %s: %s\n", what, err ? err->message : "failed");
    return 1;
}

/* CPU times of one kind of event, for the mean and the 99th percentile */
typedef struct timings {
    double *v, sum, worst;
    size_t n, cap;
} timings;

static void timings_add(timings *t, double dt) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 4096;
        t->v = realloc(t->v, t->cap * sizeof *t->v);
        if (!t->v) exit(die("out of memory", NULL));
    }
    t->v[t->n++] = dt, t->sum += dt;
    if (dt > t->worst) t->worst = dt;
}

static double timings_mean(const timings *t) { return t->n ? t->sum / (double)t->n : 0.0; }

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double timings_p99(timings *t) {
    if (!t->n) return 0.0;
    qsort(t->v, t->n, sizeof *t->v, cmp_double);
    size_t i = t->n * 99 / 100;
    return t->v[i < t->n ? i : t->n - 1];
}

/* Append the times (microseconds, one a line) to PREFIX SUFFIX. */
static bool timings_append(const timings *t, const char *prefix, const char *suffix) {
    char path[4096];
    snprintf(path, sizeof path, "%s%s", prefix, suffix);
    FILE *f = fopen(path, "a");
    if (!f) return false;
    for (size_t i = 0; i < t->n; i++) fprintf(f, "%.3f\n", t->v[i] * 1e6);
    return fclose(f) == 0;
}

/* The guide calls wisp_sample_logits made for one token, on the replay guide,
 * timed: the forced-token check; unless forced, the check of `first` (the
 * token drawn first) and, when that is refused, the full mask; then
 * accepting `chosen`. False when the replay would have chosen otherwise. */
static bool replay_token(wisp_guide *g, int32_t first, int32_t chosen, timings *per_token, wisp_error *err) {
    double t0 = now();
    int32_t forced = wisp_guide_forced(g);
    bool first_ok = forced < 0 && wisp_guide_allows(g, first);
    uint32_t n_allowed = forced < 0 && !first_ok ? wisp_guide_mask(g, err) : 1;
    bool in_mask = forced < 0 && !first_ok && ((g->mask[chosen >> 5] >> (chosen & 31)) & 1u);
    wisp_status st = wisp_guide_accept(g, chosen, err);
    timings_add(per_token, now() - t0);
    if (st || n_allowed == 0) return false;
    if (forced >= 0 ? chosen == forced : first_ok ? chosen == first : in_mask) return true;
    wisp_fail(err, WISP_ERR_INTERNAL, "token %d chosen, replay: forced %d, first draw %d (%s)", chosen, forced, first,
              first_ok ? "allowed" : "refused");
    return false;
}

/* A schema or grammar compiled down to a guide. compile_guide allocates on the first call and
 * compiles into the same memory on later calls with the same input. */
typedef struct compiled {
    wisp_json_node *nodes;
    char *gbnf;
    size_t glen, guide_bytes;
    void *grammar_mem, *guide_mem;
    const wisp_grammar *grammar;
    wisp_guide guide;
} compiled;

static wisp_status compile_guide(compiled *c, const char *src, size_t slen, bool is_gbnf, bool exact,
                                 const wisp_token_trie *trie, const wisp_matcher_limits *ml, wisp_error *err) {
    wisp_status st;
    if (is_gbnf) {
        if (!c->gbnf && !(c->gbnf = malloc(slen + 1))) return wisp_fail(err, WISP_ERR_CAPACITY, "out of memory");
        memcpy(c->gbnf, src, slen);
        c->glen = slen;
    } else {
        wisp_json j;
        size_t need = 0;
        wisp_json_parse(&j, src, slen, NULL, 0, &need, err);
        if (!c->nodes && !(c->nodes = malloc((need ? need : 1) * sizeof *c->nodes)))
            return wisp_fail(err, WISP_ERR_CAPACITY, "out of memory");
        if ((st = wisp_json_parse(&j, src, slen, c->nodes, need, NULL, err))) return st;
        wisp_json_schema_limits lim = wisp_json_schema_bounded();
        wisp_json_schema_to_gbnf_ex(&j, exact ? NULL : &lim, NULL, 0, &c->glen, err);
        if (!c->gbnf && !(c->gbnf = malloc(c->glen + 1))) return wisp_fail(err, WISP_ERR_CAPACITY, "out of memory");
        if ((st = wisp_json_schema_to_gbnf_ex(&j, exact ? NULL : &lim, c->gbnf, c->glen + 1, &c->glen, err))) return st;
    }
    size_t gbytes;
    if ((st = wisp_grammar_plan(c->gbnf, c->glen, &gbytes, err))) return st;
    if (!c->grammar_mem && !(c->grammar_mem = malloc(gbytes))) return wisp_fail(err, WISP_ERR_CAPACITY, "out of memory");
    wisp_arena a;
    wisp_arena_init(&a, c->grammar_mem, gbytes);
    if ((st = wisp_grammar_compile(c->gbnf, c->glen, &a, &c->grammar, err))) return st;
    c->guide_bytes = wisp_guide_plan(trie, c->grammar, ml);
    if (!c->guide_mem && !(c->guide_mem = malloc(c->guide_bytes))) return wisp_fail(err, WISP_ERR_CAPACITY, "out of memory");
    wisp_arena_init(&a, c->guide_mem, c->guide_bytes);
    return wisp_guide_init(&c->guide, trie, c->grammar, ml, &a, err);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: guided_sample VOCAB.gguf (SCHEMA.json | GRAMMAR.gbnf) SEEDS OUT_PREFIX [--exact] [--brute-force] "
                        "[--times PREFIX]\n");
        return 2;
    }
    bool exact = false, brute = false;
    const char *times_prefix = NULL;
    for (int i = 5; i < argc; i++) {
        if (strcmp(argv[i], "--exact") == 0) exact = true;
        else if (strcmp(argv[i], "--times") == 0 && i + 1 < argc) times_prefix = argv[++i];
        else if (strcmp(argv[i], "--brute-force") == 0) brute = true;
        else {
            fprintf(stderr, "guided_sample: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    int seeds = atoi(argv[3]);
    size_t n;
    unsigned char *file = read_file(argv[1], &n);
    wisp_gguf g;
    wisp_error err = {0};
    if (!file || wisp_gguf_open(&g, file, n, &err)) return die(argv[1], &err);
    size_t tok_bytes, trie_bytes;
    wisp_tokenizer tok;
    if (wisp_tokenizer_plan(&g, &tok_bytes, &err)) return die("tokenizer plan", &err);
    void *tok_mem = malloc(tok_bytes + 64);
    wisp_arena a;
    wisp_arena_init(&a, tok_mem, tok_bytes);
    if (wisp_tokenizer_init(&tok, &g, &a, &err)) return die("tokenizer", &err);
    if (wisp_token_trie_plan(&tok, &trie_bytes, &err)) return die("trie plan", &err);
    void *trie_mem = malloc(trie_bytes);
    wisp_token_trie trie;
    wisp_arena_init(&a, trie_mem, trie_bytes);
    if (wisp_token_trie_init(&trie, &tok, &a, &err)) return die("trie", &err);
    /* the schema, as a grammar (or a grammar as it is): timed from its text to a guide ready to
     * mask, once in fresh memory (as a command line run pays it: the first touch of the guide's
     * tables is most of it) and again in the same memory (as an app reusing its arena pays it) */
    size_t slen, plen = strlen(argv[2]);
    char *schema = (char *)read_file(argv[2], &slen);
    if (!schema) return die(argv[2], NULL);
    bool is_gbnf = plen > 5 && strcmp(argv[2] + plen - 5, ".gbnf") == 0;
    compiled c = {0};
    wisp_matcher_limits ml = wisp_matcher_limits_default();
    double c0 = now();
    if (compile_guide(&c, schema, slen, is_gbnf, exact, &trie, &ml, &err)) return die("compile", &err);
    double compile_cold = now() - c0;
    c0 = now();
    if (compile_guide(&c, schema, slen, is_gbnf, exact, &trie, &ml, &err)) return die("compile", &err);
    double compile_warm = now() - c0;
    wisp_guide guide = c.guide, replay;
    size_t guide_bytes = c.guide_bytes;
    void *replay_mem = malloc(guide_bytes);
    /* the replay guide: the sampler's guide calls, timed (the sampler's own guide also gets a
     * full mask every step, which fills its mask cache; this one sees only what sampling asks) */
    wisp_arena_init(&a, replay_mem, guide_bytes);
    if (wisp_guide_init(&replay, &trie, c.grammar, &ml, &a, &err)) return die("guide", &err);

    int32_t nv = wisp_tokenizer_n_vocab(&tok);
    float *logits = malloc(sizeof(float) * (size_t)nv);
    wisp_candidate *cand = malloc(sizeof(wisp_candidate) * (size_t)nv);
    char *text = malloc(1 << 20);
    timings full = {0}, per_token = {0};
    uint64_t checked = 0, differed = 0;
    int status = 0;
    for (int seed = 1; seed <= seeds; seed++) {
        if (wisp_guide_reset(&guide, &err) || wisp_guide_reset(&replay, &err)) return die("reset", &err);
        wisp_sampler_params sp = wisp_sampler_defaults();
        sp.seed = (uint64_t)seed;
        sp.temperature = 1.0f, sp.top_p = 1.0f, sp.min_p = 0.0f; /* top-k 40: a full sort per draw would dominate */
        wisp_sampler s;
        wisp_sampler_init(&s, &sp);
        s.guide = &guide;
        uint64_t rng = (uint64_t)seed * 7919u;
        size_t len = 0;
        int steps = 0, checked_this_seed = 0;
        for (; steps < 2000 && !(brute && checked_this_seed >= BRUTE_MASKS); steps++) {
            for (int32_t i = 0; i < nv; i++) { /* a sum of uniforms: roughly normal, std 2 */
                float u = wisp_rng_uniform(&rng) + wisp_rng_uniform(&rng) + wisp_rng_uniform(&rng) - 1.5f;
                logits[i] = 4.0f * u;
            }
            /* time a full mask on its own (the sampler computes it only when its first draw is refused) */
            double t0 = now();
            wisp_error merr = {0};
            uint32_t n_allowed = wisp_guide_mask(&guide, &merr);
            double dt = now() - t0;
            if (brute && checked_this_seed < BRUTE_MASKS) { /* every token's bytes from the committed state, one matcher step at a time */
                checked_this_seed++;
                uint32_t disagree = 0, counted = 0;
                for (int32_t id = 0; id < nv; id++) {
                    bool in_mask = (guide.mask[id >> 5] >> (id & 31)) & 1u;
                    counted += in_mask;
                    disagree += in_mask != wisp_guide_allows(&guide, id);
                }
                checked++;
                if (disagree || counted != n_allowed) {
                    differed++;
                    fprintf(stderr, "guided_sample: seed %d step %d: the mask has %u tokens (says %u), %u disagree with "
                            "checking each token\n", seed, steps, counted, n_allowed, disagree);
                    status = 1;
                }
            }
            if (!wisp_guide_done(&guide)) {
                if (n_allowed == 0) {
                    fprintf(stderr, "guided_sample: seed %d: nothing allowed: %s\n", seed, merr.message);
                    status = 1;
                    break;
                }
                timings_add(&full, dt);
            }
            /* the sampler's first draw, untimed: what it draws before asking the guide */
            wisp_sampler plain = s;
            plain.guide = NULL;
            int32_t first = wisp_sample_logits(logits, nv, &plain, NULL, 0, cand);
            int32_t id = wisp_sample_logits(logits, nv, &s, NULL, 0, cand);
            if (id < 0) {
                if (!wisp_guide_done(&guide)) {
                    fprintf(stderr, "guided_sample: seed %d: %s\n", seed, guide.error.message);
                    status = 1;
                }
                break;
            }
            if (!replay_token(&replay, first, id, &per_token, &merr)) {
                fprintf(stderr, "guided_sample: seed %d step %d: the replayed guide disagrees with the sampler: %s\n", seed,
                        steps, merr.message);
                status = 1;
                break;
            }
            if (wisp_tokenizer_is_eog(&tok, id)) break;
            len += wisp_token_piece(&tok, id, text + len, (1 << 20) - len);
        }
        char path[4096];
        snprintf(path, sizeof path, "%s.%d.json", argv[4], seed);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(text, 1, len, f) != len) return die(path, NULL);
        fclose(f);
        if (!wisp_guide_done(&guide) && !brute) { /* brute force stops after BRUTE_MASKS masks */
            fprintf(stderr, "guided_sample: seed %d did not finish in %d steps\n", seed, steps);
            status = 1;
        }
    }
    printf("%s: %d seeds, vocab %d, compile %.3f ms cold, %.3f ms warm; %llu tokens: guide per token mean %.1f us, p99 %.1f us, worst %.1f us "
           "(%llu full masks, %llu forced); %llu full masks: mean %.1f us, p99 %.1f us, worst %.1f us (CPU time), %llu "
           "subtrees allowed whole, %llu cache hits",
           argv[2], seeds, nv, compile_cold * 1e3, compile_warm * 1e3, (unsigned long long)per_token.n, timings_mean(&per_token) * 1e6,
           timings_p99(&per_token) * 1e6, per_token.worst * 1e6, (unsigned long long)replay.n_masks,
           (unsigned long long)replay.n_forced, (unsigned long long)full.n, timings_mean(&full) * 1e6,
           timings_p99(&full) * 1e6, full.worst * 1e6, (unsigned long long)guide.n_bulk,
           (unsigned long long)guide.n_cache_hits);
    if (times_prefix && (!timings_append(&per_token, times_prefix, ".tokens") || !timings_append(&full, times_prefix, ".masks")))
        return die(times_prefix, NULL);
    if (brute) printf(", %llu masks compared with the brute-force mask, %llu differed", (unsigned long long)checked, (unsigned long long)differed);
    printf("\n");
    free(full.v), free(per_token.v);
    free(text), free(cand), free(logits), free(replay_mem), free(schema);
    free(c.guide_mem), free(c.grammar_mem), free(c.gbnf), free(c.nodes);
    free(trie_mem), free(tok_mem), free(file);
    return status;
}
