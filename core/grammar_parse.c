/* GBNF text -> byte-level rules (see grammar.h).
 *
 * One recursive-descent parser runs twice over the text: first only
 * counting (how many elements, alternatives, byte sets, rules, how deep the
 * work stack gets), then, with arrays carved at exactly those sizes, writing.
 * The counts cannot differ between the passes because nothing in the first
 * pass depends on memory: rule names are resolved only when writing, so the
 * rule table is sized by the number of name occurrences (a bound).
 *
 * Rules being built are nested (a group inside a rule inside ...), so their
 * elements go first to a work stack; a rule that closes is copied to the
 * final arrays, which therefore hold every rule contiguously. */
#include <stddef.h>
#include <string.h>

#include "grammar.h"

#define MAX_CLASS_RANGES WISP_GRAMMAR_MAX_CLASS_RANGES
#define MAX_REPEAT 10000     /* largest m or n in {m,n} */
#define MAX_NESTING 200      /* parentheses inside each other */
#define NONE 0xFFFFFFFFu
#define ELEM(kind, value) (((uint32_t)(kind) << 28) | (uint32_t)(value))

typedef struct open_rule {
    uint32_t base;   /* work stack index where this rule's elements start */
    uint32_t n_alts; /* alternatives closed so far (END elements pushed) */
} open_rule;

typedef struct gp {
    const char *s;
    size_t len, pos;
    wisp_error *err;
    bool write; /* second pass: arrays exist */
    int depth;
    uint32_t cur_rule; /* the named rule being defined, for generated rules' names */
    /* counts; in the writing pass also the fill levels of the arrays below */
    uint32_t n_elems, n_alts, n_terms, n_rules, work_top, work_max;
    uint32_t single_term[256]; /* byte set index of each single byte used so far */
    /* final arrays */
    uint32_t *elems, *alt_start, *rule_first_alt, *rule_n_alts, *terms;
    /* scratch: the work stack and what the checks after parsing need */
    uint32_t *work;
    uint32_t *names;     /* [name_cap] hash table of named rules: id + 1 */
    uint32_t name_cap;
    uint32_t *name_off;  /* [rules] where the name is in the text (generated: NONE) */
    uint32_t *name_len;  /* [rules] its length (generated: the named rule it belongs to) */
    uint32_t *def_pos;   /* [rules] text offset of the definition + 1, 0 if none */
    uint32_t *use_pos;   /* [rules] text offset of the first reference */
    uint32_t *nullable;  /* [rules] */
    uint32_t *dfs;       /* [3 x rules] left-recursion search: colour and stack frames */
    uint32_t rule_cap;
    /* one character class at a time (classes do not nest): its ranges, and room to complement them */
    uint32_t ranges[2 * MAX_CLASS_RANGES + 4][2];
    uint32_t tmp[2 * MAX_CLASS_RANGES + 4][2];
} gp;

/* ---- errors with line:column ---- */

static wisp_status fail_at(gp *g, size_t at, const char *fmt, ...) {
    uint32_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < g->len; i++) {
        if (g->s[i] == '\n') line++, col = 1;
        else col++;
    }
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    wisp_vformat(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return wisp_fail(g->err, WISP_ERR_FORMAT, "grammar: line %u, column %u: %s", line, col, msg);
}

/* ---- emitting ---- */

static wisp_status push(gp *g, uint32_t e) {
    if (g->write) {
        if (g->work_top >= g->work_max) return wisp_fail(g->err, WISP_ERR_INTERNAL, "grammar: work stack overflow");
        g->work[g->work_top] = e;
    }
    g->work_top++;
    if (g->work_top > g->work_max && !g->write) g->work_max = g->work_top;
    return WISP_OK;
}

static uint32_t top_elem(const gp *g) { return g->write ? g->work[g->work_top - 1] : 0; }

static uint32_t new_term(gp *g, const uint32_t set[8]) {
    if (g->write) memcpy(g->terms + (size_t)g->n_terms * 8, set, 32);
    return g->n_terms++;
}

static uint32_t byte_term(gp *g, uint8_t b) {
    if (g->single_term[b] == NONE) {
        uint32_t set[8] = {0};
        set[b >> 5] |= 1u << (b & 31);
        g->single_term[b] = new_term(g, set);
    }
    return g->single_term[b];
}

static uint32_t new_rule(gp *g) {
    uint32_t id = g->n_rules++;
    if (g->write) {
        g->name_off[id] = NONE;
        g->name_len[id] = g->cur_rule;
        g->def_pos[id] = 1;
        g->rule_n_alts[id] = 0;
        g->rule_first_alt[id] = g->n_alts;
    }
    return id;
}

