#include "arena.h"

#include <string.h>

const char *wisp_part_name(int part) {
    static const char *const names[WISP_PART_COUNT] = {
        "context", "tokenizer", "kv_cache", "scratch", "logits", "sampler", "text",
        "adapters", "lora", "gradients", "optimizer", "activations", "train_scratch",
        "packed_weights", "token_trie", "grammar"};
    return part >= 0 && part < WISP_PART_COUNT ? names[part] : "?";
}

void wisp_arena_init(wisp_arena *a, void *mem, size_t size) {
    memset(a, 0, sizeof *a);
    a->base = (uint8_t *)mem;
    a->size = mem ? size : 0;
}

void *wisp_arena_alloc(wisp_arena *a, size_t bytes, int part) {
    size_t n = wisp_arena_round(bytes);
    if (n < bytes || n > a->size - a->used || part < 0 || part >= WISP_PART_COUNT) return NULL;
    void *p = a->base + a->used;
    a->used += n;
    a->part_bytes[part] += n;
    memset(p, 0, n);
    return p;
}

size_t wisp_bytes_of(size_t count, size_t elem_size) {
    if (elem_size && count > (SIZE_MAX - WISP_ARENA_ALIGN) / elem_size) return SIZE_MAX;
    return wisp_arena_round(count * elem_size);
}

size_t wisp_bytes_add(size_t a, size_t b) {
    return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

void *wisp_layout_take(wisp_layout *l, size_t count, size_t elem, int part) {
    size_t b = wisp_bytes_of(count, elem);
    l->bytes = wisp_bytes_add(l->bytes, b);
    if (part >= 0 && part < WISP_PART_COUNT) l->part_bytes[part] = wisp_bytes_add(l->part_bytes[part], b);
    if (!l->arena) return NULL;
    void *p = wisp_arena_alloc(l->arena, b, part);
    if (!p) l->short_of_memory = true;
    return p;
}
