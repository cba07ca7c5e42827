/* The template parser: Jinja2's grammar (same precedence, same statement
 * forms) for the subset chat templates use, into a node array sized before
 * parsing from the token count. A statement, filter or test wisp does not
 * implement is an error naming it; nothing is skipped. */
#include <string.h>

#include "template_internal.h"

#define MAX_NESTING 200 /* expression and block nesting: a hostile template cannot exhaust the stack */

typedef struct parser {
    wisp_template *t;
    tpl_lexer lx;
    tpl_tok cur, ahead; /* two tokens of lookahead: `name =` in calls, `not in`, `is not` */
    wisp_error *err;
    bool failed;
    int depth;
} parser;

static uint32_t fail(parser *p, wisp_status s, const char *fmt, const char *what, size_t n) {
    if (!p->failed) {
        char msg[200];
        wisp_format(msg, sizeof msg, fmt, (int)(n > 60 ? 60 : n), what);
        wisp_fail(p->err, s, "template line %u: %s", p->cur.line, msg);
    }
    p->failed = true;
    return 0;
}

static const char *tok_text(const parser *p, const tpl_tok *t) { return p->t->src + t->start; }

static void advance(parser *p) {
    if (p->failed) return;
    p->cur = p->ahead;
    if (p->cur.kind == TK_EOF) return;
    if (!tpl_lex_next(&p->lx, &p->ahead, p->err)) p->failed = true;
}

static bool is_op(const tpl_tok *t, const char *op) { return t->kind == TK_OP && strcmp(t->op, op) == 0; }

static bool is_name(const parser *p, const tpl_tok *t, const char *name) {
    size_t n = strlen(name);
    return t->kind == TK_NAME && t->len == n && memcmp(tok_text(p, t), name, n) == 0;
}

static bool accept_op(parser *p, const char *op) {
    if (!is_op(&p->cur, op)) return false;
    advance(p);
    return true;
}

static bool accept_name(parser *p, const char *name) {
    if (!is_name(p, &p->cur, name)) return false;
    advance(p);
    return true;
}

static void expect_op(parser *p, const char *op) {
    if (!accept_op(p, op)) fail(p, WISP_ERR_FORMAT, "expected '%.*s'", op, strlen(op));
}

static uint32_t new_node(parser *p, int kind) {
    wisp_template *t = p->t;
    if (p->failed) return 0;
    if (t->n_nodes >= t->node_cap) { /* the plan allows two nodes per token: a bug if it happens */
        wisp_fail(p->err, WISP_ERR_INTERNAL, "template parser used more nodes than planned (%u)", t->node_cap);
        p->failed = true;
        return 0;
    }
    uint32_t i = t->n_nodes++;
    memset(&t->nodes[i], 0, sizeof t->nodes[i]);
    t->nodes[i].kind = (uint8_t)kind;
    t->nodes[i].line = p->cur.line;
    return i;
}

static tpl_node *N(parser *p, uint32_t i) { return &p->t->nodes[i]; }

static void set_str_from_tok(parser *p, uint32_t node, const tpl_tok *t) {
    if (!node) return;
    N(p, node)->s = t->start;
    N(p, node)->n = t->len;
}

/* ---- literals ---- */

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void pool_put(wisp_template *t, const char *s, size_t n) {
    /* the pool is as large as the source and literals only shrink when unescaped */
    for (size_t i = 0; i < n && t->pool_len < t->pool_cap; i++) t->pool[t->pool_len++] = s[i];
}

static void pool_utf8(wisp_template *t, uint32_t cp) {
    char b[4];
    size_t n;
    if (cp < 0x80) { b[0] = (char)cp; n = 1; }
    else if (cp < 0x800) { b[0] = (char)(0xC0 | (cp >> 6)); b[1] = (char)(0x80 | (cp & 63)); n = 2; }
    else if (cp < 0x10000) { b[0] = (char)(0xE0 | (cp >> 12)); b[1] = (char)(0x80 | ((cp >> 6) & 63)); b[2] = (char)(0x80 | (cp & 63)); n = 3; }
    else { b[0] = (char)(0xF0 | (cp >> 18)); b[1] = (char)(0x80 | ((cp >> 12) & 63)); b[2] = (char)(0x80 | ((cp >> 6) & 63)); b[3] = (char)(0x80 | (cp & 63)); n = 4; }
    pool_put(t, b, n);
}

/* Python's unicode-escape decoding of a literal body (what Jinja applies),
 * appended to the pool. Unknown escapes stay as written, like Python. */
