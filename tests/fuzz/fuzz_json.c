/* libFuzzer harness: arbitrary bytes as JSON; walk the whole tree and read
 * every value. */
#include <stdlib.h>

#include "json.h"

static void walk(const wisp_json *j, int64_t node, int depth) {
    if (node < 0 || depth > WISP_JSON_MAX_DEPTH + 1) return;
    double d;
    int64_t i;
    bool b;
    char buf[64];
    (void)wisp_json_number(j, node, &d);
    (void)wisp_json_int(j, node, &i);
    (void)wisp_json_bool(j, node, &b);
    (void)wisp_json_string(j, node, buf, sizeof buf);
    (void)wisp_json_get(j, node, "key");
    for (int64_t c = wisp_json_first(j, node); c >= 0; c = wisp_json_next(j, c)) walk(j, c, depth + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static wisp_json_node nodes[4096];
    wisp_json j;
    wisp_error err;
    if (wisp_json_parse(&j, (const char *)data, size, nodes, 4096, NULL, &err) == WISP_OK) walk(&j, 0, 0);
    return 0;
}
