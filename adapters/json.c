/* Strict JSON: reader (nodes in caller memory) and writer (caller buffer). */
#include "json.h"

#include <math.h>
#include <string.h>

/* Objects up to this many members are checked for duplicate keys exactly
 * (quadratic, bounded); larger ones (a tokenizer vocabulary) are left to the
 * consumer, which has to index the keys anyway. */
#define DUPLICATE_CHECK_MAX_MEMBERS 4096

typedef struct parser {
    const char *s;
    size_t len, pos;
    wisp_json_node *nodes;
    size_t cap, count;
    size_t parent; /* container being filled */
    wisp_error *err;
} parser;

static wisp_status perr(parser *p, const char *what) {
    /* report a line/column: people edit configs by hand */
    size_t line = 1, col = 1;
    for (size_t i = 0; i < p->pos && i < p->len; i++) {
        if (p->s[i] == '\n') { line++; col = 1; } else col++;
    }
    return wisp_fail(p->err, WISP_ERR_FORMAT, "JSON: %s at line %zu, column %zu", what, line, col);
}

static void skip_ws(parser *p) {
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static size_t new_node(parser *p, uint32_t type) {
    size_t i = p->count++;
    if (i < p->cap) {
        p->nodes[i].type = type;
        p->nodes[i].start = (uint32_t)p->pos;
        p->nodes[i].end = (uint32_t)p->pos;
        p->nodes[i].count = 0;
        p->nodes[i].after = 0;
        p->nodes[i].parent = (uint32_t)(i == 0 ? 0 : p->parent);
    }
    return i;
}

static void close_node(parser *p, size_t i) {
    if (i < p->cap) {
        if (p->nodes[i].type != WISP_JSON_STRING) p->nodes[i].end = (uint32_t)p->pos;
        p->nodes[i].after = (uint32_t)p->count;
    }
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Length of a valid UTF-8 sequence at s (0 if invalid). */
static size_t utf8_valid_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned min;
    if ((c & 0xe0) == 0xc0) { len = 2; min = 0x80; c &= 0x1f; }
    else if ((c & 0xf0) == 0xe0) { len = 3; min = 0x800; c &= 0x0f; }
    else if ((c & 0xf8) == 0xf0) { len = 4; min = 0x10000; c &= 0x07; }
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
    return len;
}

static wisp_status parse_string(parser *p) {
    size_t node = new_node(p, WISP_JSON_STRING);
    p->pos++; /* opening quote */
    if (node < p->cap) p->nodes[node].start = (uint32_t)p->pos;
    while (p->pos < p->len) {
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '"') {
            if (node < p->cap) p->nodes[node].end = (uint32_t)p->pos;
            p->pos++;
            close_node(p, node);
            return WISP_OK;
        }
        if (c < 0x20) return perr(p, "control character inside a string");
        if (c == '\\') {
            if (p->pos + 1 >= p->len) break;
            char e = p->s[p->pos + 1];
            if (e == 'u') {
                if (p->pos + 6 > p->len) break;
                for (int k = 2; k < 6; k++)
                    if (hex_value(p->s[p->pos + k]) < 0) return perr(p, "bad \\u escape");
                p->pos += 6;
            } else if (strchr("\"\\/bfnrt", e) && e) {
                p->pos += 2;
            } else {
                return perr(p, "bad escape");
            }
            continue;
        }
        size_t n = utf8_valid_len((const unsigned char *)p->s + p->pos, p->len - p->pos);
        if (!n) return perr(p, "invalid UTF-8 in a string");
        p->pos += n;
    }
    return perr(p, "unterminated string");
}

static wisp_status parse_number(parser *p) {
    size_t node = new_node(p, WISP_JSON_NUMBER);
    size_t i = p->pos;
    const char *s = p->s;
    if (i < p->len && s[i] == '-') i++;
    if (i >= p->len) return perr(p, "truncated number");
    if (s[i] == '0') i++;
    else if (s[i] >= '1' && s[i] <= '9') while (i < p->len && s[i] >= '0' && s[i] <= '9') i++;
    else return perr(p, "invalid number");
    if (i < p->len && s[i] == '.') {
        i++;
        if (i >= p->len || s[i] < '0' || s[i] > '9') { p->pos = i; return perr(p, "digit expected after '.'"); }
        while (i < p->len && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < p->len && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= p->len || s[i] < '0' || s[i] > '9') { p->pos = i; return perr(p, "digit expected in exponent"); }
        while (i < p->len && s[i] >= '0' && s[i] <= '9') i++;
    }
    p->pos = i;
    close_node(p, node);
    return WISP_OK;
}

