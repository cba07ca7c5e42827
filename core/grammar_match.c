/* The byte-level matcher over a set of stacks (see grammar.h).
 *
 * A stack node is (position, parent). Nodes are hash-consed, so a stack is
 * identified by its top node's id and a state is a set of ids. Advancing by a
 * byte takes every stack whose next element is a byte set containing it,
 * moves past that element, and expands the result until each stack's next
 * element is again a byte set (or the stack is empty: the grammar may end).
 * Expanding a node is done at most once per byte (the `visit` stamps), which
 * bounds the work by the number of distinct stacks however ambiguous the
 * grammar. Nodes at an alternative's end are never made: moving past the last
 * element returns to the parent directly (so right recursion and repetition
 * do not grow the stack). */
#include <string.h>

#include "grammar.h"

#define NONE 0xFFFFFFFFu

wisp_matcher_limits wisp_matcher_limits_default(void) {
    wisp_matcher_limits l = {4096, 1u << 15, 1u << 16, 0, 0}; /* 0: the guide's walk defaults */
    return l;
}

static uint32_t table_cap_for(uint32_t max_nodes) {
    uint32_t c = 16;
    while (c < max_nodes * 2u) c <<= 1;
    return c;
}

/* One layout, measuring (arena NULL) or carving. */
static size_t lay_out(wisp_matcher *m, const wisp_matcher_limits *lim, wisp_arena *a) {
    size_t n = lim->max_nodes, cap = table_cap_for(lim->max_nodes);
    size_t sizes[7] = {wisp_bytes_of(n, sizeof(wisp_gnode)), wisp_bytes_of(n, sizeof(wisp_gnode)),
                       wisp_bytes_of(cap, 4), wisp_bytes_of(n, 4), wisp_bytes_of(n, 4),
                       wisp_bytes_of(lim->max_work, 4), wisp_bytes_of(lim->max_work, 4)};
    size_t total = 0;
    for (int i = 0; i < 7; i++) total = wisp_bytes_add(total, sizes[i]);
    if (!a) return total;
    void *p[7];
    for (int i = 0; i < 7; i++)
        if (!(p[i] = wisp_arena_alloc(a, sizes[i], WISP_PART_GRAMMAR))) return 0;
    m->nodes = p[0], m->spare = p[1], m->table = p[2], m->visit = p[3], m->remap = p[4];
    m->sets = p[5], m->work = p[6];
    m->table_cap = (uint32_t)cap;
    m->sets_cap = lim->max_work;
    return total;
}

static bool limits_ok(const wisp_matcher_limits *l) {
    return l->max_stacks >= 1 && l->max_nodes >= 16 && l->max_nodes <= (1u << 26) && l->max_work >= 16 &&
           l->max_work <= (1u << 26);
}

size_t wisp_matcher_plan(const wisp_grammar *g, const wisp_matcher_limits *lim) {
    (void)g;
    if (!limits_ok(lim)) return 0;
    return lay_out(NULL, lim, NULL);
}

static wisp_status fail(wisp_matcher *m, wisp_status s, const char *what, uint32_t limit) {
    if (!m->failed) {
        m->failed = s;
        wisp_format(m->fail_msg, sizeof m->fail_msg, "grammar: %s (limit %u)", what, limit);
    }
    return s;
}

static uint32_t node_hash(uint32_t pos, uint32_t parent) {
    uint32_t h = pos * 0x9E3779B1u ^ (parent + 0x7F4A7C15u) * 0x85EBCA77u;
    return h ^ (h >> 15);
}

/* The node (pos, parent), made if new; NONE when the pool is full. */
static uint32_t cons(wisp_matcher *m, uint32_t pos, uint32_t parent) {
    uint32_t mask = m->table_cap - 1;
    uint32_t i = node_hash(pos, parent) & mask;
    for (;; i = (i + 1) & mask) {
        uint32_t id = m->table[i];
        if (id == 0) break;
        if (m->nodes[id].pos == pos && m->nodes[id].parent == parent) return id;
    }
    if (m->n_nodes >= m->lim.max_nodes) {
        fail(m, WISP_ERR_CAPACITY, "more stack nodes alive than the matcher holds", m->lim.max_nodes);
        return NONE;
    }
    uint32_t id = m->n_nodes++;
    m->nodes[id].pos = pos, m->nodes[id].parent = parent;
    m->visit[id] = 0;
    m->table[i] = id;
    return id;
}

/* Remove node `id` from the table (linear probing: shift later entries back). */
static void unlink_node(wisp_matcher *m, uint32_t id) {
    uint32_t mask = m->table_cap - 1;
    uint32_t i = node_hash(m->nodes[id].pos, m->nodes[id].parent) & mask;
    while (m->table[i] != id) {
        if (m->table[i] == 0) return;
        i = (i + 1) & mask;
    }
    for (;;) {
        m->table[i] = 0;
        uint32_t j = i;
        for (;;) {
            j = (j + 1) & mask;
            uint32_t e = m->table[j];
            if (e == 0) return;
            uint32_t k = node_hash(m->nodes[e].pos, m->nodes[e].parent) & mask;
            /* stays if its home k lies cyclically in (i, j] */
            if (i <= j ? (i < k && k <= j) : (i < k || k <= j)) continue;
            m->table[i] = e;
            i = j;
            break;
        }
    }
}

