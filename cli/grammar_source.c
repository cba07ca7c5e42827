#include "grammar_source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "json_schema.h"
#include "session.h"
#include "tokenizer.h"

char *cli_read_text(const char *path, size_t *len, const char *who) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "wisp %s: cannot open %s\n", who, path);
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        if (n + 1 >= cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger, cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        fprintf(stderr, "wisp %s: cannot read %s\n", who, path);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

char *cli_schema_gbnf(const char *schema, size_t len, bool bounded, const char *who) {
    wisp_json_schema_limits lim = wisp_json_schema_bounded();
    wisp_json j;
    wisp_error err = {0};
    size_t need = 0;
    wisp_status st = wisp_json_parse(&j, schema, len, NULL, 0, &need, &err);
    wisp_json_node *nodes = NULL;
    char *out = NULL;
    if (st == WISP_ERR_CAPACITY || st == WISP_OK) {
        nodes = malloc((need ? need : 1) * sizeof *nodes);
        st = nodes ? wisp_json_parse(&j, schema, len, nodes, need, NULL, &err)
                   : wisp_fail(&err, WISP_ERR_CAPACITY, "out of memory");
    }
    size_t glen = 0;
    if (!st) {
        st = wisp_json_schema_to_gbnf_ex(&j, bounded ? &lim : NULL, NULL, 0, &glen, &err);
        if (st == WISP_ERR_CAPACITY) {
            out = malloc(glen + 1);
            st = out ? wisp_json_schema_to_gbnf_ex(&j, bounded ? &lim : NULL, out, glen + 1, &glen, &err)
                     : wisp_fail(&err, WISP_ERR_CAPACITY, "out of memory");
        }
    }
    free(nodes);
    if (st) {
        free(out);
        cli_report(who, &err);
        return NULL;
    }
    return out;
}

char *cli_grammar_text(const cli_grammar_opts *o, bool *none, const char *who) {
    int given = (o->text != NULL) + (o->file != NULL) + (o->schema != NULL) + o->json;
    *none = given == 0 && !o->bounded;
    if (*none) return NULL;
    if (given > 1) {
        fprintf(stderr, "wisp %s: give only one of --grammar, --grammar-file, --json-schema, --json-mode\n", who);
        return NULL;
    }
    if (o->bounded && !o->json && !o->schema) { /* never ignored silently */
        fprintf(stderr, "wisp %s: --json-bounded goes with --json-mode or --json-schema\n", who);
        return NULL;
    }
    if (o->text) {
        char *t = malloc(strlen(o->text) + 1);
        if (t) strcpy(t, o->text);
        return t;
    }
    if (o->file) return cli_read_text(o->file, NULL, who);
    if (o->json) {
        wisp_json_schema_limits lim = wisp_json_schema_bounded();
        size_t n = wisp_json_any_gbnf(1, o->bounded ? &lim : NULL, NULL, 0);
        char *t = malloc(n + 1);
        if (t) wisp_json_any_gbnf(1, o->bounded ? &lim : NULL, t, n + 1);
        return t;
    }
    /* --json-schema: inline JSON when it starts like JSON, else a file */
    const char *s = o->schema;
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') s++;
    if (*s == '{' || *s == '[' || strcmp(s, "true") == 0) return cli_schema_gbnf(o->schema, strlen(o->schema), o->bounded, who);
    size_t len;
    char *text = cli_read_text(o->schema, &len, who);
    if (!text) return NULL;
    char *g = cli_schema_gbnf(text, len, o->bounded, who);
    free(text);
    return g;
}

bool cli_grammar_build(cli_grammar *cg, const char *gbnf, const char *who) {
    memset(cg, 0, sizeof *cg);
    wisp_error err = {0};
    size_t len = strlen(gbnf);
    double t0 = cli_now();
    wisp_matcher_limits lim = wisp_matcher_limits_default();
    wisp_status st = wisp_grammar_plan(gbnf, len, &cg->grammar_bytes, &err);
    if (!st) {
        cg->matcher_bytes = wisp_matcher_plan(NULL, &lim);
        size_t total = cg->grammar_bytes + cg->matcher_bytes;
        if (posix_memalign(&cg->mem, 64, total ? total : 64)) st = wisp_fail(&err, WISP_ERR_CAPACITY, "out of memory");
        else wisp_arena_init(&cg->arena, cg->mem, total);
    }
    if (!st) st = wisp_grammar_compile(gbnf, len, &cg->arena, &cg->g, &err);
    if (!st) st = wisp_matcher_init(&cg->m, cg->g, &lim, &cg->arena, &err);
    cg->compile_seconds = cli_now() - t0;
    if (st) {
        cli_report(who, &err);
        cli_grammar_free(cg);
        return false;
    }
    return true;
}

void cli_grammar_free(cli_grammar *cg) {
    free(cg->mem);
    cg->mem = NULL;
}

bool cli_guide_open(cli_guide *cg, const wisp_tokenizer *tok, const char *gbnf, const char *who) {
    wisp_matcher_limits lim = wisp_matcher_limits_default();
    return cli_guide_open_limits(cg, tok, gbnf, &lim, who);
}

bool cli_guide_open_limits(cli_guide *cg, const wisp_tokenizer *tok, const char *gbnf, const wisp_matcher_limits *limits,
                           const char *who) {
    memset(cg, 0, sizeof *cg);
    wisp_error err = {0};
    size_t len = strlen(gbnf);
    wisp_matcher_limits lim = *limits;
    wisp_status st = wisp_token_trie_plan(tok, &cg->trie_bytes, &err);
    if (!st) st = wisp_grammar_plan(gbnf, len, &cg->grammar_bytes, &err);
    wisp_arena arena;
    if (!st) {
        /* the guide depends on the trie (its longest token): trie and grammar first, the guide after */
        size_t first = cg->trie_bytes + cg->grammar_bytes;
        if (posix_memalign(&cg->mem, 64, first)) st = wisp_fail(&err, WISP_ERR_CAPACITY, "out of memory");
    }
    if (!st) {
        double t0 = cli_now();
        wisp_arena_init(&arena, cg->mem, cg->trie_bytes + cg->grammar_bytes);
        st = wisp_token_trie_init(&cg->trie, tok, &arena, &err);
        cg->trie_seconds = cli_now() - t0;
        t0 = cli_now();
        if (!st) st = wisp_grammar_compile(gbnf, len, &arena, &cg->g, &err);
        cg->compile_seconds = cli_now() - t0;
    }
    void *guide_mem = NULL;
    if (!st) {
        cg->guide_bytes = wisp_guide_plan(&cg->trie, cg->g, &lim);
        if (posix_memalign(&guide_mem, 64, cg->guide_bytes)) st = wisp_fail(&err, WISP_ERR_CAPACITY, "out of memory");
    }
    if (!st) {
        wisp_arena ga;
        wisp_arena_init(&ga, guide_mem, cg->guide_bytes);
        st = wisp_guide_init(&cg->guide, &cg->trie, cg->g, &lim, &ga, &err);
    }
    if (st) {
        free(guide_mem);
        cli_report(who, &err);
        free(cg->mem);
        cg->mem = NULL;
        return false;
    }
    cg->guide_mem = guide_mem;
    return true;
}

void cli_guide_close(cli_guide *cg) {
    free(cg->guide_mem);
    free(cg->mem);
    cg->mem = cg->guide_mem = NULL;
}

bool cli_guide_finished(cli_guide *cg, const char *who) {
    if (wisp_guide_done(&cg->guide) && !cg->guide.error.message[0]) return true;
    if (wisp_guide_done(&cg->guide) && cg->trie.n_eog == 0) return true;
    fprintf(stderr, "wisp %s: %s\n", who, cg->guide.error.message[0] ? cg->guide.error.message : "grammar: stopped");
    return false;
}
