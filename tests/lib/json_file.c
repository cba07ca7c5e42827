#include "json_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

bool json_file_load(const char *path, wisp_json *j) {
    memset(j, 0, sizeof *j);
    size_t n = 0, need = 0;
    char *text = (char *)read_file(path, &n);
    if (!text) {
        fprintf(stderr, "%s: cannot read\n", path);
        return false;
    }
    wisp_error err = {0};
    /* first pass: how many nodes the document needs */
    wisp_json_parse(j, text, n, NULL, 0, &need, &err);
    wisp_json_node *nodes = need ? malloc(need * sizeof *nodes) : NULL;
    if (!nodes || wisp_json_parse(j, text, n, nodes, need, NULL, &err)) {
        fprintf(stderr, "%s: %s\n", path, err.message[0] ? err.message : "out of memory");
        free(nodes);
        free(text);
        memset(j, 0, sizeof *j);
        return false;
    }
    return true;
}

bool json_file_load_pair(const char *path_a, wisp_json *a, const char *path_b, wisp_json *b) {
    if (!json_file_load(path_a, a)) return false;
    if (json_file_load(path_b, b)) return true;
    json_file_free(a);
    return false;
}

void json_file_free(wisp_json *j) {
    free(j->nodes);
    free((char *)j->text);
    memset(j, 0, sizeof *j);
}
