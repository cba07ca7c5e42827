/* The merge engine (core/tokenizer_merge.c) against a naive reference: on
 * random symbol strings with a random pair table (many equal priorities, so
 * the leftmost-wins rule matters), the heap path (long inputs) and the scan
 * path (short inputs) must merge exactly like "repeat: merge the adjacent
 * pair with the lowest key, leftmost on ties". Needs no shared files. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tokenizer_internal.h"

#define N_SYMBOLS 6 /* alphabet of initial symbol ids */
#define MAX_ID 64

/* pair table: (left id, right id) -> key and result, or none */
typedef struct table {
    int32_t result[MAX_ID][MAX_ID];
    uint32_t key[MAX_ID][MAX_ID];
} table;

static uint32_t rng_state = 99;
static uint32_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

static bool pair_of(const void *ctx, const tk_sym *l, const tk_sym *r, uint32_t *key, int32_t *pair_id) {
    const table *t = (const table *)ctx;
    if (l->id < 0 || r->id < 0 || t->result[l->id][r->id] < 0) return false;
    *key = t->key[l->id][r->id];
    *pair_id = t->result[l->id][r->id];
    return true;
}

/* The obvious quadratic algorithm on a plain array of ids. */
static size_t reference(const table *t, int32_t *ids, size_t n) {
    for (;;) {
        size_t best = n;
        for (size_t i = 0; i + 1 < n; i++) {
            int32_t r = t->result[ids[i]][ids[i + 1]];
            if (r >= 0 && (best == n || t->key[ids[i]][ids[i + 1]] < t->key[ids[best]][ids[best + 1]])) best = i;
        }
        if (best == n) return n;
        ids[best] = t->result[ids[best]][ids[best + 1]];
        memmove(ids + best + 1, ids + best + 2, (n - best - 2) * sizeof *ids);
        n--;
    }
}

int main(void) {
    static table t;
    tk_sym syms[200];
    int32_t heap[200], ref[200];
    for (int round = 0; round < 300; round++) {
        for (int a = 0; a < MAX_ID; a++)
            for (int b = 0; b < MAX_ID; b++) {
                t.result[a][b] = (rng() % 3 == 0) ? (int32_t)(rng() % MAX_ID) : -1;
                t.key[a][b] = rng() % 4; /* few distinct keys: many ties */
            }
        size_t n = 1 + rng() % (round % 2 ? 16 : 200); /* both the scan and the heap path */
        for (size_t i = 0; i < n; i++) {
            ref[i] = (int32_t)(rng() % N_SYMBOLS);
            syms[i] = (tk_sym){.prev = (int32_t)i - 1, .next = i + 1 < n ? (int32_t)i + 1 : -1, .id = ref[i],
                               .start = (uint32_t)i, .len = 1};
        }
        size_t n_ref = reference(&t, ref, n);
        tk_merge(syms, (int32_t)n, heap, pair_of, &t);
        int32_t got[200];
        size_t n_got = 0, covered = 0;
        for (int32_t i = 0; i >= 0; i = syms[i].next) {
            got[n_got++] = syms[i].id;
            covered += syms[i].len;
        }
        bool same = n_got == n_ref && memcmp(got, ref, n_got * sizeof *got) == 0;
        CHECK(same, "round %d (n %zu): %zu symbols, reference %zu", round, n, n_got, n_ref);
        CHECK(covered == n, "round %d: symbols cover %zu of %zu bytes", round, covered, n);
    }
    return check_report("test_tokenizer_merge");
}
