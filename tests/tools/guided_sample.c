/* guided_sample VOCAB.gguf (SCHEMA.json | GRAMMAR.gbnf) SEEDS OUT_PREFIX [--exact] [--brute-force]: constrained
 * sampling without a model. Each step draws fresh random logits (a seeded
 * normal-ish distribution over the whole vocabulary: what a random-weight
 * model's output looks like, minus the cost of its forward pass) and samples
 * through the sampler's grammar stage, exactly as `wisp run --json-schema`
 * does; writes OUT_PREFIX.SEED.json per seed. The vocabulary and its trie
 * are built once, so 20 seeds of every schema take seconds. Prints the mean,
 * p99 and worst CPU time of a full mask. --brute-force checks every full
 * mask against asking each token of the vocabulary byte by byte (slow: the
 * reference, not the bench), for the first BRUTE_MASKS masks of each seed;
 * the text is then cut there, so it need not finish. */
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

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: guided_sample VOCAB.gguf (SCHEMA.json | GRAMMAR.gbnf) SEEDS OUT_PREFIX [--exact] [--brute-force]\n");
        return 2;
    }
    bool exact = false, brute = false;
    for (int i = 5; i < argc; i++) {
        if (strcmp(argv[i], "--exact") == 0) exact = true;
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
    /* the schema, as a grammar (or a grammar as it is) */
    size_t slen, glen;
    char *schema = (char *)read_file(argv[2], &slen), *gbnf;
    wisp_json_node *nodes = NULL;
    if (!schema) return die(argv[2], NULL);
    size_t plen = strlen(argv[2]);
    if (plen > 5 && strcmp(argv[2] + plen - 5, ".gbnf") == 0) {
        gbnf = malloc(slen + 1);
        memcpy(gbnf, schema, slen);
        glen = slen;
    } else {
        wisp_json j;
        size_t need;
        wisp_json_parse(&j, schema, slen, NULL, 0, &need, &err);
        nodes = malloc(need * sizeof *nodes);
        if (wisp_json_parse(&j, schema, slen, nodes, need, NULL, &err)) return die("schema JSON", &err);
        wisp_json_schema_limits lim = wisp_json_schema_bounded();
        wisp_json_schema_to_gbnf_ex(&j, exact ? NULL : &lim, NULL, 0, &glen, &err);
        gbnf = malloc(glen + 1);
        if (wisp_json_schema_to_gbnf_ex(&j, exact ? NULL : &lim, gbnf, glen + 1, &glen, &err)) return die("schema", &err);
    }
    size_t gbytes;
    if (wisp_grammar_plan(gbnf, glen, &gbytes, &err)) return die("grammar plan", &err);
    void *gmem = malloc(gbytes);
    const wisp_grammar *gr;
    wisp_arena_init(&a, gmem, gbytes);
    if (wisp_grammar_compile(gbnf, glen, &a, &gr, &err)) return die("grammar", &err);
    wisp_matcher_limits ml = wisp_matcher_limits_default();
    size_t guide_bytes = wisp_guide_plan(&trie, gr, &ml);
    void *guide_mem = malloc(guide_bytes);
    wisp_guide guide;
    wisp_arena_init(&a, guide_mem, guide_bytes);
    if (wisp_guide_init(&guide, &trie, gr, &ml, &a, &err)) return die("guide", &err);

    int32_t nv = wisp_tokenizer_n_vocab(&tok);
    float *logits = malloc(sizeof(float) * (size_t)nv);
    wisp_candidate *cand = malloc(sizeof(wisp_candidate) * (size_t)nv);
    char *text = malloc(1 << 20);
    double mask_time = 0, mask_worst = 0;
    static double times[65536];
    uint64_t masks = 0, checked = 0, differed = 0;
    int status = 0;
    for (int seed = 1; seed <= seeds; seed++) {
        if (wisp_guide_reset(&guide, &err)) return die("reset", &err);
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
                masks++;
                mask_time += dt;
                times[masks < 65536 ? masks - 1 : 65535] = dt;
                if (dt > mask_worst) mask_worst = dt;
            }
            int32_t id = wisp_sample_logits(logits, nv, &s, NULL, 0, cand);
            if (id < 0) {
                if (!wisp_guide_done(&guide)) {
                    fprintf(stderr, "guided_sample: seed %d: %s\n", seed, guide.error.message);
                    status = 1;
                }
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
    /* p99 of the masks timed */
    size_t nt = masks < 65536 ? (size_t)masks : 65536;
    for (size_t i = 1; i < nt; i++)
        for (size_t k = i; k > 0 && times[k - 1] > times[k]; k--) {
            double x = times[k];
            times[k] = times[k - 1], times[k - 1] = x;
        }
    double p99 = nt ? times[(nt * 99) / 100 < nt ? (nt * 99) / 100 : nt - 1] : 0;
    printf("%s: %d seeds, vocab %d, %llu full masks: mean %.1f us, p99 %.1f us, worst %.1f us (CPU time), %llu subtrees "
           "allowed whole, %llu cache hits", argv[2], seeds, nv, (unsigned long long)masks,
           masks ? mask_time / (double)masks * 1e6 : 0.0, p99 * 1e6, mask_worst * 1e6, (unsigned long long)guide.n_bulk,
           (unsigned long long)guide.n_cache_hits);
    if (brute) printf(", %llu masks compared with the brute-force mask, %llu differed", (unsigned long long)checked, (unsigned long long)differed);
    printf("\n");
    free(text), free(cand), free(logits), free(guide_mem), free(gmem), free(gbnf), free(nodes), free(schema);
    free(trie_mem), free(tok_mem), free(file);
    return status;
}
