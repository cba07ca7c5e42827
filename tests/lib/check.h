/* A tiny test harness. Every check that fails prints where and why, and the
 * test's exit status is the verdict: 0 pass, 1 fail, 77 skip (a skip always
 * says why; only a platform skip passes the runners, see check_skip_platform). */
#ifndef WISP_CHECK_H
#define WISP_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdint.h>

extern int check_failures;
extern int check_count;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        check_count++;                                                          \
        if (!(cond)) {                                                          \
            check_failures++;                                                   \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
        }                                                                       \
    } while (0)

/* Fail and leave the current test function. */
#define REQUIRE(cond, ...)                                                      \
    do {                                                                        \
        check_count++;                                                          \
        if (!(cond)) {                                                          \
            check_failures++;                                                   \
            fprintf(stderr, "%s:%d: REQUIRE(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
            return;                                                             \
        }                                                                       \
    } while (0)

/* Print the summary; exit status 1 if anything failed, 1 also if nothing was
 * checked at all (a test that asserts nothing is a failure). */
int check_report(const char *test_name);

/* Print "SKIP <test>: <reason>" and exit 77: the test cannot run because
 * something it needs is missing (a ../shared file, a tool). The runners FAIL
 * such a test with the reason (tests/run_each.sh): a skip must not hide a
 * missing prerequisite. */
void check_skip(const char *test_name, const char *reason);

/* Print "SKIP <test> (platform): <reason>" and exit 77: what the test checks
 * does not exist on this platform (no AVX-512 on this CPU, an ASan build that
 * replaces the allocator). The runners count and list it as a skip. */
void check_skip_platform(const char *test_name, const char *reason);

/* Path of a file under the shared reference folder (WISP_SHARED, default
 * ../shared next to the repository), or NULL if it does not exist.
 * The returned string lives until the next call with the same slot. */
const char *shared_path(const char *relative);

/* Like shared_path, but skips the whole test loudly when the file is absent. */
const char *shared_path_or_skip(const char *test_name, const char *relative);

/* Read a whole file into malloc'd memory (tests may allocate). NULL on error. */
unsigned char *read_file(const char *path, size_t *size);

/* Relative RMS error: sqrt(sum (a-b)^2 / sum b^2). */
double rel_rms(const float *a, const float *b, size_t n);
/* The same against a float64 reference. */
double rel_rms_ref(const float *a, const double *ref, size_t n);

/* Largest |v[i]| (0 for n == 0): the scale a gradient check measures its
 * finite-difference error against. */
double max_abs(const float *v, size_t n);

#endif
