/* The most memory this process has held, for reports (bench, finetune). */
#ifndef WISP_CLI_PEAK_MEMORY_H
#define WISP_CLI_PEAK_MEMORY_H

#include <stddef.h>

/* Peak resident set size in bytes (Linux: getrusage's ru_maxrss; WASI: the
 * wasm memory's size, which only ever grows); 0 if unknown. */
size_t cli_peak_memory_bytes(void);

#endif
