/* The grammar sampler stage over a real vocabulary (stories260K, 512 tokens
 * with byte tokens): the trie and guide plans are exact (one byte less
 * fails naming the shortfall); at every step of a walk through a grammar the
 * full mask equals asking token by token, end tokens are allowed exactly
 * where the grammar may end, forced tokens are allowed ones; and a seeded
 * sampler with the guide attached only ever produces accepted text, the same
 * for the same seed; along a long length-capped string (a grammar state per
 * character) a guide gives, at every step, the mask a freshly set up guide
 * gives, with the default tables, tiny walk tables and tiny node pools; over
 * DeepSeek's 102k vocabulary, masks inside length-capped strings (subtrees
 * allowed down to the characters left) equal asking token by token. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gguf.h"
#include "guide.h"
#include "json_schema.h"
#include "sampler.h"

static wisp_tokenizer tok;
static wisp_token_trie trie;

/* everything allocated, freed at the end (the leak checkers count leaks as findings) */
#define MAX_ALLOCS 256
static void *allocs[MAX_ALLOCS];
static int n_allocs;
static void *keep(void *p) {
    CHECK(n_allocs < MAX_ALLOCS, "more than %d blocks kept: raise MAX_ALLOCS", MAX_ALLOCS);
    if (n_allocs < MAX_ALLOCS) allocs[n_allocs++] = p;
    return p;
}

static bool load_vocab_into(const char *relative, wisp_tokenizer *tk, wisp_token_trie *tr) {
    const char *path = shared_path(relative);
    if (!path) return false;
    size_t n, bytes;
    unsigned char *file = keep(read_file(path, &n)); /* lives for the test */
    static wisp_gguf g;
    wisp_error err;
    if (!file || wisp_gguf_open(&g, file, n, &err) || wisp_tokenizer_plan(&g, &bytes, &err)) return false;
    wisp_arena a;
    wisp_arena_init(&a, keep(malloc(bytes)), bytes);
    if (wisp_tokenizer_init(tk, &g, &a, &err)) return false;
    /* the trie: exactly its plan, and one byte less fails */
    if (wisp_token_trie_plan(tk, &bytes, &err)) return false;
    char *mem = keep(malloc(bytes));
    wisp_arena_init(&a, mem, bytes - 1);
    CHECK(wisp_token_trie_init(tr, tk, &a, &err) == WISP_ERR_ARENA && strstr(err.message, "1 short"),
          "trie with one byte less: %s", err.message);
    wisp_arena_init(&a, mem, bytes);
    CHECK(wisp_token_trie_init(tr, tk, &a, &err) == WISP_OK, "%s", err.message);
    CHECK(a.used == bytes && a.part_bytes[WISP_PART_TOKEN_TRIE] == bytes, "trie carved %zu of %zu", a.used, bytes);
    return true;
}

static bool load_vocab(void) { return load_vocab_into("models/stories260K.gguf", &tok, &trie); }

typedef struct built {
    void *mem;
    const wisp_grammar *g;
    wisp_guide gd;
} built;

static bool build_on(built *b, const wisp_token_trie *tr, const char *text, wisp_matcher_limits lim) {
    wisp_error err;
    size_t gbytes;
    memset(b, 0, sizeof *b);
    if (wisp_grammar_plan(text, strlen(text), &gbytes, &err)) return false;
    b->mem = keep(malloc(gbytes));
    wisp_arena a;
    wisp_arena_init(&a, b->mem, gbytes);
    if (wisp_grammar_compile(text, strlen(text), &a, &b->g, &err)) return false;
    size_t need = wisp_guide_plan(tr, b->g, &lim);
    void *gm = keep(malloc(need));
    wisp_arena_init(&a, gm, need - 1);
    CHECK(wisp_guide_init(&b->gd, tr, b->g, &lim, &a, &err) == WISP_ERR_ARENA, "guide with one byte less");
    wisp_arena_init(&a, gm, need);
    bool ok = wisp_guide_init(&b->gd, tr, b->g, &lim, &a, &err) == WISP_OK;
    CHECK(ok && a.used == need, "guide: %s (carved %zu of %zu)", err.message, a.used, need);
    return ok;
}

