/* libFuzzer harness: arbitrary bytes as the JSON a chat template receives
 * (the `tools` list and an assistant message's `tool_calls`), read by
 * core/template_json.c into template values and printed back with tojson
 * (plain and indented) by a template that walks them as real ones do. Bad
 * JSON must be a clean error; good JSON must render within the output. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "template.h"

static const char src[] =
    "{% if tools is not none %}{{ tools | tojson }}{% for t in tools %}{{ t | tojson(indent=4) }}{% endfor %}{% endif %}"
    "{% for m in messages %}{% if m.tool_calls is defined %}{% for c in m.tool_calls %}"
    "{{ c | tojson }}{% if c is mapping and c.function is defined %}{{ c.function.name }}{% endif %}"
    "{% endfor %}{% endif %}{{ m.content }}{% endfor %}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    uint8_t opt = data[0];
    const char *json = (const char *)data + 1;
    size_t len = size - 1;
    wisp_template_limits lim = {65536, 64, 200000, 64};
    size_t bytes = 0;
    wisp_error err;
    if (wisp_template_plan(src, sizeof src - 1, &lim, &bytes, &err) != WISP_OK) abort(); /* the harness's own template */
    void *mem = fuzz_exact(bytes);
    wisp_template *t = NULL;
    if (mem && wisp_template_init(&t, mem, bytes, src, sizeof src - 1, &lim, &err) != WISP_OK) abort();
    if (mem) {
        wisp_chat_message msgs[2] = {{.role = "user", .role_len = 4, .content = "Hi", .content_len = 2},
                                     {.role = "assistant", .role_len = 9, .content_is_null = true}};
        if (opt & 1) { msgs[1].tool_calls_json = json; msgs[1].tool_calls_json_len = len; }
        wisp_template_vars vars = {msgs, 2, false, NULL, NULL, 2024, 7, 26, (opt & 2) ? json : NULL, (opt & 2) ? len : 0};
        char out[16384];
        size_t n = 0;
        if (wisp_template_render(t, &vars, out, sizeof out, &n, &err) == WISP_OK && n >= sizeof out) abort();
    }
    free(mem);
    return 0;
}
