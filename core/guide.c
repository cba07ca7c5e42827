/* Which tokens a grammar allows next (see guide.h). */
#include <string.h>

#include "guide.h"
#include "unicode.h"

#define FORCED_MAX 64 /* bytes looked ahead for a forced continuation */
#define MAX_STATES 8192 /* distinct states one mask walk may meet */
#define TRANS_CAP 65536 /* (state, byte) steps remembered in one walk (a power of two) */
#define DEAD 0xFFFFFFFFu
#define ROW_STATES 64 /* states whose steps are kept as direct 256-entry rows */
#define CHARS_MIN 64 /* trie subtrees of fewer nodes (or entered by a plain byte) do not pay for a state's first
                      * character check: it costs dozens of matcher steps */
#define BULK_MIN 4     /* trie subtrees of this many nodes or fewer are walked without asking whether they are whole */
#define CACHE_SLOTS 16   /* masks remembered (least recently used is evicted) */
#define CACHE_KEY_MAX 32 /* states with more stacks than this are not cached */

static size_t mask_words(const wisp_token_trie *t) { return ((size_t)t->n_vocab + 31) / 32; }

/* The guide's own arrays, after the matcher's, from one list (plan and init agree). */
/* rounded down to a power of two: both hash tables are indexed by masking */
static uint32_t pow2_below(uint32_t want) {
    uint32_t p = 16;
    while (p * 2 <= want && p < (1u << 26)) p *= 2;
    return p;
}
static uint32_t walk_states(const wisp_matcher_limits *lim) { return pow2_below(lim->walk_states ? lim->walk_states : MAX_STATES); }
static uint32_t walk_steps(const wisp_matcher_limits *lim) { return pow2_below(lim->walk_steps ? lim->walk_steps : TRANS_CAP); }
/* Direct rows cost 1 KB a state: as many as one per 1024 remembered steps (the
 * default limits get ROW_STATES; a microcontroller's small limits, one or two). */
static uint32_t row_states(const wisp_matcher_limits *lim) {
    uint32_t n = walk_steps(lim) / 1024, states = walk_states(lim);
    if (n > states) n = states;
    return n < ROW_STATES ? n : ROW_STATES;
}

static size_t guide_arrays(const wisp_token_trie *t, const wisp_matcher_limits *lim, wisp_guide *gd, wisp_arena *arena) {
    size_t n_states = walk_states(lim), n_steps = walk_steps(lim);
    size_t depth = (size_t)t->max_len + 2;
    struct { void **dest; size_t bytes; } parts[] = {
        {(void **)(gd ? &gd->mask : NULL), mask_words(t) * 4},
        {(void **)(gd ? &gd->walk_state : NULL), depth * 4},
        {(void **)(gd ? &gd->walk_end : NULL), depth * 4},
        {(void **)(gd ? &gd->states : NULL), n_states * sizeof(wisp_gstate)},
        {(void **)(gd ? &gd->state_hash : NULL), n_states * 4},
        {(void **)(gd ? &gd->state_table : NULL), 2 * n_states * 4},
        {(void **)(gd ? &gd->state_gen : NULL), 2 * n_states * 4},
        {(void **)(gd ? &gd->trans : NULL), 2 * n_steps * 4},
        {(void **)(gd ? &gd->trans_gen : NULL), n_steps * 4},
        {(void **)(gd ? &gd->rows : NULL), row_states(lim) * 256 * 4},
        {(void **)(gd ? &gd->byte_class : NULL), 256},
        {(void **)(gd ? &gd->uniform : NULL), n_states * 4},
        {(void **)(gd ? &gd->successor : NULL), n_states * 4},
        {(void **)(gd ? &gd->taken : NULL), n_states * 4},
        {(void **)(gd ? &gd->completes : NULL), n_states * 4},
        {(void **)(gd ? &gd->cache_mask : NULL), CACHE_SLOTS * mask_words(t) * 4},
        {(void **)(gd ? &gd->cache_key : NULL), CACHE_SLOTS * CACHE_KEY_MAX * 4},
        {(void **)(gd ? &gd->cache_info : NULL), CACHE_SLOTS * 4 * 4},
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        total = wisp_bytes_add(total, wisp_bytes_of(parts[i].bytes, 1));
        if (arena && !(*parts[i].dest = wisp_arena_alloc(arena, parts[i].bytes, WISP_PART_GRAMMAR))) return 0;
    }
    return total;
}