static void unescape(parser *p, const char *s, uint32_t n) {
    wisp_template *t = p->t;
    for (uint32_t i = 0; i < n; i++) {
        if (s[i] == '\r') { /* Jinja reads every line ending as \n */
            pool_put(t, "\n", 1);
            if (i + 1 < n && s[i + 1] == '\n') i++;
            continue;
        }
        if (s[i] != '\\' || i + 1 >= n) {
            pool_put(t, s + i, 1);
            continue;
        }
        char c = s[++i];
        if (c == '\r') { /* backslash-newline joins lines */
            if (i + 1 < n && s[i + 1] == '\n') i++;
            continue;
        }
        /* the eleventh, \0, maps to the terminating NUL of `to` */
        static const char from[] = "ntr\\'\"abfv0", to[] = "\n\t\r\\'\"\a\b\f\v";
        int hit = -1;
        for (int q = 0; q < (int)sizeof from - 1; q++)
            if (from[q] == c) { hit = q; break; }
        if (c == '0' && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '7') hit = -1; /* octal, below */
        if (hit >= 0) { pool_put(t, &to[hit], 1); continue; }
        if (c == '\n') continue; /* backslash-newline joins lines */
        if (c >= '0' && c <= '7') {
            uint32_t v = 0, k = 0;
            while (k < 3 && i < n && s[i] >= '0' && s[i] <= '7') v = v * 8 + (uint32_t)(s[i++] - '0'), k++;
            i--;
            pool_utf8(t, v);
            continue;
        }
        int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        if (digits) {
            uint32_t v = 0;
            int k;
            for (k = 0; k < digits && i + 1 + k < n && hexval(s[i + 1 + k]) >= 0; k++) v = v * 16 + (uint32_t)hexval(s[i + 1 + k]);
            if (k < digits || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
                fail(p, WISP_ERR_FORMAT, "bad escape '\\%.*s' in a string literal", s + i, 1);
                return;
            }
            pool_utf8(t, v);
            i += (uint32_t)digits;
            continue;
        }
        if (c == 'N') {
            fail(p, WISP_ERR_UNSUPPORTED, "escape '\\%.*s{...}' (named characters) is not supported", s + i, 1);
            return;
        }
        pool_put(t, s + i - 1, 2);
    }
}

static uint32_t parse_expr(parser *p);
static uint32_t parse_or(parser *p);
static uint32_t parse_unary(parser *p, bool with_filter);

static bool enter(parser *p) {
    if (++p->depth > MAX_NESTING) {
        fail(p, WISP_ERR_UNSUPPORTED, "nesting deeper than %.*s levels", "200", 3);
        return false;
    }
    return true;
}

/* Arguments of a call, filter or test: positional, then `name=value`. */
static uint32_t parse_args(parser *p) {
    uint32_t first = 0, last = 0;
    expect_op(p, "(");
    while (!p->failed && !is_op(&p->cur, ")")) {
        uint32_t arg;
        if (is_op(&p->cur, "*") || is_op(&p->cur, "**"))
            return fail(p, WISP_ERR_UNSUPPORTED, "'%.*s' arguments are not supported", p->cur.op, strlen(p->cur.op));
        if (p->cur.kind == TK_NAME && is_op(&p->ahead, "=")) {
            tpl_tok name = p->cur;
            advance(p);
            arg = new_node(p, N_KWARG);
            set_str_from_tok(p, arg, &name);
            advance(p);
            uint32_t v = parse_expr(p);
            if (arg) N(p, arg)->a = v;
        } else {
            arg = parse_expr(p);
        }
        if (!arg) return 0;
        if (last) N(p, last)->next = arg; else first = arg;
        last = arg;
        if (!accept_op(p, ",")) break;
    }
    expect_op(p, ")");
    return first;
}

static uint32_t parse_string(parser *p) {
    uint32_t n = new_node(p, N_STR);
    if (!n) return 0;
    N(p, n)->s = p->t->pool_len;
    N(p, n)->s_in_pool = true;
    while (!p->failed && p->cur.kind == TK_STRING) { /* adjacent literals join, as in Python */
        unescape(p, tok_text(p, &p->cur) + 1, p->cur.len - 2);
        advance(p);
    }
    N(p, n)->n = p->t->pool_len - N(p, n)->s;
    return n;
}

