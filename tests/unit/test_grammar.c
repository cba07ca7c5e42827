/* GBNF grammars: the shared grammars accept their `match` strings and refuse
 * their `nomatch` strings; syntax errors say line and column; undefined rules
 * and left recursion name the rule; the plan is exact (one byte less fails,
 * naming the shortfall); nullable rules and repetition stay cheap. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "grammar.h"
#include "json_file.h"

typedef struct compiled {
    void *mem;
    wisp_arena arena;
    const wisp_grammar *g;
    wisp_matcher m;
} compiled;

static wisp_status compile_text(compiled *c, const char *text, wisp_error *err) {
    size_t len = strlen(text), bytes;
    memset(c, 0, sizeof *c);
    wisp_status st = wisp_grammar_plan(text, len, &bytes, err);
    if (st) return st;
    wisp_matcher_limits lim = wisp_matcher_limits_default();
    size_t mbytes = wisp_matcher_plan(NULL, &lim);
    c->mem = malloc(bytes + mbytes);
    wisp_arena_init(&c->arena, c->mem, bytes + mbytes);
    if ((st = wisp_grammar_compile(text, len, &c->arena, &c->g, err))) return st;
    if (c->arena.used != bytes) return wisp_fail(err, WISP_ERR_INTERNAL, "planned %zu, carved %zu", bytes, c->arena.used);
    return wisp_matcher_init(&c->m, c->g, &lim, &c->arena, err);
}

static void release(compiled *c) { free(c->mem); }

/* Whole-string match: every byte accepted and the end reachable. */
static bool matches(compiled *c, const char *s, size_t n) {
    wisp_error err;
    if (wisp_matcher_reset(&c->m, &err)) return false;
    size_t ok;
    if (wisp_matcher_accept(&c->m, (const uint8_t *)s, n, &ok, &err)) return false;
    return wisp_matcher_can_end(&c->m);
}

static void test_shared_grammars(void) {
    const char *path = shared_path("golden/constrained/grammars.json");
    REQUIRE(path, "../shared/golden/constrained/grammars.json is missing (set WISP_SHARED)");
    wisp_json j;
    REQUIRE(json_file_load(path, &j), "cannot load %s", path);
    int n_grammars = 0;
    for (int64_t it = wisp_json_first(&j, 0); it >= 0; it = wisp_json_next(&j, it)) {
        char id[64], *text;
        wisp_json_string(&j, wisp_json_get(&j, it, "id"), id, sizeof id);
        int64_t gnode = wisp_json_get(&j, it, "grammar");
        size_t glen = wisp_json_string(&j, gnode, NULL, 0);
        text = malloc(glen + 1);
        wisp_json_string(&j, gnode, text, glen + 1);
        compiled c;
        wisp_error err = {0};
        wisp_status st = compile_text(&c, text, &err);
        CHECK(st == WISP_OK, "%s: %s", id, err.message);
        if (st == WISP_OK) {
            const char *lists[2] = {"match", "nomatch"};
            for (int want = 0; want < 2; want++) {
                int64_t arr = wisp_json_get(&j, it, lists[want]);
                int count = 0;
                for (int64_t s = wisp_json_first(&j, arr); s >= 0; s = wisp_json_next(&j, s), count++) {
                    size_t n = wisp_json_string(&j, s, NULL, 0);
                    char *str = malloc(n + 1);
                    wisp_json_string(&j, s, str, n + 1);
                    bool got = matches(&c, str, n);
                    CHECK(got == (want == 0), "%s: \"%s\" should %s", id, str, want == 0 ? "match" : "not match");
                    free(str);
                }
                CHECK(count == 5, "%s: %d %s strings", id, count, lists[want]);
            }
        }
        release(&c);
        free(text);
        n_grammars++;
    }
    CHECK(n_grammars == 6, "%d grammars", n_grammars);
    json_file_free(&j);
}

static void expect_error(const char *text, wisp_status want, const char *needle) {
    compiled c;
    wisp_error err = {0};
    wisp_status st = compile_text(&c, text, &err);
    CHECK(st == want, "\"%s\": status %s, wanted %s (%s)", text, wisp_status_name(st), wisp_status_name(want), err.message);
    CHECK(strstr(err.message, needle) != NULL, "\"%s\": message \"%s\" lacks \"%s\"", text, err.message, needle);
    release(&c);
}

