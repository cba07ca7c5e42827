/* The wasm64 build's malloc (wasm/wasm64/heap.c), run natively over a
 * "wasm memory" of our own: a buffer that grows page by page up to a limit.
 *  - a random mix of malloc, calloc, realloc, aligned_alloc and free: every
 *    live block keeps its own fill pattern (no two blocks overlap, and the
 *    heap's headers never land in a payload), is aligned as asked, calloc's
 *    blocks start zeroed, realloc keeps the bytes;
 *  - after each step the block chain is whole: walked from the first block
 *    it ends exactly at the heap's end, each block's back link names the
 *    block before it, no two free blocks touch (frees merge);
 *  - freed space is used again: once everything is freed, one block as large
 *    as the whole heap fits without growing memory;
 *  - memory that cannot grow gives NULL and leaves the heap as it was, and
 *    sizes near SIZE_MAX are refused, not wrapped. */
#include "check.h"

#include <string.h>

#define HEAP_TEST
enum { TEST_PAGE = 65536, TEST_PAGES = 512 }; /* 32 MiB of "wasm memory" at most */

static unsigned char *memory;
static size_t pages, page_limit = TEST_PAGES;

static uintptr_t heap_start(void) { return (uintptr_t)memory + 40; /* not aligned: the heap aligns it */ }
static uintptr_t memory_end(void) { return (uintptr_t)memory + pages * TEST_PAGE; }
static size_t memory_grow(size_t n) {
    if (n > page_limit - pages) return (size_t)-1;
    size_t was = pages;
    pages += n;
    return was;
}

#include "wasm/wasm64/heap.c"

_Static_assert((int)TEST_PAGE == (int)PAGE, "the test's pages are wasm's");

enum { LIVE = 64, STEPS = 20000 };

typedef struct {
    unsigned char *p;
    size_t n, align;
    unsigned char fill;
} live_block;