/* One alternative of the rule whose alternatives are being written right now. */
static void final_alt(gp *g, uint32_t rule, const uint32_t *e, uint32_t n) {
    if (g->write) {
        g->alt_start[g->n_alts] = g->n_elems;
        if (n) memcpy(g->elems + g->n_elems, e, n * sizeof *e);
        g->elems[g->n_elems + n] = ELEM(WISP_GE_END, 0);
        g->rule_n_alts[rule]++;
    }
    g->n_alts++;
    g->n_elems += n + 1;
}

/* Move an open rule's elements from the work stack to the final arrays. */
static void close_rule(gp *g, uint32_t rule, const open_rule *o) {
    uint32_t n = g->work_top - o->base;
    if (g->write) {
        g->rule_first_alt[rule] = g->n_alts;
        g->rule_n_alts[rule] = o->n_alts;
        uint32_t a = g->n_alts;
        bool at_start = true;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t e = g->work[o->base + i];
            if (at_start) g->alt_start[a++] = g->n_elems + i;
            g->elems[g->n_elems + i] = e;
            at_start = WISP_GE_KIND(e) == WISP_GE_END;
        }
    }
    g->n_alts += o->n_alts;
    g->n_elems += n;
    g->work_top = o->base;
}

/* ---- names ---- */

static uint32_t name_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

/* Rule id of a name at text offset `off` (created on first mention). */
static uint32_t rule_of_name(gp *g, size_t off, size_t n) {
    if (!g->write) return g->n_rules++;
    uint32_t mask = g->name_cap - 1;
    for (uint32_t i = name_hash(g->s + off, n) & mask;; i = (i + 1) & mask) {
        uint32_t id = g->names[i];
        if (id == 0) {
            id = g->n_rules++;
            g->names[i] = id + 1;
            g->name_off[id] = (uint32_t)off;
            g->name_len[id] = (uint32_t)n;
            g->def_pos[id] = 0;
            g->use_pos[id] = (uint32_t)off;
            g->rule_n_alts[id] = 0;
            g->rule_first_alt[id] = 0;
            return id;
        }
        id--;
        if (g->name_len[id] == n && g->name_off[id] != NONE && memcmp(g->s + g->name_off[id], g->s + off, n) == 0)
            return id;
    }
}

static int64_t find_rule(const gp *g, const char *name) {
    size_t n = strlen(name);
    uint32_t mask = g->name_cap - 1;
    for (uint32_t i = name_hash(name, n) & mask; g->names[i]; i = (i + 1) & mask) {
        uint32_t id = g->names[i] - 1;
        if (g->name_len[id] == n && memcmp(g->s + g->name_off[id], name, n) == 0) return id;
    }
    return -1;
}

/* "name" of a rule for messages: its own, or the named rule it was generated in. */
static void rule_label(const gp *g, uint32_t id, const char **s, int *n, bool *generated) {
    *generated = g->name_off[id] == NONE;
    if (*generated) id = g->name_len[id];
    if (id == NONE || g->name_off[id] == NONE) {
        *s = "?";
        *n = 1;
        return;
    }
    *s = g->s + g->name_off[id];
    *n = (int)g->name_len[id];
}

/* ---- lexing ---- */

