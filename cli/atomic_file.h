/* Output files that are never half-written: bytes go to "PATH.tmp-PID",
 * which is fsync'd and renamed over PATH only when everything succeeded.
 * A crash or error leaves any previous PATH untouched. */
#ifndef WISP_CLI_ATOMIC_FILE_H
#define WISP_CLI_ATOMIC_FILE_H

#include <stdio.h>

#include <stdbool.h>

#include "sink.h"

#define CLI_ATOMIC_BUFFER ((size_t)2 << 20)

typedef struct cli_atomic_file {
    char path[4096];
    char tmp[4200];
    FILE *f;
    char *buf;      /* f's buffer, CLI_ATOMIC_BUFFER bytes (NULL: stdio's own) */
    wisp_sink sink; /* writes into the temporary file */
} cli_atomic_file;

/* false (message printed) if the temporary cannot be created. */
bool cli_atomic_open(cli_atomic_file *a, const char *path);
/* Flush, fsync, rename; false (message printed, temporary removed) on failure. */
bool cli_atomic_commit(cli_atomic_file *a);
/* Drop the temporary; PATH is unchanged. */
void cli_atomic_abort(cli_atomic_file *a);

/* Whole buffer to PATH atomically. */
bool cli_write_file_atomic(const char *path, const void *data, size_t n);

/* Delete the temporaries "PATH.tmp-PID" that processes no longer running
 * left behind (a run killed while writing PATH); returns how many. */
int cli_atomic_remove_stale(const char *path);

#endif
