/* The kernel-check library (tests/lib/kernel_checks.h) can fail: a table
 * built from the reference with one kernel broken in a way a real level
 * could be (a dot one part in 10^4 off, an axpy whose last element is an ulp
 * off, a matmul whose results depend on where the rows are split, an f16
 * conversion wrong on one half, a quantizer rounding one tie the other
 * way) must fail exactly that family, and the untouched reference must pass
 * with every cell "ref" (nothing of its own to check). */
#include "check.h"
#include "kernel_checks.h"
#include "quant.h"

#include <math.h>
#include <string.h>

static const wisp_kernels *ref;

static float dot_off(const float *a, const float *b, int64_t n) { return ref->dot_f32(a, b, n) * (1.0f + 1e-4f); }

static void axpy_last_ulp(float *y, float a, const float *x, int64_t n) {
    ref->axpy_f32(y, a, x, n);
    y[n - 1] = nextafterf(y[n - 1], INFINITY);
}

/* right over a whole range, one row wrong when a call starts past row 0 */
static void matmul_split_dependent(const wisp_matmul_args *a, int64_t r0, int64_t r1) {
    wisp_matmul_reference(a, r0, r1);
    if (r0 > 0) a->y[r0] += 1.0f;
}

static void f16_one_wrong(const uint16_t *x, float *y, int64_t n) {
    ref->f16_to_f32(x, y, n);
    for (int64_t i = 0; i < n; i++)
        if (x[i] == 0x3555) y[i] = nextafterf(y[i], 0.0f);
}

static void q8_0_tie_other_way(const float *x, void *y, int64_t n) {
    ref->quantize_row[WISP_TYPE_Q8_0](x, y, n);
    uint8_t *b = y;
    b[2] = (uint8_t)(b[2] + 1); /* the first block's first level */
}

static uint8_t scratch[KC_SCRATCH_BYTES];
static void quiet(const char *line) { (void)line; }

/* run the checks on `k` (avx2's bounds); the failures per family */
static void run(const wisp_kernels *k, kc_run *out) {
    memset(out, 0, sizeof *out);
    out->k = k;
    out->say = quiet;
    out->scratch = scratch;
    kc_bounds_of("avx2", &out->bounds);
    kc_check_all(out);
}

int main(void) {
    ref = wisp_kernels_reference();
    wisp_kernels whole = *ref; /* completed, as levels are used */
    wisp_kernels_complete(&whole);
    kc_run r;

    run(&whole, &r);
    CHECK(r.failures == 0 && r.checks == 0, "the reference against itself: %ld checks, %ld failures", r.checks, r.failures);

    static const struct {
        int family;
        const char *what;
    } cases[] = {
        {KC_DOTS, "dot_f32 1e-4 off"},       {KC_AXPY, "axpy_f32 an ulp off"},   {KC_MATMUL_Q, "a split-dependent Q8_0 matmul"},
        {KC_CONVERT, "f16_to_f32 wrong on one half"}, {KC_QUANTIZE, "a Q8_0 quantizer off by one level"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        wisp_kernels k = whole;
        switch (cases[c].family) {
        case KC_DOTS: k.dot_f32 = dot_off; break;
        case KC_AXPY: k.axpy_f32 = axpy_last_ulp; break;
        case KC_MATMUL_Q: k.matmul[WISP_TYPE_Q8_0] = matmul_split_dependent; break;
        case KC_CONVERT: k.f16_to_f32 = f16_one_wrong; break;
        case KC_QUANTIZE: k.quantize_row[WISP_TYPE_Q8_0] = q8_0_tie_other_way; break;
        }
        k.name = "broken";
        run(&k, &r);
        CHECK(r.cell[cases[c].family].failures > 0, "%s was not caught", cases[c].what);
        CHECK(r.failures == r.cell[cases[c].family].failures, "%s: failures outside its family (%ld of %ld)", cases[c].what,
              r.failures - r.cell[cases[c].family].failures, r.failures);
        printf("%s: caught, %ld of %ld checks failed\n", cases[c].what, r.failures, r.checks);
    }
    return check_report("test_kernel_checks");
}
