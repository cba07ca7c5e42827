/* yarn_model OUT ARCH [--plain]: write the YaRN test model of
 * tests/lib/gguf_extras.h (llama with attn_factor 0.9, or qwen2) for the
 * command-line tests that give it to llama.cpp; --plain writes the same
 * weights without the rope.scaling keys, to show that the comparison tells
 * YaRN apart from no scaling. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_extras.h"

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[2], "llama") && strcmp(argv[2], "qwen2"))) {
        fprintf(stderr, "usage: yarn_model OUT llama|qwen2 [--plain]\n");
        return 2;
    }
    bool qwen2 = strcmp(argv[2], "qwen2") == 0, plain = argc > 3 && strcmp(argv[3], "--plain") == 0;
    wisp_error err = {0};
    size_t n;
    unsigned char *bytes = plain ? gguf_plain_yarn_model(argv[2], qwen2, &n, &err)
                                 : gguf_yarn_model(argv[2], qwen2, false, qwen2 ? 0.0f : 0.9f, &n, &err);
    if (!bytes) {
        fprintf(stderr, "yarn_model: %s\n", err.message);
        return 1;
    }
    FILE *f = fopen(argv[1], "wb");
    bool ok = f && fwrite(bytes, 1, n, f) == n;
    if (f && fclose(f)) ok = false;
    free(bytes);
    if (!ok) {
        fprintf(stderr, "yarn_model: cannot write %s\n", argv[1]);
        return 1;
    }
    return 0;
}
