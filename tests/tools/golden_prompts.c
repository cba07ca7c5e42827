/* golden_prompts FILE.json: print each case's prompt on its own line (for
 * building `wisp logits -p ...` command lines in shell tests). */
#include <stdio.h>

#include "json_file.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: golden_prompts FILE.json\n");
        return 2;
    }
    wisp_json j;
    if (!json_file_load(argv[1], &j)) return 1;
    int64_t cases = wisp_json_get(&j, 0, "cases");
    for (int64_t c = wisp_json_first(&j, cases); c >= 0; c = wisp_json_next(&j, c)) {
        char buf[4096];
        wisp_json_string(&j, wisp_json_get(&j, c, "prompt"), buf, sizeof buf);
        puts(buf);
    }
    json_file_free(&j);
    return 0;
}
