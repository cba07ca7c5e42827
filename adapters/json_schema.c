/* JSON Schema -> GBNF (see json_schema.h).
 *
 * Each schema becomes one rule, written as one line. A rule's line can only
 * be written once the rules it refers to have names, so children are made
 * first (depth-first) and the parent's line follows; a $ref target gets its
 * rule name before its body is made, which is what lets recursive schemas
 * refer to themselves. Names are r<N>; the fixed JSON pieces (ws, strings,
 * numbers, any value, formats) are written once at the top. */
#include "json_schema.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "grammar.h"

#define MAX_PROPS 8       /* listed properties of one object (2^n member-set rules) */
#define MAX_DEFS 128
#define MAX_DEPTH 48
#define MAX_NAME_CPS 512  /* code points in all property names of one object */
#define INT_DIGITS 17
#define FRAC_DIGITS 16
#define NO_RULE 0xFFFFFFFFu /* bounded mode: this schema cannot be generated within the depth limit */

typedef struct sc {
    const wisp_json *j;
    wisp_error *err;
    char *out;
    size_t cap, len;
    uint32_t n_rules;
    int depth;
    struct { int64_t node; uint32_t rule, level; } defs[MAX_DEFS];
    int n_defs;
    int64_t active[MAX_DEPTH + 2]; /* $ref targets being generated, outermost first */
    int n_active;
    wisp_json_schema_limits lim;
    char path[160]; /* where in the schema, for messages */
    size_t path_len;
    /* property-name trie for "any other key" (one object at a time) */
    uint32_t trie_cp[MAX_NAME_CPS + 1], trie_child[MAX_NAME_CPS + 1], trie_next[MAX_NAME_CPS + 1];
    bool trie_end[MAX_NAME_CPS + 1];
    uint32_t trie_n;
} sc;

/* ---- writing ---- */

static void put_n(sc *c, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++, c->len++)
        if (c->len < c->cap) c->out[c->len] = s[i];
}
static void put(sc *c, const char *s) { put_n(c, s, strlen(s)); }
static void putf(sc *c, const char *fmt, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    size_t n = wisp_vformat(buf, sizeof buf, fmt, ap);
    va_end(ap);
    put_n(c, buf, n);
}
static void put_rule(sc *c, uint32_t r) { putf(c, "r%u", r); }

/* "\\x" + 2 or "\\U" + 8 hex digits (the formatter has no field widths). */
static void put_hex_escape(sc *c, char kind, uint32_t v, int digits) {
    char e[10] = {'\\', kind};
    for (int i = 0; i < digits; i++) e[2 + i] = "0123456789abcdef"[(v >> (4 * (digits - 1 - i))) & 15];
    put_n(c, e, (size_t)digits + 2);
}

/* A GBNF string literal of raw bytes. */
static void put_literal(sc *c, const char *s, size_t n) {
    put(c, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            char e[2] = {'\\', (char)ch};
            put_n(c, e, 2);
        } else if (ch < 0x20) put_hex_escape(c, 'x', ch, 2);
        else put_n(c, (const char *)&ch, 1);
    }
    put(c, "\"");
}

/* ---- errors ---- */

static wisp_status refuse(sc *c, const char *fmt, ...) {
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    wisp_vformat(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return wisp_fail(c->err, WISP_ERR_UNSUPPORTED, "JSON schema at %s: %s", c->path_len ? c->path : "/", msg);
}

static size_t path_push(sc *c, const char *seg, size_t n) {
    size_t saved = c->path_len;
    if (c->path_len + n + 2 < sizeof c->path) {
        c->path[c->path_len++] = '/';
        memcpy(c->path + c->path_len, seg, n);
        c->path_len += n;
        c->path[c->path_len] = 0;
    }
    return saved;
}
static void path_pop(sc *c, size_t saved) {
    c->path_len = saved;
    c->path[saved] = 0;
}

/* ---- JSON helpers ---- */

static const char *raw(const sc *c, int64_t n, size_t *len) {
    const wisp_json_node *node = &c->j->nodes[n];
    *len = node->end - node->start;
    return c->j->text + node->start;
}

static bool key_is(const sc *c, int64_t key, const char *s) { return wisp_json_string_eq(c->j, key, s); }

/* ---- fixed pieces ---- */

static const char *const k_prelude =
    "jchar ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"
    "jkchar ::= [^\"\\\\\\x00-\\x1F]\n"
    "int ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,16} )\n"
    "frac ::= \".\" [0-9]{1,16}\n"
    "exp ::= [eE] [-+]? [0-9]{1,3}\n"
    "number ::= int frac? exp?\n"
    "bool ::= \"true\" | \"false\"\n"
    "null ::= \"null\"\n"
    "d2 ::= [0-9] [0-9]\n"
    "leap4 ::= [02468] [48] | [2468] \"0\" | [13579] [26]\n"
    "year ::= [0-9]{3} [1-9] | [0-9]{2} [1-9] \"0\" | [0-9] [1-9] \"00\" | [1-9] \"000\"\n"
    "d28 ::= \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]\n"
    "date ::= year \"-\" ( ( \"01\" | \"03\" | \"05\" | \"07\" | \"08\" | \"10\" | \"12\" ) \"-\" ( d28 | \"29\" | \"30\" | \"31\" )"
    " | ( \"04\" | \"06\" | \"09\" | \"11\" ) \"-\" ( d28 | \"29\" | \"30\" ) | \"02-\" d28 )"
    " | ( [0-9]{2} leap4 | leap4 \"00\" ) \"-02-29\"\n"
    "time ::= ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" ( [0-5] [0-9] | \"60\" ) ( \".\" [0-9]{1,9} )?"
    " ( [Zz] | [-+] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )\n"
    "datetime ::= date [Tt] time\n"
    "hex ::= [0-9a-fA-F]\n"
    "uuid ::= hex{8} \"-\" hex{4} \"-\" hex{4} \"-\" hex{4} \"-\" hex{12}\n";

/* string, value, object and array: exact, or within the limits */
static void put_prelude(sc *c) {
    put(c, k_prelude);
    /* whitespace and e-mail addresses: as RFC 8259 and RFC 5321 allow (within stated lengths), or short */
    if (c->lim.max_string) {
        put(c, "ws ::= \" \"?\n"
               "atom ::= [A-Za-z0-9!#$%&'*+/=?^_`{|}~-]{1,16}\n"
               "label ::= [A-Za-z0-9] ( [A-Za-z0-9-]{0,14} [A-Za-z0-9] )?\n"
               "email ::= atom ( \".\" atom )? \"@\" label ( \".\" label ){1,2}\n");
    } else {
        put(c, "ws ::= ( \" \" | \"\\n\" [ \\t]{0,20} )?\n"
               "atom ::= [A-Za-z0-9!#$%&'*+/=?^_`{|}~-]{1,64}\n"
               "label ::= [A-Za-z0-9] ( [A-Za-z0-9-]{0,61} [A-Za-z0-9] )?\n"
               "email ::= atom ( \".\" atom ){0,7} \"@\" label ( \".\" label ){1,7}\n");
    }
    if (c->lim.max_string) putf(c, "string ::= \"\\\"\" jchar{0,%u} \"\\\"\"\n", c->lim.max_string);
    else put(c, "string ::= \"\\\"\" jchar* \"\\\"\"\n");
    if (!c->lim.max_items) {
        put(c, "value ::= object | array | string | number | bool | null\n"
               "member ::= string ws \":\" ws value\n"
               "object ::= \"{\" ws ( member ( ws \",\" ws member )* ws )? \"}\"\n"
               "array ::= \"[\" ws ( value ( ws \",\" ws value )* ws )? \"]\"\n");
        return;
    }
    unsigned d = c->lim.max_depth ? c->lim.max_depth : 1, more = c->lim.max_items - 1;
    put(c, "v0 ::= string | number | bool | null\n");
    for (unsigned k = 1; k <= d; k++) {
        putf(c, "o%u ::= \"{\" ws ( string ws \":\" ws v%u ( ws \",\" ws string ws \":\" ws v%u ){0,%u} ws )? \"}\"\n", k,
             k - 1, k - 1, more);
        putf(c, "a%u ::= \"[\" ws ( v%u ( ws \",\" ws v%u ){0,%u} ws )? \"]\"\n", k, k - 1, k - 1, more);
        putf(c, "v%u ::= o%u | a%u | v0\n", k, k, k);
    }
    putf(c, "value ::= v%u\nobject ::= o%u\narray ::= a%u\n", d, d, d);
}

wisp_json_schema_limits wisp_json_schema_bounded(void) {
    wisp_json_schema_limits l = {24, 4, 1, 1};
    return l;
}

size_t wisp_json_any_gbnf(int object_only, const wisp_json_schema_limits *lim, char *out, size_t cap) {
    sc c;
    memset(&c, 0, sizeof c);
    c.out = out, c.cap = cap;
    if (lim) c.lim = *lim;
    put(&c, object_only ? "root ::= object\n" : "root ::= value\n");
    put_prelude(&c);
    if (cap) out[c.len < cap ? c.len : cap - 1] = 0;
    return c.len;
}

/* ---- numbers ---- */

/* A decimal bound: sign, integer digits (as a number) and fraction digits. */
typedef struct decimal {
    bool neg;
    uint64_t ip;
    char frac[FRAC_DIGITS + 1]; /* without trailing zeros */
} decimal;

static wisp_status read_decimal(sc *c, int64_t node, const char *kw, decimal *d) {
    size_t n;
    const char *s = raw(c, node, &n);
    if (!wisp_json_is(c->j, node, WISP_JSON_NUMBER)) return refuse(c, "'%s' must be a number", kw);
    memset(d, 0, sizeof *d);
    size_t i = 0;
    if (s[i] == '-') d->neg = true, i++;
    int digits = 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) d->ip = d->ip * 10 + (uint64_t)(s[i] - '0');
    if (digits > INT_DIGITS) return refuse(c, "'%s' has more than %d integer digits", kw, INT_DIGITS);
    if (i < n && s[i] == '.') {
        size_t k = 0;
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
            if (k == FRAC_DIGITS) return refuse(c, "'%s' has more than %d decimals", kw, FRAC_DIGITS);
            d->frac[k++] = s[i];
        }
        while (k && d->frac[k - 1] == '0') d->frac[--k] = 0;
    }
    if (i < n) return refuse(c, "'%s' written with an exponent", kw);
    if (d->ip == 0 && !d->frac[0]) d->neg = false;
    return WISP_OK;
}

