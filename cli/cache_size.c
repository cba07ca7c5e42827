#include "cache_size.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* "32768K", "1M" or a plain byte count, as sysfs writes cache sizes. */
static size_t parse_size(const char *s) {
    size_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) v = v * 10 + (size_t)(*s - '0');
    if (*s == 'K') v <<= 10;
    else if (*s == 'M') v <<= 20;
    else if (*s == 'G') v <<= 30;
    return v;
}

/* Reads the first line of `path` into buf; false if there is none. */
static bool read_line(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool ok = fgets(buf, (int)n, f) != NULL;
    fclose(f);
    return ok;
}

static size_t llc_from_sysfs(void) {
    int best_level = 0;
    size_t best = 0;
    for (int i = 0; i < 16; i++) {
        char path[96], level[16], type[32], size[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (!read_line(path, level, sizeof level)) break;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if (!read_line(path, type, sizeof type) || strncmp(type, "Instruction", 11) == 0) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!read_line(path, size, sizeof size)) continue;
        int lv = level[0] - '0';
        size_t bytes = parse_size(size);
        if (lv > best_level || (lv == best_level && bytes > best)) best_level = lv, best = bytes;
    }
    return best;
}

#if defined(__x86_64__) || defined(__i386__)
/* CPUID's deterministic cache parameters: leaf 4 on Intel, 0x8000001D on
 * AMD (same layout): ways x partitions x line size x sets per cache. */
static size_t llc_from_cpuid(void) {
    unsigned a, b, c, d, leaf = 4;
    if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x8000001D && __get_cpuid(0x80000001, &a, &b, &c, &d) &&
        (c & (1u << 22))) /* topology extensions: AMD's leaf is there */
        leaf = 0x8000001D;
    else if (!__get_cpuid(0, &a, &b, &c, &d) || a < 4)
        return 0;
    unsigned best_level = 0;
    size_t best = 0;
    for (unsigned i = 0; i < 16; i++) {
        __cpuid_count(leaf, i, a, b, c, d);
        unsigned type = a & 31, level = (a >> 5) & 7;
        if (type == 0) break;
        if (type == 2) continue; /* instruction cache */
        size_t bytes = (size_t)((b >> 22) + 1) * (((b >> 12) & 1023) + 1) * ((b & 4095) + 1) * ((size_t)c + 1);
        if (level > best_level || (level == best_level && bytes > best)) best_level = level, best = bytes;
    }
    return best;
}
#endif

size_t cli_llc_bytes(void) {
    size_t b = llc_from_sysfs();
#if defined(__x86_64__) || defined(__i386__)
    if (!b) b = llc_from_cpuid();
#endif
    return b;
}
