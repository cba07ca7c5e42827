/* Background memory traffic for `make bench-loaded` (issue 21, point 6): a
 * user's machine copying memory while wisp decodes. Copies a buffer of
 * BYTES (default 512 MiB) into another, over and over, until killed.
 *
 * usage: copy_loop [BYTES] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    size_t bytes = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : (size_t)512 << 20;
    unsigned char *src = malloc(bytes), *dst = malloc(bytes);
    if (!bytes || !src || !dst) {
        fprintf(stderr, "copy_loop: cannot have 2 x %zu bytes\n", bytes);
        return 1;
    }
    memset(src, 1, bytes);
    for (unsigned i = 0;; i++) {
        memcpy(dst, src, bytes);
        src[i % bytes] = dst[(i * 7919u) % bytes]; /* each pass depends on the last: not optimized away */
    }
}