size_t wisp_guide_plan(const wisp_token_trie *t, const wisp_grammar *g, const wisp_matcher_limits *lim) {
    return wisp_bytes_add(wisp_matcher_plan(g, lim), guide_arrays(t, lim, NULL, NULL));
}

/* The coarsest partition of the 256 bytes that no byte set of the grammar
 * splits, refined one set at a time: (old class, in the set) -> new class. */
static uint32_t classify_bytes(const wisp_grammar *g, uint8_t cls[256]) {
    memset(cls, 0, 256);
    uint32_t n = 1;
    for (uint32_t t = 0; t < g->n_terms && n < 256; t++) {
        const uint32_t *set = g->terms + (size_t)t * 8;
        uint16_t renumber[512];
        memset(renumber, 0xFF, sizeof renumber);
        uint32_t m = 0;
        for (int b = 0; b < 256; b++) {
            uint32_t key = (uint32_t)cls[b] * 2 + ((set[b >> 5] >> (b & 31)) & 1u);
            if (renumber[key] == 0xFFFF) renumber[key] = (uint16_t)m++;
            cls[b] = (uint8_t)renumber[key];
        }
        n = m;
    }
    return n;
}

wisp_status wisp_guide_init(wisp_guide *gd, const wisp_token_trie *t, const wisp_grammar *g,
                            const wisp_matcher_limits *lim, wisp_arena *arena, wisp_error *err) {
    memset(gd, 0, sizeof *gd);
    size_t need = wisp_guide_plan(t, g, lim), left = arena->size - arena->used;
    if (need > left)
        return wisp_fail(err, WISP_ERR_ARENA, "grammar guide: needs %zu bytes of arena, %zu are left (%zu short)", need,
                         left, need - left);
    gd->trie = t;
    wisp_status st = wisp_matcher_init(&gd->m, g, lim, arena, err);
    if (st) return st;
    if (!guide_arrays(t, lim, gd, arena)) return wisp_fail(err, WISP_ERR_INTERNAL, "grammar guide: the arena ran out after planning");
    gd->max_states = walk_states(lim), gd->trans_cap = walk_steps(lim), gd->row_states = row_states(lim);
    memset(gd->state_gen, 0, 2 * (size_t)gd->max_states * 4);
    memset(gd->trans_gen, 0, (size_t)gd->trans_cap * 4);
    gd->walk_gen = 0;
    gd->n_classes = classify_bytes(g, gd->byte_class);
    gd->cache_slots = CACHE_SLOTS, gd->cache_key_max = CACHE_KEY_MAX;
    memset(gd->cache_info, 0, CACHE_SLOTS * 4 * 4);
    gd->cache_epoch = gd->m.epoch;
    return WISP_OK;
}

wisp_status wisp_guide_reset(wisp_guide *gd, wisp_error *err) {
    gd->ended = false;
    return wisp_matcher_reset(&gd->m, err);
}

