/* The template lexer: Jinja2's tokens with Hugging Face's settings applied to
 * the data between tags (trim_blocks: a block or comment tag eats the newline
 * right after it; lstrip_blocks: spaces and tabs between a line start and a
 * block or comment tag go; `{%-`/`-%}` strip all whitespace on their side;
 * `+` keeps it). Comments vanish here. Jinja first turns every line ending
 * into `\n`; the lexer reads `\r\n` and `\r` as that newline instead, so the
 * source needs no copy (text is normalised when printed). */
#include <string.h>

#include "template_internal.h"
#include "unicode.h"

void tpl_lex_init(tpl_lexer *lx, const char *src, uint32_t len) {
    memset(lx, 0, sizeof *lx);
    lx->src = src;
    lx->len = len;
    lx->line = 1;
    lx->line_starting = true; /* the template's start counts as a line start */
}

/* ASCII whitespace, what separates tokens inside a tag (Jinja's tag lexer). */
static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Python's \s (str.isspace), which whitespace control strips from the text:
 * the bytes of a whitespace character starting at p, or 0. */
static uint32_t space_at(const char *s, uint32_t p, uint32_t len) {
    size_t n;
    uint32_t cp = wisp_utf8_decode((const uint8_t *)s + p, len - p, &n);
    bool space = (cp == 0xFFFD && n == 1) ? false : (wisp_uc_is_space(cp) || (cp >= 0x1C && cp <= 0x1F));
    return space ? (uint32_t)n : 0;
}

/* The same, for the character ending at p (start: how far back to look). */
static uint32_t space_before(const char *s, uint32_t start, uint32_t p) {
    uint32_t q = p;
    while (q > start && p - q < 4 && (q == p || ((unsigned char)s[q] & 0xC0) == 0x80)) q--;
    if (q < p && ((unsigned char)s[q] & 0xC0) == 0x80) return 0;
    return space_at(s, q, p) == p - q ? p - q : 0;
}

static bool is_nl(char c) { return c == '\n' || c == '\r'; }

static uint32_t count_lines(const char *s, uint32_t a, uint32_t b) {
    uint32_t n = 0;
    for (uint32_t i = a; i < b; i++) n += s[i] == '\n' || (s[i] == '\r' && (i + 1 >= b || s[i + 1] != '\n'));
    return n;
}

/* Position of the next `{{`, `{%` or `{#` at or after pos, or len. */
static uint32_t find_tag(const tpl_lexer *lx, uint32_t pos) {
    for (uint32_t i = pos; i + 1 < lx->len; i++)
        if (lx->src[i] == '{' && (lx->src[i + 1] == '{' || lx->src[i + 1] == '%' || lx->src[i + 1] == '#')) return i;
    return lx->len;
}

/* After a tag's end marker at `pos`: `-` strips all whitespace, `+` nothing,
 * otherwise (blocks and comments only) one newline goes (trim_blocks). */
static uint32_t after_end(tpl_lexer *lx, uint32_t pos, char sign, bool trim_newline) {
    uint32_t start = pos;
    if (sign == '-')
        for (uint32_t n; pos < lx->len && (n = space_at(lx->src, pos, lx->len)) > 0;) pos += n;
    else if (sign != '+' && trim_newline && pos < lx->len && is_nl(lx->src[pos]))
        pos += lx->src[pos] == '\r' && pos + 1 < lx->len && lx->src[pos + 1] == '\n' ? 2 : 1;
    lx->line += count_lines(lx->src, start, pos);
    lx->line_starting = pos > 0 && is_nl(lx->src[pos - 1]);
    return pos;
}

