/* Lookups over the generated range tables (core/unicode_tables.c). */
#include "unicode.h"

uint32_t wisp_utf8_decode(const uint8_t *s, size_t n, size_t *len) {
    uint8_t b0 = s[0];
    *len = 1;
    if (b0 < 0x80) return b0;
    size_t need;
    uint32_t cp, min;
    if (b0 >= 0xC2 && b0 <= 0xDF) { need = 1; cp = b0 & 0x1Fu; min = 0x80; }
    else if (b0 >= 0xE0 && b0 <= 0xEF) { need = 2; cp = b0 & 0x0Fu; min = 0x800; }
    else if (b0 >= 0xF0 && b0 <= 0xF4) { need = 3; cp = b0 & 0x07u; min = 0x10000; }
    else return WISP_UC_REPLACEMENT;
    if (n < need + 1) return WISP_UC_REPLACEMENT;
    for (size_t i = 1; i <= need; i++) {
        if ((s[i] & 0xC0) != 0x80) return WISP_UC_REPLACEMENT;
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return WISP_UC_REPLACEMENT;
    *len = need + 1;
    return cp;
}

size_t wisp_utf8_encode(uint32_t cp, uint8_t out[4]) {
    if (cp < 0x80) { out[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | ((cp >> 18) & 0x07));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

wisp_uc_class wisp_uc_class_of(uint32_t cp) {
    if (cp < 256) return (wisp_uc_class)wisp_uc_latin1[cp];
    if (cp > 0x10FFFF) return WISP_UC_CN;
    /* last run whose first code point is <= cp */
    uint32_t lo = 0, hi = wisp_uc_class_runs_count;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if ((wisp_uc_class_runs[mid] >> 4) <= cp) lo = mid;
        else hi = mid;
    }
    return (wisp_uc_class)(wisp_uc_class_runs[lo] & 15u);
}

/* Index of the last run starting at or before cp, or -1 (runs are sorted by
 * their first code point, held in the low 21 bits of the key). */
static int32_t lower_run_index(uint32_t cp) {
    uint32_t lo = 0, hi = wisp_uc_lower_runs_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if ((wisp_uc_lower_runs[mid].key & 0x1FFFFFu) <= cp) lo = mid + 1;
        else hi = mid;
    }
    return (int32_t)lo - 1;
}

static int32_t strip_run_index(uint32_t cp) {
    uint32_t lo = 0, hi = wisp_uc_strip_runs_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if ((wisp_uc_strip_runs[mid].key & 0x1FFFFFu) <= cp) lo = mid + 1;
        else hi = mid;
    }
    return (int32_t)lo - 1;
}

uint32_t wisp_uc_tolower(uint32_t cp) {
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    int32_t i = lower_run_index(cp);
    if (i < 0) return cp;
    uint32_t key = wisp_uc_lower_runs[i].key;
    uint32_t first = key & 0x1FFFFFu;
    uint32_t count = ((key >> 21) & 0x7Fu) + 1;
    uint32_t stride = ((key >> 28) & 0x3u) + 1;
    uint32_t off = cp - first;
    if (off % stride != 0 || off / stride >= count) return cp;
    return (uint32_t)((int32_t)cp + wisp_uc_lower_runs[i].delta);
}

size_t wisp_uc_strip_accents(uint32_t cp, uint32_t out[3]) {
    if (cp < 0xC0) { out[0] = cp; return 1; } /* nothing below U+00C0 decomposes */
    if (cp >= 0xAC00 && cp < 0xAC00 + 11172) {  /* Hangul: L V (T) */
        uint32_t s = cp - 0xAC00;
        out[0] = 0x1100 + s / 588;
        out[1] = 0x1161 + (s % 588) / 28;
        if (s % 28 == 0) return 2;
        out[2] = 0x11A7 + s % 28;
        return 3;
    }
    if (wisp_uc_class_of(cp) == WISP_UC_MN) return 0;
    int32_t i = strip_run_index(cp);
    if (i >= 0) {
        uint32_t key = wisp_uc_strip_runs[i].key;
        uint32_t first = key & 0x1FFFFFu;
        uint32_t count = ((key >> 21) & 7u) + 1;
        if (cp - first < count) {
            out[0] = wisp_uc_strip_runs[i].target + (((key >> 24) & 1u) ? cp - first : 0);
            return 1;
        }
    }
    /* the few results that are not one code point (short list: linear scan) */
    for (uint32_t k = 0; k < wisp_uc_strip_multis_count; k++) {
        uint32_t key = wisp_uc_strip_multis[k].key;
        if ((key & 0x1FFFFFu) != cp) continue;
        size_t n = key >> 24;
        for (size_t j = 0; j < n; j++) out[j] = wisp_uc_strip_multis[k].out[j];
        return n;
    }
    out[0] = cp;
    return 1;
}

static bool maps_to_itself(uint32_t b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t wisp_byte_to_unicode(uint8_t b) {
    if (maps_to_itself(b)) return b;
    /* the n-th byte (in byte order) that does not map to itself goes to 256 + n */
    uint32_t n;
    if (b <= 0x20) n = b;                        /* 0x00..0x20: 33 bytes */
    else if (b <= 0xA0) n = 33 + (b - 0x7F);     /* 0x7F..0xA0: 34 bytes */
    else n = 67;                                  /* 0xAD */
    return 256 + n;
}

int wisp_unicode_to_byte(uint32_t cp) {
    if (cp < 256) return maps_to_itself(cp) ? (int)cp : -1;
    if (cp > 256 + 67) return -1;
    uint32_t n = cp - 256;
    if (n < 33) return (int)n;
    if (n < 67) return (int)(0x7F + (n - 33));
    return 0xAD;
}

int wisp_utf8_next(int q, uint8_t b) {
    bool cont = b >= 0x80 && b <= 0xBF;
    switch (q) {
    case 0:
        if (b < 0x80) return 0;
        if (b >= 0xC2 && b <= 0xDF) return 1;
        if (b == 0xE0) return 4;
        if (b == 0xED) return 5;
        if (b >= 0xE1 && b <= 0xEF) return 2;
        if (b == 0xF0) return 6;
        if (b >= 0xF1 && b <= 0xF3) return 3;
        if (b == 0xF4) return 7;
        return -1;
    case 1: case 2: case 3: return cont ? q - 1 : -1;
    case 4: return b >= 0xA0 && b <= 0xBF ? 1 : -1;
    case 5: return b >= 0x80 && b <= 0x9F ? 1 : -1;
    case 6: return b >= 0x90 && b <= 0xBF ? 2 : -1;
    default: return b >= 0x80 && b <= 0x8F ? 2 : -1;
    }
}
