/* The size of the last-level cache, so that a bandwidth test can use a buffer
 * far larger than it (otherwise it measures the cache, not memory) and
 * `wisp bench` can say when a model's weights fit in it. */
#ifndef WISP_CLI_CACHE_SIZE_H
#define WISP_CLI_CACHE_SIZE_H

#include <stddef.h>

/* Bytes of the largest-level data or unified cache of CPU 0: Linux's sysfs,
 * else CPUID on x86; 0 when neither says. */
size_t cli_llc_bytes(void);

#endif