static bool build_limited(built *b, const char *text, wisp_matcher_limits lim) { return build_on(b, &trie, text, lim); }

static bool build(built *b, const char *text) { return build_limited(b, text, wisp_matcher_limits_default()); }

/* At the current state: mask == token-by-token answers, computed twice (the
 * second time it may come from the mask cache and must be the same). */
static void check_mask(wisp_guide *gd, const char *where) {
    for (int pass = 0; pass < 2; pass++) {
        wisp_error err = {0};
        uint32_t n = wisp_guide_mask(gd, &err), count = 0, mismatches = 0;
        for (int32_t id = 0; id < gd->trie->n_vocab; id++) {
            bool in_mask = (gd->mask[id >> 5] >> (id & 31)) & 1u;
            count += in_mask;
            if (in_mask != wisp_guide_allows(gd, id)) mismatches++;
        }
        CHECK(count == n && mismatches == 0, "%s (pass %d): mask has %u (%u counted), %u disagree with allows()", where,
              pass, n, count, mismatches);
    }
}

/* States that come back (inside a string) are served from the mask cache,
 * and stay exact across node renumbering: tiny node pools force the matcher
 * to compact (a new epoch) many times during the walk. */
static void walk_text(built *b, const char *text, const char *name_of_test) {
    wisp_error err;
    for (size_t i = 0; text[i]; i++) {
        char where[80];
        snprintf(where, sizeof where, "%s, after %zu bytes", name_of_test, i);
        check_mask(&b->gd, where);
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", (unsigned char)text[i]);
        int32_t id = wisp_token_lookup(&tok, name, strlen(name));
        REQUIRE(id >= 0 && wisp_guide_accept(&b->gd, id, &err) == WISP_OK, "%s: %s", where, err.message);
    }
    check_mask(&b->gd, name_of_test);
}

static void test_cache(void) {
    built b;
    REQUIRE(build(&b, "root ::= \"{\\\"k\\\": \\\"\" [a-z ]* \"\\\"}\" | \"[\" [0-9]+ \"]\"\n"), "grammar");
    const char *text = "{\"k\": \"the cat sat on the mat and the dog sat too\"}";
    walk_text(&b, text, "string");
    uint64_t walks = b.gd.n_masks - b.gd.n_cache_hits;
    /* 2 masks per position; inside the string the state repeats, so far fewer walks than positions */
    CHECK(b.gd.n_cache_hits > strlen(text), "cache hits %llu of %llu masks", (unsigned long long)b.gd.n_cache_hits,
          (unsigned long long)b.gd.n_masks);
    CHECK(walks < strlen(text) / 2, "%llu walks for %zu positions", (unsigned long long)walks, strlen(text));
    /* nesting makes new stack nodes; a tiny pool makes the matcher compact (renumber) often */
    built n;
    wisp_matcher_limits lim = wisp_matcher_limits_default();
    lim.max_nodes = 16;
    REQUIRE(build_limited(&n, "root ::= \"(\" root \")\" | [a-z]+\n", lim), "nested grammar");
    uint32_t epoch0 = n.gd.m.epoch;
    walk_text(&n, "((((ab))))", "nested");
    CHECK(n.gd.m.epoch > epoch0 + 2, "tiny pools: the matcher compacted (epoch %u -> %u)", epoch0, n.gd.m.epoch);
}

/* A guide that has just been set up, taken through tokens `ids` (into `mem`). */
static bool fresh_guide(wisp_guide *gd, const wisp_grammar *g, void *mem, size_t bytes, const int32_t *ids, int n) {
    wisp_matcher_limits lim = wisp_matcher_limits_default();
    wisp_arena a;
    wisp_arena_init(&a, mem, bytes);
    wisp_error err;
    if (wisp_guide_init(gd, &trie, g, &lim, &a, &err)) return false;
    for (int i = 0; i < n; i++)
        if (wisp_guide_accept(gd, ids[i], &err)) return false;
    return true;
}

/* Walk `b` through its grammar choosing tokens from its own masks (seeded;
 * tokens without quotes or backslashes first, so strings run to their length
 * cap) and compare every mask with a freshly set up guide's at the same
 * point: whatever the guide carries from earlier masks (its mask cache, its
 * matcher's nodes) must change nothing. `text` gets what was generated. */
