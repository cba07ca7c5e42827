#include "atomic_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static wisp_status file_write(void *user, const void *data, size_t n, wisp_error *err) {
    cli_atomic_file *a = user;
    if (fwrite(data, 1, n, a->f) != n)
        return wisp_fail(err, WISP_ERR_IO, "%s: write failed: %s", a->path, strerror(errno));
    return WISP_OK;
}

bool cli_atomic_open(cli_atomic_file *a, const char *path) {
    memset(a, 0, sizeof *a);
    if (strlen(path) >= sizeof a->path) {
        fprintf(stderr, "wisp: %s: path too long\n", path);
        return false;
    }
    strcpy(a->path, path);
    snprintf(a->tmp, sizeof a->tmp, "%s.tmp-%ld", path, (long)getpid());
    a->f = fopen(a->tmp, "wb");
    if (!a->f) {
        fprintf(stderr, "wisp: %s: cannot create: %s\n", a->tmp, strerror(errno));
        return false;
    }
    /* Whole 2 MiB writes at 2 MiB offsets: where the page cache keeps large
     * folios, a model written here is then mapped in 2 MiB pages by whoever
     * reads it next, without a trip to the disk (see file_map.c). */
    a->buf = malloc(CLI_ATOMIC_BUFFER);
    if (a->buf) setvbuf(a->f, a->buf, _IOFBF, CLI_ATOMIC_BUFFER);
    a->sink.write = file_write;
    a->sink.user = a;
    a->sink.written = 0;
    return true;
}

/* fsync the directory so the rename itself survives a power cut */
static void sync_parent_dir(const char *path) {
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    int fd = open(dirname(copy), O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

bool cli_atomic_commit(cli_atomic_file *a) {
    bool ok = a->f && fflush(a->f) == 0 && fsync(fileno(a->f)) == 0;
    if (a->f && fclose(a->f) != 0) ok = false;
    a->f = NULL;
    free(a->buf);
    a->buf = NULL;
    if (ok && rename(a->tmp, a->path) != 0) ok = false;
    if (!ok) {
        fprintf(stderr, "wisp: %s: could not write: %s\n", a->path, strerror(errno));
        unlink(a->tmp);
        return false;
    }
    sync_parent_dir(a->path);
    return true;
}

void cli_atomic_abort(cli_atomic_file *a) {
    if (a->f) fclose(a->f);
    a->f = NULL;
    free(a->buf);
    a->buf = NULL;
    if (a->tmp[0]) unlink(a->tmp);
}

bool cli_write_file_atomic(const char *path, const void *data, size_t n) {
    cli_atomic_file a;
    if (!cli_atomic_open(&a, path)) return false;
    if (fwrite(data, 1, n, a.f) != n) {
        fprintf(stderr, "wisp: %s: write failed: %s\n", path, strerror(errno));
        cli_atomic_abort(&a);
        return false;
    }
    return cli_atomic_commit(&a);
}

int cli_atomic_remove_stale(const char *path) {
    char dir_copy[4096], base_copy[4096];
    snprintf(dir_copy, sizeof dir_copy, "%s", path);
    snprintf(base_copy, sizeof base_copy, "%s", path);
    const char *dir = dirname(dir_copy), *base = basename(base_copy);
    char prefix[4200];
    int n_prefix = snprintf(prefix, sizeof prefix, "%s.tmp-", base);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, prefix, (size_t)n_prefix) != 0) continue;
        char *end;
        long pid = strtol(e->d_name + n_prefix, &end, 10);
        if (*end || pid <= 0) continue;
        /* only when its writer is gone: a live process may be writing its own */
#if defined(__wasi__)
        continue; /* WASI cannot ask about other processes (and has no real ids): keep it */
#else
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
#endif
        char full[8400];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        if (unlink(full) == 0) removed++;
    }
    closedir(d);
    return removed;
}
