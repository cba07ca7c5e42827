/* Evaluating template expressions with Python's and Jinja2's semantics:
 * operators, attribute and item lookup, slices, calls of globals, macros and
 * string/dict methods (the strings themselves are template_strings.c, filters
 * and tests template_filters.c). Whatever is outside the subset is an error
 * naming it. */
#include <math.h>
#include <string.h>

#include "template_value.h"
#include "unicode.h"

static const tpl_node *node_at(tpl_render *r, uint32_t i) { return &r->t->nodes[i]; }

static bool eval_args(tpl_render *r, uint32_t first, tpl_args *a, uint32_t line) {
    memset(a, 0, sizeof *a);
    for (uint32_t i = first; i && !r->failed; i = node_at(r, i)->next) {
        const tpl_node *n = node_at(r, i);
        if (n->kind == N_KWARG) {
            if (a->n_kw >= TPL_MAX_ARGS) return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "more than %d keyword arguments", TPL_MAX_ARGS);
            a->kw_name[a->n_kw] = tpl_node_str(r->t, n);
            a->kw_len[a->n_kw] = n->n;
            a->kw[a->n_kw++] = tpl_eval(r, n->a);
        } else {
            if (a->n_pos >= TPL_MAX_ARGS) return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "more than %d arguments", TPL_MAX_ARGS);
            a->pos[a->n_pos++] = tpl_eval(r, i);
        }
    }
    return !r->failed;
}

/* Argument `index` by position, or by name; NULL when not given. */
const tpl_val *tpl_arg(const tpl_args *a, uint32_t index, const char *name) {
    if (index < a->n_pos) return &a->pos[index];
    for (uint32_t i = 0; i < a->n_kw; i++)
        if (strlen(name) == a->kw_len[i] && memcmp(name, a->kw_name[i], a->kw_len[i]) == 0) return &a->kw[i];
    return NULL;
}

