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

typedef struct cli_byte_range {
    size_t lo, hi; /* offsets in the file */
} cli_byte_range;

typedef struct cli_file {
    const char *path;
    const unsigned char *data;
    size_t size;
    bool mapped; /* else data is malloc'd */
    cli_byte_range *released; /* cli_file_release's ranges, merged, in file order */
    size_t n_released, cap_released;
    /* a gguf-split model opened through its shard names (cli_open_gguf):
     * the other shards' files, and the linked wisp_gguf array the model's
     * view points to; both owned, closed and freed with this file */
    struct cli_file *more_shards; /* [n_more_shards]: shards 2..N */
    size_t n_more_shards;
    void *shard_views;
} cli_file;

/* Open and map `path`; on failure prints "wisp: PATH: reason" and returns false. */
bool cli_file_open(cli_file *f, const char *path);
void cli_file_close(cli_file *f); /* and its other shards */

/* The process no longer needs [p, p + n) of f's mapping: the whole 2 MiB
 * pages that the ranges released so far cover leave its memory (they stay
 * in the page cache and come back, in 4 KiB pages, if read). Ranges less
 * than 64 KiB apart count as one, so a norm vector between two released
 * weights does not keep their pages in. Nothing for a file read into
 * memory, or when there is no memory for the bookkeeping. */
void cli_file_release(cli_file *f, const void *p, size_t n); /* p may lie in any shard */

/* How many bytes of f's mapping (every shard's, for a split model) the
 * kernel maps in 2 MiB pages (Linux's /proc/self/smaps), or -1 when it
 * cannot tell (not mapped, no /proc). */
long long cli_file_huge_bytes(const cli_file *f);

#endif
