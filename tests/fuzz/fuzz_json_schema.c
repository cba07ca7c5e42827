/* libFuzzer harness: arbitrary bytes as a JSON Schema. Whatever schema the
 * compiler accepts must give a grammar the GBNF compiler accepts too (a
 * refusal there would be a bug in the schema compiler), which then matches
 * a few fixed JSON texts. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "grammar.h"
#include "json.h"
#include "json_schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static wisp_json_node nodes[2048];
    wisp_json j;
    wisp_error err;
    char *text = fuzz_exact(size);
    if (size) memcpy(text, data, size);
    if (wisp_json_parse(&j, text, size, nodes, 2048, NULL, &err) == WISP_OK) {
        size_t len = 0;
        wisp_status st = wisp_json_schema_to_gbnf(&j, NULL, 0, &len, &err);
        if (st == WISP_ERR_CAPACITY && len < (1u << 22)) {
            char *gbnf = fuzz_exact(len + 1);
            if (wisp_json_schema_to_gbnf(&j, gbnf, len + 1, &len, &err) != WISP_OK) abort(); /* sized, so it must fit */
            size_t bytes;
            st = wisp_grammar_plan(gbnf, len, &bytes, &err);
            if (st == WISP_ERR_FORMAT) {
                fprintf(stderr, "schema compiler wrote a bad grammar: %s\n%s\n", err.message, gbnf);
                abort();
            }
            if (st == WISP_OK) {
                wisp_matcher_limits lim = {256, 4096, 4096, 0, 0};
                size_t total = bytes + wisp_matcher_plan(NULL, &lim);
                void *mem = fuzz_exact(total);
                wisp_arena a;
                wisp_arena_init(&a, mem, total);
                const wisp_grammar *g;
                wisp_matcher m;
                st = wisp_grammar_compile(gbnf, len, &a, &g, &err);
                if (st == WISP_ERR_FORMAT) {
                    fprintf(stderr, "schema compiler wrote a bad grammar: %s\n%s\n", err.message, gbnf);
                    abort();
                }
                if (st == WISP_OK && wisp_matcher_init(&m, g, &lim, &a, &err) == WISP_OK) {
                    static const char *const samples[] = {"{}", "[]", "{\"a\": 1}", "\"x\"", "-12.5", "null",
                                                          "{\"name\": \"Ada\", \"age\": 36}", "[1, 2, 3]"};
                    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
                        size_t ok;
                        if (wisp_matcher_reset(&m, &err)) break;
                        (void)wisp_matcher_accept(&m, (const uint8_t *)samples[i], strlen(samples[i]), &ok, &err);
                    }
                }
                free(mem);
            }
            free(gbnf);
        }
    }
    free(text);
    return 0;
}