static wisp_status parse_literal(parser *p, const char *word, uint32_t type) {
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0) return perr(p, "unexpected character");
    size_t node = new_node(p, type);
    p->pos += n;
    close_node(p, node);
    return WISP_OK;
}

static bool same_key(const parser *p, size_t a, size_t b) {
    const wisp_json_node *x = &p->nodes[a], *y = &p->nodes[b];
    return x->end - x->start == y->end - y->start && memcmp(p->s + x->start, p->s + y->start, x->end - x->start) == 0;
}

static wisp_status parse_value(parser *p, int depth);

static wisp_status parse_container(parser *p, int depth, bool is_object) {
    if (depth >= WISP_JSON_MAX_DEPTH) return perr(p, "nesting too deep");
    size_t node = new_node(p, is_object ? WISP_JSON_OBJECT : WISP_JSON_ARRAY);
    size_t outer = p->parent;
    p->parent = node;
    char close = is_object ? '}' : ']';
    p->pos++;
    skip_ws(p);
    uint32_t members = 0;
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        close_node(p, node);
        p->parent = outer;
        return WISP_OK;
    }
    for (;;) {
        wisp_status st;
        skip_ws(p);
        if (is_object) {
            if (p->pos >= p->len || p->s[p->pos] != '"') return perr(p, "object key (a string) expected");
            size_t key = p->count;
            if ((st = parse_string(p))) return st;
            if (key < p->cap && members < DUPLICATE_CHECK_MAX_MEMBERS) {
                for (size_t k = node + 1; k < key && k < p->cap; k = p->nodes[k + 1].after)
                    if (same_key(p, k, key)) return perr(p, "duplicate key");
            }
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') return perr(p, "':' expected");
            p->pos++;
            skip_ws(p);
        }
        if ((st = parse_value(p, depth + 1))) return st;
        members++;
        skip_ws(p);
        if (p->pos >= p->len) return perr(p, is_object ? "unterminated object" : "unterminated array");
        char c = p->s[p->pos];
        if (c == ',') { p->pos++; continue; }
        if (c == close) { p->pos++; break; }
        return perr(p, is_object ? "',' or '}' expected" : "',' or ']' expected");
    }
    if (node < p->cap) p->nodes[node].count = is_object ? 2 * members : members;
    close_node(p, node);
    p->parent = outer;
    return WISP_OK;
}

static wisp_status parse_value(parser *p, int depth) {
    skip_ws(p);
    if (p->pos >= p->len) return perr(p, "value expected");
    switch (p->s[p->pos]) {
    case '{': return parse_container(p, depth, true);
    case '[': return parse_container(p, depth, false);
    case '"': return parse_string(p);
    case 't': return parse_literal(p, "true", WISP_JSON_TRUE);
    case 'f': return parse_literal(p, "false", WISP_JSON_FALSE);
    case 'n': return parse_literal(p, "null", WISP_JSON_NULL);
    default: return parse_number(p);
    }
}

wisp_status wisp_json_parse(wisp_json *j, const char *text, size_t len, wisp_json_node *nodes, size_t cap,
                            size_t *needed, wisp_error *err) {
    memset(j, 0, sizeof *j);
    if (len > 0xffffffffu) return wisp_fail(err, WISP_ERR_UNSUPPORTED, "JSON text larger than 4 GiB");
    parser p = {text, len, 0, nodes, cap, 0, 0, err};
    /* A UTF-8 byte order mark is tolerated: some editors write one. */
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) p.pos = 3;
    wisp_status st = parse_value(&p, 0);
    if (st) return st;
    skip_ws(&p);
    if (p.pos != len) return perr(&p, "trailing characters after the JSON value");
    if (needed) *needed = p.count;
    if (p.count > cap)
        return wisp_fail(err, WISP_ERR_CAPACITY, "JSON needs %zu nodes, %zu available", p.count, cap);
    j->text = text;
    j->len = len;
    j->nodes = nodes;
    j->n_nodes = p.count;
    return WISP_OK;
}

/* ---- navigation ---- */