/* digit strings of width w with a <= value <= b (leading zeros allowed) */
static void digits_range(sc *c, const char *a, const char *b, int w) {
    if (w == 0) return;
    if (a[0] == b[0]) {
        putf(c, " \"%c\"", a[0]);
        digits_range(c, a + 1, b + 1, w - 1);
        return;
    }
    bool a_zero = true, b_nine = true;
    for (int i = 1; i < w; i++) a_zero &= a[i] == '0', b_nine &= b[i] == '9';
    char nines[24], zeros[24];
    memset(nines, '9', sizeof nines), memset(zeros, '0', sizeof zeros);
    int lo = a[0] - '0' + (a_zero ? 0 : 1), hi = b[0] - '0' - (b_nine ? 0 : 1);
    const char *sep = "";
    put(c, " (");
    if (!a_zero) {
        putf(c, " \"%c\"", a[0]);
        digits_range(c, a + 1, nines, w - 1);
        sep = " |";
    }
    if (lo <= hi) {
        put(c, sep);
        putf(c, " [%c-%c]", '0' + lo, '0' + hi);
        if (w > 1) putf(c, " [0-9]{%d}", w - 1);
        sep = " |";
    }
    if (!b_nine) {
        put(c, sep);
        putf(c, " \"%c\"", b[0]);
        digits_range(c, zeros, b + 1, w - 1);
    }
    put(c, " )");
}

static int n_digits(uint64_t v) {
    int n = 1;
    while (v >= 10) v /= 10, n++;
    return n;
}

static uint64_t pow10u(int n) {
    uint64_t p = 1;
    while (n-- > 0) p *= 10;
    return p;
}

/* Naturals in [a, b] without leading zeros, as alternatives (b == UINT64_MAX: up to 17 digits). */
static void naturals(sc *c, uint64_t a, uint64_t b) {
    int la = n_digits(a), lb = b == UINT64_MAX ? INT_DIGITS : n_digits(b);
    const char *sep = "";
    put(c, " (");
    for (int L = la; L <= lb; L++) {
        uint64_t lo = L == 1 ? 0 : pow10u(L - 1), hi = pow10u(L) - 1;
        if (lo < a) lo = a;
        if (b != UINT64_MAX && hi > b) hi = b;
        if (lo > hi) continue;
        char sa[24], sb[24];
        wisp_format(sa, sizeof sa, "%llu", (unsigned long long)lo);
        wisp_format(sb, sizeof sb, "%llu", (unsigned long long)hi);
        put(c, sep);
        digits_range(c, sa, sb, L);
        sep = " |";
    }
    put(c, " )");
}

/* Fraction digit strings d (0 < len <= m when `first`, else 0 <= len <= m) with
 * lo <= 0.d <= hi; lo/hi NULL: no bound on that side; *_x: exclusive. An
 * exhausted bound ("") compares as 0.000... */
static bool frac_digits(sc *c, const char *lo, bool lo_x, const char *hi, bool hi_x, int m, bool first) {
    size_t saved = c->len;
    /* can the digits stop here (value of what follows = 0)? */
    bool zero_ok = (!lo || (!lo[0] && !lo_x)) && (!hi || hi[0] || !hi_x);
    if (hi && !hi[0] && hi_x) return false; /* below 0: nothing */
    put(c, " (");
    const char *sep = "";
    if (!first && zero_ok) put(c, " \"\""), sep = " |";
    bool any = !first && zero_ok;
    if (m > 0) {
        int ld = lo ? (lo[0] ? lo[0] - '0' : (lo_x ? 0 : -1)) : -1; /* -1: every digit is above lo */
        int hd = hi ? (hi[0] ? hi[0] - '0' : 0) : 10;               /* 10: every digit is below hi */
        const char *lr = lo ? (lo[0] ? lo + 1 : lo) : NULL, *hr = hi ? (hi[0] ? hi + 1 : hi) : NULL;
        int free_lo = ld + 1, free_hi = hd - 1;
        if (free_lo <= free_hi) {
            put(c, sep);
            putf(c, " [%c-%c] [0-9]{0,%d}", '0' + free_lo, '0' + free_hi, m - 1);
            sep = " |", any = true;
        }
        if (ld >= 0 && ld == hd && ld <= 9) {
            size_t mark = c->len;
            put(c, sep);
            putf(c, " \"%c\"", '0' + ld);
            if (frac_digits(c, lr, lo_x, hr, hi_x, m - 1, false)) sep = " |", any = true;
            else c->len = mark;
        } else {
            if (ld >= 0 && ld <= 9 && ld < hd) {
                size_t mark = c->len;
                put(c, sep);
                putf(c, " \"%c\"", '0' + ld);
                if (frac_digits(c, lr, lo_x, NULL, false, m - 1, false)) sep = " |", any = true;
                else c->len = mark;
            }
            if (hd <= 9 && hd > ld) {
                size_t mark = c->len;
                put(c, sep);
                putf(c, " \"%c\"", '0' + hd);
                if (frac_digits(c, NULL, false, hr, hi_x, m - 1, false)) sep = " |", any = true;
                else c->len = mark;
            }
        }
    }
    put(c, " )");
    if (!any) c->len = saved;
    return any;
}

/* The optional fraction of a number whose integer part is fixed: value of
 * 0.frac within [lo, hi]. */
static bool fraction(sc *c, const char *lo, bool lo_x, const char *hi, bool hi_x, int mf) {
    bool zero_ok = (!lo || (!lo[0] && !lo_x)) && (!hi || hi[0] || !hi_x);
    size_t saved = c->len;
    put(c, " (");
    size_t mark = c->len;
    put(c, " \".\"");
    bool some = mf > 0 && frac_digits(c, lo, lo_x, hi, hi_x, mf, true);
    if (!some) c->len = mark;
    put(c, " )");
    if (some && zero_ok) put(c, "?");
    if (!some && !zero_ok) {
        c->len = saved;
        return false;
    }
    if (!some) c->len = saved; /* only the bare integer */
    return true;
}

/* Magnitudes y with A <= y <= B (B NULL: unbounded), no sign written. */
static bool magnitudes(sc *c, const decimal *A, bool ax, const decimal *B, bool bx, int mf) {
    size_t saved = c->len;
    bool any = false;
    const char *sep = "";
    put(c, " (");
    if (B && A->ip == B->ip) {
        put(c, sep);
        size_t mark = c->len;
        putf(c, " \"%llu\"", (unsigned long long)A->ip);
        if (fraction(c, A->frac, ax, B->frac, bx, mf)) any = true, sep = " |";
        else c->len = mark;
    } else if (!B || A->ip < B->ip) {
        size_t mark = c->len;
        putf(c, " \"%llu\"", (unsigned long long)A->ip);
        if (fraction(c, A->frac, ax, NULL, false, mf)) any = true, sep = " |";
        else c->len = mark;
        uint64_t lo = A->ip + 1, hi = B ? B->ip - 1 : UINT64_MAX;
        if (!B || (B->ip > 0 && lo <= hi)) {
            put(c, sep);
            naturals(c, lo, hi);
            if (mf > 0) putf(c, " ( \".\" [0-9]{1,%d} )?", mf);
            any = true, sep = " |";
        }
        if (B) {
            mark = c->len;
            put(c, sep);
            putf(c, " \"%llu\"", (unsigned long long)B->ip);
            if (fraction(c, NULL, false, B->frac, bx, mf)) any = true, sep = " |";
            else c->len = mark;
        }
    }
    put(c, " )");
    if (!any) c->len = saved;
    return any;
}

