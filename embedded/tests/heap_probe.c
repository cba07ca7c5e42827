/* A firmware that allocates. It must NOT link: the firmware linker scripts
 * define no heap, so newlib's sbrk / picolibc's malloc have nothing to carve.
 * `make test-embedded` builds it and expects the link to fail. */
#include <stdlib.h>

#include "fw.h"

int main(void) {
    void *p = malloc(16);
    free(p);
    return p ? 0 : 1;
}