static void compare_with_fresh(built *b, uint64_t seed, const char *name, char *text, size_t cap) {
    wisp_error err = {0};
    wisp_matcher_limits lim = wisp_matcher_limits_default();
    size_t bytes = wisp_guide_plan(&trie, b->g, &lim);
    void *mem = keep(malloc(bytes));
    int32_t ids[400], pick[512];
    int n = 0, differ = 0;
    size_t len = 0;
    REQUIRE(mem && wisp_guide_reset(&b->gd, &err) == WISP_OK, "%s: reset: %s", name, err.message);
    while (n < 400 && !wisp_guide_done(&b->gd)) {
        uint32_t allowed = wisp_guide_mask(&b->gd, &err);
        REQUIRE(allowed > 0, "%s, token %d: nothing allowed: %s", name, n, err.message);
        wisp_guide fresh;
        REQUIRE(fresh_guide(&fresh, b->g, mem, bytes, ids, n), "%s, token %d: fresh guide", name, n);
        uint32_t fresh_allowed = wisp_guide_mask(&fresh, &err);
        if (fresh_allowed != allowed || memcmp(fresh.mask, b->gd.mask, ((size_t)trie.n_vocab + 31) / 32 * 4) != 0) differ++;
        int n_pick = 0;
        for (int pass = 0; pass < 2 && n_pick == 0; pass++)
            for (int32_t id = 0; id < trie.n_vocab; id++) {
                if (!((b->gd.mask[id >> 5] >> (id & 31)) & 1u)) continue;
                char piece[64];
                size_t plen = wisp_token_piece(&tok, id, piece, sizeof piece - 1);
                if (pass == 0 && (plen == 0 || memchr(piece, '"', plen) || memchr(piece, '\\', plen))) continue;
                pick[n_pick++] = id;
            }
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        ids[n] = pick[(seed >> 33) % (uint64_t)n_pick];
        REQUIRE(wisp_guide_accept(&b->gd, ids[n], &err) == WISP_OK, "%s, token %d: %s", name, n, err.message);
        len += wisp_token_piece(&tok, ids[n], text + len, cap - 1 - len);
        n++;
    }
    CHECK(wisp_guide_done(&b->gd), "%s: the grammar completes in %d tokens", name, n);
    text[len] = 0;
    CHECK(differ == 0, "%s: %d of %d masks differ from a fresh guide's", name, differ, n);
}

/* Characters of the string that opens at `quote` (UTF-8 continuation bytes do not count), -1: none. */
static int string_chars(const char *quote) {
    if (!quote || *quote != '"') return -1;
    int n = 0;
    for (const char *p = quote + 1; *p && *p != '"'; p++) n += ((unsigned char)*p & 0xC0) != 0x80;
    return n;
}

static void test_same_as_fresh(void) {
    /* a long length-capped string: every character position is a grammar state of its own */
    const char *schema = "{\"type\": \"object\", \"properties\": {\"note\": {\"type\": \"string\", \"maxLength\": 150}, "
                         "\"n\": {\"type\": \"integer\"}}, \"required\": [\"note\", \"n\"], \"additionalProperties\": false}";
    wisp_error err;
    wisp_json j;
    wisp_json_node nodes[64];
    REQUIRE(wisp_json_parse(&j, schema, strlen(schema), nodes, 64, NULL, &err) == WISP_OK, "schema: %s", err.message);
    static char gbnf[1 << 16], text[4096];
    size_t len;
    REQUIRE(wisp_json_schema_to_gbnf(&j, gbnf, sizeof gbnf, &len, &err) == WISP_OK, "schema: %s", err.message);
    built b;
    REQUIRE(build(&b, gbnf), "schema grammar");
    compare_with_fresh(&b, 1, "default tables", text, sizeof text);
    const char *note = strstr(text, "\"note\"");
    CHECK(note && string_chars(strchr(note + 6, '"')) == 150, "default tables: the string ran to its cap in %s", text);

    /* walk tables of 32 states (a walk into the string meets 19) */
    wisp_matcher_limits lim = wisp_matcher_limits_default();
    lim.walk_states = 32, lim.walk_steps = 1024;
    const char *spaced = "jchar ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"
                         "root ::= [ ]{0,14} \"\\\"\" jchar{0,150} \"\\\"\"\n";
    built tiny;
    REQUIRE(build_limited(&tiny, spaced, lim), "spaces and a string, 32 states");
    compare_with_fresh(&tiny, 2, "32 states", text, sizeof text);
    CHECK(string_chars(strchr(text, '"')) == 150, "32 states: the string ran to its cap in %s", text);
    /* node pools so small that the matcher compacts (renumbers its nodes) again and again */
    lim = wisp_matcher_limits_default();
    lim.max_nodes = 256;
    REQUIRE(build_limited(&tiny, gbnf, lim), "schema grammar, 256 nodes");
    uint32_t epoch0 = tiny.gd.m.epoch;
    compare_with_fresh(&tiny, 3, "256 nodes", text, sizeof text);
    note = strstr(text, "\"note\"");
    CHECK(note && string_chars(strchr(note + 6, '"')) == 150, "256 nodes: the string ran to its cap in %s", text);
    CHECK(tiny.gd.m.epoch > epoch0 + 3, "256 nodes: matcher epochs %u -> %u", epoch0, tiny.gd.m.epoch);
}

