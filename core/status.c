/* Status names and a small printf-style formatter for error messages.
 * core/ may not use stdio, so messages are formatted here. */
#include "status.h"

#include <stdint.h>
#include <string.h>

const char *wisp_status_name(wisp_status s) {
    switch (s) {
    case WISP_OK: return "ok";
    case WISP_ERR_ARG: return "bad argument";
    case WISP_ERR_FORMAT: return "malformed input";
    case WISP_ERR_UNSUPPORTED: return "unsupported";
    case WISP_ERR_SHAPE: return "shape mismatch";
    case WISP_ERR_NOT_FOUND: return "not found";
    case WISP_ERR_ARENA: return "arena too small";
    case WISP_ERR_CAPACITY: return "buffer too small";
    case WISP_ERR_NUMERIC: return "numerical fault";
    case WISP_ERR_IO: return "i/o error";
    case WISP_ERR_ABORTED: return "aborted";
    case WISP_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

typedef struct out_buf {
    char *buf;
    size_t cap, len;
} out_buf;

static void put_char(out_buf *o, char c) {
    if (o->cap && o->len + 1 < o->cap) o->buf[o->len] = c;
    o->len++;
}

static void put_str(out_buf *o, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) put_char(o, s[i]);
}

/* `digits` is the least number of digits written (zeros first), as %0Nx asks. */
static void put_unsigned(out_buf *o, unsigned long long v, unsigned base, int digits) {
    char tmp[24];
    int n = 0;
    do {
        unsigned d = (unsigned)(v % base);
        tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
        v /= base;
    } while (v);
    for (int pad = digits - n; pad > 0; pad--) put_char(o, '0');
    while (n) put_char(o, tmp[--n]);
}

static void put_signed(out_buf *o, long long v) {
    if (v < 0) {
        put_char(o, '-');
        put_unsigned(o, (unsigned long long)(-(v + 1)) + 1u, 10, 1);
    } else {
        put_unsigned(o, (unsigned long long)v, 10, 1);
    }
}

/* Fixed or scientific notation with `prec` significant digits, like %g;
 * values are for humans, so the last digit may differ from glibc's. */
static void put_double(out_buf *o, double v, int prec, int fixed) {
    if (v != v) { put_str(o, "nan", 3); return; }
    if (v < 0) { put_char(o, '-'); v = -v; }
    if (v > 1.7976931348623157e308) { put_str(o, "inf", 3); return; }
    if (v == 0.0 && !fixed) { put_char(o, '0'); return; }
    int exp10 = 0;
    if (!fixed && v != 0.0) {
        while (v >= 10.0) { v /= 10.0; exp10++; }
        while (v < 1.0) { v *= 10.0; exp10--; }
        if (exp10 >= -4 && exp10 < prec) {
            /* back to plain notation */
            for (int i = 0; i < exp10; i++) v *= 10.0;
            for (int i = 0; i > exp10; i--) v /= 10.0;
            int decimals = prec - 1 - exp10;
            if (decimals < 0) decimals = 0;
            fixed = 2 + decimals; /* encoded below */
            exp10 = 0;
        }
    }
    int decimals;
    int scientific = 0;
    if (fixed == 1) decimals = prec;                 /* %f */
    else if (fixed >= 2) decimals = fixed - 2;       /* %g, plain */
    else { decimals = prec - 1; scientific = 1; }    /* %g, scientific */
    double scale = 1.0;
    for (int i = 0; i < decimals; i++) scale *= 10.0;
    double r = v * scale + 0.5;
    if (r >= 1.8e19) { put_str(o, "huge", 4); return; }
    unsigned long long whole = (unsigned long long)r;
    unsigned long long ip = whole / (unsigned long long)scale;
    unsigned long long fp = whole % (unsigned long long)scale;
    if (scientific && ip >= 10) { ip /= 10; exp10++; fp /= 10; }
    put_unsigned(o, ip, 10, 1);
    if (decimals > 0) {
        char digits[24];
        int n = decimals;
        for (int i = n - 1; i >= 0; i--) { digits[i] = (char)('0' + fp % 10); fp /= 10; }
        if (fixed != 1) while (n > 0 && digits[n - 1] == '0') n--; /* %g trims */
        if (n > 0) { put_char(o, '.'); put_str(o, digits, (size_t)n); }
    }
    if (scientific) {
        put_char(o, 'e');
        put_char(o, exp10 < 0 ? '-' : '+');
        if (exp10 < 0) exp10 = -exp10;
        if (exp10 < 10) put_char(o, '0');
        put_unsigned(o, (unsigned)exp10, 10, 1);
    }
}

size_t wisp_vformat(char *buf, size_t cap, const char *fmt, va_list ap) {
    out_buf o = {buf, cap, 0};
    for (const char *p = fmt; *p; p++) {
        if (*p != '%') { put_char(&o, *p); continue; }
        p++;
        int zero_width = 1; /* %0Nu / %0Nx: at least N digits */
        if (*p == '0') {
            zero_width = 0;
            while (*++p >= '0' && *p <= '9') zero_width = zero_width * 10 + (*p - '0');
        }
        int precision = -1;
        if (*p == '.') {
            p++;
            if (*p == '*') { precision = va_arg(ap, int); p++; }
            else { precision = 0; while (*p >= '0' && *p <= '9') precision = precision * 10 + (*p++ - '0'); }
        }
        int longs = 0, size_t_arg = 0;
        while (*p == 'l') { longs++; p++; }
        if (*p == 'z') { size_t_arg = 1; p++; }
        switch (*p) {
        case 's': {
            const char *s = va_arg(ap, const char *);
            if (!s) s = "(null)";
            size_t n = precision >= 0 ? (size_t)precision : strlen(s);
            if (precision >= 0) { size_t k = 0; while (k < n && s[k]) k++; n = k; }
            put_str(&o, s, n);
            break;
        }
        case 'c': put_char(&o, (char)va_arg(ap, int)); break;
        case 'd': case 'i':
            if (size_t_arg) put_signed(&o, (long long)va_arg(ap, ptrdiff_t));
            else if (longs == 2) put_signed(&o, va_arg(ap, long long));
            else if (longs == 1) put_signed(&o, va_arg(ap, long));
            else put_signed(&o, va_arg(ap, int));
            break;
        case 'u': case 'x': {
            unsigned base = *p == 'x' ? 16u : 10u;
            if (size_t_arg) put_unsigned(&o, va_arg(ap, size_t), base, zero_width);
            else if (longs == 2) put_unsigned(&o, va_arg(ap, unsigned long long), base, zero_width);
            else if (longs == 1) put_unsigned(&o, va_arg(ap, unsigned long), base, zero_width);
            else put_unsigned(&o, va_arg(ap, unsigned), base, zero_width);
            break;
        }
        case 'g': put_double(&o, va_arg(ap, double), precision < 0 ? 6 : (precision ? precision : 1), 0); break;
        case 'f': put_double(&o, va_arg(ap, double), precision < 0 ? 6 : precision, 1); break;
        case '%': put_char(&o, '%'); break;
        case '\0': p--; break;
        default: put_char(&o, '%'); put_char(&o, *p); break;
        }
    }
    if (cap) buf[o.len < cap ? o.len : cap - 1] = '\0';
    return o.len < cap ? o.len : (cap ? cap - 1 : 0);
}

size_t wisp_format(char *buf, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t n = wisp_vformat(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}

wisp_status wisp_vfail(wisp_error *err, wisp_status s, const char *fmt, va_list ap) {
    if (err) {
        err->status = s;
        wisp_vformat(err->message, sizeof err->message, fmt, ap);
    }
    return s;
}

wisp_status wisp_fail(wisp_error *err, wisp_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    wisp_vfail(err, s, fmt, ap);
    va_end(ap);
    return s;
}

wisp_status wisp_error_prefix(wisp_error *err, const char *fmt, ...) {
    if (!err) return WISP_OK;
    char prefix[WISP_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    size_t n = wisp_vformat(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char joined[WISP_ERROR_MESSAGE_MAX];
    wisp_format(joined, sizeof joined, "%.*s: %s", (int)n, prefix, err->message);
    memcpy(err->message, joined, sizeof joined);
    return err->status;
}
