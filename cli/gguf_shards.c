/* Opening a model by path, whole or split. llama.cpp's gguf-split names its
 * shards NAME-00001-of-00003.gguf ... NAME-00003-of-00003.gguf; a path with
 * that ending, whichever shard it names, opens all of them (each mapped, not
 * copied) and links them into one model (core/gguf_shards.c checks the set).
 * Any other path opens one file, which core refuses if it is a shard. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "session.h"

#define SHARD_SUFFIX_LEN 20 /* "-00001-of-00003.gguf" */

/* Whether path ends in -NNNNN-of-MMMMM.gguf; the prefix is path[0..*prefix_len). */
static bool shard_name(const char *path, size_t *prefix_len, unsigned *no, unsigned *count) {
    size_t n = strlen(path);
    if (n <= SHARD_SUFFIX_LEN) return false;
    const char *s = path + n - SHARD_SUFFIX_LEN;
    for (int i = 0; i < SHARD_SUFFIX_LEN; i++) {
        bool digit = (i >= 1 && i <= 5) || (i >= 10 && i <= 14);
        if (digit ? !(s[i] >= '0' && s[i] <= '9') : s[i] != "-#####-of-#####.gguf"[i]) return false;
    }
    *no = (unsigned)strtoul(s + 1, NULL, 10);
    *count = (unsigned)strtoul(s + 10, NULL, 10);
    *prefix_len = n - SHARD_SUFFIX_LEN;
    return *no >= 1 && *no <= *count;
}

static bool open_one(cli_file *f, wisp_gguf *g, const char *path) {
    if (!cli_file_open(f, path)) return false;
    wisp_error err = {0};
    if (wisp_gguf_open(g, f->data, f->size, &err)) {
        cli_report(path, &err);
        cli_file_close(f);
        return false;
    }
    return true;
}

/* The shard names, one allocation: names[k] is shard k + 1's path. */
static char **shard_paths(const char *path, size_t prefix_len, unsigned count) {
    size_t one = prefix_len + SHARD_SUFFIX_LEN + 1;
    char **names = malloc(count * (sizeof *names + one));
    if (!names) return NULL;
    char *text = (char *)(names + count);
    for (unsigned k = 0; k < count; k++) {
        names[k] = text + k * one;
        snprintf(names[k], one, "%.*s-%05u-of-%05u.gguf", (int)prefix_len, path, k + 1, count);
    }
    return names;
}

static bool open_shards(cli_file *f, wisp_gguf *g, const char *path, size_t prefix_len, unsigned count) {
    if (count < 2 || count > 65535) {
        fprintf(stderr, "wisp: %s: a split model has 2..65535 shards, the name says %u\n", path, count);
        return false;
    }
    char **names = shard_paths(path, prefix_len, count);
    wisp_gguf *views = calloc(count, sizeof *views);
    cli_file *more = calloc(count - 1, sizeof *more);
    if (!names || !views || !more) {
        fprintf(stderr, "wisp: out of memory\n");
        free(names), free(views), free(more);
        return false;
    }
    /* every shard must exist before any is mapped: a missing one is named */
    for (unsigned k = 0; k < count; k++) {
        struct stat st;
        if (stat(names[k], &st) != 0) {
            fprintf(stderr, "wisp: %s: shard %u of %u of the split model is missing (%s)\n", names[k], k + 1, count,
                    strerror(errno));
            free(names), free(views), free(more);
            return false;
        }
    }
    bool ok = open_one(f, &views[0], names[0]);
    for (unsigned k = 0; ok && k + 1 < count; k++) ok = open_one(&more[k], &views[k + 1], names[k + 1]);
    if (ok) {
        f->more_shards = more;
        f->n_more_shards = count - 1;
        f->shard_views = views;
        f->path = path;
        for (unsigned k = 0; k + 1 < count; k++) more[k].path = NULL; /* their names are freed below */
        uint32_t bad = 0;
        wisp_error err = {0};
        if (wisp_gguf_link_shards(views, count, &bad, &err)) {
            cli_report(names[bad < count ? bad : 0], &err);
            cli_file_close(f);
            free(names);
            return false;
        }
        *g = views[0];
        free(names);
        return true;
    }
    /* close what did open (a file that failed is closed already) */
    for (unsigned k = 0; k + 1 < count; k++)
        if (more[k].data) cli_file_close(&more[k]);
    if (f->data) cli_file_close(f);
    free(names), free(views), free(more);
    return false;
}

bool cli_open_gguf(cli_file *f, wisp_gguf *g, const char *path) {
    memset(f, 0, sizeof *f);
    if (!path) {
        fprintf(stderr, "wisp: no model given (use -m PATH/TO/MODEL.gguf)\n");
        return false;
    }
    size_t prefix_len;
    unsigned no, count;
    if (shard_name(path, &prefix_len, &no, &count) && count > 1) return open_shards(f, g, path, prefix_len, count);
    return open_one(f, g, path);
}
