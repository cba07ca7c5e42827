/* libFuzzer harness: arbitrary bytes as a chat template (after one option
 * byte), planned into exactly its memory and rendered with a small
 * conversation whose content looks like template syntax. Small limits keep
 * each run quick; running out of them must be a clean error.
 * What it drives: core/template_lex.c, template_parse.c, template_eval.c,
 * template_value.c, template_filters.c, template_strings.c, template_render.c. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t opt = data[0];
    const char *src = (const char *)data + 1;
    size_t len = size - 1;
    wisp_template_limits lim = {16384u << (opt & 3), 64, 200000, 64};
    size_t bytes = 0;
    wisp_error err;
    if (wisp_template_plan(src, len, &lim, &bytes, &err) != WISP_OK) return 0;
    void *mem = fuzz_exact(bytes);
    wisp_template *t = NULL;
    if (mem && wisp_template_init(&t, mem, bytes, src, len, &lim, &err) == WISP_OK) {
        static const wisp_chat_message msgs[] = {
            {.role = "system", .role_len = 6, .content = "Be {{ brief }}.", .content_len = 15},
            {.role = "user", .role_len = 4, .content = "Hi {% if %} <|im_end|>", .content_len = 22},
            {.role = "assistant", .role_len = 9, .content = "<think>x</think>\n\nHello", .content_len = 23},
            {.role = "user", .role_len = 4, .content = "  caf\xc3\xa9  ", .content_len = 9},
        };
        wisp_template_vars vars = {msgs, (size_t)((opt >> 2) & 3) + 1, (opt & 16) != 0, (opt & 32) ? "<s>" : NULL,
                                   (opt & 64) ? "</s>" : NULL, 2024, 7, 26, NULL, 0};
        char out[8192];
        size_t n = 0;
        wisp_text_span spans[32];
        size_t n_spans = 0;
        if (wisp_template_render_spans(t, &vars, out, sizeof out, &n, (opt & 128) ? spans : NULL, 32, &n_spans, &err) ==
            WISP_OK) {
            if (n >= sizeof out) abort();
            for (size_t i = 0; i < n_spans; i++) /* content pieces lie inside the text, in order */
                if (spans[i].start + spans[i].len > n || (i && spans[i].start < spans[i - 1].start + spans[i - 1].len)) abort();
        }
    }
    free(mem);
    return 0;
}
