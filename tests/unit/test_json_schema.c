/* JSON Schema -> grammar, against ../shared/golden/constrained/schemas.json:
 * for every schema, its valid instances are accepted (written compactly
 * like Python's json.dumps, and as pretty-printed in the file) and its
 * invalid ones refused; a schema we do not compile must be refused with a
 * message naming one of the keywords the file lists for it, and that keyword
 * must be one we document as refused. Also the compile time per schema. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "grammar.h"
#include "json_file.h"
#include "json_schema.h"

/* json.dumps(v) with its default separators ", " and ": " */
static void dump(const wisp_json *j, int64_t n, char *out, size_t cap, size_t *len) {
    const wisp_json_node *node = &j->nodes[n];
#define PUT(s, k)                                                                                                     \
    do {                                                                                                              \
        for (size_t i_ = 0; i_ < (size_t)(k); i_++, (*len)++)                                                         \
            if (*len < cap) out[*len] = (s)[i_];                                                                      \
    } while (0)
    if (node->type == WISP_JSON_OBJECT || node->type == WISP_JSON_ARRAY) {
        bool obj = node->type == WISP_JSON_OBJECT;
        PUT(obj ? "{" : "[", 1);
        int i = 0;
        for (int64_t c = wisp_json_first(j, n); c >= 0; c = wisp_json_next(j, c), i++) {
            if (i) PUT(", ", 2);
            dump(j, c, out, cap, len);
            if (obj) {
                PUT(": ", 2);
                c = wisp_json_next(j, c);
                dump(j, c, out, cap, len);
            }
        }
        PUT(obj ? "}" : "]", 1);
        return;
    }
    if (node->type == WISP_JSON_STRING) {
        PUT("\"", 1);
        PUT(j->text + node->start, node->end - node->start);
        PUT("\"", 1);
        return;
    }
    PUT(j->text + node->start, node->end - node->start);
#undef PUT
}

/* The raw text of a value as the file has it (strings: with their quotes). */
static void raw_text(const wisp_json *j, int64_t n, const char **s, size_t *len) {
    const wisp_json_node *node = &j->nodes[n];
    size_t a = node->start, b = node->end;
    if (node->type == WISP_JSON_STRING) a--, b++;
    else if (node->type == WISP_JSON_OBJECT || node->type == WISP_JSON_ARRAY) {
        /* containers: start is at the bracket, end after the closing one */
    }
    *s = j->text + a;
    *len = b - a;
}

typedef struct gm {
    void *mem;
    wisp_arena arena;
    const wisp_grammar *g;
    wisp_matcher m;
} gm;

static wisp_status build(gm *x, const char *text, wisp_error *err) {
    size_t bytes;
    memset(x, 0, sizeof *x);
    wisp_status st = wisp_grammar_plan(text, strlen(text), &bytes, err);
    if (st) return st;
    wisp_matcher_limits lim = wisp_matcher_limits_default();
    size_t total = bytes + wisp_matcher_plan(NULL, &lim);
    x->mem = malloc(total);
    wisp_arena_init(&x->arena, x->mem, total);
    if ((st = wisp_grammar_compile(text, strlen(text), &x->arena, &x->g, err))) return st;
    return wisp_matcher_init(&x->m, x->g, &lim, &x->arena, err);
}

static bool accepts(gm *x, const char *s, size_t n) {
    wisp_error err;
    size_t ok;
    if (wisp_matcher_reset(&x->m, &err) || wisp_matcher_accept(&x->m, (const uint8_t *)s, n, &ok, &err)) return false;
    return wisp_matcher_can_end(&x->m);
}

static const char *const k_refused[] = {"uniqueItems", "if", "then", "else", "prefixItems", "not", "multipleOf",
                                        "patternProperties", "propertyNames", "minProperties", "maxProperties",
                                        "contains", "dependentRequired", "format", "oneOf"};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A pattern's character class becomes one grammar class, which holds at most
 * WISP_GRAMMAR_MAX_CLASS_RANGES items: at the limit it compiles into a grammar
 * that parses, one past it the schema compiler refuses it by name (found by
 * fuzz_json_schema: the compiler used to pass it on to a grammar that did not
 * parse). `items` single characters, \w counting four, negation three. */
