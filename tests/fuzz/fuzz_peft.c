/* libFuzzer harness: arbitrary bytes as a PEFT adapter. The input is a
 * 4-byte little-endian length L, then L bytes of adapter_config.json, then
 * adapter_model.safetensors (the run script builds seeds that way from real
 * adapters). Against each base model named by WISP_FUZZ_BASES: size the
 * index, open and validate in exactly the planned memory, read the pairs
 * (q/k rows moved into exactly the planned block), run the adapter on the
 * base for a token, and export it again (config JSON and safetensors). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "peft.h"

#define MAX_BASES 4

static fuzz_base bases[MAX_BASES];
static int n_bases = -1;

static void export_again(const wisp_lora *l, const wisp_hparams *hp) {
    wisp_error err;
    size_t len = 0;
    wisp_status s = wisp_peft_write_config(l, hp, "fuzz/base", NULL, 0, &len, &err);
    if (s && s != WISP_ERR_CAPACITY) return;
    char *cfg = fuzz_exact(len + 1);
    if (wisp_peft_write_config(l, hp, "fuzz/base", cfg, len + 1, &len, &err) == WISP_OK && strlen(cfg) != len) abort();
    free(cfg);
    size_t scratch_bytes = wisp_peft_export_bytes(l);
    void *scratch = fuzz_exact(scratch_bytes);
    wisp_sink count = wisp_count_sink_make();
    (void)wisp_peft_write_safetensors(l, hp, scratch, scratch_bytes, &count, &err);
    free(scratch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (n_bases < 0) n_bases = fuzz_load_bases("WISP_FUZZ_BASES", bases, MAX_BASES);
    if (size < 4) return 0;
    uint32_t cfg_len;
    memcpy(&cfg_len, data, 4);
    data += 4;
    size -= 4;
    if (cfg_len > size) cfg_len = (uint32_t)size;
    /* separate exact copies, so reading past either part is caught */
    char *cfg = fuzz_exact(cfg_len);
    memcpy(cfg, data, cfg_len);
    unsigned char *st = fuzz_aligned_copy(data + cfg_len, size - cfg_len);
    size_t st_len = size - cfg_len;
    wisp_error err;
    size_t index_bytes;
    if (wisp_peft_index_bytes(cfg, cfg_len, st, st_len, &index_bytes, &err) == WISP_OK) {
        for (int b = 0; b < n_bases; b++) {
            void *index = fuzz_exact(index_bytes);
            wisp_peft p;
            if (wisp_peft_open(&p, cfg, cfg_len, st, st_len, &bases[b].hp, index, index_bytes, &err) == WISP_OK) {
                void *mem = fuzz_exact(p.lora_bytes);
                wisp_lora lora;
                if (wisp_peft_read(&p, mem, p.lora_bytes, &lora, &err) == WISP_OK) {
                    fuzz_exercise_adapter(&bases[b], &lora);
                    export_again(&lora, &bases[b].hp);
                }
                free(mem);
            }
            free(index);
        }
    }
    free(cfg);
    free(st);
    return 0;
}
