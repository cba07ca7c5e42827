#include "file_map.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if CLI_HAVE_MMAP
#include <sys/mman.h>
#endif
#include <sys/stat.h>
#include <unistd.h>

bool cli_file_open(cli_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->path = path;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        fprintf(stderr, "wisp: %s: %s\n", path, strerror(errno));
        return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fprintf(stderr, "wisp: %s: not a regular file\n", path);
        close(fd);
        return false;
    }
    f->size = (size_t)st.st_size;
    if (f->size == 0) {
        /* an empty file parses as "too short" downstream; give it a valid pointer */
        f->data = (const unsigned char *)"";
        close(fd);
        return true;
    }
#if CLI_HAVE_MMAP
    void *p = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
        f->data = p;
        f->mapped = true;
        close(fd);
        return true;
    }
#endif
    unsigned char *buf = malloc(f->size);
    size_t got = 0;
    while (buf && got < f->size) {
        ssize_t n = read(fd, buf + got, f->size - got);
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd);
    if (!buf || got != f->size) {
        fprintf(stderr, "wisp: %s: could not read the file\n", path);
        free(buf);
        return false;
    }
    f->data = buf;
    return true;
}

void cli_file_close(cli_file *f) {
#if CLI_HAVE_MMAP
    if (f->mapped) munmap((void *)f->data, f->size);
#endif
    if (!f->mapped && f->size) free((void *)f->data);
    memset(f, 0, sizeof *f);
}
