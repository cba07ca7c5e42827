/* Grammar-constrained sampling: which tokens may come next.
 *
 * The vocabulary is laid out once per model as a byte trie (tokens sorted by
 * their bytes; each trie node knows where its subtree ends), so the tokens
 * a grammar state allows are found by walking the trie depth-first, taking
 * one matcher step per trie edge and skipping a whole subtree the moment its
 * first byte is refused. Tokens sharing a prefix share those steps. A subtree
 * whose every character leads each depth's state to one same state is
 * allowed without walking it (per node the trie keeps the byte groups, depth,
 * character depth and UTF-8 validity below it), and one that outruns a
 * length cap is allowed down to the cap without visiting what is refused.
 *
 * A guide (trie + matcher + mask) is a sampler stage: the sampler draws as
 * usual, asks the guide whether that token may follow (a few matcher steps),
 * and only when it may not computes the full mask and draws again among the
 * allowed tokens. When the grammar leaves exactly one way to continue, the
 * guide names the token to emit without drawing. End-of-generation tokens
 * are allowed exactly where the grammar may end. */
#ifndef WISP_GUIDE_H
#define WISP_GUIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "grammar.h"
#include "status.h"
#include "tokenizer.h"

typedef struct wisp_token_trie {
    int32_t n_vocab;
    uint32_t n_nodes, max_len;
    uint8_t *edge;         /* [n_nodes] the byte leading into each node (root: unused) */
    uint32_t *skip;        /* [n_nodes] index just past the node's subtree */
    uint32_t *tok_first;   /* [n_nodes + 1] first index into `sorted` of the tokens at or below the node
                            * (those ending at it come first); [n_nodes]: n_sorted */
    uint32_t *tok_count;   /* [n_nodes] how many tokens end at the node */
    uint32_t *below;       /* [n_nodes] byte groups (wisp_byte_group_bit) of every edge below the node:
                            * a subtree whose groups all lead a grammar state back to itself is
                            * allowed whole, without walking it; and in the top bits
                            * (WISP_TRIE_UTF8_ALL), the strict UTF-8 reading states from which every
                            * token's bytes below the node are valid UTF-8 (WISP_TRIE_UTF8_BOUNDARY:
                            * from between characters, as a string's contents are read) */
    uint8_t *height;       /* [n_nodes] how many edges the deepest token below the node adds (255: 255 or more) */
    uint8_t *char_height;  /* [n_nodes] how many characters it starts (bytes but UTF-8 continuations; 255: or more) */
    int32_t *sorted;       /* [n_vocab] token ids in byte order (tokens without bytes last) */
    uint32_t n_sorted;     /* tokens with at least one byte */
    uint8_t *bytes;        /* every token's bytes, one after another */
    uint32_t *off;         /* [n_vocab + 1] where token i's bytes are */
    int32_t eog[WISP_TOKENIZER_MAX_EOG];
    int n_eog;
    uint32_t group[256];   /* wisp_byte_group_bit of every byte, looked up instead of computed */
} wisp_token_trie;

/* The group of byte b, as one bit (24 groups at most: the top 8 bits of a trie node's
 * `below` are its UTF-8 reading states, and of a guide's `uniform`, other facts). */
#define WISP_TRIE_UTF8_BOUNDARY (1u << 24)
#define WISP_TRIE_UTF8_ALL 0xFF000000u
uint32_t wisp_byte_group_bit(uint8_t b);

/* Exact bytes wisp_token_trie_init carves (part "token_trie"). */
wisp_status wisp_token_trie_plan(const wisp_tokenizer *tok, size_t *bytes, wisp_error *err);
wisp_status wisp_token_trie_init(wisp_token_trie *t, const wisp_tokenizer *tok, wisp_arena *arena, wisp_error *err);

