/* wisp grammar check|match: compile a GBNF grammar or a JSON Schema and test
 * strings against it (the same compiler and matcher generation uses). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "grammar_source.h"
#include "session.h"

static char *load(const char *file, bool schema, const char *who) {
    size_t len;
    char *text = cli_read_text(file, &len, who);
    if (!text || !schema) return text;
    char *g = cli_schema_gbnf(text, len, false, who);
    free(text);
    return g;
}

static int grammar_check(int argc, char **argv) {
    bool schema = false, print = false;
    const cli_opt opts[] = {
        {"schema", 0, OPT_FLAG, &schema, NULL, "FILE is a JSON Schema (compiled to a grammar first)"},
        {"print", 0, OPT_FLAG, &print, NULL, "print the grammar (for a schema: the GBNF it became)"},
    };
    const cli_command cmd = {
        "grammar check", "FILE [--schema] [--print]",
        "Compile a GBNF grammar (or, with --schema, a JSON Schema) and report the first error with its line and "
        "column, or the compiled size.",
        "Exit status: 0 when it compiles, 1 when it does not.\nExample: wisp grammar check list.gbnf",
        opts, (int)(sizeof opts / sizeof opts[0]), 1, 1, "FILE"};
    const char *pos[1];
    int n_pos, rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    char *gbnf = load(pos[0], schema, "grammar check");
    if (!gbnf) return CLI_FAIL;
    cli_grammar cg;
    bool ok = cli_grammar_build(&cg, gbnf, pos[0]);
    if (ok) {
        if (print) fputs(gbnf, stdout);
        printf("ok: %u rules, %u alternatives, %u elements, %u byte sets; grammar %zu bytes + matcher %zu bytes; "
               "compiled in %.3f ms\n",
               cg.g->n_rules, cg.g->n_alts, cg.g->n_elems, cg.g->n_terms, cg.grammar_bytes, cg.matcher_bytes,
               cg.compile_seconds * 1e3);
    }
    cli_grammar_free(&cg);
    free(gbnf);
    return ok ? CLI_OK : CLI_FAIL;
}

static int grammar_match(int argc, char **argv) {
    const char *schema = NULL, *text_file = NULL;
    const cli_opt opts[] = {
        {"schema", 0, OPT_STR, &schema, "FILE", "match against this JSON Schema instead of a GBNF FILE"},
        {"text-file", 0, OPT_STR, &text_file, "PATH", "read the string to match from PATH"},
    };
    const cli_command cmd = {
        "grammar match", "(GRAMMAR_FILE | --schema FILE) (STRING | --text-file PATH)",
        "Check whether the whole STRING derives from the grammar's root (or is valid under the schema).",
        "Exit status: 0 accepted, 1 not accepted (the byte offset where it failed is printed), 2 usage.\n"
        "Example: wisp grammar match --schema person.json '{\"name\": \"Ada\"}'",
        opts, (int)(sizeof opts / sizeof opts[0]), 0, 2, "[GRAMMAR_FILE] [STRING]"};
    const char *pos[2];
    int n_pos, rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    int want = (schema ? 0 : 1) + (text_file ? 0 : 1);
    if (n_pos != want) {
        fprintf(stderr, "wisp grammar match: expected %s\n(see: wisp grammar match --help)\n",
                schema ? (text_file ? "no arguments" : "STRING") : (text_file ? "GRAMMAR_FILE" : "GRAMMAR_FILE STRING"));
        return CLI_USAGE;
    }
    char *gbnf = load(schema ? schema : pos[0], schema != NULL, "grammar match");
    if (!gbnf) return CLI_USAGE;
    char *owned = NULL;
    const char *s;
    size_t n;
    if (text_file) {
        if (!(owned = cli_read_text(text_file, &n, "grammar match"))) {
            free(gbnf);
            return CLI_USAGE;
        }
        s = owned;
    } else {
        s = pos[n_pos - 1];
        n = strlen(s);
    }
    cli_grammar cg;
    int status = CLI_USAGE;
    if (cli_grammar_build(&cg, gbnf, schema ? schema : pos[0])) {
        wisp_error err = {0};
        size_t ok = 0;
        wisp_status st = wisp_matcher_accept(&cg.m, (const uint8_t *)s, n, &ok, &err);
        if (st == WISP_OK && wisp_matcher_can_end(&cg.m)) {
            printf("accepted: %zu bytes\n", n);
            status = CLI_OK;
        } else if (st == WISP_OK) {
            printf("rejected at byte %zu: the text ends before the grammar does\n", n);
            status = CLI_FAIL;
        } else if (st == WISP_ERR_FORMAT) {
            printf("rejected at byte %zu: 0x%02x does not continue the grammar (after \"%.*s\")\n", ok,
                   (unsigned)(unsigned char)s[ok], (int)(ok > 40 ? 40 : ok), s + (ok > 40 ? ok - 40 : 0));
            status = CLI_FAIL;
        } else {
            cli_report("grammar match", &err);
            status = CLI_FAIL;
        }
        cli_grammar_free(&cg);
    }
    free(owned);
    free(gbnf);
    return status;
}

int cmd_grammar(int argc, char **argv) {
    static const char *const help =
        "usage: wisp grammar SUBCOMMAND [options]   (wisp grammar SUBCOMMAND --help for details)\n\n"
        "  check FILE [--schema]                  compile a GBNF grammar or JSON Schema; errors with line:column\n"
        "  match (FILE | --schema FILE) STRING    exit 0 when STRING is accepted whole, 1 when not\n"
        "(bench/grammar.sh measures mask time, schema compile time and constrained decode speed)\n";
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(help, argc < 2 ? stderr : stdout);
        return argc < 2 ? CLI_USAGE : CLI_OK;
    }
    if (strcmp(argv[1], "check") == 0) return grammar_check(argc - 1, argv + 1);
    if (strcmp(argv[1], "match") == 0) return grammar_match(argc - 1, argv + 1);
    fprintf(stderr, "wisp grammar: unknown subcommand '%s'\n\n%s", argv[1], help);
    return CLI_USAGE;
}