static int cmp_decimal(const decimal *a, const decimal *b) {
    if (a->neg != b->neg) return a->neg ? -1 : 1;
    int s = a->neg ? -1 : 1;
    if (a->ip != b->ip) return a->ip < b->ip ? -s : s;
    int f = strcmp(a->frac, b->frac);
    return f < 0 ? -s : f > 0 ? s : 0;
}

/* Numbers in the range (either side may be absent), without exponent. */
static wisp_status number_range(sc *c, const decimal *lo, bool lo_x, const decimal *hi, bool hi_x, int mf) {
    if (lo && hi && (cmp_decimal(lo, hi) > 0 || (cmp_decimal(lo, hi) == 0 && (lo_x || hi_x))))
        return refuse(c, "no number satisfies the minimum and maximum");
    decimal zero;
    memset(&zero, 0, sizeof zero);
    bool any = false;
    put(c, " (");
    /* x >= 0 */
    if (!hi || !hi->neg) {
        const decimal *A = lo && !lo->neg ? lo : &zero;
        bool ax = lo && !lo->neg ? lo_x : false;
        size_t mark = c->len;
        if (magnitudes(c, A, ax, hi, hi_x, mf)) any = true;
        else c->len = mark;
    }
    /* x < 0, written "-" then |x| */
    if (!lo || lo->neg) {
        decimal nlo, nhi;
        const decimal *B = NULL;
        if (lo) nlo = *lo, nlo.neg = false, B = &nlo;
        const decimal *A = &zero;
        bool ax = true;
        if (hi && hi->neg) nhi = *hi, nhi.neg = false, A = &nhi, ax = hi_x;
        size_t mark = c->len;
        if (any) put(c, " |");
        put(c, " \"-\"");
        if (magnitudes(c, A, ax, B, lo ? lo_x : false, mf)) any = true;
        else c->len = mark;
    }
    put(c, " )");
    if (!any) return refuse(c, "no number satisfies the bounds");
    return WISP_OK;
}

/* ---- the schema walk ---- */

static wisp_status gen(sc *c, int64_t node, uint32_t *rule);

static uint32_t new_rule(sc *c) { return c->n_rules++; }