static bool is_eog(const wisp_token_trie *t, int32_t id) {
    for (int i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return true;
    return false;
}

bool wisp_guide_done(const wisp_guide *gd) { return gd->ended || wisp_matcher_is_final(&gd->m); }

bool wisp_guide_allows(wisp_guide *gd, int32_t id) {
    const wisp_token_trie *t = gd->trie;
    gd->n_checks++;
    if (gd->ended || id < 0 || id >= t->n_vocab) return false;
    if (is_eog(t, id)) return wisp_matcher_can_end(&gd->m);
    uint32_t a = t->off[id], b = t->off[id + 1];
    if (a == b) return false; /* control tokens without text never continue a grammar */
    wisp_matcher *m = &gd->m;
    uint32_t top = m->sets_top, nodes = m->n_nodes;
    wisp_gstate s = m->cur;
    bool ok = true;
    for (uint32_t i = a; i < b && ok; i++) {
        wisp_gstate next;
        ok = wisp_matcher_step(m, s, t->bytes[i], &next) == WISP_OK && next.n > 0;
        s = next;
    }
    wisp_matcher_truncate(m, top, nodes);
    m->failed = WISP_OK; /* a limit hit here refuses the token; the mask reports the limit */
    return ok;
}

/* Sort a new state's ids so equal sets look equal; return its hash. Shell
 * sort: states inside nested objects hold dozens of stacks, where insertion
 * sort's quadratic cost showed. */
static uint32_t canonical(uint32_t *ids, uint32_t n) {
    static const uint32_t gaps[] = {132, 57, 23, 10, 4, 1};
    for (size_t k = 0; k < sizeof gaps / sizeof gaps[0]; k++) {
        uint32_t gap = gaps[k];
        for (uint32_t i = gap; i < n; i++) {
            uint32_t x = ids[i], j = i;
            for (; j >= gap && ids[j - gap] > x; j -= gap) ids[j] = ids[j - gap];
            ids[j] = x;
        }
    }
    uint32_t h = 2166136261u ^ n;
    for (uint32_t i = 0; i < n; i++) h = (h ^ ids[i]) * 16777619u;
    return h ^ (h >> 13);
}

/* The id of state `s` (just pushed on the matcher's set stack): an earlier
 * equal state's (then `s` is popped), or a new one. DEAD when full. */
static uint32_t intern(wisp_guide *gd, wisp_gstate s) {
    wisp_matcher *m = &gd->m;
    uint32_t *ids = m->sets + s.off;
    uint32_t h = canonical(ids, s.n), mask = 2 * gd->max_states - 1;
    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        uint32_t e = gd->state_gen[i] == gd->walk_gen ? gd->state_table[i] : 0;
        if (e == 0) {
            if (gd->n_states == gd->max_states) return DEAD;
            uint32_t id = gd->n_states++;
            gd->states[id] = s, gd->state_hash[id] = h, gd->uniform[id] = 0, gd->completes[id] = 0;
            gd->state_table[i] = id + 1, gd->state_gen[i] = gd->walk_gen;
            if (id < gd->row_states) memset(gd->rows + (size_t)id * 256, 0, 256 * 4);
            return id;
        }
        wisp_gstate o = gd->states[e - 1];
        if (gd->state_hash[e - 1] == h && o.n == s.n && memcmp(m->sets + o.off, ids, s.n * 4) == 0) {
            m->sets_top = s.off; /* a copy: drop it */
            return e - 1;
        }
    }
}

/* A remembered step from state `from` by `byte` (by its class: bytes of one
 * class step alike): 1 with *next set (DEAD: refused), 0 when not known yet
 * (*slot: where to remember it). */
static int recall(const wisp_guide *gd, uint32_t from, uint8_t byte, uint32_t *next, uint32_t *slot) {
    byte = gd->byte_class[byte];
    if (from < gd->row_states) {
        uint32_t v = gd->rows[(size_t)from * 256 + byte];
        *next = v == DEAD ? DEAD : v - 1;
        return v != 0;
    }
    uint32_t key = ((from << 8) | byte) + 1, tmask = gd->trans_cap - 1;
    for (uint32_t i = (key * 0x9E3779B1u >> 7) & tmask;; i = (i + 1) & tmask) {
        if (gd->trans_gen[i] != gd->walk_gen) {
            *slot = i;
            return 0;
        }
        if (gd->trans[2 * i] == key) {
            *next = gd->trans[2 * i + 1];
            return 1;
        }
    }
}

static void remember(wisp_guide *gd, uint32_t from, uint8_t byte, uint32_t next, uint32_t slot, uint32_t *n_trans) {
    byte = gd->byte_class[byte];
    if (from < gd->row_states) {
        gd->rows[(size_t)from * 256 + byte] = next == DEAD ? DEAD : next + 1;
        return;
    }
    if (*n_trans >= gd->trans_cap / 2) return; /* past half full, steps are computed without remembering */
    gd->trans[2 * slot] = ((from << 8) | byte) + 1, gd->trans[2 * slot + 1] = next;
    gd->trans_gen[slot] = gd->walk_gen;
    (*n_trans)++;
}

/* The state after `byte` from interned state `from` (DEAD: refused). */
static wisp_status advance(wisp_guide *gd, uint32_t from, uint8_t byte, uint32_t *next, uint32_t *n_trans, wisp_error *err) {
    uint32_t slot = 0;
    if (recall(gd, from, byte, next, &slot)) return WISP_OK;
    wisp_gstate to;
    wisp_status st = wisp_matcher_step(&gd->m, gd->states[from], byte, &to);
    if (st) return st;
    *next = DEAD;
    if (to.n) {
        *next = intern(gd, to);
        if (*next == DEAD) return wisp_fail(err, WISP_ERR_CAPACITY, "grammar: more than %u states in one mask", gd->max_states);
    }
    remember(gd, from, byte, *next, slot, n_trans);
    return WISP_OK;
}

