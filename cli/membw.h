/* The machine's memory bandwidth, measured over arrays far larger than the
 * caches by every thread in parallel, best of several passes, 2 MiB pages.
 * Two tests: a read-only sum, the roofline of decode (which only reads
 * weights, once per token), and a STREAM-like copy (bytes read plus bytes
 * written), kept for comparison with figures quoted elsewhere. */
#ifndef WISP_CLI_MEMBW_H
#define WISP_CLI_MEMBW_H

#include <stddef.h>

/* Bytes per second with n_threads threads copying `bytes` in total (split
 * between them); 0 if memory could not be had. */
double cli_copy_bandwidth(int n_threads, size_t bytes);

/* Bytes per second with n_threads threads each summing its share of a
 * `bytes` buffer (read only); 0 if memory could not be had. */
double cli_read_bandwidth(int n_threads, size_t bytes);

#endif