static bool valid(const wisp_json *j, int64_t n) { return n >= 0 && (size_t)n < j->n_nodes; }

int64_t wisp_json_first(const wisp_json *j, int64_t parent) {
    if (!valid(j, parent) || j->nodes[parent].count == 0) return -1;
    return parent + 1;
}

int64_t wisp_json_next(const wisp_json *j, int64_t node) {
    if (!valid(j, node) || node == 0) return -1;
    uint32_t after = j->nodes[node].after;
    return after < j->nodes[j->nodes[node].parent].after ? (int64_t)after : -1;
}

int64_t wisp_json_at(const wisp_json *j, int64_t arr, size_t i) {
    if (!valid(j, arr) || j->nodes[arr].type != WISP_JSON_ARRAY || i >= j->nodes[arr].count) return -1;
    int64_t n = arr + 1;
    while (i--) n = j->nodes[n].after;
    return n;
}

int64_t wisp_json_get(const wisp_json *j, int64_t obj, const char *key) {
    if (!valid(j, obj) || j->nodes[obj].type != WISP_JSON_OBJECT) return -1;
    uint32_t members = j->nodes[obj].count / 2;
    int64_t k = obj + 1;
    for (uint32_t m = 0; m < members; m++) {
        if (wisp_json_string_eq(j, k, key)) return k + 1;
        k = j->nodes[k + 1].after;
    }
    return -1;
}

bool wisp_json_pick(const wisp_json *j, int64_t obj, const char *const *names, int n, int64_t *value_of, char *stranger,
                    size_t cap) {
    for (int64_t key = wisp_json_first(j, obj); key >= 0; key = wisp_json_next(j, wisp_json_next(j, key))) {
        int k = 0;
        while (k < n && !wisp_json_string_eq(j, key, names[k])) k++;
        if (k == n) {
            wisp_json_string(j, key, stranger, cap);
            return false;
        }
        value_of[k] = wisp_json_next(j, key);
    }
    return true;
}

bool wisp_json_is(const wisp_json *j, int64_t node, wisp_json_type t) {
    return valid(j, node) && j->nodes[node].type == (uint32_t)t;
}

/* ---- values ---- */

bool wisp_json_number(const wisp_json *j, int64_t node, double *out) {
    if (!wisp_json_is(j, node, WISP_JSON_NUMBER)) return false;
    const char *s = j->text + j->nodes[node].start, *e = j->text + j->nodes[node].end;
    bool neg = false;
    if (s < e && *s == '-') { neg = true; s++; }
    uint64_t mant = 0;
    int digits = 0;
    long exp10 = 0;
    for (; s < e && *s >= '0' && *s <= '9'; s++) {
        if (digits < 19) { mant = mant * 10 + (uint64_t)(*s - '0'); if (mant) digits++; }
        else exp10++;
    }
    if (s < e && *s == '.') {
        for (s++; s < e && *s >= '0' && *s <= '9'; s++) {
            if (digits < 19) { mant = mant * 10 + (uint64_t)(*s - '0'); if (mant) digits++; exp10--; }
        }
    }
    if (s < e && (*s == 'e' || *s == 'E')) {
        s++;
        bool eneg = false;
        if (*s == '+' || *s == '-') { eneg = *s == '-'; s++; }
        long ev = 0;
        for (; s < e && *s >= '0' && *s <= '9'; s++) if (ev < 100000) ev = ev * 10 + (*s - '0');
        exp10 += eneg ? -ev : ev;
    }
    static const double exact_pow10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                           1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    double v;
    if (mant == 0) v = 0.0;
    else if (mant < (UINT64_C(1) << 53) && exp10 >= -22 && exp10 <= 22)
        v = exp10 >= 0 ? (double)mant * exact_pow10[exp10] : (double)mant / exact_pow10[-exp10];
    else if (exp10 < -300) v = ((double)mant * 1e-300) * pow(10.0, (double)(exp10 + 300)); /* avoid 10^-330 underflow */
    else v = (double)mant * pow(10.0, (double)exp10);
    *out = neg ? -v : v;
    return true;
}

bool wisp_json_int(const wisp_json *j, int64_t node, int64_t *out) {
    double d;
    if (!wisp_json_number(j, node, &d)) return false;
    if (!(d >= -9007199254740992.0 && d <= 9007199254740992.0) || d != floor(d)) return false;
    *out = (int64_t)d;
    return true;
}

