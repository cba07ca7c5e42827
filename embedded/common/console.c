/* Text to the host's stdout and stderr, and a wisp_sink over a host file.
 * QEMU maps the special file ":tt" to its own stdout when opened for writing
 * and to its stderr when opened for appending. */
#include <stdarg.h>

#include "fw.h"

#define LINE_MAX_BYTES 512

static int console_handle(bool err) {
    static int out = -1, errh = -1;
    int *h = err ? &errh : &out;
    if (*h < 0) *h = fw_open(":tt", err ? FW_OPEN_A : FW_OPEN_W);
    return *h;
}

static void vprint(bool err, const char *fmt, va_list ap) {
    char line[LINE_MAX_BYTES];
    size_t n = wisp_vformat(line, sizeof line, fmt, ap);
    int h = console_handle(err);
    if (h >= 0) fw_write(h, line, n);
}

void fw_print(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprint(false, fmt, ap);
    va_end(ap);
}

void fw_eprint(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprint(true, fmt, ap);
    va_end(ap);
}

void fw_put(const void *data, size_t n) {
    int h = console_handle(false);
    if (h >= 0) fw_write(h, data, n);
}

static wisp_status file_sink_write(void *user, const void *data, size_t n, wisp_error *err) {
    const int *handle = user;
    if (!fw_write(*handle, data, n)) return wisp_fail(err, WISP_ERR_IO, "semihosting write of %zu bytes failed", n);
    return WISP_OK;
}

wisp_sink fw_file_sink(int *handle) {
    wisp_sink s = {file_sink_write, handle, 0};
    return s;
}
