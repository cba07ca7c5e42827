/* Where a grammar comes from on the command line (--grammar, --grammar-file,
 * --json-schema, --json-mode), turned into GBNF text, and a compiled grammar with
 * its matcher in one malloc'd, planned block. Shared by `wisp grammar` and
 * the generating commands. */
#ifndef WISP_CLI_GRAMMAR_SOURCE_H
#define WISP_CLI_GRAMMAR_SOURCE_H

#include <stdbool.h>
#include <stddef.h>

#include "args.h"
#include "grammar.h"
#include "guide.h"

typedef struct cli_grammar_opts {
    const char *text;   /* --grammar GBNF */
    const char *file;   /* --grammar-file PATH */
    const char *schema; /* --json-schema PATH or inline JSON */
    bool json;          /* --json-mode (on run and chat also --json): any JSON object */
    bool bounded;       /* --json-bounded: short strings and arrays, no unlisted properties */
} cli_grammar_opts;

/* The grammar options every generating command takes. `wisp logits` uses
 * these alone: its --json already names its output format. */
#define CLI_GRAMMAR_SOURCE_OPTS(o)                                                                                  \
    {"grammar", 0, OPT_STR, &(o)->text, "GBNF", "constrain the output to this grammar (llama.cpp GBNF syntax)"},    \
    {"grammar-file", 0, OPT_STR, &(o)->file, "PATH", "constrain the output to the GBNF grammar in PATH"},             \
    {"json-schema", 0, OPT_STR, &(o)->schema, "SCHEMA", "constrain the output to JSON valid under SCHEMA (a file or inline JSON)"}, \
    {"json-mode", 0, OPT_FLAG, &(o)->json, NULL, "constrain the output to a JSON object (any keys and values)"},      \
    {"json-bounded", 0, OPT_FLAG, &(o)->bounded, NULL,                                                              \
     "with --json-mode/--json-schema: strings of at most 24 characters, arrays of at most 4 items, recursion 1 deep, no "  \
     "properties the schema does not list (for small models that ramble)"}

/* run and chat: the above, and --json as the short spelling of --json-mode */
#define CLI_GRAMMAR_OPTS(o)                                                                                         \
    CLI_GRAMMAR_SOURCE_OPTS(o),                                                                                     \
    {"json", 0, OPT_FLAG, &(o)->json, NULL, "the same as --json-mode"}

/* Read a whole file (NUL-terminated, malloc'd). NULL with a message on stderr. */
char *cli_read_text(const char *path, size_t *len, const char *who);

/* JSON Schema text -> GBNF (malloc'd), exact or bounded. NULL with a message on stderr. */
char *cli_schema_gbnf(const char *schema, size_t len, bool bounded, const char *who);

/* The GBNF the options ask for (malloc'd), or NULL: *none is set when no
 * option was given; otherwise the error was printed. */
char *cli_grammar_text(const cli_grammar_opts *o, bool *none, const char *who);

/* A compiled grammar and its matcher, in one block planned exactly. */
typedef struct cli_grammar {
    void *mem;
    size_t grammar_bytes, matcher_bytes;
    wisp_arena arena;
    const wisp_grammar *g;
    wisp_matcher m;
    double compile_seconds;
} cli_grammar;

bool cli_grammar_build(cli_grammar *cg, const char *gbnf, const char *who);
void cli_grammar_free(cli_grammar *cg);

/* A sampler stage for a model: its vocabulary trie, the grammar and a guide,
 * in one block planned exactly. Attach with `sampler.guide = &cg->guide`. */
typedef struct cli_guide {
    void *mem, *guide_mem; /* trie + grammar (per model + grammar), and the guide's state */
    size_t trie_bytes, grammar_bytes, guide_bytes;
    wisp_token_trie trie;
    const wisp_grammar *g;
    wisp_guide guide;
    double trie_seconds, compile_seconds;
} cli_guide;

/* cli_guide_open with the matcher and walk limits given (a firmware's, e.g.) */
bool cli_guide_open_limits(cli_guide *cg, const wisp_tokenizer *tok, const char *gbnf, const wisp_matcher_limits *limits,
                           const char *who);
bool cli_guide_open(cli_guide *cg, const wisp_tokenizer *tok, const char *gbnf, const char *who);
void cli_guide_close(cli_guide *cg);
/* After wisp_sample returned -1 with a guide attached: true when that is the
 * grammar's normal end (complete, and the model has no end token); otherwise
 * prints why and returns false. */
bool cli_guide_finished(cli_guide *cg, const char *who);

#endif
