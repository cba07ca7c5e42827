/* The vocabulary as a byte trie in depth-first order (see guide.h). Built
 * by sorting the token ids by their bytes (heap sort in place: no scratch)
 * and walking the sorted list: each token adds the nodes below its longest
 * common prefix with the previous one, and a node's subtree ends where the
 * first later token leaves its prefix. */
#include <string.h>

#include "guide.h"
#include "unicode.h"

uint32_t wisp_byte_group_bit(uint8_t b) {
    /* structural bytes of JSON and of the patterns schemas use get a group each; bytes that
     * always behave alike in such grammars (letters of a case, digits, UTF-8 leads of one
     * length, continuation bytes, other punctuation and DEL) share one */
    static const char own[] = "\"\\ ,:{}[]-+./_@";
    if (b < 0x20) return 1u << 0;
    if (b >= 0xF0) return 1u << 3; /* leads of 4-byte characters (and bytes no UTF-8 has) */
    if (b >= 0xE0) return 1u << 23; /* of 3-byte ones */
    if (b >= 0xC0) return 1u << 1; /* of 2-byte ones */
    if (b >= 0x80) return 1u << 2; /* continuation bytes */
    if (b >= '0' && b <= '9') return 1u << 4;
    if (b >= 'a' && b <= 'z') return 1u << 5;
    if (b >= 'A' && b <= 'Z') return 1u << 6;
    for (int i = 0; own[i]; i++)
        if ((uint8_t)own[i] == b) return 1u << (8 + i);
    return 1u << 7; /* other punctuation */
}

/* The reading states from which an edge with byte b, into a node whose subtree reads validly
 * from the states `child`, keeps every token below valid (tokens may end inside a character). */
static uint32_t utf8_valid_before(uint8_t b, uint32_t child) {
    uint32_t valid = 0;
    for (int q = 0; q < 8; q++) {
        int n = wisp_utf8_next(q, b);
        if (n >= 0 && (child & (WISP_TRIE_UTF8_BOUNDARY << n))) valid |= WISP_TRIE_UTF8_BOUNDARY << q;
    }
    return valid;
}

static size_t piece_len(const wisp_tokenizer *tok, int32_t id) {
    char buf[1];
    return wisp_token_piece(tok, id, buf, 0);
}

/* Sizes of everything, from the vocabulary: n tokens, total bytes, longest. */
static void measure(const wisp_tokenizer *tok, size_t *total, size_t *longest) {
    int32_t n = wisp_tokenizer_n_vocab(tok);
    *total = 0, *longest = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t l = piece_len(tok, i);
        *total += l;
        if (l > *longest) *longest = l;
    }
}

typedef wisp_layout layout;

static void *take(layout *l, size_t count, size_t elem) { return wisp_layout_take(l, count, elem, WISP_PART_TOKEN_TRIE); }

/* One layout for plan and init; the node count is bounded by total bytes + 1. */
static void lay_out(layout *l, wisp_token_trie *t, int32_t n_vocab, size_t total, size_t longest, uint32_t **path) {
    size_t nodes = total + 1;
    t->edge = take(l, nodes, 1);
    t->skip = take(l, nodes, 4);
    t->tok_first = take(l, nodes + 1, 4);
    t->below = take(l, nodes, 4);
    t->height = take(l, nodes, 1);
    t->char_height = take(l, nodes, 1);
    t->tok_count = take(l, nodes, 4);
    t->sorted = take(l, (size_t)n_vocab, 4);
    t->bytes = take(l, total ? total : 1, 1);
    t->off = take(l, (size_t)n_vocab + 1, 4);
    *path = take(l, longest + 1, 4);
}

wisp_status wisp_token_trie_plan(const wisp_tokenizer *tok, size_t *bytes, wisp_error *err) {
    size_t total, longest;
    int32_t n = wisp_tokenizer_n_vocab(tok);
    if (n <= 0) return wisp_fail(err, WISP_ERR_ARG, "token trie: empty vocabulary");
    measure(tok, &total, &longest);
    if (total >= 0xFFFFFFFFu) return wisp_fail(err, WISP_ERR_UNSUPPORTED, "token trie: the vocabulary has over 4 GiB of text");
    layout l = {.arena = NULL};
    wisp_token_trie t;
    uint32_t *path;
    lay_out(&l, &t, n, total, longest, &path);
    *bytes = l.bytes;
    return WISP_OK;
}

static int cmp_tokens(const wisp_token_trie *t, int32_t a, int32_t b) {
    uint32_t la = t->off[a + 1] - t->off[a], lb = t->off[b + 1] - t->off[b];
    uint32_t n = la < lb ? la : lb;
    int c = n ? memcmp(t->bytes + t->off[a], t->bytes + t->off[b], n) : 0;
    if (c) return c;
    if (la != lb) return la < lb ? -1 : 1;
    return a < b ? -1 : a > b; /* equal bytes: by id, so the order is total */
}

