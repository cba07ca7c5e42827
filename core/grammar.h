/* Grammars in llama.cpp's GBNF syntax, compiled to byte-level rules, and a
 * matcher that follows them one byte at a time.
 *
 * Compilation turns every character class and literal into rules over BYTES
 * (a class of code points becomes alternatives of UTF-8 byte-range
 * sequences), so the matcher never decodes UTF-8 and a token's bytes can end
 * in the middle of a character. Repetitions become right-recursive helper
 * rules. Everything lives in a caller arena: wisp_grammar_plan reports the
 * exact bytes wisp_grammar_compile carves (part "grammar").
 *
 * The matcher is a pushdown recognizer over a SET of stacks: each stack is a
 * chain of positions (what to match next, then where to return). Stacks are
 * hash-consed nodes, so equal stacks are one node and a state is a small set
 * of node ids; a work list expands rule references, nullable rules and
 * repetitions once per (position, return stack) per byte, so ambiguity never
 * multiplies the work. Left recursion, which would make that expansion loop,
 * is refused at compile time naming the rule. */
#ifndef WISP_GRAMMAR_H
#define WISP_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "status.h"

/* A compiled element: kind in the top 4 bits, a value below. */
enum { WISP_GE_TERM = 1, /* value: index of a 256-bit byte set */
       WISP_GE_REF = 2,  /* value: rule id */
       WISP_GE_END = 3   /* end of an alternative */ };
/* Characters and ranges one character class may hold (the JSON Schema
 * compiler refuses a pattern whose class would exceed it). */
#define WISP_GRAMMAR_MAX_CLASS_RANGES 128

#define WISP_GE_KIND(e) ((e) >> 28)
#define WISP_GE_VALUE(e) ((e)&0x0FFFFFFFu)

typedef struct wisp_grammar {
    uint32_t n_rules, n_alts, n_elems, n_terms;
    uint32_t root;
    const uint32_t *rule_first_alt; /* [n_rules] */
    const uint32_t *rule_n_alts;    /* [n_rules] */
    const uint32_t *alt_start;      /* [n_alts] element index where each alternative starts */
    const uint32_t *elems;          /* [n_elems] */
    const uint32_t *terms;          /* [n_terms * 8] byte sets, bit b of word b/32 */
} wisp_grammar;

/* Exact arena bytes wisp_grammar_compile will carve for `text` (syntax
 * errors are reported here already, with line:column). */
wisp_status wisp_grammar_plan(const char *text, size_t len, size_t *bytes, wisp_error *err);

/* Parse and check `text` (undefined rules, a missing root, left recursion:
 * errors naming the rule) and carve the compiled grammar from `arena`. */
wisp_status wisp_grammar_compile(const char *text, size_t len, wisp_arena *arena, const wisp_grammar **out,
                                 wisp_error *err);

/* ---- matcher ---- */

typedef struct wisp_matcher_limits {
    uint32_t max_stacks; /* stacks one state may hold (alternatives alive at once) */
    uint32_t max_nodes;  /* stack nodes alive at once (each pool of two) */
    uint32_t max_work;   /* expansions per byte, and node ids of the states held at once */
    /* the guide's mask walk (guide.h); 0: the default. Small values fit a microcontroller */
    uint32_t walk_states; /* distinct states one walk may meet */
    uint32_t walk_steps;  /* (state, byte) steps one walk remembers (a power of two) */
} wisp_matcher_limits;

wisp_matcher_limits wisp_matcher_limits_default(void);

/* A node of a stack: the position to match next, and the stack below. */
typedef struct wisp_gnode {
    uint32_t pos, parent;
} wisp_gnode;

/* A state: `n` node ids at `ids` (0 = the empty stack: the grammar may end). */
typedef struct wisp_gstate {
    uint32_t off, n;
} wisp_gstate;

typedef struct wisp_matcher {
    const wisp_grammar *g;
    wisp_matcher_limits lim;
    wisp_gnode *nodes;     /* [max_nodes] hash-consed; node 0 is the empty stack */
    wisp_gnode *spare;     /* [max_nodes] the other pool, for compaction */
    uint32_t n_nodes;
    uint32_t *table;       /* [table_cap] open addressing: node id, 0 = empty */
    uint32_t table_cap;
    uint32_t *visit;       /* [max_nodes] stamp of the last step that expanded a node */
    uint32_t *remap;       /* [max_nodes] old id -> new id during compaction */
    uint32_t stamp;
    uint32_t *sets;        /* node ids of states, stacked one after another */
    uint32_t sets_cap, sets_top;
    uint32_t *work;        /* [max_work] nodes waiting to be expanded */
    wisp_gstate cur;       /* the committed state: what the text so far allows */
    uint32_t epoch;        /* bumped when node ids are renumbered (reset, compaction): ids of
                            * earlier states mean nothing after it */
    wisp_status failed;    /* sticky: a limit was hit (fail_msg says which) */
    char fail_msg[96];
} wisp_matcher;

/* Exact arena bytes wisp_matcher_init will carve. */
size_t wisp_matcher_plan(const wisp_grammar *g, const wisp_matcher_limits *lim);
wisp_status wisp_matcher_init(wisp_matcher *m, const wisp_grammar *g, const wisp_matcher_limits *lim,
                              wisp_arena *arena, wisp_error *err);
/* Back to the start of the grammar. */
wisp_status wisp_matcher_reset(wisp_matcher *m, wisp_error *err);

/* Advance the committed state by `n` bytes. WISP_OK: all accepted. Rejection
 * is WISP_ERR_FORMAT with *accepted = how many bytes were accepted (the state
 * has taken those); a limit is WISP_ERR_CAPACITY. */
wisp_status wisp_matcher_accept(wisp_matcher *m, const uint8_t *bytes, size_t n, size_t *accepted, wisp_error *err);

/* True when the text so far is a whole sentence of the grammar. */
bool wisp_matcher_can_end(const wisp_matcher *m);
/* True when no byte can follow (only the end is possible). */
bool wisp_matcher_is_final(const wisp_matcher *m);

/* Lower-level steps, for the token trie: advance state `from` by one byte
 * into a new state pushed on the set stack (n = 0: the byte is rejected).
 * The caller pops with wisp_matcher_truncate(m, sets_top, n_nodes). */
wisp_status wisp_matcher_step(wisp_matcher *m, wisp_gstate from, uint8_t byte, wisp_gstate *to);
void wisp_matcher_truncate(wisp_matcher *m, uint32_t sets_top, uint32_t n_nodes);
/* Union of the bytes state `s` can take next (32 bytes). */
void wisp_matcher_next_bytes(const wisp_matcher *m, wisp_gstate s, uint8_t set[32]);
/* Make `s` the committed state (compacting the pools when more than half full). */
wisp_status wisp_matcher_commit(wisp_matcher *m, wisp_gstate s, wisp_error *err);

#endif