typedef struct wisp_guide {
    const wisp_token_trie *trie;
    wisp_matcher m;
    uint32_t *mask;        /* [(n_vocab + 31) / 32] set by wisp_guide_mask */
    /* depth-first walk: per trie depth, the state (an interned id) and where its subtree ends */
    uint32_t *walk_state, *walk_end;
    /* within one walk, states are interned (hash-consed nodes make equal states equal id sets)
     * and each (state, byte) step is computed once: in string contents the same few states
     * recur at every depth, so most trie edges cost one table lookup */
    wisp_gstate *states;   /* [max_states] */
    uint32_t *state_hash;  /* [max_states] */
    uint32_t *state_table; /* [2 x max_states] open addressing: state id + 1 */
    uint32_t *state_gen;   /* [2 x max_states] the walk that wrote each entry (older ones count as empty,
                            * so a walk starts without clearing the tables) */
    uint32_t *trans;       /* [2 x trans_cap] (state << 8 | byte) + 1, then the next state (DEAD: refused) */
    uint32_t *trans_gen;   /* [trans_cap] the walk that wrote each slot */
    uint32_t *rows;        /* [row_states x 256] the steps of the first states as direct rows:
                            * 0 unknown, DEAD refused, else next state + 1 */
    uint32_t *uniform;     /* [max_states] byte groups whose every byte leads the state to one same
                            * successor (bit 31: known); inside a string, every plain character.
                            * Bits 24, 26, 28: known whether every UTF-8 character of 2, 3, 4 bytes leads
                            * it to that successor too (the bit above each) */
    uint32_t *successor;   /* [max_states] that successor */
    uint32_t *completes;   /* [max_states] inside a character: decoder state << 28 | (the state every way to
                            * complete it leads to) + 1, 0 when they part; 0: not asked yet */
    uint32_t *taken;       /* [max_states] byte groups with a byte the state takes (set with `uniform`):
                            * a subtree whose groups are all out ends there */
    uint8_t *byte_class;   /* [256] bytes every byte set of the grammar treats alike share a class, so
                            * they step every state alike: steps are remembered per class */
    uint32_t n_classes;
    uint32_t n_states, max_states, trans_cap, row_states, walk_gen;
    /* masks of recent committed states, keyed by their sorted node ids (valid while the
     * matcher's epoch stays the same): inside a JSON string or a repeated item the same
     * state comes back token after token, and its mask is then a copy, not a walk */
    uint32_t *cache_mask;  /* [cache_slots x mask words] */
    uint32_t *cache_key;   /* [cache_slots x cache_key_max] sorted node ids */
    uint32_t *cache_info;  /* [cache_slots x 4] ids in the key (0: empty), hash, allowed, last use */
    uint32_t cache_slots, cache_key_max, cache_epoch, cache_clock;
    bool ended;            /* an end-of-generation token was accepted */
    wisp_error error;      /* why the sampler stage returned -1 */
    uint64_t n_checks, n_masks, n_forced; /* what the stage did (for statistics) */
    uint64_t n_cache_hits; /* masks copied from the cache */
    uint64_t n_bulk;       /* trie subtrees settled without matcher steps: allowed whole, or */
    uint64_t n_fitting;    /* allowed down to a depth and refused below it (inside a length-capped string) */
} wisp_guide;

/* Exact bytes wisp_guide_init carves (part "grammar"), for a compiled grammar. */
size_t wisp_guide_plan(const wisp_token_trie *t, const wisp_grammar *g, const wisp_matcher_limits *lim);
wisp_status wisp_guide_init(wisp_guide *gd, const wisp_token_trie *t, const wisp_grammar *g,
                            const wisp_matcher_limits *lim, wisp_arena *arena, wisp_error *err);
wisp_status wisp_guide_reset(wisp_guide *gd, wisp_error *err);

/* May token `id` come next? (Its bytes continue the grammar; an end token: the grammar may end.) */
bool wisp_guide_allows(wisp_guide *gd, int32_t id);
/* Set gd->mask to every token that may come next; returns how many. */
uint32_t wisp_guide_mask(wisp_guide *gd, wisp_error *err);
/* The token to emit without sampling when the grammar allows one way only, else -1. */
int32_t wisp_guide_forced(wisp_guide *gd);
/* Advance past token `id` (which must be allowed). */
wisp_status wisp_guide_accept(wisp_guide *gd, int32_t id, wisp_error *err);
/* The grammar is complete: only an end token may follow. */
bool wisp_guide_done(const wisp_guide *gd);

#endif
