#include "check.h"

#include <math.h>
#include <string.h>
#include <sys/stat.h>

int check_failures = 0;
int check_count = 0;

int check_report(const char *test_name) {
    if (check_count == 0) {
        fprintf(stderr, "FAIL %s: no checks ran\n", test_name);
        return 1;
    }
    if (check_failures) {
        fprintf(stderr, "FAIL %s: %d of %d checks failed\n", test_name, check_failures, check_count);
        return 1;
    }
    printf("PASS %s: %d checks\n", test_name, check_count);
    return 0;
}

void check_skip(const char *test_name, const char *reason) {
    printf("SKIP %s: %s\n", test_name, reason);
    fflush(stdout);
    exit(77);
}

void check_skip_platform(const char *test_name, const char *reason) {
    printf("SKIP %s (platform): %s\n", test_name, reason);
    fflush(stdout);
    exit(77);
}

const char *shared_path(const char *relative) {
    static char slots[8][1024];
    static int next = 0;
    const char *root = getenv("WISP_SHARED");
    if (!root || !*root) root = WISP_DEFAULT_SHARED;
    char *buf = slots[next];
    next = (next + 1) % 8;
    snprintf(buf, sizeof slots[0], "%s/%s", root, relative);
    struct stat st;
    if (stat(buf, &st) != 0) return NULL;
    return buf;
}

const char *shared_path_or_skip(const char *test_name, const char *relative) {
    const char *p = shared_path(relative);
    if (!p) {
        char reason[1200];
        const char *root = getenv("WISP_SHARED");
        snprintf(reason, sizeof reason, "missing %s/%s (set WISP_SHARED to the shared reference folder)",
                 root && *root ? root : WISP_DEFAULT_SHARED, relative);
        check_skip(test_name, reason);
    }
    return p;
}

unsigned char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return NULL; }
    long n = ftell(f);
    if (n < 0) { fclose(f); return NULL; }
    rewind(f);
    unsigned char *buf = malloc((size_t)n + 1);
    if (!buf) { fclose(f); return NULL; }
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); fclose(f); return NULL; }
    buf[n] = 0;
    fclose(f);
    if (size) *size = (size_t)n;
    return buf;
}

double rel_rms(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

double rel_rms_ref(const float *a, const double *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

double max_abs(const float *v, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(v[i]) > m) m = fabs(v[i]);
    return m;
}
