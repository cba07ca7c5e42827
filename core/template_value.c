/* Template values: the work heap, Python's truth and equality, and the three
 * ways a value becomes text (str for printing, repr inside containers, and
 * json.dumps with ensure_ascii=False for `tojson`). */
#include <stdarg.h>
#include <string.h>

#include "template_value.h"

bool tpl_error(tpl_render *r, wisp_status s, uint32_t line, const char *fmt, ...) {
    if (r->failed) return false;
    r->failed = true;
    char msg[240];
    va_list ap;
    va_start(ap, fmt);
    wisp_vformat(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (s == WISP_ERR_ARG && strncmp(msg, WISP_TEMPLATE_RAISED, sizeof WISP_TEMPLATE_RAISED - 1) == 0)
        wisp_fail(r->err, s, "%s", msg); /* the template's own words, unprefixed by a line */
    else if (line)
        wisp_fail(r->err, s, "template line %u: %s", line, msg);
    else
        wisp_fail(r->err, s, "template: %s", msg);
    return false;
}

void *tpl_alloc(tpl_render *r, size_t bytes) {
    size_t need = (bytes + 7) & ~(size_t)7;
    if (r->failed) return NULL;
    if (need < bytes || need > r->t->heap_cap - r->heap_used) {
        tpl_error(r, WISP_ERR_CAPACITY, 0, "the template's work memory (%zu bytes) is exhausted; raise work_bytes",
                  r->t->heap_cap);
        return NULL;
    }
    void *p = r->t->heap + r->heap_used;
    r->heap_used += need;
    return p;
}

void tpl_release(tpl_render *r, size_t mark) {
    r->heap_used = mark;
    while (r->n_segs && r->t->segs[r->n_segs - 1].off >= mark) r->n_segs--;
}

static bool add_seg(tpl_render *r, size_t off, size_t len) {
    tpl_seg *last = r->n_segs ? &r->t->segs[r->n_segs - 1] : NULL;
    if (last && last->off + last->len == off) {
        last->len += (uint32_t)len;
        return true;
    }
    if (r->n_segs >= r->t->seg_cap)
        return tpl_error(r, WISP_ERR_CAPACITY, 0, "more than %u pieces of message text inside strings (max_segments)", r->t->seg_cap);
    r->t->segs[r->n_segs].off = (uint32_t)off;
    r->t->segs[r->n_segs++].len = (uint32_t)len;
    return true;
}

static bool add_span(tpl_render *r, size_t start, size_t len) {
    if (!r->spans || !len) return true;
    wisp_text_span *last = r->n_spans ? &r->spans[r->n_spans - 1] : NULL;
    if (last && last->start + last->len == start) {
        last->len += len;
        return true;
    }
    if (r->n_spans >= r->span_cap)
        return tpl_error(r, WISP_ERR_CAPACITY, 0, "the text has more than %zu pieces of message content", r->span_cap);
    r->spans[r->n_spans].start = start;
    r->spans[r->n_spans++].len = len;
    return true;
}

static bool mark_copy(tpl_render *r, size_t dst, size_t len, bool to_output) {
    return to_output ? add_span(r, dst, len) : add_seg(r, dst, len);
}

static bool within(const char *p, size_t n, const char *base, size_t size) {
    return base && p >= base && p + n <= base + size && (size_t)(p - base) <= size;
}

void tpl_note_copy(tpl_render *r, const char *src, size_t n, size_t dst, bool to_output) {
    if (!n || r->failed || !r->spans) return; /* only a caller asking for the spans pays for them */
    for (size_t i = 0; i < r->vars->n_messages; i++) { /* straight from a message */
        const wisp_chat_message *m = &r->vars->messages[i];
        if (within(src, n, m->content, m->content_len)) {
            mark_copy(r, dst, n, to_output);
            return;
        }
    }
    const char *heap = (const char *)r->t->heap;
    if (within(src, n, heap, r->t->heap_cap)) { /* from a string made earlier */
        size_t off = (size_t)(src - heap);
        for (uint32_t k = 0; k < r->n_segs; k++) {
            const tpl_seg *sg = &r->t->segs[k];
            size_t lo = sg->off > off ? sg->off : off, hi = sg->off + sg->len < off + n ? sg->off + sg->len : off + n;
            if (lo < hi) mark_copy(r, dst + (lo - off), hi - lo, to_output);
        }
        return;
    }
    if (within(src, n, r->out, r->len) && r->spans) { /* output captured by a macro or block set */
        size_t off = (size_t)(src - r->out);
        for (size_t k = 0; k < r->n_spans; k++) {
            const wisp_text_span *sp = &r->spans[k];
            size_t lo = sp->start > off ? sp->start : off, hi = sp->start + sp->len < off + n ? sp->start + sp->len : off + n;
            if (lo < hi) mark_copy(r, dst + (lo - off), hi - lo, to_output);
        }
    }
}

tpl_list *tpl_list_new(tpl_render *r, uint32_t n) {
    tpl_list *l = tpl_alloc(r, sizeof(tpl_list) + (size_t)n * sizeof(tpl_val));
    if (l) l->n = n;
    return l;
}

tpl_dict *tpl_dict_new(tpl_render *r, uint32_t cap) {
    tpl_dict *d = tpl_alloc(r, sizeof(tpl_dict));
    if (!d) return NULL;
    d->n = 0;
    d->cap = cap;
    d->keys = tpl_alloc(r, (size_t)cap * sizeof(tpl_val));
    d->vals = tpl_alloc(r, (size_t)cap * sizeof(tpl_val));
    return d->keys && d->vals ? d : NULL;
}

const tpl_val *tpl_dict_get(const tpl_dict *d, const char *key, size_t n) {
    for (uint32_t i = 0; i < d->n; i++)
        if (d->keys[i].kind == V_STR && d->keys[i].n == n && memcmp(d->keys[i].u.s, key, n) == 0) return &d->vals[i];
    return NULL;
}

bool tpl_dict_set(tpl_render *r, tpl_dict *d, tpl_val key, tpl_val val) {
    for (uint32_t i = 0; i < d->n; i++)
        if (tpl_equal(&d->keys[i], &key)) {
            d->vals[i] = val;
            return true;
        }
    if (d->n >= d->cap)
        return tpl_error(r, WISP_ERR_CAPACITY, 0, "a dict or namespace holds at most %u entries", d->cap);
    d->keys[d->n] = key;
    d->vals[d->n++] = val;
    return true;
}

bool tpl_truthy(const tpl_val *v) {
    switch (v->kind) {
    case V_UNDEF:
    case V_NONE: return false;
    case V_BOOL:
    case V_INT: return v->u.i != 0;
    case V_FLOAT: return v->u.f != 0;
    case V_STR: return v->n != 0;
    case V_LIST: return v->u.l->n != 0;
    case V_DICT: return v->u.d->n != 0;
    default: return true;
    }
}

static bool is_number(const tpl_val *v) { return v->kind == V_BOOL || v->kind == V_INT || v->kind == V_FLOAT; }

bool tpl_equal(const tpl_val *a, const tpl_val *b) {
    if (is_number(a) && is_number(b)) {
        if (a->kind != V_FLOAT && b->kind != V_FLOAT) return a->u.i == b->u.i;
        double x = a->kind == V_FLOAT ? a->u.f : (double)a->u.i, y = b->kind == V_FLOAT ? b->u.f : (double)b->u.i;
        return x == y;
    }
    if (a->kind != b->kind) return false;
    switch (a->kind) {
    case V_UNDEF:
    case V_NONE: return true;
    case V_STR: return a->n == b->n && memcmp(a->u.s, b->u.s, a->n) == 0;
    case V_LIST:
        if (a->u.l->n != b->u.l->n) return false;
        for (uint32_t i = 0; i < a->u.l->n; i++)
            if (!tpl_equal(&a->u.l->items[i], &b->u.l->items[i])) return false;
        return true;
    case V_DICT:
        if (a->u.d->n != b->u.d->n) return false;
        for (uint32_t i = 0; i < a->u.d->n; i++) {
            const tpl_val *k = &a->u.d->keys[i], *other = NULL;
            for (uint32_t j = 0; j < b->u.d->n && !other; j++)
                if (tpl_equal(k, &b->u.d->keys[j])) other = &b->u.d->vals[j];
            if (!other || !tpl_equal(&a->u.d->vals[i], other)) return false;
        }
        return true;
    case V_NAMESPACE: return a->u.d == b->u.d;
    case V_LOOP: return a->u.loop == b->u.loop;
    default: return a->u.i == b->u.i;
    }
}

const char *tpl_type_name(const tpl_val *v) {
    static const char *const names[] = {"undefined", "NoneType", "bool", "int", "float", "str", "list", "dict",
                                        "Namespace", "LoopContext", "Macro", "function"};
    return v->kind < sizeof names / sizeof names[0] ? names[v->kind] : "?";
}

/* ---- text building ---- */

void tpl_sb_begin(tpl_render *r, tpl_sb *b) {
    b->r = r;
    b->buf = (char *)r->t->heap + r->heap_used;
    b->len = 0;
}

void tpl_sb_put(tpl_sb *b, const char *s, size_t n) {
    tpl_render *r = b->r;
    if (r->failed) return;
    if (n > r->t->heap_cap - r->heap_used - b->len) {
        tpl_error(r, WISP_ERR_CAPACITY, 0, "the template's work memory (%zu bytes) is exhausted; raise work_bytes",
                  r->t->heap_cap);
        return;
    }
    tpl_note_copy(r, s, n, (size_t)((uint8_t *)b->buf - r->t->heap) + b->len, false);
    memcpy(b->buf + b->len, s, n);
    b->len += n;
}

tpl_val tpl_sb_end(tpl_sb *b) {
    if (b->r->failed) return tpl_undef();
    tpl_val v = tpl_str(b->buf, b->len);
    b->r->heap_used += (b->len + 7) & ~(size_t)7;
    if (b->r->heap_used > b->r->t->heap_cap) b->r->heap_used = b->r->t->heap_cap;
    return v;
}

static void put_cstr(tpl_sb *b, const char *s) { tpl_sb_put(b, s, strlen(s)); }

static void put_int(tpl_sb *b, int64_t v) {
    char tmp[24];
    size_t n = wisp_format(tmp, sizeof tmp, "%lld", (long long)v);
    tpl_sb_put(b, tmp, n);
}

/* Python prints floats by their shortest round-tripping repr; wisp prints
 * the ones whose value is an integer or whose repr is short and exact, and
 * refuses the rest rather than print different digits. */
static bool put_float(tpl_sb *b, double f) {
    if (f != f || f - f != 0) return tpl_error(b->r, WISP_ERR_UNSUPPORTED, 0, "printing inf or nan is not supported");
    /* range first: casting a double outside int64 is undefined behaviour */
    if (f > -1e15 && f < 1e15 && f == (double)(int64_t)f) {
        put_int(b, (int64_t)f);
        tpl_sb_put(b, ".0", 2);
        return true;
    }
    for (int digits = 1; digits <= 6; digits++) { /* up to 6 decimals, when exactly round-tripping */
        double scale = 1;
        for (int k = 0; k < digits; k++) scale *= 10;
        double m = f * scale;
        if (!(m > -1e15 && m < 1e15)) break;
        double r = m < 0 ? -(double)(int64_t)(-m + 0.5) : (double)(int64_t)(m + 0.5);
        if (r / scale == f) {
            int64_t iv = (int64_t)r;
            if (iv < 0) { tpl_sb_put(b, "-", 1); iv = -iv; }
            int64_t whole = iv / (int64_t)scale, frac = iv % (int64_t)scale;
            put_int(b, whole);
            char tmp[8];
            for (int k = digits - 1; k >= 0; k--) tmp[k] = (char)('0' + frac % 10), frac /= 10;
            tpl_sb_put(b, ".", 1);
            tpl_sb_put(b, tmp, (size_t)digits);
            return true;
        }
    }
    return tpl_error(b->r, WISP_ERR_UNSUPPORTED, 0, "printing the float %g is not supported (needs Python's repr)", f);
}

bool tpl_write_str(tpl_sb *b, const tpl_val *v) {
    switch (v->kind) {
    case V_UNDEF: return true;
    case V_NONE: put_cstr(b, "None"); return true;
    case V_BOOL: put_cstr(b, v->u.i ? "True" : "False"); return true;
    case V_INT: put_int(b, v->u.i); return true;
    case V_FLOAT: return put_float(b, v->u.f);
    case V_STR: tpl_sb_put(b, v->u.s, v->n); return true;
    case V_LIST:
    case V_DICT: return tpl_write_repr(b, v);
    default: return tpl_error(b->r, WISP_ERR_UNSUPPORTED, 0, "printing a %s is not supported", tpl_type_name(v));
    }
}

static void put_repr_string(tpl_sb *b, const char *s, size_t n) {
    bool has_single = memchr(s, '\'', n) != NULL, has_double = memchr(s, '"', n) != NULL;
    char q = has_single && !has_double ? '"' : '\'';
    tpl_sb_put(b, &q, 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\' || c == (unsigned char)q) {
            char e[2] = {'\\', (char)c};
            tpl_sb_put(b, e, 2);
        } else if (c == '\n') put_cstr(b, "\\n");
        else if (c == '\r') put_cstr(b, "\\r");
        else if (c == '\t') put_cstr(b, "\\t");
        else if (c < 0x20 || c == 0x7f) {
            char e[5] = {'\\', 'x', "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15], 0};
            tpl_sb_put(b, e, 4);
        } else tpl_sb_put(b, (const char *)&s[i], 1);
    }
    tpl_sb_put(b, &q, 1);
}

bool tpl_write_repr(tpl_sb *b, const tpl_val *v) {
    if (v->kind == V_STR) {
        put_repr_string(b, v->u.s, v->n);
        return true;
    }
    if (v->kind == V_LIST) {
        tpl_sb_put(b, "[", 1);
        for (uint32_t i = 0; i < v->u.l->n; i++) {
            if (i) tpl_sb_put(b, ", ", 2);
            if (!tpl_write_repr(b, &v->u.l->items[i])) return false;
        }
        tpl_sb_put(b, "]", 1);
        return true;
    }
    if (v->kind == V_DICT) {
        tpl_sb_put(b, "{", 1);
        for (uint32_t i = 0; i < v->u.d->n; i++) {
            if (i) tpl_sb_put(b, ", ", 2);
            if (!tpl_write_repr(b, &v->u.d->keys[i])) return false;
            tpl_sb_put(b, ": ", 2);
            if (!tpl_write_repr(b, &v->u.d->vals[i])) return false;
        }
        tpl_sb_put(b, "}", 1);
        return true;
    }
    if (v->kind == V_UNDEF) return tpl_error(b->r, WISP_ERR_UNSUPPORTED, 0, "an undefined value inside a container cannot be printed");
    return tpl_write_str(b, v);
}

static void put_json_string(tpl_sb *b, const char *s, size_t n) {
    tpl_sb_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                      : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (e) put_cstr(b, e);
        else if (c < 0x20) {
            char u[7] = {'\\', 'u', '0', '0', "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15], 0};
            tpl_sb_put(b, u, 6);
        } else tpl_sb_put(b, (const char *)&s[i], 1);
    }
    tpl_sb_put(b, "\"", 1);
}

static void newline_indent(tpl_sb *b, int indent, int level) {
    tpl_sb_put(b, "\n", 1);
    for (int i = 0; i < indent * level; i++) tpl_sb_put(b, " ", 1);
}

/* json.dumps(v, ensure_ascii=False[, indent=N]): ", " and ": " separators
 * without indent, "," and newlines with it. */
bool tpl_write_json(tpl_sb *b, const tpl_val *v, int indent, int level) {
    switch (v->kind) {
    case V_NONE: put_cstr(b, "null"); return true;
    case V_BOOL: put_cstr(b, v->u.i ? "true" : "false"); return true;
    case V_INT: put_int(b, v->u.i); return true;
    case V_FLOAT: return put_float(b, v->u.f);
    case V_STR: put_json_string(b, v->u.s, v->n); return true;
    case V_LIST:
    case V_DICT: {
        bool is_list = v->kind == V_LIST;
        uint32_t n = is_list ? v->u.l->n : v->u.d->n;
        tpl_sb_put(b, is_list ? "[" : "{", 1);
        for (uint32_t i = 0; i < n; i++) {
            if (i) tpl_sb_put(b, indent >= 0 ? "," : ", ", indent >= 0 ? 1 : 2);
            if (indent >= 0) newline_indent(b, indent, level + 1);
            if (!is_list) {
                const tpl_val *k = &v->u.d->keys[i];
                if (k->kind != V_STR) return tpl_error(b->r, WISP_ERR_UNSUPPORTED, 0, "tojson of a dict with %s keys", tpl_type_name(k));
                put_json_string(b, k->u.s, k->n);
                tpl_sb_put(b, ": ", 2);
            }
            if (!tpl_write_json(b, is_list ? &v->u.l->items[i] : &v->u.d->vals[i], indent, level + 1)) return false;
        }
        if (indent >= 0 && n) newline_indent(b, indent, level);
        tpl_sb_put(b, is_list ? "]" : "}", 1);
        return true;
    }
    default:
        return tpl_error(b->r, WISP_ERR_ARG, 0, "Object of type %s is not JSON serializable", tpl_type_name(v));
    }
}

size_t tpl_utf8_len(const char *s, size_t n) {
    size_t cps = 0;
    for (size_t i = 0; i < n; i++) cps += ((unsigned char)s[i] & 0xC0) != 0x80;
    return cps;
}

size_t tpl_utf8_offset(const char *s, size_t n, size_t cp_index) {
    size_t i = 0;
    for (size_t k = 0; k < cp_index && i < n; k++) {
        i++;
        while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
    }
    return i;
}
