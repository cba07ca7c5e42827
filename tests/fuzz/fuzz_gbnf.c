/* libFuzzer harness: arbitrary bytes as a GBNF grammar, then (after the first
 * NUL, if any) a text to match. Compile in exactly the planned memory, then
 * feed the text byte by byte, asking what may come next at every step.
 * What it drives: core/grammar_parse.c (the compiler) and core/grammar_match.c
 * (the matcher). */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t glen = nul ? (size_t)(nul - data) : size;
    const uint8_t *text = nul ? nul + 1 : NULL;
    size_t tlen = nul ? size - glen - 1 : 0;
    char *g = fuzz_exact(glen);
    if (glen) memcpy(g, data, glen);
    size_t bytes;
    wisp_error err;
    if (wisp_grammar_plan(g, glen, &bytes, &err) == WISP_OK) {
        wisp_matcher_limits lim = {256, 2048, 2048, 0, 0};
        size_t total = bytes + wisp_matcher_plan(NULL, &lim);
        void *mem = fuzz_exact(total);
        wisp_arena a;
        wisp_arena_init(&a, mem, total);
        const wisp_grammar *gr;
        wisp_matcher m;
        if (wisp_grammar_compile(g, glen, &a, &gr, &err) == WISP_OK) {
            if (a.used != bytes) abort(); /* the plan must be exact */
            if (wisp_matcher_init(&m, gr, &lim, &a, &err) == WISP_OK) {
                for (size_t i = 0; i < tlen; i++) {
                    uint8_t next[32];
                    wisp_matcher_next_bytes(&m, m.cur, next);
                    bool may = (next[text[i] >> 3] >> (text[i] & 7)) & 1;
                    size_t ok;
                    wisp_status st = wisp_matcher_accept(&m, text + i, 1, &ok, &err);
                    if (st == WISP_OK && !may) abort(); /* accepted a byte it said could not come */
                    if (st == WISP_ERR_FORMAT && may) abort();
                    if (st) break;
                }
                (void)wisp_matcher_can_end(&m);
            }
        }
        free(mem);
    }
    free(g);
    return 0;
}