static live_block live[LIVE];

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t next_random(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Sizes: mostly small, some tens of kilobytes, a few megabytes. */
static size_t random_size(void) {
    uint64_t r = next_random() % 100;
    if (r < 70) return (size_t)(next_random() % 300);
    if (r < 97) return (size_t)(next_random() % 60000);
    return (size_t)(next_random() % (3u << 20));
}

static int filled(const live_block *b) {
    for (size_t i = 0; i < b->n; i++)
        if (b->p[i] != (unsigned char)(b->fill + i * 7)) return 0;
    return 1;
}

static void fill(live_block *b) {
    for (size_t i = 0; i < b->n; i++) b->p[i] = (unsigned char)(b->fill + i * 7);
}

/* The block chain, walked from the start: whole, linked both ways, merged. */
static int chain_ok(size_t *used_out) {
    size_t used = 0;
    block *before = NULL;
    for (block *b = first; b && b != top; b = next_of(b)) {
        if (size_of(b) < MIN_BLOCK || (uintptr_t)next_of(b) > (uintptr_t)top) return 0;
        if (before ? prev_of(b) != before : b->prev != 0) return 0;
        if (before && !in_use(before) && !in_use(b)) return 0; /* two free blocks side by side */
        if (in_use(b)) used++;
        before = b;
    }
    if (before != last) return 0;
    if ((uintptr_t)top > (uintptr_t)memory + pages * TEST_PAGE) return 0;
    *used_out = used;
    return 1;
}

static void random_steps(void) {
    int broken = 0, misaligned = 0, not_zero = 0, lost = 0, nulls = 0;
    for (int step = 0; step < STEPS && !broken; step++) {
        live_block *b = &live[next_random() % LIVE];
        uint64_t op = next_random() % 10;
        if (b->p) {
            if (!filled(b)) broken++;
            if (op < 6) {
                heap_free(b->p);
                b->p = NULL;
            } else {
                /* realloc: the old bytes carry over */
                size_t n = random_size();
                unsigned char *q = heap_realloc(b->p, n);
                if (!q) { nulls++; continue; }
                size_t keep = n < b->n ? n : b->n;
                live_block moved = {q, keep, 16, b->fill};
                if (!filled(&moved)) lost++;
                *b = (live_block){q, n, 16, (unsigned char)next_random()};
                fill(b);
            }
        } else {
            size_t n = random_size();
            size_t align = op < 3 ? (size_t)1 << (4 + next_random() % 9) : 16; /* 16 .. 4096 */
            unsigned char *p = op < 3 ? heap_aligned_alloc(align, n) : op < 5 ? heap_calloc(1, n) : heap_malloc(n);
            if (!p) { nulls++; continue; }
            if ((uintptr_t)p % align) misaligned++;
            if (op >= 3 && op < 5)
                for (size_t i = 0; i < n; i++)
                    if (p[i]) { not_zero++; break; }
            *b = (live_block){p, n, align, (unsigned char)next_random()};
            fill(b);
        }
        size_t used;
        if (!chain_ok(&used)) broken++;
    }
    CHECK(!broken, "a live block lost its bytes, or the block chain broke");
    CHECK(!misaligned, "%d blocks were not aligned as asked", misaligned);
    CHECK(!not_zero, "%d calloc blocks did not start zeroed", not_zero);
    CHECK(!lost, "realloc lost the bytes of %d blocks", lost);
    CHECK(nulls < STEPS / 20, "%d of %d allocations failed in a 32 MiB memory", nulls, STEPS);
}

static void reuse_after_free(void) {
    for (int i = 0; i < LIVE; i++) {
        if (live[i].p) CHECK(filled(&live[i]), "live block %d kept its bytes to the end", i);
        heap_free(live[i].p);
        live[i].p = NULL;
    }
    size_t used = 1;
    CHECK(chain_ok(&used) && used == 0, "everything freed: the chain holds no used block (%zu)", used);
    CHECK(first && first == last && !in_use(first) && next_of(first) == top, "everything freed: one free block");
    size_t grown = pages;
    size_t whole = (size_t)((uintptr_t)top - (uintptr_t)first) - sizeof(block);
    void *p = heap_malloc(whole);
    CHECK(p && pages == grown, "a block as large as the whole heap (%zu bytes) fits without growing memory", whole);
    heap_free(p);
}

static void limits(void) {
    size_t used;
    CHECK(heap_malloc(SIZE_MAX) == NULL && heap_malloc(SIZE_MAX - 8) == NULL, "sizes near SIZE_MAX are refused");
    CHECK(heap_calloc(SIZE_MAX / 2, 3) == NULL, "calloc's count x size overflow is refused");
    CHECK(heap_aligned_alloc(64, SIZE_MAX - 32) == NULL, "aligned sizes near SIZE_MAX are refused");
    CHECK(heap_aligned_alloc(48, 100) == NULL, "an alignment that is not a power of two is refused");
    unsigned char *small = heap_malloc(100);
    REQUIRE(small != NULL, "a small block");
    memset(small, 0x5a, 100);
    size_t before = pages;
    page_limit = pages; /* memory cannot grow any more */
    CHECK(heap_malloc((size_t)TEST_PAGES * TEST_PAGE) == NULL, "more than memory can grow to gives NULL");
    CHECK(pages == before && chain_ok(&used), "and leaves memory and the chain as they were");
    int intact = 1;
    for (int i = 0; i < 100; i++) intact &= small[i] == 0x5a;
    CHECK(intact, "a live block is untouched by the failed allocation");
    heap_free(small);
    page_limit = TEST_PAGES;
    void *zero = heap_malloc(0);
    CHECK(zero != NULL, "malloc(0) gives a block that can be freed");
    heap_free(zero);
    heap_free(NULL);
    void *out = NULL;
    CHECK(heap_posix_memalign(&out, 256, 1000) == 0 && out && (uintptr_t)out % 256 == 0, "posix_memalign aligns");
    void *bad = NULL;
    CHECK(heap_posix_memalign(&bad, 24, 10) == 22 && heap_posix_memalign(&bad, 2, 10) == 22 && !bad,
          "posix_memalign refuses an alignment that is not a power-of-two multiple of sizeof(void *)");
    heap_free(out);
}

int main(void) {
    memory = aligned_alloc(TEST_PAGE, (size_t)TEST_PAGES * TEST_PAGE);
    if (!memory) check_skip("test_wasm64_heap", "no memory for the test's 32 MiB");
    pages = 1;
    random_steps();
    reuse_after_free();
    limits();
    free(memory);
    return check_report("test_wasm64_heap");
}
