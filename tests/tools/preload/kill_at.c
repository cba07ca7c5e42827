/* kill_at.so: LD_PRELOAD it to crash a process at an exact point of its
 * file writing, as a power cut or SIGKILL would, but deterministically.
 * WISP_KILL_AT="CALL:N" (CALL one of fwrite, fsync, rename) sends the
 * process SIGKILL just before its N-th call of CALL: before the N-th fwrite
 * a temporary is partly written, before an fsync it is written but not yet
 * durable, before a rename it is complete but not yet in place.
 * With WISP_KILL_COUNT=FILE it kills nothing and writes to FILE, at exit,
 * how many of each call the process made ("fwrite N fsync N rename N"), so
 * a test can spread its kill points over a whole run.
 * tests/cli/test_crash_safety.sh uses it; built by the Makefile as
 * $(BUILD)/tests/tools/kill_at.so (a shared object, not a tool binary). */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { FWRITE, FSYNC, RENAME, N_CALLS };
static const char *const names[N_CALLS] = {"fwrite", "fsync", "rename"};
static long calls[N_CALLS];

static void maybe_die(int call) {
    calls[call]++;
    const char *spec = getenv("WISP_KILL_AT");
    size_t n = strlen(names[call]);
    if (spec && strncmp(spec, names[call], n) == 0 && spec[n] == ':' && calls[call] == atol(spec + n + 1))
        kill(getpid(), SIGKILL);
}

__attribute__((destructor)) static void report_counts(void) {
    const char *path = getenv("WISP_KILL_COUNT");
    if (!path) return;
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "fwrite %ld fsync %ld rename %ld\n", calls[FWRITE], calls[FSYNC], calls[RENAME]);
    fclose(f);
}

static void *real(const char *name) {
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) abort();
    return f;
}

size_t fwrite(const void *p, size_t size, size_t count, FILE *f) {
    maybe_die(FWRITE);
    size_t (*next)(const void *, size_t, size_t, FILE *) = real("fwrite");
    return next(p, size, count, f);
}

int fsync(int fd) {
    maybe_die(FSYNC);
    int (*next)(int) = real("fsync");
    return next(fd);
}

int rename(const char *from, const char *to) {
    maybe_die(RENAME);
    int (*next)(const char *, const char *) = real("rename");
    return next(from, to);
}
