/* Checking OpenAI-style tool definitions (see chat_tools.h). */
#include "chat_tools.h"

#include <string.h>

static bool key_is_one_of(const char *key, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(key, names[i]) == 0) return true;
    return false;
}

static int64_t function_of(const wisp_json *j, int64_t arr, size_t i) {
    int64_t tool = wisp_json_at(j, arr, i);
    return tool < 0 ? -1 : wisp_json_get(j, tool, "function");
}

int64_t wisp_chat_tool_name(const wisp_json *j, int64_t arr, size_t i) {
    int64_t f = function_of(j, arr, i);
    return f < 0 ? -1 : wisp_json_get(j, f, "name");
}

int64_t wisp_chat_tool_parameters(const wisp_json *j, int64_t arr, size_t i) {
    int64_t f = function_of(j, arr, i);
    return f < 0 ? -1 : wisp_json_get(j, f, "parameters");
}

wisp_status wisp_chat_tools_check(const wisp_json *j, int64_t arr, size_t *n_tools, wisp_error *err) {
    static const char *const tool_keys[] = {"type", "function"};
    static const char *const function_keys[] = {"name", "description", "parameters"};
    if (arr < 0 || !wisp_json_is(j, arr, WISP_JSON_ARRAY))
        return wisp_fail(err, WISP_ERR_FORMAT, "tools: expected a JSON list of {\"type\": \"function\", \"function\": {...}}");
    size_t count = 0;
    for (int64_t t = wisp_json_first(j, arr); t >= 0; t = wisp_json_next(j, t), count++) {
        if (!wisp_json_is(j, t, WISP_JSON_OBJECT)) return wisp_fail(err, WISP_ERR_FORMAT, "tools[%zu]: expected an object", count);
        for (int64_t k = wisp_json_first(j, t), v; k >= 0; k = wisp_json_next(j, v)) {
            v = wisp_json_next(j, k);
            char key[64];
            wisp_json_string(j, k, key, sizeof key);
            if (!key_is_one_of(key, tool_keys, 2))
                return wisp_fail(err, WISP_ERR_UNSUPPORTED, "tools[%zu]: key \"%s\" is not supported (only type, function)", count, key);
        }
        int64_t type = wisp_json_get(j, t, "type"), f = wisp_json_get(j, t, "function");
        if (type < 0 || !wisp_json_string_eq(j, type, "function"))
            return wisp_fail(err, WISP_ERR_UNSUPPORTED, "tools[%zu]: only \"type\": \"function\" tools are supported", count);
        if (f < 0 || !wisp_json_is(j, f, WISP_JSON_OBJECT))
            return wisp_fail(err, WISP_ERR_FORMAT, "tools[%zu]: needs a \"function\" object", count);
        for (int64_t k = wisp_json_first(j, f), v; k >= 0; k = wisp_json_next(j, v)) {
            v = wisp_json_next(j, k);
            char key[64];
            wisp_json_string(j, k, key, sizeof key);
            if (!key_is_one_of(key, function_keys, 3))
                return wisp_fail(err, WISP_ERR_UNSUPPORTED,
                                 "tools[%zu].function: key \"%s\" is not supported (only name, description, parameters)", count, key);
        }
        int64_t name = wisp_json_get(j, f, "name"), desc = wisp_json_get(j, f, "description"),
                params = wisp_json_get(j, f, "parameters");
        char buf[2];
        if (name < 0 || !wisp_json_is(j, name, WISP_JSON_STRING) || wisp_json_string(j, name, buf, sizeof buf) == 0)
            return wisp_fail(err, WISP_ERR_FORMAT, "tools[%zu].function: needs a non-empty string \"name\"", count);
        if (desc >= 0 && !wisp_json_is(j, desc, WISP_JSON_STRING))
            return wisp_fail(err, WISP_ERR_FORMAT, "tools[%zu].function: description must be a string", count);
        if (params >= 0 && !wisp_json_is(j, params, WISP_JSON_OBJECT))
            return wisp_fail(err, WISP_ERR_FORMAT, "tools[%zu].function: parameters must be a JSON Schema object", count);
    }
    if (count == 0) return wisp_fail(err, WISP_ERR_FORMAT, "tools: the list is empty");
    *n_tools = count;
    return WISP_OK;
}
