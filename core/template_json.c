/* JSON text -> template values, for the parts of a chat that arrive as JSON
 * (the `tools` list, an assistant message's `tool_calls`), so a template sees
 * them as Hugging Face's does: dicts, lists, strings, numbers, booleans, None.
 *
 * Core cannot use adapters/json.c, so this is a small strict reader of its own
 * that builds straight into the render's work heap. It reads each container
 * twice: once without building, to count its members (a dict's capacity is
 * fixed when it is made), then for real. Nesting is capped so hostile input
 * cannot exhaust the C stack. */
#include <math.h>
#include <string.h>

#include "template_value.h"

#define JSON_MAX_DEPTH 32

typedef struct json_in {
    tpl_render *r;
    const char *s;
    size_t n, pos;
    uint32_t line; /* the template line that asked, for errors */
} json_in;

static bool fail(json_in *in, const char *what) {
    return tpl_error(in->r, WISP_ERR_FORMAT, in->line, "JSON value: %s at byte %zu", what, in->pos);
}

static void skip_space(json_in *in) {
    while (in->pos < in->n && (in->s[in->pos] == ' ' || in->s[in->pos] == '\t' || in->s[in->pos] == '\n' ||
                               in->s[in->pos] == '\r'))
        in->pos++;
}

static bool literal(json_in *in, const char *word) {
    size_t k = strlen(word);
    if (in->n - in->pos < k || memcmp(in->s + in->pos, word, k) != 0) return fail(in, "unknown literal");
    in->pos += k;
    return true;
}