static void sift(const wisp_token_trie *t, int32_t *h, size_t n, size_t i) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && cmp_tokens(t, h[l], h[m]) > 0) m = l;
        if (r < n && cmp_tokens(t, h[r], h[m]) > 0) m = r;
        if (m == i) return;
        int32_t x = h[i];
        h[i] = h[m], h[m] = x;
        i = m;
    }
}

wisp_status wisp_token_trie_init(wisp_token_trie *t, const wisp_tokenizer *tok, wisp_arena *arena, wisp_error *err) {
    size_t need;
    wisp_status st = wisp_token_trie_plan(tok, &need, err);
    if (st) return st;
    size_t left = arena->size - arena->used;
    if (need > left)
        return wisp_fail(err, WISP_ERR_ARENA, "token trie: needs %zu bytes of arena, %zu are left (%zu short)", need, left,
                         need - left);
    memset(t, 0, sizeof *t);
    int32_t n = wisp_tokenizer_n_vocab(tok);
    size_t total, longest;
    measure(tok, &total, &longest);
    layout l = {.arena = arena};
    uint32_t *path;
    lay_out(&l, t, n, total, longest, &path);
    if (l.short_of_memory) return wisp_fail(err, WISP_ERR_INTERNAL, "token trie: the arena ran out after planning");
    t->n_vocab = n;
    t->max_len = (uint32_t)longest;
    uint32_t at = 0;
    for (int32_t i = 0; i < n; i++) {
        t->off[i] = at;
        at += (uint32_t)wisp_token_piece(tok, i, (char *)t->bytes + at, total - at);
    }
    t->off[n] = at;
    for (int32_t i = 0; i < n; i++) {
        if (wisp_tokenizer_is_eog(tok, i) && t->n_eog < WISP_TOKENIZER_MAX_EOG) t->eog[t->n_eog++] = i;
    }
    /* tokens with bytes, sorted (heap sort: no scratch memory) */
    uint32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (t->off[i + 1] > t->off[i]) t->sorted[m++] = i;
    t->n_sorted = m;
    for (int32_t i = 0; i < n; i++)
        if (t->off[i + 1] == t->off[i]) t->sorted[m++] = i;
    for (size_t i = t->n_sorted / 2; i-- > 0;) sift(t, t->sorted, t->n_sorted, i);
    for (size_t end = t->n_sorted; end > 1; end--) {
        int32_t x = t->sorted[0];
        t->sorted[0] = t->sorted[end - 1], t->sorted[end - 1] = x;
        sift(t, t->sorted, end - 1, 0);
    }
    /* the trie, in depth-first order */
    uint32_t nodes = 1, depth = 0;
    path[0] = 0;
    t->tok_first[0] = 0;
    t->edge[0] = 0, t->tok_count[0] = 0;
    const uint8_t *prev = NULL;
    uint32_t prev_len = 0;
    for (uint32_t k = 0; k < t->n_sorted; k++) {
        int32_t id = t->sorted[k];
        const uint8_t *b = t->bytes + t->off[id];
        uint32_t len = t->off[id + 1] - t->off[id], lcp = 0;
        while (lcp < len && lcp < prev_len && b[lcp] == prev[lcp]) lcp++;
        while (depth > lcp) t->skip[path[depth--]] = nodes;
        while (depth < len) {
            uint32_t node = nodes++;
            t->edge[node] = b[depth];
            t->tok_count[node] = 0;
            t->tok_first[node] = k; /* depth-first order: the token that makes a node is its subtree's first */
            path[++depth] = node;
        }
        t->tok_count[path[len]]++;
        prev = b, prev_len = len;
    }
    while (depth > 0) t->skip[path[depth--]] = nodes;
    t->skip[0] = nodes;
    t->n_nodes = nodes;
    t->tok_first[0] = 0, t->tok_first[nodes] = t->n_sorted;
    for (int b = 0; b < 256; b++) t->group[b] = wisp_byte_group_bit((uint8_t)b);
    /* byte groups, UTF-8 reading states and depth below each node, children before parents
     * (reverse depth-first order) */
    for (uint32_t p = nodes; p-- > 0;) {
        uint32_t below = 0, height = 0, chars = 0, valid = WISP_TRIE_UTF8_ALL;
        for (uint32_t c = p + 1; c < t->skip[p]; c = t->skip[c]) {
            below |= t->group[t->edge[c]] | (t->below[c] & ~WISP_TRIE_UTF8_ALL);
            valid &= utf8_valid_before(t->edge[c], t->below[c] & WISP_TRIE_UTF8_ALL);
            if (t->height[c] + 1u > height) height = t->height[c] + 1u;
            uint32_t starts = (t->edge[c] & 0xC0) != 0x80; /* a continuation byte starts no character */
            if (t->char_height[c] + starts > chars) chars = t->char_height[c] + starts;
        }
        t->below[p] = below | valid;
        t->height[p] = (uint8_t)(height < 255 ? height : 255);
        t->char_height[p] = (uint8_t)(chars < 255 ? chars : 255);
    }
    return WISP_OK;
}
