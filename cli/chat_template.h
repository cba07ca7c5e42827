/* The chat template a command uses, chosen once: --chat-template NAME|FILE,
 * else a --template FILE, else the model's tokenizer.chat_template (with the
 * model's BOS/EOS token texts as bos_token/eos_token). Also reading messages
 * JSON from a file or stdin, and rendering into a buffer that grows. */
#ifndef WISP_CLI_CHAT_TEMPLATE_H
#define WISP_CLI_CHAT_TEMPLATE_H

#include <stdbool.h>
#include <stddef.h>

#include "gguf.h"
#include "json.h"
#include "template.h"

typedef struct cli_chat_template {
    char *source;       /* the template text (owned) */
    char origin[320];   /* where it came from, for messages: "built-in chatml", "model", a path */
    void *mem;          /* its planned memory */
    wisp_template *tpl;
    char *bos, *eos;    /* NULL: undefined in the template */
    int year, month, day; /* what strftime_now formats */
    char *tools_json;     /* --tools: JSON text of the tool list (owned); NULL: none */
    size_t tools_len;
} cli_chat_template;

/* Any of g (a model), template_file, choice (--chat-template) may be NULL;
 * choice wins, then template_file, then the model's own. bos/eos override the
 * model's token texts when given. Prints "wisp: ...: why" and returns false
 * on error (no template anywhere is an error naming the options). */
bool cli_chat_template_open(cli_chat_template *ct, const wisp_gguf *g, const char *template_file, const char *choice,
                            const char *bos, const char *eos);
void cli_chat_template_close(cli_chat_template *ct);

/* --tools FILE: OpenAI-style tool definitions, checked, given to the template
 * as `tools`. Prints "wisp: --tools FILE: why" and returns false on error. */
bool cli_chat_template_load_tools(cli_chat_template *ct, const char *path);

/* "YYYY-MM-DD" for strftime_now; NULL: today (local time). False on junk. */
bool cli_chat_template_set_date(cli_chat_template *ct, const char *date);

/* Render into *out (malloc'd, NUL-terminated; grown until the text fits). */
wisp_status cli_chat_render(const cli_chat_template *ct, const wisp_chat_message *msgs, size_t n, bool add_generation_prompt,
                            char **out, size_t *len, wisp_error *err);

/* A messages JSON file ("-": stdin): a top-level array, or an object with a
 * "messages" array. The messages point into *text_out, which the caller frees
 * with the returned messages (both malloc'd). Prints and returns false on error. */
bool cli_load_messages(const char *path, wisp_chat_message **msgs, size_t *n, char **text_out);

/* A token's text from the model's vocabulary by id key ("tokenizer.ggml.bos_token_id"); NULL if none. */
char *cli_gguf_token_text(const wisp_gguf *g, const char *id_key);

#endif
