/* lora_fixture BASE.gguf OUT.gguf [--seed N] [--rank R | --mixed] [--alpha A] [--rslora]
 *              [--type f32|f16|bf16] [--targets MASK]
 * Writes a seeded random LoRA adapter for BASE as a GGUF LoRA (through wisp's
 * writer), standing in for a trained adapter in the interop tests. --mixed
 * gives ranks 1..6 varying by layer and projection; MASK is a bit set over
 * q,k,v,o,gate,up,down (default 127: all seven). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/test_lora_gguf_fixture.h"
#include "lora_gguf.h"

static int32_t fixed_rank = 4;
static int32_t rank_fixed(int l, int p) { (void)l; (void)p; return fixed_rank; }
static int32_t rank_mixed(int l, int p) { return 1 + (l * 7 + p) % 6; }

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: lora_fixture BASE.gguf OUT.gguf [--seed N] [--rank R|--mixed] [--alpha A] [--rslora] "
                        "[--type f32|f16|bf16] [--targets MASK]\n");
        return 2;
    }
    uint64_t seed = 1;
    float alpha = 8.0f;
    bool rslora = false, mixed = false;
    int type = WISP_TYPE_F32;
    unsigned mask = 0x7f;
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (strcmp(a, "--seed") == 0) seed = strtoull(v, NULL, 10), i++;
        else if (strcmp(a, "--rank") == 0) fixed_rank = atoi(v), i++;
        else if (strcmp(a, "--mixed") == 0) mixed = true;
        else if (strcmp(a, "--alpha") == 0) alpha = strtof(v, NULL), i++;
        else if (strcmp(a, "--rslora") == 0) rslora = true;
        else if (strcmp(a, "--targets") == 0) mask = (unsigned)strtoul(v, NULL, 0), i++;
        else if (strcmp(a, "--type") == 0) {
            type = strcmp(v, "f16") == 0 ? WISP_TYPE_F16 : strcmp(v, "bf16") == 0 ? WISP_TYPE_BF16 : WISP_TYPE_F32;
            i++;
        } else {
            fprintf(stderr, "lora_fixture: unknown option %s\n", a);
            return 2;
        }
    }
    wisp_hparams hp;
    if (!fixture_hparams(argv[1], &hp)) return 1;
    fixture_lora f = fixture_make(&hp, type, mask, mixed ? rank_mixed : rank_fixed, alpha, rslora, seed);
    FILE *out = fopen(argv[2], "wb");
    if (!out) {
        perror(argv[2]);
        return 1;
    }
    wisp_sink count = wisp_count_sink_make();
    wisp_error err = {0};
    wisp_lora_gguf_written w;
    wisp_status st = wisp_lora_gguf_write(&f.lora, wisp_arch_name(hp.arch), NULL, &count, &w, &err);
    unsigned char *buf = st ? NULL : malloc((size_t)count.written);
    if (buf) {
        wisp_mem_sink m;
        wisp_sink s = wisp_mem_sink_make(&m, buf, (size_t)count.written);
        st = wisp_lora_gguf_write(&f.lora, wisp_arch_name(hp.arch), NULL, &s, &w, &err);
        if (!st && fwrite(buf, 1, m.len, out) != m.len) st = WISP_ERR_IO;
    }
    fclose(out);
    if (st) fprintf(stderr, "lora_fixture: %s\n", err.message);
    else fprintf(stderr, "lora_fixture: %d pairs, alpha %g, %d folded\n", f.lora.n_pairs, (double)w.alpha, w.n_folded);
    free(buf);
    fixture_free(&f);
    return st ? 1 : 0;
}