static uint32_t parse_sequence(parser *p, int kind, const char *close) {
    uint32_t n = new_node(p, kind), last = 0;
    advance(p);
    while (!p->failed && !is_op(&p->cur, close)) {
        uint32_t e;
        if (kind == N_DICT) {
            uint32_t key = parse_expr(p);
            e = new_node(p, N_PAIR);
            expect_op(p, ":");
            if (e) N(p, e)->a = key, N(p, e)->b = parse_expr(p);
        } else {
            e = parse_expr(p);
        }
        if (!e || !n) return 0;
        if (last) N(p, last)->next = e; else N(p, n)->a = e;
        last = e;
        if (!accept_op(p, ",")) break;
    }
    expect_op(p, close);
    return n;
}

static uint32_t parse_primary(parser *p) {
    tpl_tok t = p->cur;
    if (t.kind == TK_NAME) {
        static const char *const consts[] = {"none", "None", "true", "True", "false", "False"};
        for (int i = 0; i < 6; i++)
            if (is_name(p, &t, consts[i])) {
                uint32_t n = new_node(p, N_CONST);
                if (n) N(p, n)->i = i / 2;
                advance(p);
                return n;
            }
        uint32_t n = new_node(p, N_NAME);
        set_str_from_tok(p, n, &t);
        advance(p);
        return n;
    }
    if (t.kind == TK_STRING) return parse_string(p);
    if (t.kind == TK_INT || t.kind == TK_FLOAT) {
        uint32_t n = new_node(p, t.kind == TK_INT ? N_INT : N_FLOAT);
        const char *s = tok_text(p, &t);
        if (n && t.kind == TK_INT) {
            int64_t v = 0;
            for (uint32_t i = 0; i < t.len; i++) {
                if (v > (INT64_MAX - 9) / 10) return fail(p, WISP_ERR_UNSUPPORTED, "integer literal '%.*s' is too large", s, t.len);
                v = v * 10 + (s[i] - '0');
            }
            N(p, n)->i = v;
        } else if (n) { /* decimal literal: exact for the short literals templates use */
            double mant = 0, scale = 1;
            int exp10 = 0;
            uint32_t i = 0;
            for (; i < t.len && s[i] >= '0' && s[i] <= '9'; i++) mant = mant * 10 + (s[i] - '0');
            if (i < t.len && s[i] == '.')
                for (i++; i < t.len && s[i] >= '0' && s[i] <= '9'; i++) mant = mant * 10 + (s[i] - '0'), exp10--;
            if (i < t.len && (s[i] == 'e' || s[i] == 'E')) {
                int sign = 1, e = 0;
                i++;
                if (s[i] == '+' || s[i] == '-') sign = s[i++] == '-' ? -1 : 1;
                for (; i < t.len; i++) e = e < 10000 ? e * 10 + (s[i] - '0') : e;
                exp10 += sign * e;
            }
            for (int k = 0; k < (exp10 < 0 ? -exp10 : exp10) && k < 400; k++) scale *= 10;
            N(p, n)->f = exp10 < 0 ? mant / scale : mant * scale;
        }
        advance(p);
        return n;
    }
    if (is_op(&t, "(")) {
        advance(p);
        if (accept_op(p, ")")) return new_node(p, N_TUPLE);
        uint32_t e = parse_expr(p);
        if (is_op(&p->cur, ",")) { /* a tuple */
            uint32_t tup = new_node(p, N_TUPLE), last = e;
            if (tup) N(p, tup)->a = e;
            while (!p->failed && accept_op(p, ",") && !is_op(&p->cur, ")")) {
                uint32_t x = parse_expr(p);
                if (!x) return 0;
                N(p, last)->next = x;
                last = x;
            }
            e = tup;
        }
        expect_op(p, ")");
        return e;
    }
    if (is_op(&t, "[")) return parse_sequence(p, N_LIST, "]");
    if (is_op(&t, "{")) return parse_sequence(p, N_DICT, "}");
    if (t.kind == TK_EOF) return fail(p, WISP_ERR_FORMAT, "unexpected end of template%.*s", "", 0);
    if (t.kind == TK_VAR_END || t.kind == TK_BLOCK_END)
        return fail(p, WISP_ERR_FORMAT, "expected an expression before '%.*s'", tok_text(p, &t), t.len);
    return fail(p, WISP_ERR_FORMAT, "unexpected '%.*s'", tok_text(p, &t), t.len);
}