/* The byte groups whose every byte leads state `sid` to one same successor
 * (inside a string: every plain character, to the state one character on,
 * or back to itself when the length is not bounded). A group with a byte the
 * state cannot take is out without a step; the steps compared against the
 * successor are not interned (the walk may never need them). */
static wisp_status uniform_groups(wisp_guide *gd, uint32_t sid, uint32_t *n_trans, wisp_error *err, uint32_t *groups,
                                  uint32_t *succ) {
    wisp_matcher *m = &gd->m;
    if (gd->uniform[sid]) {
        *groups = gd->uniform[sid] & 0x00FFFFFFu, *succ = gd->successor[sid];
        return WISP_OK;
    }
    uint8_t takes[32];
    wisp_matcher_next_bytes(m, gd->states[sid], takes);
    uint32_t candidates = 0, ruled_out = 0;
    int first = -1;
    for (int b = 0; b < 256; b++) {
        uint32_t bit = gd->trie->group[b];
        if ((takes[b >> 3] >> (b & 7)) & 1) candidates |= bit;
        else ruled_out |= bit;
    }
    gd->taken[sid] = candidates;
    candidates &= ~ruled_out;
    /* the successor: a letter's when letters are candidates (the largest plain group), else the first candidate's */
    for (int b = 0; b < 256 && first < 0; b++)
        if (candidates & gd->trie->group[b]) first = b;
    if (candidates & gd->trie->group['a']) first = 'a';
    uint32_t to_id = DEAD;
    if (first >= 0) {
        wisp_status st = advance(gd, sid, (uint8_t)first, &to_id, n_trans, err);
        if (st) return st;
        if (to_id == DEAD) candidates = 0;
    }
    wisp_gstate target = to_id == DEAD ? gd->states[sid] : gd->states[to_id];
    uint32_t other[8] = {0}; /* classes found to lead elsewhere */
    for (int b = 0; b < 256 && candidates; b++) {
        uint32_t bit = gd->trie->group[b], c = gd->byte_class[b];
        if (!(candidates & bit) || b == first) continue;
        if ((other[c >> 5] >> (c & 31)) & 1u) {
            candidates &= ~bit;
            continue;
        }
        uint32_t next, slot = 0;
        if (recall(gd, sid, (uint8_t)b, &next, &slot)) {
            if (next != to_id) candidates &= ~bit;
            continue;
        }
        uint32_t top = m->sets_top, nodes = m->n_nodes;
        wisp_gstate to;
        wisp_status st = wisp_matcher_step(m, gd->states[sid], (uint8_t)b, &to);
        if (st) return st;
        bool same = false;
        if (to.n == target.n) {
            canonical(m->sets + to.off, to.n);
            same = memcmp(m->sets + to.off, m->sets + target.off, to.n * 4) == 0;
        }
        wisp_matcher_truncate(m, top, nodes); /* an equal state is made of nodes that existed before */
        if (same) remember(gd, sid, (uint8_t)b, to_id, slot, n_trans);
        else candidates &= ~bit, other[c >> 5] |= 1u << (c & 31);
    }
    gd->uniform[sid] = candidates | 0x80000000u, gd->successor[sid] = to_id;
    *groups = candidates, *succ = to_id;
    return WISP_OK;
}

#define ANY_STATE 0xFFFFFFFEu

/* Does every strictly valid completion of a UTF-8 character (decoder state q;
 * 0: every multi-byte character) lead state `sid` through live states to
 * *target (ANY_STATE: to one same state, then put in *target)? Bytes of one
 * class step alike, so one byte per (class, decoder state) is tried. A limit
 * of the walk's tables met here answers no (the walk goes on without the
 * shortcut), never an error. */
