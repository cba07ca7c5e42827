/* The pre-tokenizer regexes of llama.cpp's byte-level BPE vocabularies, one
 * matcher function per regex. A matcher gets the code points of one piece
 * [p, e) and returns the length of the regex's match starting at p (0: none).
 *
 * Classes follow llama.cpp: \s is the White_Space set, \p{L} \p{N} \p{P} the
 * general categories. Where llama.cpp runs a regex with literal non-ASCII
 * ranges (deepseek), it first turns every non-ASCII whitespace character into
 * U+000B, so those characters never match the literal ranges; the class
 * tests below exclude whitespace for the same reason. */
#include "pretokenize.h"

#include <string.h>

#include "unicode.h"

/* ---- code point view ---- */

static inline uint32_t cp_of(uint32_t e) { return e & 0x1FFFFFu; }
static inline uint32_t class_of(uint32_t e) { return (e >> WISP_PT_CLASS_SHIFT) & 15u; }
static inline bool is_space(uint32_t e) { return (e & WISP_PT_SPACE) != 0; }
static inline bool is_letter(uint32_t e) { return class_of(e) == WISP_UC_L; }
static inline bool is_number(uint32_t e) { return class_of(e) == WISP_UC_N; }
static inline bool is_punct(uint32_t e) { return class_of(e) == WISP_UC_P; }
static inline bool is_other(uint32_t e) { return !is_space(e) && !is_letter(e) && !is_number(e); } /* [^\s\p{L}\p{N}] */
static inline bool is_crlf(uint32_t e) { return cp_of(e) == '\r' || cp_of(e) == '\n'; }
static inline bool is_ascii_digit(uint32_t e) { return cp_of(e) >= '0' && cp_of(e) <= '9'; }

typedef bool (*class_fn)(uint32_t e);

static size_t run_of(const uint32_t *c, size_t p, size_t e, class_fn f) {
    size_t q = p;
    while (q < e && f(c[q])) q++;
    return q - p;
}