static uint32_t parse_postfix(parser *p, uint32_t node) {
    while (!p->failed && node) {
        if (is_op(&p->cur, ".")) {
            advance(p);
            tpl_tok t = p->cur;
            if (t.kind == TK_INT) { /* x.0 is x[0] */
                uint32_t key = new_node(p, N_INT), n = new_node(p, N_GETITEM);
                if (!n) return 0;
                N(p, key)->i = 0;
                for (uint32_t i = 0; i < t.len; i++) N(p, key)->i = N(p, key)->i * 10 + (tok_text(p, &t)[i] - '0');
                N(p, n)->a = node, N(p, n)->b = key;
                node = n;
                advance(p);
                continue;
            }
            if (t.kind != TK_NAME) return fail(p, WISP_ERR_FORMAT, "expected an attribute name after '.'%.*s", "", 0);
            uint32_t n = new_node(p, N_GETATTR);
            set_str_from_tok(p, n, &t);
            if (n) N(p, n)->a = node;
            node = n;
            advance(p);
        } else if (is_op(&p->cur, "[")) {
            advance(p);
            uint32_t start = 0, n;
            if (!is_op(&p->cur, ":")) start = parse_expr(p);
            if (accept_op(p, ":")) {
                n = new_node(p, N_SLICE);
                if (!n) return 0;
                N(p, n)->a = node, N(p, n)->b = start;
                if (!is_op(&p->cur, "]") && !is_op(&p->cur, ":")) N(p, n)->c = parse_expr(p);
                if (accept_op(p, ":") && !is_op(&p->cur, "]")) N(p, n)->d = parse_expr(p);
            } else {
                if (is_op(&p->cur, ",")) return fail(p, WISP_ERR_UNSUPPORTED, "tuple subscripts '[a, b]'%.*s are not supported", "", 0);
                n = new_node(p, N_GETITEM);
                if (n) N(p, n)->a = node, N(p, n)->b = start;
            }
            expect_op(p, "]");
            node = n;
        } else if (is_op(&p->cur, "(")) {
            uint32_t n = new_node(p, N_CALL);
            uint32_t args = parse_args(p);
            if (n) N(p, n)->a = node, N(p, n)->b = args;
            node = n;
        } else {
            break;
        }
    }
    return node;
}

/* `| filter(args)` and `is [not] test [arg]`, left to right. */
static uint32_t parse_filter_expr(parser *p, uint32_t node) {
    while (!p->failed && node) {
        if (accept_op(p, "|")) {
            tpl_tok t = p->cur;
            if (t.kind != TK_NAME) return fail(p, WISP_ERR_FORMAT, "expected a filter name after '|'%.*s", "", 0);
            int id = tpl_filter_id(tok_text(p, &t), t.len);
            if (id < 0) return fail(p, WISP_ERR_UNSUPPORTED, "filter '%.*s' is not supported", tok_text(p, &t), t.len);
            advance(p);
            if (is_op(&p->cur, ".")) return fail(p, WISP_ERR_UNSUPPORTED, "dotted filter names%.*s are not supported", "", 0);
            uint32_t n = new_node(p, N_FILTER);
            if (!n) return 0;
            N(p, n)->a = node;
            N(p, n)->i = id;
            if (is_op(&p->cur, "(")) N(p, n)->b = parse_args(p);
            node = n;
        } else if (is_name(p, &p->cur, "is")) {
            advance(p);
            bool negate = accept_name(p, "not");
            tpl_tok t = p->cur;
            if (t.kind != TK_NAME) return fail(p, WISP_ERR_FORMAT, "expected a test name after 'is'%.*s", "", 0);
            int id = tpl_test_id(tok_text(p, &t), t.len);
            if (id < 0) return fail(p, WISP_ERR_UNSUPPORTED, "test '%.*s' is not supported", tok_text(p, &t), t.len);
            advance(p);
            uint32_t n = new_node(p, N_TEST);
            if (!n) return 0;
            N(p, n)->a = node;
            N(p, n)->i = id;
            N(p, n)->op = negate;
            tpl_tok c = p->cur;
            if (is_op(&c, "(")) {
                N(p, n)->b = parse_args(p);
            } else if ((c.kind == TK_NAME || c.kind == TK_STRING || c.kind == TK_INT || c.kind == TK_FLOAT || is_op(&c, "[") ||
                        is_op(&c, "{")) && !is_name(p, &c, "else") && !is_name(p, &c, "or") && !is_name(p, &c, "and")) {
                /* Jinja's one-argument form: `is divisibleby 3`, `is equalto x` */
                if (is_name(p, &c, "is")) return fail(p, WISP_ERR_FORMAT, "'is' cannot follow a test%.*s", "", 0);
                N(p, n)->b = parse_postfix(p, parse_primary(p));
            }
            node = n;
        } else if (is_op(&p->cur, "(")) {
            uint32_t n = new_node(p, N_CALL);
            uint32_t args = parse_args(p);
            if (n) N(p, n)->a = node, N(p, n)->b = args;
            node = n;
        } else {
            break;
        }
    }
    return node;
}

