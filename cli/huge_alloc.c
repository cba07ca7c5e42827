#include "huge_alloc.h"

#include <stdlib.h>
#if !defined(__wasi__)
#include <sys/mman.h>
#endif

#define HUGE_PAGE ((size_t)2 << 20)

void *cli_huge_alloc(size_t bytes) {
    if (bytes == 0) bytes = 1;
    void *p = NULL;
    if (posix_memalign(&p, bytes >= HUGE_PAGE ? HUGE_PAGE : 64, bytes) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    if (bytes >= HUGE_PAGE) madvise(p, bytes, MADV_HUGEPAGE); /* a hint: refused, nothing changes */
#endif
    return p;
}
