/* Large buffers in 2 MiB pages where the kernel offers them.
 *
 * Decode streams the KV cache every token, and the bandwidth test streams
 * its arrays; with 4 KiB pages the page walks cost a fifth of the copy
 * bandwidth on a VM measured here (nested paging makes each walk dear),
 * and SmolLM2 decode at 1088 tokens of context ran 13% slower. */
#ifndef WISP_CLI_HUGE_ALLOC_H
#define WISP_CLI_HUGE_ALLOC_H

#include <stddef.h>

/* `bytes` (at least 1) aligned to 64, and to 2 MiB with the huge-page hint
 * when it is that large; NULL when out of memory. Release with free(). */
void *cli_huge_alloc(size_t bytes);

#endif
