#include "template_memory.h"

#include <stdlib.h>
#include <string.h>

wisp_template *template_load(const char *src, void **mem) {
    size_t bytes = 0;
    wisp_error err = {0};
    wisp_template *t = NULL;
    *mem = NULL;
    if (wisp_template_plan(src, strlen(src), NULL, &bytes, &err)) return NULL;
    *mem = aligned_alloc(64, (bytes + 63) / 64 * 64);
    return *mem && !wisp_template_init(&t, *mem, bytes, src, strlen(src), NULL, &err) ? t : NULL;
}
