#!/usr/bin/env python3
"""Generate core/unicode_tables.c: compact Unicode range tables for the tokenizers.

Usage: python3 tools/gen_unicode.py > core/unicode_tables.c

Everything comes from Python's own `unicodedata` module, so the tables follow the
Unicode version of the Python that runs this script (printed into the output).
The tables are ranges, not per-code-point arrays, because they end up in the
flash of microcontrollers:

  wisp_uc_class_runs   general-category class of every code point, as runs
                       (first << 4 | class); the classes are the WISP_UC_* enum
                       of core/unicode.h
  wisp_uc_latin1       the same class for U+0000..U+00FF, one byte each
                       (a fast path for the common case)
  wisp_uc_lower_runs   simple lowercase mapping, as runs of code points that map
                       with one delta (stride 1, or 2 for alternating case pairs)
  wisp_uc_strip_runs   "NFD, then drop nonspacing marks (Mn)" for code points whose
                       result is a single code point: runs that all map to one
                       target (mode 0) or to target + offset (mode 1)
  wisp_uc_strip_multi  the few code points whose result is not one code point
                       (0, 2 or 3 code points); Hangul syllables are decomposed
                       arithmetically in core/unicode.c and are not listed
"""
import sys
import unicodedata as ud

MAX_CP = 0x110000

# Class numbers; must match enum wisp_uc_class in core/unicode.h.
CN, CC, CF, L, MN, MO, N, P, S, Z = range(10)
CLASS_NAMES = ["CN", "CC", "CF", "L", "MN", "MO", "N", "P", "S", "Z"]


def uclass(cp):
    cat = ud.category(chr(cp))
    if cat == "Cn":
        return CN
    if cat == "Cc":
        return CC
    if cat in ("Cf", "Cs", "Co"):
        return CF
    if cat == "Mn":
        return MN
    return {"L": L, "M": MO, "N": N, "P": P, "S": S, "Z": Z}[cat[0]]


def class_runs():
    runs = []
    prev = None
    for cp in range(MAX_CP):
        c = uclass(cp)
        if c != prev:
            runs.append((cp, c))
            prev = c
    return runs


def lower_runs():
    """Runs (first, count, stride, delta) covering every code point whose simple
    lowercase differs from itself. Spans never overlap, so a lookup finds the
    last run starting at or before a code point and checks only that run."""
    pairs = {}
    for cp in range(MAX_CP):
        lo = chr(cp).lower()
        # Python applies the full mapping; the simple one is its first code
        # point (only U+0130 -> "i\u0307" differs: simple mapping "i")
        if ord(lo[0]) != cp:
            pairs[cp] = ord(lo[0]) - cp
    cps = sorted(pairs)
    runs = []
    i = 0
    while i < len(cps):
        first = cps[i]
        delta = pairs[first]
        best_n, best_stride = 1, 1
        for stride in (1, 2):
            n = 1
            while (first + n * stride in pairs and pairs[first + n * stride] == delta
                   and n < 128
                   and all(first + n * stride - k not in pairs for k in range(1, stride))):
                n += 1
            if n > best_n:
                best_n, best_stride = n, stride
        runs.append((first, best_n, best_stride, delta))
        # consume exactly the code points of this run
        covered = {first + k * best_stride for k in range(best_n)}
        while i < len(cps) and cps[i] in covered:
            i += 1
    # check coverage and non-overlap
    spans = [(f, f + (n - 1) * s) for f, n, s, _ in runs]
    for a, b in zip(spans, spans[1:]):
        assert a[1] < b[0], (a, b)
    return runs


def is_hangul_syllable(cp):
    return 0xAC00 <= cp < 0xAC00 + 11172


def strip_tables():
    single = {}
    multi = []
    for cp in range(MAX_CP):
        if is_hangul_syllable(cp):
            continue
        s = chr(cp)
        nfd = ud.normalize("NFD", s)
        kept = [ord(x) for x in nfd if ud.category(x) != "Mn"]
        if ud.category(s) == "Mn":
            continue  # dropped anyway: code checks Mn first
        if kept == [cp]:
            continue
        if len(kept) == 1:
            single[cp] = kept[0]
        else:
            assert len(kept) <= 3, hex(cp)
            multi.append((cp, kept))
    cps = sorted(single)
    runs = []
    i = 0
    while i < len(cps):
        first = cps[i]
        target = single[first]
        n_const = 1
        while n_const < 8 and first + n_const in single and single[first + n_const] == target:
            n_const += 1
        n_delta = 1
        while n_delta < 8 and first + n_delta in single and single[first + n_delta] == target + n_delta:
            n_delta += 1
        if n_const >= n_delta:
            runs.append((first, n_const, 0, target))
            i += n_const
        else:
            runs.append((first, n_delta, 1, target))
            i += n_delta
    return runs, multi


