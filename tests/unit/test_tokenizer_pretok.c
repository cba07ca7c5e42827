/* The hand-written pre-tokenizer matchers against the real regular
 * expressions: test_tokenizer_pretok_data.h holds the splits Python's regex
 * module makes with llama.cpp's regexes (tools/gen_pretok_vectors.py), for
 * every pre-tokenizer family, including those whose vocabularies are not
 * available here (llama-bpe, qwen2, chameleon, bloom, viking). Also checks
 * the Unicode tables against a few known facts. Needs no shared files. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pretokenize.h"
#include "unicode.h"

#include "test_tokenizer_pretok_data.h"

#define N_TEXTS (sizeof pretok_texts / sizeof pretok_texts[0])

static size_t parse_lens(const char *s, size_t *lens, size_t max) {
    size_t n = 0;
    while (*s && n < max) {
        lens[n++] = strtoul(s, (char **)&s, 10);
        if (*s == ',') s++;
    }
    return n;
}

static void check_family(const pretok_expect *e) {
    wisp_str name = {e->pre, strlen(e->pre)};
    int pre = wisp_pretok_from_name(name, NULL);
    REQUIRE(pre >= 0, "pre-tokenizer %s is unknown", e->pre);
    int bad = 0;
    for (size_t c = 0; c < N_TEXTS; c++) {
        size_t len = pretok_text_lens[c];
        uint32_t *cps = malloc((len ? len : 1) * sizeof *cps);
        size_t n = len ? wisp_pretokenize(pre, (const uint8_t *)pretok_texts[c], len, cps) : 0;
        size_t want[512], got[512];
        size_t n_want = parse_lens(e->splits[c], want, 512), n_got = 0;
        size_t cp = 0, byte = 0, start, bytes;
        while (n_got < 512 && wisp_pretok_next(cps, n, &cp, &byte, &start, &bytes)) got[n_got++] = bytes;
        bool same = n_got == n_want && memcmp(got, want, n_got * sizeof got[0]) == 0;
        CHECK(same, "%s: case %zu splits differently", e->pre, c);
        if (!same && bad++ < 3) {
            fprintf(stderr, "  text: \"%.*s\"\n  want:", (int)len, pretok_texts[c]);
            for (size_t i = 0; i < n_want; i++) fprintf(stderr, " %zu", want[i]);
            fprintf(stderr, "\n  got: ");
            for (size_t i = 0; i < n_got; i++) fprintf(stderr, " %zu", got[i]);
            fprintf(stderr, "\n");
        }
        free(cps);
    }
    printf("%-16s %zu texts %s\n", e->pre, N_TEXTS, bad ? "FAIL" : "ok");
}

static void unicode_facts(void) {
    CHECK(wisp_uc_class_of('a') == WISP_UC_L && wisp_uc_class_of(0x4E2D) == WISP_UC_L, "letters");
    CHECK(wisp_uc_class_of('7') == WISP_UC_N && wisp_uc_class_of(0x0663) == WISP_UC_N && wisp_uc_class_of(0x216B) == WISP_UC_N,
          "numbers");
    CHECK(wisp_uc_class_of(',') == WISP_UC_P && wisp_uc_class_of(0x3002) == WISP_UC_P, "punctuation");
    CHECK(wisp_uc_class_of('$') == WISP_UC_S && wisp_uc_class_of(0x1F600) == WISP_UC_S, "symbols");
    CHECK(wisp_uc_class_of(0x0301) == WISP_UC_MN && wisp_uc_class_of(0x0378) == WISP_UC_CN, "marks, unassigned");
    CHECK(wisp_uc_class_of(0x110000) == WISP_UC_CN, "past the end");
    CHECK(wisp_uc_is_space(0x3000) && wisp_uc_is_space('\v') && !wisp_uc_is_space(0x200B) && !wisp_uc_is_space(0x1C),
          "whitespace");
    CHECK(wisp_uc_tolower('Q') == 'q' && wisp_uc_tolower(0x0130) == 'i' && wisp_uc_tolower(0x0410) == 0x0430 &&
              wisp_uc_tolower(0x0101) == 0x0101 && wisp_uc_tolower(0x0100) == 0x0101 && wisp_uc_tolower(0x10400) == 0x10428,
          "lowercase");
    uint32_t out[3];
    CHECK(wisp_uc_strip_accents(0x00E9, out) == 1 && out[0] == 'e', "é -> e");
    CHECK(wisp_uc_strip_accents(0x1EC7, out) == 1 && out[0] == 'e', "ệ -> e");
    CHECK(wisp_uc_strip_accents(0x0301, out) == 0, "a lone combining mark disappears");
    CHECK(wisp_uc_strip_accents(0xAC01, out) == 3 && out[0] == 0x1100 && out[1] == 0x1161 && out[2] == 0x11A8, "Hangul");
    CHECK(wisp_uc_strip_accents(0xF900, out) == 1 && out[0] == 0x8C48, "CJK compatibility ideograph");
    CHECK(wisp_uc_strip_accents('A', out) == 1 && out[0] == 'A', "identity");
    for (int b = 0; b < 256; b++) CHECK(wisp_unicode_to_byte(wisp_byte_to_unicode((uint8_t)b)) == b, "byte map %d", b);
    CHECK(wisp_byte_to_unicode(' ') == 0x120 && wisp_byte_to_unicode('\n') == 0x10A && wisp_byte_to_unicode('A') == 'A',
          "GPT-2 byte characters");
    size_t l;
    const uint8_t overlong[] = {0xC0, 0xAF}, surrogate[] = {0xED, 0xA0, 0x80}, big[] = {0xF4, 0x90, 0x80, 0x80};
    const uint8_t euro[] = {0xE2, 0x82, 0xAC}, cut[] = {0xE2, 0x82};
    CHECK(wisp_utf8_decode(overlong, 2, &l) == 0xFFFD && l == 1, "overlong");
    CHECK(wisp_utf8_decode(surrogate, 3, &l) == 0xFFFD && l == 1, "surrogate");
    CHECK(wisp_utf8_decode(big, 4, &l) == 0xFFFD && l == 1, "past U+10FFFF");
    CHECK(wisp_utf8_decode(euro, 3, &l) == 0x20AC && l == 3, "euro");
    CHECK(wisp_utf8_decode(cut, 2, &l) == 0xFFFD && l == 1, "truncated");
}

int main(void) {
    unicode_facts();
    for (size_t i = 0; i < sizeof pretok_expects / sizeof pretok_expects[0]; i++) check_family(&pretok_expects[i]);
    /* every name llama.cpp knows for these families resolves */
    static const char *const names[] = {"llama3", "llama-v3", "falcon3", "dbrx", "smaug-bpe", "chatglm-bpe", "mpt", "phi-2",
                                        "roberta-bpe", "olmo", "jais", "refact", "command-r", "smollm", "codeshell",
                                        "exaone", "minerva-7b", "deepseek-r1-qwen", "stablelm2", "megrez", "poro-chat",
                                        "gpt3-finnish", "default"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        wisp_str s = {names[i], strlen(names[i])};
        CHECK(wisp_pretok_from_name(s, NULL) >= 0, "%s", names[i]);
    }
    wisp_str unknown = {"tekken", 6};
    CHECK(wisp_pretok_from_name(unknown, NULL) < 0, "tekken is not supported");
    return check_report("test_tokenizer_pretok");
}