static wisp_status chars_lead_to(wisp_guide *gd, uint32_t sid, int q, uint32_t leads, uint32_t *target, uint32_t *n_trans,
                                 wisp_error *err, bool *ok) {
    wisp_matcher *m = &gd->m;
    uint32_t tried[64] = {0}; /* (class, decoder state) pairs */
    for (int b = q == 0 ? 0xC2 : 0x80; b <= (q == 0 ? 0xF4 : 0xBF) && *ok; b++) {
        if (q == 0 && !(gd->trie->group[b] & leads)) continue;
        int n = wisp_utf8_next(q, (uint8_t)b);
        uint32_t key = (uint32_t)gd->byte_class[b] * 8 + (uint32_t)n;
        if (n < 0 || ((tried[key >> 5] >> (key & 31)) & 1u)) continue;
        tried[key >> 5] |= 1u << (key & 31);
        uint32_t next, top = m->sets_top, nodes = m->n_nodes;
        if (gd->n_states + 1 >= gd->max_states) {
            *ok = false;
            break;
        }
        wisp_status st = advance(gd, sid, (uint8_t)b, &next, n_trans, err);
        if (st == WISP_ERR_CAPACITY) { /* the matcher's limit, not the grammar's answer */
            wisp_matcher_truncate(m, top, nodes);
            m->failed = WISP_OK;
            *ok = false;
            break;
        }
        if (st) return st;
        if (next == DEAD) *ok = false;
        else if (n == 0 && *target == ANY_STATE) *target = next;
        else if (n == 0) *ok = next == *target;
        else if ((st = chars_lead_to(gd, next, n, leads, target, n_trans, err, ok))) return st;
    }
    return WISP_OK;
}

/* The character checks make states of their own: only while the walk's
 * tables are at most half used (a walk that fits without them still fits). */
static bool room_for_chars(const wisp_guide *gd) {
    return gd->n_states + 64 < gd->max_states / 2 && gd->m.n_nodes < gd->m.lim.max_nodes / 2 &&
           gd->m.sets_top < gd->m.sets_cap / 2;
}

/* How many edges below trie node i (entered in state `sid`) every token is
 * allowed for, when that is exact: at each depth down to it, every byte group
 * below the node leads the state of that depth to one same successor (so all
 * paths go through the same live states), and the state there refuses every
 * byte of those groups, so that each longer token is refused. *fits is then
 * that depth (the whole subtree when it reaches the deepest token), else -1:
 * the walk must descend. Inside a length-capped string this is the number of
 * characters left, and only tokens that outrun it are refused. A subtree of
 * valid UTF-8 (from between characters) counts characters instead (then
 * *by_chars): a state where every multi-byte character leads where plain ones
 * do keeps it whole; from inside a character, when every way to complete it
 * leads to one state (the completing bytes start no character). */
static wisp_status fitting_depth(wisp_guide *gd, uint32_t i, uint32_t sid, uint32_t *n_trans, wisp_error *err, int *fits,
                                 bool *by_chars) {
    const wisp_token_trie *t = gd->trie;
    uint32_t need = t->below[i] & ~WISP_TRIE_UTF8_ALL,
             multi = need & (t->group[0x80] | t->group[0xC0] | t->group[0xE0] | t->group[0xF0]);
    bool chars = multi && (t->below[i] & WISP_TRIE_UTF8_BOUNDARY);
    uint32_t plain = chars ? need & ~multi : need, valid = t->below[i] & WISP_TRIE_UTF8_ALL;
    *fits = -1, *by_chars = false;
    bool big = t->skip[i] - i >= CHARS_MIN && t->edge[i] >= 0x80;
    if (!room_for_chars(gd)) chars = false, plain = need;
    /* inside a character: complete it first (from any decoder state the subtree reads validly from) */
    if (multi && valid && !chars && room_for_chars(gd) && (big || gd->completes[sid])) {
        int q = 1;
        while (!(valid & (WISP_TRIE_UTF8_BOUNDARY << q))) q++;
        uint32_t done = ANY_STATE, known = gd->completes[sid];
        bool ok = true;
        if (known >> 28 == (uint32_t)q) { /* asked before in this walk */
            ok = (known & 0x0FFFFFFFu) != 0, done = (known & 0x0FFFFFFFu) - 1;
        } else {
            wisp_status st = chars_lead_to(gd, sid, q, 0, &done, n_trans, err, &ok);
            if (st) return st;
            ok = ok && done != ANY_STATE;
            gd->completes[sid] = (uint32_t)q << 28 | (ok ? done + 1 : 0);
        }
        if (ok) chars = true, plain = need & ~multi, sid = done;
    }
    uint32_t depth = chars ? t->char_height[i] : t->height[i];
    for (uint32_t k = 0; k < depth; k++) {
        uint32_t groups, succ;
        wisp_status st = uniform_groups(gd, sid, n_trans, err, &groups, &succ);
        if (st) return st;
        bool same = !(plain & ~groups) && succ != DEAD;
        if (same && chars) {
            /* per lead length present below (2, 3, 4 bytes): uniform bit 24, 26, 28 known, the bit above
             * set when every character of that length leads where plain ones do */
            static const uint8_t first_lead[3] = {0xC0, 0xE0, 0xF0};
            for (int len = 0; len < 3 && same; len++) {
                uint32_t lead = t->group[first_lead[len]], known = 1u << (24 + 2 * len);
                if (!(need & lead)) continue;
                if (!(gd->uniform[sid] & known)) {
                    if (!big || !room_for_chars(gd)) {
                        same = false;
                        break;
                    }
                    bool ok = true;
                    uint32_t target = succ;
                    if ((st = chars_lead_to(gd, sid, 0, lead, &target, n_trans, err, &ok))) return st;
                    gd->uniform[sid] |= known | (ok ? known << 1 : 0);
                }
                same = (gd->uniform[sid] & (known << 1)) != 0;
            }
        }
        if (!same) {
            /* uniform_groups knows what the state takes */
            if (!(gd->taken[sid] & need)) *fits = (int)k, *by_chars = chars;
            return WISP_OK;
        }
        sid = succ;
    }
    if (depth < 255) *fits = t->height[i];
    return WISP_OK;
}