bool wisp_json_bool(const wisp_json *j, int64_t node, bool *out) {
    if (wisp_json_is(j, node, WISP_JSON_TRUE)) { *out = true; return true; }
    if (wisp_json_is(j, node, WISP_JSON_FALSE)) { *out = false; return true; }
    return false;
}

static size_t put_utf8(char *buf, size_t cap, size_t n, uint32_t cp) {
    char tmp[4];
    size_t k;
    if (cp < 0x80) { tmp[0] = (char)cp; k = 1; }
    else if (cp < 0x800) { tmp[0] = (char)(0xc0 | (cp >> 6)); tmp[1] = (char)(0x80 | (cp & 0x3f)); k = 2; }
    else if (cp < 0x10000) {
        tmp[0] = (char)(0xe0 | (cp >> 12)); tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        tmp[2] = (char)(0x80 | (cp & 0x3f)); k = 3;
    } else {
        tmp[0] = (char)(0xf0 | (cp >> 18)); tmp[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        tmp[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); tmp[3] = (char)(0x80 | (cp & 0x3f)); k = 4;
    }
    for (size_t i = 0; i < k; i++)
        if (n + i + 1 < cap) buf[n + i] = tmp[i];
    return n + k;
}

static uint32_t hex4(const char *s) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v = v * 16 + (uint32_t)hex_value(s[i]);
    return v;
}

size_t wisp_json_string(const wisp_json *j, int64_t node, char *buf, size_t cap) {
    if (!wisp_json_is(j, node, WISP_JSON_STRING)) {
        if (cap) buf[0] = 0;
        return 0;
    }
    const char *s = j->text + j->nodes[node].start, *e = j->text + j->nodes[node].end;
    size_t n = 0;
    while (s < e) {
        if (*s != '\\') {
            if (n + 1 < cap) buf[n] = *s;
            n++;
            s++;
            continue;
        }
        char c = s[1];
        s += 2;
        uint32_t cp;
        switch (c) {
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            cp = hex4(s);
            s += 4;
            if (cp >= 0xd800 && cp < 0xdc00 && e - s >= 6 && s[0] == '\\' && s[1] == 'u') {
                uint32_t lo = hex4(s + 2);
                if (lo >= 0xdc00 && lo < 0xe000) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    s += 6;
                }
            }
            if (cp >= 0xd800 && cp < 0xe000) cp = 0xfffd; /* lone surrogate */
            break;
        default: cp = (unsigned char)c; break;
        }
        n = put_utf8(buf, cap, n, cp);
    }
    if (cap) buf[n < cap ? n : cap - 1] = 0;
    return n;
}

bool wisp_json_string_eq(const wisp_json *j, int64_t node, const char *str) {
    if (!wisp_json_is(j, node, WISP_JSON_STRING)) return false;
    const wisp_json_node *nd = &j->nodes[node];
    size_t n = strlen(str);
    const char *s = j->text + nd->start;
    size_t raw = nd->end - nd->start;
    if (!memchr(s, '\\', raw)) return raw == n && memcmp(s, str, n) == 0;
    /* escaped keys are rare: unescape in chunks and compare */
    char tmp[512];
    size_t full = wisp_json_string(j, node, tmp, sizeof tmp);
    return full == n && full < sizeof tmp && memcmp(tmp, str, n) == 0;
}

/* ---- writer ---- */

static void w_raw(wisp_json_writer *w, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (w->len + 1 < w->cap) w->buf[w->len] = s[i];
        else w->overflow = true;
        w->len++;
    }
}

static void w_indent(wisp_json_writer *w) {
    if (!w->pretty) return;
    w_raw(w, "\n", 1);
    for (int i = 0; i < w->depth; i++) w_raw(w, "  ", 2);
}

/* Separator before a value: a comma after a sibling, and a newline when
 * pretty. A value that follows its key needs neither. */
static void w_before_value(wisp_json_writer *w) {
    if (w->depth == 0 || w->after_key) return;
    if (w->need_comma[w->depth]) w_raw(w, ",", 1);
    w_indent(w);
    w->need_comma[w->depth] = true;
}

void wisp_jw_init(wisp_json_writer *w, char *buf, size_t cap, bool pretty) {
    memset(w, 0, sizeof *w);
    w->buf = buf;
    w->cap = cap;
    w->pretty = pretty;
}