static void test_errors(void) {
    expect_error("root ::= foo\n", WISP_ERR_FORMAT, "rule 'foo' is used but never defined");
    expect_error("root ::= \"a\"\nroot2 ::= bar\n", WISP_ERR_FORMAT, "line 2, column 11: rule 'bar'");
    expect_error("expr ::= expr \"+\" \"1\" | \"1\"\nroot ::= expr\n", WISP_ERR_FORMAT, "rule 'expr' is left-recursive");
    expect_error("root ::= a\na ::= b? a \"x\"\nb ::= \"y\"\n", WISP_ERR_FORMAT, "rule 'a' is left-recursive");
    expect_error("root ::= (\"a\"?)*\n", WISP_ERR_FORMAT, "'root' is left-recursive through a group or repetition");
    expect_error("other ::= \"a\"\n", WISP_ERR_FORMAT, "no 'root' rule");
    expect_error("root ::= \"abc\n", WISP_ERR_FORMAT, "line 1, column 10: unterminated string literal");
    expect_error("root ::= [a-z\n", WISP_ERR_FORMAT, "unterminated character class");
    expect_error("root ::= \"a\"\n  x  = \"b\"\n", WISP_ERR_FORMAT, "line 2, column 6: expected '::='");
    expect_error("root ::= (\"a\" \"b\"\n", WISP_ERR_FORMAT, "line 1, column 10: '(' without its ')'");
    expect_error("root ::= \"a\"{3,2}\n", WISP_ERR_FORMAT, "maximum is below the minimum");
    expect_error("root ::= \"\\q\"\n", WISP_ERR_FORMAT, "unknown escape '\\q'");
    expect_error("root ::= [z-a]\n", WISP_ERR_FORMAT, "ending before it starts");
    expect_error("root ::= \"a\"\nroot ::= \"b\"\n", WISP_ERR_FORMAT, "rule 'root' is defined twice");
    expect_error("root ::= \"\\uD800\"\n", WISP_ERR_FORMAT, "not a Unicode scalar value");
    expect_error("", WISP_ERR_FORMAT, "no rules");
    expect_error("root ::= \"a\")\n", WISP_ERR_FORMAT, "')' without its '('");
}

static void test_plan_exact(void) {
    const char *text = "root ::= item{1,4}\nitem ::= \"- \" [^\\r\\n]+ \"\\n\"\n";
    size_t bytes;
    wisp_error err;
    REQUIRE(wisp_grammar_plan(text, strlen(text), &bytes, &err) == WISP_OK, "%s", err.message);
    char *mem = malloc(bytes);
    wisp_arena a;
    const wisp_grammar *g;
    wisp_arena_init(&a, mem, bytes - 1);
    CHECK(wisp_grammar_compile(text, strlen(text), &a, &g, &err) == WISP_ERR_ARENA, "one byte less must fail");
    CHECK(strstr(err.message, "1 short") != NULL, "%s", err.message);
    wisp_arena_init(&a, mem, bytes);
    CHECK(wisp_grammar_compile(text, strlen(text), &a, &g, &err) == WISP_OK, "%s", err.message);
    CHECK(a.used == bytes && a.part_bytes[WISP_PART_GRAMMAR] == bytes, "carved %zu of %zu", a.used, bytes);
    free(mem);
    wisp_matcher_limits lim = wisp_matcher_limits_default();
    size_t mb = wisp_matcher_plan(NULL, &lim);
    mem = malloc(bytes + mb);
    wisp_arena_init(&a, mem, bytes + mb - 1);
    wisp_matcher m;
    CHECK(wisp_grammar_compile(text, strlen(text), &a, &g, &err) == WISP_OK, "%s", err.message);
    CHECK(wisp_matcher_init(&m, g, &lim, &a, &err) == WISP_ERR_ARENA, "matcher with one byte less must fail");
    free(mem);
}

