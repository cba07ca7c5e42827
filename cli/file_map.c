#include "file_map.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#if CLI_HAVE_MMAP
#include <sys/mman.h>
#endif
#include <sys/stat.h>
#include <unistd.h>

bool cli_file_open(cli_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->path = path;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        fprintf(stderr, "wisp: %s: %s\n", path, strerror(errno));
        return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fprintf(stderr, "wisp: %s: not a regular file\n", path);
        close(fd);
        return false;
    }
    f->size = (size_t)st.st_size;
    if (f->size == 0) {
        /* an empty file parses as "too short" downstream; give it a valid pointer */
        f->data = (const unsigned char *)"";
        close(fd);
        return true;
    }
#if CLI_HAVE_MMAP
    void *p = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
#ifdef MADV_HUGEPAGE
        /* Where the page cache can hold large folios (ext4 from Linux 6.16,
         * xfs), a file read cold through this mapping lands in 2 MiB
         * pages, mapped with one TLB entry each: decode streams every weight
         * once per token, and with 4 KiB pages the page walks cap the
         * bandwidth (SmolLM2 Q4_0 decode measured 17% faster on a VM here).
         * Only a hint: where it is refused nothing changes. */
        madvise(p, f->size, MADV_HUGEPAGE);
#endif
        f->data = p;
        f->mapped = true;
        close(fd);
        return true;
    }
#endif
    unsigned char *buf = malloc(f->size);
    size_t got = 0;
    while (buf && got < f->size) {
        ssize_t n = read(fd, buf + got, f->size - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd);
    if (!buf || got != f->size) {
        fprintf(stderr, "wisp: %s: could not read the file\n", path);
        free(buf);
        return false;
    }
    f->data = buf;
    return true;
}

void cli_file_close(cli_file *f) {
    for (size_t i = 0; i < f->n_more_shards; i++) cli_file_close(&f->more_shards[i]);
    free(f->more_shards);
    free(f->shard_views);
    free(f->released);
#if CLI_HAVE_MMAP
    if (f->mapped) munmap((void *)f->data, f->size);
#endif
    if (!f->mapped && f->size) free((void *)f->data);
    memset(f, 0, sizeof *f);
}

#define HUGE_PAGE ((size_t)2 << 20)
#define RELEASE_GAP ((size_t)64 << 10) /* a norm vector or two between released weights */

/* Drop the whole 2 MiB pages inside [lo, hi) (file offsets). Whole ones
 * only: the mappings around them keep their 2 MiB pages, which in-place
 * weights next to them need for speed. */
static void drop_huge_pages(const cli_file *f, size_t lo, size_t hi) {
#if CLI_HAVE_MMAP
    const uintptr_t base = (uintptr_t)f->data;
    const uintptr_t first = (base + lo + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    const uintptr_t end = (base + hi) & ~(uintptr_t)(HUGE_PAGE - 1);
    if (end <= first) return;
    /* In 4 KiB pages from now on: reading a norm vector in there would
     * otherwise map its whole 2 MiB page back in. */
#ifdef MADV_NOHUGEPAGE
    madvise((void *)first, end - first, MADV_NOHUGEPAGE);
#endif
    madvise((void *)first, end - first, MADV_DONTNEED);
#else
    (void)f, (void)lo, (void)hi;
#endif
}

void cli_file_release(cli_file *f, const void *p, size_t n) {
    const uintptr_t at = (uintptr_t)p, base = (uintptr_t)f->data;
    if (at < base || at - base > f->size || n > f->size - (at - base)) {
        for (size_t i = 0; i < f->n_more_shards; i++) cli_file_release(&f->more_shards[i], p, n);
        return;
    }
    if (!f->mapped) return;
    if (f->n_released == f->cap_released) {
        size_t cap = f->cap_released ? 2 * f->cap_released : 64;
        cli_byte_range *r = realloc(f->released, cap * sizeof *r);
        if (!r) return;
        f->released = r;
        f->cap_released = cap;
    }
    /* insert in file order, then merge the new range with its neighbours */
    cli_byte_range add = {at - base, at - base + n};
    size_t i = f->n_released;
    while (i > 0 && f->released[i - 1].lo > add.lo) {
        f->released[i] = f->released[i - 1];
        i--;
    }
    f->released[i] = add;
    f->n_released++;
    size_t lo = i, hi = i; /* the run of ranges [lo, hi] that now form one */
    while (lo > 0 && f->released[lo - 1].hi + RELEASE_GAP >= f->released[lo].lo) lo--;
    while (hi + 1 < f->n_released && f->released[hi].hi + RELEASE_GAP >= f->released[hi + 1].lo) hi++;
    cli_byte_range merged = f->released[lo];
    for (size_t k = lo + 1; k <= hi; k++)
        if (f->released[k].hi > merged.hi) merged.hi = f->released[k].hi;
    f->released[lo] = merged;
    memmove(&f->released[lo + 1], &f->released[hi + 1], (f->n_released - hi - 1) * sizeof *f->released);
    f->n_released -= hi - lo;
    drop_huge_pages(f, merged.lo, merged.hi);
}

static long long huge_bytes_one(const cli_file *f) {
    if (!f->mapped) return -1;
    FILE *smaps = fopen("/proc/self/smaps", "r");
    if (!smaps) return -1;
    /* the mapping may have been split (cli_file_release): every piece counts */
    const uintptr_t at = (uintptr_t)f->data, end = at + f->size;
    long long huge = -1;
    bool inside = false;
    char line[512];
    while (fgets(line, sizeof line, smaps)) {
        unsigned long lo, hi;
        char dash;
        if (sscanf(line, "%lx%c%lx", &lo, &dash, &hi) == 3 && dash == '-') { /* a mapping's first line */
            inside = lo < end && hi > at;
            continue;
        }
        long long kb;
        if (inside && sscanf(line, "FilePmdMapped: %lld kB", &kb) == 1) huge = (huge < 0 ? 0 : huge) + kb * 1024;
    }
    fclose(smaps);
    return huge;
}

long long cli_file_huge_bytes(const cli_file *f) {
    long long huge = huge_bytes_one(f);
    for (size_t i = 0; huge >= 0 && i < f->n_more_shards; i++) { /* a split model: every shard's mapping */
        long long more = huge_bytes_one(&f->more_shards[i]);
        huge = more < 0 ? -1 : huge + more;
    }
    return huge;
}