static void w_value_done(wisp_json_writer *w) { w->after_key = false; }

static void w_open(wisp_json_writer *w, char c) {
    w_before_value(w);
    w_value_done(w);
    w_raw(w, &c, 1);
    if (w->depth + 1 >= WISP_JSON_MAX_DEPTH) { w->overflow = true; return; }
    w->depth++;
    w->need_comma[w->depth] = false;
}

static void w_close(wisp_json_writer *w, char c) {
    if (w->depth <= 0) { w->overflow = true; return; }
    bool had_items = w->need_comma[w->depth];
    w->depth--;
    if (had_items) w_indent(w);
    w_raw(w, &c, 1);
}

void wisp_jw_begin_object(wisp_json_writer *w) { w_open(w, '{'); }
void wisp_jw_end_object(wisp_json_writer *w) { w_close(w, '}'); }
void wisp_jw_begin_array(wisp_json_writer *w) { w_open(w, '['); }
void wisp_jw_end_array(wisp_json_writer *w) { w_close(w, ']'); }

static void w_quoted(wisp_json_writer *w, const char *s, size_t n) {
    static const char hexd[] = "0123456789abcdef";
    w_raw(w, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') w_raw(w, "\\\"", 2);
        else if (c == '\\') w_raw(w, "\\\\", 2);
        else if (c == '\n') w_raw(w, "\\n", 2);
        else if (c == '\r') w_raw(w, "\\r", 2);
        else if (c == '\t') w_raw(w, "\\t", 2);
        else if (c < 0x20) {
            char esc[6] = {'\\', 'u', '0', '0', hexd[c >> 4], hexd[c & 15]};
            w_raw(w, esc, 6);
        } else {
            w_raw(w, (const char *)&s[i], 1);
        }
    }
    w_raw(w, "\"", 1);
}

void wisp_jw_key(wisp_json_writer *w, const char *key) {
    w_before_value(w);
    w_quoted(w, key, strlen(key));
    w_raw(w, w->pretty ? ": " : ":", w->pretty ? 2 : 1);
    w->after_key = true;
}

void wisp_jw_string_n(wisp_json_writer *w, const char *s, size_t n) {
    w_before_value(w);
    w_value_done(w);
    w_quoted(w, s, n);
}

void wisp_jw_string(wisp_json_writer *w, const char *s) { wisp_jw_string_n(w, s, strlen(s)); }

void wisp_jw_int(wisp_json_writer *w, int64_t v) {
    char tmp[32];
    size_t n = wisp_format(tmp, sizeof tmp, "%lld", (long long)v);
    w_before_value(w);
    w_value_done(w);
    w_raw(w, tmp, n);
}

void wisp_jw_double(wisp_json_writer *w, double v, int significant_digits) {
    if (!isfinite(v)) { wisp_jw_null(w); return; }
    char tmp[48];
    size_t n;
    if (v == floor(v) && fabs(v) < 1e15) n = wisp_format(tmp, sizeof tmp, "%lld.0", (long long)v);
    else n = wisp_format(tmp, sizeof tmp, "%.*g", significant_digits, v);
    w_before_value(w);
    w_value_done(w);
    w_raw(w, tmp, n);
}

void wisp_jw_bool(wisp_json_writer *w, bool v) {
    w_before_value(w);
    w_value_done(w);
    w_raw(w, v ? "true" : "false", v ? 4 : 5);
}

void wisp_jw_null(wisp_json_writer *w) {
    w_before_value(w);
    w_value_done(w);
    w_raw(w, "null", 4);
}

bool wisp_jw_finish(wisp_json_writer *w) {
    if (w->cap) w->buf[w->len < w->cap ? w->len : w->cap - 1] = 0;
    return !w->overflow && w->depth == 0;
}

wisp_status wisp_jw_finish_sized(wisp_json_writer *w, size_t cap, size_t *len, const char *what, wisp_error *err) {
    bool ok = wisp_jw_finish(w);
    *len = w->len;
    if (!ok && w->len + 1 > cap)
        return wisp_fail(err, WISP_ERR_CAPACITY, "%s needs %zu bytes, buffer has %zu", what, w->len + 1, cap);
    if (!ok) return wisp_fail(err, WISP_ERR_INTERNAL, "%s writer out of balance", what);
    return WISP_OK;
}