static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static void skip_space(gp *g, bool newline_ok) {
    while (g->pos < g->len) {
        char c = g->s[g->pos];
        if (c == ' ' || c == '\t' || c == '\r' || (c == '\n' && newline_ok)) g->pos++;
        else if (c == '#') {
            while (g->pos < g->len && g->s[g->pos] != '\n') g->pos++;
        } else break;
    }
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One character of a literal or class (escapes, UTF-8) as a code point. */
static wisp_status read_char(gp *g, uint32_t *cp) {
    size_t at = g->pos;
    uint8_t c = (uint8_t)g->s[g->pos];
    if (c == '\\') {
        if (g->pos + 1 >= g->len) return fail_at(g, at, "a backslash at the end of the text");
        char e = g->s[g->pos + 1];
        g->pos += 2;
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (digits) {
            uint32_t v = 0;
            for (int i = 0; i < digits; i++) {
                int d = g->pos < g->len ? hex_digit(g->s[g->pos]) : -1;
                if (d < 0) return fail_at(g, at, "\\%c needs %d hex digits", e, digits);
                v = v * 16 + (uint32_t)d;
                g->pos++;
            }
            if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
                return fail_at(g, at, "escape \\%c%.*s is not a Unicode scalar value", e, digits, g->s + at + 2);
            *cp = v;
            return WISP_OK;
        }
        switch (e) {
        case 'n': *cp = '\n'; return WISP_OK;
        case 'r': *cp = '\r'; return WISP_OK;
        case 't': *cp = '\t'; return WISP_OK;
        case '\\': case '"': case '\'': case '[': case ']': case '-': case '^': case '/':
            *cp = (uint8_t)e;
            return WISP_OK;
        default: return fail_at(g, at, "unknown escape '\\%c'", e);
        }
    }
    /* UTF-8, strictly */
    int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || g->pos + (size_t)n > g->len) return fail_at(g, at, "invalid UTF-8");
    uint32_t v = n == 1 ? c : n == 2 ? (c & 0x1Fu) : n == 3 ? (c & 0x0Fu) : (c & 0x07u);
    for (int i = 1; i < n; i++) {
        uint8_t k = (uint8_t)g->s[g->pos + (size_t)i];
        if ((k & 0xC0) != 0x80) return fail_at(g, at, "invalid UTF-8");
        v = (v << 6) | (k & 0x3Fu);
    }
    static const uint32_t min_of_len[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min_of_len[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return fail_at(g, at, "invalid UTF-8");
    g->pos += (size_t)n;
    *cp = v;
    return WISP_OK;
}

static int utf8_encode(uint32_t cp, uint8_t out[4]) {
    if (cp < 0x80) { out[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { out[0] = (uint8_t)(0xC0 | (cp >> 6)); out[1] = (uint8_t)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- character classes -> UTF-8 byte sequences ----
 * A range of code points whose encodings have the same length and differ
 * only in "all values" of the trailing bytes is one sequence of byte ranges;
 * any range splits into a few such pieces. Adjacent pieces that differ only
 * in their first byte merge into one alternative with a first-byte set. */

typedef struct class_out {
    uint32_t rule;
    uint32_t ascii[8]; /* single-byte part: one byte set */
    bool pending;      /* a multi-byte sequence waiting to be merged or written */
    int plen;
    uint32_t first[8];
    uint8_t lo[4], hi[4];
} class_out;

static void set_range(uint32_t set[8], unsigned lo, unsigned hi) {
    for (unsigned b = lo; b <= hi; b++) set[b >> 5] |= 1u << (b & 31);
}

static void flush_seq(gp *g, class_out *o) {
    if (!o->pending) return;
    uint32_t e[4];
    e[0] = ELEM(WISP_GE_TERM, new_term(g, o->first));
    for (int i = 1; i < o->plen; i++) {
        uint32_t set[8] = {0};
        set_range(set, o->lo[i], o->hi[i]);
        e[i] = ELEM(WISP_GE_TERM, o->lo[i] == o->hi[i] ? byte_term(g, o->lo[i]) : new_term(g, set));
    }
    final_alt(g, o->rule, e, (uint32_t)o->plen);
    o->pending = false;
}

static void add_seq(gp *g, class_out *o, int n, const uint8_t lo[4], const uint8_t hi[4]) {
    if (o->pending && o->plen == n && memcmp(o->lo + 1, lo + 1, (size_t)n - 1) == 0 &&
        memcmp(o->hi + 1, hi + 1, (size_t)n - 1) == 0) {
        set_range(o->first, lo[0], hi[0]);
        return;
    }
    flush_seq(g, o);
    o->pending = true;
    o->plen = n;
    memset(o->first, 0, sizeof o->first);
    set_range(o->first, lo[0], hi[0]);
    memcpy(o->lo, lo, 4);
    memcpy(o->hi, hi, 4);
}

static void utf8_split(gp *g, class_out *o, uint32_t lo, uint32_t hi) {
    static const uint32_t len_max[3] = {0x7F, 0x7FF, 0xFFFF};
    for (int i = 0; i < 3; i++)
        if (lo <= len_max[i] && hi > len_max[i]) {
            utf8_split(g, o, lo, len_max[i]);
            utf8_split(g, o, len_max[i] + 1, hi);
            return;
        }
    if (hi < 0x80) {
        set_range(o->ascii, lo, hi);
        return;
    }
    uint8_t a[4], b[4];
    int n = utf8_encode(lo, a);
    for (int i = 1; i < n; i++) {
        uint32_t m = (1u << (6 * i)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                utf8_split(g, o, lo, lo | m);
                utf8_split(g, o, (lo | m) + 1, hi);
                return;
            }
            if ((hi & m) != m) {
                utf8_split(g, o, lo, (hi & ~m) - 1);
                utf8_split(g, o, hi & ~m, hi);
                return;
            }
        }
    }
    utf8_encode(hi, b);
    add_seq(g, o, n, a, b);
}

/* Sorted, merged, surrogate-free ranges (in place); returns the count. */
static int normalize(gp *g, int n, bool negate) {
    uint32_t(*r)[2] = g->ranges;
    for (int i = 1; i < n; i++) /* insertion sort by start */
        for (int j = i; j > 0 && r[j - 1][0] > r[j][0]; j--) {
            uint32_t t0 = r[j][0], t1 = r[j][1];
            r[j][0] = r[j - 1][0], r[j][1] = r[j - 1][1];
            r[j - 1][0] = t0, r[j - 1][1] = t1;
        }
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m && r[i][0] <= r[m - 1][1] + 1) {
            if (r[i][1] > r[m - 1][1]) r[m - 1][1] = r[i][1];
        } else {
            r[m][0] = r[i][0], r[m][1] = r[i][1];
            m++;
        }
    }
    if (negate) { /* complement within 0..0x10FFFF, in place from the back */
        uint32_t next = 0;
        int k = 0;
        uint32_t(*tmp)[2] = g->tmp;
        for (int i = 0; i < m; i++) {
            if (r[i][0] > next) tmp[k][0] = next, tmp[k][1] = r[i][0] - 1, k++;
            next = r[i][1] + 1;
        }
        if (next <= 0x10FFFF) tmp[k][0] = next, tmp[k][1] = 0x10FFFF, k++;
        memcpy(r, tmp, sizeof g->tmp[0] * (size_t)k);
        m = k;
    }
    /* cut out the surrogates, which UTF-8 cannot carry */
    int out = 0;
    uint32_t(*res)[2] = g->tmp;
    for (int i = 0; i < m; i++) {
        uint32_t a = r[i][0], b = r[i][1];
        if (a < 0xD800 && b >= 0xD800) res[out][0] = a, res[out][1] = 0xD7FF, out++;
        else if (a < 0xD800) { res[out][0] = a, res[out][1] = b, out++; continue; }
        if (b > 0xDFFF) res[out][0] = a > 0xE000 ? a : 0xE000, res[out][1] = b, out++;
    }
    memcpy(r, res, sizeof g->tmp[0] * (size_t)out);
    return out;
}

/* Push the element(s) matching one code point of the ranges. */
static wisp_status emit_class(gp *g, uint32_t (*r)[2], int n) {
    bool ascii_only = n == 0 || r[n - 1][1] < 0x80;
    if (ascii_only) {
        uint32_t set[8] = {0};
        for (int i = 0; i < n; i++) set_range(set, r[i][0], r[i][1]);
        if (n == 1 && r[0][0] == r[0][1]) return push(g, ELEM(WISP_GE_TERM, byte_term(g, (uint8_t)r[0][0])));
        return push(g, ELEM(WISP_GE_TERM, new_term(g, set)));
    }
    class_out o;
    memset(&o, 0, sizeof o);
    o.rule = new_rule(g);
    for (int i = 0; i < n; i++) utf8_split(g, &o, r[i][0], r[i][1]);
    bool any_ascii = false;
    for (int i = 0; i < 8; i++) any_ascii |= o.ascii[i] != 0;
    flush_seq(g, &o);
    if (any_ascii) {
        uint32_t e = ELEM(WISP_GE_TERM, new_term(g, o.ascii));
        final_alt(g, o.rule, &e, 1);
    }
    return push(g, ELEM(WISP_GE_REF, o.rule));
}

static wisp_status parse_class(gp *g) {
    size_t at = g->pos;
    g->pos++; /* [ */
    bool negate = g->pos < g->len && g->s[g->pos] == '^';
    if (negate) g->pos++;
    uint32_t(*r)[2] = g->ranges;
    int n = 0;
    wisp_status st;
    for (;;) {
        if (g->pos >= g->len) return fail_at(g, at, "unterminated character class");
        if (g->s[g->pos] == ']') break;
        if (n == MAX_CLASS_RANGES) return fail_at(g, at, "a character class with more than %d ranges", MAX_CLASS_RANGES);
        uint32_t lo, hi;
        if ((st = read_char(g, &lo))) return st;
        hi = lo;
        if (g->pos + 1 < g->len && g->s[g->pos] == '-' && g->s[g->pos + 1] != ']') {
            size_t range_at = g->pos;
            g->pos++;
            if ((st = read_char(g, &hi))) return st;
            if (hi < lo) return fail_at(g, range_at, "a character range ending before it starts");
        }
        r[n][0] = lo, r[n][1] = hi, n++;
    }
    g->pos++; /* ] */
    n = normalize(g, n, negate);
    if (n == 0) return fail_at(g, at, "a character class that matches nothing");
    return emit_class(g, r, n);
}

static wisp_status parse_literal(gp *g) {
    size_t at = g->pos;
    g->pos++;
    wisp_status st;
    for (;;) {
        if (g->pos >= g->len || g->s[g->pos] == '\n') return fail_at(g, at, "unterminated string literal");
        if (g->s[g->pos] == '"') break;
        uint32_t cp;
        if ((st = read_char(g, &cp))) return st;
        uint8_t b[4];
        int n = utf8_encode(cp, b);
        for (int i = 0; i < n; i++)
            if ((st = push(g, ELEM(WISP_GE_TERM, byte_term(g, b[i]))))) return st;
    }
    g->pos++;
    return WISP_OK;
}

/* ---- repetition ---- */

/* The item on the work stack from `start` as one element (a rule if longer). */
static uint32_t item_as_one(gp *g, uint32_t start) {
    if (g->work_top - start == 1) {
        uint32_t e = top_elem(g);
        g->work_top--;
        return e;
    }
    uint32_t rule = new_rule(g);
    open_rule o = {start, 1};
    (void)push(g, ELEM(WISP_GE_END, 0)); /* cannot fail: the first pass sized the stack */
    close_rule(g, rule, &o);
    return ELEM(WISP_GE_REF, rule);
}

/* x* as R ::= x R | (empty): right recursion, so the matcher's stack does not grow. */
static uint32_t star_rule(gp *g, uint32_t x) {
    uint32_t r = new_rule(g);
    uint32_t a[2] = {x, ELEM(WISP_GE_REF, r)};
    final_alt(g, r, a, 2);
    final_alt(g, r, NULL, 0);
    return ELEM(WISP_GE_REF, r);
}

static wisp_status repeat(gp *g, uint32_t start, uint32_t min, uint32_t max /* NONE: unbounded */) {
    if (g->work_top == start) return WISP_OK; /* an empty item repeated is empty */
    uint32_t x = item_as_one(g, start);
    wisp_status st;
    for (uint32_t i = 0; i < min; i++)
        if ((st = push(g, x))) return st;
    if (max == NONE) return push(g, star_rule(g, x));
    if (max == min) return WISP_OK;
    /* up to k more: R_1 ::= x | (), R_k ::= x R_{k-1} | () */
    uint32_t prev = NONE;
    for (uint32_t k = 1; k <= max - min; k++) {
        uint32_t r = new_rule(g);
        uint32_t a[2] = {x, prev};
        final_alt(g, r, a, prev == NONE ? 1 : 2);
        final_alt(g, r, NULL, 0);
        prev = ELEM(WISP_GE_REF, r);
    }
    return push(g, prev);
}

static wisp_status read_count(gp *g, uint32_t *v) {
    size_t at = g->pos;
    if (g->pos >= g->len || g->s[g->pos] < '0' || g->s[g->pos] > '9') return fail_at(g, at, "expected a number in {m,n}");
    uint32_t n = 0;
    while (g->pos < g->len && g->s[g->pos] >= '0' && g->s[g->pos] <= '9') {
        n = n * 10 + (uint32_t)(g->s[g->pos++] - '0');
        if (n > MAX_REPEAT) return fail_at(g, at, "a repetition count above %d", MAX_REPEAT);
    }
    *v = n;
    return WISP_OK;
}

static wisp_status parse_postfix(gp *g, uint32_t start, bool nested) {
    wisp_status st;
    skip_space(g, nested);
    if (g->pos >= g->len) return WISP_OK;
    char c = g->s[g->pos];
    if (c == '*' || c == '+' || c == '?') {
        g->pos++;
        st = repeat(g, start, c == '+' ? 1 : 0, c == '?' ? 1 : NONE);
    } else if (c == '{') {
        size_t at = g->pos;
        g->pos++;
        skip_space(g, false);
        uint32_t min, max;
        if ((st = read_count(g, &min))) return st;
        skip_space(g, false);
        max = min;
        if (g->pos < g->len && g->s[g->pos] == ',') {
            g->pos++;
            skip_space(g, false);
            max = NONE;
            if (g->pos < g->len && g->s[g->pos] != '}' && (st = read_count(g, &max))) return st;
            skip_space(g, false);
        }
        if (g->pos >= g->len || g->s[g->pos] != '}') return fail_at(g, at, "expected '}' to close {m,n}");
        g->pos++;
        if (max != NONE && max < min) return fail_at(g, at, "{%u,%u}: the maximum is below the minimum", min, max);
        st = repeat(g, start, min, max);
    } else return WISP_OK;
    if (st) return st;
    skip_space(g, nested);
    if (g->pos < g->len && (g->s[g->pos] == '*' || g->s[g->pos] == '+' || g->s[g->pos] == '?' || g->s[g->pos] == '{'))
        return fail_at(g, g->pos, "a repetition of a repetition needs parentheses");
    return WISP_OK;
}

static wisp_status parse_alternatives(gp *g, open_rule *o, bool nested);

static wisp_status parse_sequence(gp *g, bool nested) {
    wisp_status st;
    for (;;) {
        if (g->pos >= g->len) return WISP_OK;
        char c = g->s[g->pos];
        uint32_t start = g->work_top;
        if (is_name_char(c)) {
            size_t at = g->pos;
            while (g->pos < g->len && is_name_char(g->s[g->pos])) g->pos++;
            /* a name followed by ::= starts the next rule: the sequence ended at a newline */
            size_t look = g->pos;
            while (look < g->len && (g->s[look] == ' ' || g->s[look] == '\t')) look++;
            if (look + 2 < g->len && memcmp(g->s + look, "::=", 3) == 0)
                return fail_at(g, at, "'%.*s ::=' must start a new line", (int)(g->pos - at), g->s + at);
            if ((st = push(g, ELEM(WISP_GE_REF, rule_of_name(g, at, g->pos - at))))) return st;
        } else if (c == '"') {
            if ((st = parse_literal(g))) return st;
        } else if (c == '[') {
            if ((st = parse_class(g))) return st;
        } else if (c == '.') {
            g->pos++;
            uint32_t any[2][2] = {{0, 0xD7FF}, {0xE000, 0x10FFFF}}; /* every scalar value */
            if ((st = emit_class(g, any, 2))) return st;
        } else if (c == '(') {
            size_t at = g->pos;
            if (++g->depth > MAX_NESTING) return fail_at(g, at, "parentheses nested more than %d deep", MAX_NESTING);
            g->pos++;
            skip_space(g, true);
            open_rule inner = {g->work_top, 0};
            if ((st = parse_alternatives(g, &inner, true))) return st;
            if (g->pos >= g->len || g->s[g->pos] != ')') return fail_at(g, at, "'(' without its ')'");
            g->pos++;
            g->depth--;
            uint32_t r = new_rule(g);
            close_rule(g, r, &inner);
            if ((st = push(g, ELEM(WISP_GE_REF, r)))) return st;
        } else return WISP_OK;
        if ((st = parse_postfix(g, start, nested))) return st;
    }
}

static wisp_status parse_alternatives(gp *g, open_rule *o, bool nested) {
    wisp_status st;
    for (;;) {
        if ((st = parse_sequence(g, nested))) return st;
        if ((st = push(g, ELEM(WISP_GE_END, 0)))) return st;
        o->n_alts++;
        if (g->pos < g->len && g->s[g->pos] == '|') {
            g->pos++;
            skip_space(g, true);
            continue;
        }
        return WISP_OK;
    }
}

static wisp_status parse_all(gp *g) {
    wisp_status st;
    skip_space(g, true);
    while (g->pos < g->len) {
        size_t at = g->pos;
        while (g->pos < g->len && is_name_char(g->s[g->pos])) g->pos++;
        if (g->pos == at) return fail_at(g, at, "expected a rule name");
        size_t name_len = g->pos - at;
        skip_space(g, false);
        if (g->pos + 3 > g->len || memcmp(g->s + g->pos, "::=", 3) != 0)
            return fail_at(g, g->pos, "expected '::=' after rule name '%.*s'", (int)name_len, g->s + at);
        g->pos += 3;
        skip_space(g, true);
        uint32_t id = rule_of_name(g, at, name_len);
        if (g->write) {
            if (g->def_pos[id]) return fail_at(g, at, "rule '%.*s' is defined twice", (int)name_len, g->s + at);
            g->def_pos[id] = (uint32_t)at + 1;
        }
        g->cur_rule = id;
        open_rule o = {g->work_top, 0};
        if ((st = parse_alternatives(g, &o, false))) return st;
        if (g->pos < g->len && g->s[g->pos] != '\n') {
            char c = g->s[g->pos];
            return fail_at(g, g->pos, c == ')' ? "')' without its '('" : "unexpected '%c'", c);
        }
        close_rule(g, id, &o);
        skip_space(g, true);
    }
    if (g->n_rules == 0) return wisp_fail(g->err, WISP_ERR_FORMAT, "grammar: no rules (a grammar needs at least 'root ::= ...')");
    return WISP_OK;
}

/* ---- checks on the written rules ---- */

static wisp_status check_rules(gp *g) {
    for (uint32_t r = 0; r < g->n_rules; r++)
        if (!g->def_pos[r])
            return fail_at(g, g->use_pos[r], "rule '%.*s' is used but never defined", (int)g->name_len[r],
                           g->s + g->name_off[r]);
    if (find_rule(g, "root") < 0) return wisp_fail(g->err, WISP_ERR_FORMAT, "grammar: no 'root' rule (where matching starts)");
    /* nullable rules, to a fixed point */
    memset(g->nullable, 0, sizeof(uint32_t) * g->n_rules);
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t r = 0; r < g->n_rules; r++) {
            if (g->nullable[r]) continue;
            for (uint32_t a = 0; a < g->rule_n_alts[r] && !g->nullable[r]; a++) {
                const uint32_t *e = g->elems + g->alt_start[g->rule_first_alt[r] + a];
                while (WISP_GE_KIND(*e) == WISP_GE_REF && g->nullable[WISP_GE_VALUE(*e)]) e++;
                if (WISP_GE_KIND(*e) == WISP_GE_END) g->nullable[r] = changed = true;
            }
        }
    }
    /* left recursion: a cycle of "r can start with s" (through nullable prefixes) */
    uint32_t *colour = g->dfs, *frame_rule = g->dfs + g->rule_cap, *frame_elem = g->dfs + 2 * (size_t)g->rule_cap;
    memset(colour, 0, sizeof(uint32_t) * g->n_rules);
    for (uint32_t r0 = 0; r0 < g->n_rules; r0++) {
        if (colour[r0]) continue;
        uint32_t sp = 0;
        frame_rule[0] = r0, frame_elem[0] = NONE, colour[r0] = 1;
        /* frame_elem: NONE before the first alternative; else (alt << 16 | offset) packed into
         * two numbers is awkward, so it holds the element index and the alternative is found
         * again from it; alternatives are walked in order via alt_start. */
        uint32_t *alt_of = g->work; /* per frame: the alternative being walked */
        alt_of[0] = 0;
        for (;;) {
            uint32_t r = frame_rule[sp];
            uint32_t next = NONE;
            while (alt_of[sp] < g->rule_n_alts[r]) {
                uint32_t a = g->rule_first_alt[r] + alt_of[sp];
                if (frame_elem[sp] == NONE) frame_elem[sp] = g->alt_start[a];
                uint32_t e = g->elems[frame_elem[sp]];
                if (WISP_GE_KIND(e) != WISP_GE_REF) {
                    alt_of[sp]++, frame_elem[sp] = NONE;
                    continue;
                }
                uint32_t s = WISP_GE_VALUE(e);
                if (g->nullable[s]) frame_elem[sp]++;
                else alt_of[sp]++, frame_elem[sp] = NONE;
                next = s;
                break;
            }
            if (next == NONE) {
                colour[r] = 2;
                if (sp == 0) break;
                sp--;
                continue;
            }
            if (colour[next] == 1) {
                const char *name;
                int n;
                bool generated;
                rule_label(g, next, &name, &n, &generated);
                if (generated)
                    return wisp_fail(g->err, WISP_ERR_FORMAT,
                                     "grammar: rule '%.*s' is left-recursive through a group or repetition "
                                     "(e.g. a repetition of something that can be empty)", n, name);
                return wisp_fail(g->err, WISP_ERR_FORMAT,
                                 "grammar: rule '%.*s' is left-recursive (it can reach itself without consuming "
                                 "input); rewrite it with repetition or right recursion", n, name);
            }
            if (colour[next] == 2) continue;
            sp++;
            frame_rule[sp] = next, frame_elem[sp] = NONE, alt_of[sp] = 0, colour[next] = 1;
        }
    }
    return WISP_OK;
}

/* ---- the layout both passes share ---- */

typedef wisp_layout layout;

static void *take(layout *l, size_t count, size_t elem) { return wisp_layout_take(l, count, elem, WISP_PART_GRAMMAR); }

static uint32_t pow2_at_least(uint32_t n) {
    uint32_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

/* Carves (or counts) the grammar and the parse scratch from the first pass's counts. */
/* What the counting pass found: the sizes of everything the writing pass needs. */
typedef struct pass_counts {
    uint32_t n_elems, n_alts, n_terms, n_rules, work_max;
} pass_counts;

static wisp_grammar *lay_out(layout *l, gp *g, const pass_counts *counts) {
    wisp_grammar *gr = take(l, 1, sizeof *gr);
    uint32_t rules = counts->n_rules;
    g->rule_cap = rules;
    g->name_cap = pow2_at_least(rules * 2 + 1);
    g->work_max = counts->work_max > rules ? counts->work_max : rules; /* also the left-recursion stack */
    g->elems = take(l, counts->n_elems, 4);
    g->alt_start = take(l, counts->n_alts, 4);
    g->rule_first_alt = take(l, rules, 4);
    g->rule_n_alts = take(l, rules, 4);
    g->terms = take(l, (size_t)counts->n_terms * 8, 4);
    g->work = take(l, g->work_max, 4);
    g->names = take(l, g->name_cap, 4);
    g->name_off = take(l, rules, 4);
    g->name_len = take(l, rules, 4);
    g->def_pos = take(l, rules, 4);
    g->use_pos = take(l, rules, 4);
    g->nullable = take(l, rules, 4);
    g->dfs = take(l, (size_t)rules * 3, 4);
    return gr;
}

static wisp_status count_pass(const char *text, size_t len, gp *g, wisp_error *err) {
    memset(g, 0, offsetof(gp, ranges));
    g->s = text, g->len = len, g->err = err;
    memset(g->single_term, 0xFF, sizeof g->single_term);
    if (len > 0x0FFFFFFF) return wisp_fail(err, WISP_ERR_ARG, "grammar: the text is larger than 256 MiB");
    return parse_all(g);
}

static pass_counts counts_of(const gp *g) {
    pass_counts c = {g->n_elems, g->n_alts, g->n_terms, g->n_rules, g->work_max};
    return c;
}

wisp_status wisp_grammar_plan(const char *text, size_t len, size_t *bytes, wisp_error *err) {
    gp g;
    wisp_status st = count_pass(text, len, &g, err);
    if (st) return st;
    pass_counts c = counts_of(&g);
    layout l = {.arena = NULL};
    lay_out(&l, &g, &c);
    *bytes = l.bytes;
    return WISP_OK;
}

wisp_status wisp_grammar_compile(const char *text, size_t len, wisp_arena *arena, const wisp_grammar **out,
                                 wisp_error *err) {
    gp g;
    wisp_status st = count_pass(text, len, &g, err);
    if (st) return st;
    pass_counts counts = counts_of(&g);
    layout need = {.arena = NULL};
    lay_out(&need, &g, &counts);
    size_t left = arena->size - arena->used;
    if (need.bytes > left)
        return wisp_fail(err, WISP_ERR_ARENA, "grammar: needs %zu bytes of arena, %zu are left (%zu short)", need.bytes,
                         left, need.bytes - left);
    layout l = {.arena = arena};
    memset(&g, 0, offsetof(gp, ranges));
    wisp_grammar *gr = lay_out(&l, &g, &counts);
    if (l.short_of_memory || !gr) return wisp_fail(err, WISP_ERR_INTERNAL, "grammar: the arena ran out after planning");
    g.s = text, g.len = len, g.err = err, g.write = true;
    memset(g.single_term, 0xFF, sizeof g.single_term);
    g.cur_rule = NONE;
    if ((st = parse_all(&g))) return st;
    if (g.n_elems != counts.n_elems || g.n_alts != counts.n_alts || g.n_terms != counts.n_terms)
        return wisp_fail(err, WISP_ERR_INTERNAL, "grammar: the two passes disagree");
    if ((st = check_rules(&g))) return st;
    gr->n_rules = g.n_rules, gr->n_alts = g.n_alts, gr->n_elems = g.n_elems, gr->n_terms = g.n_terms;
    gr->root = (uint32_t)find_rule(&g, "root");
    gr->rule_first_alt = g.rule_first_alt, gr->rule_n_alts = g.rule_n_alts;
    gr->alt_start = g.alt_start, gr->elems = g.elems, gr->terms = g.terms;
    *out = gr;
    return WISP_OK;
}
