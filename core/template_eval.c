/* Evaluating template expressions with Python's and Jinja2's semantics:
 * operators, attribute and item lookup, slices, calls of globals, macros and
 * string/dict methods, filters and tests. Whatever is outside the subset is
 * an error naming it. */
#include <math.h>
#include <string.h>

#include "template_value.h"
#include "unicode.h"

#define MAX_ARGS 8

typedef struct args {
    uint32_t n_pos, n_kw;
    tpl_val pos[MAX_ARGS];
    const char *kw_name[MAX_ARGS];
    uint32_t kw_len[MAX_ARGS];
    tpl_val kw[MAX_ARGS];
} args;

static const tpl_node *node_at(tpl_render *r, uint32_t i) { return &r->t->nodes[i]; }

static bool eval_args(tpl_render *r, uint32_t first, args *a, uint32_t line) {
    memset(a, 0, sizeof *a);
    for (uint32_t i = first; i && !r->failed; i = node_at(r, i)->next) {
        const tpl_node *n = node_at(r, i);
        if (n->kind == N_KWARG) {
            if (a->n_kw >= MAX_ARGS) return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "more than %d keyword arguments", MAX_ARGS);
            a->kw_name[a->n_kw] = tpl_node_str(r->t, n);
            a->kw_len[a->n_kw] = n->n;
            a->kw[a->n_kw++] = tpl_eval(r, n->a);
        } else {
            if (a->n_pos >= MAX_ARGS) return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "more than %d arguments", MAX_ARGS);
            a->pos[a->n_pos++] = tpl_eval(r, i);
        }
    }
    return !r->failed;
}

/* Argument `index` by position, or by name; NULL when not given. */
static const tpl_val *arg(const args *a, uint32_t index, const char *name) {
    if (index < a->n_pos) return &a->pos[index];
    for (uint32_t i = 0; i < a->n_kw; i++)
        if (strlen(name) == a->kw_len[i] && memcmp(name, a->kw_name[i], a->kw_len[i]) == 0) return &a->kw[i];
    return NULL;
}

/* Every keyword must be one the callee knows, and no more positionals than it takes. */
static bool check_args(tpl_render *r, const args *a, uint32_t max_pos, const char *const *names, const char *callee,
                       uint32_t line) {
    if (a->n_pos > max_pos)
        return tpl_error(r, WISP_ERR_ARG, line, "%s takes at most %u arguments (%u given)", callee, max_pos, a->n_pos);
    for (uint32_t i = 0; i < a->n_kw; i++) {
        bool known = false;
        for (const char *const *n = names; n && *n; n++) known |= strlen(*n) == a->kw_len[i] && memcmp(*n, a->kw_name[i], a->kw_len[i]) == 0;
        if (!known)
            return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "argument '%.*s' of %s is not supported", (int)a->kw_len[i],
                             a->kw_name[i], callee);
    }
    return true;
}

static tpl_val to_str(tpl_render *r, const tpl_val *v) {
    if (v->kind == V_STR) return *v;
    tpl_sb b;
    tpl_sb_begin(r, &b);
    tpl_write_str(&b, v);
    return tpl_sb_end(&b);
}

static bool need_str(tpl_render *r, const tpl_val *v, const char *what, uint32_t line) {
    if (v && v->kind == V_STR) return true;
    return tpl_error(r, WISP_ERR_ARG, line, "%s needs a string, not %s", what, v ? tpl_type_name(v) : "nothing");
}

static bool need_int(tpl_render *r, const tpl_val *v, const char *what, uint32_t line) {
    if (v && (v->kind == V_INT || v->kind == V_BOOL)) return true;
    return tpl_error(r, WISP_ERR_ARG, line, "%s needs an integer, not %s", what, v ? tpl_type_name(v) : "nothing");
}

static bool undefined_error(tpl_render *r, uint32_t line, const char *what) {
    return tpl_error(r, WISP_ERR_ARG, line, "%s of an undefined value", what);
}

/* ---- strings by code point ---- */

static uint32_t decode(const char *s, size_t n, size_t *len) { return wisp_utf8_decode((const uint8_t *)s, n, len); }

static bool py_space(uint32_t cp) { return wisp_uc_is_space(cp) || (cp >= 0x1C && cp <= 0x1F); }

static bool in_chars(uint32_t cp, const tpl_val *chars) {
    if (!chars) return py_space(cp);
    for (size_t i = 0; i < chars->n;) {
        size_t l;
        if (decode(chars->u.s + i, chars->n - i, &l) == cp) return true;
        i += l;
    }
    return false;
}

