/* Small helpers for JSON printed straight to a FILE. */
#ifndef WISP_CLI_JSON_OUT_H
#define WISP_CLI_JSON_OUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

void cli_json_string(FILE *out, const char *s, size_t n);
/* Shortest form that reads back as the same float32 ("%.9g"); non-finite as null. */
void cli_json_float(FILE *out, float v);
void cli_json_floats(FILE *out, const float *v, size_t n);
void cli_json_ints(FILE *out, const int32_t *v, size_t n);

#endif
