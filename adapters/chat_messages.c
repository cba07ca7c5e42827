/* JSON messages -> wisp_chat_message (see chat_messages.h). */
#include "chat_messages.h"

#include <string.h>

static wisp_status take_string(const wisp_json *j, int64_t node, const char **s, size_t *len, char *text,
                               size_t text_cap, size_t *used, wisp_error *err) {
    size_t need = wisp_json_string(j, node, text + *used, text_cap - *used);
    if (need + 1 > text_cap - *used) return wisp_fail(err, WISP_ERR_CAPACITY, "messages: text buffer too small");
    *s = text + *used;
    *len = need;
    *used += need + 1;
    return WISP_OK;
}

wisp_status wisp_chat_messages_from_json(const wisp_json *j, int64_t arr, wisp_chat_message *msgs, size_t cap,
                                         size_t *n, char *text, size_t text_cap, wisp_error *err) {
    if (arr < 0 || !wisp_json_is(j, arr, WISP_JSON_ARRAY))
        return wisp_fail(err, WISP_ERR_FORMAT, "messages: expected a JSON array of {\"role\", \"content\"} objects");
    size_t count = 0, used = 0;
    for (int64_t m = wisp_json_first(j, arr); m >= 0; m = wisp_json_next(j, m), count++) {
        if (!wisp_json_is(j, m, WISP_JSON_OBJECT))
            return wisp_fail(err, WISP_ERR_FORMAT, "messages[%zu]: expected an object", count);
        if (count >= cap) return wisp_fail(err, WISP_ERR_CAPACITY, "messages: more than %zu messages", cap);
        wisp_chat_message *out = &msgs[count];
        memset(out, 0, sizeof *out);
        bool has_role = false, has_content = false;
        for (int64_t k = wisp_json_first(j, m), v; k >= 0; k = wisp_json_next(j, v)) {
            v = wisp_json_next(j, k); /* an object's children alternate key, value */
            char key[64];
            wisp_json_string(j, k, key, sizeof key);
            wisp_status s = WISP_OK;
            if (strcmp(key, "tool_calls") == 0) {
                /* handed to the template as JSON text: it becomes lists and dicts there */
                if (!wisp_json_is(j, v, WISP_JSON_ARRAY))
                    return wisp_fail(err, WISP_ERR_FORMAT, "messages[%zu]: tool_calls must be a list", count);
                const wisp_json_node *node = &j->nodes[v];
                size_t raw = node->end - node->start;
                if (raw + 1 > text_cap - used) return wisp_fail(err, WISP_ERR_CAPACITY, "messages: text buffer too small");
                memcpy(text + used, j->text + node->start, raw);
                text[used + raw] = 0;
                out->tool_calls_json = text + used;
                out->tool_calls_json_len = raw;
                used += raw + 1;
                continue;
            }
            bool is_role = strcmp(key, "role") == 0, is_content = strcmp(key, "content") == 0;
            bool is_id = strcmp(key, "tool_call_id") == 0, is_name = strcmp(key, "name") == 0;
            if (!is_role && !is_content && !is_id && !is_name)
                return wisp_fail(err, WISP_ERR_UNSUPPORTED,
                                 "messages[%zu]: key \"%s\" is not supported (only role, content, tool_calls, tool_call_id, name)",
                                 count, key);
            if (is_content && wisp_json_is(j, v, WISP_JSON_NULL)) { /* an assistant that only calls tools */
                out->content_is_null = true;
                has_content = true;
                continue;
            }
            if (!wisp_json_is(j, v, WISP_JSON_STRING))
                return wisp_fail(err, WISP_ERR_UNSUPPORTED, "messages[%zu]: %s must be a string (content as a list of parts is not supported)",
                                 count, key);
            if (is_role) s = take_string(j, v, &out->role, &out->role_len, text, text_cap, &used, err);
            else if (is_content) s = take_string(j, v, &out->content, &out->content_len, text, text_cap, &used, err);
            else if (is_id) s = take_string(j, v, &out->tool_call_id, &out->tool_call_id_len, text, text_cap, &used, err);
            else s = take_string(j, v, &out->name, &out->name_len, text, text_cap, &used, err);
            if (s) return s;
            has_role |= is_role;
            has_content |= is_content;
        }
        if (!has_role || (!has_content && !out->tool_calls_json))
            return wisp_fail(err, WISP_ERR_FORMAT, "messages[%zu]: needs \"role\" and \"content\" (or \"tool_calls\")", count);
        if (out->content_is_null && !out->tool_calls_json)
            return wisp_fail(err, WISP_ERR_FORMAT, "messages[%zu]: content is null without tool_calls", count);
        if (!has_content) out->content_is_null = true; /* OpenAI omits content beside tool_calls */
    }
    *n = count;
    return WISP_OK;
}