static void test_walk(void) {
    built b;
    REQUIRE(build(&b, "root ::= \"Once\" ( \" upon a time\" | \" there\" ) [a-z ,.]{1,40} \"!\"\n"), "grammar");
    const char *text = "Once upon a time, a cat sat!";
    int32_t eos = wisp_tokenizer_eos(&tok);
    wisp_error err;
    for (size_t i = 0; text[i]; i++) {
        char where[64];
        snprintf(where, sizeof where, "after %zu bytes", i);
        check_mask(&b.gd, where);
        CHECK(!wisp_guide_allows(&b.gd, eos), "%s: end allowed too early", where);
        /* advance one byte through its byte token <0xXX> */
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", (unsigned char)text[i]);
        int32_t id = wisp_token_lookup(&tok, name, strlen(name));
        REQUIRE(id >= 0 && wisp_guide_allows(&b.gd, id), "byte token %s refused at %zu", name, i);
        REQUIRE(wisp_guide_accept(&b.gd, id, &err) == WISP_OK, "%s", err.message);
    }
    CHECK(wisp_guide_done(&b.gd), "the grammar is complete after '!'");
    CHECK(wisp_guide_allows(&b.gd, eos), "end allowed at the end");
    check_mask(&b.gd, "at the end");
    CHECK(wisp_guide_forced(&b.gd) == eos, "at the end the end token is forced");
}

static void test_sampling(void) {
    built b;
    REQUIRE(build(&b, "root ::= \"The \" ( \"cat\" | \"dog\" | \"bird\" ) \" is \" [a-z]{2,12} \".\"\n"), "grammar");
    float *logits = malloc(sizeof(float) * (size_t)trie.n_vocab);
    wisp_candidate *c = malloc(sizeof(wisp_candidate) * (size_t)trie.n_vocab);
    char first[256] = {0};
    for (int round = 0; round < 2; round++) {
        for (int seed = 1; seed <= 10; seed++) {
            wisp_error err;
            REQUIRE(wisp_guide_reset(&b.gd, &err) == WISP_OK, "%s", err.message);
            wisp_sampler_params p = wisp_sampler_defaults();
            p.seed = (uint64_t)seed;
            p.repeat_penalty = seed % 2 ? 1.3f : 1.0f;
            p.temperature = seed == 3 ? 0.0f : 1.2f;
            wisp_sampler s;
            wisp_sampler_init(&s, &p);
            s.guide = &b.gd;
            uint64_t rng = (uint64_t)seed;
            char text[256];
            size_t len = 0;
            int32_t hist[64];
            size_t nh = 0;
            for (int step = 0; step < 60; step++) {
                for (int32_t i = 0; i < trie.n_vocab; i++) logits[i] = 6.0f * wisp_rng_uniform(&rng);
                int32_t id = wisp_sample_logits(logits, trie.n_vocab, &s, hist, nh, c);
                REQUIRE(id >= 0, "seed %d: %s", seed, b.gd.error.message);
                if (wisp_tokenizer_is_eog(&tok, id)) break;
                if (nh < 64) hist[nh++] = id;
                len += wisp_token_piece(&tok, id, text + len, sizeof text - 1 - len);
            }
            text[len] = 0;
            CHECK(wisp_guide_done(&b.gd), "seed %d: unfinished '%s'", seed, text);
            CHECK(strncmp(text, "The ", 4) == 0 && text[len - 1] == '.', "seed %d: '%s'", seed, text);
            if (seed == 1 && round == 0) snprintf(first, sizeof first, "%s", text);
            if (seed == 1 && round == 1) CHECK(strcmp(first, text) == 0, "same seed, different text");
        }
    }
    CHECK(b.gd.n_masks > 0 && b.gd.n_forced > 0, "masks %llu, forced %llu", (unsigned long long)b.gd.n_masks,
          (unsigned long long)b.gd.n_forced);
    free(logits);
    free(c);
}

