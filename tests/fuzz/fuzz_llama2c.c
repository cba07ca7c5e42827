/* libFuzzer harness: arbitrary bytes as a llama2.c checkpoint (first part
 * of the input) and tokenizer (the rest), converted to GGUF in memory. */
#include <stdlib.h>
#include <string.h>

#include "llama2c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    uint32_t split;
    memcpy(&split, data, 4);
    data += 4;
    size -= 4;
    split = size ? split % (uint32_t)(size + 1) : 0;
    wisp_llama2c m;
    wisp_error err;
    if (wisp_llama2c_open(&m, data, split, &err) == WISP_OK) {
        wisp_sink s = wisp_count_sink_make();
        (void)wisp_llama2c_to_gguf(&m, data + split, size - split, "fuzz", &s, &err);
    }
    (void)wisp_llama2c_check_tokenizer(data + split, size - split, 512, &err);
    return 0;
}
