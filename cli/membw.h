/* The machine's memory bandwidth, measured the way STREAM's "copy" kernel
 * does: arrays far larger than the caches, copied by every thread in
 * parallel, best of several passes, counting bytes read plus bytes written.
 * It is the roofline of decode, which streams every weight once per token. */
#ifndef WISP_CLI_MEMBW_H
#define WISP_CLI_MEMBW_H

#include <stddef.h>

/* Bytes per second with n_threads threads copying `bytes` in total (split
 * between them); 0 if memory could not be had. */
double cli_copy_bandwidth(int n_threads, size_t bytes);

#endif
