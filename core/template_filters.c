/* Jinja's tests (`is defined`, `is string`, ...) and filters (`trim`,
 * `tojson`, `selectattr`, ...): the ones chat templates use; the parser
 * refuses any other by name. */
#include <math.h>
#include <string.h>

#include "template_value.h"

/* ---- tests ---- */

bool tpl_apply_test(tpl_render *r, int id, const tpl_val *v, const tpl_args *a, uint32_t line) {
    const tpl_val *x = tpl_arg(a, 0, "");
    switch (id) {
    case T_DEFINED: return v->kind != V_UNDEF;
    case T_UNDEFINED: return v->kind == V_UNDEF;
    case T_NONE: return v->kind == V_NONE;
    case T_STRING: return v->kind == V_STR;
    case T_NUMBER: return tpl_is_num(v);
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
        if (!tpl_need_int(r, v, id == T_ODD ? "odd" : "even", line)) return false;
        return (v->u.i % 2 != 0) == (id == T_ODD);
    case T_DIVISIBLEBY:
        if (!tpl_need_int(r, v, "divisibleby", line) || !tpl_need_int(r, x, "divisibleby", line)) return false;
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
    case T_IN: return tpl_contains(r, v, x, line);
    default: {
        static const int ops[] = {OP_LT, OP_LE, OP_GT, OP_GE};
        tpl_val c = tpl_compare(r, ops[id - T_LT], v, x, line);
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
        cur = tpl_get_item(r, &cur, &key, line);
        start = i + 1;
    }
    return cur;
}

static tpl_val select_attr(tpl_render *r, const tpl_val *v, const tpl_args *a, bool reject, uint32_t line) {
    const tpl_val *attr = tpl_arg(a, 0, "");
    if (!tpl_need_str(r, attr, reject ? "rejectattr" : "selectattr", line)) return tpl_undef();
    const tpl_list *items = tpl_iterable(r, v, line);
    if (!items) return tpl_undef();
    int test = -1;
    tpl_args rest;
    memset(&rest, 0, sizeof rest);
    if (a->n_pos >= 2) {
        if (!tpl_need_str(r, &a->pos[1], "the test name", line)) return tpl_undef();
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
        bool keep = test < 0 ? tpl_truthy(&x) : tpl_apply_test(r, test, &x, &rest, line);
        if (keep != reject) out->items[out->n++] = items->items[i];
    }
    return tpl_list_val(out);
}

tpl_val tpl_apply_filter(tpl_render *r, int id, const tpl_val *v, const tpl_args *a, uint32_t line) {
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
        if (!tpl_check_args(r, a, 1, trim_kw, "trim", line)) return tpl_undef();
        tpl_val s = tpl_to_str(r, v);
        const tpl_val *chars = tpl_arg(a, 0, "chars");
        if (chars && chars->kind == V_NONE) chars = NULL;
        if (chars && !tpl_need_str(r, chars, "trim", line)) return tpl_undef();
        return tpl_strip(&s, chars, true, true);
    }
    case F_TOJSON: {
        if (!tpl_check_args(r, a, 1, json_kw, "tojson", line)) return tpl_undef();
        const tpl_val *ind = tpl_arg(a, 0, "indent");
        int indent = -1;
        if (ind && ind->kind != V_NONE) {
            if (!tpl_need_int(r, ind, "tojson indent", line) || ind->u.i < 0 || ind->u.i > 64)
                return tpl_error(r, WISP_ERR_ARG, line, "tojson indent must be 0..64"), tpl_undef();
            indent = (int)ind->u.i;
        }
        tpl_sb b;
        tpl_sb_begin(r, &b);
        if (!tpl_write_json(&b, v, indent, 0)) return tpl_undef();
        return tpl_sb_end(&b);
    }
    case F_LENGTH:
        if (!tpl_check_args(r, a, 0, none, "length", line)) return tpl_undef();
        switch (v->kind) {
        case V_STR: return tpl_int((int64_t)tpl_utf8_len(v->u.s, v->n));
        case V_LIST: return tpl_int(v->u.l->n);
        case V_DICT:
        case V_NAMESPACE: return tpl_int(v->u.d->n);
        case V_UNDEF: return tpl_int(0);
        default: return tpl_error(r, WISP_ERR_ARG, line, "object of type '%s' has no len()", tpl_type_name(v)), tpl_undef();
        }
    case F_LIST: {
        if (!tpl_check_args(r, a, 0, none, "list", line)) return tpl_undef();
        const tpl_list *l = tpl_iterable(r, v, line);
        return l ? tpl_list_val((tpl_list *)l) : tpl_undef();
    }
    case F_SELECTATTR:
    case F_REJECTATTR:
        if (!tpl_check_args(r, a, TPL_MAX_ARGS, none, id == F_SELECTATTR ? "selectattr" : "rejectattr", line)) return tpl_undef();
        return select_attr(r, v, a, id == F_REJECTATTR, line);
    case F_FIRST:
    case F_LAST: {
        if (!tpl_check_args(r, a, 0, none, id == F_FIRST ? "first" : "last", line)) return tpl_undef();
        const tpl_list *l = tpl_iterable(r, v, line);
        if (!l || l->n == 0) return tpl_undef();
        return l->items[id == F_FIRST ? 0 : l->n - 1];
    }
    case F_JOIN: {
        if (!tpl_check_args(r, a, 2, join_kw, "join", line)) return tpl_undef();
        const tpl_val *sep = tpl_arg(a, 0, "d"), *attr = tpl_arg(a, 1, "attribute");
        if (sep && !tpl_need_str(r, sep, "join", line)) return tpl_undef();
        const tpl_list *l = tpl_iterable(r, v, line);
        if (!l) return tpl_undef();
        /* the parts first (they may allocate), then one string */
        tpl_list *parts = tpl_list_new(r, l->n);
        for (uint32_t i = 0; parts && i < l->n && !r->failed; i++) {
            tpl_val x = attr ? attr_path(r, &l->items[i], attr, line) : l->items[i];
            parts->items[i] = tpl_to_str(r, &x);
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
        if (!tpl_check_args(r, a, 0, none, "a case filter", line)) return tpl_undef();
        tpl_val s = tpl_to_str(r, v);
        int mode = id == F_UPPER ? 0 : id == F_LOWER ? 1 : id == F_CAPITALIZE ? 2 : 3;
        return tpl_change_case(r, &s, mode, line);
    }
    case F_DEFAULT: {
        if (!tpl_check_args(r, a, 2, default_kw, "default", line)) return tpl_undef();
        const tpl_val *d = tpl_arg(a, 0, "default_value"), *boolean = tpl_arg(a, 1, "boolean");
        bool use = v->kind == V_UNDEF || (boolean && tpl_truthy(boolean) && !tpl_truthy(v));
        return use ? (d ? *d : tpl_str("", 0)) : *v;
    }
    case F_STRING:
    case F_SAFE:
        if (!tpl_check_args(r, a, 0, none, "string", line)) return tpl_undef();
        return tpl_to_str(r, v);
    case F_INT: {
        if (!tpl_check_args(r, a, 1, int_kw, "int", line)) return tpl_undef();
        const tpl_val *d = tpl_arg(a, 0, "default");
        tpl_val dflt = d ? *d : tpl_int(0);
        if (v->kind == V_INT || v->kind == V_BOOL) return tpl_int(v->u.i);
        if (v->kind == V_FLOAT) return v->u.f > -9e18 && v->u.f < 9e18 ? tpl_int((int64_t)v->u.f) : dflt;
        if (v->kind != V_STR) return dflt;
        tpl_val s = tpl_strip(v, NULL, true, true);
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
        if (!tpl_check_args(r, a, 0, none, "float", line)) return tpl_undef();
        if (tpl_is_num(v)) return tpl_float(tpl_num(v));
        return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "float of a %s is not supported", tpl_type_name(v)), tpl_undef();
    case F_ABS:
        if (!tpl_check_args(r, a, 0, none, "abs", line)) return tpl_undef();
        if (v->kind == V_INT || v->kind == V_BOOL) return tpl_int(v->u.i < 0 ? -v->u.i : v->u.i);
        if (v->kind == V_FLOAT) return tpl_float(fabs(v->u.f));
        return tpl_error(r, WISP_ERR_ARG, line, "bad operand type for abs(): '%s'", tpl_type_name(v)), tpl_undef();
    case F_REVERSE: {
        if (!tpl_check_args(r, a, 0, none, "reverse", line)) return tpl_undef();
        if (v->kind == V_STR)
            return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "reverse of a string is not supported"), tpl_undef();
        const tpl_list *l = tpl_iterable(r, v, line);
        tpl_list *out = l ? tpl_list_new(r, l->n) : NULL;
        for (uint32_t i = 0; out && i < l->n; i++) out->items[i] = l->items[l->n - 1 - i];
        return out ? tpl_list_val(out) : tpl_undef();
    }
    case F_REPLACE: {
        if (!tpl_check_args(r, a, 3, replace_kw, "replace", line)) return tpl_undef();
        tpl_val s = tpl_to_str(r, v);
        const tpl_val *count = tpl_arg(a, 2, "count");
        if (count && !tpl_need_int(r, count, "replace count", line)) return tpl_undef();
        return tpl_replace(r, &s, tpl_arg(a, 0, "old"), tpl_arg(a, 1, "new"), count ? count->u.i : -1, line);
    }
    case F_ESCAPE: {
        if (!tpl_check_args(r, a, 0, none, "escape", line)) return tpl_undef();
        tpl_val s = tpl_to_str(r, v);
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
        if (!tpl_check_args(r, a, 0, none, "items", line)) return tpl_undef();
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
        if (!tpl_check_args(r, a, 1, map_kw, "map", line)) return tpl_undef();
        const tpl_val *attr = tpl_arg(a, TPL_MAX_ARGS, "attribute"), *dflt = tpl_arg(a, TPL_MAX_ARGS, "default");
        int fid = -1;
        if (!attr) {
            const tpl_val *name = tpl_arg(a, 0, "");
            if (!tpl_need_str(r, name, "map", line)) return tpl_undef();
            fid = tpl_filter_id(name->u.s, name->n);
            if (fid < 0 || fid == F_MAP)
                return tpl_error(r, WISP_ERR_UNSUPPORTED, line, "filter '%.*s' is not supported", (int)name->n, name->u.s), tpl_undef();
        } else if (!tpl_need_str(r, attr, "map attribute", line)) {
            return tpl_undef();
        }
        const tpl_list *l = tpl_iterable(r, v, line);
        tpl_list *out = l ? tpl_list_new(r, l->n) : NULL;
        tpl_args empty;
        memset(&empty, 0, sizeof empty);
        for (uint32_t i = 0; out && i < l->n && !r->failed; i++) {
            tpl_val x = attr ? attr_path(r, &l->items[i], attr, line) : tpl_apply_filter(r, fid, &l->items[i], &empty, line);
            if (x.kind == V_UNDEF && dflt) x = *dflt;
            out->items[i] = x;
        }
        return out ? tpl_list_val(out) : tpl_undef();
    }
    default: break;
    }
    return tpl_error(r, WISP_ERR_INTERNAL, line, "filter %d has no implementation", id), tpl_undef();
}
