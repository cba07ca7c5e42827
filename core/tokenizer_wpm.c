/* WordPiece ("bert" vocabularies) with BERT's normaliser, as Hugging Face
 * runs it for uncased models:
 *   - control characters, U+0000 and U+FFFD (invalid UTF-8) are dropped;
 *   - whitespace separates words; CJK ideographs and punctuation (Unicode P,
 *     or any ASCII symbol) are words of their own;
 *   - accents are stripped (NFD, nonspacing marks removed), then lowercase;
 *   - each word is matched greedily, longest token first, from its start; a
 *     word longer than 100 characters, or with any part that no token
 *     matches, becomes the unknown token.
 * In GGUF, word-initial tokens carry a "▁" prefix and continuation tokens
 * ("##x" in Hugging Face) are stored without their "##".
 * Words are processed one at a time in a fixed buffer: scratch does not grow
 * with the text. */
#include "tokenizer_internal.h"
#include "unicode.h"

#define WPM_MAX_CHARS 100 /* Hugging Face's max_input_chars_per_word */

typedef struct wpm_word {
    uint8_t bytes[3 + 4 * WPM_MAX_CHARS]; /* "▁" + the word's UTF-8 */
    uint16_t ends[WPM_MAX_CHARS + 1];     /* ends[k]: end of character k in bytes[] */
    size_t n_bytes;
    size_t n_chars; /* may exceed WPM_MAX_CHARS: then only counted */
} wpm_word;

size_t tk_wpm_scratch(size_t len) {
    (void)len;
    return tk_align(sizeof(wpm_word));
}

static void word_reset(wpm_word *w) {
    w->bytes[0] = 0xE2;
    w->bytes[1] = 0x96;
    w->bytes[2] = 0x81;
    w->n_bytes = 3;
    w->n_chars = 0;
    w->ends[0] = 3;
}

static void word_add(wpm_word *w, uint32_t cp) {
    if (w->n_chars < WPM_MAX_CHARS) {
        w->n_bytes += wisp_utf8_encode(cp, w->bytes + w->n_bytes);
        w->ends[w->n_chars + 1] = (uint16_t)w->n_bytes;
    }
    w->n_chars++;
}

/* Greedy longest-match-first over the word's characters. */
static void word_flush(const wisp_tokenizer *tok, wpm_word *w, tk_out *out) {
    if (w->n_chars == 0) return;
    size_t n = w->n_chars;
    size_t mark = out->n;
    bool bad = n > WPM_MAX_CHARS;
    for (size_t start = 0; !bad && start < n;) {
        size_t from = start == 0 ? 0 : w->ends[start]; /* the first piece includes "▁" */
        int32_t id = -1;
        size_t end = n;
        for (; end > start; end--) {
            size_t bytes = w->ends[end] - from;
            if (bytes > (size_t)tok->max_token_len) continue;
            id = tk_lookup(tok, w->bytes + from, bytes);
            if (id >= 0) break;
        }
        if (id < 0) {
            bad = true;
            break;
        }
        tk_emit(out, id);
        start = end;
    }
    if (bad) {
        out->n = mark; /* forget the pieces of this word */
        if (tok->unk >= 0) tk_emit(out, tok->unk);
    }
    word_reset(w);
}

static bool is_chinese(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) ||
           (c >= 0x2B920 && c <= 0x2CEAF) || /* sic: Hugging Face's range */
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static bool is_bert_punct(uint32_t c) {
    if ((c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E))
        return true;
    return wisp_uc_class_of(c) == WISP_UC_P;
}

static bool is_dropped(uint32_t c) {
    if (c == 0 || c == WISP_UC_REPLACEMENT) return true;
    if (c == '\t' || c == '\n' || c == '\r') return false;
    wisp_uc_class k = wisp_uc_class_of(c);
    return k == WISP_UC_CC || k == WISP_UC_CF || k == WISP_UC_CN;
}

static void single_char_word(const wisp_tokenizer *tok, wpm_word *w, uint32_t cp, tk_out *out) {
    word_flush(tok, w, out);
    word_add(w, cp);
    word_flush(tok, w, out);
}

void tk_wpm_encode(const wisp_tokenizer *tok, const uint8_t *text, size_t len, tk_out *out, void *scratch) {
    wpm_word *w = (wpm_word *)scratch;
    word_reset(w);
    for (size_t i = 0; i < len;) {
        size_t l;
        uint32_t cp = wisp_utf8_decode(text + i, len - i, &l);
        i += l;
        if (is_dropped(cp)) continue;
        if (wisp_uc_is_space(cp)) {
            word_flush(tok, w, out);
            continue;
        }
        if (is_chinese(cp)) { /* isolated before normalisation, as Hugging Face does */
            uint32_t parts[3];
            size_t n = wisp_uc_strip_accents(cp, parts);
            word_flush(tok, w, out);
            for (size_t k = 0; k < n; k++) word_add(w, wisp_uc_tolower(parts[k]));
            word_flush(tok, w, out);
            continue;
        }
        uint32_t parts[3];
        size_t n = wisp_uc_strip_accents(cp, parts);
        for (size_t k = 0; k < n; k++) {
            uint32_t c = wisp_uc_tolower(parts[k]);
            if (is_bert_punct(c)) single_char_word(tok, w, c, out);
            else if (wisp_uc_is_space(c)) word_flush(tok, w, out);
            else word_add(w, c);
        }
    }
    word_flush(tok, w, out);
}
