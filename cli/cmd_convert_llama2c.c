/* wisp convert-llama2c: llama2.c checkpoint + tokenizer -> GGUF. */
#include <stdio.h>
#include <string.h>

#include "atomic_file.h"
#include "commands.h"
#include "llama2c.h"
#include "session.h"

int cmd_convert_llama2c(int argc, char **argv) {
    const char *out = NULL, *name = NULL;
    const cli_opt opts[] = {
        {"output", 'o', OPT_STR, &out, "OUT.gguf", "where to write the GGUF (replaced only on success)"},
        {"name", 0, OPT_STR, &name, "NAME", "general.name to record (default: the checkpoint's file name)"},
    };
    const cli_command cmd = {
        "convert-llama2c", "CHECKPOINT TOKENIZER -o OUT.gguf",
        "Convert a llama2.c checkpoint (.bin) and its tokenizer (.bin) into a GGUF with F32 weights and a\n"
        "SentencePiece vocabulary, which wisp and llama.cpp run directly.",
        "Example: wisp convert-llama2c stories260K.bin tok512.bin -o stories260K.gguf", opts,
        (int)(sizeof opts / sizeof opts[0]), 2, 2, "CHECKPOINT and TOKENIZER"};
    const char *pos[2];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    if (!out) {
        fprintf(stderr, "wisp convert-llama2c: missing -o OUT.gguf\n");
        return CLI_USAGE;
    }
    cli_file ck, tok;
    if (!cli_file_open(&ck, pos[0])) return CLI_FAIL;
    if (!cli_file_open(&tok, pos[1])) {
        cli_file_close(&ck);
        return CLI_FAIL;
    }
    if (!name) {
        const char *slash = strrchr(pos[0], '/');
        name = slash ? slash + 1 : pos[0];
    }
    wisp_llama2c m;
    wisp_error err = {0};
    int status = CLI_FAIL;
    if (wisp_llama2c_open(&m, ck.data, ck.size, &err)) {
        cli_report(pos[0], &err);
    } else if (wisp_llama2c_check_tokenizer(tok.data, tok.size, m.vocab_size, &err)) {
        cli_report(pos[1], &err);
    } else {
        cli_atomic_file af;
        if (cli_atomic_open(&af, out)) {
            if (wisp_llama2c_to_gguf(&m, tok.data, tok.size, name, &af.sink, &err)) {
                cli_report(out, &err);
                cli_atomic_abort(&af);
            } else if (cli_atomic_commit(&af)) {
                fprintf(stderr, "wrote %s: llama, %d layers, dim %d, vocab %d, %llu bytes\n", out, m.n_layers, m.dim,
                        m.vocab_size, (unsigned long long)af.sink.written);
                status = CLI_OK;
            }
        }
    }
    cli_file_close(&tok);
    cli_file_close(&ck);
    return status;
}
