#include "compute_peak.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "session.h"
#include "thread_pool.h" /* WISP_CLI_THREADS */

#if WISP_CLI_THREADS
#include <pthread.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PEAK_X86 1
#include <immintrin.h>
#endif
#if defined(__ARM_NEON)
#define PEAK_NEON 1
#include <arm_neon.h>
#endif

/* A loop runs n rounds of independent multiply-add chains over inputs from
 * `seed` (so nothing is known at compile time), leaves a fold of its
 * accumulators in *sink (so nothing is dropped) and returns the
 * multiply-adds it did. */
typedef double (*peak_loop)(uint64_t n, const void *seed, uint32_t *sink);

/* An empty asm that claims to change v: the compiler cannot hoist a product
 * of it out of the loop, and no instruction is spent. */
#define OPAQUE(v, constraint) __asm__ __volatile__("" : "+" constraint(v))

/* Chains per loop: several times (latency x issue width) of the targeted
 * cores (AVX-512 vpdpbusd and FMA: latency 4-5, up to 2 per cycle), within
 * the register file. */
#define REP8(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)
#define REP12(M) REP8(M) M(8) M(9) M(10) M(11)
#define REP16(M) REP12(M) M(12) M(13) M(14) M(15)
/* Chains of a product of two inputs (no accumulator inside the product):
 * six, each multiplying its own pair of a0/a1 and b0/b1/b2, since identical
 * products would be computed once. */
#define REP6(M) M(0) M(1) M(2) M(3) M(4) M(5)
#define B_OF(i) (i < 2 ? b0 : i < 4 ? b1 : b2)

/* ---- scalar: what the reference kernels compile to ---- */

static double int8_scalar(uint64_t n, const void *seed, uint32_t *sink) {
    const int8_t *s = seed;
    /* unsigned: the products wrap instead of overflowing; each step's
     * multiply depends on the chain, so no product is loop-invariant */
    uint32_t acc[8], m[8];
    for (int i = 0; i < 8; i++) acc[i] = (uint32_t)s[i], m[i] = (uint32_t)s[8 + i];
    for (uint64_t r = 0; r < n; r++) {
#define STEP(i) acc[i] = acc[i] * m[i] + (uint32_t)(i);
        REP8(STEP)
#undef STEP
    }
    uint32_t f = 0;
    for (int i = 0; i < 8; i++) f ^= acc[i];
    *sink = f;
    return 8.0 * (double)n;
}

static double f32_scalar(uint64_t n, const void *seed, uint32_t *sink) {
    const float *s = seed;
    float acc[8];
    const float m = s[8], c = s[9];
    for (int i = 0; i < 8; i++) acc[i] = s[i];
    for (uint64_t r = 0; r < n; r++) {
#define STEP(i) acc[i] = acc[i] * m + c;
        REP8(STEP)
#undef STEP
    }
    float f = 0;
    for (int i = 0; i < 8; i++) f += acc[i];
    memcpy(sink, &f, sizeof f);
    return 8.0 * (double)n;
}

/* ---- x86: the instructions of simd/x86_avx512.c and x86_avx2.c, behind
 * target attributes (the caller checked the CPU has them) ---- */

#if PEAK_X86
#define TGT512 __attribute__((target("avx512f,avx512bw,avx512vnni")))
#define TGT256 __attribute__((target("avx2,fma")))

/* vpdpbusd: 64 u8 x s8 products summed into 16 int32 lanes */
TGT512 static double int8_avx512(uint64_t n, const void *seed, uint32_t *sink) {
    const __m512i a = _mm512_loadu_si512(seed), b = _mm512_loadu_si512((const char *)seed + 64);
#define INIT(i) __m512i acc##i = _mm512_set1_epi32(i);
    REP16(INIT)
#undef INIT
    for (uint64_t r = 0; r < n; r++) {
#define STEP(i) acc##i = _mm512_dpbusd_epi32(acc##i, a, b);
        REP16(STEP)
#undef STEP
    }
    __m512i f = _mm512_setzero_si512();
#define FOLD(i) f = _mm512_xor_si512(f, acc##i);
    REP16(FOLD)
#undef FOLD
    *sink = (uint32_t)_mm512_reduce_add_epi32(f);
    return 16.0 * 64.0 * (double)n;
}

TGT512 static double f32_avx512(uint64_t n, const void *seed, uint32_t *sink) {
    const float *s = seed;
    const __m512 m = _mm512_set1_ps(s[0]), c = _mm512_set1_ps(s[1]);
#define INIT(i) __m512 acc##i = _mm512_set1_ps(s[2] + (float)(i));
    REP16(INIT)
#undef INIT
    for (uint64_t r = 0; r < n; r++) {
#define STEP(i) acc##i = _mm512_fmadd_ps(acc##i, m, c);
        REP16(STEP)
#undef STEP
    }
    __m512 f = _mm512_setzero_ps();
#define FOLD(i) f = _mm512_add_ps(f, acc##i);
    REP16(FOLD)
#undef FOLD
    float v = _mm512_reduce_add_ps(f);
    memcpy(sink, &v, sizeof v);
    return 16.0 * 16.0 * (double)n;
}