/* Python's str.strip family: `chars` NULL strips whitespace. */
static tpl_val strip(const tpl_val *s, const tpl_val *chars, bool left, bool right) {
    size_t a = 0, b = s->n;
    if (left)
        while (a < b) {
            size_t l;
            if (!in_chars(decode(s->u.s + a, b - a, &l), chars)) break;
            a += l;
        }
    if (right)
        while (b > a) {
            size_t start = b - 1;
            while (start > a && ((unsigned char)s->u.s[start] & 0xC0) == 0x80) start--;
            size_t l;
            if (!in_chars(decode(s->u.s + start, b - start, &l), chars)) break;
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

static tpl_val split(tpl_render *r, const tpl_val *s, const tpl_val *sep, int64_t maxsplit, uint32_t line) {
    tpl_list *l = tpl_list_new(r, 0);
    if (!l) return tpl_undef();
    const char *p = s->u.s;
    size_t n = s->n, i = 0;
    if (!sep || sep->kind == V_NONE) { /* runs of whitespace; none at the ends */
        for (;;) {
            size_t len;
            while (i < n && py_space(decode(p + i, n - i, &len))) i += len;
            if (i >= n) break;
            size_t start = i;
            if (maxsplit >= 0 && (int64_t)l->n >= maxsplit) {
                tpl_val rest = strip(&(tpl_val){V_STR, (uint32_t)(n - start), {.s = p + start}}, NULL, false, true);
                return (l = list_push(r, l, rest)) ? tpl_list_val(l) : tpl_undef();
            }
            while (i < n && !py_space(decode(p + i, n - i, &len))) i += len;
            if (!(l = list_push(r, l, tpl_str(p + start, i - start)))) return tpl_undef();
        }
        return tpl_list_val(l);
    }
    if (!need_str(r, sep, "split", line)) return tpl_undef();
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

static tpl_val replace(tpl_render *r, const tpl_val *s, const tpl_val *old, const tpl_val *with, int64_t count, uint32_t line) {
    if (!need_str(r, old, "replace", line) || !need_str(r, with, "replace", line)) return tpl_undef();
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
static tpl_val change_case(tpl_render *r, const tpl_val *s, int mode, uint32_t line) {
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
        uint32_t cp = decode(s->u.s + i, s->n - i, &l);
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

static bool starts_or_ends(tpl_render *r, const tpl_val *s, const tpl_val *x, bool ends, uint32_t line) {
    if (x && x->kind == V_LIST) {
        for (uint32_t i = 0; i < x->u.l->n; i++)
            if (starts_or_ends(r, s, &x->u.l->items[i], ends, line)) return true;
        return false;
    }
    if (!need_str(r, x, ends ? "endswith" : "startswith", line)) return false;
    if (x->n > s->n) return false;
    return memcmp(s->u.s + (ends ? s->n - x->n : 0), x->u.s, x->n) == 0;
}

/* ---- strftime_now on the fixed date the caller gives ---- */

static tpl_val format_date(tpl_render *r, const tpl_val *fmt, uint32_t line) {
    static const char *const months[] = {"January", "February", "March", "April", "May", "June", "July",
                                         "August", "September", "October", "November", "December"};
    static const char *const days[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
    if (!need_str(r, fmt, "strftime_now", line)) return tpl_undef();
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

/* ---- lookups ---- */

const tpl_list *tpl_iterable(tpl_render *r, const tpl_val *v, uint32_t line) {
    switch (v->kind) {
    case V_LIST: return v->u.l;
    case V_UNDEF: return tpl_list_new(r, 0); /* Jinja's Undefined iterates as empty */
    case V_DICT: {
        tpl_list *l = tpl_list_new(r, v->u.d->n);
        if (l) memcpy(l->items, v->u.d->keys, (size_t)v->u.d->n * sizeof(tpl_val));
        return l;
    }
    case V_STR: {
        tpl_list *l = tpl_list_new(r, (uint32_t)tpl_utf8_len(v->u.s, v->n));
        for (size_t i = 0, k = 0; l && i < v->n; k++) {
            size_t len;
            decode(v->u.s + i, v->n - i, &len);
            l->items[k] = tpl_str(v->u.s + i, len);
            i += len;
        }
        return l;
    }
    default: tpl_error(r, WISP_ERR_ARG, line, "'%s' object is not iterable", tpl_type_name(v)); return NULL;
    }
}

static tpl_val loop_attr(tpl_render *r, const tpl_loop *lp, const char *name, size_t n, uint32_t line) {
    int64_t i = lp->index0, len = lp->items->n;
#define IS(s) (n == sizeof(s) - 1 && memcmp(name, s, n) == 0)
    if (IS("index0")) return tpl_int(i);
    if (IS("index")) return tpl_int(i + 1);
    if (IS("first")) return tpl_bool(i == 0);
    if (IS("last")) return tpl_bool(i == len - 1);
    if (IS("length")) return tpl_int(len);
    if (IS("revindex")) return tpl_int(len - i);
    if (IS("revindex0")) return tpl_int(len - i - 1);
    if (IS("previtem")) return i > 0 ? lp->items->items[i - 1] : tpl_undef();
    if (IS("nextitem")) return i + 1 < len ? lp->items->items[i + 1] : tpl_undef();
#undef IS
    tpl_error(r, WISP_ERR_UNSUPPORTED, line, "loop.%.*s is not supported", (int)n, name);
    return tpl_undef();
}

static tpl_val get_attr(tpl_render *r, const tpl_val *obj, const char *name, size_t n, uint32_t line) {
    switch (obj->kind) {
    case V_DICT:
    case V_NAMESPACE: {
        const tpl_val *v = tpl_dict_get(obj->u.d, name, n);
        return v ? *v : tpl_undef();
    }
    case V_LOOP: return loop_attr(r, obj->u.loop, name, n, line);
    case V_UNDEF:
        tpl_error(r, WISP_ERR_ARG, line, "attribute '%.*s' of an undefined value", (int)n, name);
        return tpl_undef();
    default: return tpl_undef(); /* Jinja: a missing attribute is undefined */
    }
}

static tpl_val get_item(tpl_render *r, const tpl_val *obj, const tpl_val *key, uint32_t line) {
    if (obj->kind == V_UNDEF) return undefined_error(r, line, "an item"), tpl_undef();
    if (key->kind == V_STR && obj->kind != V_DICT) return get_attr(r, obj, key->u.s, key->n, line);
    if (obj->kind == V_DICT) {
        for (uint32_t i = 0; i < obj->u.d->n; i++)
            if (tpl_equal(&obj->u.d->keys[i], key)) return obj->u.d->vals[i];
        return tpl_undef();
    }
    if (key->kind != V_INT && key->kind != V_BOOL) return tpl_undef();
    int64_t i = key->u.i;
    if (obj->kind == V_LIST) {
        int64_t n = obj->u.l->n;
        if (i < 0) i += n;
        return i >= 0 && i < n ? obj->u.l->items[i] : tpl_undef();
    }
    if (obj->kind == V_STR) {
        int64_t n = (int64_t)tpl_utf8_len(obj->u.s, obj->n);
        if (i < 0) i += n;
        if (i < 0 || i >= n) return tpl_undef();
        size_t a = tpl_utf8_offset(obj->u.s, obj->n, (size_t)i), b = tpl_utf8_offset(obj->u.s, obj->n, (size_t)i + 1);
        return tpl_str(obj->u.s + a, b - a);
    }
    return tpl_undef();
}

/* Python's slice.indices, then the picked elements. */
static tpl_val slice(tpl_render *r, const tpl_val *obj, const tpl_node *n) {
    tpl_val sv[3];
    int64_t v[3] = {0, 0, 1};
    bool given[3];
    uint32_t parts[3] = {n->b, n->c, n->d};
    for (int k = 0; k < 3; k++) {
        given[k] = false;
        if (!parts[k]) continue;
        sv[k] = tpl_eval(r, parts[k]);
        if (sv[k].kind == V_NONE) continue;
        if (!need_int(r, &sv[k], "a slice", n->line)) return tpl_undef();
        v[k] = sv[k].u.i;
        given[k] = true;
    }
    if (obj->kind == V_UNDEF) return undefined_error(r, n->line, "a slice"), tpl_undef();
    if (obj->kind != V_LIST && obj->kind != V_STR)
        return tpl_error(r, WISP_ERR_ARG, n->line, "'%s' object cannot be sliced", tpl_type_name(obj)), tpl_undef();
    int64_t len = obj->kind == V_LIST ? obj->u.l->n : (int64_t)tpl_utf8_len(obj->u.s, obj->n);
    int64_t step = v[2];
    if (step == 0) return tpl_error(r, WISP_ERR_ARG, n->line, "slice step cannot be zero"), tpl_undef();
    int64_t lo = step < 0 ? -1 : 0, hi = step < 0 ? len - 1 : len;
    int64_t start = given[0] ? v[0] : step < 0 ? hi : lo, stop = given[1] ? v[1] : step < 0 ? lo : hi;
    if (given[0]) { if (start < 0) start += len; if (start < lo) start = lo; if (start > hi) start = hi; }
    if (given[1]) { if (stop < 0) stop += len; if (stop < lo) stop = lo; if (stop > hi) stop = hi; }
    int64_t count = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                             : (start > stop ? (start - stop + (-step) - 1) / (-step) : 0);
    if (obj->kind == V_LIST) {
        tpl_list *l = tpl_list_new(r, (uint32_t)count);
        for (int64_t k = 0; l && k < count; k++) l->items[k] = obj->u.l->items[start + k * step];
        return l ? tpl_list_val(l) : tpl_undef();
    }
    if (step == 1) {
        size_t a = tpl_utf8_offset(obj->u.s, obj->n, (size_t)start), b = tpl_utf8_offset(obj->u.s, obj->n, (size_t)(start + count));
        return tpl_str(obj->u.s + a, b - a);
    }
    tpl_sb b;
    tpl_sb_begin(r, &b);
    for (int64_t k = 0; k < count; k++) {
        size_t at = tpl_utf8_offset(obj->u.s, obj->n, (size_t)(start + k * step));
        size_t len_cp;
        decode(obj->u.s + at, obj->n - at, &len_cp);
        tpl_sb_put(&b, obj->u.s + at, len_cp);
    }
    return tpl_sb_end(&b);
}

/* ---- operators ---- */

static bool is_num(const tpl_val *v) { return v->kind == V_INT || v->kind == V_BOOL || v->kind == V_FLOAT; }
static double num(const tpl_val *v) { return v->kind == V_FLOAT ? v->u.f : (double)v->u.i; }

static const char *op_name(int op) {
    static const char *const names[] = {"?", "+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", "<=", ">", ">=", "in", "not in"};
    return op >= 0 && op <= OP_NOT_IN ? names[op] : "?";
}

static tpl_val type_error(tpl_render *r, int op, const tpl_val *a, const tpl_val *b, uint32_t line) {
    if (a->kind == V_UNDEF || b->kind == V_UNDEF)
        tpl_error(r, WISP_ERR_ARG, line, "'%s' with an undefined value", op_name(op));
    else
        tpl_error(r, WISP_ERR_ARG, line, "unsupported operand types for %s: '%s' and '%s'", op_name(op),
                  tpl_type_name(a), tpl_type_name(b));
    return tpl_undef();
}

static tpl_val arith(tpl_render *r, int op, const tpl_val *a, const tpl_val *b, uint32_t line) {
    if (op == OP_CONCAT) {
        tpl_sb s;
        tpl_val x = to_str(r, a), y = to_str(r, b);
        tpl_sb_begin(r, &s);
        tpl_sb_put(&s, x.u.s, x.n);
        tpl_sb_put(&s, y.u.s, y.n);
        return tpl_sb_end(&s);
    }
    if (op == OP_ADD && a->kind == V_STR && b->kind == V_STR) {
        tpl_sb s;
        tpl_sb_begin(r, &s);
        tpl_sb_put(&s, a->u.s, a->n);
        tpl_sb_put(&s, b->u.s, b->n);
        return tpl_sb_end(&s);
    }
    if (op == OP_ADD && a->kind == V_LIST && b->kind == V_LIST) {
        tpl_list *l = tpl_list_new(r, a->u.l->n + b->u.l->n);
        if (!l) return tpl_undef();
        memcpy(l->items, a->u.l->items, a->u.l->n * sizeof(tpl_val));
        memcpy(l->items + a->u.l->n, b->u.l->items, b->u.l->n * sizeof(tpl_val));
        return tpl_list_val(l);
    }
    if (op == OP_MUL && a->kind == V_STR && (b->kind == V_INT || b->kind == V_BOOL)) {
        tpl_sb s;
        tpl_sb_begin(r, &s);
        for (int64_t k = 0; k < b->u.i && !r->failed; k++) tpl_sb_put(&s, a->u.s, a->n);
        return tpl_sb_end(&s);
    }
    if (op == OP_MOD && a->kind == V_STR)
        return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "string formatting with '%%' is not supported"), tpl_undef();
    if (!is_num(a) || !is_num(b)) return type_error(r, op, a, b, line);
    bool ints = a->kind != V_FLOAT && b->kind != V_FLOAT;
    if (ints && op != OP_DIV) {
        int64_t x = a->u.i, y = b->u.i, z = 0;
        bool overflow = false;
        switch (op) {
        case OP_ADD: overflow = __builtin_add_overflow(x, y, &z); break;
        case OP_SUB: overflow = __builtin_sub_overflow(x, y, &z); break;
        case OP_MUL: overflow = __builtin_mul_overflow(x, y, &z); break;
        case OP_FLOORDIV:
        case OP_MOD:
            if (y == 0) return tpl_error(r, WISP_ERR_ARG, line, "integer division or modulo by zero"), tpl_undef();
            if (x == INT64_MIN && y == -1) { overflow = true; break; }
            z = op == OP_FLOORDIV ? x / y : x % y;
            if (op == OP_FLOORDIV && (x % y != 0) && ((x < 0) != (y < 0))) z--;
            if (op == OP_MOD && z != 0 && ((z < 0) != (y < 0))) z += y;
            break;
        case OP_POW:
            if (y < 0) return tpl_float(pow((double)x, (double)y));
            z = 1;
            for (int64_t k = 0; k < y && !overflow; k++) overflow = __builtin_mul_overflow(z, x, &z);
            break;
        }
        if (overflow) return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "integer beyond 64 bits in '%s'", op_name(op)), tpl_undef();
        return tpl_int(z);
    }
    double x = num(a), y = num(b);
    switch (op) {
    case OP_ADD: return tpl_float(x + y);
    case OP_SUB: return tpl_float(x - y);
    case OP_MUL: return tpl_float(x * y);
    case OP_POW: return tpl_float(pow(x, y));
    default:
        if (y == 0) return tpl_error(r, WISP_ERR_ARG, line, "division by zero"), tpl_undef();
        if (op == OP_DIV) return tpl_float(x / y);
        if (op == OP_FLOORDIV) return tpl_float(floor(x / y));
        return tpl_float(x - floor(x / y) * y);
    }
}

static bool contains(tpl_render *r, const tpl_val *item, const tpl_val *box, uint32_t line) {
    switch (box->kind) {
    case V_STR:
        if (item->kind != V_STR) return tpl_error(r, WISP_ERR_ARG, line, "'in <string>' requires a string on the left");
        if (item->n == 0) return true;
        for (size_t i = 0; i + item->n <= box->n; i++)
            if (memcmp(box->u.s + i, item->u.s, item->n) == 0) return true;
        return false;
    case V_LIST:
        for (uint32_t i = 0; i < box->u.l->n; i++)
            if (tpl_equal(item, &box->u.l->items[i])) return true;
        return false;
    case V_DICT:
    case V_NAMESPACE:
        for (uint32_t i = 0; i < box->u.d->n; i++)
            if (tpl_equal(item, &box->u.d->keys[i])) return true;
        return false;
    case V_UNDEF: return false;
    default: return tpl_error(r, WISP_ERR_ARG, line, "argument of type '%s' is not iterable", tpl_type_name(box));
    }
}

static tpl_val compare(tpl_render *r, int op, const tpl_val *a, const tpl_val *b, uint32_t line) {
    if (op == OP_EQ || op == OP_NE) return tpl_bool(tpl_equal(a, b) == (op == OP_EQ));
    if (op == OP_IN || op == OP_NOT_IN) {
        bool in = contains(r, a, b, line);
        return tpl_bool(in == (op == OP_IN));
    }
    int c;
    if (is_num(a) && is_num(b)) {
        if (a->kind != V_FLOAT && b->kind != V_FLOAT) c = a->u.i < b->u.i ? -1 : a->u.i > b->u.i;
        else c = num(a) < num(b) ? -1 : num(a) > num(b);
    } else if (a->kind == V_STR && b->kind == V_STR) {
        size_t m = a->n < b->n ? a->n : b->n;
        c = memcmp(a->u.s, b->u.s, m); /* UTF-8 byte order is code point order */
        if (c == 0) c = a->n < b->n ? -1 : a->n > b->n;
    } else {
        return type_error(r, op, a, b, line);
    }
    switch (op) {
    case OP_LT: return tpl_bool(c < 0);
    case OP_LE: return tpl_bool(c <= 0);
    case OP_GT: return tpl_bool(c > 0);
    default: return tpl_bool(c >= 0);
    }
}

/* ---- tests ---- */

static bool apply_test(tpl_render *r, int id, const tpl_val *v, const args *a, uint32_t line) {
    const tpl_val *x = arg(a, 0, "");
    switch (id) {
    case T_DEFINED: return v->kind != V_UNDEF;
    case T_UNDEFINED: return v->kind == V_UNDEF;
    case T_NONE: return v->kind == V_NONE;
    case T_STRING: return v->kind == V_STR;
    case T_NUMBER: return is_num(v);
    case T_INTEGER: return v->kind == V_INT;
    case T_FLOAT: return v->kind == V_FLOAT;
    case T_BOOLEAN: return v->kind == V_BOOL;
    case T_TRUE: return v->kind == V_BOOL && v->u.i;
    case T_FALSE: return v->kind == V_BOOL && !v->u.i;
    case T_MAPPING: return v->kind == V_DICT;
    case T_ITERABLE: return v->kind == V_STR || v->kind == V_LIST || v->kind == V_DICT || v->kind == V_UNDEF || v->kind == V_LOOP;
    case T_SEQUENCE: return v->kind == V_STR || v->kind == V_LIST || v->kind == V_DICT;
    case T_CALLABLE: return v->kind == V_MACRO || v->kind == V_FUNC;
    case T_ODD:
    case T_EVEN:
        if (!need_int(r, v, id == T_ODD ? "odd" : "even", line)) return false;
        return (v->u.i % 2 != 0) == (id == T_ODD);
    case T_DIVISIBLEBY:
        if (!need_int(r, v, "divisibleby", line) || !need_int(r, x, "divisibleby", line)) return false;
        if (x->u.i == 0) return tpl_error(r, WISP_ERR_ARG, line, "divisibleby 0");
        return v->u.i % x->u.i == 0;
    case T_LOWER:
    case T_UPPER:
        if (v->kind != V_STR) return false;
        {
            bool cased = false;
            for (size_t i = 0; i < v->n; i++) {
                char c = v->u.s[i];
                if ((id == T_LOWER && c >= 'A' && c <= 'Z') || (id == T_UPPER && c >= 'a' && c <= 'z')) return false;
                cased |= (c | 32) >= 'a' && (c | 32) <= 'z';
            }
            return cased;
        }
    default: break;
    }
    if (!x) return tpl_error(r, WISP_ERR_ARG, line, "this test needs an argument");
    switch (id) {
    case T_EQ: return tpl_equal(v, x);
    case T_NE: return !tpl_equal(v, x);
    case T_IN: return contains(r, v, x, line);
    default: {
        static const int ops[] = {OP_LT, OP_LE, OP_GT, OP_GE};
        tpl_val c = compare(r, ops[id - T_LT], v, x, line);
        return c.kind == V_BOOL && c.u.i;
    }
    }
}

/* ---- filters ---- */

static tpl_val attr_path(tpl_render *r, const tpl_val *v, const tpl_val *path, uint32_t line) {
    tpl_val cur = *v;
    size_t start = 0;
    for (size_t i = 0; i <= path->n; i++) {
        if (i < path->n && path->u.s[i] != '.') continue;
        tpl_val key = tpl_str(path->u.s + start, i - start);
        bool digits = i > start;
        for (size_t k = start; k < i; k++) digits &= path->u.s[k] >= '0' && path->u.s[k] <= '9';
        if (digits) {
            int64_t idx = 0;
            for (size_t k = start; k < i && idx < INT32_MAX; k++) idx = idx * 10 + (path->u.s[k] - '0');
            key = tpl_int(idx);
        }
        if (cur.kind == V_UNDEF) return tpl_undef();
        cur = get_item(r, &cur, &key, line);
        start = i + 1;
    }
    return cur;
}

static tpl_val apply_filter(tpl_render *r, int id, const tpl_val *v, const args *a, uint32_t line);

static tpl_val select_attr(tpl_render *r, const tpl_val *v, const args *a, bool reject, uint32_t line) {
    const tpl_val *attr = arg(a, 0, "");
    if (!need_str(r, attr, reject ? "rejectattr" : "selectattr", line)) return tpl_undef();
    const tpl_list *items = tpl_iterable(r, v, line);
    if (!items) return tpl_undef();
    int test = -1;
    args rest;
    memset(&rest, 0, sizeof rest);
    if (a->n_pos >= 2) {
        if (!need_str(r, &a->pos[1], "the test name", line)) return tpl_undef();
        test = tpl_test_id(a->pos[1].u.s, a->pos[1].n);
        if (test < 0)
            return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "test '%.*s' is not supported", (int)a->pos[1].n, a->pos[1].u.s), tpl_undef();
        for (uint32_t i = 2; i < a->n_pos; i++) rest.pos[rest.n_pos++] = a->pos[i];
    }
    tpl_list *out = tpl_list_new(r, items->n);
    if (!out) return tpl_undef();
    out->n = 0;
    for (uint32_t i = 0; i < items->n && !r->failed; i++) {
        tpl_val x = attr_path(r, &items->items[i], attr, line);
        bool keep = test < 0 ? tpl_truthy(&x) : apply_test(r, test, &x, &rest, line);
        if (keep != reject) out->items[out->n++] = items->items[i];
    }
    return tpl_list_val(out);
}

static tpl_val apply_filter(tpl_render *r, int id, const tpl_val *v, const args *a, uint32_t line) {
    static const char *const none[] = {NULL};
    static const char *const trim_kw[] = {"chars", NULL};
    static const char *const json_kw[] = {"indent", NULL};
    static const char *const default_kw[] = {"default_value", "boolean", NULL};
    static const char *const join_kw[] = {"d", "attribute", NULL};
    static const char *const map_kw[] = {"attribute", "default", NULL};
    static const char *const replace_kw[] = {"old", "new", "count", NULL};
    static const char *const int_kw[] = {"default", "base", NULL};
    switch (id) {
    case F_TRIM: {
        if (!check_args(r, a, 1, trim_kw, "trim", line)) return tpl_undef();
        tpl_val s = to_str(r, v);
        const tpl_val *chars = arg(a, 0, "chars");
        if (chars && chars->kind == V_NONE) chars = NULL;
        if (chars && !need_str(r, chars, "trim", line)) return tpl_undef();
        return strip(&s, chars, true, true);
    }
    case F_TOJSON: {
        if (!check_args(r, a, 1, json_kw, "tojson", line)) return tpl_undef();
        const tpl_val *ind = arg(a, 0, "indent");
        int indent = -1;
        if (ind && ind->kind != V_NONE) {
            if (!need_int(r, ind, "tojson indent", line) || ind->u.i < 0 || ind->u.i > 64)
                return tpl_error(r, WISP_ERR_ARG, line, "tojson indent must be 0..64"), tpl_undef();
            indent = (int)ind->u.i;
        }
        tpl_sb b;
        tpl_sb_begin(r, &b);
        if (!tpl_write_json(&b, v, indent, 0)) return tpl_undef();
        return tpl_sb_end(&b);
    }
    case F_LENGTH:
        if (!check_args(r, a, 0, none, "length", line)) return tpl_undef();
        switch (v->kind) {
        case V_STR: return tpl_int((int64_t)tpl_utf8_len(v->u.s, v->n));
        case V_LIST: return tpl_int(v->u.l->n);
        case V_DICT:
        case V_NAMESPACE: return tpl_int(v->u.d->n);
        case V_UNDEF: return tpl_int(0);
        default: return tpl_error(r, WISP_ERR_ARG, line, "object of type '%s' has no len()", tpl_type_name(v)), tpl_undef();
        }
    case F_LIST: {
        if (!check_args(r, a, 0, none, "list", line)) return tpl_undef();
        const tpl_list *l = tpl_iterable(r, v, line);
        return l ? tpl_list_val((tpl_list *)l) : tpl_undef();
    }
    case F_SELECTATTR:
    case F_REJECTATTR:
        if (!check_args(r, a, MAX_ARGS, none, id == F_SELECTATTR ? "selectattr" : "rejectattr", line)) return tpl_undef();
        return select_attr(r, v, a, id == F_REJECTATTR, line);
    case F_FIRST:
    case F_LAST: {
        if (!check_args(r, a, 0, none, id == F_FIRST ? "first" : "last", line)) return tpl_undef();
        const tpl_list *l = tpl_iterable(r, v, line);
        if (!l || l->n == 0) return tpl_undef();
        return l->items[id == F_FIRST ? 0 : l->n - 1];
    }
    case F_JOIN: {
        if (!check_args(r, a, 2, join_kw, "join", line)) return tpl_undef();
        const tpl_val *sep = arg(a, 0, "d"), *attr = arg(a, 1, "attribute");
        if (sep && !need_str(r, sep, "join", line)) return tpl_undef();
        const tpl_list *l = tpl_iterable(r, v, line);
        if (!l) return tpl_undef();
        /* the parts first (they may allocate), then one string */
        tpl_list *parts = tpl_list_new(r, l->n);
        for (uint32_t i = 0; parts && i < l->n && !r->failed; i++) {
            tpl_val x = attr ? attr_path(r, &l->items[i], attr, line) : l->items[i];
            parts->items[i] = to_str(r, &x);
        }
        if (!parts || r->failed) return tpl_undef();
        tpl_sb b;
        tpl_sb_begin(r, &b);
        for (uint32_t i = 0; i < parts->n; i++) {
            if (i && sep) tpl_sb_put(&b, sep->u.s, sep->n);
            tpl_sb_put(&b, parts->items[i].u.s, parts->items[i].n);
        }
        return tpl_sb_end(&b);
    }
    case F_UPPER:
    case F_LOWER:
    case F_CAPITALIZE:
    case F_TITLE: {
        if (!check_args(r, a, 0, none, "a case filter", line)) return tpl_undef();
        tpl_val s = to_str(r, v);
        int mode = id == F_UPPER ? 0 : id == F_LOWER ? 1 : id == F_CAPITALIZE ? 2 : 3;
        return change_case(r, &s, mode, line);
    }
    case F_DEFAULT: {
        if (!check_args(r, a, 2, default_kw, "default", line)) return tpl_undef();
        const tpl_val *d = arg(a, 0, "default_value"), *boolean = arg(a, 1, "boolean");
        bool use = v->kind == V_UNDEF || (boolean && tpl_truthy(boolean) && !tpl_truthy(v));
        return use ? (d ? *d : tpl_str("", 0)) : *v;
    }
    case F_STRING:
    case F_SAFE:
        if (!check_args(r, a, 0, none, "string", line)) return tpl_undef();
        return to_str(r, v);
    case F_INT: {
        if (!check_args(r, a, 1, int_kw, "int", line)) return tpl_undef();
        const tpl_val *d = arg(a, 0, "default");
        tpl_val dflt = d ? *d : tpl_int(0);
        if (v->kind == V_INT || v->kind == V_BOOL) return tpl_int(v->u.i);
        if (v->kind == V_FLOAT) return v->u.f > -9e18 && v->u.f < 9e18 ? tpl_int((int64_t)v->u.f) : dflt;
        if (v->kind != V_STR) return dflt;
        tpl_val s = strip(v, NULL, true, true);
        int64_t x = 0;
        size_t i = 0;
        bool neg = s.n && s.u.s[0] == '-';
        if (s.n && (s.u.s[0] == '-' || s.u.s[0] == '+')) i = 1;
        if (i >= s.n) return dflt;
        for (; i < s.n; i++) {
            if (s.u.s[i] < '0' || s.u.s[i] > '9' || x > (INT64_MAX - 9) / 10) return dflt;
            x = x * 10 + (s.u.s[i] - '0');
        }
        return tpl_int(neg ? -x : x);
    }
    case F_FLOAT:
        if (!check_args(r, a, 0, none, "float", line)) return tpl_undef();
        if (is_num(v)) return tpl_float(num(v));
        return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "float of a %s is not supported", tpl_type_name(v)), tpl_undef();
    case F_ABS:
        if (!check_args(r, a, 0, none, "abs", line)) return tpl_undef();
        if (v->kind == V_INT || v->kind == V_BOOL) return tpl_int(v->u.i < 0 ? -v->u.i : v->u.i);
        if (v->kind == V_FLOAT) return tpl_float(fabs(v->u.f));
        return tpl_error(r, WISP_ERR_ARG, line, "bad operand type for abs(): '%s'", tpl_type_name(v)), tpl_undef();
    case F_REVERSE: {
        if (!check_args(r, a, 0, none, "reverse", line)) return tpl_undef();
        if (v->kind == V_STR)
            return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "reverse of a string is not supported"), tpl_undef();
        const tpl_list *l = tpl_iterable(r, v, line);
        tpl_list *out = l ? tpl_list_new(r, l->n) : NULL;
        for (uint32_t i = 0; out && i < l->n; i++) out->items[i] = l->items[l->n - 1 - i];
        return out ? tpl_list_val(out) : tpl_undef();
    }
    case F_REPLACE: {
        if (!check_args(r, a, 3, replace_kw, "replace", line)) return tpl_undef();
        tpl_val s = to_str(r, v);
        const tpl_val *count = arg(a, 2, "count");
        if (count && !need_int(r, count, "replace count", line)) return tpl_undef();
        return replace(r, &s, arg(a, 0, "old"), arg(a, 1, "new"), count ? count->u.i : -1, line);
    }
    case F_ESCAPE: {
        if (!check_args(r, a, 0, none, "escape", line)) return tpl_undef();
        tpl_val s = to_str(r, v);
        tpl_sb b;
        tpl_sb_begin(r, &b);
        for (size_t i = 0; i < s.n; i++) {
            char c = s.u.s[i];
            const char *e = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&#34;" : c == '\'' ? "&#39;" : NULL;
            if (e) tpl_sb_put(&b, e, strlen(e));
            else tpl_sb_put(&b, &c, 1);
        }
        return tpl_sb_end(&b);
    }
    case F_ITEMS: {
        if (!check_args(r, a, 0, none, "items", line)) return tpl_undef();
        if (v->kind == V_UNDEF) return tpl_list_val(tpl_list_new(r, 0));
        if (v->kind != V_DICT) return tpl_error(r, WISP_ERR_ARG, line, "items of a %s", tpl_type_name(v)), tpl_undef();
        tpl_list *l = tpl_list_new(r, v->u.d->n);
        for (uint32_t i = 0; l && i < v->u.d->n; i++) {
            tpl_list *pair = tpl_list_new(r, 2);
            if (!pair) return tpl_undef();
            pair->items[0] = v->u.d->keys[i];
            pair->items[1] = v->u.d->vals[i];
            l->items[i] = tpl_list_val(pair);
        }
        return l ? tpl_list_val(l) : tpl_undef();
    }
    case F_MAP: {
        if (!check_args(r, a, 1, map_kw, "map", line)) return tpl_undef();
        const tpl_val *attr = arg(a, MAX_ARGS, "attribute"), *dflt = arg(a, MAX_ARGS, "default");
        int fid = -1;
        if (!attr) {
            const tpl_val *name = arg(a, 0, "");
            if (!need_str(r, name, "map", line)) return tpl_undef();
            fid = tpl_filter_id(name->u.s, name->n);
            if (fid < 0 || fid == F_MAP)
                return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "filter '%.*s' is not supported", (int)name->n, name->u.s), tpl_undef();
        } else if (!need_str(r, attr, "map attribute", line)) {
            return tpl_undef();
        }
        const tpl_list *l = tpl_iterable(r, v, line);
        tpl_list *out = l ? tpl_list_new(r, l->n) : NULL;
        args empty;
        memset(&empty, 0, sizeof empty);
        for (uint32_t i = 0; out && i < l->n && !r->failed; i++) {
            tpl_val x = attr ? attr_path(r, &l->items[i], attr, line) : apply_filter(r, fid, &l->items[i], &empty, line);
            if (x.kind == V_UNDEF && dflt) x = *dflt;
            out->items[i] = x;
        }
        return out ? tpl_list_val(out) : tpl_undef();
    }
    default: break;
    }
    return tpl_error(r, WISP_ERR_INTERNAL, line, "filter %d has no implementation", id), tpl_undef();
}

/* ---- calls ---- */

static tpl_val call_global(tpl_render *r, int fn, const args *a, uint32_t line) {
    static const char *const none[] = {NULL};
    switch (fn) {
    case FN_RAISE: {
        const tpl_val *msg = arg(a, 0, "");
        tpl_val s = msg ? to_str(r, msg) : tpl_str("", 0);
        tpl_error(r, WISP_ERR_ARG, line, WISP_TEMPLATE_RAISED "%.*s", (int)s.n, s.u.s);
        return tpl_undef();
    }
    case FN_NAMESPACE:
    case FN_DICT: {
        if (a->n_pos > (fn == FN_DICT ? 0u : 1u) || (a->n_pos == 1 && a->pos[0].kind != V_DICT))
            return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "%s() with positional arguments is not supported",
                             fn == FN_DICT ? "dict" : "namespace"), tpl_undef();
        uint32_t extra = a->n_pos ? a->pos[0].u.d->n : 0;
        tpl_dict *d = tpl_dict_new(r, fn == FN_NAMESPACE ? a->n_kw + extra + 32 : a->n_kw);
        if (!d) return tpl_undef();
        for (uint32_t i = 0; i < extra; i++) tpl_dict_set(r, d, a->pos[0].u.d->keys[i], a->pos[0].u.d->vals[i]);
        for (uint32_t i = 0; i < a->n_kw; i++) tpl_dict_set(r, d, tpl_str(a->kw_name[i], a->kw_len[i]), a->kw[i]);
        tpl_val v = {fn == FN_NAMESPACE ? V_NAMESPACE : V_DICT, 0, {0}};
        v.u.d = d;
        return v;
    }
    case FN_STRFTIME:
        if (!check_args(r, a, 1, none, "strftime_now", line)) return tpl_undef();
        return format_date(r, arg(a, 0, ""), line);
    case FN_RANGE: {
        if (!check_args(r, a, 3, none, "range", line)) return tpl_undef();
        int64_t v[3] = {0, 0, 1};
        for (uint32_t i = 0; i < a->n_pos; i++)
            if (!need_int(r, &a->pos[i], "range", line)) return tpl_undef();
        if (a->n_pos == 0) return tpl_error(r, WISP_ERR_ARG, line, "range expected at least 1 argument"), tpl_undef();
        if (a->n_pos == 1) v[1] = a->pos[0].u.i;
        else for (uint32_t i = 0; i < a->n_pos; i++) v[i] = a->pos[i].u.i;
        if (v[2] == 0) return tpl_error(r, WISP_ERR_ARG, line, "range() arg 3 must not be zero"), tpl_undef();
        int64_t count = v[2] > 0 ? (v[1] > v[0] ? (v[1] - v[0] + v[2] - 1) / v[2] : 0)
                                 : (v[0] > v[1] ? (v[0] - v[1] - v[2] - 1) / -v[2] : 0);
        if (count > 100000) return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "range of more than 100000 items"), tpl_undef();
        tpl_list *l = tpl_list_new(r, (uint32_t)count);
        for (int64_t i = 0; l && i < count; i++) l->items[i] = tpl_int(v[0] + i * v[2]);
        return l ? tpl_list_val(l) : tpl_undef();
    }
    }
    return tpl_error(r, WISP_ERR_INTERNAL, line, "unknown global function"), tpl_undef();
}