/* deepseek-llm's letters: the cased letters (Lu, Ll, Lt) of its regex. */
static const uint32_t ds_letters[][2] = {
    {0x0041, 0x005A}, {0x0061, 0x007A}, {0x00B5, 0x00B5}, {0x00C0, 0x00D6}, {0x00D8, 0x00F6},
    {0x00F8, 0x01BA}, {0x01BC, 0x01BF}, {0x01C4, 0x0293}, {0x0295, 0x02AF}, {0x0370, 0x0373},
    {0x0376, 0x0377}, {0x037B, 0x037D}, {0x037F, 0x037F}, {0x0386, 0x0386}, {0x0388, 0x038A},
    {0x038C, 0x038C}, {0x038E, 0x03A1}, {0x03A3, 0x03F5}, {0x03F7, 0x0481}, {0x048A, 0x052F},
    {0x0531, 0x0556}, {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF}, {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B}, {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107},
    {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126},
    {0x2128, 0x2128}, {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F},
    {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F},
    {0xA771, 0xA787}, {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

static bool in_ranges(const uint32_t (*r)[2], size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r[mid][1] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && r[lo][0] <= cp;
}

static bool is_ds_letter(uint32_t e) {
    return in_ranges(ds_letters, sizeof ds_letters / sizeof ds_letters[0], cp_of(e));
}

/* deepseek-llm's punctuation: [!-/:-~！-／：-～‘-‟　-。] */
static bool is_ds_punct(uint32_t e) {
    uint32_t c = cp_of(e);
    if (is_space(e)) return false;
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x7E) || (c >= 0xFF01 && c <= 0xFF0F) ||
           (c >= 0xFF1A && c <= 0xFF5E) || (c >= 0x2018 && c <= 0x201F) || (c >= 0x3000 && c <= 0x3002);
}

/* [一-龥ࠀ-一가-퟿] */
static bool is_cjk(uint32_t e) {
    uint32_t c = cp_of(e);
    if (is_space(e)) return false;
    return (c >= 0x0800 && c <= 0x9FA5) || (c >= 0xAC00 && c <= 0xD7FF);
}

/* [\p{P}\$\+<=>\^~\|] (and ` for falcon) */
static bool is_default_punct(uint32_t e) {
    uint32_t c = cp_of(e);
    return is_punct(e) || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' || c == '^' || c == '~' || c == '|';
}
static bool is_falcon_punct(uint32_t e) { return is_default_punct(e) || cp_of(e) == '`'; }

/* [\p{P}!-/:-@\[-`{-~] */
static bool is_chameleon_punct(uint32_t e) {
    uint32_t c = cp_of(e);
    return is_punct(e) || (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
}

/* [^(\s|.,!?…。，、।۔،)] */
static bool is_bloom_word(uint32_t e) {
    uint32_t c = cp_of(e);
    if (is_space(e)) return false;
    switch (c) {
    case '(': case '|': case '.': case ',': case '!': case '?': case ')':
    case 0x2026: case 0x3002: case 0xFF0C: case 0x3001: case 0x0964: case 0x06D4: case 0x060C:
        return false;
    default:
        return true;
    }
}

/* ---- matchers ---- */

static uint32_t lower_ascii(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

/* 's|'t|'re|'ve|'m|'ll|'d, optionally case-insensitive */
static size_t m_contraction(const uint32_t *c, size_t p, size_t e, bool any_case) {
    if (cp_of(c[p]) != '\'' || p + 1 >= e) return 0;
    uint32_t a = cp_of(c[p + 1]);
    if (any_case) a = lower_ascii(a);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (p + 2 >= e) return 0;
    uint32_t b = cp_of(c[p + 2]);
    if (any_case) b = lower_ascii(b);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* X? Y+ where X is one character test: the optional character is taken only
 * when Y follows it (the regex backtracks otherwise). */
static size_t m_opt_then_run(const uint32_t *c, size_t p, size_t e, class_fn opt, class_fn f) {
    if (opt(c[p]) && p + 1 < e && f(c[p + 1])) return 1 + run_of(c, p + 1, e, f);
    return run_of(c, p, e, f);
}

static bool is_blank(uint32_t e) { return cp_of(e) == ' '; }

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S) */
static size_t m_gpt2(const uint32_t *c, size_t p, size_t e) {
    size_t m = m_contraction(c, p, e, false);
    if (m) return m;
    if ((m = m_opt_then_run(c, p, e, is_blank, is_letter))) return m;
    if ((m = m_opt_then_run(c, p, e, is_blank, is_number))) return m;
    if ((m = m_opt_then_run(c, p, e, is_blank, is_other))) return m;
    size_t w = run_of(c, p, e, is_space);
    if (w == 0) return 0;
    if (p + w == e) return w; /* nothing follows: the lookahead holds */
    return w - 1;             /* leave the last one before the \S (0: no match) */
}

static bool is_not_crlf_letter_number(uint32_t e) { return !is_crlf(e) && !is_letter(e) && !is_number(e); }

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t m_llama3(const uint32_t *c, size_t p, size_t e, size_t max_digits) {
    size_t m = m_contraction(c, p, e, true);
    if (m) return m;
    if ((m = m_opt_then_run(c, p, e, is_not_crlf_letter_number, is_letter))) return m;
    if (is_number(c[p])) {
        m = run_of(c, p, e, is_number);
        return m < max_digits ? m : max_digits;
    }
    if ((m = m_opt_then_run(c, p, e, is_blank, is_other))) {
        while (p + m < e && is_crlf(c[p + m])) m++;
        return m;
    }
    size_t w = run_of(c, p, e, is_space);
    if (w == 0) return 0;
    for (size_t k = w; k > 0; k--) /* \s*[\r\n]+ ends at the run's last newline */
        if (is_crlf(c[p + k - 1])) return k;
    if (p + w == e || w == 1) return w;
    return w - 1;
}

/* \s+$ ; *skip tells the caller where the next match can start */
static size_t m_trailing_space(const uint32_t *c, size_t p, size_t e, size_t *skip) {
    size_t w = run_of(c, p, e, is_space);
    if (w > 0 && p + w == e) return w;
    *skip = p + (w ? w : 1);
    return 0;
}

static bool match_lit(const uint32_t *c, size_t p, size_t e, const char *lit) {
    size_t n = strlen(lit);
    if (e - p < n) return false;
    for (size_t i = 0; i < n; i++)
        if (cp_of(c[p + i]) != (uint32_t)(uint8_t)lit[i]) return false;
    return true;
}

/* <sentinel:[0-9]+> */
static size_t m_sentinel(const uint32_t *c, size_t p, size_t e) {
    if (!match_lit(c, p, e, "<sentinel:")) return 0;
    size_t d = run_of(c, p + 10, e, is_ascii_digit);
    if (d == 0 || p + 10 + d >= e || cp_of(c[p + 10 + d]) != '>') return 0;
    return 10 + d + 1;
}

static bool is_a_to_i(uint32_t e) { return cp_of(e) >= 'A' && cp_of(e) <= 'I'; }

/* (IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z */
static size_t m_image(const uint32_t *c, size_t p, size_t e) {
    if (!match_lit(c, p, e, "IMGIMG")) return 0;
    size_t k = run_of(c, p + 6, e, is_a_to_i);
    if (k == 0 || k > 4 || p + 6 + k >= e || cp_of(c[p + 6 + k]) != 'Z') return 0;
    return 6 + k + 1;
}

/* ([\t\n]|    |  ) */
static size_t m_tab_or_spaces(const uint32_t *c, size_t p, size_t e) {
    uint32_t a = cp_of(c[p]);
    if (a == '\t' || a == '\n') return 1;
    if (match_lit(c, p, e, "    ")) return 4;
    if (match_lit(c, p, e, "  ")) return 2;
    return 0;
}

typedef enum splitter {
    SP_GPT2, SP_LLAMA3, SP_QWEN2, SP_DIGIT, SP_DIGITS, SP_ASCII3, SP_DEFAULT_PUNCT, SP_FALCON_PUNCT,
    SP_NEWLINE, SP_DS_LETTERS, SP_DS_PUNCT, SP_TRAILING_SPACE, SP_CJK, SP_DSC_LETTERS, SP_DSC_PUNCT,
    SP_SENTINEL, SP_IMAGE, SP_TAB_OR_SPACES, SP_CHAMELEON_PUNCT, SP_BLOOM, SP_END
} splitter;

static size_t match(splitter sp, const uint32_t *c, size_t p, size_t e, size_t *skip) {
    switch (sp) {
    case SP_GPT2: return m_gpt2(c, p, e);
    case SP_LLAMA3: return m_llama3(c, p, e, 3);
    case SP_QWEN2: return m_llama3(c, p, e, 1);
    case SP_DIGIT: return is_number(c[p]) ? 1 : 0;
    case SP_DIGITS: return run_of(c, p, e, is_number);
    case SP_ASCII3: return (e - p >= 3 && is_ascii_digit(c[p]) && is_ascii_digit(c[p + 1]) && is_ascii_digit(c[p + 2])) ? 3 : 0;
    case SP_DEFAULT_PUNCT: return run_of(c, p, e, is_default_punct);
    case SP_FALCON_PUNCT: return run_of(c, p, e, is_falcon_punct);
    case SP_NEWLINE: return is_crlf(c[p]) ? 1 : 0;
    case SP_DS_LETTERS: return m_opt_then_run(c, p, e, is_space, is_ds_letter);
    case SP_DS_PUNCT: return m_opt_then_run(c, p, e, is_space, is_ds_punct);
    case SP_TRAILING_SPACE: return m_trailing_space(c, p, e, skip);
    case SP_CJK: return run_of(c, p, e, is_cjk);
    case SP_DSC_LETTERS: return m_opt_then_run(c, p, e, is_space, is_letter);
    case SP_DSC_PUNCT: return m_opt_then_run(c, p, e, is_space, is_punct);
    case SP_SENTINEL: return m_sentinel(c, p, e);
    case SP_IMAGE: return m_image(c, p, e);
    case SP_TAB_OR_SPACES: return m_tab_or_spaces(c, p, e);
    case SP_CHAMELEON_PUNCT: return is_chameleon_punct(c[p]) ? 1 : 0;
    case SP_BLOOM: return m_opt_then_run(c, p, e, is_blank, is_bloom_word);
    case SP_END: break;
    }
    return 0;
}

/* The splitters of each pre-tokenizer, in llama.cpp's order. */
static const uint8_t programs[WISP_PRETOK_COUNT][7] = {
    [WISP_PRETOK_DEFAULT] = {SP_DEFAULT_PUNCT, SP_GPT2, SP_DIGITS, SP_ASCII3, SP_END},
    [WISP_PRETOK_GPT2] = {SP_GPT2, SP_END},
    [WISP_PRETOK_LLAMA3] = {SP_LLAMA3, SP_END},
    [WISP_PRETOK_QWEN2] = {SP_QWEN2, SP_END},
    [WISP_PRETOK_DEEPSEEK_LLM] = {SP_NEWLINE, SP_DS_LETTERS, SP_DS_PUNCT, SP_TRAILING_SPACE, SP_CJK, SP_DIGITS, SP_END},
    [WISP_PRETOK_DEEPSEEK_CODER] = {SP_NEWLINE, SP_DSC_LETTERS, SP_DSC_PUNCT, SP_CJK, SP_DIGIT, SP_END},
    [WISP_PRETOK_FALCON] = {SP_FALCON_PUNCT, SP_GPT2, SP_ASCII3, SP_END},
    [WISP_PRETOK_STARCODER] = {SP_DIGIT, SP_GPT2, SP_END},
    [WISP_PRETOK_BLOOM] = {SP_BLOOM, SP_END},
    [WISP_PRETOK_VIKING] = {SP_BLOOM, SP_DIGIT, SP_END},
    [WISP_PRETOK_CHAMELEON] = {SP_SENTINEL, SP_IMAGE, SP_TAB_OR_SPACES, SP_DIGIT, SP_CHAMELEON_PUNCT, SP_GPT2, SP_END},
};

/* Cut every piece of cps[0..n) around the matches of one splitter. */
static void split_pass(splitter sp, uint32_t *c, size_t n) {
    size_t s = 0;
    while (s < n) {
        size_t e = s + 1;
        while (e < n && !(c[e] & WISP_PT_START)) e++;
        size_t p = s;
        while (p < e) {
            size_t skip = p + 1;
            size_t m = match(sp, c, p, e, &skip);
            if (m) {
                c[p] |= WISP_PT_START;
                if (p + m < e) c[p + m] |= WISP_PT_START;
                p += m;
            } else {
                p = skip;
            }
        }
        s = e;
    }
}

size_t wisp_pretokenize(int pre, const uint8_t *text, size_t len, uint32_t *cps) {
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t l;
        uint32_t cp = wisp_utf8_decode(text + i, len - i, &l);
        uint32_t e = cp | (uint32_t)(l - 1) << WISP_PT_LEN_SHIFT | (uint32_t)wisp_uc_class_of(cp) << WISP_PT_CLASS_SHIFT;
        if (wisp_uc_is_space(cp)) e |= WISP_PT_SPACE;
        cps[n++] = e;
        i += l;
    }
    if (n == 0) return 0;
    cps[0] |= WISP_PT_START;
    if (pre < 0 || pre >= WISP_PRETOK_COUNT) pre = WISP_PRETOK_DEFAULT;
    for (const uint8_t *sp = programs[pre]; *sp != SP_END; sp++) split_pass((splitter)*sp, cps, n);
    return n;
}

bool wisp_pretok_next(const uint32_t *cps, size_t n, size_t *cp, size_t *byte, size_t *start, size_t *bytes) {
    size_t i = *cp;
    if (i >= n) return false;
    size_t b = *byte;
    *start = b;
    do {
        b += ((cps[i] >> WISP_PT_LEN_SHIFT) & 3u) + 1;
        i++;
    } while (i < n && !(cps[i] & WISP_PT_START));
    *bytes = b - *start;
    *cp = i;
    *byte = b;
    return true;
}

typedef struct pretok_name {
    const char *name;
    uint8_t pre;
    uint8_t flags;
} pretok_name;

static const pretok_name names[] = {
    {"default", WISP_PRETOK_DEFAULT, 0},
    {"llama3", WISP_PRETOK_LLAMA3, WISP_PRETOK_IGNORE_MERGES | WISP_PRETOK_ADD_BOS},
    {"llama-v3", WISP_PRETOK_LLAMA3, WISP_PRETOK_IGNORE_MERGES | WISP_PRETOK_ADD_BOS},
    {"llama-bpe", WISP_PRETOK_LLAMA3, WISP_PRETOK_IGNORE_MERGES | WISP_PRETOK_ADD_BOS},
    {"falcon3", WISP_PRETOK_LLAMA3, WISP_PRETOK_IGNORE_MERGES | WISP_PRETOK_ADD_BOS},
    {"dbrx", WISP_PRETOK_LLAMA3, 0},
    {"smaug-bpe", WISP_PRETOK_LLAMA3, 0},
    {"chatglm-bpe", WISP_PRETOK_LLAMA3, 0},
    {"deepseek-llm", WISP_PRETOK_DEEPSEEK_LLM, 0},
    {"deepseek-coder", WISP_PRETOK_DEEPSEEK_CODER, 0},
    {"falcon", WISP_PRETOK_FALCON, 0},
    {"mpt", WISP_PRETOK_GPT2, 0},
    {"gpt-2", WISP_PRETOK_GPT2, 0},
    {"phi-2", WISP_PRETOK_GPT2, 0},
    {"jina-es", WISP_PRETOK_GPT2, 0},
    {"jina-de", WISP_PRETOK_GPT2, 0},
    {"gigachat", WISP_PRETOK_GPT2, 0},
    {"jina-v1-en", WISP_PRETOK_GPT2, 0},
    {"jina-v2-es", WISP_PRETOK_GPT2, 0},
    {"jina-v2-de", WISP_PRETOK_GPT2, 0},
    {"jina-v2-code", WISP_PRETOK_GPT2, 0},
    {"roberta-bpe", WISP_PRETOK_GPT2, 0},
    {"olmo", WISP_PRETOK_GPT2, 0},
    {"jais", WISP_PRETOK_GPT2, 0},
    {"starcoder", WISP_PRETOK_STARCODER, 0},
    {"refact", WISP_PRETOK_STARCODER, 0},
    {"command-r", WISP_PRETOK_STARCODER, 0},
    {"smollm", WISP_PRETOK_STARCODER, 0},
    {"codeshell", WISP_PRETOK_STARCODER, 0},
    {"exaone", WISP_PRETOK_STARCODER, 0},
    {"minerva-7b", WISP_PRETOK_STARCODER, 0},
    {"qwen2", WISP_PRETOK_QWEN2, 0},
    {"deepseek-r1-qwen", WISP_PRETOK_QWEN2, 0},
    {"stablelm2", WISP_PRETOK_QWEN2, 0},
    {"megrez", WISP_PRETOK_QWEN2, 0},
    {"poro-chat", WISP_PRETOK_BLOOM, 0},
    {"bloom", WISP_PRETOK_BLOOM, 0},
    {"gpt3-finnish", WISP_PRETOK_BLOOM, 0},
    {"viking", WISP_PRETOK_VIKING, 0},
    {"chameleon", WISP_PRETOK_CHAMELEON, WISP_PRETOK_ADD_BOS},
};

int wisp_pretok_from_name(wisp_str name, unsigned *flags) {
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (wisp_str_eq(name, names[i].name)) {
            if (flags) *flags = names[i].flags;
            return names[i].pre;
        }
    }
    return -1;
}