static void allow_range(wisp_guide *gd, uint32_t first, uint32_t end) {
    const int32_t *sorted = gd->trie->sorted;
    for (uint32_t k = first; k < end; k++) gd->mask[sorted[k] >> 5] |= 1u << (sorted[k] & 31);
}

/* Allow the tokens of trie node i and of its subtree down to `fits` edges
 * below it, or with `by_chars`, to `fits` characters started below it (see
 * fitting_depth); `ends` and `counts`: room for a stack as deep as the
 * subtree. A node whose deepest token fits is allowed whole; past `fits`,
 * nothing is visited but the first node. Returns how many tokens. */
static uint32_t allow_fitting(wisp_guide *gd, uint32_t i, uint32_t fits, bool by_chars, uint32_t *ends, uint32_t *counts) {
    const wisp_token_trie *t = gd->trie;
    const uint8_t *height = by_chars ? t->char_height : t->height;
    uint32_t end = t->skip[i], allowed;
    if (height[i] <= fits) {
        allow_range(gd, t->tok_first[i], t->tok_first[end]);
        return t->tok_first[end] - t->tok_first[i];
    }
    allow_range(gd, t->tok_first[i], t->tok_first[i] + t->tok_count[i]);
    allowed = t->tok_count[i];
    if (fits == 0 && !by_chars) return allowed;
    uint32_t depth = 0; /* ends[k]: where the subtree of the node k + 1 edges below i ends; counts[k]: its count */
    for (uint32_t j = i + 1; j < end;) {
        while (depth && j >= ends[depth - 1]) depth--;
        uint32_t here = (depth ? counts[depth - 1] : 0) + (by_chars ? (t->edge[j] & 0xC0) != 0x80 : 1u), after = t->skip[j];
        if (here > fits) { /* starts a character past the cap: refused with all below */
            j = after;
            continue;
        }
        if (height[j] + here <= fits) { /* all of it fits */
            allow_range(gd, t->tok_first[j], t->tok_first[after]);
            allowed += t->tok_first[after] - t->tok_first[j];
            j = after;
            continue;
        }
        allow_range(gd, t->tok_first[j], t->tok_first[j] + t->tok_count[j]);
        allowed += t->tok_count[j];
        if (here == fits && (!by_chars || !(t->below[j] & t->group[0x80]))) { /* every edge below starts one more */
            j = after;
            continue;
        }
        ends[depth] = after, counts[depth] = here;
        depth++;
        j++;
    }
    return allowed;
}

/* The full mask by walking the trie from the committed state. Each trie edge
 * costs one remembered step; a subtree where every character at each depth
 * leads to one same state (inside a string: everything but quotes and
 * backslashes) is allowed whole, and inside a length-capped string one is
 * allowed down to the characters left, so the walk descends only along the
 * tokens that leave the string. */
