/* Chat templates: the subset of Jinja that real models' `tokenizer.chat_template`
 * strings use, rendered exactly as Hugging Face's apply_chat_template does
 * (Jinja2 with trim_blocks and lstrip_blocks, no autoescape, keep_trailing_newline
 * off, loop controls, `raise_exception`, `strftime_now`).
 *
 * Memory: a template lives in one caller block whose size wisp_template_plan
 * reports exactly (the normalised source, its string literals, the syntax tree,
 * the variable stack and a work heap for the values rendering creates). Any
 * construct outside the subset is refused with an error that names it, at parse
 * time when it can be seen there (statements, filters, tests), else at render
 * time (a method or attribute of a value). */
#ifndef WISP_TEMPLATE_H
#define WISP_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "text_span.h"

typedef struct wisp_template wisp_template;

/* Sizes of the parts whose use depends on the conversation, not the template. */
typedef struct wisp_template_limits {
    size_t work_bytes;      /* values made while rendering (strings, lists, namespaces); default 256 KiB */
    uint32_t max_variables; /* live variables over all scopes; default 256 */
    uint32_t max_steps;     /* evaluation steps per render, against runaway loops; default 10 million */
    uint32_t max_segments;  /* pieces of message text tracked inside made strings; default 4096 */
} wisp_template_limits;


/* One message: `role` and `content` (UTF-8, not NUL-terminated necessarily).
 * The OpenAI tool-calling keys are optional (NULL: the key is absent):
 * `tool_calls` (an assistant's calls) is JSON text of a list, given to the
 * template as lists and dicts; `tool_call_id` and `name` (a `tool` message's
 * answer) are strings. content_is_null: content is JSON null (None), as an
 * assistant message that only calls tools may have. */
typedef struct wisp_chat_message {
    const char *role;
    size_t role_len;
    const char *content;
    size_t content_len;
    bool content_is_null;
    const char *tool_calls_json;
    size_t tool_calls_json_len;
    const char *tool_call_id;
    size_t tool_call_id_len;
    const char *name;
    size_t name_len;
} wisp_chat_message;

/* What a template sees. bos/eos NULL: the variable is undefined, as when a
 * tokenizer config has no such token. The date is what `strftime_now` formats
 * (always midnight of that day). */
typedef struct wisp_template_vars {
    const wisp_chat_message *messages;
    size_t n_messages;
    bool add_generation_prompt;
    const char *bos_token;
    const char *eos_token;
    int year, month, day;
    /* OpenAI-style tool definitions as JSON text of a list; NULL: `tools` is
     * None, as apply_chat_template passes when no tools are given. */
    const char *tools_json;
    size_t tools_json_len;
} wisp_template_vars;

/* Fill unset (zero) limits with the defaults. */
void wisp_template_limits_resolve(wisp_template_limits *lim);

/* Exact bytes wisp_template_init needs for this source and limits. */
wisp_status wisp_template_plan(const char *src, size_t len, const wisp_template_limits *lim, size_t *bytes,
                               wisp_error *err);

/* Parse `src` into `mem` (16-byte aligned, at least the planned size). The
 * source is copied: the caller's text may go away afterwards. */
wisp_status wisp_template_init(wisp_template **out, void *mem, size_t size, const char *src, size_t len,
                               const wisp_template_limits *lim, wisp_error *err);

/* Render into out[0..cap) (NUL-terminated); *len gets the text's length.
 * A template's raise_exception(msg) returns WISP_ERR_ARG with the message
 * "template raised: <msg>"; text longer than cap-1 returns WISP_ERR_CAPACITY. */
wisp_status wisp_template_render(wisp_template *t, const wisp_template_vars *vars, char *out, size_t cap,
                                 size_t *len, wisp_error *err);

/* The same, also reporting which bytes of the text are message content (in
 * order, adjacent ranges merged): content stays content through slices, trim,
 * concatenation, join and macros, so a chat can tokenize the template's own
 * text with special tokens and the messages' text without. More ranges than
 * span_cap is WISP_ERR_CAPACITY. */
wisp_status wisp_template_render_spans(wisp_template *t, const wisp_template_vars *vars, char *out, size_t cap,
                                       size_t *len, wisp_text_span *spans, size_t span_cap, size_t *n_spans,
                                       wisp_error *err);

/* The prefix of a message raised by the template itself. */
#define WISP_TEMPLATE_RAISED "template raised: "

#endif