void wisp_matcher_truncate(wisp_matcher *m, uint32_t sets_top, uint32_t n_nodes) {
    while (m->n_nodes > n_nodes) unlink_node(m, --m->n_nodes);
    m->sets_top = sets_top;
}

static bool at_end(const wisp_grammar *g, uint32_t pos) { return WISP_GE_KIND(g->elems[pos]) == WISP_GE_END; }

typedef struct expander {
    wisp_matcher *m;
    uint32_t n_work;
    uint32_t start; /* where the new state's ids begin in m->sets */
} expander;

static bool push_work(expander *x, uint32_t node) {
    wisp_matcher *m = x->m;
    if (node == NONE) return false;
    if (x->n_work >= m->lim.max_work) {
        fail(m, WISP_ERR_CAPACITY, "too many expansions for one byte", m->lim.max_work);
        return false;
    }
    m->work[x->n_work++] = node;
    return true;
}

/* Push the alternatives of rule r, each returning to `cont`. */
static bool push_rule(expander *x, uint32_t r, uint32_t cont) {
    const wisp_grammar *g = x->m->g;
    uint32_t first = g->rule_first_alt[r], n = g->rule_n_alts[r];
    for (uint32_t a = n; a-- > 0;) { /* pushed backwards: expanded in the written order */
        uint32_t q = g->alt_start[first + a];
        if (!push_work(x, at_end(g, q) ? cont : cons(x->m, q, cont))) return false;
    }
    return true;
}

static bool add_to_state(expander *x, uint32_t id) {
    wisp_matcher *m = x->m;
    if (m->sets_top - x->start >= m->lim.max_stacks) {
        fail(m, WISP_ERR_CAPACITY, "too many alternatives alive at once", m->lim.max_stacks);
        return false;
    }
    if (m->sets_top >= m->sets_cap) {
        fail(m, WISP_ERR_CAPACITY, "too many states held at once", m->sets_cap);
        return false;
    }
    m->sets[m->sets_top++] = id;
    return true;
}

static bool expand(expander *x) {
    wisp_matcher *m = x->m;
    const wisp_grammar *g = m->g;
    while (x->n_work) {
        uint32_t id = m->work[--x->n_work];
        if (m->visit[id] == m->stamp) continue;
        m->visit[id] = m->stamp;
        if (id == 0) { /* the empty stack: the grammar may end here */
            if (!add_to_state(x, 0)) return false;
            continue;
        }
        uint32_t pos = m->nodes[id].pos, parent = m->nodes[id].parent;
        uint32_t e = g->elems[pos];
        if (WISP_GE_KIND(e) == WISP_GE_TERM) {
            if (!add_to_state(x, id)) return false;
            continue;
        }
        /* a rule reference: its alternatives, returning to what follows it */
        uint32_t cont = at_end(g, pos + 1) ? parent : cons(m, pos + 1, parent);
        if (cont == NONE || !push_rule(x, WISP_GE_VALUE(e), cont)) return false;
    }
    return true;
}

static void next_stamp(wisp_matcher *m) {
    if (++m->stamp == 0) {
        memset(m->visit, 0, sizeof(uint32_t) * m->lim.max_nodes);
        m->stamp = 1;
    }
}

static bool term_has(const wisp_grammar *g, uint32_t pos, uint8_t b) {
    const uint32_t *set = g->terms + (size_t)WISP_GE_VALUE(g->elems[pos]) * 8;
    return (set[b >> 5] >> (b & 31)) & 1u;
}

wisp_status wisp_matcher_step(wisp_matcher *m, wisp_gstate from, uint8_t byte, wisp_gstate *to) {
    const wisp_grammar *g = m->g;
    next_stamp(m);
    expander x = {m, 0, m->sets_top};
    to->off = m->sets_top, to->n = 0;
    if (m->failed) return m->failed;
    for (uint32_t i = from.n; i-- > 0;) {
        uint32_t id = m->sets[from.off + i];
        if (id == 0) continue;
        uint32_t pos = m->nodes[id].pos, parent = m->nodes[id].parent;
        if (!term_has(g, pos, byte)) continue;
        if (!push_work(&x, at_end(g, pos + 1) ? parent : cons(m, pos + 1, parent))) return m->failed;
    }
    if (!expand(&x)) return m->failed;
    to->n = m->sets_top - to->off;
    return WISP_OK;
}

void wisp_matcher_next_bytes(const wisp_matcher *m, wisp_gstate s, uint8_t set[32]) {
    uint32_t words[8] = {0};
    for (uint32_t i = 0; i < s.n; i++) {
        uint32_t id = m->sets[s.off + i];
        if (id == 0) continue;
        const uint32_t *t = m->g->terms + (size_t)WISP_GE_VALUE(m->g->elems[m->nodes[id].pos]) * 8;
        for (int w = 0; w < 8; w++) words[w] |= t[w];
    }
    for (int b = 0; b < 32; b++) set[b] = (uint8_t)(words[b >> 2] >> (8 * (b & 3))); /* bit b of word b/32 -> bit b%8 of byte b/8 */
}

