/* Python's string operations as templates use them, by code point:
 * strip/split/replace/case, startswith/endswith, and strftime_now's
 * formatting of the date the caller gives. */
#include <string.h>

#include "template_value.h"
#include "unicode.h"

static bool py_space(uint32_t cp) { return wisp_uc_is_space(cp) || (cp >= 0x1C && cp <= 0x1F); }

static bool in_chars(uint32_t cp, const tpl_val *chars) {
    if (!chars) return py_space(cp);
    for (size_t i = 0; i < chars->n;) {
        size_t l;
        if (tpl_decode(chars->u.s + i, chars->n - i, &l) == cp) return true;
        i += l;
    }
    return false;
}

/* Python's str.strip family: `chars` NULL strips whitespace. */
tpl_val tpl_strip(const tpl_val *s, const tpl_val *chars, bool left, bool right) {
    size_t a = 0, b = s->n;
    if (left)
        while (a < b) {
            size_t l;
            if (!in_chars(tpl_decode(s->u.s + a, b - a, &l), chars)) break;
            a += l;
        }
    if (right)
        while (b > a) {
            size_t start = b - 1;
            while (start > a && ((unsigned char)s->u.s[start] & 0xC0) == 0x80) start--;
            size_t l;
            if (!in_chars(tpl_decode(s->u.s + start, b - start, &l), chars)) break;
            b = start;
        }
    return tpl_str(s->u.s + a, b - a);
}

static tpl_list *list_push(tpl_render *r, tpl_list *l, tpl_val v) {
    /* lists under construction sit at the heap's top, so growing is one more slot */
    uint8_t *end = (uint8_t *)l + sizeof(tpl_list) + (size_t)l->n * sizeof(tpl_val);
    if (end != r->t->heap + r->heap_used) { /* something else was allocated since: copy */
        tpl_list *c = tpl_list_new(r, l->n);
        if (!c) return NULL;
        memcpy(c->items, l->items, (size_t)l->n * sizeof(tpl_val));
        l = c;
    }
    if (!tpl_alloc(r, sizeof(tpl_val))) return NULL;
    l->items[l->n++] = v;
    return l;
}

tpl_val tpl_split(tpl_render *r, const tpl_val *s, const tpl_val *sep, int64_t maxsplit, uint32_t line) {
    tpl_list *l = tpl_list_new(r, 0);
    if (!l) return tpl_undef();
    const char *p = s->u.s;
    size_t n = s->n, i = 0;
    if (!sep || sep->kind == V_NONE) { /* runs of whitespace; none at the ends */
        for (;;) {
            size_t len;
            while (i < n && py_space(tpl_decode(p + i, n - i, &len))) i += len;
            if (i >= n) break;
            size_t start = i;
            if (maxsplit >= 0 && (int64_t)l->n >= maxsplit) {
                tpl_val rest = tpl_strip(&(tpl_val){V_STR, (uint32_t)(n - start), {.s = p + start}}, NULL, false, true);
                return (l = list_push(r, l, rest)) ? tpl_list_val(l) : tpl_undef();
            }
            while (i < n && !py_space(tpl_decode(p + i, n - i, &len))) i += len;
            if (!(l = list_push(r, l, tpl_str(p + start, i - start)))) return tpl_undef();
        }
        return tpl_list_val(l);
    }
    if (!tpl_need_str(r, sep, "split", line)) return tpl_undef();
    if (sep->n == 0) return tpl_error(r, WISP_ERR_ARG, line, "split: empty separator"), tpl_undef();
    size_t start = 0;
    while (i + sep->n <= n && (maxsplit < 0 || (int64_t)l->n < maxsplit)) {
        if (memcmp(p + i, sep->u.s, sep->n) == 0) {
            if (!(l = list_push(r, l, tpl_str(p + start, i - start)))) return tpl_undef();
            i += sep->n;
            start = i;
        } else {
            i++;
        }
    }
    return (l = list_push(r, l, tpl_str(p + start, n - start))) ? tpl_list_val(l) : tpl_undef();
}

tpl_val tpl_replace(tpl_render *r, const tpl_val *s, const tpl_val *old, const tpl_val *with, int64_t count, uint32_t line) {
    if (!tpl_need_str(r, old, "replace", line) || !tpl_need_str(r, with, "replace", line)) return tpl_undef();
    if (old->n == 0) return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "replace with an empty search string"), tpl_undef();
    tpl_sb b;
    tpl_sb_begin(r, &b);
    size_t i = 0, start = 0;
    int64_t done = 0;
    while (i + old->n <= s->n && (count < 0 || done < count)) {
        if (memcmp(s->u.s + i, old->u.s, old->n) == 0) {
            tpl_sb_put(&b, s->u.s + start, i - start);
            tpl_sb_put(&b, with->u.s, with->n);
            i += old->n;
            start = i;
            done++;
        } else {
            i++;
        }
    }
    tpl_sb_put(&b, s->u.s + start, s->n - start);
    return tpl_sb_end(&b);
}

