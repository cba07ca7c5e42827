/* Loading a training or evaluation data file for the CLI: read it, pick the
 * format (JSONL for .jsonl/.json files, plain text otherwise, unless forced),
 * size the pipeline with wisp_data_plan and give it malloc'd memory. */
#ifndef WISP_CLI_TRAIN_DATA_LOAD_H
#define WISP_CLI_TRAIN_DATA_LOAD_H

#include <stdbool.h>
#include <stddef.h>

#include "train_data.h"

typedef struct cli_data {
    wisp_train_data d;
    wisp_data_memory mem;
} cli_data;

/* "auto", "text" or "jsonl" -> format for `path`; false for another word. */
bool cli_data_format(const char *name, const char *path, wisp_data_format *out);
/* "file" or "blank" -> documents; false otherwise. */
bool cli_data_docs(const char *name, wisp_data_docs *out);

/* Prints "wisp: PATH: why" and returns false on failure. JSONL files get a
 * line on stderr counting records cut to the window and left with nothing to
 * score. */
bool cli_data_load(cli_data *c, const char *path, const wisp_tokenizer *tok, const wisp_data_options *opt);
/* The same with conversation records rendered by `chat` (NULL: refused),
 * which is needed only during the call. */
bool cli_data_load_chat(cli_data *c, const char *path, const wisp_tokenizer *tok, const wisp_data_options *opt,
                        const wisp_data_chat *chat);
/* The same from bytes in memory; `name` stands for them in messages. */
bool cli_data_load_bytes(cli_data *c, const char *name, const char *bytes, size_t size, const wisp_tokenizer *tok,
                         const wisp_data_options *opt, const wisp_data_chat *chat);
void cli_data_free(cli_data *c);

#endif
