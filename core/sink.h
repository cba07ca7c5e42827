/* Where core writes bytes (a file via the platform, a memory buffer, a
 * semihosting handle). core never opens files itself. */
#ifndef WISP_SINK_H
#define WISP_SINK_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct wisp_sink {
    /* Write all n bytes or fail with a message in err. */
    wisp_status (*write)(void *user, const void *data, size_t n, wisp_error *err);
    void *user;
    uint64_t written; /* bytes written so far (maintained by wisp_sink_write) */
} wisp_sink;

wisp_status wisp_sink_write(wisp_sink *s, const void *data, size_t n, wisp_error *err);
/* Zero bytes up to the next multiple of `alignment` of s->written. */
wisp_status wisp_sink_pad(wisp_sink *s, uint32_t alignment, wisp_error *err);

/* A sink into caller memory: fails cleanly when full, and counts the bytes
 * that would have been needed. */
typedef struct wisp_mem_sink {
    uint8_t *buf;
    size_t cap, len;
} wisp_mem_sink;
wisp_sink wisp_mem_sink_make(wisp_mem_sink *m, void *buf, size_t cap);

/* A sink that only counts (for sizing an output before writing it). */
wisp_sink wisp_count_sink_make(void);

#endif