static uint32_t walk_mask(wisp_guide *gd, wisp_error *err) {
    const wisp_token_trie *t = gd->trie;
    wisp_matcher *m = &gd->m;
    memset(gd->mask, 0, mask_words(t) * 4);
    uint32_t allowed = 0;
    if (wisp_matcher_can_end(m))
        for (int i = 0; i < t->n_eog; i++) {
            gd->mask[t->eog[i] >> 5] |= 1u << (t->eog[i] & 31);
            allowed++;
        }
    uint32_t base_top = m->sets_top, base_nodes = m->n_nodes;
    if (++gd->walk_gen == 0) { /* wrapped: forget every entry for real, once in 2^32 walks */
        memset(gd->state_gen, 0, 2 * (size_t)gd->max_states * 4);
        memset(gd->trans_gen, 0, (size_t)gd->trans_cap * 4);
        gd->walk_gen = 1;
    }
    gd->n_states = 0;
    /* the committed state as state 0 (a copy, so that sorting it leaves the matcher alone) */
    wisp_gstate root = {m->sets_top, m->cur.n};
    if (m->sets_top + m->cur.n > m->sets_cap) {
        wisp_fail(err, WISP_ERR_CAPACITY, "grammar: state store full");
        return 0;
    }
    memcpy(m->sets + m->sets_top, m->sets + m->cur.off, m->cur.n * 4);
    m->sets_top += m->cur.n;
    int d = 0;
    gd->walk_state[0] = intern(gd, root);
    gd->walk_end[0] = t->n_nodes;
    wisp_status st = WISP_OK;
    uint32_t n_trans = 0;
    for (uint32_t i = 1; i < t->n_nodes;) {
        while (i >= gd->walk_end[d]) d--; /* leave finished subtrees */
        uint32_t next, from = gd->walk_state[d], row;
        /* the common case inline: a step already in a direct row */
        if (from < gd->row_states && (row = gd->rows[(size_t)from * 256 + gd->byte_class[t->edge[i]]]) != 0)
            next = row == DEAD ? DEAD : row - 1;
        else if ((st = advance(gd, from, t->edge[i], &next, &n_trans, err)))
            break;
        if (next == DEAD) { /* refused: nothing below this node can follow either */
            i = t->skip[i];
            continue;
        }
        uint32_t end = t->skip[i];
        if (end - i > BULK_MIN) {
            int fits;
            bool by_chars;
            if ((st = fitting_depth(gd, i, next, &n_trans, err, &fits, &by_chars))) break;
            if (fits >= 0) { /* the node and everything below it that fits (the rest is refused) */
                allowed += allow_fitting(gd, i, (uint32_t)fits, by_chars, gd->walk_end + d + 1, gd->walk_state + d + 1);
                gd->n_bulk++;
                gd->n_fitting += fits < (by_chars ? t->char_height[i] : t->height[i]);
                i = end;
                continue;
            }
        }
        allow_range(gd, t->tok_first[i], t->tok_first[i] + t->tok_count[i]);
        allowed += t->tok_count[i];
        d++;
        gd->walk_state[d] = next;
        gd->walk_end[d] = end;
        i++;
    }
    wisp_matcher_truncate(m, base_top, base_nodes);
    if (st) {
        if (m->failed) wisp_fail(err, m->failed, "%s", m->fail_msg);
        m->failed = WISP_OK;
        return 0;
    }
    return allowed;
}

/* The cache slot holding the committed state's mask, or -1; *n_key ids of the
 * committed state, sorted, are left in `key` (n_key = 0 when too many to cache). */
static int cache_find(wisp_guide *gd, uint32_t *key, uint32_t *n_key, uint32_t *hash) {
    const wisp_matcher *m = &gd->m;
    if (gd->cache_epoch != m->epoch) { /* node ids were renumbered: every key is stale */
        memset(gd->cache_info, 0, (size_t)gd->cache_slots * 4 * 4);
        gd->cache_epoch = m->epoch;
    }
    *n_key = 0;
    if (m->cur.n == 0 || m->cur.n > gd->cache_key_max) return -1;
    memcpy(key, m->sets + m->cur.off, m->cur.n * 4);
    *n_key = m->cur.n;
    *hash = canonical(key, m->cur.n);
    for (uint32_t i = 0; i < gd->cache_slots; i++) {
        const uint32_t *info = gd->cache_info + 4 * i;
        if (info[0] == *n_key && info[1] == *hash && memcmp(gd->cache_key + (size_t)i * gd->cache_key_max, key, *n_key * 4) == 0)
            return (int)i;
    }
    return -1;
}

