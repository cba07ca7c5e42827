/* wisp tokenize: how a text splits into tokens. Works on vocabulary-only
 * GGUFs too, since it builds just the tokenizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "session.h"
#include "tokenizer.h"

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL;
    bool ids_only = false, bos = false, special = false;
    const cli_opt opts[] = {
        {"model", 'm', OPT_STR, &model, "PATH", "GGUF model (or vocabulary-only GGUF)"},
        {"ids", 0, OPT_FLAG, &ids_only, NULL, "print only the ids, space-separated, on one line"},
        {"bos", 0, OPT_FLAG, &bos, NULL, "add the beginning-of-sequence token"},
        {"special", 0, OPT_FLAG, &special, NULL, "turn special-token texts like <s> into their ids"},
    };
    const cli_command cmd = {"tokenize", "-m MODEL [--ids] TEXT",
                             "Split TEXT into tokens. Without --ids, prints one token per line: id and its text.",
                             NULL, opts, (int)(sizeof opts / sizeof opts[0]), 1, 1, "TEXT"};
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    const char *text = pos[0];
    size_t len = strlen(text);

    cli_file f;
    wisp_gguf g;
    if (!cli_open_gguf(&f, &g, model)) return CLI_FAIL;
    wisp_error err = {0};
    size_t table_bytes;
    int status = CLI_FAIL;
    void *mem = NULL, *scratch = NULL;
    int32_t *ids = NULL;
    wisp_tokenizer tok;
    if (wisp_tokenizer_plan(&g, &table_bytes, &err)) goto fail;
    if (posix_memalign(&mem, 64, table_bytes ? table_bytes : 64)) goto oom;
    wisp_arena arena;
    wisp_arena_init(&arena, mem, table_bytes);
    if (wisp_tokenizer_init(&tok, &g, &arena, &err)) goto fail;
    size_t scratch_bytes = wisp_tokenizer_scratch_bytes(&tok, len);
    size_t cap = len + 8;
    scratch = malloc(scratch_bytes ? scratch_bytes : 1);
    ids = malloc(cap * sizeof *ids);
    if (!scratch || !ids) goto oom;
    size_t n = 0;
    unsigned flags = (bos ? WISP_TOKENIZE_ADD_BOS : 0) | (special ? WISP_TOKENIZE_PARSE_SPECIAL : 0);
    if (wisp_tokenize(&tok, text, len, flags, ids, cap, &n, scratch, scratch_bytes, &err)) goto fail;
    for (size_t i = 0; i < n; i++) {
        if (ids_only) {
            printf("%s%d", i ? " " : "", ids[i]);
            continue;
        }
        char piece[256];
        size_t pl = wisp_token_piece(&tok, ids[i], piece, sizeof piece);
        if (pl > sizeof piece) pl = sizeof piece;
        printf("%6d  '", ids[i]);
        for (size_t k = 0; k < pl; k++) {
            unsigned char c = (unsigned char)piece[k];
            if (c == '\n') fputs("\\n", stdout);
            else if (c == '\t') fputs("\\t", stdout);
            else if (c < 0x20) printf("\\x%02x", c);
            else putchar(c);
        }
        puts("'");
    }
    if (ids_only) putchar('\n');
    status = CLI_OK;
    goto done;
oom:
    wisp_fail(&err, WISP_ERR_CAPACITY, "out of memory");
fail:
    cli_report(model, &err);
done:
    free(ids);
    free(scratch);
    free(mem);
    cli_file_close(&f);
    return status;
}
