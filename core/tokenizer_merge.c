/* Repeatedly merge the best adjacent pair of symbols: the shared core of
 * SentencePiece-BPE (best = highest score) and byte-level BPE (best = lowest
 * merge rank). llama.cpp keeps every candidate pair in a priority queue and
 * skips stale entries when they surface; here each symbol owns at most one
 * live pair (with its right neighbour) in an indexed heap that is updated in
 * place, which merges in the same order with a heap of n entries. */
#include "tokenizer_internal.h"

static bool before(const tk_sym *s, int32_t a, int32_t b) {
    return s[a].key < s[b].key || (s[a].key == s[b].key && a < b);
}

static void heap_set(tk_sym *s, int32_t *heap, int32_t pos, int32_t sym) {
    heap[pos] = sym;
    s[sym].hpos = pos;
}

static void sift_up(tk_sym *s, int32_t *heap, int32_t pos) {
    int32_t sym = heap[pos];
    while (pos > 0) {
        int32_t parent = (pos - 1) / 2;
        if (!before(s, sym, heap[parent])) break;
        heap_set(s, heap, pos, heap[parent]);
        pos = parent;
    }
    heap_set(s, heap, pos, sym);
}

static void sift_down(tk_sym *s, int32_t *heap, int32_t n, int32_t pos) {
    int32_t sym = heap[pos];
    for (;;) {
        int32_t child = 2 * pos + 1;
        if (child >= n) break;
        if (child + 1 < n && before(s, heap[child + 1], heap[child])) child++;
        if (!before(s, heap[child], sym)) break;
        heap_set(s, heap, pos, heap[child]);
        pos = child;
    }
    heap_set(s, heap, pos, sym);
}

static void heap_remove(tk_sym *s, int32_t *heap, int32_t *n, int32_t sym) {
    int32_t pos = s[sym].hpos;
    s[sym].hpos = -1;
    (*n)--;
    if (pos == *n) return;
    int32_t moved = heap[*n];
    heap_set(s, heap, pos, moved);
    sift_up(s, heap, pos);
    sift_down(s, heap, *n, s[moved].hpos);
}

/* Recompute the pair (i, next(i)) and put it in, update it in, or take it
 * out of the heap. */
static void refresh(tk_sym *s, int32_t *heap, int32_t *n, int32_t i, tk_pair_fn pair, const void *ctx) {
    int32_t j = s[i].next;
    uint32_t key;
    int32_t pair_id;
    if (j >= 0 && pair(ctx, &s[i], &s[j], &key, &pair_id)) {
        s[i].key = key;
        s[i].pair_id = pair_id;
        if (s[i].hpos < 0) {
            heap_set(s, heap, *n, i);
            (*n)++;
            sift_up(s, heap, s[i].hpos);
        } else {
            sift_up(s, heap, s[i].hpos);
            sift_down(s, heap, *n, s[i].hpos);
        }
    } else if (s[i].hpos >= 0) {
        heap_remove(s, heap, n, i);
    }
}

/* Take b (the right neighbour of a) into a. */
static void absorb(tk_sym *s, int32_t a) {
    int32_t b = s[a].next;
    s[a].len += s[b].len;
    s[a].id = s[a].pair_id;
    s[a].next = s[b].next;
    if (s[b].next >= 0) s[s[b].next].prev = a;
    s[b].len = 0;
}

static void set_pair(tk_sym *s, int32_t i, tk_pair_fn pair, const void *ctx) {
    int32_t j = s[i].next;
    s[i].hpos = (j >= 0 && pair(ctx, &s[i], &s[j], &s[i].key, &s[i].pair_id)) ? 0 : -1;
}

/* Short words (most of them): a scan for the best pair beats heap upkeep.
 * hpos only says whether the pair exists. Live symbols are in index order,
 * so the first minimum found is the leftmost. */
static void merge_short(tk_sym *s, int32_t n, tk_pair_fn pair, const void *ctx) {
    for (int32_t i = 0; i < n; i++) set_pair(s, i, pair, ctx);
    for (;;) {
        int32_t best = -1;
        for (int32_t i = 0; i >= 0; i = s[i].next)
            if (s[i].hpos >= 0 && (best < 0 || s[i].key < s[best].key)) best = i;
        if (best < 0) return;
        absorb(s, best);
        if (s[best].prev >= 0) set_pair(s, s[best].prev, pair, ctx);
        set_pair(s, best, pair, ctx);
    }
}

#define SHORT_WORD 16

void tk_merge(tk_sym *syms, int32_t n, int32_t *heap, tk_pair_fn pair, const void *ctx) {
    if (n <= SHORT_WORD) {
        merge_short(syms, n, pair, ctx);
        return;
    }
    int32_t hn = 0;
    for (int32_t i = 0; i < n; i++) syms[i].hpos = -1;
    for (int32_t i = 0; i + 1 < n; i++) {
        uint32_t key;
        int32_t pair_id;
        if (!pair(ctx, &syms[i], &syms[i + 1], &key, &pair_id)) continue;
        syms[i].key = key;
        syms[i].pair_id = pair_id;
        heap_set(syms, heap, hn, i);
        hn++;
    }
    /* heapify bottom-up */
    for (int32_t pos = hn / 2 - 1; pos >= 0; pos--) sift_down(syms, heap, hn, pos);

    while (hn > 0) {
        int32_t a = heap[0];
        heap_remove(syms, heap, &hn, a);
        int32_t b = syms[a].next;
        if (syms[b].hpos >= 0) heap_remove(syms, heap, &hn, b);
        absorb(syms, a);
        if (syms[a].prev >= 0) refresh(syms, heap, &hn, syms[a].prev, pair, ctx);
        refresh(syms, heap, &hn, a, pair, ctx);
    }
}
