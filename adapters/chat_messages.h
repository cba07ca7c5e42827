/* A conversation as JSON (`[{"role": ..., "content": ...}, ...]`, the
 * OpenAI / Hugging Face messages format) read into wisp_chat_message records
 * for the template renderer, with OpenAI's tool-calling keys (`tool_calls`,
 * `tool_call_id`, `name`; content null beside tool_calls). Any other key and
 * non-string content are refused by name, never dropped. */
#ifndef WISP_CHAT_MESSAGES_H
#define WISP_CHAT_MESSAGES_H

#include <stddef.h>

#include "json.h"
#include "template.h"

/* Messages of the array node `arr` into msgs[0..cap); their strings are
 * unescaped into text[0..text_cap) (the JSON text's length always suffices).
 * *n gets the count. */
wisp_status wisp_chat_messages_from_json(const wisp_json *j, int64_t arr, wisp_chat_message *msgs, size_t cap,
                                         size_t *n, char *text, size_t text_cap, wisp_error *err);

#endif