/* Data up to the next tag, with the tag's whitespace control applied to its end. */
static bool lex_data(tpl_lexer *lx, tpl_tok *tok, wisp_error *err) {
    for (;;) {
        if (lx->pos >= lx->len) {
            tok->kind = TK_EOF;
            tok->start = lx->len;
            tok->len = 0;
            tok->line = lx->line;
            return true;
        }
        uint32_t p = find_tag(lx, lx->pos);
        uint32_t text_end = p;
        char kind = p < lx->len ? lx->src[p + 1] : 0;
        char sign = p + 2 < lx->len ? lx->src[p + 2] : 0;
        if (p < lx->len) {
            if (sign == '-') {
                for (uint32_t n; text_end > lx->pos && (n = space_before(lx->src, lx->pos, text_end)) > 0;) text_end -= n;
            } else if (sign != '+' && kind != '{') {
                uint32_t l = p;
                while (l > lx->pos && !is_nl(lx->src[l - 1])) l--;
                bool after_newline = l > lx->pos; /* a newline inside this text */
                if (after_newline || lx->line_starting) {
                    bool only_space = l < p;
                    for (uint32_t i = l, n; i < p && only_space; i += n)
                        if ((n = space_at(lx->src, i, p)) == 0) only_space = false;
                    if (only_space) text_end = l;
                }
            }
        }
        if (text_end > lx->pos) { /* the text first; the tag on the next call */
            tok->kind = TK_TEXT;
            tok->start = lx->pos;
            tok->len = text_end - lx->pos;
            tok->line = lx->line;
            lx->line += count_lines(lx->src, lx->pos, p);
            lx->pos = p;
            lx->line_starting = false;
            return true;
        }
        lx->line += count_lines(lx->src, lx->pos, p);
        lx->pos = p;
        if (p >= lx->len) continue;
        uint32_t body = p + 2 + (sign == '-' || sign == '+');
        lx->line_starting = false;
        if (kind == '#') { /* a comment: find its end and apply its whitespace control */
            uint32_t e = body;
            while (e + 1 < lx->len && !(lx->src[e] == '#' && lx->src[e + 1] == '}')) e++;
            if (e + 1 >= lx->len) {
                wisp_fail(err, WISP_ERR_FORMAT, "template line %u: comment '{#' is never closed", lx->line);
                return false;
            }
            char end_sign = e > body && (lx->src[e - 1] == '-' || lx->src[e - 1] == '+') ? lx->src[e - 1] : 0;
            lx->line += count_lines(lx->src, p, e);
            lx->pos = after_end(lx, e + 2, end_sign, true);
            continue;
        }
        tok->kind = kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN;
        tok->start = p;
        tok->len = body - p;
        tok->line = lx->line;
        lx->pos = body;
        lx->in_tag = true;
        lx->tag_kind = tok->kind;
        lx->paren_depth = 0;
        return true;
    }
}

