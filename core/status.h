/* Errors are values: every fallible call returns a wisp_status and, when the
 * caller passes a wisp_error, a one-line human-readable message saying what
 * was wrong (which tensor, what was expected, what was found). */
#ifndef WISP_STATUS_H
#define WISP_STATUS_H

#include <stdarg.h>
#include <stddef.h>

typedef enum wisp_status {
    WISP_OK = 0,
    WISP_ERR_ARG,         /* caller passed something invalid */
    WISP_ERR_FORMAT,      /* input bytes are malformed or truncated */
    WISP_ERR_UNSUPPORTED, /* well-formed, but not something wisp runs */
    WISP_ERR_SHAPE,       /* tensors or hyperparameters disagree */
    WISP_ERR_NOT_FOUND,   /* a named tensor or key is missing */
    WISP_ERR_ARENA,       /* the arena is smaller than the plan */
    WISP_ERR_CAPACITY,    /* a caller buffer is too small (size reported) */
    WISP_ERR_NUMERIC,     /* NaN/Inf where a finite value is required */
    WISP_ERR_IO,          /* a platform sink or source failed */
    WISP_ERR_ABORTED,     /* the caller asked to stop */
    WISP_ERR_INTERNAL     /* an invariant broke: a bug in wisp */
} wisp_status;

#define WISP_ERROR_MESSAGE_MAX 320

typedef struct wisp_error {
    wisp_status status;
    char message[WISP_ERROR_MESSAGE_MAX];
} wisp_error;

/* Short stable name of a status ("format", "arena", ...). */
const char *wisp_status_name(wisp_status s);

/* Record a failure and return `s`. `err` may be NULL. The format supports
 * %s %.*s %c %d %i %u %x %ld %lu %lld %llu %zu %g %f %% — enough for messages,
 * without depending on libc's printf (core is freestanding). */
wisp_status wisp_fail(wisp_error *err, wisp_status s, const char *fmt, ...);
wisp_status wisp_vfail(wisp_error *err, wisp_status s, const char *fmt, va_list ap);

/* Prefix an existing message with context ("blk.3.attn_q.weight: ..."). */
wisp_status wisp_error_prefix(wisp_error *err, const char *fmt, ...);

/* The same formatter, into a caller buffer; always NUL-terminates when
 * cap > 0. Returns the length written (truncated to cap-1). */
size_t wisp_format(char *buf, size_t cap, const char *fmt, ...);
size_t wisp_vformat(char *buf, size_t cap, const char *fmt, va_list ap);

#endif
