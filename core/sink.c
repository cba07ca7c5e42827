#include "sink.h"

#include <string.h>

wisp_status wisp_sink_write(wisp_sink *s, const void *data, size_t n, wisp_error *err) {
    if (n == 0) return WISP_OK;
    wisp_status st = s->write ? s->write(s->user, data, n, err) : WISP_OK;
    if (st == WISP_OK) s->written += n;
    return st;
}

wisp_status wisp_sink_pad(wisp_sink *s, uint32_t alignment, wisp_error *err) {
    static const uint8_t zeros[64] = {0};
    uint64_t pad = alignment ? (alignment - s->written % alignment) % alignment : 0;
    while (pad) {
        size_t n = pad > sizeof zeros ? sizeof zeros : (size_t)pad;
        wisp_status st = wisp_sink_write(s, zeros, n, err);
        if (st) return st;
        pad -= n;
    }
    return WISP_OK;
}

static wisp_status mem_write(void *user, const void *data, size_t n, wisp_error *err) {
    wisp_mem_sink *m = user;
    if (n > m->cap - m->len) {
        m->len += n;
        return wisp_fail(err, WISP_ERR_CAPACITY, "output buffer of %zu bytes is full", m->cap);
    }
    memcpy(m->buf + m->len, data, n);
    m->len += n;
    return WISP_OK;
}

wisp_sink wisp_mem_sink_make(wisp_mem_sink *m, void *buf, size_t cap) {
    m->buf = (uint8_t *)buf;
    m->cap = buf ? cap : 0;
    m->len = 0;
    wisp_sink s = {mem_write, m, 0};
    return s;
}

wisp_sink wisp_count_sink_make(void) {
    wisp_sink s = {NULL, NULL, 0};
    return s;
}
