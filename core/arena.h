/* One caller-provided block of memory, carved front to back. Every carve is
 * rounded up to WISP_ARENA_ALIGN bytes and tagged with the plan part it
 * belongs to, so the planner's per-part figures can be checked against what
 * initialisation really took. Carving never fails silently: a NULL return
 * means the plan was wrong, which init reports as an error. */
#ifndef WISP_ARENA_H
#define WISP_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wisp.h" /* wisp_part: the parts a plan is made of, in the order init carves them */

#define WISP_ARENA_ALIGN 64   /* every carve starts a cache line after the previous */
#define WISP_ARENA_BASE_ALIGN 16 /* what the caller's block must be aligned to */

typedef struct wisp_arena {
    uint8_t *base;
    size_t size;
    size_t used;
    size_t part_bytes[WISP_PART_COUNT];
} wisp_arena;

static inline size_t wisp_arena_round(size_t n) {
    return (n + (WISP_ARENA_ALIGN - 1)) & ~(size_t)(WISP_ARENA_ALIGN - 1);
}

/* Start carving `size` bytes at `mem`. A NULL `mem` gives an empty arena in
 * which every allocation fails: an arena never counts; plans are measured by
 * the layout functions that also carve (see core/train_plan.c). */
void wisp_arena_init(wisp_arena *a, void *mem, size_t size);

/* Carve `bytes` (rounded up) for `part`; zero-filled. NULL if it does not fit. */
void *wisp_arena_alloc(wisp_arena *a, size_t bytes, int part);

/* What a layout function takes its pieces through, so that the same code
 * both measures and carves and the plan cannot disagree with the carve. Each
 * piece is counted (rounded, saturating) in `bytes` and in its part's
 * `part_bytes`, always; with `arena` set it is also carved from it, and a
 * piece that did not fit sets `short_of_memory`. Start one with
 * `wisp_layout l = {.arena = NULL}` to measure, `{.arena = a}` to carve. */
typedef struct wisp_layout {
    wisp_arena *arena;
    size_t bytes;
    bool short_of_memory;
    size_t part_bytes[WISP_PART_COUNT];
} wisp_layout;

/* Take `count` elements of `elem` bytes for `part`: NULL when only measuring
 * or when the piece does not fit. */
void *wisp_layout_take(wisp_layout *l, size_t count, size_t elem, int part);

/* Size helpers for planners: rounded sizes of n elements, saturating so that a
 * hostile count cannot wrap around to a small number. */
size_t wisp_bytes_of(size_t count, size_t elem_size);
size_t wisp_bytes_add(size_t a, size_t b);

#endif
