/* Guided output for the npm package: a GBNF grammar or a JSON Schema (turned
 * into GBNF by adapters/json_schema.c) constrains the next generation. The
 * vocabulary trie, the compiled grammar and its guide live in one block per
 * model, planned exactly (trie + grammar first: the guide's size depends on
 * both) and allocated when the grammar is set, freed when it is cleared. */
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "guide.h"
#include "json.h"
#include "json_schema.h"

typedef struct ww_guided {
    void *mem;       /* trie + grammar */
    void *guide_mem; /* the guide */
    wisp_token_trie trie;
    const wisp_grammar *g;
    wisp_guide guide;
} ww_guided;

API void ww_guide_clear(ww_model *m) {
    ww_guided *gd = m->guided;
    m->sampler.guide = NULL;
    if (!gd) return;
    free(gd->guide_mem);
    free(gd->mem);
    free(gd);
    m->guided = NULL;
}

/* JSON Schema text -> GBNF (malloc'd), or NULL with m->err set. */
static char *schema_gbnf(ww_model *m, const char *schema, size_t len) {
    wisp_json j;
    size_t need = 0, glen = 0;
    wisp_status st = wisp_json_parse(&j, schema, len, NULL, 0, &need, &m->err);
    wisp_json_node *nodes = NULL;
    char *out = NULL;
    if (st == WISP_ERR_CAPACITY || st == WISP_OK) {
        nodes = malloc((need ? need : 1) * sizeof *nodes);
        st = nodes ? wisp_json_parse(&j, schema, len, nodes, need, NULL, &m->err)
                   : wisp_fail(&m->err, WISP_ERR_CAPACITY, "json schema: out of memory");
    }
    if (!st) {
        st = wisp_json_schema_to_gbnf(&j, NULL, 0, &glen, &m->err);
        if (st == WISP_ERR_CAPACITY) {
            out = malloc(glen + 1);
            st = out ? wisp_json_schema_to_gbnf(&j, out, glen + 1, &glen, &m->err)
                     : wisp_fail(&m->err, WISP_ERR_CAPACITY, "json schema: out of memory");
        }
    }
    free(nodes);
    if (st) {
        free(out);
        return NULL;
    }
    return out;
}

/* Constrain generation (until ww_guide_clear) by text[0..len): GBNF
 * (is_schema 0) or a JSON Schema (1). Call after ww_sampler, which resets
 * the sampler. 0, or -1 with the error (naming what is wrong) in ww_error. */
API int32_t ww_guide_set(ww_model *m, const char *text, int32_t len, int32_t is_schema) {
    ww_guide_clear(m);
    if (len < 0) return wisp_fail(&m->err, WISP_ERR_ARG, "grammar: negative length"), -1;
    char *gbnf = is_schema ? schema_gbnf(m, text, (size_t)len) : NULL;
    if (is_schema && !gbnf) return -1;
    const char *src = is_schema ? gbnf : text;
    size_t n = is_schema ? strlen(gbnf) : (size_t)len;
    const wisp_tokenizer *tok = wisp_ctx_tokenizer(m->ctx);
    wisp_matcher_limits lim = wisp_matcher_limits_default();
    ww_guided *gd = calloc(1, sizeof *gd);
    size_t trie_bytes = 0, grammar_bytes = 0;
    wisp_status st = gd ? WISP_OK : wisp_fail(&m->err, WISP_ERR_CAPACITY, "grammar: out of memory");
    if (!st) st = wisp_token_trie_plan(tok, &trie_bytes, &m->err);
    if (!st) st = wisp_grammar_plan(src, n, &grammar_bytes, &m->err);
    if (!st && !(gd->mem = malloc(trie_bytes + grammar_bytes)))
        st = wisp_fail(&m->err, WISP_ERR_CAPACITY, "grammar: out of memory (%zu bytes)", trie_bytes + grammar_bytes);
    wisp_arena arena;
    if (!st) {
        wisp_arena_init(&arena, gd->mem, trie_bytes + grammar_bytes);
        st = wisp_token_trie_init(&gd->trie, tok, &arena, &m->err);
    }
    if (!st) st = wisp_grammar_compile(src, n, &arena, &gd->g, &m->err);
    size_t guide_bytes = 0;
    if (!st) {
        guide_bytes = wisp_guide_plan(&gd->trie, gd->g, &lim);
        if (!(gd->guide_mem = malloc(guide_bytes)))
            st = wisp_fail(&m->err, WISP_ERR_CAPACITY, "grammar: out of memory (%zu bytes)", guide_bytes);
    }
    if (!st) {
        wisp_arena_init(&arena, gd->guide_mem, guide_bytes);
        st = wisp_guide_init(&gd->guide, &gd->trie, gd->g, &lim, &arena, &m->err);
    }
    free(gbnf);
    if (gd) m->guided = gd;
    if (st) {
        ww_guide_clear(m);
        return -1;
    }
    m->sampler.guide = &gd->guide;
    return 0;
}

/* After sampling failed with a guide attached: 1 when the grammar is complete
 * (a normal end), else 0 with the guide's reason in ww_error. */
int32_t ww_guide_finished(ww_model *m) {
    ww_guided *gd = m->guided;
    if (!gd) return 0;
    if (wisp_guide_done(&gd->guide) && !gd->guide.error.message[0]) return 1;
    if (wisp_guide_done(&gd->guide) && gd->trie.n_eog == 0) return 1;
    wisp_fail(&m->err, gd->guide.error.status ? gd->guide.error.status : WISP_ERR_FORMAT, "%s",
              gd->guide.error.message[0] ? gd->guide.error.message : "grammar: stopped");
    return 0;
}
