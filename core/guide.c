/* Which tokens a grammar allows next (see guide.h). */
#include <string.h>

#include "guide.h"

#define FORCED_MAX 64 /* bytes looked ahead for a forced continuation */

static size_t mask_words(const wisp_token_trie *t) { return ((size_t)t->n_vocab + 31) / 32; }

size_t wisp_guide_plan(const wisp_token_trie *t, const wisp_grammar *g, const wisp_matcher_limits *lim) {
    size_t depth = (size_t)t->max_len + 2;
    size_t b = wisp_matcher_plan(g, lim);
    b = wisp_bytes_add(b, wisp_bytes_of(mask_words(t), 4));
    b = wisp_bytes_add(b, wisp_bytes_of(depth, sizeof(wisp_gstate)));
    for (int i = 0; i < 3; i++) b = wisp_bytes_add(b, wisp_bytes_of(depth, 4));
    return b;
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
    size_t depth = (size_t)t->max_len + 2;
    gd->mask = wisp_arena_alloc(arena, mask_words(t) * 4, WISP_PART_GRAMMAR);
    gd->walk_state = wisp_arena_alloc(arena, depth * sizeof(wisp_gstate), WISP_PART_GRAMMAR);
    gd->walk_sets = wisp_arena_alloc(arena, depth * 4, WISP_PART_GRAMMAR);
    gd->walk_nodes = wisp_arena_alloc(arena, depth * 4, WISP_PART_GRAMMAR);
    gd->walk_end = wisp_arena_alloc(arena, depth * 4, WISP_PART_GRAMMAR);
    if (!gd->mask || !gd->walk_state || !gd->walk_sets || !gd->walk_nodes || !gd->walk_end)
        return wisp_fail(err, WISP_ERR_INTERNAL, "grammar guide: the arena ran out after planning");
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
    return ok;
}

uint32_t wisp_guide_mask(wisp_guide *gd, wisp_error *err) {
    const wisp_token_trie *t = gd->trie;
    wisp_matcher *m = &gd->m;
    memset(gd->mask, 0, mask_words(t) * 4);
    gd->n_masks++;
    uint32_t allowed = 0;
    if (gd->ended) return 0;
    if (wisp_matcher_can_end(m))
        for (int i = 0; i < t->n_eog; i++) {
            gd->mask[t->eog[i] >> 5] |= 1u << (t->eog[i] & 31);
            allowed++;
        }
    uint32_t base_top = m->sets_top, base_nodes = m->n_nodes;
    int d = 0;
    gd->walk_state[0] = m->cur;
    gd->walk_end[0] = t->n_nodes;
    gd->walk_sets[0] = base_top, gd->walk_nodes[0] = base_nodes;
    for (uint32_t i = 1; i < t->n_nodes;) {
        while (i >= gd->walk_end[d]) { /* leave finished subtrees */
            wisp_matcher_truncate(m, gd->walk_sets[d], gd->walk_nodes[d]);
            d--;
        }
        uint32_t top = m->sets_top, nodes = m->n_nodes;
        wisp_gstate next;
        if (wisp_matcher_step(m, gd->walk_state[d], t->edge[i], &next)) {
            wisp_matcher_truncate(m, base_top, base_nodes);
            wisp_fail(err, m->failed, "%s", m->fail_msg);
            m->failed = WISP_OK;
            return 0;
        }
        if (next.n == 0) { /* refused: nothing below this node can follow either */
            wisp_matcher_truncate(m, top, nodes);
            i = t->skip[i];
            continue;
        }
        for (uint32_t k = 0; k < t->tok_count[i]; k++) {
            int32_t id = t->sorted[t->tok_first[i] + k];
            gd->mask[id >> 5] |= 1u << (id & 31);
            allowed++;
        }
        d++;
        gd->walk_state[d] = next;
        gd->walk_end[d] = t->skip[i];
        gd->walk_sets[d] = top, gd->walk_nodes[d] = nodes;
        i++;
    }
    wisp_matcher_truncate(m, base_top, base_nodes);
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