static bool is_annotation(const sc *c, int64_t key) {
    static const char *const names[] = {"title", "description", "$schema", "$id", "$comment", "default", "examples",
                                        "$defs", "definitions", "readOnly", "writeOnly", "deprecated"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (key_is(c, key, names[i])) return true;
    return false;
}

static bool known_keyword(const sc *c, int64_t key) {
    static const char *const names[] = {"type", "properties", "required", "additionalProperties", "enum", "const",
                                        "items", "minItems", "maxItems", "minimum", "maximum", "exclusiveMinimum",
                                        "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "pattern", "format",
                                        "anyOf", "oneOf", "allOf", "$ref", "uniqueItems"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (key_is(c, key, names[i])) return true;
    return is_annotation(c, key);
}

static wisp_status check_keywords(sc *c, int64_t node) {
    for (int64_t k = wisp_json_first(c->j, node); k >= 0; k = wisp_json_next(c->j, wisp_json_next(c->j, k))) {
        if (!known_keyword(c, k)) {
            size_t n;
            const char *s = raw(c, k, &n);
            return refuse(c, "keyword '%.*s' is not supported", (int)n, s);
        }
        if (key_is(c, k, "uniqueItems")) {
            bool b = true;
            wisp_json_bool(c->j, wisp_json_next(c->j, k), &b);
            if (b) return refuse(c, "keyword 'uniqueItems' is not supported (a grammar cannot enforce it)");
        }
    }
    return WISP_OK;
}

/* The uint of a keyword, or `dflt` when absent. */
static wisp_status get_count(sc *c, int64_t node, const char *kw, int64_t dflt, int64_t *v) {
    int64_t n = wisp_json_get(c->j, node, kw);
    *v = dflt;
    if (n < 0) return WISP_OK;
    if (!wisp_json_int(c->j, n, v) || *v < 0 || *v > 100000) return refuse(c, "'%s' must be an integer in 0..100000", kw);
    return WISP_OK;
}

/* enum / const: alternatives of the values' JSON text, kept to the allowed types. */
static bool value_has_type(const sc *c, int64_t v, unsigned types);
static wisp_status gen_literals(sc *c, int64_t node, unsigned types, uint32_t *rule) {
    int64_t e = wisp_json_get(c->j, node, "enum"), k = wisp_json_get(c->j, node, "const");
    if (e >= 0 && k >= 0) return refuse(c, "'enum' together with 'const'");
    if (e >= 0 && !wisp_json_is(c->j, e, WISP_JSON_ARRAY)) return refuse(c, "'enum' must be an array");
    *rule = new_rule(c);
    char head[32];
    size_t hn = wisp_format(head, sizeof head, "r%u ::=", *rule);
    put_n(c, head, hn);
    const char *sep = "";
    int count = 0;
    for (int64_t v = e >= 0 ? wisp_json_first(c->j, e) : k; v >= 0; v = e >= 0 ? wisp_json_next(c->j, v) : -1) {
        if (wisp_json_is(c->j, v, WISP_JSON_OBJECT) || wisp_json_is(c->j, v, WISP_JSON_ARRAY))
            return refuse(c, "'%s' with an object or array value is not supported", e >= 0 ? "enum" : "const");
        if (!value_has_type(c, v, types)) continue;
        size_t n;
        const char *s = raw(c, v, &n);
        put(c, sep);
        put(c, " ");
        if (wisp_json_is(c->j, v, WISP_JSON_STRING)) { /* the quotes too: raw(...) is inside them */
            put(c, "\"\\\"");
            for (size_t i = 0; i < n; i++) {
                if (s[i] == '"' || s[i] == '\\') put(c, "\\");
                put_n(c, s + i, 1);
            }
            put(c, "\\\"\"");
        } else put_literal(c, s, n);
        sep = " |";
        count++;
    }
    if (!count) return refuse(c, "no value of '%s' has an allowed type", e >= 0 ? "enum" : "const");
    put(c, "\n");
    return WISP_OK;
}

enum { T_STRING = 1, T_INTEGER = 2, T_NUMBER = 4, T_BOOLEAN = 8, T_NULL = 16, T_OBJECT = 32, T_ARRAY = 64, T_ALL = 127 };

static bool value_has_type(const sc *c, int64_t v, unsigned types) {
    switch (c->j->nodes[v].type) {
    case WISP_JSON_STRING: return types & T_STRING;
    case WISP_JSON_NUMBER: {
        int64_t i;
        return (types & T_NUMBER) || ((types & T_INTEGER) && wisp_json_int(c->j, v, &i));
    }
    case WISP_JSON_TRUE:
    case WISP_JSON_FALSE: return types & T_BOOLEAN;
    case WISP_JSON_NULL: return types & T_NULL;
    case WISP_JSON_OBJECT: return types & T_OBJECT;
    default: return types & T_ARRAY;
    }
}

static wisp_status type_bit(sc *c, int64_t s, unsigned *bits) {
    static const char *const names[] = {"string", "integer", "number", "boolean", "null", "object", "array"};
    for (int i = 0; i < 7; i++)
        if (wisp_json_string_eq(c->j, s, names[i])) {
            *bits |= 1u << i;
            return WISP_OK;
        }
    return refuse(c, "unknown type");
}

static wisp_status read_types(sc *c, int64_t node, unsigned *types) {
    int64_t t = wisp_json_get(c->j, node, "type");
    *types = 0;
    if (t < 0) return WISP_OK;
    if (wisp_json_is(c->j, t, WISP_JSON_STRING)) return type_bit(c, t, types);
    if (!wisp_json_is(c->j, t, WISP_JSON_ARRAY)) return refuse(c, "'type' must be a string or an array");
    wisp_status st;
    for (int64_t s = wisp_json_first(c->j, t); s >= 0; s = wisp_json_next(c->j, s))
        if (!wisp_json_is(c->j, s, WISP_JSON_STRING) || (st = type_bit(c, s, types))) return refuse(c, "bad 'type' entry");
    if (!*types) return refuse(c, "an empty 'type' list matches nothing");
    return WISP_OK;
}

/* ---- strings ---- */

/* A regular expression (the subset schemas use) as GBNF over JSON string content. */
typedef struct rx {
    sc *c;
    const char *s;
    size_t n, i;
    bool nullable; /* the last atom, sequence or alternation can match the empty string */
} rx;

static wisp_status rx_alt(rx *r);

/* One character of a class, written as GBNF class text; *cp is its code point, or -1 for \d \w \s;
 * *ranges grows by the class items written (\w is four). */
static wisp_status rx_class_char(rx *r, int64_t *cp, int *ranges) {
    sc *c = r->c;
    unsigned char ch = (unsigned char)r->s[r->i];
    if (ch == '\\') {
        if (r->i + 1 >= r->n) return refuse(c, "pattern: unterminated class");
        char e = r->s[r->i + 1];
        r->i += 2;
        *cp = -1;
        *ranges += e == 'w' ? 4 : 1;
        if (e == 'd') put(c, "0-9");
        else if (e == 'w') put(c, "a-zA-Z0-9_");
        else if (e == 's') put(c, " ");
        else if (e == '\\' || e == '"') return refuse(c, "pattern: a class with a backslash or quote is not supported");
        else if (e && strchr("[]-^./+*?(){}|$", e)) {
            if (e == ']' || e == '[' || e == '-' || e == '^') put(c, "\\");
            put_n(c, &e, 1);
            *cp = (unsigned char)e;
        } else return refuse(c, "pattern: escape '\\%c' in a class is not supported", e);
        return WISP_OK;
    }
    if (ch < 0x20) return refuse(c, "pattern: control characters are not supported");
    if (ch == '"') return refuse(c, "pattern: a class with a quote is not supported");
    if (ch == '[' && r->i + 1 < r->n && r->s[r->i + 1] == ':') return refuse(c, "pattern: POSIX classes are not supported");
    size_t len = ch < 0x80 ? 1 : (ch & 0xE0) == 0xC0 ? 2 : (ch & 0xF0) == 0xE0 ? 3 : 4;
    if (r->i + len > r->n) return refuse(c, "pattern: invalid UTF-8");
    uint32_t v = len == 1 ? ch : len == 2 ? (ch & 0x1Fu) : len == 3 ? (ch & 0x0Fu) : (ch & 0x07u);
    for (size_t k = 1; k < len; k++) v = (v << 6) | ((unsigned char)r->s[r->i + k] & 0x3Fu);
    if (ch == ']' || ch == '-' || ch == '^' || ch == '[') put(c, "\\");
    put_n(c, r->s + r->i, len);
    r->i += len;
    *cp = v;
    *ranges += 1;
    return WISP_OK;
}

static wisp_status rx_class(rx *r) {
    sc *c = r->c;
    wisp_status st;
    r->i++; /* [ */
    bool neg = r->i < r->n && r->s[r->i] == '^';
    if (neg) r->i++;
    put(c, neg ? " [^" : " [");
    bool first = true;
    /* what the grammar's class will hold: a negated one also excludes the
     * quote, the backslash and the control characters (three items) */
    int ranges = neg ? 3 : 0, range_end = 0;
    while (r->i < r->n && (r->s[r->i] != ']' || first)) {
        first = false;
        int64_t lo, hi;
        if ((st = rx_class_char(r, &lo, &ranges))) return st;
        if (r->i + 1 < r->n && r->s[r->i] == '-' && r->s[r->i + 1] != ']') {
            if (lo < 0) return refuse(c, "pattern: a class range starting at \\d, \\w or \\s");
            r->i++;
            put(c, "-");
            if ((st = rx_class_char(r, &hi, &range_end))) return st; /* the end adds no item of its own */
            if (hi < 0) return refuse(c, "pattern: a class range ending at \\d, \\w or \\s");
            if (hi < lo) return refuse(c, "pattern: a class range ending before it starts");
        }
    }
    if (r->i >= r->n) return refuse(c, "pattern: unterminated class");
    if (ranges > WISP_GRAMMAR_MAX_CLASS_RANGES)
        return refuse(c, "pattern: a character class of %d characters and ranges (at most %d)", ranges,
                      WISP_GRAMMAR_MAX_CLASS_RANGES);
    r->i++;
    /* raw text only: never the characters JSON must escape */
    put(c, neg ? "\"\\\\\\x00-\\x1F]" : "]");
    return WISP_OK;
}

static wisp_status rx_atom(rx *r) {
    sc *c = r->c;
    char ch = r->s[r->i];
    wisp_status st;
    if (ch == '(') {
        r->i++;
        if (r->i < r->n && r->s[r->i] == '?') {
            if (r->i + 1 < r->n && r->s[r->i + 1] == ':') r->i += 2;
            else return refuse(c, "pattern: '(?' groups other than '(?:' (lookaround, named groups) are not supported");
        }
        put(c, " (");
        if ((st = rx_alt(r))) return st;
        if (r->i >= r->n || r->s[r->i] != ')') return refuse(c, "pattern: '(' without ')'");
        r->i++;
        put(c, " )");
        return WISP_OK;
    }
    if (ch == '[') return rx_class(r);
    if (ch == '.') {
        r->i++;
        put(c, " jchar");
        return WISP_OK;
    }
    if (ch == '\\') {
        if (r->i + 1 >= r->n) return refuse(c, "pattern: a trailing backslash");
        char e = r->s[r->i + 1];
        r->i += 2;
        if (e == 'd') put(c, " [0-9]");
        else if (e == 'w') put(c, " [a-zA-Z0-9_]");
        else if (e == 's') put(c, " \" \"");
        else if (e >= '0' && e <= '9') return refuse(c, "pattern: backreferences are not supported");
        else if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z'))
            return refuse(c, "pattern: escape '\\%c' is not supported", e);
        else if (e == '"' || e == '\\') return refuse(c, "pattern: a quote or backslash is not supported");
        else put_literal(c, &e, 1);
        return WISP_OK;
    }
    if (ch == '^' || ch == '$') return refuse(c, "pattern: '%c' inside the pattern is not supported", ch);
    if (ch == '"') return refuse(c, "pattern: a quote is not supported");
    if ((unsigned char)ch < 0x20) return refuse(c, "pattern: control characters are not supported");
    /* one literal character (all bytes of a UTF-8 sequence) */
    size_t len = 1;
    while (r->i + len < r->n && ((unsigned char)r->s[r->i + len] & 0xC0) == 0x80) len++;
    put(c, " ");
    put_literal(c, r->s + r->i, len);
    r->i += len;
    return WISP_OK;
}

static wisp_status rx_seq(rx *r) {
    sc *c = r->c;
    wisp_status st;
    put(c, " \"\"");
    bool seq_nullable = true;
    while (r->i < r->n && r->s[r->i] != '|' && r->s[r->i] != ')') {
        if (r->s[r->i] == '$' && r->i + 1 == r->n) break;
        r->nullable = false;
        if ((st = rx_atom(r))) return st;
        bool an = r->nullable;
        char q = r->i < r->n ? r->s[r->i] : 0;
        /* an unbounded repetition of something that can be empty (like (a*)*) would be a
         * left-recursive rule: refused (bounded repetitions are fine) */
        bool unbounded = (q == '*' || q == '+') && !c->lim.max_items;
        if (q == '{') {
            size_t k = r->i + 1;
            while (k < r->n && r->s[k] != '}' && r->s[k] != ',') k++;
            unbounded = k + 1 < r->n && r->s[k] == ',' && r->s[k + 1] == '}' && !c->lim.max_items;
        }
        if (an && unbounded) return refuse(c, "pattern: an unbounded repetition of something that can be empty (like (a*)*)");
        if (q == '*' || q == '?' || (q == '{' && r->i + 1 < r->n && r->s[r->i + 1] == '0')) an = true;
        seq_nullable &= an;
        if (r->i >= r->n) break;
        if ((q == '*' || q == '+') && c->lim.max_items) {
            putf(c, "{%d,%u}", q == '+', c->lim.max_items);
            r->i++;
        } else if (q == '*' || q == '+' || q == '?') {
            putf(c, "%c", q);
            r->i++;
        } else if (q == '{') {
            /* {m}, {m,} or {m,n}, checked here so that only a valid count reaches the grammar */
            size_t k = r->i + 1;
            unsigned long m = 0, x = 0;
            int md = 0, xd = 0;
            bool comma = false;
            while (k < r->n && r->s[k] >= '0' && r->s[k] <= '9' && md < 6) m = m * 10 + (unsigned long)(r->s[k++] - '0'), md++;
            if (k < r->n && r->s[k] == ',') {
                comma = true;
                k++;
                while (k < r->n && r->s[k] >= '0' && r->s[k] <= '9' && xd < 6) x = x * 10 + (unsigned long)(r->s[k++] - '0'), xd++;
            }
            if (md == 0 || k >= r->n || r->s[k] != '}') return refuse(c, "pattern: a malformed {m,n}");
            if (m > 10000 || x > 10000) return refuse(c, "pattern: a repetition count above 10000");
            if (comma && xd && x < m) return refuse(c, "pattern: {m,n} with n below m");
            if (!comma) putf(c, "{%lu}", m);
            else if (xd) putf(c, "{%lu,%lu}", m, x);
            else if (c->lim.max_items) putf(c, "{%lu,%lu}", m, m + c->lim.max_items);
            else putf(c, "{%lu,}", m);
            r->i = k + 1;
        } else continue;
        if (r->i < r->n && r->s[r->i] == '?') r->i++; /* lazy: the same set of whole matches */
        else if (r->i < r->n && r->s[r->i] == '+') return refuse(c, "pattern: possessive quantifiers are not supported");
    }
    r->nullable = seq_nullable;
    return WISP_OK;
}

static wisp_status rx_alt(rx *r) {
    wisp_status st;
    if ((st = rx_seq(r))) return st;
    bool any = r->nullable;
    while (r->i < r->n && r->s[r->i] == '|') {
        r->i++;
        put(r->c, " |");
        if ((st = rx_seq(r))) return st;
        any |= r->nullable;
    }
    r->nullable = any;
    return WISP_OK;
}

static wisp_status gen_pattern(sc *c, int64_t pnode) {
    char buf[1024];
    size_t n = wisp_json_string(c->j, pnode, buf, sizeof buf);
    if (n >= sizeof buf) return refuse(c, "'pattern' longer than %zu bytes", sizeof buf - 1);
    rx r = {c, buf, n, 0, false};
    bool start = n && buf[0] == '^';
    bool end = n && buf[n - 1] == '$' && (n < 2 || buf[n - 2] != '\\');
    if (start) r.i = 1;
    put(c, " \"\\\"\"");
    char any_text[32];
    if (c->lim.max_string) wisp_format(any_text, sizeof any_text, " jchar{0,%u}", c->lim.max_string);
    else wisp_format(any_text, sizeof any_text, " jchar*");
    if (!start) put(c, any_text);
    put(c, " (");
    wisp_status st = rx_alt(&r);
    if (st) return st;
    if (r.i < n && !(end && r.i == n - 1)) return refuse(c, "pattern: unexpected '%c'", buf[r.i]);
    put(c, " )");
    if (!end) put(c, any_text);
    put(c, " \"\\\"\"");
    return WISP_OK;
}

static wisp_status gen_string(sc *c, int64_t node) {
    int64_t fmt = wisp_json_get(c->j, node, "format"), pat = wisp_json_get(c->j, node, "pattern");
    int64_t minl, maxl;
    wisp_status st;
    if ((st = get_count(c, node, "minLength", 0, &minl)) || (st = get_count(c, node, "maxLength", -1, &maxl))) return st;
    bool lengths = minl > 0 || maxl >= 0;
    if ((fmt >= 0) + (pat >= 0) + lengths > 1)
        return refuse(c, "'%s' together with '%s' is not supported", fmt >= 0 ? "format" : "pattern",
                      pat >= 0 && fmt >= 0 ? "pattern" : "minLength/maxLength");
    if (fmt >= 0) {
        static const char *const formats[][2] = {{"date", "date"}, {"time", "time"}, {"date-time", "datetime"},
                                                 {"email", "email"}, {"uuid", "uuid"}};
        for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
            if (wisp_json_string_eq(c->j, fmt, formats[i][0])) {
                putf(c, " \"\\\"\" %s \"\\\"\"", formats[i][1]);
                return WISP_OK;
            }
        size_t n;
        const char *s = raw(c, fmt, &n);
        return refuse(c, "keyword 'format' with value '%.*s' is not supported", (int)n, s);
    }
    if (pat >= 0) return gen_pattern(c, pat);
    if (maxl >= 0 && maxl < minl) return refuse(c, "maxLength is below minLength");
    if (maxl < 0 && c->lim.max_string) maxl = minl > (int64_t)c->lim.max_string ? minl : (int64_t)c->lim.max_string;
    lengths = minl > 0 || maxl >= 0;
    if (!lengths) put(c, " string");
    else if (maxl < 0) putf(c, " \"\\\"\" jchar{%lld,} \"\\\"\"", (long long)minl);
    else putf(c, " \"\\\"\" jchar{%lld,%lld} \"\\\"\"", (long long)minl, (long long)maxl);
    return WISP_OK;
}

/* ---- numbers from the schema ---- */

static wisp_status gen_numeric(sc *c, int64_t node, bool integer) {
    static const char *const kws[4] = {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"};
    decimal b[4];
    bool has[4];
    wisp_status st;
    for (int i = 0; i < 4; i++) {
        int64_t v = wisp_json_get(c->j, node, kws[i]);
        has[i] = v >= 0;
        if (has[i] && (st = read_decimal(c, v, kws[i], &b[i]))) return st;
    }
    int mf = FRAC_DIGITS;
    int64_t mo = wisp_json_get(c->j, node, "multipleOf");
    if (mo >= 0) {
        decimal m;
        if ((st = read_decimal(c, mo, "multipleOf", &m))) return st;
        size_t fl = strlen(m.frac);
        bool pow10 = !m.neg && ((m.ip == 1 && fl == 0) || (m.ip == 0 && fl > 0 && m.frac[fl - 1] == '1' &&
                                                             strspn(m.frac, "0") == fl - 1));
        if (!pow10) return refuse(c, "keyword 'multipleOf' is supported only for 1 and 0.1, 0.01, ...");
        mf = (int)fl;
    }
    if (integer || mf == 0) {
        /* integers: bounds rounded inwards */
        bool lo_set = false, hi_set = false;
        int64_t lo = 0, hi = 0;
        for (int i = 0; i < 4; i++) {
            if (!has[i]) continue;
            if (b[i].ip > (uint64_t)INT64_MAX / 2) return refuse(c, "'%s' is too large", kws[i]);
            int64_t ip = (int64_t)b[i].ip, v;
            bool frac = b[i].frac[0] != 0;
            if (i < 2) { /* lower: smallest integer above (or at) the bound */
                v = b[i].neg ? -ip : (frac ? ip + 1 : ip);
                if (b[i].neg && frac) v = -ip;
                if (i == 1 && !frac) v++;
                if (!lo_set || v > lo) lo = v;
                lo_set = true;
            } else {
                v = b[i].neg ? (frac ? -ip - 1 : -ip) : ip;
                if (i == 3 && !frac) v--;
                if (!hi_set || v < hi) hi = v;
                hi_set = true;
            }
        }
        if (lo_set && hi_set && lo > hi) return refuse(c, "no integer satisfies the minimum and maximum");
        if (!lo_set && !hi_set) {
            put(c, " int");
            return WISP_OK;
        }
        put(c, " (");
        const char *sep = "";
        if (!lo_set || lo < 0) { /* negatives: "-" then magnitudes */
            uint64_t a = hi_set && hi < 0 ? (uint64_t)(-hi) : 1, z = lo_set ? (uint64_t)(-lo) : UINT64_MAX;
            put(c, " \"-\"");
            naturals(c, a, z);
            sep = " |";
        }
        if (!hi_set || hi >= 0) {
            put(c, sep);
            naturals(c, lo_set && lo > 0 ? (uint64_t)lo : 0, hi_set ? (uint64_t)hi : UINT64_MAX);
        }
        put(c, " )");
        return WISP_OK;
    }
    const decimal *lo = NULL, *hi = NULL;
    bool lo_x = false, hi_x = false;
    for (int i = 0; i < 2; i++)
        if (has[i] && (!lo || cmp_decimal(&b[i], lo) > 0 || (cmp_decimal(&b[i], lo) == 0 && i == 1)))
            lo = &b[i], lo_x = i == 1;
    for (int i = 2; i < 4; i++)
        if (has[i] && (!hi || cmp_decimal(&b[i], hi) < 0 || (cmp_decimal(&b[i], hi) == 0 && i == 3)))
            hi = &b[i], hi_x = i == 3;
    if (!lo && !hi && mo < 0) {
        put(c, " number");
        return WISP_OK;
    }
    return number_range(c, lo, lo_x, hi, hi_x, mf);
}

/* ---- objects ---- */

typedef struct objview {
    int n;
    int64_t key[MAX_PROPS], schema[MAX_PROPS];
    uint32_t rule[MAX_PROPS];
    uint32_t required; /* bit per property */
    int64_t additional; /* -1: any value allowed; -2: none; else a schema node */
} objview;

static wisp_status add_props(sc *c, objview *o, int64_t node) {
    int64_t props = wisp_json_get(c->j, node, "properties");
    if (props >= 0) {
        if (!wisp_json_is(c->j, props, WISP_JSON_OBJECT)) return refuse(c, "'properties' must be an object");
        for (int64_t k = wisp_json_first(c->j, props); k >= 0; k = wisp_json_next(c->j, wisp_json_next(c->j, k))) {
            for (int i = 0; i < o->n; i++) {
                size_t a, b;
                const char *sa = raw(c, o->key[i], &a), *sb = raw(c, k, &b);
                if (a == b && memcmp(sa, sb, a) == 0) return refuse(c, "'allOf' with the same property in two branches");
            }
            if (o->n == MAX_PROPS) return refuse(c, "objects with more than %d properties are not supported", MAX_PROPS);
            o->key[o->n] = k;
            o->schema[o->n] = wisp_json_next(c->j, k);
            o->n++;
        }
    }
    return WISP_OK;
}

static wisp_status add_required(sc *c, objview *o, int64_t node) {
    int64_t req = wisp_json_get(c->j, node, "required");
    if (req < 0) return WISP_OK;
    if (!wisp_json_is(c->j, req, WISP_JSON_ARRAY)) return refuse(c, "'required' must be an array");
    for (int64_t r = wisp_json_first(c->j, req); r >= 0; r = wisp_json_next(c->j, r)) {
        int found = -1;
        size_t rn;
        const char *rs = raw(c, r, &rn);
        for (int i = 0; i < o->n; i++) {
            size_t kn;
            const char *ks = raw(c, o->key[i], &kn);
            if (kn == rn && memcmp(ks, rs, kn) == 0) found = i;
        }
        if (found < 0) return refuse(c, "required property '%.*s' is not listed in 'properties'", (int)rn, rs);
        o->required |= 1u << found;
    }
    return WISP_OK;
}

static wisp_status read_additional(sc *c, int64_t node, int64_t *add) {
    int64_t a = wisp_json_get(c->j, node, "additionalProperties");
    if (a < 0) return WISP_OK;
    bool b;
    if (wisp_json_bool(c->j, a, &b)) {
        *add = b ? -1 : -2;
        return WISP_OK;
    }
    if (!wisp_json_is(c->j, a, WISP_JSON_OBJECT)) return refuse(c, "'additionalProperties' must be a boolean or a schema");
    *add = a;
    return WISP_OK;
}

/* Rule for a JSON key that is none of the listed property names (no escapes). */
static wisp_status other_key_rule(sc *c, const objview *o, uint32_t *rule) {
    c->trie_n = 1;
    c->trie_child[0] = 0, c->trie_next[0] = 0, c->trie_end[0] = false;
    for (int p = 0; p < o->n; p++) {
        char name[256];
        size_t n = wisp_json_string(c->j, o->key[p], name, sizeof name);
        if (n >= sizeof name) return refuse(c, "a property name longer than 255 bytes");
        uint32_t at = 0;
        for (size_t i = 0; i < n;) {
            unsigned char b = (unsigned char)name[i];
            uint32_t cp;
            int len = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : 4;
            cp = len == 1 ? b : len == 2 ? (b & 0x1Fu) : len == 3 ? (b & 0x0Fu) : (b & 0x07u);
            for (int k = 1; k < len && i + (size_t)k < n; k++) cp = (cp << 6) | ((unsigned char)name[i + (size_t)k] & 0x3Fu);
            i += (size_t)len;
            if (cp < 0x20 || cp == '"' || cp == '\\') return refuse(c, "property names that need escapes are not supported");
            uint32_t ch = c->trie_child[at], found = 0;
            for (; ch; ch = c->trie_next[ch])
                if (c->trie_cp[ch] == cp) found = ch;
            if (!found) {
                if (c->trie_n > MAX_NAME_CPS) return refuse(c, "property names too long in total");
                found = c->trie_n++;
                c->trie_cp[found] = cp, c->trie_child[found] = 0, c->trie_end[found] = false;
                c->trie_next[found] = c->trie_child[at];
                c->trie_child[at] = found;
            }
            at = found;
        }
        c->trie_end[at] = true;
    }
    /* one rule per trie node: the key so far equals that node's prefix */
    uint32_t base = c->n_rules;
    c->n_rules += c->trie_n;
    for (uint32_t t = 0; t < c->trie_n; t++) {
        putf(c, "r%u ::= [^\"\\\\\\x00-\\x1F", base + t);
        for (uint32_t ch = c->trie_child[t]; ch; ch = c->trie_next[ch]) put_hex_escape(c, 'U', c->trie_cp[ch], 8);
        put(c, "] jkchar* \"\\\"\"");
        if (!c->trie_end[t]) put(c, " | \"\\\"\"");
        for (uint32_t ch = c->trie_child[t]; ch; ch = c->trie_next[ch]) {
            put(c, " | \"");
            put_hex_escape(c, 'U', c->trie_cp[ch], 8);
            putf(c, "\" r%u", base + ch);
        }
        put(c, "\n");
    }
    *rule = new_rule(c);
    putf(c, "r%u ::= \"\\\"\" r%u\n", *rule, base);
    return WISP_OK;
}

static wisp_status gen_object(sc *c, int64_t node, uint32_t *rule) {
    objview o;
    memset(&o, 0, sizeof o);
    o.additional = c->lim.strict_objects ? -2 : -1;
    wisp_status st;
    int64_t all = wisp_json_get(c->j, node, "allOf");
    if ((st = add_props(c, &o, node)) || (st = read_additional(c, node, &o.additional))) return st;
    if (all >= 0) {
        if (!wisp_json_is(c->j, all, WISP_JSON_ARRAY)) return refuse(c, "'allOf' must be an array");
        for (int64_t b = wisp_json_first(c->j, all); b >= 0; b = wisp_json_next(c->j, b)) {
            if (!wisp_json_is(c->j, b, WISP_JSON_OBJECT)) return refuse(c, "'allOf' branches must be schemas");
            for (int64_t k = wisp_json_first(c->j, b); k >= 0; k = wisp_json_next(c->j, wisp_json_next(c->j, k))) {
                if (key_is(c, k, "properties") || key_is(c, k, "required") || is_annotation(c, k)) continue;
                if (key_is(c, k, "type") && wisp_json_string_eq(c->j, wisp_json_next(c->j, k), "object")) continue;
                size_t n;
                const char *s = raw(c, k, &n);
                if (!known_keyword(c, k)) return refuse(c, "keyword '%.*s' is not supported", (int)n, s);
                return refuse(c, "'allOf' is supported for object schemas with properties/required only (found '%.*s')",
                              (int)n, s);
            }
            if ((st = add_props(c, &o, b))) return st;
        }
    }
    if ((st = add_required(c, &o, node))) return st;
    if (all >= 0)
        for (int64_t b = wisp_json_first(c->j, all); b >= 0; b = wisp_json_next(c->j, b))
            if ((st = add_required(c, &o, b))) return st;
    /* the members' value rules first */
    for (int i = 0; i < o.n; i++) {
        size_t kn;
        const char *ks = raw(c, o.key[i], &kn);
        size_t saved = path_push(c, ks, kn);
        st = gen(c, o.schema[i], &o.rule[i]);
        path_pop(c, saved);
        if (st) return st;
        if (o.rule[i] == NO_RULE && (o.required & (1u << i))) { /* a required member beyond the depth limit */
            *rule = NO_RULE;
            return WISP_OK;
        }
    }
    uint32_t add_key = 0, add_val = 0;
    bool additional = o.additional != -2;
    if (additional) {
        if ((st = other_key_rule(c, &o, &add_key))) return st;
        if (o.additional >= 0) {
            size_t saved = path_push(c, "additionalProperties", 20);
            st = gen(c, o.additional, &add_val);
            path_pop(c, saved);
            if (st) return st;
            if (add_val == NO_RULE) additional = false;
        }
    }
    /* member-set rules: m<S> = a member not in S then t<S+p>; t<S> = "," m<S> | "}" */
    uint32_t sets = 1u << o.n;
    uint32_t m0 = c->n_rules, t0 = m0 + sets;
    c->n_rules += 2 * sets;
    for (uint32_t s = 0; s < sets; s++) {
        bool m_any = additional;
        for (int p = 0; p < o.n; p++) m_any |= !(s & (1u << p)) && o.rule[p] != NO_RULE;
        if (m_any) {
            putf(c, "r%u ::=", m0 + s);
            const char *sep = "";
            for (int p = 0; p < o.n; p++) {
                if ((s & (1u << p)) || o.rule[p] == NO_RULE) continue;
                size_t kn;
                const char *ks = raw(c, o.key[p], &kn);
                put(c, sep);
                put(c, " \"\\\"");
                for (size_t i = 0; i < kn; i++) {
                    if (ks[i] == '"' || ks[i] == '\\') put(c, "\\");
                    put_n(c, ks + i, 1);
                }
                putf(c, "\\\"\" ws \":\" ws r%u r%u", o.rule[p], t0 + (s | (1u << p)));
                sep = " |";
            }
            if (additional) {
                put(c, sep);
                putf(c, " r%u ws \":\" ws ", add_key);
                if (o.additional >= 0) put_rule(c, add_val);
                else put(c, "value");
                putf(c, " r%u", t0 + s);
            }
            put(c, "\n");
        }
        putf(c, "r%u ::=", t0 + s);
        const char *sep = "";
        if (m_any) putf(c, " ws \",\" ws r%u", m0 + s), sep = " |";
        if ((s & o.required) == o.required) put(c, sep), put(c, " ws \"}\""), sep = " |";
        put(c, "\n");
    }
    *rule = new_rule(c);
    bool first_member = additional;
    for (int p = 0; p < o.n; p++) first_member |= o.rule[p] != NO_RULE;
    putf(c, "r%u ::= \"{\" ws", *rule);
    if (first_member) putf(c, " ( r%u%s )\n", m0, o.required == 0 ? " | \"}\"" : "");
    else put(c, " \"}\"\n");
    return WISP_OK;
}

/* ---- arrays ---- */

static wisp_status gen_array(sc *c, int64_t node, uint32_t *rule) {
    int64_t items = wisp_json_get(c->j, node, "items"), mn, mx;
    wisp_status st;
    if ((st = get_count(c, node, "minItems", 0, &mn)) || (st = get_count(c, node, "maxItems", -1, &mx))) return st;
    if (mx >= 0 && mx < mn) return refuse(c, "maxItems is below minItems");
    if (mx < 0 && c->lim.max_items) mx = mn > (int64_t)c->lim.max_items ? mn : (int64_t)c->lim.max_items;
    uint32_t item = 0;
    bool any = items < 0;
    if (!any) {
        size_t saved = path_push(c, "items", 5);
        st = gen(c, items, &item);
        path_pop(c, saved);
        if (st) return st;
        if (item == NO_RULE) { /* items beyond the depth limit: only an empty array */
            if (mn > 0) {
                *rule = NO_RULE;
                return WISP_OK;
            }
            mx = 0;
        }
    }
    *rule = new_rule(c);
    char iname[16];
    if (any) wisp_format(iname, sizeof iname, "value");
    else wisp_format(iname, sizeof iname, "r%u", item);
    putf(c, "r%u ::= \"[\" ws", *rule);
    if (mx == 0) {
        put(c, " \"]\"\n");
        return WISP_OK;
    }
    put(c, " ");
    if (mn == 0) put(c, "( ");
    putf(c, "%s ( ws \",\" ws %s )", iname, iname);
    long long lo = mn > 0 ? mn - 1 : 0;
    if (mx < 0) putf(c, "{%lld,}", lo);
    else putf(c, "{%lld,%lld}", lo, (long long)mx - 1);
    put(c, " ws");
    if (mn == 0) put(c, " )?");
    put(c, " \"]\"\n");
    return WISP_OK;
}

/* ---- $ref, anyOf / oneOf ---- */

static wisp_status resolve_ref(sc *c, int64_t ref, int64_t *target) {
    char buf[256];
    size_t n = wisp_json_string(c->j, ref, buf, sizeof buf);
    if (n >= sizeof buf) return refuse(c, "'$ref' too long");
    if (n == 1 && buf[0] == '#') {
        *target = 0;
        return WISP_OK;
    }
    const char *prefixes[2] = {"#/$defs/", "#/definitions/"};
    for (int i = 0; i < 2; i++) {
        size_t pl = strlen(prefixes[i]);
        if (n > pl && memcmp(buf, prefixes[i], pl) == 0) {
            if (memchr(buf + pl, '/', n - pl) || memchr(buf + pl, '~', n - pl) || memchr(buf + pl, '%', n - pl))
                return refuse(c, "'$ref' '%s': only #/$defs/NAME and #/definitions/NAME are supported", buf);
            int64_t defs = wisp_json_get(c->j, 0, i == 0 ? "$defs" : "definitions");
            int64_t t = defs >= 0 ? wisp_json_get(c->j, defs, buf + pl) : -1;
            if (t < 0) return refuse(c, "'$ref' '%s' points at nothing", buf);
            *target = t;
            return WISP_OK;
        }
    }
    return refuse(c, "'$ref' '%s': only #/$defs/NAME, #/definitions/NAME and # are supported", buf);
}

/* Two branches of a oneOf that no value can satisfy both: different JSON types,
 * or a property both require whose const/enum values do not meet. */
static bool literal_set_disjoint(sc *c, int64_t a, int64_t b) {
    int64_t lists[2][2] = {{wisp_json_get(c->j, a, "const"), wisp_json_get(c->j, a, "enum")},
                           {wisp_json_get(c->j, b, "const"), wisp_json_get(c->j, b, "enum")}};
    if ((lists[0][0] < 0 && lists[0][1] < 0) || (lists[1][0] < 0 && lists[1][1] < 0)) return false;
    for (int64_t x = lists[0][0] >= 0 ? lists[0][0] : wisp_json_first(c->j, lists[0][1]); x >= 0;
         x = lists[0][0] >= 0 ? -1 : wisp_json_next(c->j, x))
        for (int64_t y = lists[1][0] >= 0 ? lists[1][0] : wisp_json_first(c->j, lists[1][1]); y >= 0;
             y = lists[1][0] >= 0 ? -1 : wisp_json_next(c->j, y)) {
            size_t xn, yn;
            const char *xs = raw(c, x, &xn), *ys = raw(c, y, &yn);
            if (c->j->nodes[x].type == c->j->nodes[y].type && xn == yn && memcmp(xs, ys, xn) == 0) return false;
            if (c->j->nodes[x].type != c->j->nodes[y].type && c->j->nodes[x].type != WISP_JSON_STRING &&
                c->j->nodes[y].type != WISP_JSON_STRING)
                return false; /* numbers vs booleans etc.: keep it simple, call it overlapping */
        }
    return true;
}

static int64_t deref(sc *c, int64_t n) {
    for (int hops = 0; hops < 16; hops++) {
        int64_t r = wisp_json_is(c->j, n, WISP_JSON_OBJECT) ? wisp_json_get(c->j, n, "$ref") : -1;
        int64_t t;
        if (r < 0) return n;
        wisp_error e;
        wisp_error *saved = c->err;
        c->err = &e;
        wisp_status st = resolve_ref(c, r, &t);
        c->err = saved;
        if (st) return n;
        n = t;
    }
    return n;
}

static unsigned implied_types(sc *c, int64_t n) {
    unsigned t;
    wisp_error e, *saved = c->err;
    c->err = &e;
    wisp_status st = read_types(c, n, &t);
    c->err = saved;
    if (st) return T_ALL;
    if (t) return t == T_INTEGER ? T_INTEGER | T_NUMBER : t;
    if (wisp_json_get(c->j, n, "properties") >= 0) return T_OBJECT;
    if (wisp_json_get(c->j, n, "items") >= 0) return T_ARRAY;
    int64_t k = wisp_json_get(c->j, n, "const");
    if (k >= 0) return value_has_type(c, k, T_STRING) ? T_STRING : T_ALL;
    return T_ALL;
}

static bool disjoint(sc *c, int64_t a, int64_t b) {
    a = deref(c, a), b = deref(c, b);
    unsigned ta = implied_types(c, a), tb = implied_types(c, b);
    if (ta & T_INTEGER) ta |= T_NUMBER;
    if (tb & T_INTEGER) tb |= T_NUMBER;
    if (!(ta & tb)) return true;
    if (literal_set_disjoint(c, a, b)) return true;
    if (ta != T_OBJECT || tb != T_OBJECT) return false;
    int64_t pa = wisp_json_get(c->j, a, "properties"), pb = wisp_json_get(c->j, b, "properties");
    int64_t ra = wisp_json_get(c->j, a, "required"), rb = wisp_json_get(c->j, b, "required");
    if (pa < 0 || pb < 0 || ra < 0 || rb < 0) return false;
    for (int64_t x = wisp_json_first(c->j, ra); x >= 0; x = wisp_json_next(c->j, x)) {
        char name[128];
        size_t n = wisp_json_string(c->j, x, name, sizeof name);
        if (n >= sizeof name) continue;
        bool in_b = false;
        for (int64_t y = wisp_json_first(c->j, rb); y >= 0; y = wisp_json_next(c->j, y)) in_b |= wisp_json_string_eq(c->j, y, name);
        int64_t sa = wisp_json_get(c->j, pa, name), sb = wisp_json_get(c->j, pb, name);
        if (in_b && sa >= 0 && sb >= 0 && literal_set_disjoint(c, deref(c, sa), deref(c, sb))) return true;
    }
    return false;
}

static wisp_status gen_union(sc *c, int64_t node, int64_t list, bool one_of, uint32_t *rule) {
    const char *kw = one_of ? "oneOf" : "anyOf";
    if (!wisp_json_is(c->j, list, WISP_JSON_ARRAY) || wisp_json_first(c->j, list) < 0)
        return refuse(c, "'%s' must be a non-empty array", kw);
    for (int64_t k = wisp_json_first(c->j, node); k >= 0; k = wisp_json_next(c->j, wisp_json_next(c->j, k)))
        if (!is_annotation(c, k) && !key_is(c, k, kw)) {
            size_t n;
            const char *s = raw(c, k, &n);
            return refuse(c, "'%s' alongside '%.*s' is not supported", kw, (int)n, s);
        }
    if (one_of)
        for (int64_t a = wisp_json_first(c->j, list); a >= 0; a = wisp_json_next(c->j, a))
            for (int64_t b = wisp_json_next(c->j, a); b >= 0; b = wisp_json_next(c->j, b))
                if (!disjoint(c, a, b))
                    return refuse(c, "keyword 'oneOf' whose branches may overlap is not supported (use anyOf if "
                                     "overlaps are fine)");
    uint32_t ids[64];
    int n = 0;
    for (int64_t b = wisp_json_first(c->j, list); b >= 0; b = wisp_json_next(c->j, b)) {
        if (n == 64) return refuse(c, "'%s' with more than 64 branches", kw);
        char seg[24];
        size_t sl = wisp_format(seg, sizeof seg, "%s/%d", kw, n);
        size_t saved = path_push(c, seg, sl);
        wisp_status st = gen(c, b, &ids[n]);
        path_pop(c, saved);
        if (st) return st;
        if (ids[n] != NO_RULE) n++;
    }
    if (n == 0) {
        *rule = NO_RULE;
        return WISP_OK;
    }
    *rule = new_rule(c);
    putf(c, "r%u ::=", *rule);
    for (int i = 0; i < n; i++) putf(c, "%s r%u", i ? " |" : "", ids[i]);
    put(c, "\n");
    return WISP_OK;
}

static wisp_status gen_ref(sc *c, int64_t node, int64_t ref, uint32_t *rule) {
    for (int64_t k = wisp_json_first(c->j, node); k >= 0; k = wisp_json_next(c->j, wisp_json_next(c->j, k)))
        if (!is_annotation(c, k) && !key_is(c, k, "$ref")) {
            size_t n;
            const char *s = raw(c, k, &n);
            return refuse(c, "'$ref' alongside '%.*s' is not supported", (int)n, s);
        }
    int64_t target;
    wisp_status st = resolve_ref(c, ref, &target);
    if (st) return st;
    /* bounded: a definition nests at most max_depth + 1 times (one copy of its rules per level) */
    uint32_t level = 0;
    if (c->lim.max_depth) {
        for (int i = 0; i < c->n_active; i++) level += c->active[i] == target;
        if (level > c->lim.max_depth) {
            *rule = NO_RULE;
            return WISP_OK;
        }
    }
    for (int i = 0; i < c->n_defs; i++)
        if (c->defs[i].node == target && c->defs[i].level == level) {
            *rule = c->defs[i].rule;
            return WISP_OK;
        }
    if (c->n_defs == MAX_DEFS) return refuse(c, "more than %d $ref targets", MAX_DEFS);
    if (c->n_active > MAX_DEPTH) return refuse(c, "$ref nested more than %d deep", MAX_DEPTH);
    uint32_t r = new_rule(c);
    int slot = c->n_defs++;
    c->defs[slot].node = target, c->defs[slot].rule = r, c->defs[slot].level = level;
    uint32_t body;
    c->active[c->n_active++] = target;
    st = gen(c, target, &body);
    c->n_active--;
    if (st) return st;
    if (body == NO_RULE) {
        c->defs[slot].rule = NO_RULE; /* the name r stays unused */
        *rule = NO_RULE;
        return WISP_OK;
    }
    putf(c, "r%u ::= r%u\n", r, body);
    *rule = r;
    return WISP_OK;
}

/* ---- one schema ---- */

static wisp_status gen(sc *c, int64_t node, uint32_t *rule) {
    wisp_status st;
    if (++c->depth > MAX_DEPTH) return refuse(c, "schemas nested more than %d deep", MAX_DEPTH);
    bool b;
    if (wisp_json_bool(c->j, node, &b)) {
        c->depth--;
        if (!b) return refuse(c, "the schema 'false' (nothing is valid) is not supported");
        *rule = new_rule(c);
        putf(c, "r%u ::= value\n", *rule);
        return WISP_OK;
    }
    if (!wisp_json_is(c->j, node, WISP_JSON_OBJECT)) return refuse(c, "a schema must be an object or a boolean");
    if ((st = check_keywords(c, node))) return st;
    int64_t ref = wisp_json_get(c->j, node, "$ref"), any = wisp_json_get(c->j, node, "anyOf"),
            one = wisp_json_get(c->j, node, "oneOf");
    if (ref >= 0) st = gen_ref(c, node, ref, rule);
    else if (any >= 0 && one >= 0) st = refuse(c, "'anyOf' together with 'oneOf' is not supported");
    else if (any >= 0 || one >= 0) st = gen_union(c, node, any >= 0 ? any : one, one >= 0, rule);
    else {
        unsigned types;
        if ((st = read_types(c, node, &types))) return st;
        if (wisp_json_get(c->j, node, "enum") >= 0 || wisp_json_get(c->j, node, "const") >= 0) {
            st = gen_literals(c, node, types ? types : T_ALL, rule);
        } else {
            if (!types) { /* no type: what the keywords imply, else anything */
                if (wisp_json_get(c->j, node, "properties") >= 0 || wisp_json_get(c->j, node, "required") >= 0 ||
                    wisp_json_get(c->j, node, "additionalProperties") >= 0 || wisp_json_get(c->j, node, "allOf") >= 0)
                    types = T_OBJECT;
                else if (wisp_json_get(c->j, node, "items") >= 0) types = T_ARRAY;
                else if (wisp_json_get(c->j, node, "pattern") >= 0 || wisp_json_get(c->j, node, "format") >= 0 ||
                         wisp_json_get(c->j, node, "minLength") >= 0 || wisp_json_get(c->j, node, "maxLength") >= 0)
                    types = T_STRING;
                else if (wisp_json_get(c->j, node, "minimum") >= 0 || wisp_json_get(c->j, node, "maximum") >= 0)
                    types = T_NUMBER;
            }
            if (wisp_json_get(c->j, node, "allOf") >= 0 && types != T_OBJECT)
                return refuse(c, "'allOf' is supported for object schemas only");
            uint32_t parts[7];
            int n = 0;
            if (!types) {
                *rule = new_rule(c);
                putf(c, "r%u ::= value\n", *rule);
                c->depth--;
                return WISP_OK;
            }
            if (types & T_OBJECT) {
                if ((st = gen_object(c, node, &parts[n]))) return st;
                n += parts[n] != NO_RULE;
            }
            if (types & T_ARRAY) {
                if ((st = gen_array(c, node, &parts[n]))) return st;
                n += parts[n] != NO_RULE;
            }
            if (n == 0 && !(types & ~(unsigned)(T_OBJECT | T_ARRAY))) {
                *rule = NO_RULE;
                c->depth--;
                return WISP_OK;
            }
            *rule = new_rule(c);
            putf(c, "r%u ::=", *rule);
            const char *sep = "";
            for (int i = 0; i < n; i++) putf(c, "%s r%u", sep, parts[i]), sep = " |";
            if (types & T_STRING) {
                put(c, sep);
                if ((st = gen_string(c, node))) return st;
                sep = " |";
            }
            if (types & (T_NUMBER | T_INTEGER)) {
                put(c, sep);
                if ((st = gen_numeric(c, node, !(types & T_NUMBER)))) return st;
                sep = " |";
            }
            if (types & T_BOOLEAN) put(c, sep), put(c, " bool"), sep = " |";
            if (types & T_NULL) put(c, sep), put(c, " null"), sep = " |";
            put(c, "\n");
        }
    }
    c->depth--;
    return st;
}

wisp_status wisp_json_schema_to_gbnf(const wisp_json *schema, char *out, size_t cap, size_t *len, wisp_error *err) {
    return wisp_json_schema_to_gbnf_ex(schema, NULL, out, cap, len, err);
}

wisp_status wisp_json_schema_to_gbnf_ex(const wisp_json *schema, const wisp_json_schema_limits *lim, char *out,
                                        size_t cap, size_t *len, wisp_error *err) {
    sc c;
    memset(&c, 0, sizeof c);
    c.j = schema, c.err = err, c.out = out, c.cap = cap;
    if (lim) c.lim = *lim;
    *len = 0;
    if (!schema || schema->n_nodes == 0) return wisp_fail(err, WISP_ERR_ARG, "JSON schema: empty");
    put_prelude(&c);
    uint32_t root;
    wisp_status st = gen(&c, 0, &root);
    if (st) return st;
    if (root == NO_RULE) return refuse(&c, "the schema needs more nesting than the bounds allow");
    putf(&c, "root ::= r%u\n", root);
    *len = c.len;
    if (cap) out[c.len < cap ? c.len : cap - 1] = 0;
    if (c.len >= cap) return wisp_fail(err, WISP_ERR_CAPACITY, "JSON schema: the grammar needs %zu bytes", c.len + 1);
    return WISP_OK;
}
