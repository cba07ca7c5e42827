/* How core records a failure: wisp_fail and wisp_error_prefix write the
 * one-line message of a wisp_error (wisp.h declares both it and wisp_status),
 * saying what was wrong (which tensor, what was expected, what was found),
 * with a small formatter of their own. */
#ifndef WISP_STATUS_H
#define WISP_STATUS_H

#include <stdarg.h>
#include <stddef.h>

#include "wisp.h" /* wisp_status, wisp_error */

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