def whitespace_check():
    """The code's whitespace set (White_Space minus nothing) must agree with
    Python's isspace() except for U+001C..U+001F, which Python also counts."""
    code_ws = set(range(0x09, 0x0E)) | {0x20, 0x85, 0xA0, 0x1680} | set(range(0x2000, 0x200B)) \
        | {0x2028, 0x2029, 0x202F, 0x205F, 0x3000}
    py_ws = {cp for cp in range(MAX_CP) if chr(cp).isspace()} - set(range(0x1C, 0x20))
    assert code_ws == py_ws, sorted(code_ws ^ py_ws)


def emit_u32_array(out, decl, values, per_line=6):
    out.append(decl + " = {")
    for i in range(0, len(values), per_line):
        out.append("    " + ", ".join(values[i:i + per_line]) + ",")
    out.append("};")


def main():
    whitespace_check()
    runs = class_runs()
    lows = lower_runs()
    strips, multi = strip_tables()

    out = []
    out.append("/* Generated by tools/gen_unicode.py from Python %s unicodedata (Unicode %s)."
               % (sys.version.split()[0], ud.unidata_version))
    out.append(" * Do not edit: change the script and regenerate. */")
    out.append('#include "unicode.h"')
    out.append("")
    out.append("/* (first code point << 4) | class, for every run of equal class. */")
    emit_u32_array(out, "const uint32_t wisp_uc_class_runs[%d]" % len(runs),
                   ["0x%07Xu" % ((cp << 4) | c) for cp, c in runs])
    out.append("const uint32_t wisp_uc_class_runs_count = %d;" % len(runs))
    out.append("")
    out.append("/* Class of U+0000..U+00FF. */")
    out.append("const uint8_t wisp_uc_latin1[256] = {")
    for i in range(0, 256, 16):
        out.append("    " + ", ".join("%d" % uclass(cp) for cp in range(i, i + 16)) + ",")
    out.append("};")
    out.append("")
    out.append("/* Simple lowercase: first | (count - 1) << 21 | (stride - 1) << 28, then delta. */")
    out.append("const wisp_uc_lower_run wisp_uc_lower_runs[%d] = {" % len(lows))
    for f, n, s, d in lows:
        out.append("    {0x%08Xu, %d}," % (f | (n - 1) << 21 | (s - 1) << 28, d))
    out.append("};")
    out.append("const uint32_t wisp_uc_lower_runs_count = %d;" % len(lows))
    out.append("")
    out.append("/* NFD without nonspacing marks, single result: first | (count - 1) << 21 | mode << 24,")
    out.append(" * then the target (mode 0: every code point maps to it; mode 1: target + offset). */")
    out.append("const wisp_uc_strip_run wisp_uc_strip_runs[%d] = {" % len(strips))
    for f, n, m, t in strips:
        out.append("    {0x%08Xu, 0x%05Xu}," % (f | (n - 1) << 21 | m << 24, t))
    out.append("};")
    out.append("const uint32_t wisp_uc_strip_runs_count = %d;" % len(strips))
    out.append("")
    out.append("/* NFD without nonspacing marks giving 0, 2 or 3 code points: {cp | count << 24, {a, b, c}}. */")
    out.append("const wisp_uc_strip_multi wisp_uc_strip_multis[%d] = {" % len(multi))
    for cp, kept in multi:
        k = kept + [0] * (3 - len(kept))
        out.append("    {0x%08Xu, {0x%05Xu, 0x%05Xu, 0x%05Xu}}," % (cp | len(kept) << 24, k[0], k[1], k[2]))
    out.append("};")
    out.append("const uint32_t wisp_uc_strip_multis_count = %d;" % len(multi))
    sys.stdout.write("\n".join(out) + "\n")
    sys.stderr.write("class runs %d (%d bytes), lower runs %d (%d bytes), strip runs %d (%d bytes), "
                     "strip multi %d (%d bytes)\n" % (len(runs), 4 * len(runs), len(lows), 8 * len(lows),
                                                       len(strips), 8 * len(strips), len(multi), 16 * len(multi)))


if __name__ == "__main__":
    main()
