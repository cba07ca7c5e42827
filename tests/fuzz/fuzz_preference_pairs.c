/* libFuzzer harness: arbitrary bytes as DPO preference pairs JSONL
 * (adapters/preference_pairs.c); both sides are rewritten into planned
 * buffers, whose every byte the output must stay within, and each side's
 * output, when it succeeds, must itself parse line by line as JSON. */
#include <stdlib.h>
#include <string.h>

#include "preference_pairs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wisp_error err;
    size_t cap, cap_nodes, len;
    if (wisp_pairs_plan((const char *)data, size, &cap, &cap_nodes, &err)) return 0;
    char *out = malloc(cap);
    wisp_json_node *nodes = malloc(cap_nodes * sizeof *nodes);
    for (int side = 0; out && nodes && side < 2; side++) {
        if (wisp_pairs_side((const char *)data, size, (wisp_pair_side)side, nodes, cap_nodes, out, cap, &len, &err))
            continue;
        if (len >= cap || out[len] != 0) abort();
        for (size_t pos = 0; pos < len;) { /* every record written is valid JSON */
            const char *nl = memchr(out + pos, '\n', len - pos);
            size_t end = nl ? (size_t)(nl - out) : len;
            wisp_json j;
            if (end > pos && wisp_json_parse(&j, out + pos, end - pos, nodes, cap_nodes, NULL, &err)) abort();
            pos = end + 1;
        }
    }
    free(out);
    free(nodes);
    return 0;
}
