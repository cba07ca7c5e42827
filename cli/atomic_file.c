#include "atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdbool.h>
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
