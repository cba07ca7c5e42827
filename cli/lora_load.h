/* One call that turns what a user passes to --lora into a wisp_lora: a
 * llama.cpp GGUF LoRA file or a PEFT folder (adapter_config.json +
 * adapter_model.safetensors), optionally suffixed ":SCALE". Files are mapped
 * and used in place; the handle owns the mapping and the pair table. */
#ifndef WISP_CLI_LORA_LOAD_H
#define WISP_CLI_LORA_LOAD_H

#include <stdbool.h>
#include <stddef.h>

#include "file_map.h"
#include "gguf.h"
#include "lora.h"
#include "model.h"

typedef enum cli_lora_format { CLI_LORA_GGUF, CLI_LORA_PEFT } cli_lora_format;

typedef struct cli_lora {
    wisp_lora lora;       /* tensors point into `file` (or `mem` for converted ones) */
    float user_scale;     /* from "PATH:SCALE"; 1 when not given */
    cli_lora_format format;
    char arch[32];        /* the architecture the adapter declares ("" if it does not) */
    char base_model[256]; /* PEFT's base_model_name_or_path ("" when absent) */
    char path[4096];
    cli_file file;        /* the .gguf or adapter_model.safetensors, mapped */
    wisp_gguf gguf;       /* for a GGUF adapter: the parsed view of `file` */
    void *mem;            /* pair table and any converted tensors */
} cli_lora;

/* Split "PATH[:SCALE]": the text after the last ':' is a scale only if it
 * parses completely as a finite number (so paths with colons still work). */
bool cli_lora_parse_spec(const char *spec, char *path, size_t cap, float *scale);

/* Load `spec` for a base model with hyperparameters `base` (NULL: checked
 * only for internal consistency; a llama PEFT adapter then cannot be
 * loaded, as its q/k rows need the head counts). Prints "wisp: PATH: why"
 * and returns false on failure. PEFT notes (unknown config fields) are
 * printed to stderr as warnings. */
bool cli_lora_load(cli_lora *l, const char *spec, const wisp_hparams *base);
void cli_lora_close(cli_lora *l);

#endif