static bool name_is(const char *s, size_t n, const char *lit) { return strlen(lit) == n && memcmp(s, lit, n) == 0; }

static tpl_val call_method(tpl_render *r, const tpl_val *obj, const char *name, size_t n, const args *a, uint32_t line) {
    static const char *const none[] = {NULL};
    if (obj->kind == V_STR) {
        const tpl_val *x = arg(a, 0, ""), *y = arg(a, 1, "");
        if (name_is(name, n, "strip") || name_is(name, n, "lstrip") || name_is(name, n, "rstrip")) {
            if (!check_args(r, a, 1, none, "strip", line)) return tpl_undef();
            if (x && x->kind == V_NONE) x = NULL;
            if (x && !need_str(r, x, "strip", line)) return tpl_undef();
            return strip(obj, x, name[0] != 'r', name[0] != 'l');
        }
        if (name_is(name, n, "startswith") || name_is(name, n, "endswith")) {
            if (!check_args(r, a, 1, none, "startswith", line)) return tpl_undef();
            return tpl_bool(starts_or_ends(r, obj, x, name[0] == 'e', line));
        }
        if (name_is(name, n, "split")) {
            static const char *const kw[] = {"sep", "maxsplit", NULL};
            if (!check_args(r, a, 2, kw, "split", line)) return tpl_undef();
            const tpl_val *sep = arg(a, 0, "sep"), *maxsplit = arg(a, 1, "maxsplit");
            if (maxsplit && !need_int(r, maxsplit, "split maxsplit", line)) return tpl_undef();
            return split(r, obj, sep, maxsplit ? maxsplit->u.i : -1, line);
        }
        if (name_is(name, n, "replace")) {
            if (!check_args(r, a, 3, none, "replace", line)) return tpl_undef();
            const tpl_val *count = arg(a, 2, "");
            if (count && !need_int(r, count, "replace count", line)) return tpl_undef();
            return replace(r, obj, x, y, count ? count->u.i : -1, line);
        }
        static const char *const cases[] = {"upper", "lower", "capitalize", "title"};
        for (int m = 0; m < 4; m++)
            if (name_is(name, n, cases[m])) {
                if (!check_args(r, a, 0, none, cases[m], line)) return tpl_undef();
                return change_case(r, obj, m, line);
            }
        if (name_is(name, n, "join")) {
            if (!check_args(r, a, 1, none, "join", line)) return tpl_undef();
            args j;
            memset(&j, 0, sizeof j);
            j.n_pos = 1;
            j.pos[0] = *obj;
            return x ? apply_filter(r, F_JOIN, x, &j, line) : tpl_undef();
        }
        if (name_is(name, n, "find") || name_is(name, n, "count")) {
            if (!check_args(r, a, 1, none, "find", line) || !need_str(r, x, "find", line)) return tpl_undef();
            int64_t found = -1, count = 0;
            for (size_t i = 0; i + x->n <= obj->n;) {
                if (memcmp(obj->u.s + i, x->u.s, x->n) == 0) {
                    if (found < 0) found = (int64_t)tpl_utf8_len(obj->u.s, i);
                    count++;
                    i += x->n ? x->n : 1;
                } else {
                    i++;
                }
            }
            return tpl_int(name[0] == 'f' ? found : count);
        }
    } else if (obj->kind == V_DICT) {
        if (name_is(name, n, "items")) {
            if (!check_args(r, a, 0, none, "items", line)) return tpl_undef();
            args empty;
            memset(&empty, 0, sizeof empty);
            return apply_filter(r, F_ITEMS, obj, &empty, line);
        }
        if (name_is(name, n, "keys") || name_is(name, n, "values")) {
            if (!check_args(r, a, 0, none, "keys", line)) return tpl_undef();
            tpl_list *l = tpl_list_new(r, obj->u.d->n);
            if (l) memcpy(l->items, name[0] == 'k' ? obj->u.d->keys : obj->u.d->vals, (size_t)obj->u.d->n * sizeof(tpl_val));
            return l ? tpl_list_val(l) : tpl_undef();
        }
        if (name_is(name, n, "get")) {
            if (!check_args(r, a, 2, none, "get", line)) return tpl_undef();
            const tpl_val *key = arg(a, 0, ""), *dflt = arg(a, 1, "");
            if (!key) return tpl_error(r, WISP_ERR_ARG, line, "get expected at least 1 argument"), tpl_undef();
            for (uint32_t i = 0; i < obj->u.d->n; i++)
                if (tpl_equal(&obj->u.d->keys[i], key)) return obj->u.d->vals[i];
            return dflt ? *dflt : tpl_none();
        }
    } else if (obj->kind == V_UNDEF) {
        return tpl_error(r, WISP_ERR_ARG, line, "method '%.*s' of an undefined value", (int)n, name), tpl_undef();
    }
    return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "method '%.*s' of %s is not supported", (int)n, name, tpl_type_name(obj)),
           tpl_undef();
}

