/* Every chat-template case of ../shared/golden/chat: real models' templates
 * rendered with Hugging Face's semantics must come out byte for byte, and the
 * cases where the template raises must raise with the same message. */
#include <stdlib.h>
#include <string.h>

#include "chat_messages.h"
#include "check.h"
#include "json_file.h"
#include "template.h"

static char *json_str(const wisp_json *j, int64_t node) {
    size_t n = wisp_json_string(j, node, NULL, 0);
    char *s = malloc(n + 1);
    wisp_json_string(j, node, s, n + 1);
    return s;
}

static int64_t template_of(const wisp_json *tj, const char *model) {
    for (int64_t t = wisp_json_first(tj, 0); t >= 0; t = wisp_json_next(tj, t))
        if (wisp_json_string_eq(tj, wisp_json_get(tj, t, "model"), model)) return t;
    return -1;
}

int main(void) {
    const char *tpath = shared_path("golden/chat/templates.json"), *cpath = shared_path("golden/chat/cases.json");
    if (!tpath || !cpath) {
        fprintf(stderr, "FAIL test_template_golden: golden/chat/{templates,cases}.json missing under WISP_SHARED\n");
        return 1;
    }
    wisp_json tj, cj;
    if (!json_file_load_pair(tpath, &tj, cpath, &cj)) return 1;
    int n_cases = 0, n_exact = 0, n_raised = 0;
    for (int64_t c = wisp_json_first(&cj, 0); c >= 0; c = wisp_json_next(&cj, c)) {
        n_cases++;
        char *model = json_str(&cj, wisp_json_get(&cj, c, "model"));
        char *conv = json_str(&cj, wisp_json_get(&cj, c, "conversation_id"));
        int64_t t = template_of(&tj, model);
        CHECK(t >= 0, "no template for %s", model);
        if (t < 0) { free(model); free(conv); continue; }
        char *src = json_str(&tj, wisp_json_get(&tj, t, "template"));
        int64_t bos_node = wisp_json_get(&tj, t, "bos_token"), eos_node = wisp_json_get(&tj, t, "eos_token");
        char *bos = wisp_json_is(&tj, bos_node, WISP_JSON_STRING) ? json_str(&tj, bos_node) : NULL;
        char *eos = wisp_json_is(&tj, eos_node, WISP_JSON_STRING) ? json_str(&tj, eos_node) : NULL;

        wisp_error err = {0};
        size_t bytes = 0;
        wisp_status s = wisp_template_plan(src, strlen(src), NULL, &bytes, &err);
        CHECK(s == WISP_OK, "%s: plan: %s", model, err.message);
        void *mem = s == WISP_OK ? aligned_alloc(64, (bytes + 63) / 64 * 64) : NULL;
        wisp_template *tpl = NULL;
        if (mem) s = wisp_template_init(&tpl, mem, bytes, src, strlen(src), NULL, &err);
        CHECK(tpl && s == WISP_OK, "%s: init: %s", model, err.message);

        wisp_chat_message msgs[32];
        size_t n_msgs = 0;
        char *text = malloc(cj.len);
        s = wisp_chat_messages_from_json(&cj, wisp_json_get(&cj, c, "messages"), msgs, 32, &n_msgs, text, cj.len, &err);
        CHECK(s == WISP_OK, "%s/%s: messages: %s", model, conv, err.message);
        bool agp = false;
        wisp_json_bool(&cj, wisp_json_get(&cj, c, "add_generation_prompt"), &agp);
        wisp_template_vars vars = {msgs, n_msgs, agp, bos, eos, 2024, 7, 26, NULL, 0};
        char out[16384];
        size_t len = 0;
        if (tpl && s == WISP_OK) s = wisp_template_render(tpl, &vars, out, sizeof out, &len, &err);
        bool want_error = false;
        wisp_json_bool(&cj, wisp_json_get(&cj, c, "error"), &want_error);
        if (want_error) {
            char *msg = json_str(&cj, wisp_json_get(&cj, c, "error_message"));
            char want[512];
            snprintf(want, sizeof want, "%s%s", WISP_TEMPLATE_RAISED, msg);
            CHECK(s == WISP_ERR_ARG && strcmp(err.message, want) == 0, "%s/%s agp=%d: want raise '%s', got status %d '%s'",
                  model, conv, agp, msg, s, s ? err.message : out);
            n_raised += s == WISP_ERR_ARG && strcmp(err.message, want) == 0;
            free(msg);
        } else {
            char *want = json_str(&cj, wisp_json_get(&cj, c, "expected"));
            bool same = s == WISP_OK && len == strlen(want) && memcmp(out, want, len) == 0;
            CHECK(same, "%s/%s agp=%d: %s\n--- want ---\n%s\n--- got ---\n%s\n---", model, conv, agp,
                  s ? err.message : "differs", want, s ? "" : out);
            n_exact += same;
            free(want);
        }
        free(text);
        free(mem);
        free(src);
        free(bos);
        free(eos);
        free(model);
        free(conv);
    }
    printf("chat templates: %d/%d cases byte-exact, %d raised as expected\n", n_exact + n_raised, n_cases, n_raised);
    CHECK(n_cases == 160, "the golden set has 160 cases, read %d", n_cases);
    json_file_free(&tj);
    json_file_free(&cj);
    return check_report("test_template_golden");
}