/* Copy the stacks of the committed state into the spare pool (dropping every
 * node no live stack uses), then swap the pools. */
static wisp_status compact(wisp_matcher *m) {
    for (uint32_t i = 0; i < m->n_nodes; i++) m->remap[i] = NONE;
    m->remap[0] = 0;
    memset(m->table, 0, sizeof(uint32_t) * m->table_cap);
    wisp_gnode *from = m->nodes;
    m->nodes = m->spare;
    m->spare = from;
    m->n_nodes = 1;
    m->nodes[0] = from[0];
    uint32_t *ids = m->sets + m->cur.off;
    for (uint32_t i = 0; i < m->cur.n; i++) {
        uint32_t k = 0;
        for (uint32_t x = ids[i]; m->remap[x] == NONE; x = from[x].parent) {
            if (k >= m->lim.max_work) return fail(m, WISP_ERR_CAPACITY, "a stack deeper than the work list", m->lim.max_work);
            m->work[k++] = x;
        }
        while (k) {
            uint32_t y = m->work[--k];
            uint32_t nid = cons(m, from[y].pos, m->remap[from[y].parent]);
            if (nid == NONE) return m->failed;
            m->remap[y] = nid;
        }
        ids[i] = m->remap[ids[i]];
    }
    for (uint32_t i = 0; i < m->n_nodes; i++) m->visit[i] = 0;
    m->epoch++;
    return WISP_OK;
}

wisp_status wisp_matcher_commit(wisp_matcher *m, wisp_gstate s, wisp_error *err) {
    if (m->failed) return wisp_fail(err, m->failed, "%s", m->fail_msg);
    if (s.off != 0) memmove(m->sets, m->sets + s.off, sizeof(uint32_t) * s.n);
    m->sets_top = s.n;
    m->cur.off = 0, m->cur.n = s.n;
    if (m->n_nodes > m->lim.max_nodes / 2 && compact(m)) return wisp_fail(err, m->failed, "%s", m->fail_msg);
    return WISP_OK;
}

wisp_status wisp_matcher_reset(wisp_matcher *m, wisp_error *err) {
    m->failed = WISP_OK;
    m->epoch++;
    m->n_nodes = 1;
    m->nodes[0].pos = NONE, m->nodes[0].parent = 0;
    memset(m->table, 0, sizeof(uint32_t) * m->table_cap);
    m->sets_top = 0;
    next_stamp(m);
    expander x = {m, 0, 0};
    if (!push_rule(&x, m->g->root, 0) || !expand(&x)) return wisp_fail(err, m->failed, "%s", m->fail_msg);
    wisp_gstate s = {0, m->sets_top};
    return wisp_matcher_commit(m, s, err);
}

wisp_status wisp_matcher_init(wisp_matcher *m, const wisp_grammar *g, const wisp_matcher_limits *lim,
                              wisp_arena *arena, wisp_error *err) {
    memset(m, 0, sizeof *m);
    if (!limits_ok(lim))
        return wisp_fail(err, WISP_ERR_ARG, "grammar matcher: limits out of range (stacks >= 1, nodes and work 16..2^26)");
    size_t need = lay_out(NULL, lim, NULL), left = arena->size - arena->used;
    if (need > left)
        return wisp_fail(err, WISP_ERR_ARENA, "grammar matcher: needs %zu bytes of arena, %zu are left (%zu short)", need,
                         left, need - left);
    m->g = g;
    m->lim = *lim;
    if (!lay_out(m, lim, arena)) return wisp_fail(err, WISP_ERR_INTERNAL, "grammar matcher: the arena ran out after planning");
    return wisp_matcher_reset(m, err);
}

wisp_status wisp_matcher_accept(wisp_matcher *m, const uint8_t *bytes, size_t n, size_t *accepted, wisp_error *err) {
    wisp_status st;
    if (accepted) *accepted = 0;
    for (size_t i = 0; i < n; i++) {
        wisp_gstate next;
        if ((st = wisp_matcher_step(m, m->cur, bytes[i], &next))) return wisp_fail(err, st, "%s", m->fail_msg);
        if (next.n == 0) {
            wisp_matcher_truncate(m, m->cur.off + m->cur.n, m->n_nodes);
            return wisp_fail(err, WISP_ERR_FORMAT, "grammar: byte %zu (0x%02x) does not continue the grammar", i,
                             (unsigned)bytes[i]);
        }
        if ((st = wisp_matcher_commit(m, next, err))) return st;
        if (accepted) *accepted = i + 1;
    }
    return WISP_OK;
}

bool wisp_matcher_can_end(const wisp_matcher *m) {
    for (uint32_t i = 0; i < m->cur.n; i++)
        if (m->sets[m->cur.off + i] == 0) return true;
    return false;
}

bool wisp_matcher_is_final(const wisp_matcher *m) { return m->cur.n == 1 && m->sets[m->cur.off] == 0; }
