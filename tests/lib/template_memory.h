/* A chat template compiled into a block from aligned_alloc: the unit tests
 * that build conversation data use templates outside any arena. */
#ifndef WISP_TEST_TEMPLATE_MEMORY_H
#define WISP_TEST_TEMPLATE_MEMORY_H

#include "template.h"

/* The template of `src` with default limits, its block in *mem (the caller
 * frees it); NULL when the template does not compile. */
wisp_template *template_load(const char *src, void **mem);

#endif
