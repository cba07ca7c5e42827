/* A whole JSON file, read and parsed for a test tool, and released again
 * (the sanitizer runs count a tool's leaks as findings too). */
#ifndef WISP_TESTS_JSON_FILE_H
#define WISP_TESTS_JSON_FILE_H

#include <stdbool.h>

#include "json.h"

/* Read and parse PATH into *j (text and nodes malloc'd). On failure prints
 * "PATH: why" to stderr, leaves nothing allocated and returns false. */
bool json_file_load(const char *path, wisp_json *j);

/* Both files, for the tools that compare a reference with a candidate:
 * true with both loaded, or false with neither. */
bool json_file_load_pair(const char *path_a, wisp_json *a, const char *path_b, wisp_json *b);

/* Free what json_file_load allocated; *j is zeroed. */
void json_file_free(wisp_json *j);

#endif
