/* core/half.h: F16 and BF16 conversions against independent double-precision
 * references, exhaustively over every 16-bit pattern and over every rounding
 * boundary (each midpoint between neighbouring 16-bit values, and one float
 * ulp either side), plus subnormals, infinities, NaN and signed zeros. */
#include "check.h"
#include "half.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

/* ---- references ------------------------------------------------------------ */

/* Exact value of a half, in double. */
static double ref_f16_value(uint16_t h) {
    int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double v;
    if (exp == 0x1f) v = man ? NAN : INFINITY;
    else if (exp == 0) v = ldexp((double)man, -24);
    else v = ldexp((double)(man | 0x400), exp - 25);
    return (h & 0x8000) ? -v : v;
}

/* Round-to-nearest-even float -> half computed in double arithmetic. */
static uint16_t ref_f32_to_f16(float f) {
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (isnan(f)) return (uint16_t)(sign | 0x7e00); /* payload checked separately */
    double a = fabs((double)f);
    if (a >= 65520.0) return (uint16_t)(sign | 0x7c00);
    if (a < ldexp(1.0, -14)) {
        double r = nearbyint(ldexp(a, 24)); /* units of the smallest subnormal */
        return (uint16_t)(sign | (uint16_t)r); /* 1024 becomes the smallest normal */
    }
    int e;
    frexp(a, &e);
    int E = e - 1; /* a in [2^E, 2^(E+1)) */
    double r = nearbyint(ldexp(a, 10 - E));
    if (r == 2048.0) {
        r = 1024.0;
        E++;
    }
    return (uint16_t)(sign | ((E + 15) << 10) | ((int)r - 1024));
}

/* Value of a bf16 pattern with the exponent unbounded (0x7f80 counts as 2^128,
 * the next step after the largest finite bf16). */
static double ref_bf16_unbounded(uint16_t b) {
    uint16_t a = b & 0x7fff;
    double v = a == 0x7f80 ? ldexp(1.0, 128) : (double)wisp_bits_f32((uint32_t)a << 16);
    return (b & 0x8000) ? -v : v;
}

static uint16_t ref_f32_to_bf16(float f) {
    uint32_t u = wisp_f32_bits(f);
    if (isnan(f)) return (uint16_t)((u >> 16) | 0x40);
    if (isinf(f)) return (uint16_t)(u >> 16);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    double dl = fabs((double)f - ref_bf16_unbounded(lo));
    double dh = fabs((double)f - ref_bf16_unbounded(hi));
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1) ? hi : lo;
}

/* ---- tests ----------------------------------------------------------------- */

static int f16_errors = 0;

static void check_f32_to_f16(float f) {
    uint16_t got = wisp_f32_to_f16(f), want = ref_f32_to_f16(f);
    if (isnan(f)) {
        bool ok = (got & 0x7c00) == 0x7c00 && (got & 0x3ff) != 0 && (got & 0x200) &&
                  (got & 0x8000) == (want & 0x8000);
        if (!ok && f16_errors++ < 10) CHECK(ok, "nan %08x -> %04x", (unsigned)wisp_f32_bits(f), got);
        return;
    }
    if (got != want && f16_errors++ < 10)
        CHECK(got == want, "f32 %08x (%.9g) -> f16 %04x, want %04x", (unsigned)wisp_f32_bits(f), (double)f, got,
              want);
}

static void test_f16_to_f32_exhaustive(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = wisp_f16_to_f32((uint16_t)h);
        double want = ref_f16_value((uint16_t)h);
        bool ok;
        /* NaN: payload kept, made quiet (as F16C's vcvtph2ps and NEON's fcvt) */
        if (isnan(want))
            ok = isnan(f) && ((wisp_f32_bits(f) >> 13) & 0x1ff) == (h & 0x1ff) && (wisp_f32_bits(f) & 0x00400000u) &&
                 !!signbit(f) == !!(h & 0x8000);
        else ok = (double)f == want && !!signbit(f) == !!(h & 0x8000);
        if (!ok && bad++ < 10) CHECK(ok, "f16 %04x -> %.9g, want %.9g", (unsigned)h, (double)f, want);
        check_count++;
    }
    CHECK(bad == 0, "%d half patterns convert wrongly", bad);
}

static void test_f16_round_trip(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        uint16_t back = wisp_f32_to_f16(wisp_f16_to_f32((uint16_t)h));
        bool isnan16 = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        /* NaN payloads survive, and the result is quiet */
        bool ok = isnan16 ? back == (uint16_t)(h | 0x200) : back == h;
        if (!ok && bad++ < 10) CHECK(ok, "f16 %04x -> f32 -> %04x", (unsigned)h, back);
    }
    CHECK(bad == 0, "%d half patterns do not round-trip", bad);
}

