/* libFuzzer harness: arbitrary bytes as a PEFT prompt- or prefix-tuning
 * adapter. The input is a 4-byte little-endian length L, then L bytes of
 * adapter_config.json, then adapter_model.safetensors (as fuzz_peft). Against
 * each base named by WISP_FUZZ_BASES: size the memory, read in exactly that
 * memory, convert every value (a prefix's into the engine's order and back),
 * evaluate the virtual tokens (or put the prefix in the KV cache) on the base
 * when they fit its context, and write both files again. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "peft_prompt.h"

#define MAX_BASES 4

static fuzz_base bases[MAX_BASES];
static int n_bases = -1;

static void use(fuzz_base *b, const wisp_prompt_adapter *a) {
    size_t n = (size_t)a->n_virtual * wisp_prompt_width(a);
    float *rows = fuzz_exact(n * sizeof(float));
    for (size_t i = 0; i < n; i++) rows[i] = wisp_prompt_engine_value(a, b->hp.arch, i);
    wisp_error err;
    if (a->prefix) { /* the reader checked the shape against this base: back to PEFT's order, the same values */
        float *peft = fuzz_exact(n * sizeof(float));
        wisp_prefix_to_peft(rows, &b->hp, a->n_virtual, peft);
        for (size_t i = 0; i < n; i++)
            if (peft[i] != wisp_prompt_value(a, i)) abort();
        free(peft);
    }
    if (b->ctx && (a->prefix || a->dim == b->hp.dim)) {
        wisp_rewind(b->ctx, 0);
        /* a context too small (or a sliding-window base, for a prefix) refuses */
        if (a->prefix) (void)wisp_eval_kv_prefix(b->ctx, rows, a->n_virtual, &err);
        else (void)wisp_eval_embeddings(b->ctx, rows, a->n_virtual, &err);
    }
    free(rows);
    size_t len = 0;
    wisp_status s = wisp_prompt_write_config(a, NULL, 0, &len, &err);
    if (s && s != WISP_ERR_CAPACITY) return;
    char *cfg = fuzz_exact(len + 1);
    if (wisp_prompt_write_config(a, cfg, len + 1, &len, &err) == WISP_OK && strlen(cfg) != len) abort();
    free(cfg);
    wisp_sink count = wisp_count_sink_make();
    (void)wisp_prompt_write_safetensors(a, &count, &err);
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
    char *cfg = fuzz_exact(cfg_len);
    memcpy(cfg, data, cfg_len);
    unsigned char *st = fuzz_aligned_copy(data + cfg_len, size - cfg_len);
    size_t st_len = size - cfg_len;
    wisp_error err;
    size_t bytes;
    if (wisp_prompt_index_bytes(cfg, cfg_len, st, st_len, &bytes, &err) == WISP_OK) {
        for (int b = 0; b < n_bases; b++) {
            void *mem = fuzz_exact(bytes);
            wisp_prompt_adapter a;
            if (wisp_prompt_read(cfg, cfg_len, st, st_len, &bases[b].hp, mem, bytes, &a, &err) == WISP_OK) use(&bases[b], &a);
            free(mem);
        }
    }
    free(cfg);
    free(st);
    return 0;
}