/* vpmaddubsw (u8 x s8 pairs into int16) + vpmaddwd by ones (into int32) +
 * vpaddd: 32 products per accumulator step, as the AVX2 kernels' dot. The
 * six chains multiply six different pairs of inputs (identical products
 * would be computed once). */
TGT256 static double int8_avx2(uint64_t n, const void *seed, uint32_t *sink) {
    const __m256i *s = seed;
    __m256i a0 = _mm256_loadu_si256(s), a1 = _mm256_loadu_si256(s + 1);
    const __m256i b0 = _mm256_loadu_si256(s + 2), b1 = _mm256_loadu_si256(s + 3), b2 = _mm256_xor_si256(b0, b1);
    const __m256i ones = _mm256_set1_epi16(1);
#define INIT(i) __m256i acc##i = _mm256_set1_epi32(i);
    REP6(INIT)
#undef INIT
    for (uint64_t r = 0; r < n; r++) {
        OPAQUE(a0, "x");
        OPAQUE(a1, "x");
#define STEP(i)                                                                                                        \
    acc##i = _mm256_add_epi32(acc##i, _mm256_madd_epi16(_mm256_maddubs_epi16(i % 2 ? a1 : a0, B_OF(i)), ones));
        REP6(STEP)
#undef STEP
    }
    __m256i f = _mm256_setzero_si256();
#define FOLD(i) f = _mm256_xor_si256(f, acc##i);
    REP6(FOLD)
#undef FOLD
    *sink = (uint32_t)_mm256_extract_epi32(f, 0) ^ (uint32_t)_mm256_extract_epi32(f, 7);
    return 6.0 * 32.0 * (double)n;
}

TGT256 static double f32_avx2(uint64_t n, const void *seed, uint32_t *sink) {
    const float *s = seed;
    const __m256 m = _mm256_set1_ps(s[0]), c = _mm256_set1_ps(s[1]);
#define INIT(i) __m256 acc##i = _mm256_set1_ps(s[2] + (float)(i));
    REP12(INIT)
#undef INIT
    for (uint64_t r = 0; r < n; r++) {
#define STEP(i) acc##i = _mm256_fmadd_ps(acc##i, m, c);
        REP12(STEP)
#undef STEP
    }
    __m256 f = _mm256_setzero_ps();
#define FOLD(i) f = _mm256_add_ps(f, acc##i);
    REP12(FOLD)
#undef FOLD
    float v[8];
    _mm256_storeu_ps(v, f);
    memcpy(sink, &v[0], sizeof v[0]);
    return 12.0 * 8.0 * (double)n;
}
#endif

/* ---- NEON (aarch64 and armv7): simd/vec128_neon.h's dot without dotprod
 * and its F32 multiply-add ---- */

#if PEAK_NEON
/* smull + smlal (16 s8 products into int16) + sadalp (pairs into int32) */
static double int8_neon(uint64_t n, const void *seed, uint32_t *sink) {
    const int8_t *s = seed;
    int8x16_t a0 = vld1q_s8(s), a1 = vld1q_s8(s + 16);
    const int8x16_t b0 = vld1q_s8(s + 32), b1 = vld1q_s8(s + 48), b2 = veorq_s8(b0, b1);
#define INIT(i) int32x4_t acc##i = vdupq_n_s32(i);
    REP6(INIT)
#undef INIT
    for (uint64_t r = 0; r < n; r++) {
        OPAQUE(a0, "w");
        OPAQUE(a1, "w");
#define STEP(i)                                                                                                        \
    acc##i = vpadalq_s16(acc##i, vmlal_s8(vmull_s8(vget_low_s8(i % 2 ? a1 : a0), vget_low_s8(B_OF(i))),               \
                                          vget_high_s8(i % 2 ? a1 : a0), vget_high_s8(B_OF(i))));
        REP6(STEP)
#undef STEP
    }
    int32x4_t f = vdupq_n_s32(0);
#define FOLD(i) f = veorq_s32(f, acc##i);
    REP6(FOLD)
#undef FOLD
    *sink = (uint32_t)vgetq_lane_s32(f, 0) ^ (uint32_t)vgetq_lane_s32(f, 3);
    return 6.0 * 16.0 * (double)n;
}