static uint32_t parse_unary(parser *p, bool with_filter) {
    uint32_t node;
    if (!enter(p)) return 0;
    if (is_op(&p->cur, "-") || is_op(&p->cur, "+")) {
        uint32_t n = new_node(p, N_UNARY);
        char op = p->cur.op[0];
        advance(p);
        uint32_t a = parse_unary(p, false);
        if (n) N(p, n)->op = (uint8_t)op, N(p, n)->a = a;
        node = n;
    } else {
        node = parse_primary(p);
    }
    node = parse_postfix(p, node);
    if (with_filter) node = parse_filter_expr(p, node);
    p->depth--;
    return node;
}

static uint32_t binop(parser *p, int kind, int op, uint32_t a, uint32_t b) {
    uint32_t n = new_node(p, kind);
    if (n) N(p, n)->op = (uint8_t)op, N(p, n)->a = a, N(p, n)->b = b;
    return n;
}

static uint32_t parse_pow(parser *p) {
    uint32_t a = parse_unary(p, true);
    while (!p->failed && accept_op(p, "**")) a = binop(p, N_BINOP, OP_POW, a, parse_unary(p, true));
    return a;
}

static uint32_t parse_math2(parser *p) {
    uint32_t a = parse_pow(p);
    for (;;) {
        int op = is_op(&p->cur, "*") ? OP_MUL : is_op(&p->cur, "/") ? OP_DIV : is_op(&p->cur, "//") ? OP_FLOORDIV
                 : is_op(&p->cur, "%") ? OP_MOD : 0;
        if (!op || p->failed) return a;
        advance(p);
        a = binop(p, N_BINOP, op, a, parse_pow(p));
    }
}

static uint32_t parse_concat(parser *p) {
    uint32_t a = parse_math2(p);
    while (!p->failed && accept_op(p, "~")) a = binop(p, N_BINOP, OP_CONCAT, a, parse_math2(p));
    return a;
}

static uint32_t parse_math1(parser *p) {
    uint32_t a = parse_concat(p);
    for (;;) {
        int op = is_op(&p->cur, "+") ? OP_ADD : is_op(&p->cur, "-") ? OP_SUB : 0;
        if (!op || p->failed) return a;
        advance(p);
        a = binop(p, N_BINOP, op, a, parse_concat(p));
    }
}

static int compare_op(parser *p) {
    static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">="};
    for (int i = 0; i < 6; i++)
        if (is_op(&p->cur, ops[i])) return OP_EQ + i;
    if (is_name(p, &p->cur, "in")) return OP_IN;
    if (is_name(p, &p->cur, "not") && is_name(p, &p->ahead, "in")) return OP_NOT_IN;
    return 0;
}

static uint32_t parse_compare(parser *p) {
    uint32_t a = parse_math1(p), result = 0;
    int op;
    while (!p->failed && (op = compare_op(p)) != 0) {
        advance(p);
        if (op == OP_NOT_IN) advance(p);
        uint32_t b = parse_math1(p);
        uint32_t cmp = binop(p, N_COMPARE, op, a, b);
        result = result ? binop(p, N_AND, 0, result, cmp) : cmp; /* a < b < c is a < b and b < c */
        a = b;
    }
    return result ? result : a;
}

static uint32_t parse_not(parser *p) {
    if (is_name(p, &p->cur, "not")) {
        if (!enter(p)) return 0;
        uint32_t n = new_node(p, N_NOT);
        advance(p);
        uint32_t a = parse_not(p);
        if (n) N(p, n)->a = a;
        p->depth--;
        return n;
    }
    return parse_compare(p);
}

static uint32_t parse_and(parser *p) {
    uint32_t a = parse_not(p);
    while (!p->failed && accept_name(p, "and")) a = binop(p, N_AND, 0, a, parse_not(p));
    return a;
}

static uint32_t parse_or(parser *p) {
    uint32_t a = parse_and(p);
    while (!p->failed && accept_name(p, "or")) a = binop(p, N_OR, 0, a, parse_and(p));
    return a;
}

