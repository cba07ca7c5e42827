/* Command-line options described once, as a table: the same table parses
 * argv and prints --help, so the help can never drift from the parser. */
#ifndef WISP_CLI_ARGS_H
#define WISP_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum cli_opt_kind {
    OPT_FLAG,     /* bool, no value */
    OPT_INT,      /* int32_t */
    OPT_U64,      /* uint64_t */
    OPT_FLOAT,    /* float */
    OPT_STR,      /* const char * */
    OPT_SIZE,     /* size_t, with optional K/M/G suffix (powers of 1024) */
    OPT_STR_LIST  /* cli_str_list, repeatable */
} cli_opt_kind;

#define CLI_LIST_MAX 16
typedef struct cli_str_list {
    const char *items[CLI_LIST_MAX];
    int n;
} cli_str_list;

typedef struct cli_opt {
    const char *name;   /* long name without dashes, e.g. "top-k" */
    char short_name;    /* 0 if none */
    cli_opt_kind kind;
    void *dest;
    const char *metavar;/* "N", "PATH", ... */
    const char *help;   /* one line; defaults are printed from *dest */
} cli_opt;

typedef struct cli_command {
    const char *name;     /* "run" */
    const char *usage;    /* "-m MODEL -p PROMPT [options]" */
    const char *summary;  /* one line */
    const char *details;  /* paragraph(s) after the options, or NULL */
    const cli_opt *opts;
    int n_opts;
    int min_positional, max_positional;
    const char *positional_names; /* for help, e.g. "TEXT" */
} cli_command;

/* Parse argv (argv[0] is the command name). Fills option destinations and
 * positional[]. Returns 0 on success, 1 after printing help (--help), 2 on a
 * usage error (message printed to stderr). */
int cli_parse(const cli_command *cmd, int argc, char **argv, const char **positional, int *n_positional);

void cli_print_help(const cli_command *cmd);

/* "64M" -> 67108864. false on junk. */
bool cli_parse_size(const char *s, size_t *out);

#endif