static double f32_neon(uint64_t n, const void *seed, uint32_t *sink) {
    const float *s = seed;
    const float32x4_t m = vdupq_n_f32(s[0]), c = vdupq_n_f32(s[1]);
#define INIT(i) float32x4_t acc##i = vdupq_n_f32(s[2] + (float)(i));
    REP8(INIT)
#undef INIT
    for (uint64_t r = 0; r < n; r++) {
#if defined(__aarch64__) || defined(__ARM_FEATURE_FMA)
#define STEP(i) acc##i = vfmaq_f32(c, acc##i, m);
#else
#define STEP(i) acc##i = vmlaq_f32(c, acc##i, m);
#endif
        REP8(STEP)
#undef STEP
    }
    float32x4_t f = vdupq_n_f32(0.0f);
#define FOLD(i) f = vaddq_f32(f, acc##i);
    REP8(FOLD)
#undef FOLD
    float v = vgetq_lane_f32(f, 0);
    memcpy(sink, &v, sizeof v);
    return 8.0 * 4.0 * (double)n;
}
#endif

/* ---- timing ---- */

static double thread_cpu_seconds(void) {
#if defined(CLOCK_THREAD_CPUTIME_ID)
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
#else
    return cli_cpu_seconds(); /* one thread (WASI) */
#endif
}

typedef struct peak_job {
    peak_loop fn;
    bool floats; /* the loop reads floats from the seed, else bytes */
    double seconds;
    double rate; /* multiply-adds per CPU second, the best chunk's */
    uint32_t sink;
} peak_job;

/* Inputs the compiler cannot see: small bytes (vpmaddubsw's int16 sums
 * never saturate) or, for the float loops, floats whose chains settle near
 * c / (1 - m) = 10, never overflowing or turning subnormal. */
static void fill_seed(unsigned char seed[128], bool floats) {
    for (int i = 0; i < 128; i++) seed[i] = (unsigned char)(1 + i % 7);
    if (!floats) return;
    float f[12];
    for (int i = 0; i < 12; i++) f[i] = 1.0f + (float)i;
    /* the SIMD loops read m, c, start; the scalar one starts[8], m, c */
    f[0] = f[8] = 0.999f, f[1] = f[9] = 0.01f;
    memcpy(seed, f, sizeof f);
}

static void *run_job(void *raw) {
    peak_job *j = raw;
    _Alignas(64) unsigned char seed[128];
    fill_seed(seed, j->floats);
    /* chunks of about a tenth of the time (at least 1 ms), to take the best
     * of several: a chunk that shared its core with another process's
     * hyperthread or a frequency dip is not the peak */
    const double chunk = j->seconds / 10 > 1e-3 ? j->seconds / 10 : 1e-3;
    uint64_t n = 256;
    double spent = 0, best = 0;
    while (spent < j->seconds || best == 0) {
        double t0 = thread_cpu_seconds();
        double ops = j->fn(n, seed, &j->sink);
        double dt = thread_cpu_seconds() - t0;
        spent += dt;
        if (dt < chunk / 2) { /* too short to time well: longer chunks (this one still counts) */
            n *= 2;
            if (dt <= 0) continue;
        }
        if (ops / dt > best) best = ops / dt;
    }
    j->rate = best;
    return NULL;
}

/* Sum of the per-thread rates with every thread running at once. */
static double measure(peak_loop fn, bool floats, int n_threads, double seconds) {
    if (!fn) return 0.0;
    peak_job job[64];
    job[0] = (peak_job){fn, floats, seconds, 0.0, 0};
#if WISP_CLI_THREADS
    int started = 1;
    pthread_t tid[64];
    for (int i = 1; i < n_threads; i++) {
        job[started] = job[0];
        if (pthread_create(&tid[started], NULL, run_job, &job[started]) == 0) started++;
    }
#else
    (void)n_threads;
#endif
    run_job(&job[0]);
    double sum = job[0].rate;
#if WISP_CLI_THREADS
    for (int i = 1; i < started; i++) {
        pthread_join(tid[i], NULL);
        sum += job[i].rate;
    }
#endif
    return 2.0 * sum; /* two operations per multiply-add */
}

cli_compute_peak cli_compute_peak_measure(const char *kernels, int n_threads, double seconds) {
    peak_loop i8 = NULL, f32 = NULL;
    if (strcmp(kernels, "scalar") == 0) i8 = int8_scalar, f32 = f32_scalar;
#if PEAK_X86
    if (strcmp(kernels, "avx512") == 0) i8 = int8_avx512, f32 = f32_avx512;
    if (strcmp(kernels, "avx2") == 0) i8 = int8_avx2, f32 = f32_avx2;
#endif
#if PEAK_NEON
    if (strcmp(kernels, "neon") == 0) i8 = int8_neon, f32 = f32_neon;
#if defined(__aarch64__)
    if (strcmp(kernels, "neon-dotprod") == 0) i8 = cli_peak_int8_sdot, f32 = f32_neon;
#endif
#endif
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 64) n_threads = 64;
    if (!WISP_CLI_THREADS) n_threads = 1;
    cli_compute_peak p = {measure(i8, false, n_threads, seconds), measure(f32, true, n_threads, seconds), n_threads};
    return p;
}
