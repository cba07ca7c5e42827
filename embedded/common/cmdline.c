/* Splitting the semihosting command line into words and reading numbers. */
#include <limits.h>

#include "fw.h"

#define LINE_BYTES 512

int fw_args(const char *who, char **argv, int max) {
    static char line[LINE_BYTES];
    int argc = 0;
    bool fits = fw_cmdline(line, sizeof line);
    for (char *p = line; fits;) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) return argc;
        if (argc == max) break;
        argv[argc++] = p;
        while (*p && *p != ' ' && *p != '\t') p++;
        if (*p) *p++ = 0;
    }
    fw_eprint("%s: the command line is longer than %d bytes or has more than %d words\n", who, LINE_BYTES, max);
    return -1;
}

bool fw_parse_i32(const char *s, int32_t *out) {
    bool neg = *s == '-';
    if (neg) s++;
    if (!*s) return false;
    int64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        v = v * 10 + (*s - '0');
        if (v > (int64_t)INT32_MAX + 1) return false;
    }
    if (neg) v = -v;
    if (v > INT32_MAX || v < INT32_MIN) return false;
    *out = (int32_t)v;
    return true;
}
