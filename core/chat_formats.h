/* Built-in chat formats, for models whose GGUF carries no chat template (or
 * to override it): each is a small template in the Jinja subset of
 * core/template.h, so one renderer serves both. Adding a format is a row. */
#ifndef WISP_CHAT_FORMATS_H
#define WISP_CHAT_FORMATS_H

#include <stddef.h>

typedef struct wisp_chat_format {
    const char *name;     /* "chatml", "llama3", ... */
    const char *template; /* Jinja source */
    const char *summary;  /* one line for --help */
} wisp_chat_format;

/* The format called `name`, or NULL. */
const wisp_chat_format *wisp_chat_format_find(const char *name);

/* All of them, for listing: *count gets how many. */
const wisp_chat_format *wisp_chat_formats(size_t *count);

#endif