static uint32_t parse_expr(parser *p) {
    if (!enter(p)) return 0;
    uint32_t a = parse_or(p);
    while (!p->failed && is_name(p, &p->cur, "if")) {
        uint32_t n = new_node(p, N_COND);
        advance(p);
        uint32_t cond = parse_or(p), other = 0;
        if (accept_name(p, "else")) other = parse_expr(p);
        if (n) N(p, n)->a = a, N(p, n)->b = cond, N(p, n)->c = other;
        a = n;
    }
    p->depth--;
    return a;
}

/* `a` or `a, b` (a tuple without parentheses) */
static uint32_t parse_tuple(parser *p) {
    uint32_t e = parse_expr(p);
    if (!is_op(&p->cur, ",")) return e;
    uint32_t tup = new_node(p, N_TUPLE), last = e;
    if (tup) N(p, tup)->a = e;
    while (!p->failed && accept_op(p, ",")) {
        if (p->cur.kind == TK_VAR_END || p->cur.kind == TK_BLOCK_END) break;
        uint32_t x = parse_expr(p);
        if (!x) return 0;
        N(p, last)->next = x;
        last = x;
    }
    return tup;
}

/* ---- statements ---- */

static void expect_block_end(parser *p) {
    if (p->failed) return;
    if (p->cur.kind != TK_BLOCK_END) {
        fail(p, WISP_ERR_FORMAT, "expected '%%}' but found '%.*s'", tok_text(p, &p->cur), p->cur.len);
        return;
    }
    advance(p);
}

/* Statements until `{% word %}` for one of the (NULL-terminated) words;
 * stops with cur on that word. Reaching the end is an error when words exist. */
static uint32_t parse_body(parser *p, const char *const *ends, const char *opened);

static uint32_t name_node(parser *p) {
    if (p->cur.kind != TK_NAME) return fail(p, WISP_ERR_FORMAT, "expected a name but found '%.*s'", tok_text(p, &p->cur), p->cur.len);
    uint32_t n = new_node(p, N_NAME);
    set_str_from_tok(p, n, &p->cur);
    advance(p);
    return n;
}

static uint32_t parse_if(parser *p) {
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    uint32_t n = new_node(p, N_IF);
    advance(p); /* if / elif */
    uint32_t cond = parse_expr(p);
    expect_block_end(p);
    uint32_t body = parse_body(p, ends, "if");
    if (!n || p->failed) return 0;
    N(p, n)->a = cond, N(p, n)->b = body;
    if (is_name(p, &p->cur, "elif")) {
        N(p, n)->c = parse_if(p); /* consumes through endif */
        return n;
    }
    if (accept_name(p, "else")) {
        expect_block_end(p);
        static const char *const endif[] = {"endif", NULL};
        N(p, n)->c = parse_body(p, endif, "if");
    }
    accept_name(p, "endif");
    expect_block_end(p);
    return n;
}

static uint32_t parse_for(parser *p) {
    static const char *const ends[] = {"else", "endfor", NULL};
    uint32_t n = new_node(p, N_FOR);
    advance(p);
    uint32_t first = name_node(p), last = first;
    while (!p->failed && accept_op(p, ",")) {
        uint32_t x = name_node(p);
        if (x) N(p, last)->next = x, last = x;
    }
    if (!accept_name(p, "in")) return fail(p, WISP_ERR_FORMAT, "expected 'in' in a for loop%.*s", "", 0);
    uint32_t iter = parse_or(p), filter = 0; /* no conditional: `if` after it filters */
    if (accept_name(p, "if")) filter = parse_expr(p);
    if (is_name(p, &p->cur, "recursive")) return fail(p, WISP_ERR_UNSUPPORTED, "recursive for loops%.*s are not supported", "", 0);
    expect_block_end(p);
    uint32_t body = parse_body(p, ends, "for"), other = 0;
    if (accept_name(p, "else")) {
        expect_block_end(p);
        static const char *const endfor[] = {"endfor", NULL};
        other = parse_body(p, endfor, "for");
    }
    accept_name(p, "endfor");
    expect_block_end(p);
    if (!n || p->failed) return 0;
    tpl_node *f = N(p, n);
    f->a = first, f->b = iter, f->c = body, f->d = other, f->e = filter;
    return n;
}

