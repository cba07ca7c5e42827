#!/usr/bin/env python3
"""Generate tests/unit/test_tokenizer_pretok_data.h: expected pre-tokenizer
splits, computed with the `regex` module from the regular expressions that
llama.cpp uses for each tokenizer.ggml.pre, composed the way llama.cpp
composes them (each regex cuts every piece the previous ones produced; the
unmatched stretches between matches stay pieces; a piece's ends are the ends
of the subject). This checks the hand-written matchers of core/pretokenize.c,
including pre-tokenizers whose vocabularies are too large to ship (llama-bpe,
qwen2, chameleon, ...).

Usage: python3 tools/gen_pretok_vectors.py > tests/unit/test_tokenizer_pretok_data.h

Two details of llama.cpp are reproduced: non-ASCII whitespace is replaced by
U+000B before matching (so it never matches a literal range, only \\s), and
ECMAScript's `$` matches only at the very end (Python's `\\Z`).
"""
import sys

import regex

GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
LLAMA3 = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
         r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# deepseek-llm's letter class: the cased letters listed in its regex
DS_LETTERS = [
    (0x0041, 0x005A), (0x0061, 0x007A), (0x00B5, 0x00B5), (0x00C0, 0x00D6), (0x00D8, 0x00F6), (0x00F8, 0x01BA),
    (0x01BC, 0x01BF), (0x01C4, 0x0293), (0x0295, 0x02AF), (0x0370, 0x0373), (0x0376, 0x0377), (0x037B, 0x037D),
    (0x037F, 0x037F), (0x0386, 0x0386), (0x0388, 0x038A), (0x038C, 0x038C), (0x038E, 0x03A1), (0x03A3, 0x03F5),
    (0x03F7, 0x0481), (0x048A, 0x052F), (0x0531, 0x0556), (0x10A0, 0x10C5), (0x13A0, 0x13F5), (0x13F8, 0x13FD),
    (0x1C90, 0x1CBA), (0x1CBD, 0x1CBF), (0x1D00, 0x1D2B), (0x1D6B, 0x1D77), (0x1D79, 0x1D9A), (0x1E00, 0x1F15),
    (0x1F18, 0x1F1D), (0x1F20, 0x1F45), (0x1F48, 0x1F4D), (0x1F50, 0x1F57), (0x1F59, 0x1F59), (0x1F5B, 0x1F5B),
    (0x1F5D, 0x1F5D), (0x1F5F, 0x1F7D), (0x1F80, 0x1FB4), (0x1FB6, 0x1FBC), (0x1FBE, 0x1FBE), (0x1FC2, 0x1FC4),
    (0x1FC6, 0x1FCC), (0x1FD0, 0x1FD3), (0x1FD6, 0x1FDB), (0x1FE0, 0x1FEC), (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC),
    (0x2102, 0x2102), (0x2107, 0x2107), (0x210A, 0x2113), (0x2115, 0x2115), (0x2119, 0x211D), (0x2124, 0x2124),
    (0x2126, 0x2126), (0x2128, 0x2128), (0x212A, 0x212D), (0x212F, 0x2134), (0x2139, 0x2139), (0x213C, 0x213F),
    (0x2145, 0x2149), (0x214E, 0x214E), (0x2183, 0x2184), (0x2C00, 0x2C7B), (0x2C7E, 0x2CE4), (0x2CEB, 0x2CEE),
    (0x2CF2, 0x2CF3), (0xA640, 0xA66D), (0xA680, 0xA69B), (0xA722, 0xA76F), (0xA771, 0xA787), (0xA78B, 0xA78E),
    (0xAB70, 0xABBF), (0xFB00, 0xFB06), (0xFB13, 0xFB17), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A), (0x10400, 0x1044F),
    (0x104B0, 0x104D3), (0x104D8, 0x104FB), (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2), (0x118A0, 0x118DF),
    (0x1E900, 0x1E943),
]


def esc(cp):
    return "\\U%08x" % cp


DS_LETTER_CLASS = "[" + "".join(esc(a) + "-" + esc(b) for a, b in DS_LETTERS) + "]"
DS_PUNCT_CLASS = "[!-/:-~" + esc(0xFF01) + "-" + esc(0xFF0F) + esc(0xFF1A) + "-" + esc(0xFF5E) + \
    esc(0x2018) + "-" + esc(0x201F) + esc(0x3000) + "-" + esc(0x3002) + "]"
CJK_CLASS = "[" + esc(0x4E00) + "-" + esc(0x9FA5) + esc(0x0800) + "-" + esc(0x4E00) + esc(0xAC00) + "-" + \
    esc(0xD7FF) + "]"
BLOOM = r" ?[^(\s|.,!?" + "\u2026\u3002\uff0c\u3001\u0964\u06d4\u060c" + r")]+"

