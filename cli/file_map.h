/* Read-only views of whole files: mmap where possible (weights are used in
 * place, never copied), a plain read as the fallback. */
#ifndef WISP_CLI_FILE_MAP_H
#define WISP_CLI_FILE_MAP_H

#include <stdbool.h>
#include <stddef.h>

/* WASI has no mmap: there files are always read into memory. */
#if defined(__wasi__)
#define CLI_HAVE_MMAP 0
#else
#define CLI_HAVE_MMAP 1
#endif

typedef struct cli_file {
    const char *path;
    const unsigned char *data;
    size_t size;
    bool mapped; /* else data is malloc'd */
} cli_file;

/* Open and map `path`; on failure prints "wisp: PATH: reason" and returns false. */
bool cli_file_open(cli_file *f, const char *path);
void cli_file_close(cli_file *f);

/* How many bytes of f's mapping the kernel maps in 2 MiB pages (Linux's
 * /proc/self/smaps), or -1 when it cannot tell (not mapped, no /proc). */
long long cli_file_huge_bytes(const cli_file *f);

#endif