static int hex4(const char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A string: decoded into the heap when `out` is given (decoding never grows
 * the text, so the raw length bounds the allocation). */
static bool read_string(json_in *in, tpl_val *out) {
    size_t start = ++in->pos, end = start;
    while (end < in->n && in->s[end] != '"') {
        if ((unsigned char)in->s[end] < 0x20) { in->pos = end; return fail(in, "control character in a string"); }
        end += in->s[end] == '\\' ? 2 : 1;
    }
    if (end >= in->n) return fail(in, "unterminated string");
    in->pos = end + 1;
    if (!out) return true;
    char *o = tpl_alloc(in->r, end - start + 1);
    if (!o) return false;
    size_t k = 0;
    for (size_t i = start; i < end;) {
        char c = in->s[i++];
        if (c != '\\') { o[k++] = c; continue; }
        char e = in->s[i++];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) { o[k++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"]; continue; }
        if (e != 'u' || end - i < 4 || hex4(in->s + i) < 0) { in->pos = i; return fail(in, "bad escape in a string"); }
        uint32_t cp = (uint32_t)hex4(in->s + i);
        i += 4;
        if (cp >= 0xD800 && cp < 0xDC00) { /* a surrogate pair makes one code point */
            int lo = end - i >= 6 && in->s[i] == '\\' && in->s[i + 1] == 'u' ? hex4(in->s + i + 2) : -1;
            if (lo < 0xDC00 || lo > 0xDFFF) { in->pos = i; return fail(in, "unpaired surrogate in a string"); }
            cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
            i += 6;
        } else if (cp >= 0xDC00 && cp < 0xE000) {
            in->pos = i;
            return fail(in, "unpaired surrogate in a string");
        }
        k += put_utf8(o + k, cp); /* \uXXXX is 6 bytes, its UTF-8 at most 4 (a pair: 12 -> 4) */
    }
    *out = tpl_str(o, k);
    return true;
}

static bool read_number(json_in *in, tpl_val *out) {
    size_t p = in->pos;
    bool neg = p < in->n && in->s[p] == '-', is_float = false, big = false;
    if (neg) p++;
    if (p >= in->n || in->s[p] < '0' || in->s[p] > '9') return fail(in, "bad number");
    double mant = 0;
    int64_t whole = 0;
    int exp10 = 0;
    if (in->s[p] == '0') p++;
    else
        for (; p < in->n && in->s[p] >= '0' && in->s[p] <= '9'; p++) {
            big |= whole > (INT64_MAX - 9) / 10;
            if (!big) whole = whole * 10 + (in->s[p] - '0');
            mant = mant * 10 + (in->s[p] - '0');
        }
    if (p < in->n && in->s[p] == '.') {
        is_float = true;
        if (++p >= in->n || in->s[p] < '0' || in->s[p] > '9') { in->pos = p; return fail(in, "bad number"); }
        for (; p < in->n && in->s[p] >= '0' && in->s[p] <= '9'; p++, exp10--) mant = mant * 10 + (in->s[p] - '0');
    }
    if (p < in->n && (in->s[p] == 'e' || in->s[p] == 'E')) {
        is_float = true;
        p++;
        bool eneg = p < in->n && in->s[p] == '-';
        if (p < in->n && (in->s[p] == '-' || in->s[p] == '+')) p++;
        if (p >= in->n || in->s[p] < '0' || in->s[p] > '9') { in->pos = p; return fail(in, "bad number"); }
        int e = 0;
        for (; p < in->n && in->s[p] >= '0' && in->s[p] <= '9'; p++) e = e < 10000 ? e * 10 + (in->s[p] - '0') : e;
        exp10 += eneg ? -e : e;
    }
    in->pos = p;
    if (big && !is_float) return fail(in, "integer too large");
    if (out) *out = is_float ? tpl_float((neg ? -mant : mant) * pow(10.0, exp10)) : tpl_int(neg ? -whole : whole);
    return true;
}

static bool read_value(json_in *in, tpl_val *out, int depth);

/* An array or object: count on a first pass, build on the second. */
static bool read_container(json_in *in, tpl_val *out, int depth) {
    bool is_obj = in->s[in->pos] == '{';
    char close = is_obj ? '}' : ']';
    if (depth >= JSON_MAX_DEPTH) return fail(in, "nested too deeply");
    size_t open = in->pos;
    uint32_t count = 0;
    tpl_list *l = NULL;
    tpl_dict *d = NULL;
    for (int pass = out ? 0 : 1; pass < 2; pass++) {
        bool build = out && pass == 1;
        if (build) {
            if (is_obj) d = tpl_dict_new(in->r, count ? count : 1);
            else l = tpl_list_new(in->r, count);
            if (!d && !l) return false;
        }
        in->pos = open + 1;
        uint32_t i = 0;
        skip_space(in);
        if (in->pos < in->n && in->s[in->pos] == close) in->pos++;
        else
            for (;; i++) {
                tpl_val key = tpl_undef(), val = tpl_undef();
                if (is_obj) {
                    skip_space(in);
                    if (in->pos >= in->n || in->s[in->pos] != '"') return fail(in, "expected a key");
                    if (!read_string(in, build ? &key : NULL)) return false;
                    skip_space(in);
                    if (in->pos >= in->n || in->s[in->pos] != ':') return fail(in, "expected ':'");
                    in->pos++;
                }
                if (!read_value(in, build ? &val : NULL, depth + 1)) return false;
                if (build && is_obj && !tpl_dict_set(in->r, d, key, val)) return false;
                if (build && !is_obj) l->items[i] = val;
                skip_space(in);
                if (in->pos < in->n && in->s[in->pos] == ',') { in->pos++; continue; }
                if (in->pos < in->n && in->s[in->pos] == close) { in->pos++; i++; break; }
                return fail(in, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
            }
        if (i > 1000000) return fail(in, "too many members");
        count = i;
    }
    if (out) {
        if (is_obj) { out->kind = V_DICT; out->n = 0; out->u.d = d; }
        else *out = tpl_list_val(l);
    }
    return true;
}

static bool read_value(json_in *in, tpl_val *out, int depth) {
    skip_space(in);
    if (in->pos >= in->n) return fail(in, "unexpected end");
    switch (in->s[in->pos]) {
    case '{': case '[': return read_container(in, out, depth);
    case '"': return read_string(in, out);
    case 't': if (out) *out = tpl_bool(true); return literal(in, "true");
    case 'f': if (out) *out = tpl_bool(false); return literal(in, "false");
    case 'n': if (out) *out = tpl_none(); return literal(in, "null");
    default: return read_number(in, out);
    }
}

bool tpl_from_json(tpl_render *r, const char *text, size_t len, tpl_val *out) {
    json_in in = {r, text, len, 0, 0};
    if (!read_value(&in, out, 0)) return false;
    skip_space(&in);
    if (in.pos != in.n) return fail(&in, "trailing text");
    return !r->failed;
}
