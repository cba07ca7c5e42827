/* Each built-in chat format against the real template of its family from
 * ../shared/golden/chat: for the conversations where the family's template
 * and the generic format agree by design, the rendering must be byte-exact
 * (and raise where the real one raises). Every format is compared. */
#include <stdlib.h>
#include <string.h>

#include "chat_formats.h"
#include "chat_messages.h"
#include "check.h"
#include "json_file.h"
#include "template.h"

enum { ALL, WITH_SYSTEM, WITHOUT_SYSTEM, LLAMA_DATE };

typedef struct row {
    const char *format, *model;
    int which; /* the conversations compared */
} row;

static const row rows[] = {
    {"chatml", "HuggingFaceTB/SmolLM2-135M-Instruct", WITH_SYSTEM}, /* SmolLM2 adds a default system prompt */
    {"chatml", "Qwen/Qwen2.5-0.5B-Instruct", WITH_SYSTEM},          /* so does Qwen2.5 */
    {"llama3", "meta-llama/Llama-3.2-1B-Instruct", LLAMA_DATE},     /* 3.2 puts a date block in the system turn */
    {"gemma", "google/gemma-3-1b-it", ALL},
    {"gemma", "google/gemma-2-2b-it", WITHOUT_SYSTEM},              /* gemma 2 refuses system turns */
    {"phi3", "microsoft/Phi-3-mini-4k-instruct", ALL},
    {"phi4", "microsoft/phi-4", ALL},
    {"zephyr", "TinyLlama/TinyLlama-1.1B-Chat-v1.0", ALL},
    {"mistral", "mistralai/Mistral-7B-Instruct-v0.3", ALL},
};

static char *json_str(const wisp_json *j, int64_t node) {
    size_t n = wisp_json_string(j, node, NULL, 0);
    char *s = malloc(n + 1);
    wisp_json_string(j, node, s, n + 1);
    return s;
}

static wisp_template *load(const char *src, void **mem) {
    size_t bytes = 0;
    wisp_error err = {0};
    wisp_template *t = NULL;
    if (wisp_template_plan(src, strlen(src), NULL, &bytes, &err)) return NULL;
    *mem = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (wisp_template_init(&t, *mem, bytes, src, strlen(src), NULL, &err)) {
        fprintf(stderr, "init: %s\n", err.message);
        return NULL;
    }
    return t;
}

static void compare_all(void) {
    const char *tpath = shared_path("golden/chat/templates.json"), *cpath = shared_path("golden/chat/cases.json");
    if (!tpath || !cpath) {
        CHECK(false, "golden/chat/{templates,cases}.json missing under WISP_SHARED");
        return;
    }
    wisp_json tj, cj;
    REQUIRE(json_file_load_pair(tpath, &tj, cpath, &cj), "cannot read the golden set");
    size_t n_formats;
    const wisp_chat_format *formats = wisp_chat_formats(&n_formats);
    for (size_t f = 0; f < n_formats; f++) {
        int compared = 0;
        void *mem = NULL;
        wisp_template *t = load(formats[f].template, &mem);
        CHECK(t != NULL, "format %s does not parse", formats[f].name);
        for (size_t r = 0; t && r < sizeof rows / sizeof rows[0]; r++) {
            if (strcmp(rows[r].format, formats[f].name) != 0) continue;
            int64_t tpl = -1;
            for (int64_t x = wisp_json_first(&tj, 0); x >= 0; x = wisp_json_next(&tj, x))
                if (wisp_json_string_eq(&tj, wisp_json_get(&tj, x, "model"), rows[r].model)) tpl = x;
            REQUIRE(tpl >= 0, "no template for %s", rows[r].model);
            int64_t bn = wisp_json_get(&tj, tpl, "bos_token"), en = wisp_json_get(&tj, tpl, "eos_token");
            char *bos = wisp_json_is(&tj, bn, WISP_JSON_STRING) ? json_str(&tj, bn) : NULL;
            char *eos = wisp_json_is(&tj, en, WISP_JSON_STRING) ? json_str(&tj, en) : NULL;
            for (int64_t c = wisp_json_first(&cj, 0); c >= 0; c = wisp_json_next(&cj, c)) {
                if (!wisp_json_string_eq(&cj, wisp_json_get(&cj, c, "model"), rows[r].model)) continue;
                wisp_chat_message msgs[32];
                size_t n = 0;
                char *text = malloc(cj.len + 256);
                wisp_error err = {0};
                REQUIRE(wisp_chat_messages_from_json(&cj, wisp_json_get(&cj, c, "messages"), msgs, 32, &n, text,
                                                     cj.len, &err) == WISP_OK, "%s", err.message);
                bool system = n && strcmp(msgs[0].role, "system") == 0;
                if ((rows[r].which == WITH_SYSTEM || rows[r].which == LLAMA_DATE) && !system) { free(text); continue; }
                if (rows[r].which == WITHOUT_SYSTEM && system) { free(text); continue; }
                char dated[1024];
                if (rows[r].which == LLAMA_DATE) { /* what Llama 3.2's template writes into the system turn */
                    snprintf(dated, sizeof dated, "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n%.*s",
                             (int)msgs[0].content_len, msgs[0].content);
                    msgs[0].content = dated;
                    msgs[0].content_len = strlen(dated);
                }
                bool agp = false, want_error = false;
                wisp_json_bool(&cj, wisp_json_get(&cj, c, "add_generation_prompt"), &agp);
                wisp_json_bool(&cj, wisp_json_get(&cj, c, "error"), &want_error);
                wisp_template_vars vars = {msgs, n, agp, bos, eos, 2024, 7, 26, NULL, 0};
                char out[16384];
                size_t len = 0;
                wisp_status s = wisp_template_render(t, &vars, out, sizeof out, &len, &err);
                char *conv = json_str(&cj, wisp_json_get(&cj, c, "conversation_id"));
                if (want_error) {
                    CHECK(s == WISP_ERR_ARG, "%s vs %s/%s: the real template raises, the format gave %d", formats[f].name,
                          rows[r].model, conv, s);
                } else {
                    char *want = json_str(&cj, wisp_json_get(&cj, c, "expected"));
                    CHECK(s == WISP_OK && strcmp(out, want) == 0, "%s vs %s/%s agp=%d:\n--- want ---\n%s\n--- got ---\n%s\n",
                          formats[f].name, rows[r].model, conv, agp, want, s ? err.message : out);
                    free(want);
                }
                compared++;
                free(conv);
                free(text);
            }
            free(bos);
            free(eos);
        }
        printf("format %-8s compared with real templates on %d cases\n", formats[f].name, compared);
        CHECK(compared >= 6, "format %s compared on only %d cases", formats[f].name, compared);
        free(mem);
    }
    CHECK(wisp_chat_format_find("nope") == NULL && wisp_chat_format_find("chatml") != NULL, "lookup by name");
    json_file_free(&tj);
    json_file_free(&cj);
}

int main(void) {
    compare_all();
    return check_report("test_chat_formats");
}