static void check_class_limit(const char *prefix, int items, bool want_ok) {
    char schema[1024], *gbnf = malloc(1 << 16);
    int n = snprintf(schema, sizeof schema, "{\"type\": \"string\", \"pattern\": \"^[%s", prefix);
    static const char plain[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"; /* no class syntax */
    for (int i = 0; i < items; i++) schema[n++] = plain[i % (int)(sizeof plain - 1)];
    n += snprintf(schema + n, sizeof schema - (size_t)n, "]$\"}");
    wisp_json j;
    size_t need, len;
    wisp_error err = {0};
    wisp_json_parse(&j, schema, (size_t)n, NULL, 0, &need, &err);
    wisp_json_node *nodes = malloc(need * sizeof *nodes);
    CHECK(wisp_json_parse(&j, schema, (size_t)n, nodes, need, NULL, &err) == WISP_OK, "class schema: %s", err.message);
    wisp_status st = wisp_json_schema_to_gbnf(&j, gbnf, 1 << 16, &len, &err);
    if (want_ok) {
        gm x;
        CHECK(st == WISP_OK && build(&x, gbnf, &err) == WISP_OK, "class of %s+%d items at the limit: %s", prefix, items,
              err.message);
        free(x.mem);
    } else {
        CHECK(st != WISP_OK && strstr(err.message, "character class"), "class of %s+%d items past the limit: %s",
              prefix, items, st ? err.message : "accepted");
    }
    free(nodes);
    free(gbnf);
}

int main(void) {
    check_class_limit("", 128, true);
    check_class_limit("", 129, false);
    check_class_limit("^", 125, true);
    check_class_limit("^", 126, false);
    check_class_limit("\\\\w", 124, true);
    check_class_limit("\\\\w", 125, false);
    const char *path = shared_path("golden/constrained/schemas.json");
    if (!path) {
        fprintf(stderr, "FAIL test_json_schema: ../shared/golden/constrained/schemas.json is missing (set WISP_SHARED)\n");
        return 1;
    }
    wisp_json j;
    if (!json_file_load(path, &j)) return 1;
    size_t cap = 1 << 20;
    char *gbnf = malloc(cap), *inst = malloc(1 << 16);
    int n_schemas = 0, n_compiled = 0, n_refused = 0;
    double worst = 0, total_time = 0;
    for (int64_t it = wisp_json_first(&j, 0); it >= 0; it = wisp_json_next(&j, it), n_schemas++) {
        char id[64];
        wisp_json_string(&j, wisp_json_get(&j, it, "id"), id, sizeof id);
        int64_t sn = wisp_json_get(&j, it, "schema");
        const wisp_json_node *node = &j.nodes[sn];
        /* the schema as its own document, so $ref "#/..." resolves against it */
        wisp_json schema;
        size_t need;
        wisp_error err = {0};
        wisp_json_parse(&schema, j.text + node->start, node->end - node->start, NULL, 0, &need, &err);
        wisp_json_node *nodes = malloc(need * sizeof *nodes);
        CHECK(wisp_json_parse(&schema, j.text + node->start, node->end - node->start, nodes, need, NULL, &err) == WISP_OK,
              "%s: %s", id, err.message);
        size_t len;
        double t0 = now();
        wisp_status st = wisp_json_schema_to_gbnf(&schema, gbnf, cap, &len, &err);
        gm x;
        memset(&x, 0, sizeof x);
        if (st == WISP_OK) st = build(&x, gbnf, &err);
        double dt = now() - t0;
        if (st == WISP_ERR_UNSUPPORTED) {
            /* refused: the message must name a keyword the file lists for this schema, one we refuse */
            bool named = false;
            int64_t kws = wisp_json_get(&j, it, "keywords");
            for (int64_t k = wisp_json_first(&j, kws); k >= 0 && !named; k = wisp_json_next(&j, k)) {
                char kw[64], quoted[70];
                wisp_json_string(&j, k, kw, sizeof kw);
                snprintf(quoted, sizeof quoted, "'%s'", kw);
                bool documented = false;
                for (size_t r = 0; r < sizeof k_refused / sizeof k_refused[0]; r++) documented |= strcmp(kw, k_refused[r]) == 0;
                named = documented && strstr(err.message, quoted) != NULL;
            }
            CHECK(named, "%s: refused without naming one of its keywords: %s", id, err.message);
            printf("  %-28s refused: %s\n", id, err.message);
            n_refused++;
        } else {
            CHECK(st == WISP_OK, "%s: %s", id, err.message);
            if (st == WISP_OK) {
                n_compiled++;
                total_time += dt;
                if (dt > worst) worst = dt;
                int64_t valid = wisp_json_get(&j, it, "valid"), invalid = wisp_json_get(&j, it, "invalid");
                for (int64_t v = wisp_json_first(&j, valid); v >= 0; v = wisp_json_next(&j, v)) {
                    size_t n = 0;
                    dump(&j, v, inst, 1 << 16, &n);
                    CHECK(accepts(&x, inst, n), "%s: valid instance refused: %.*s", id, (int)n, inst);
                    const char *r;
                    raw_text(&j, v, &r, &n);
                    CHECK(accepts(&x, r, n), "%s: valid instance (pretty) refused: %.*s", id, (int)n, r);
                }
                for (int64_t v = wisp_json_first(&j, invalid); v >= 0; v = wisp_json_next(&j, v)) {
                    size_t n = 0;
                    dump(&j, wisp_json_get(&j, v, "instance"), inst, 1 << 16, &n);
                    CHECK(!accepts(&x, inst, n), "%s: invalid instance accepted: %.*s", id, (int)n, inst);
                }
                printf("  %-28s ok: grammar %zu bytes, %.3f ms to compile\n", id, len, dt * 1e3);
            }
        }
        free(x.mem);
        free(nodes);
    }
    printf("schemas: %d compiled (mean %.3f ms, worst %.3f ms to compile), %d refused by name\n", n_compiled,
           n_compiled ? total_time / n_compiled * 1e3 : 0.0, worst * 1e3, n_refused);
    CHECK(n_schemas == 25, "%d schemas", n_schemas);
    CHECK(n_compiled >= 18, "only %d schemas compiled", n_compiled);
    free(gbnf);
    free(inst);
    json_file_free(&j);
    return check_report("test_json_schema");
}