uint32_t wisp_guide_mask(wisp_guide *gd, wisp_error *err) {
    const wisp_token_trie *t = gd->trie;
    size_t words = mask_words(t);
    gd->n_masks++;
    if (gd->ended) {
        memset(gd->mask, 0, words * 4);
        return 0;
    }
    uint32_t key[CACHE_KEY_MAX], n_key, hash = 0;
    int hit = cache_find(gd, key, &n_key, &hash);
    uint32_t tick = ++gd->cache_clock;
    if (hit >= 0) {
        uint32_t *info = gd->cache_info + 4 * hit;
        memcpy(gd->mask, gd->cache_mask + (size_t)hit * words, words * 4);
        info[3] = tick;
        gd->n_cache_hits++;
        return info[2];
    }
    uint32_t allowed = walk_mask(gd, err);
    if (allowed == 0 || n_key == 0) return allowed; /* errors (0 allowed) are not remembered */
    uint32_t victim = 0; /* an empty slot, else the least recently used */
    for (uint32_t i = 0; i < gd->cache_slots; i++) {
        const uint32_t *info = gd->cache_info + 4 * i;
        if (info[0] == 0) {
            victim = i;
            break;
        }
        if (info[3] < gd->cache_info[4 * victim + 3]) victim = i;
    }
    uint32_t *info = gd->cache_info + 4 * victim;
    info[0] = n_key, info[1] = hash, info[2] = allowed, info[3] = tick;
    memcpy(gd->cache_key + (size_t)victim * gd->cache_key_max, key, n_key * 4);
    memcpy(gd->cache_mask + (size_t)victim * words, gd->mask, words * 4);
    return allowed;
}

int32_t wisp_guide_forced(wisp_guide *gd) {
    const wisp_token_trie *t = gd->trie;
    wisp_matcher *m = &gd->m;
    if (gd->ended) return -1;
    if (wisp_matcher_is_final(m) && t->n_eog) {
        gd->n_forced++;
        return t->eog[0];
    }
    uint32_t top = m->sets_top, nodes = m->n_nodes;
    wisp_gstate s = m->cur;
    /* follow the trie while the grammar allows exactly one byte and may not end */
    uint32_t node = 0, best = 0;
    for (int k = 0; k < FORCED_MAX; k++) {
        bool can_end = false;
        for (uint32_t i = 0; i < s.n; i++) can_end |= m->sets[s.off + i] == 0;
        if (can_end) break;
        uint8_t set[32];
        wisp_matcher_next_bytes(m, s, set);
        int only = -1, count = 0;
        for (int b = 0; b < 256 && count < 2; b++)
            if ((set[b >> 3] >> (b & 7)) & 1) only = b, count++;
        if (count != 1) break;
        /* the child of `node` along byte `only` */
        uint32_t child = node + 1, found = 0;
        while (child < t->skip[node]) {
            if (t->edge[child] == only) {
                found = child;
                break;
            }
            child = t->skip[child];
        }
        if (!found) break;
        node = found;
        if (t->tok_count[node]) best = node;
        wisp_gstate next;
        if (wisp_matcher_step(m, s, (uint8_t)only, &next) || next.n == 0) break;
        s = next;
    }
    wisp_matcher_truncate(m, top, nodes);
    m->failed = WISP_OK;
    if (!best) return -1;
    gd->n_forced++;
    return t->sorted[t->tok_first[best]];
}

wisp_status wisp_guide_accept(wisp_guide *gd, int32_t id, wisp_error *err) {
    const wisp_token_trie *t = gd->trie;
    if (gd->ended) return wisp_fail(err, WISP_ERR_ARG, "grammar: a token after the end");
    if (id < 0 || id >= t->n_vocab) return wisp_fail(err, WISP_ERR_ARG, "grammar: token %d out of range", id);
    if (is_eog(t, id)) {
        if (!wisp_matcher_can_end(&gd->m)) return wisp_fail(err, WISP_ERR_ARG, "grammar: end of text before the grammar ends");
        gd->ended = true;
        return WISP_OK;
    }
    uint32_t a = t->off[id], b = t->off[id + 1];
    if (a == b) return wisp_fail(err, WISP_ERR_ARG, "grammar: token %d has no text to match", id);
    size_t ok;
    return wisp_matcher_accept(&gd->m, t->bytes + a, b - a, &ok, err);
}