/* Features beyond the shared lists: escapes, classes, '.', comments, newlines in groups. */
static void test_features(void) {
    static const struct { const char *grammar, *yes, *no; } cases[] = {
        {"root ::= \"\\x41\\u00e9\\U0001F600\"\n", "A\xc3\xa9\xf0\x9f\x98\x80", "A\xc3\xa9"},
        {"root ::= [^a-c\\]] [\\x30-\\x39]\n", "z5", "b5"},
        {"root ::= [^a]\n", "\xe4\xb8\xad", "a"},
        {"root ::= . .\n", "\xf0\x9f\x98\x80x", "\xf0\x9f\x98"},
        {"# comment\nroot ::= ( # inside\n  \"a\"\n  | \"b\" ) # after\n", "b", "c"},
        {"root ::= \"x\"{2,}\n", "xxxxx", "x"},
        {"root ::= \"x\"{3}\n", "xxx", "xxxx"},
        {"root ::= \"x\"{0,2} \"y\"\n", "xxy", "xxxy"},
        {"root ::= e? e? e? \"z\"\ne ::= f?\nf ::= \"q\"?\n", "qqz", "qqqqz"},
        {"root ::= \"\" | \"a\"\n", "", "b"},
        {"root ::= [\\u4e00-\\u9fff]+\n", "\xe4\xb8\xad\xe6\x96\x87", "\xe3\x81\x82"},
        {"root ::= [a-] \"!\"\n", "-!", "b!"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        compiled c;
        wisp_error err = {0};
        wisp_status st = compile_text(&c, cases[i].grammar, &err);
        CHECK(st == WISP_OK, "%s: %s", cases[i].grammar, err.message);
        if (!st) {
            CHECK(matches(&c, cases[i].yes, strlen(cases[i].yes)), "%s should accept \"%s\"", cases[i].grammar, cases[i].yes);
            CHECK(!matches(&c, cases[i].no, strlen(cases[i].no)), "%s should refuse \"%s\"", cases[i].grammar, cases[i].no);
        }
        release(&c);
    }
}

/* Deep nesting of nullable rules and long inputs stay within the limits; a
 * grammar whose live stacks really are exponential stops at a limit with an
 * error saying so, never by running away. */
static void test_no_blowup(void) {
    char text[4096];
    size_t n = 0;
    n += (size_t)snprintf(text + n, sizeof text - n, "root ::= r0 \"!\"\n");
    for (int i = 0; i < 40; i++) n += (size_t)snprintf(text + n, sizeof text - n, "r%d ::= r%d? \"b\"?\n", i, i + 1);
    snprintf(text + n, sizeof text - n, "r40 ::= \"a\"*\n");
    compiled c;
    wisp_error err = {0};
    REQUIRE(compile_text(&c, text, &err) == WISP_OK, "%s", err.message);
    CHECK(matches(&c, "!", 1), "empty prefix");
    CHECK(matches(&c, "aaaabbb!", 8), "a few a's and b's");
    CHECK(!matches(&c, "bab!", 4), "a after b");
    release(&c);
    n = (size_t)snprintf(text, sizeof text, "root ::= r0 \"!\"\n");
    for (int i = 0; i < 30; i++) n += (size_t)snprintf(text + n, sizeof text - n, "r%d ::= r%d? r%d?\n", i, i + 1, i + 1);
    snprintf(text + n, sizeof text - n, "r30 ::= \"a\"\n");
    REQUIRE(compile_text(&c, text, &err) == WISP_ERR_CAPACITY, "2^30 stacks: %s", err.message);
    CHECK(strstr(err.message, "limit") != NULL, "%s", err.message);
    release(&c);
    /* a long repetition: one million bytes through a star */
    REQUIRE(compile_text(&c, "root ::= [a-z]* \".\"\n", &err) == WISP_OK, "%s", err.message);
    size_t big = 1000000;
    char *s = malloc(big + 1);
    memset(s, 'q', big);
    s[big] = '.';
    CHECK(matches(&c, s, big + 1), "a million letters and a dot");
    free(s);
    release(&c);
}

int main(void) {
    test_shared_grammars();
    test_errors();
    test_plan_exact();
    test_features();
    test_no_blowup();
    return check_report("test_grammar");
}
