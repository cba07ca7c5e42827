/* malloc and friends for the wasm64 build, which has no libc of its own
 * (wasm/wasm64/wasm64.mk). The ABI allocates little: a model's bytes and its
 * arena (gigabytes, once per model), a few exchange buffers and records, the
 * parsed adapter configs. So this is a plain boundary-tag heap: blocks in
 * address order, each with the sizes of itself and of the block before it,
 * first fit, neighbours merged when freed; it grows wasm memory (memory.grow)
 * when nothing fits, and never gives memory back (wasm cannot shrink it).
 * One thread allocates, the model's: in the threaded variant the pool's
 * workers only run pieces of core's jobs, which allocate nothing, so the
 * heap needs no lock.
 *
 * A block is a header and a payload; payloads are 16-aligned (what malloc
 * promises on wasm), larger alignments are carved out of a bigger block. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { ALIGN = 16, PAGE = 65536 };

/* ALIGN bytes, so payloads stay aligned: two size_t in wasm64, padded where
 * size_t is 4 bytes (the unit test on 32-bit ARM). */
typedef struct block {
    _Alignas(ALIGN) size_t size; /* bytes of this block, header included; bit 0: in use */
    size_t prev;                 /* bytes of the block before it (0: first block) */
} block;

/* The smallest block: a header and one aligned payload. */
#define MIN_BLOCK (sizeof(block) + ALIGN)

/* Where the heap starts and how memory grows: wasm's, or a unit test's
 * (tests/unit/test_wasm64_heap.c includes this file with HEAP_TEST set and
 * gives the functions other names, so they do not replace the C library's). */
#ifdef HEAP_TEST
#define HEAP_FN(name) heap_##name
#else
#define HEAP_FN(name) name
extern unsigned char __heap_base; /* wasm-ld: the first byte after data and stack */
static uintptr_t heap_start(void) { return (uintptr_t)&__heap_base; }
static uintptr_t memory_end(void) { return (uintptr_t)__builtin_wasm_memory_size(0) * PAGE; }
static size_t memory_grow(size_t pages) { return __builtin_wasm_memory_grow(0, pages); }
#endif

static block *first, *top, *last; /* the first block; the heap's end; the block before it (NULL: none) */

static size_t size_of(const block *b) { return b->size & ~(size_t)1; }
static int in_use(const block *b) { return (int)(b->size & 1); }
static block *next_of(block *b) { return (block *)((unsigned char *)b + size_of(b)); }
static block *prev_of(block *b) { return b->prev ? (block *)((unsigned char *)b - b->prev) : NULL; }
static void *payload(block *b) { return b + 1; }
static block *header(void *p) { return (block *)p - 1; }

/* Sets a block's size and use, and the back link of the block after it. */
static void set_size(block *b, size_t size, int used) {
    b->size = size | (size_t)(used != 0);
    block *n = next_of(b);
    if (n != top) n->prev = size;
    else last = b;
}

/* A block's size for an n-byte payload (0: too large). */
static size_t round_block(size_t n) {
    size_t bytes = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
    if (bytes < n || bytes + MIN_BLOCK < bytes) return 0;
    bytes += sizeof(block);
    return bytes < MIN_BLOCK ? MIN_BLOCK : bytes;
}

/* A free block of at least `bytes` at the heap's end, made by growing wasm
 * memory (the last block grows when it is free). NULL when memory cannot
 * grow so far. */
static block *grow(size_t bytes) {
    if (!first) {
        uintptr_t at = (heap_start() + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1);
        first = top = (block *)at;
    }
    block *b = last && !in_use(last) ? last : top;
    size_t have = b == top ? 0 : size_of(b);
    size_t add = bytes - have;
    uintptr_t end = (uintptr_t)top + add;
    if (end < (uintptr_t)top) return NULL;
    uintptr_t limit = memory_end();
    if (end > limit && memory_grow((end - limit + PAGE - 1) / PAGE) == (size_t)-1) return NULL;
    if (b == top) b->prev = last ? size_of(last) : 0;
    top = (block *)end;
    set_size(b, have + add, 0);
    return b;
}

/* Marks `b` used for `bytes`, the rest split off as a free block when it is
 * large enough to be one. */
static void *take(block *b, size_t bytes) {
    size_t size = size_of(b);
    if (size - bytes >= MIN_BLOCK) {
        set_size(b, bytes, 1);
        set_size(next_of(b), size - bytes, 0); /* its prev was set just now */
    } else {
        set_size(b, size, 1);
    }
    return payload(b);
}

void *HEAP_FN(malloc)(size_t n) {
    size_t bytes = round_block(n);
    if (!bytes) return NULL;
    for (block *b = first; b && b != top; b = next_of(b))
        if (!in_use(b) && size_of(b) >= bytes) return take(b, bytes);
    block *b = grow(bytes);
    return b ? take(b, bytes) : NULL;
}

void HEAP_FN(free)(void *p) {
    if (!p) return;
    block *b = header(p);
    size_t size = size_of(b);
    block *n = next_of(b);
    if (n != top && !in_use(n)) size += size_of(n);
    block *before = prev_of(b);
    if (before && !in_use(before)) {
        size += size_of(before);
        b = before;
    }
    set_size(b, size, 0);
}

void *HEAP_FN(calloc)(size_t count, size_t size) {
    size_t n;
    if (__builtin_mul_overflow(count, size, &n)) return NULL;
    void *p = HEAP_FN(malloc)(n);
    if (p) memset(p, 0, n);
    return p;
}

void *HEAP_FN(realloc)(void *p, size_t n) {
    if (!p) return HEAP_FN(malloc)(n);
    size_t have = size_of(header(p)) - sizeof(block);
    if (n <= have) return p;
    void *q = HEAP_FN(malloc)(n);
    if (!q) return NULL;
    memcpy(q, p, have);
    HEAP_FN(free)(p);
    return q;
}

/* A block of `n` bytes at a multiple of `align` (a power of two): a larger
 * block whose front, up to the aligned payload, goes back as a free block
 * (or is added to the free block before it when too small to be one). */
void *HEAP_FN(aligned_alloc)(size_t align, size_t n) {
    if (align <= ALIGN) return HEAP_FN(malloc)(n);
    if (align & (align - 1)) return NULL;
    size_t bytes = round_block(n);
    if (!bytes || bytes + align + MIN_BLOCK < bytes) return NULL;
    unsigned char *p = HEAP_FN(malloc)(bytes - sizeof(block) + align + MIN_BLOCK);
    if (!p || ((uintptr_t)p & (align - 1)) == 0) return p;
    /* the aligned payload at least MIN_BLOCK past p, so the front is a block */
    uintptr_t at = ((uintptr_t)p + MIN_BLOCK + align - 1) & ~(uintptr_t)(align - 1);
    block *b = header(p), *aligned = header((void *)at);
    size_t front = (size_t)((unsigned char *)aligned - (unsigned char *)b), size = size_of(b);
    set_size(b, front, 1);
    set_size(aligned, size - front, 1);
    HEAP_FN(free)(payload(b)); /* the front goes back, merged with a free block before it */
    return payload(aligned);
}

int HEAP_FN(posix_memalign)(void **out, size_t align, size_t n) {
    if (align < sizeof(void *) || (align & (align - 1))) return 22; /* EINVAL */
    void *p = HEAP_FN(aligned_alloc)(align, n);
    if (!p) return 12; /* ENOMEM */
    *out = p;
    return 0;
}