static tpl_val call(tpl_render *r, const tpl_node *n) {
    const tpl_node *callee = node_at(r, n->a);
    args a;
    if (callee->kind == N_GETATTR) {
        tpl_val obj = tpl_eval(r, callee->a);
        if (r->failed) return tpl_undef();
        const char *name = tpl_node_str(r->t, callee);
        if (obj.kind == V_DICT || obj.kind == V_NAMESPACE) { /* a macro stored in a dict is called like one */
            const tpl_val *member = tpl_dict_get(obj.u.d, name, callee->n);
            if (member && member->kind == V_MACRO) return tpl_call_macro(r, n, member);
        }
        if (!eval_args(r, n->b, &a, n->line)) return tpl_undef();
        return call_method(r, &obj, name, callee->n, &a, n->line);
    }
    tpl_val f = tpl_eval(r, n->a);
    if (r->failed) return tpl_undef();
    if (f.kind == V_MACRO) return tpl_call_macro(r, n, &f);
    if (f.kind == V_FUNC) {
        if (!eval_args(r, n->b, &a, n->line)) return tpl_undef();
        return call_global(r, (int)f.u.i, &a, n->line);
    }
    if (callee->kind == N_NAME && f.kind == V_UNDEF)
        return tpl_error(r, WISP_ERR_UNSUPPORTED, n->line, "function '%.*s' is not defined", (int)callee->n, tpl_node_str(r->t, callee)), tpl_undef();
    return tpl_error(r, WISP_ERR_ARG, n->line, "'%s' object is not callable", tpl_type_name(&f)), tpl_undef();
}

