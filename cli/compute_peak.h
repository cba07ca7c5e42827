/* The machine's arithmetic peak, measured with the instructions a kernel
 * level computes with: the int8 dot product its quantized matmuls use
 * (AVX-512 VNNI vpdpbusd, AVX2 vpmaddubsw + vpmaddwd, NEON SDOT with
 * dotprod else its widening multiply-accumulate, plain C for "scalar") and the F32 fused multiply-add
 * of its float matmuls. Each thread runs chains enough to hide the latency
 * and is timed by its own CPU time, so time other processes took from it
 * does not count (the machine may be shared); the threads' rates are summed.
 * Both figures count two operations per multiply-add, as FLOPs are counted. */
#ifndef WISP_CLI_COMPUTE_PEAK_H
#define WISP_CLI_COMPUTE_PEAK_H

#include <stdint.h>

typedef struct cli_compute_peak {
    double int8_ops_s;  /* 2 x int8 multiply-adds per second, all threads; 0: no loop for this level */
    double f32_flops_s; /* 2 x F32 multiply-adds per second, all threads; 0: likewise */
    int threads;        /* threads that ran (1 where the CLI has no threads) */
} cli_compute_peak;

/* Peaks for kernel level `kernels` (wisp_ctx_kernels_name: "avx512",
 * "avx2", "neon", "scalar", ...) with n_threads threads, each measuring for
 * about `seconds` of its CPU time. A level without a loop here (WASM SIMD)
 * gets 0 for the figure it lacks, never another level's figure. */
cli_compute_peak cli_compute_peak_measure(const char *kernels, int n_threads, double seconds);

#if defined(__aarch64__)
/* For compute_peak.c: the SDOT loop, in a file compiled for dotprod
 * (compute_peak_sdot.c); n rounds, multiply-adds done. */
double cli_peak_int8_sdot(uint64_t n, const void *seed, uint32_t *sink);
#endif

#endif
