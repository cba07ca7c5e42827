/* Generating text knowing wisp only through its public header: the whole
 * path a user takes, with nothing but <wisp.h> (and stdio/stdlib to read the
 * file). tests/cli/test_public_api.sh builds it with gcc and clang and
 * compares what it prints with `wisp run` for the same settings.
 *
 *     public_generate MODEL PROMPT N [TEMPERATURE SEED]
 *
 * Prints the prompt's and the generated token ids on one line (as
 * `wisp run --ids`), then the generated text on the next (as `wisp run
 * --no-echo`). Temperature 0 (the default) is greedy; otherwise the sampler
 * keeps llama.cpp's top-k/top-p/min-p defaults, as `wisp run` does. The
 * kernel level is the best this CPU offers, or WISP_KERNELS, as the CLI's. */
#include <stdio.h>
#include <stdlib.h>

#include <wisp.h>

/* The whole file in one malloc'd block: wisp parses it where it lies. */
static void *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    void *bytes = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n > 0 && fseek(f, 0, SEEK_SET) == 0 && (bytes = malloc((size_t)n)) != NULL &&
        fread(bytes, 1, (size_t)n, f) != (size_t)n) {
        free(bytes);
        bytes = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return bytes;
}

static size_t text_length(const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    return n;
}

static int fail(const char *what, const wisp_error *err) {
    fprintf(stderr, "public_generate: %s: %s\n", what, err ? err->message : "failed");
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 6) {
        fprintf(stderr, "usage: public_generate MODEL PROMPT N [TEMPERATURE SEED]\n");
        return 2;
    }
    const char *prompt = argv[2];
    int32_t n_predict = (int32_t)strtol(argv[3], NULL, 10);
    wisp_sampler_params sp = wisp_sampler_defaults();
    sp.temperature = argc == 6 ? strtof(argv[4], NULL) : 0.0f;
    sp.seed = argc == 6 ? strtoull(argv[5], NULL, 10) : 0;

    wisp_error err = {.status = WISP_OK};
    size_t size = 0;
    void *bytes = read_file(argv[1], &size);
    if (!bytes) return fail(argv[1], NULL);
    /* the handle's size is the library's to say; malloc aligns enough */
    wisp_gguf *g = malloc(wisp_gguf_size());
    if (!g) return fail("out of memory", NULL);
    if (wisp_gguf_open(g, bytes, size, &err)) return fail(argv[1], &err);

    wisp_config cfg = wisp_config_default();
    wisp_cpu_features cpu;
    wisp_cpu_detect(&cpu);
    if (wisp_simd_select(&cpu, getenv("WISP_KERNELS"), &cfg.kernels, &err)) return fail("kernels", &err);

    /* every byte the context will use, measured before anything starts */
    wisp_memory_plan plan;
    if (wisp_plan(g, &cfg, &plan, &err)) return fail("plan", &err);
    unsigned char *block = malloc(plan.total + 15);
    if (!block) return fail("out of memory", NULL);
    void *arena = block + ((16 - (uintptr_t)block % 16) % 16);
    wisp_ctx *ctx;
    if (wisp_init(&ctx, g, &cfg, arena, plan.total, &err)) return fail("init", &err);

    int32_t n_ctx = wisp_ctx_config(ctx)->n_ctx;
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)n_ctx);
    if (!tokens) return fail("out of memory", NULL);
    size_t n_prompt = 0;
    if (wisp_tokenize_text(ctx, prompt, text_length(prompt), WISP_TOKENIZE_ADD_BOS, tokens, (size_t)n_ctx, &n_prompt,
                           &err))
        return fail("prompt", &err);
    if (wisp_eval(ctx, tokens, (int32_t)n_prompt, &err)) return fail("prefill", &err);

    wisp_sampler sampler;
    wisp_sampler_init(&sampler, &sp);
    const wisp_tokenizer *tok = wisp_ctx_tokenizer(ctx);
    int32_t n_tok = (int32_t)n_prompt, n_gen = 0;
    while (n_gen < n_predict && n_tok < n_ctx) {
        int32_t next = wisp_sample(ctx, &sampler, tokens, (size_t)n_tok);
        if (next < 0 || wisp_tokenizer_is_eog(tok, next)) break;
        tokens[n_tok++] = next;
        if (++n_gen < n_predict && wisp_eval(ctx, &next, 1, &err)) return fail("eval", &err);
    }

    for (int32_t i = 0; i < n_tok; i++) printf("%s%d", i ? " " : "", (int)tokens[i]);
    putchar('\n');
    char piece[256];
    for (int32_t i = (int32_t)n_prompt; i < n_tok; i++) {
        size_t len = wisp_token_piece(tok, tokens[i], piece, sizeof piece);
        fwrite(piece, 1, len < sizeof piece ? len : sizeof piece, stdout);
    }
    putchar('\n');
    fprintf(stderr, "[public_generate: %d + %d tokens, kernels %s, arena %zu bytes]\n", (int)n_prompt, (int)n_gen,
            wisp_ctx_kernels_name(ctx), plan.total);
    free(tokens);
    free(block);
    free(g);
    free(bytes);
    return 0;
}