static tpl_val global(tpl_render *r, const char *s, size_t n) {
    static const char *const names[] = {"raise_exception", "namespace", "strftime_now", "range", "dict"};
    for (int i = 0; i < 5; i++)
        if (name_is(s, n, names[i])) {
            tpl_val v = {V_FUNC, 0, {0}};
            v.u.i = i;
            return v;
        }
    static const char *const refused[] = {"lipsum", "cycler", "joiner"};
    for (int i = 0; i < 3; i++)
        if (name_is(s, n, refused[i])) {
            tpl_error(r, WISP_ERR_UNSUPPORTED, 0, "global '%.*s' is not supported", (int)n, s);
            return tpl_undef();
        }
    return tpl_undef();
}

tpl_val tpl_eval(tpl_render *r, uint32_t i) {
    if (r->failed || !i) return tpl_undef();
    const tpl_node *n = node_at(r, i);
    if (!tpl_step(r, n->line)) return tpl_undef();
    switch (n->kind) {
    case N_STR: return tpl_str(tpl_node_str(r->t, n), n->n);
    case N_INT: return tpl_int(n->i);
    case N_FLOAT: return tpl_float(n->f);
    case N_CONST: return n->i == 0 ? tpl_none() : tpl_bool(n->i == 1);
    case N_NAME: {
        const tpl_val *v = tpl_lookup(r, tpl_node_str(r->t, n), n->n);
        return v ? *v : global(r, tpl_node_str(r->t, n), n->n);
    }
    case N_LIST:
    case N_TUPLE: {
        uint32_t count = 0;
        for (uint32_t k = n->a; k; k = node_at(r, k)->next) count++;
        tpl_val tmp[64];
        if (count > 64) return tpl_error(r, WISP_ERR_UNSUPPORTED, n->line, "list literals of more than 64 items"), tpl_undef();
        count = 0;
        for (uint32_t k = n->a; k && !r->failed; k = node_at(r, k)->next) tmp[count++] = tpl_eval(r, k);
        tpl_list *l = tpl_list_new(r, count);
        if (l) memcpy(l->items, tmp, count * sizeof(tpl_val));
        return l ? tpl_list_val(l) : tpl_undef();
    }
    case N_DICT: {
        uint32_t count = 0;
        for (uint32_t k = n->a; k; k = node_at(r, k)->next) count++;
        tpl_dict *d = tpl_dict_new(r, count);
        for (uint32_t k = n->a; d && k && !r->failed; k = node_at(r, k)->next) {
            tpl_val key = tpl_eval(r, node_at(r, k)->a), val = tpl_eval(r, node_at(r, k)->b);
            tpl_dict_set(r, d, key, val);
        }
        tpl_val v = {V_DICT, 0, {0}};
        v.u.d = d;
        return d ? v : tpl_undef();
    }
    case N_GETATTR: {
        tpl_val obj = tpl_eval(r, n->a);
        if (r->failed) return tpl_undef();
        return get_attr(r, &obj, tpl_node_str(r->t, n), n->n, n->line);
    }
    case N_GETITEM: {
        tpl_val obj = tpl_eval(r, n->a), key = tpl_eval(r, n->b);
        if (r->failed) return tpl_undef();
        return get_item(r, &obj, &key, n->line);
    }
    case N_SLICE: {
        tpl_val obj = tpl_eval(r, n->a);
        return r->failed ? tpl_undef() : slice(r, &obj, n);
    }
    case N_CALL: return call(r, n);
    case N_FILTER: {
        tpl_val v = tpl_eval(r, n->a);
        args a;
        if (!eval_args(r, n->b, &a, n->line)) return tpl_undef();
        return apply_filter(r, (int)n->i, &v, &a, n->line);
    }
    case N_TEST: {
        tpl_val v = tpl_eval(r, n->a);
        args a;
        if (!eval_args(r, n->b, &a, n->line)) return tpl_undef();
        bool res = apply_test(r, (int)n->i, &v, &a, n->line);
        return tpl_bool(res != (n->op != 0));
    }
    case N_BINOP: {
        tpl_val a = tpl_eval(r, n->a), b = tpl_eval(r, n->b);
        return r->failed ? tpl_undef() : arith(r, n->op, &a, &b, n->line);
    }
    case N_COMPARE: {
        tpl_val a = tpl_eval(r, n->a), b = tpl_eval(r, n->b);
        return r->failed ? tpl_undef() : compare(r, n->op, &a, &b, n->line);
    }
    case N_UNARY: {
        tpl_val a = tpl_eval(r, n->a);
        if (r->failed) return tpl_undef();
        if (!is_num(&a)) return tpl_error(r, WISP_ERR_ARG, n->line, "bad operand type for unary %c: '%s'", n->op, tpl_type_name(&a)), tpl_undef();
        if (n->op == '+') return a.kind == V_FLOAT ? a : tpl_int(a.u.i);
        if (a.kind == V_FLOAT) return tpl_float(-a.u.f);
        if (a.u.i == INT64_MIN) return tpl_error(r, WISP_ERR_UNSUPPORTED, n->line, "integer beyond 64 bits"), tpl_undef();
        return tpl_int(-a.u.i);
    }
    case N_NOT: {
        tpl_val a = tpl_eval(r, n->a);
        return tpl_bool(!tpl_truthy(&a));
    }
    case N_AND:
    case N_OR: { /* Python returns the deciding operand, not a bool */
        tpl_val a = tpl_eval(r, n->a);
        if (r->failed) return tpl_undef();
        if (tpl_truthy(&a) == (n->kind == N_OR)) return a;
        return tpl_eval(r, n->b);
    }
    case N_COND: {
        tpl_val c = tpl_eval(r, n->b);
        if (r->failed) return tpl_undef();
        return tpl_truthy(&c) ? tpl_eval(r, n->a) : tpl_eval(r, n->c);
    }
    default: break;
    }
    return tpl_error(r, WISP_ERR_INTERNAL, n->line, "node kind %d is not an expression", n->kind), tpl_undef();
}
