/* golden_prompts FILE.json: print each case's prompt on its own line (for
 * building `wisp logits -p ...` command lines in shell tests). */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "json.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: golden_prompts FILE.json\n");
        return 2;
    }
    size_t n, need = 0;
    char *text = (char *)read_file(argv[1], &n);
    wisp_json j;
    wisp_error err = {0};
    if (!text) return 1;
    wisp_json_parse(&j, text, n, NULL, 0, &need, &err);
    wisp_json_node *nodes = malloc((need ? need : 1) * sizeof *nodes);
    if (!nodes || wisp_json_parse(&j, text, n, nodes, need, NULL, &err)) {
        fprintf(stderr, "%s: %s\n", argv[1], err.message);
        return 1;
    }
    int64_t cases = wisp_json_get(&j, 0, "cases");
    for (int64_t c = wisp_json_first(&j, cases); c >= 0; c = wisp_json_next(&j, c)) {
        char buf[4096];
        wisp_json_string(&j, wisp_json_get(&j, c, "prompt"), buf, sizeof buf);
        puts(buf);
    }
    return 0;
}
