#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cli_parse_size(const char *s, size_t *out) {
    if (!s || !*s || *s == '-') return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return false;
    unsigned shift = 0;
    if (*end == 'k' || *end == 'K') shift = 10, end++;
    else if (*end == 'm' || *end == 'M') shift = 20, end++;
    else if (*end == 'g' || *end == 'G') shift = 30, end++;
    if (*end == 'i' || *end == 'B') end++; /* accept "64MiB", "64MB" */
    if (*end == 'B') end++;
    if (*end) return false;
    if (shift && v > (SIZE_MAX >> shift)) return false;
    *out = (size_t)(v << shift);
    return true;
}

static const cli_opt *find_long(const cli_command *cmd, const char *name, size_t len) {
    for (int i = 0; i < cmd->n_opts; i++)
        if (strlen(cmd->opts[i].name) == len && strncmp(cmd->opts[i].name, name, len) == 0) return &cmd->opts[i];
    return NULL;
}

static const cli_opt *find_short(const cli_command *cmd, char c) {
    for (int i = 0; i < cmd->n_opts; i++)
        if (cmd->opts[i].short_name == c) return &cmd->opts[i];
    return NULL;
}

static int usage_error(const cli_command *cmd, const char *fmt, const char *arg) {
    fprintf(stderr, "wisp %s: ", cmd->name);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nusage: wisp %s %s\n(see: wisp %s --help)\n", cmd->name, cmd->usage, cmd->name);
    return 2;
}

static int set_value(const cli_command *cmd, const cli_opt *o, const char *v) {
    char *end;
    errno = 0;
    switch (o->kind) {
    case OPT_INT: {
        long x = strtol(v, &end, 10);
        if (errno || *end || end == v || x < INT32_MIN || x > INT32_MAX)
            return usage_error(cmd, "--%s expects an integer", o->name);
        *(int32_t *)o->dest = (int32_t)x;
        return 0;
    }
    case OPT_U64: {
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || *end || end == v || *v == '-') return usage_error(cmd, "--%s expects a non-negative integer", o->name);
        *(uint64_t *)o->dest = x;
        return 0;
    }
    case OPT_FLOAT: {
        float x = strtof(v, &end);
        if (errno || *end || end == v || !isfinite(x)) return usage_error(cmd, "--%s expects a number", o->name);
        *(float *)o->dest = x;
        return 0;
    }
    case OPT_STR: *(const char **)o->dest = v; return 0;
    case OPT_SIZE:
        if (!cli_parse_size(v, (size_t *)o->dest))
            return usage_error(cmd, "--%s expects a size in bytes (suffix K, M or G allowed)", o->name);
        return 0;
    case OPT_STR_LIST: {
        cli_str_list *l = o->dest;
        if (l->n >= CLI_LIST_MAX) return usage_error(cmd, "--%s given too many times", o->name);
        l->items[l->n++] = v;
        return 0;
    }
    case OPT_FLAG: return 0;
    }
    return 0;
}

int cli_parse(const cli_command *cmd, int argc, char **argv, const char **positional, int *n_positional) {
    *n_positional = 0;
    bool only_positional = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!only_positional && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
            cli_print_help(cmd);
            return 1;
        }
        if (!only_positional && strcmp(a, "--") == 0) { only_positional = true; continue; }
        const cli_opt *o = NULL;
        const char *inline_value = NULL;
        if (!only_positional && a[0] == '-' && a[1] == '-') {
            const char *name = a + 2, *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            o = find_long(cmd, name, len);
            if (!o) return usage_error(cmd, "unknown option '%s'", a);
            if (eq) inline_value = eq + 1;
        } else if (!only_positional && a[0] == '-' && a[1] && a[2] == 0 && !(a[1] >= '0' && a[1] <= '9')) {
            o = find_short(cmd, a[1]);
            if (!o) return usage_error(cmd, "unknown option '%s'", a);
        }
        if (!o) {
            if (*n_positional >= cmd->max_positional) return usage_error(cmd, "unexpected argument '%s'", a);
            positional[(*n_positional)++] = a;
            continue;
        }
        if (o->kind == OPT_FLAG) {
            if (inline_value) return usage_error(cmd, "--%s takes no value", o->name);
            *(bool *)o->dest = true;
            continue;
        }
        const char *v = inline_value;
        if (!v) {
            if (i + 1 >= argc) return usage_error(cmd, "--%s needs a value", o->name);
            v = argv[++i];
        }
        int rc = set_value(cmd, o, v);
        if (rc) return rc;
    }
    if (*n_positional < cmd->min_positional)
        return usage_error(cmd, "missing %s", cmd->positional_names ? cmd->positional_names : "arguments");
    return 0;
}

static void print_default(const cli_opt *o) {
    switch (o->kind) {
    case OPT_INT: printf(" (default %d)", *(int32_t *)o->dest); break;
    case OPT_U64: printf(" (default %llu)", (unsigned long long)*(uint64_t *)o->dest); break;
    case OPT_FLOAT: printf(" (default %g)", (double)*(float *)o->dest); break;
    case OPT_STR: if (*(const char **)o->dest) printf(" (default %s)", *(const char **)o->dest); break;
    case OPT_SIZE: if (*(size_t *)o->dest) printf(" (default %zu)", *(size_t *)o->dest); break;
    default: break;
    }
}

void cli_print_help(const cli_command *cmd) {
    printf("usage: wisp %s %s\n\n%s\n", cmd->name, cmd->usage, cmd->summary);
    if (cmd->n_opts) printf("\noptions:\n");
    for (int i = 0; i < cmd->n_opts; i++) {
        const cli_opt *o = &cmd->opts[i];
        char left[64];
        if (o->short_name)
            snprintf(left, sizeof left, "-%c, --%s%s%s", o->short_name, o->name, o->metavar ? " " : "",
                     o->metavar ? o->metavar : "");
        else
            snprintf(left, sizeof left, "    --%s%s%s", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
        printf("  %-28s %s", left, o->help);
        print_default(o);
        printf("\n");
    }
    printf("  %-28s %s\n", "-h, --help", "show this help");
    if (cmd->details) printf("\n%s\n", cmd->details);
}