PRE = {
    "default": [r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
    "gpt-2": [GPT2],
    "llama-bpe": [LLAMA3],
    "qwen2": [QWEN2],
    "deepseek-llm": ["[\r\n]", r"\s?" + DS_LETTER_CLASS + "+", r"\s?" + DS_PUNCT_CLASS + "+", r"\s+\Z",
                     CJK_CLASS + "+", r"\p{N}+"],
    "deepseek-coder": ["[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", CJK_CLASS + "+", r"\p{N}"],
    "falcon": [r"[\p{P}\$\+<=>\^~\|`]+", GPT2, r"[0-9][0-9][0-9]"],
    "starcoder": [r"\p{N}", GPT2],
    "bloom": [BLOOM],
    "viking": [BLOOM, r"\p{N}"],
    "chameleon": [r"<sentinel:[0-9]+>", r"(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", r"([\t\n]|    |  )", r"\p{N}",
                  r"[\p{P}!-/:-@\[-`{-~]", GPT2],
}

WHITESPACE = {0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000} | set(range(0x2000, 0x200B))

# Test strings written for this project (shared/ texts stay out of the repository).
CASES = [
    "", " ", "  ", "\t", "\n", "\n\n\n", "\t\n", "Hi there", " Hi There!", "Hi, you!",
    "Hello   world\n\n  \n foo  ",
    "    Indented\n    code();\n",
    " (", "\n =", "' quoted", "'''''' ``` \"\"\" ...... !!!!!! ??????",
    "3 33 333 3333 33333 333333 3333333 33333333",
    "3.3 3..3 3...3 1e10 -7 +8",
    "R\u00f6tgen Fu\u00dfg\u00e4nger \u00dcn\u00efc\u00f6d\u00e9 \u00c6r\u00f8sk\u00f8bing",
    "\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440, \u043a\u0430\u043a \u0434\u0435\u043b\u0430?",
    "\u1780\u17d2\u179a\u17bb\u1784 \u1797\u17d2\u1793\u17c6",
    "\U0001f680 (rocket) \U0001f636\u200d\U0001f32b\ufe0f (zwj) \u2705 (check)",
    "what's up, y'all? Yes I'm here \U0001f601 ?\u6211\u60f3\u5728test\u5de5\u4f5c42\u5929\uff5e",
    "Vi\u1ec7t Nam C\u1eeda",
    " ------======= \u0434\u0430 ''''' \"\"\" I've 'told he's 'RE 'M 'D We'Ve a'lL",
    "Hello   world\n\n  \n foo  ",
    "\t\tx", "x\t", "a  \n", "a \n b", " \n\n", "\r\n\r\n", "  \r\n  x",
    "'S 'Ll 'RE 've 'd 'M 'T 'x ''s",
    "1234567 12 1 0.5 1,234,567.89",
    "Ⅻ ½ ٣٤٥ ᛮ ①②",
    "<sentinel:123> <sentinel:> IMGIMGABCDZ IMGIMGABCDEZ IMGIMGZ",
    "    \t\n  ", "      x", "   \t  y",
    "¿Qué? ¡Sí! «guillemets» — dash – en",
    "foo(bar|baz)...!? a|b (c) …",
    "日本語。テスト、です！ 中文，标点",
    "한국어 텍스트",
    "Ελληνικά Ω ℧ K µ ß ǅ ʔ ʕ",
    "！＂＃ ＡＢＣ ａｂｃ ０１２",
    "‘quoted’ “double” ‹single›",
    "  trailing spaces   ",
    "line\r\nline\rline\n",
    "\u3000ideographic\u3000space\u3000",
    "nbsp\u00a0here\u2003em\u2009thin",
    "emoji 🤖👍🏽 text🙂",
    "$100 + 5% = <tag> ^caret~ `tick` |pipe|",
    "a\u0301e\u0300 combining",
    "x" * 40 + " " + "9" * 20,
]


def split(text, regexes):
    subject = "".join("\x0b" if ord(c) in WHITESPACE else c for c in text)
    pieces = [(0, len(text))]
    for rx in regexes:
        compiled = regex.compile(rx)
        out = []
        for s, e in pieces:
            sub = subject[s:e]
            pos = 0
            for m in compiled.finditer(sub):
                assert m.end() > m.start()
                if m.start() > pos:
                    out.append((s + pos, s + m.start()))
                out.append((s + m.start(), s + m.end()))
                pos = m.end()
            if pos < len(sub):
                out.append((s + pos, e))
        pieces = out
    return [len(text[s:e].encode("utf-8")) for s, e in pieces]


def c_string(b):
    out = []
    for x in b:
        if x == 0x5C:
            out.append("\\\\")
        elif x == 0x22:
            out.append('\\"')
        elif 0x20 <= x < 0x7F and x != 0x3F:  # '?' escaped: no trigraphs
            out.append(chr(x))
        else:
            out.append("\\%03o" % x)
    return '"' + "".join(out) + '"'


def main():
    cases = CASES
    out = ["/* Generated by tools/gen_pretok_vectors.py with the regex module %s. Do not edit. */" % regex.__version__,
           "static const char *const pretok_texts[] = {"]
    for c in cases:
        out.append("    " + c_string(c.encode("utf-8")) + ",")
    out.append("};")
    out.append("static const size_t pretok_text_lens[] = {" +
               ", ".join(str(len(c.encode("utf-8"))) for c in cases) + "};")
    out.append("typedef struct pretok_expect { const char *pre; const char *const *splits; } pretok_expect;")
    for name, rxs in PRE.items():
        ident = name.replace("-", "_")
        out.append("static const char *const splits_%s[] = {" % ident)
        for c in cases:
            out.append('    "%s",' % ",".join(str(n) for n in split(c, rxs)))
        out.append("};")
    out.append("static const pretok_expect pretok_expects[] = {")
    for name in PRE:
        out.append('    {"%s", splits_%s},' % (name, name.replace("-", "_")))
    out.append("};")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