static uint32_t parse_set(parser *p) {
    uint32_t n = new_node(p, N_SET);
    advance(p);
    uint32_t target = name_node(p);
    if (!p->failed && is_op(&p->cur, ".")) { /* ns.attr = value */
        advance(p);
        uint32_t attr = new_node(p, N_GETATTR);
        if (p->cur.kind != TK_NAME) return fail(p, WISP_ERR_FORMAT, "expected an attribute name after '.'%.*s", "", 0);
        set_str_from_tok(p, attr, &p->cur);
        advance(p);
        if (attr) N(p, attr)->a = target;
        target = attr;
    } else if (!p->failed && is_op(&p->cur, ",")) { /* a, b = pair */
        uint32_t tup = new_node(p, N_TUPLE), last = target;
        if (tup) N(p, tup)->a = target;
        while (!p->failed && accept_op(p, ",")) {
            uint32_t x = name_node(p);
            if (x) N(p, last)->next = x, last = x;
        }
        target = tup;
    }
    if (p->failed || !n) return 0;
    if (accept_op(p, "=")) {
        N(p, n)->a = target;
        N(p, n)->b = parse_tuple(p);
        expect_block_end(p);
        return n;
    }
    if (N(p, target)->kind != N_NAME) return fail(p, WISP_ERR_FORMAT, "expected '=' in set%.*s", "", 0);
    if (is_op(&p->cur, "|")) return fail(p, WISP_ERR_UNSUPPORTED, "filtered block set '{%% set x | filter %%}'%.*s is not supported", "", 0);
    expect_block_end(p);
    static const char *const ends[] = {"endset", NULL};
    N(p, n)->kind = N_SET_BLOCK;
    N(p, n)->a = target;
    N(p, n)->b = parse_body(p, ends, "set");
    accept_name(p, "endset");
    expect_block_end(p);
    return n;
}

static uint32_t parse_macro(parser *p) {
    uint32_t n = new_node(p, N_MACRO);
    advance(p);
    if (p->cur.kind != TK_NAME) return fail(p, WISP_ERR_FORMAT, "expected a macro name%.*s", "", 0);
    set_str_from_tok(p, n, &p->cur);
    advance(p);
    expect_op(p, "(");
    uint32_t first = 0, last = 0;
    while (!p->failed && !is_op(&p->cur, ")")) {
        uint32_t param = name_node(p);
        if (param && accept_op(p, "=")) {
            N(p, param)->kind = N_KWARG;
            N(p, param)->a = parse_expr(p);
        }
        if (!param) return 0;
        if (last) N(p, last)->next = param; else first = param;
        last = param;
        if (!accept_op(p, ",")) break;
    }
    expect_op(p, ")");
    expect_block_end(p);
    static const char *const ends[] = {"endmacro", NULL};
    uint32_t body = parse_body(p, ends, "macro");
    accept_name(p, "endmacro");
    expect_block_end(p);
    if (!n || p->failed) return 0;
    N(p, n)->a = first, N(p, n)->b = body;
    return n;
}

static uint32_t parse_statement(parser *p) {
    advance(p); /* {% */
    tpl_tok t = p->cur;
    if (t.kind != TK_NAME) return fail(p, WISP_ERR_FORMAT, "expected a statement name after '{%%' but found '%.*s'", tok_text(p, &t), t.len);
    if (is_name(p, &t, "if")) return parse_if(p);
    if (is_name(p, &t, "for")) return parse_for(p);
    if (is_name(p, &t, "set")) return parse_set(p);
    if (is_name(p, &t, "macro")) return parse_macro(p);
    if (is_name(p, &t, "break") || is_name(p, &t, "continue")) {
        uint32_t n = new_node(p, is_name(p, &t, "break") ? N_BREAK : N_CONTINUE);
        advance(p);
        expect_block_end(p);
        return n;
    }
    if (is_name(p, &t, "generation")) { /* Hugging Face's assistant-mask marker: renders its body */
        advance(p);
        expect_block_end(p);
        static const char *const ends[] = {"endgeneration", NULL};
        uint32_t body = parse_body(p, ends, "generation");
        accept_name(p, "endgeneration");
        expect_block_end(p);
        return body;
    }
    static const char *const enders[] = {"endif", "endfor", "elif", "else", "endset", "endmacro", "endgeneration"};
    for (int i = 0; i < 7; i++)
        if (is_name(p, &t, enders[i])) return fail(p, WISP_ERR_FORMAT, "unexpected '%.*s'", tok_text(p, &t), t.len);
    return fail(p, WISP_ERR_UNSUPPORTED, "statement '%.*s' is not supported", tok_text(p, &t), t.len);
}