/* The token made of byte b alone (a byte-level vocabulary has one for every byte), -1: none. */
static int32_t byte_token(const wisp_token_trie *tr, uint8_t b) {
    for (int32_t id = 0; id < tr->n_vocab; id++)
        if (tr->off[id + 1] == tr->off[id] + 1 && tr->bytes[tr->off[id]] == b) return id;
    return -1;
}

/* Inside a length-capped string, subtrees are allowed down to the characters
 * left and refused below (no descent node by node): over DeepSeek's real
 * 102k vocabulary (long tokens, CJK and other multi-byte characters), at
 * every cap 0..9 and at every byte along strings that run to their cap
 * through multi-byte characters, the mask equals asking token by token. */
static void test_fitting_depth(void) {
    static wisp_tokenizer big_tok;
    static wisp_token_trie big;
    REQUIRE(load_vocab_into("models/tokenizers/llamacpp-vocab/ggml-vocab-deepseek-llm.gguf", &big_tok, &big),
            "cannot load DeepSeek's vocabulary from ../shared");
    uint64_t fitting = 0;
    for (int cap = 0; cap <= 9; cap++) {
        char gbnf[256], where[96];
        const char *classes[] = {"[^\"\\\\\\x00-\\x1F]", "[a-z]"}; /* a JSON string's characters; letters only */
        for (int c = 0; c < 2; c++) {
            snprintf(gbnf, sizeof gbnf, "root ::= \"\\\"\" %s{0,%d} \"\\\"\"\n", classes[c], cap);
            built b;
            REQUIRE(build_on(&b, &big, gbnf, wisp_matcher_limits_default()), "grammar %s", gbnf);
            wisp_error err;
            REQUIRE(wisp_guide_accept(&b.gd, byte_token(&big, '"'), &err) == WISP_OK, "quote: %s", err.message);
            snprintf(where, sizeof where, "cap %d, %s, at the start", cap, c ? "letters" : "string");
            check_mask(&b.gd, where);
            /* "é世z" repeated: 2- and 3-byte characters and a letter, byte by byte, to the cap */
            const char *text = c ? "abcdefghij" : "\xC3\xA9\xE4\xB8\x96z\xC3\xA9\xE4\xB8\x96z\xC3\xA9\xE4\xB8\x96z\xC3\xA9";
            for (int k = 0, chars = 0; text[k] && chars < cap; k++) {
                chars += ((unsigned char)text[k] & 0xC0) != 0x80;
                REQUIRE(wisp_guide_accept(&b.gd, byte_token(&big, (uint8_t)text[k]), &err) == WISP_OK, "cap %d byte %d: %s",
                        cap, k, err.message);
                snprintf(where, sizeof where, "cap %d, %s, after %d bytes", cap, c ? "letters" : "string", k + 1);
                check_mask(&b.gd, where);
            }
            fitting += b.gd.n_fitting;
        }
    }
    CHECK(fitting > 100, "subtrees allowed down to the characters left: %llu", (unsigned long long)fitting);
}

int main(void) {
    if (!load_vocab()) {
        fprintf(stderr, "FAIL test_guide: cannot load ../shared/models/stories260K.gguf (set WISP_SHARED)\n");
        return 1;
    }
    test_walk();
    test_cache();
    test_same_as_fresh();
    test_sampling();
    test_fitting_depth();
    for (int i = 0; i < n_allocs; i++) free(allocs[i]);
    return check_report("test_guide");
}
