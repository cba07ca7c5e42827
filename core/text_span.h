/* A byte range of a text; used where one part of a text must be treated
 * differently from the rest (message content inside a rendered chat). */
#ifndef WISP_TEXT_SPAN_H
#define WISP_TEXT_SPAN_H

#include <stddef.h>

typedef struct wisp_text_span {
    size_t start, len;
} wisp_text_span;

#endif