/* Every keyword must be one the callee knows, and no more positionals than it takes. */
bool tpl_check_args(tpl_render *r, const tpl_args *a, uint32_t max_pos, const char *const *names, const char *callee,
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

tpl_val tpl_to_str(tpl_render *r, const tpl_val *v) {
    if (v->kind == V_STR) return *v;
    tpl_sb b;
    tpl_sb_begin(r, &b);
    tpl_write_str(&b, v);
    return tpl_sb_end(&b);
}

bool tpl_need_str(tpl_render *r, const tpl_val *v, const char *what, uint32_t line) {
    if (v && v->kind == V_STR) return true;
    return tpl_error(r, WISP_ERR_ARG, line, "%s needs a string, not %s", what, v ? tpl_type_name(v) : "nothing");
}

bool tpl_need_int(tpl_render *r, const tpl_val *v, const char *what, uint32_t line) {
    if (v && (v->kind == V_INT || v->kind == V_BOOL)) return true;
    return tpl_error(r, WISP_ERR_ARG, line, "%s needs an integer, not %s", what, v ? tpl_type_name(v) : "nothing");
}

static bool undefined_error(tpl_render *r, uint32_t line, const char *what) {
    return tpl_error(r, WISP_ERR_ARG, line, "%s of an undefined value", what);
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
            tpl_decode(v->u.s + i, v->n - i, &len);
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

tpl_val tpl_get_item(tpl_render *r, const tpl_val *obj, const tpl_val *key, uint32_t line) {
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
        if (!tpl_need_int(r, &sv[k], "a slice", n->line)) return tpl_undef();
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
        tpl_decode(obj->u.s + at, obj->n - at, &len_cp);
        tpl_sb_put(&b, obj->u.s + at, len_cp);
    }
    return tpl_sb_end(&b);
}

/* ---- operators ---- */

bool tpl_is_num(const tpl_val *v) { return v->kind == V_INT || v->kind == V_BOOL || v->kind == V_FLOAT; }
double tpl_num(const tpl_val *v) { return v->kind == V_FLOAT ? v->u.f : (double)v->u.i; }

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
        tpl_val x = tpl_to_str(r, a), y = tpl_to_str(r, b);
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
    if (!tpl_is_num(a) || !tpl_is_num(b)) return type_error(r, op, a, b, line);
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
    double x = tpl_num(a), y = tpl_num(b);
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

bool tpl_contains(tpl_render *r, const tpl_val *item, const tpl_val *box, uint32_t line) {
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

tpl_val tpl_compare(tpl_render *r, int op, const tpl_val *a, const tpl_val *b, uint32_t line) {
    if (op == OP_EQ || op == OP_NE) return tpl_bool(tpl_equal(a, b) == (op == OP_EQ));
    if (op == OP_IN || op == OP_NOT_IN) {
        bool in = tpl_contains(r, a, b, line);
        return tpl_bool(in == (op == OP_IN));
    }
    int c;
    if (tpl_is_num(a) && tpl_is_num(b)) {
        if (a->kind != V_FLOAT && b->kind != V_FLOAT) c = a->u.i < b->u.i ? -1 : a->u.i > b->u.i;
        else c = tpl_num(a) < tpl_num(b) ? -1 : tpl_num(a) > tpl_num(b);
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

/* ---- calls ---- */

static tpl_val call_global(tpl_render *r, int fn, const tpl_args *a, uint32_t line) {
    static const char *const none[] = {NULL};
    switch (fn) {
    case FN_RAISE: {
        const tpl_val *msg = tpl_arg(a, 0, "");
        tpl_val s = msg ? tpl_to_str(r, msg) : tpl_str("", 0);
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
        if (!tpl_check_args(r, a, 1, none, "strftime_now", line)) return tpl_undef();
        return tpl_format_date(r, tpl_arg(a, 0, ""), line);
    case FN_RANGE: {
        if (!tpl_check_args(r, a, 3, none, "range", line)) return tpl_undef();
        int64_t v[3] = {0, 0, 1};
        for (uint32_t i = 0; i < a->n_pos; i++)
            if (!tpl_need_int(r, &a->pos[i], "range", line)) return tpl_undef();
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

static tpl_val call_method(tpl_render *r, const tpl_val *obj, const char *name, size_t n, const tpl_args *a, uint32_t line) {
    static const char *const none[] = {NULL};
    if (obj->kind == V_STR) {
        const tpl_val *x = tpl_arg(a, 0, ""), *y = tpl_arg(a, 1, "");
        if (name_is(name, n, "strip") || name_is(name, n, "lstrip") || name_is(name, n, "rstrip")) {
            if (!tpl_check_args(r, a, 1, none, "strip", line)) return tpl_undef();
            if (x && x->kind == V_NONE) x = NULL;
            if (x && !tpl_need_str(r, x, "strip", line)) return tpl_undef();
            return tpl_strip(obj, x, name[0] != 'r', name[0] != 'l');
        }
        if (name_is(name, n, "startswith") || name_is(name, n, "endswith")) {
            if (!tpl_check_args(r, a, 1, none, "startswith", line)) return tpl_undef();
            return tpl_bool(tpl_starts_or_ends(r, obj, x, name[0] == 'e', line));
        }
        if (name_is(name, n, "split")) {
            static const char *const kw[] = {"sep", "maxsplit", NULL};
            if (!tpl_check_args(r, a, 2, kw, "split", line)) return tpl_undef();
            const tpl_val *sep = tpl_arg(a, 0, "sep"), *maxsplit = tpl_arg(a, 1, "maxsplit");
            if (maxsplit && !tpl_need_int(r, maxsplit, "split maxsplit", line)) return tpl_undef();
            return tpl_split(r, obj, sep, maxsplit ? maxsplit->u.i : -1, line);
        }
        if (name_is(name, n, "replace")) {
            if (!tpl_check_args(r, a, 3, none, "replace", line)) return tpl_undef();
            const tpl_val *count = tpl_arg(a, 2, "");
            if (count && !tpl_need_int(r, count, "replace count", line)) return tpl_undef();
            return tpl_replace(r, obj, x, y, count ? count->u.i : -1, line);
        }
        static const char *const cases[] = {"upper", "lower", "capitalize", "title"};
        for (int m = 0; m < 4; m++)
            if (name_is(name, n, cases[m])) {
                if (!tpl_check_args(r, a, 0, none, cases[m], line)) return tpl_undef();
                return tpl_change_case(r, obj, m, line);
            }
        if (name_is(name, n, "join")) {
            if (!tpl_check_args(r, a, 1, none, "join", line)) return tpl_undef();
            tpl_args j;
            memset(&j, 0, sizeof j);
            j.n_pos = 1;
            j.pos[0] = *obj;
            return x ? tpl_apply_filter(r, F_JOIN, x, &j, line) : tpl_undef();
        }
        if (name_is(name, n, "find") || name_is(name, n, "count")) {
            if (!tpl_check_args(r, a, 1, none, "find", line) || !tpl_need_str(r, x, "find", line)) return tpl_undef();
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
            if (!tpl_check_args(r, a, 0, none, "items", line)) return tpl_undef();
            tpl_args empty;
            memset(&empty, 0, sizeof empty);
            return tpl_apply_filter(r, F_ITEMS, obj, &empty, line);
        }
        if (name_is(name, n, "keys") || name_is(name, n, "values")) {
            if (!tpl_check_args(r, a, 0, none, "keys", line)) return tpl_undef();
            tpl_list *l = tpl_list_new(r, obj->u.d->n);
            if (l) memcpy(l->items, name[0] == 'k' ? obj->u.d->keys : obj->u.d->vals, (size_t)obj->u.d->n * sizeof(tpl_val));
            return l ? tpl_list_val(l) : tpl_undef();
        }
        if (name_is(name, n, "get")) {
            if (!tpl_check_args(r, a, 2, none, "get", line)) return tpl_undef();
            const tpl_val *key = tpl_arg(a, 0, ""), *dflt = tpl_arg(a, 1, "");
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
    tpl_args a;
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
        return tpl_get_item(r, &obj, &key, n->line);
    }
    case N_SLICE: {
        tpl_val obj = tpl_eval(r, n->a);
        return r->failed ? tpl_undef() : slice(r, &obj, n);
    }
    case N_CALL: return call(r, n);
    case N_FILTER: {
        tpl_val v = tpl_eval(r, n->a);
        tpl_args a;
        if (!eval_args(r, n->b, &a, n->line)) return tpl_undef();
        return tpl_apply_filter(r, (int)n->i, &v, &a, n->line);
    }
    case N_TEST: {
        tpl_val v = tpl_eval(r, n->a);
        tpl_args a;
        if (!eval_args(r, n->b, &a, n->line)) return tpl_undef();
        bool res = tpl_apply_test(r, (int)n->i, &v, &a, n->line);
        return tpl_bool(res != (n->op != 0));
    }
    case N_BINOP: {
        tpl_val a = tpl_eval(r, n->a), b = tpl_eval(r, n->b);
        return r->failed ? tpl_undef() : arith(r, n->op, &a, &b, n->line);
    }
    case N_COMPARE: {
        tpl_val a = tpl_eval(r, n->a), b = tpl_eval(r, n->b);
        return r->failed ? tpl_undef() : tpl_compare(r, n->op, &a, &b, n->line);
    }
    case N_UNARY: {
        tpl_val a = tpl_eval(r, n->a);
        if (r->failed) return tpl_undef();
        if (!tpl_is_num(&a)) return tpl_error(r, WISP_ERR_ARG, n->line, "bad operand type for unary %c: '%s'", n->op, tpl_type_name(&a)), tpl_undef();
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
