#include "json_out.h"

#include <math.h>

void cli_json_string(FILE *out, const char *s, size_t n) {
    fputc('"', out);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') fputs("\\\"", out);
        else if (c == '\\') fputs("\\\\", out);
        else if (c == '\n') fputs("\\n", out);
        else if (c == '\r') fputs("\\r", out);
        else if (c == '\t') fputs("\\t", out);
        else if (c < 0x20) fprintf(out, "\\u%04x", c);
        else fputc(c, out);
    }
    fputc('"', out);
}

void cli_json_float(FILE *out, float v) {
    if (!isfinite(v)) fputs("null", out);
    else fprintf(out, "%.9g", (double)v);
}

void cli_json_floats(FILE *out, const float *v, size_t n) {
    fputc('[', out);
    for (size_t i = 0; i < n; i++) {
        if (i) fputs(", ", out);
        cli_json_float(out, v[i]);
    }
    fputc(']', out);
}

void cli_json_ints(FILE *out, const int32_t *v, size_t n) {
    fputc('[', out);
    for (size_t i = 0; i < n; i++) fprintf(out, "%s%d", i ? ", " : "", v[i]);
    fputc(']', out);
}
