/* libFuzzer harness: arbitrary bytes as a llama.cpp GGUF LoRA adapter.
 * Parse the GGUF, check and count the pairs, read them into exactly the
 * planned table without a base and against each base model named by
 * WISP_FUZZ_BASES, run the adapter on that base for a token, and write it
 * back as a GGUF LoRA (the writer must take what the reader gave). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "lora_gguf.h"

#define MAX_BASES 4

static fuzz_base bases[MAX_BASES];
static int n_bases = -1;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (n_bases < 0) n_bases = fuzz_load_bases("WISP_FUZZ_BASES", bases, MAX_BASES);
    unsigned char *bytes = fuzz_aligned_copy(data, size);
    wisp_gguf g;
    wisp_error err;
    wisp_lora_gguf_info info;
    if (wisp_gguf_open(&g, bytes, size, &err) == WISP_OK && wisp_lora_gguf_plan(&g, &info, &err) == WISP_OK) {
        wisp_lora_pair *pairs = fuzz_exact(info.pairs_bytes);
        for (int b = -1; b < n_bases; b++) {
            wisp_lora lora;
            if (wisp_lora_gguf_read(&g, b < 0 ? NULL : &bases[b].hp, pairs, (size_t)info.n_pairs, &lora, &err))
                continue;
            if (b >= 0) fuzz_exercise_adapter(&bases[b], &lora);
            wisp_sink count = wisp_count_sink_make();
            wisp_lora_gguf_written w;
            (void)wisp_lora_gguf_write(&lora, b < 0 ? "llama" : wisp_arch_name(bases[b].hp.arch), "fuzz", &count, &w,
                                       &err);
        }
        free(pairs);
    }
    free(bytes);
    return 0;
}
