/* tiny_model OUT ARCH TYPE [DIM [LAYERS [VOCAB | VOCAB.gguf]]]: write a very small
 * random-weight model (llama, qwen2, qwen3, gemma2, gemma3 or phi3, each with
 * its family's keys: q/k head size 16 for qwen3 and gemma3, a window of 8
 * for the gemmas, gemma2's soft-caps) with a synthetic SentencePiece-style
 * vocabulary, through the same generator as `wisp make-model`.
 *
 * Fuzzers and hostile-file tests want valid models that are kilobytes, not
 * megabytes: every fuzz execution parses, plans, initialises and runs the
 * whole file, so its size sets the executions per second. Defaults: dim 32,
 * 1 layer, 4 heads (2 KV heads), FFN 2 x dim, 264 tokens (the 3 specials,
 * the 256 byte tokens and a few word pieces). K-quant types need DIM to be
 * a multiple of 256, or their rows fall back (as llama.cpp's quantizer does).
 * VOCAB.gguf instead of a count copies that file's vocabulary (tokenizer.*):
 * a real tokenizer on a model small enough to run hundreds of generations
 * in a test (the guided-output tests use SmolLM2's 49k vocabulary). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch.h"
#include "model_gen.h"

int main(int argc, char **argv) {
    if (argc < 4 || argc > 7 || !wisp_arch_find(argv[2], strlen(argv[2]))) {
        fprintf(stderr, "usage: tiny_model OUT llama|qwen2|qwen3|gemma2|gemma3|phi3 TYPE [DIM [LAYERS [VOCAB | VOCAB.gguf]]]\n");
        return 2;
    }
    const char *arch = argv[2];
    bool qwen2 = strcmp(arch, "qwen2") == 0, gemma = strncmp(arch, "gemma", 5) == 0;
    int32_t dim = argc > 4 ? atoi(argv[4]) : 32, layers = argc > 5 ? atoi(argv[5]) : 1;
    int32_t vocab = argc > 6 ? atoi(argv[6]) : 264;
    size_t vlen = argc > 6 ? strlen(argv[6]) : 0;
    bool copy = vlen > 5 && strcmp(argv[6] + vlen - 5, ".gguf") == 0;
    static wisp_gguf vocab_file; /* lives until the model is written */
    unsigned char *vocab_bytes = NULL;
    if (copy) {
        FILE *vf = fopen(argv[6], "rb");
        long vn = -1;
        if (vf && fseek(vf, 0, SEEK_END) == 0) vn = ftell(vf);
        if (vn > 0) vocab_bytes = malloc((size_t)vn);
        if (vf) rewind(vf);
        wisp_error verr = {0};
        wisp_gguf_kv tokens;
        if (!vocab_bytes || fread(vocab_bytes, 1, (size_t)vn, vf) != (size_t)vn ||
            wisp_gguf_open(&vocab_file, vocab_bytes, (size_t)vn, &verr) ||
            !wisp_gguf_find_kv(&vocab_file, "tokenizer.ggml.tokens", &tokens) || tokens.type != WISP_GGUF_ARRAY ||
            tokens.count < 259 || tokens.count > INT32_MAX) {
            fprintf(stderr, "tiny_model: %s: not a GGUF with a vocabulary to copy %s\n", argv[6], verr.message);
            return 1;
        }
        fclose(vf);
        vocab = (int32_t)tokens.count;
    }
    if (dim < 8 || dim % 4 || layers < 1 || vocab < 259) {
        fprintf(stderr, "tiny_model: DIM must be a multiple of 4 (>= 8), LAYERS >= 1, VOCAB >= 259\n");
        return 2;
    }
    wisp_model_shape shape = {"tiny", "tiny", arch, dim, layers, 4, 2, 2 * dim, vocab, 64,
                              qwen2 ? 1000000.0f : 10000.0f, qwen2 ? 1e-6f : 1e-5f, qwen2 || gemma, qwen2,
                              .head_dim = strcmp(arch, "qwen3") == 0 || strcmp(arch, "gemma3") == 0 ? 16 : 0,
                              .window = gemma ? 8 : 0,
                              .rope_base_swa = strcmp(arch, "gemma3") == 0 ? 10000.0f : 0.0f,
                              .attn_softcap = strcmp(arch, "gemma2") == 0 ? 50.0f : 0.0f,
                              .final_softcap = strcmp(arch, "gemma2") == 0 ? 30.0f : 0.0f};
    wisp_model_gen g;
    memset(&g, 0, sizeof g);
    g.shape = &shape;
    if (!wisp_qtarget_parse(argv[3], &g.target) || g.target.recipe == WISP_QRECIPE_KEEP) {
        fprintf(stderr, "tiny_model: unknown type %s\n", argv[3]);
        return 2;
    }
    g.seed = 7;
    g.name = "tiny";
    g.n_vocab = vocab;
    g.vocab_kv = copy ? wisp_gguf_vocab_kv_count(&vocab_file) : WISP_SYNTHETIC_VOCAB_KV;
    g.write_vocab = copy ? wisp_gguf_vocab_copy_write : wisp_synthetic_vocab_write;
    g.vocab_user = copy ? (void *)&vocab_file : (void *)&vocab;
    size_t scratch_bytes = wisp_model_gen_scratch_bytes(&g);
    void *scratch = malloc(scratch_bytes ? scratch_bytes : 1);
    wisp_error err = {0};
    wisp_sink count = wisp_count_sink_make();
    if (!scratch || wisp_model_gen_write(&g, &count, scratch, scratch_bytes, &err)) {
        fprintf(stderr, "tiny_model: %s\n", err.message);
        return 1;
    }
    size_t n = (size_t)count.written;
    unsigned char *out = malloc(n);
    wisp_mem_sink m;
    wisp_sink s = wisp_mem_sink_make(&m, out, n);
    if (!out || wisp_model_gen_write(&g, &s, scratch, scratch_bytes, &err)) {
        fprintf(stderr, "tiny_model: %s\n", err.message);
        return 1;
    }
    FILE *f = fopen(argv[1], "wb");
    if (!f || fwrite(out, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "tiny_model: cannot write %s\n", argv[1]);
        return 1;
    }
    free(out);
    free(scratch);
    free(vocab_bytes);
    return 0;
}