static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static bool lex_tag(tpl_lexer *lx, tpl_tok *tok, wisp_error *err) {
    const char *s = lx->src;
    while (lx->pos < lx->len && is_ws(s[lx->pos])) lx->line += s[lx->pos++] == '\n';
    uint32_t p = lx->pos;
    tok->start = p;
    tok->line = lx->line;
    tok->op[0] = tok->op[1] = tok->op[2] = 0;
    if (p >= lx->len) {
        wisp_fail(err, WISP_ERR_FORMAT, "template line %u: tag '%s' is never closed", lx->line,
                  lx->tag_kind == TK_VAR_BEGIN ? "{{" : "{%");
        return false;
    }
    char close = lx->tag_kind == TK_VAR_BEGIN ? '}' : '%';
    if (lx->paren_depth == 0) { /* the end marker, with its sign */
        uint32_t q = p;
        char sign = 0;
        if ((s[q] == '-' || (s[q] == '+' && close == '%')) && q + 2 < lx->len && s[q + 1] == close && s[q + 2] == '}') {
            sign = s[q];
            q++;
        }
        if (q + 1 < lx->len && s[q] == close && s[q + 1] == '}') {
            tok->kind = lx->tag_kind == TK_VAR_BEGIN ? TK_VAR_END : TK_BLOCK_END;
            tok->len = q + 2 - p;
            lx->in_tag = false;
            lx->pos = after_end(lx, q + 2, sign, close == '%');
            return true;
        }
    }
    char c = s[p];
    if (is_name_start(c)) {
        uint32_t q = p + 1;
        while (q < lx->len && (is_name_start(s[q]) || is_digit(s[q]))) q++;
        tok->kind = TK_NAME;
        tok->len = q - p;
        lx->pos = q;
        return true;
    }
    if (is_digit(c)) {
        uint32_t q = p;
        while (q < lx->len && is_digit(s[q])) q++;
        tok->kind = TK_INT;
        if (q + 1 < lx->len && s[q] == '.' && is_digit(s[q + 1])) {
            tok->kind = TK_FLOAT;
            q++;
            while (q < lx->len && is_digit(s[q])) q++;
        }
        if (q < lx->len && (s[q] == 'e' || s[q] == 'E')) {
            uint32_t r = q + 1;
            if (r < lx->len && (s[r] == '+' || s[r] == '-')) r++;
            if (r < lx->len && is_digit(s[r])) {
                while (r < lx->len && is_digit(s[r])) r++;
                tok->kind = TK_FLOAT;
                q = r;
            }
        }
        if (q < lx->len && (s[q] == '_' || is_name_start(s[q]))) {
            wisp_fail(err, WISP_ERR_UNSUPPORTED, "template line %u: number literal '%.*s' is not supported", lx->line,
                      (int)(q + 1 - p), s + p);
            return false;
        }
        tok->len = q - p;
        lx->pos = q;
        return true;
    }
    if (c == '\'' || c == '"') {
        uint32_t q = p + 1;
        while (q < lx->len && s[q] != c) {
            if (s[q] == '\\' && q + 1 < lx->len) q++;
            lx->line += s[q] == '\n';
            q++;
        }
        if (q >= lx->len) {
            wisp_fail(err, WISP_ERR_FORMAT, "template line %u: string literal is never closed", tok->line);
            return false;
        }
        tok->kind = TK_STRING;
        tok->len = q + 1 - p;
        lx->pos = q + 1;
        return true;
    }
    static const char *const two[] = {"//", "**", "==", "!=", "<=", ">="};
    for (int i = 0; i < 6; i++)
        if (p + 1 < lx->len && s[p] == two[i][0] && s[p + 1] == two[i][1]) {
            tok->kind = TK_OP;
            tok->op[0] = two[i][0];
            tok->op[1] = two[i][1];
            tok->len = 2;
            lx->pos = p + 2;
            return true;
        }
    if (c && strchr("+-*/%~[](){}<>=.:|,", c)) {
        tok->kind = TK_OP;
        tok->op[0] = c;
        tok->len = 1;
        lx->pos = p + 1;
        if (c == '(' || c == '[' || c == '{') lx->paren_depth++;
        if ((c == ')' || c == ']' || c == '}') && lx->paren_depth > 0) lx->paren_depth--;
        return true;
    }
    wisp_fail(err, WISP_ERR_FORMAT, "template line %u: unexpected character '%c' in a tag", lx->line, c);
    return false;
}

bool tpl_lex_next(tpl_lexer *lx, tpl_tok *tok, wisp_error *err) {
    memset(tok, 0, sizeof *tok);
    return lx->in_tag ? lex_tag(lx, tok, err) : lex_data(lx, tok, err);
}

wisp_status tpl_count_tokens(const char *src, uint32_t len, uint32_t *count, wisp_error *err) {
    tpl_lexer lx;
    tpl_lex_init(&lx, src, len);
    uint32_t n = 0;
    tpl_tok tok;
    do {
        if (!tpl_lex_next(&lx, &tok, err)) return err ? err->status : WISP_ERR_FORMAT;
        n++;
    } while (tok.kind != TK_EOF);
    *count = n;
    return WISP_OK;
}
