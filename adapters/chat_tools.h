/* OpenAI-style tool definitions: a JSON list of
 * {"type": "function", "function": {"name", "description", "parameters"}},
 * checked before they reach a chat template (which sees them as the `tools`
 * variable) or the tool-call grammar. Keys outside that shape are refused by
 * name; the `parameters` schema itself is the JSON Schema compiler's to judge. */
#ifndef WISP_CHAT_TOOLS_H
#define WISP_CHAT_TOOLS_H

#include "json.h"

/* Check the list at node `arr`; *n_tools gets its length. */
wisp_status wisp_chat_tools_check(const wisp_json *j, int64_t arr, size_t *n_tools, wisp_error *err);

/* The i-th tool's function name node and parameters node (-1: none given). */
int64_t wisp_chat_tool_name(const wisp_json *j, int64_t arr, size_t i);
int64_t wisp_chat_tool_parameters(const wisp_json *j, int64_t arr, size_t i);

#endif