/* upper/lower/capitalize/title. Non-ASCII case mapping is refused for upper
 * and title (wisp carries only the lowercase table). */
tpl_val tpl_change_case(tpl_render *r, const tpl_val *s, int mode, uint32_t line) {
    static const char *const names[] = {"upper", "lower", "capitalize", "title"};
    tpl_sb b;
    if (mode != 1)
        for (size_t i = 0; i < s->n; i++)
            if ((unsigned char)s->u.s[i] >= 0x80)
                return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "%s() of non-ASCII text is not supported", names[mode]), tpl_undef();
    tpl_sb_begin(r, &b);
    bool word_start = true;
    for (size_t i = 0; i < s->n;) {
        size_t l;
        uint32_t cp = tpl_decode(s->u.s + i, s->n - i, &l);
        bool upper = mode == 0 || (mode == 2 && i == 0) || (mode == 3 && word_start);
        bool is_alpha = (cp | 32) >= 'a' && (cp | 32) <= 'z';
        if (mode == 1 || (!upper && mode >= 2)) cp = cp < 0x80 ? ((cp >= 'A' && cp <= 'Z') ? cp + 32 : cp) : wisp_uc_tolower(cp);
        else if (cp >= 'a' && cp <= 'z') cp -= 32;
        if (mode == 3) word_start = !is_alpha;
        uint8_t enc[4];
        tpl_sb_put(&b, (const char *)enc, wisp_utf8_encode(cp, enc));
        i += l;
    }
    return tpl_sb_end(&b);
}

bool tpl_starts_or_ends(tpl_render *r, const tpl_val *s, const tpl_val *x, bool ends, uint32_t line) {
    if (x && x->kind == V_LIST) {
        for (uint32_t i = 0; i < x->u.l->n; i++)
            if (tpl_starts_or_ends(r, s, &x->u.l->items[i], ends, line)) return true;
        return false;
    }
    if (!tpl_need_str(r, x, ends ? "endswith" : "startswith", line)) return false;
    if (x->n > s->n) return false;
    return memcmp(s->u.s + (ends ? s->n - x->n : 0), x->u.s, x->n) == 0;
}

/* ---- strftime_now on the fixed date the caller gives ---- */

tpl_val tpl_format_date(tpl_render *r, const tpl_val *fmt, uint32_t line) {
    static const char *const months[] = {"January", "February", "March", "April", "May", "June", "July",
                                         "August", "September", "October", "November", "December"};
    static const char *const days[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
    if (!tpl_need_str(r, fmt, "strftime_now", line)) return tpl_undef();
    int y = r->vars->year, m = r->vars->month, d = r->vars->day;
    if (m < 1 || m > 12 || d < 1 || d > 31 || y < 1 || y > 9999)
        return tpl_error(r, WISP_ERR_ARG, line, "strftime_now: no valid date was given to the renderer"), tpl_undef();
    static const int offs[] = {0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4};
    int yy = m < 3 ? y - 1 : y, wday = (yy + yy / 4 - yy / 100 + yy / 400 + offs[m - 1] + d) % 7;
    static const int cum[] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    int yday = cum[m - 1] + d + (leap && m > 2);
    tpl_sb b;
    tpl_sb_begin(r, &b);
    for (size_t i = 0; i < fmt->n; i++) {
        char c = fmt->u.s[i];
        if (c != '%' || i + 1 >= fmt->n) {
            tpl_sb_put(&b, &c, 1);
            continue;
        }
        char f = fmt->u.s[++i];
        bool no_pad = f == '-' && i + 1 < fmt->n;
        if (no_pad) f = fmt->u.s[++i];
        char tmp[16];
        size_t n = 0;
        int value = -1, width = 0; /* a number, zero-padded to width unless `%-x` */
        const char *word = NULL;
        int word_len = 0;
        switch (f) {
        case 'd': value = d, width = 2; break;
        case 'm': value = m, width = 2; break;
        case 'Y': value = y, width = 1; break;
        case 'y': value = y % 100, width = 2; break;
        case 'j': value = yday, width = 3; break;
        case 'H':
        case 'M':
        case 'S': value = 0, width = 2; break;
        case 'b': word = months[m - 1], word_len = 3; break;
        case 'B': word = months[m - 1], word_len = (int)strlen(word); break;
        case 'a': word = days[wday], word_len = 3; break;
        case 'A': word = days[wday], word_len = (int)strlen(word); break;
        case '%': word = "%", word_len = 1; break;
        default:
            return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "strftime_now: directive '%%%c' is not supported", f), tpl_undef();
        }
        if (word) {
            tpl_sb_put(&b, word, (size_t)word_len);
            continue;
        }
        char digits[12];
        int nd = 0;
        do digits[nd++] = (char)('0' + value % 10), value /= 10; while (value);
        if (!no_pad)
            while (nd < width) digits[nd++] = '0';
        while (nd) tmp[n++] = digits[--nd];
        tpl_sb_put(&b, tmp, n);
    }
    return tpl_sb_end(&b);
}
