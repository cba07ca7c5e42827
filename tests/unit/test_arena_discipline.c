/* After wisp_init, generation allocates nothing and touches nothing outside
 * the arena: malloc is counted (this binary interposes the allocator), and
 * guard bytes after the planned arena must survive a 64-token generation.
 * Also: every arena size below the plan fails cleanly. */
#include <string.h>

#include "check.h"
#include "gguf.h"
#include "sampler.h"
#include "wisp.h"

/* ASan owns malloc: definitions here would hand it blocks it did not make,
 * and it fails before main; the test then skips (see main) */
#if defined(__SANITIZE_ADDRESS__)
#define ALLOCATOR_REPLACED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ALLOCATOR_REPLACED 1
#endif
#endif

/* Count allocator calls while `counting` is set. glibc resolves malloc to
 * the executable's definition first, so these see every call, including
 * any from the library. */
static volatile int counting; /* volatile: the compiler assumes malloc reads no globals */
static volatile long alloc_calls;
#ifndef ALLOCATOR_REPLACED
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
void *malloc(size_t n) {
    if (counting) alloc_calls++;
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
    if (counting) alloc_calls++;
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
    if (counting) alloc_calls++;
    return __libc_realloc(p, n);
}
#endif

#define GUARD 4096

static void run_model(const char *rel, int32_t n_ctx) {
    const char *path = shared_path(rel);
    if (!path) { printf("note: %s absent\n", rel); return; }
    size_t size;
    unsigned char *bytes = read_file(path, &size);
    REQUIRE(bytes, "read %s", path);
    wisp_gguf g;
    wisp_error err = {0};
    REQUIRE(wisp_gguf_open(&g, bytes, size, &err) == WISP_OK, "%s", err.message);
    wisp_config cfg = wisp_config_default();
    cfg.n_ctx = n_ctx;
    wisp_memory_plan plan;
    REQUIRE(wisp_plan(&g, &cfg, &plan, &err) == WISP_OK, "%s", err.message);
    size_t sum = 0;
    for (int i = 0; i < WISP_PART_COUNT; i++) sum += plan.part[i];
    CHECK(sum == plan.total, "parts add up to the total");

    unsigned char *mem = NULL;
    REQUIRE(posix_memalign((void **)&mem, 64, plan.total + GUARD) == 0, "alloc");
    /* too small: a few sizes below the plan, and exactly one byte short */
    size_t sizes[] = {0, 1, 64, plan.total / 3, plan.total / 2, plan.total - 64, plan.total - 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        wisp_ctx *ctx = NULL;
        wisp_status st = wisp_init(&ctx, &g, &cfg, mem, sizes[i], &err);
        CHECK(st == WISP_ERR_ARENA && ctx == NULL, "%zu of %zu bytes: status %d", sizes[i], plan.total, st);
        CHECK(strstr(err.message, "short") != NULL, "message names the shortfall: %s", err.message);
    }
    memset(mem + plan.total, 0xA5, GUARD);
    wisp_ctx *ctx = NULL;
    REQUIRE(wisp_init(&ctx, &g, &cfg, mem, plan.total, &err) == WISP_OK, "%s", err.message);

    int32_t ids[256];
    size_t n = 0;
    counting = 1;
    wisp_status st = wisp_tokenize_text(ctx, "Once upon a time", 16, WISP_TOKENIZE_ADD_BOS, ids, 256, &n, &err);
    if (!st) st = wisp_eval(ctx, ids, (int32_t)n, &err);
    wisp_sampler_params sp = wisp_sampler_defaults();
    sp.seed = 1;
    wisp_sampler s;
    wisp_sampler_init(&s, &sp);
    for (int i = 0; i < 64 && !st; i++) {
        ids[n] = wisp_sample(ctx, &s, ids, n);
        st = wisp_eval(ctx, &ids[n], 1, &err);
        n++;
    }
    counting = 0;
    CHECK(st == WISP_OK, "generation: %s", err.message);
    CHECK(alloc_calls == 0, "%ld allocator calls after init", alloc_calls);
    size_t damaged = 0;
    for (size_t i = 0; i < GUARD; i++) damaged += mem[plan.total + i] != 0xA5;
    CHECK(damaged == 0, "%zu guard bytes after the arena were written", damaged);
    printf("%s ctx %d: arena %zu bytes, 64 tokens, 0 allocations, guard intact\n", rel, n_ctx, plan.total);
    free(mem);
    free(bytes);
}

int main(void) {
#ifdef ALLOCATOR_REPLACED
    check_skip_platform("test_arena_discipline", "built with ASan, which replaces the allocator this test counts "
                                        "(test_arena_limits checks the arena under ASan)");
#endif
    /* the counter must be able to see an allocation, or its zero means nothing */
    counting = 1;
    char *volatile probe = malloc(16); /* volatile: the compiler may not elide the pair */
    counting = 0;
    free(probe);
    if (alloc_calls == 0) /* valgrind redirects malloc even in the executable */
        check_skip_platform("test_arena_discipline", "the allocator is replaced (valgrind?): allocations cannot be counted");
    CHECK(alloc_calls == 1, "the allocation counter works (%ld)", alloc_calls);
    alloc_calls = 0;
    if (!shared_path("models/stories260K.gguf")) check_skip("test_arena_discipline", "missing ../shared/models/stories260K.gguf");
    run_model("models/stories260K.gguf", 80);
    run_model("models/stories260K.gguf", 512);
    run_model("models/synthetic/syn-qwen2-q4_k_m.gguf", 128);
    run_model("models/synthetic/syn-llama-gqa-q5_k.gguf", 300);
    return check_report("test_arena_discipline");
}