static uint32_t parse_body(parser *p, const char *const *ends, const char *opened) {
    uint32_t body = new_node(p, N_BODY), last = 0;
    if (!enter(p)) return 0;
    while (!p->failed) {
        uint32_t st = 0;
        if (p->cur.kind == TK_EOF) {
            if (ends && ends[0]) return fail(p, WISP_ERR_FORMAT, "'%.*s' block is never closed", opened, strlen(opened));
            break;
        }
        if (p->cur.kind == TK_BLOCK_BEGIN && ends) {
            bool end = false;
            for (const char *const *e = ends; *e; e++) end |= is_name(p, &p->ahead, *e);
            if (end) {
                advance(p);
                break;
            }
        }
        if (p->cur.kind == TK_TEXT) {
            st = new_node(p, N_TEXT);
            set_str_from_tok(p, st, &p->cur);
            advance(p);
        } else if (p->cur.kind == TK_VAR_BEGIN) {
            st = new_node(p, N_OUTPUT);
            advance(p);
            uint32_t e = parse_tuple(p);
            if (st) N(p, st)->a = e;
            if (!p->failed && p->cur.kind != TK_VAR_END)
                return fail(p, WISP_ERR_FORMAT, "expected '}}' but found '%.*s'", tok_text(p, &p->cur), p->cur.len);
            advance(p);
        } else if (p->cur.kind == TK_BLOCK_BEGIN) {
            st = parse_statement(p);
        } else {
            return fail(p, WISP_ERR_FORMAT, "unexpected '%.*s'", tok_text(p, &p->cur), p->cur.len);
        }
        if (!st || !body) break;
        if (last) N(p, last)->next = st; else N(p, body)->a = st;
        last = st;
    }
    p->depth--;
    return p->failed ? 0 : body;
}

wisp_status tpl_parse(wisp_template *t, wisp_error *err) {
    parser p;
    memset(&p, 0, sizeof p);
    p.t = t;
    p.err = err;
    t->n_nodes = 1; /* node 0 means "none" */
    tpl_lex_init(&p.lx, t->src, t->src_len);
    if (!tpl_lex_next(&p.lx, &p.ahead, err)) return err ? err->status : WISP_ERR_FORMAT;
    advance(&p);
    t->root = parse_body(&p, NULL, "");
    if (p.failed || !t->root) return err && err->status ? err->status : WISP_ERR_FORMAT;
    return WISP_OK;
}

/* ---- names of filters and tests ---- */

static int lookup(const char *const *names, const int *ids, int count, const char *s, size_t n) {
    for (int i = 0; i < count; i++)
        if (strlen(names[i]) == n && memcmp(names[i], s, n) == 0) return ids[i];
    return -1;
}

int tpl_filter_id(const char *s, size_t n) {
    static const char *const names[] = {"trim", "tojson", "length", "count", "list", "selectattr", "rejectattr",
                                        "first", "last", "join", "upper", "lower", "default", "d", "string", "int",
                                        "float", "reverse", "replace", "capitalize", "title", "safe", "items", "map",
                                        "abs", "escape", "e"};
    static const int ids[] = {F_TRIM, F_TOJSON, F_LENGTH, F_LENGTH, F_LIST, F_SELECTATTR, F_REJECTATTR, F_FIRST,
                              F_LAST, F_JOIN, F_UPPER, F_LOWER, F_DEFAULT, F_DEFAULT, F_STRING, F_INT, F_FLOAT,
                              F_REVERSE, F_REPLACE, F_CAPITALIZE, F_TITLE, F_SAFE, F_ITEMS, F_MAP, F_ABS, F_ESCAPE,
                              F_ESCAPE};
    return lookup(names, ids, (int)(sizeof ids / sizeof ids[0]), s, n);
}

int tpl_test_id(const char *s, size_t n) {
    static const char *const names[] = {"defined", "undefined", "none", "string", "number", "integer", "float",
                                        "boolean", "true", "false", "mapping", "iterable", "sequence", "odd", "even",
                                        "divisibleby", "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le",
                                        "<=", "gt", "greaterthan", ">", "ge", ">=", "in", "lower", "upper", "callable"};
    static const int ids[] = {T_DEFINED, T_UNDEFINED, T_NONE, T_STRING, T_NUMBER, T_INTEGER, T_FLOAT, T_BOOLEAN,
                              T_TRUE, T_FALSE, T_MAPPING, T_ITERABLE, T_SEQUENCE, T_ODD, T_EVEN, T_DIVISIBLEBY, T_EQ,
                              T_EQ, T_EQ, T_NE, T_NE, T_LT, T_LT, T_LT, T_LE, T_LE, T_GT, T_GT, T_GT, T_GE, T_GE, T_IN,
                              T_LOWER, T_UPPER, T_CALLABLE};
    return lookup(names, ids, (int)(sizeof ids / sizeof ids[0]), s, n);
}