static void test_f32_to_f16_boundaries(void) {
    f16_errors = 0;
    /* every midpoint between neighbouring halves (including the subnormal
     * range and 65504 -> inf), and the floats just either side of it */
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double lo = ref_f16_value((uint16_t)h);
        double hi = h + 1 < 0x7c00 ? ref_f16_value((uint16_t)(h + 1)) : 65536.0;
        float mid = (float)((lo + hi) / 2); /* exact: needs 12 significant bits */
        float cands[5] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY), (float)lo, (float)hi};
        for (int k = 0; k < 5; k++) {
            check_f32_to_f16(cands[k]);
            check_f32_to_f16(-cands[k]);
        }
    }
    /* a sweep over all float patterns with a prime stride */
    for (uint64_t u = 0; u < 0x100000000ull; u += 65521) check_f32_to_f16(wisp_bits_f32((uint32_t)u));
    /* named cases */
    CHECK(wisp_f32_to_f16(0.0f) == 0x0000, "+0");
    CHECK(wisp_f32_to_f16(-0.0f) == 0x8000, "-0");
    CHECK(wisp_f32_to_f16(INFINITY) == 0x7c00, "+inf");
    CHECK(wisp_f32_to_f16(-INFINITY) == 0xfc00, "-inf");
    CHECK(wisp_f32_to_f16(65504.0f) == 0x7bff, "max half");
    CHECK(wisp_f32_to_f16(65519.996f) == 0x7bff, "just below the overflow midpoint");
    CHECK(wisp_f32_to_f16(65520.0f) == 0x7c00, "overflow midpoint ties to inf (even)");
    CHECK(wisp_f32_to_f16(1e10f) == 0x7c00, "large -> inf");
    CHECK(wisp_f32_to_f16(ldexpf(1.0f, -24)) == 0x0001, "smallest subnormal");
    CHECK(wisp_f32_to_f16(ldexpf(1.0f, -25)) == 0x0000, "half the smallest subnormal ties to 0");
    CHECK(wisp_f32_to_f16(nextafterf(ldexpf(1.0f, -25), 1.0f)) == 0x0001, "just above it rounds up");
    CHECK(wisp_f32_to_f16(ldexpf(3.0f, -25)) == 0x0002, "1.5 subnormal steps tie to 2 (even)");
    CHECK(wisp_f32_to_f16(ldexpf(1023.5f, -24)) == 0x0400, "largest subnormal tie rounds up to normal");
    CHECK(wisp_f32_to_f16(1.0f + ldexpf(1.0f, -11)) == 0x3c00, "1 + half ulp ties to 1 (even)");
    CHECK(wisp_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)) == 0x3c02, "1 + 1.5 ulp ties to 1 + 2 ulp (even)");
    CHECK(wisp_f32_to_f16(1e-30f) == 0x0000, "tiny -> 0");
    CHECK(wisp_f32_to_f16(-1e-30f) == 0x8000, "tiny negative -> -0");
    CHECK(wisp_f32_to_f16(wisp_bits_f32(0x00000001u)) == 0x0000, "float subnormal -> 0");
    CHECK(f16_errors == 0, "%d float -> half conversions wrong", f16_errors);
}

static void test_bf16(void) {
    int bad = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        float f = wisp_bf16_to_f32((uint16_t)b);
        CHECK(wisp_f32_bits(f) == b << 16, "bf16 %04x -> %08x", (unsigned)b, (unsigned)wisp_f32_bits(f));
        uint16_t back = wisp_f32_to_bf16(f);
        bool isnan16 = (b & 0x7f80) == 0x7f80 && (b & 0x7f);
        bool ok = isnan16 ? back == (uint16_t)(b | 0x40) : back == b;
        if (!ok && bad++ < 10) CHECK(ok, "bf16 %04x -> f32 -> %04x", (unsigned)b, back);
    }
    CHECK(bad == 0, "%d bf16 patterns do not round-trip", bad);

    int wrong = 0;
    for (uint32_t b = 0; b < 65536; b++) {
        /* the midpoint below the next pattern and the floats either side */
        uint32_t base = b << 16;
        uint32_t pats[5] = {base | 0x8000u, base | 0x7fffu, base | 0x8001u, base | 0x0001u, base | 0xffffu};
        for (int k = 0; k < 5; k++) {
            float f = wisp_bits_f32(pats[k]);
            uint16_t got = wisp_f32_to_bf16(f), want = ref_f32_to_bf16(f);
            bool ok = isnan(f) ? ((got & 0x7f80) == 0x7f80 && (got & 0x40)) : got == want;
            if (!ok && wrong++ < 10)
                CHECK(ok, "f32 %08x -> bf16 %04x, want %04x", (unsigned)pats[k], got, want);
        }
    }
    CHECK(wrong == 0, "%d float -> bf16 conversions wrong", wrong);
    CHECK(wisp_f32_to_bf16(wisp_bits_f32(0x7f7fffffu)) == 0x7f80, "largest float rounds to inf");
    CHECK(wisp_f32_to_bf16(wisp_bits_f32(0x3f808000u)) == 0x3f80, "tie to even (down)");
    CHECK(wisp_f32_to_bf16(wisp_bits_f32(0x3f818000u)) == 0x3f82, "tie to even (up)");
    CHECK(wisp_f32_to_bf16(wisp_bits_f32(0x00008000u)) == 0x0000, "subnormal tie to even zero");
    CHECK(wisp_f32_to_bf16(wisp_bits_f32(0x7f800001u)) != 0x7f80, "signalling nan stays nan");
    CHECK(wisp_f32_to_bf16(-0.0f) == 0x8000, "-0");
}

static void test_loads(void) {
    unsigned char buf[16];
    for (int i = 0; i < 16; i++) buf[i] = (unsigned char)(0x10 + i);
    /* odd addresses: the loads must not assume alignment */
    CHECK(wisp_load_u16(buf + 1) == 0x1211, "u16 %04x", wisp_load_u16(buf + 1));
    CHECK(wisp_load_u32(buf + 3) == 0x16151413u, "u32 %08x", (unsigned)wisp_load_u32(buf + 3));
    CHECK(wisp_load_u64(buf + 5) == 0x1c1b1a1918171615ull, "u64");
    wisp_store_f32(buf + 7, 1.5f);
    CHECK(wisp_load_f32(buf + 7) == 1.5f, "f32 store/load");
    wisp_store_u16(buf + 1, 0xbeef);
    CHECK(buf[1] == 0xef && buf[2] == 0xbe, "u16 store is little-endian");
}

int main(void) {
    test_f16_to_f32_exhaustive();
    test_f16_round_trip();
    test_f32_to_f16_boundaries();
    test_bf16();
    test_loads();
    return check_report("test_half");
}
