/* Shared between the template lexer, parser, values and renderer. */
#ifndef WISP_TEMPLATE_INTERNAL_H
#define WISP_TEMPLATE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "template.h"

/* ---- tokens ---- */
typedef enum tpl_tok_kind {
    TK_EOF,
    TK_TEXT,        /* template data between tags (whitespace control already applied) */
    TK_VAR_BEGIN,   /* {{ */
    TK_VAR_END,     /* }} */
    TK_BLOCK_BEGIN, /* {% */
    TK_BLOCK_END,   /* %} */
    TK_NAME,
    TK_STRING,      /* the literal with its quotes; escapes resolved by the parser */
    TK_INT,
    TK_FLOAT,
    TK_OP           /* operator or punctuation; `op` holds up to two characters */
} tpl_tok_kind;

typedef struct tpl_tok {
    uint8_t kind;
    char op[3];
    uint32_t start, len; /* bytes in the source */
    uint32_t line;
} tpl_tok;

/* Whitespace control needs to remember how the previous tag ended. */
typedef struct tpl_lexer {
    const char *src;
    uint32_t len, pos, line;
    bool in_tag;        /* between a begin and its end */
    uint8_t tag_kind;   /* TK_VAR_BEGIN or TK_BLOCK_BEGIN while in_tag */
    bool line_starting; /* the previous match ended a line (Jinja's lstrip rule) */
    int paren_depth;    /* brackets open in this tag: `}}` inside a dict literal is not the end */
} tpl_lexer;

void tpl_lex_init(tpl_lexer *lx, const char *src, uint32_t len);
/* Next token; false with a message in err on a malformed tag. */
bool tpl_lex_next(tpl_lexer *lx, tpl_tok *tok, wisp_error *err);

/* ---- syntax tree ---- */
typedef enum tpl_node_kind {
    N_NONE,
    /* statements */
    N_BODY,     /* a = first statement */
    N_TEXT,     /* s,n = data */
    N_OUTPUT,   /* a = expression */
    N_IF,       /* a = condition, b = body, c = else body (N_BODY or an N_IF for elif) */
    N_FOR,      /* a = first target name (linked by next), b = iterable, c = body, d = else body, e = filter */
    N_SET,      /* a = target (N_NAME, N_TUPLE of names, or N_GETATTR of a name), b = value */
    N_SET_BLOCK,/* a = target name, b = body */
    N_MACRO,    /* s,n = name, a = first parameter (N_NAME, or N_KWARG with a default), b = body */
    N_BREAK,
    N_CONTINUE,
    /* expressions */
    N_STR,      /* s,n = unescaped bytes (in the string pool) */
    N_INT,      /* i */
    N_FLOAT,    /* f */
    N_CONST,    /* i = 0 none, 1 true, 2 false */
    N_NAME,     /* s,n */
    N_LIST,     /* a = first element */
    N_TUPLE,    /* a = first element */
    N_DICT,     /* a = first N_PAIR (a = key, b = value) */
    N_PAIR,
    N_GETATTR,  /* a = object, s,n = attribute */
    N_GETITEM,  /* a = object, b = key */
    N_SLICE,    /* a = object, b = start, c = stop, d = step (0 when absent) */
    N_CALL,     /* a = callee, b = first argument (N_KWARG: s,n = name, a = value) */
    N_KWARG,
    N_FILTER,   /* a = value, i = filter id, b = first argument */
    N_TEST,     /* a = value, i = test id, b = first argument, op = 1 when negated */
    N_BINOP,    /* op, a, b */
    N_COMPARE,  /* op, a, b (chains are nested N_AND of pairwise compares on shared nodes) */
    N_UNARY,    /* op ('-' or '+'), a */
    N_NOT,      /* a */
    N_AND,      /* a, b */
    N_OR,       /* a, b */
    N_COND      /* a = value, b = condition, c = else value (0: undefined) */
} tpl_node_kind;

/* Binary and comparison operators. */
enum { OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT,
       OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOT_IN };

typedef struct tpl_node {
    uint8_t kind, op;
    uint32_t line;
    uint32_t a, b, c, d, e; /* children (node indices; 0 = none) */
    uint32_t next;          /* next sibling in a list */
    uint32_t s, n;          /* a string: offset and length in the source or the pool */
    bool s_in_pool;
    int64_t i;
    double f;
} tpl_node;

/* ---- filters and tests, resolved by name at parse time ---- */
typedef enum tpl_filter {
    F_TRIM, F_TOJSON, F_LENGTH, F_LIST, F_SELECTATTR, F_REJECTATTR, F_FIRST, F_LAST, F_JOIN, F_UPPER, F_LOWER,
    F_DEFAULT, F_STRING, F_INT, F_FLOAT, F_REVERSE, F_REPLACE, F_CAPITALIZE, F_TITLE, F_SAFE, F_ITEMS, F_MAP,
    F_ABS, F_ESCAPE, F_COUNT
} tpl_filter;

typedef enum tpl_test {
    T_DEFINED, T_UNDEFINED, T_NONE, T_STRING, T_NUMBER, T_INTEGER, T_FLOAT, T_BOOLEAN, T_TRUE, T_FALSE,
    T_MAPPING, T_ITERABLE, T_SEQUENCE, T_ODD, T_EVEN, T_DIVISIBLEBY, T_EQ, T_NE, T_LT, T_LE, T_GT, T_GE, T_IN,
    T_LOWER, T_UPPER, T_CALLABLE, T_COUNT
} tpl_test;

int tpl_filter_id(const char *s, size_t n); /* -1 when wisp does not implement it */
int tpl_test_id(const char *s, size_t n);

/* ---- the template object ---- */
struct wisp_template {
    char *src;        /* the source (its last line ending dropped, as Jinja does) */
    uint32_t src_len;
    char *pool;       /* unescaped string literals */
    uint32_t pool_len, pool_cap;
    tpl_node *nodes;
    uint32_t n_nodes, node_cap;
    uint32_t root;
    /* rendering */
    struct tpl_var *vars;
    uint32_t var_cap;
    uint8_t *heap;
    size_t heap_cap;
    struct tpl_seg *segs; /* message text inside heap strings */
    uint32_t seg_cap;
    wisp_template_limits lim;
};

/* Parse t->src into t->nodes (sized from a token count). */
wisp_status tpl_parse(wisp_template *t, wisp_error *err);
/* Tokens in the source: the parser makes at most one node per token plus the root. */
wisp_status tpl_count_tokens(const char *src, uint32_t len, uint32_t *count, wisp_error *err);

static inline const char *tpl_node_str(const wisp_template *t, const tpl_node *n) {
    return (n->s_in_pool ? t->pool : t->src) + n->s;
}

#endif
