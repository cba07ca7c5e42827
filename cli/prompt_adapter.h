/* Prompt- and prefix-tuning adapters on disk (PEFT PROMPT_TUNING and
 * PREFIX_TUNING folders, adapters/peft_prompt.h): written by `wisp finetune
 * --method prompt|prefix`, read by `--lora DIR` of run/chat/eval, whose
 * contexts then start with the virtual tokens (or the prefix's keys and
 * values). */
#ifndef WISP_CLI_PROMPT_ADAPTER_H
#define WISP_CLI_PROMPT_ADAPTER_H

#include <stdbool.h>

#include "peft_prompt.h"
#include "wisp.h"

/* Write `a` as DIR/adapter_config.json + DIR/adapter_model.safetensors (atomically). */
bool cli_prompt_write(const wisp_prompt_adapter *a, const char *dir, bool quiet);

/* Whether DIR holds a prompt- or prefix-tuning adapter (its adapter_config.json
 * says PROMPT_TUNING or PREFIX_TUNING). */
bool cli_prompt_is_adapter(const char *dir);
/* Whether it says PREFIX_TUNING. */
bool cli_prompt_is_prefix(const char *dir);
/* "prefix" or "prompt", as messages name DIR's method. */
const char *cli_prompt_method(const char *dir);

/* Read DIR against the base's hyperparameters: *rows (malloc'd, F32
 * [*n_virtual][width]: dim, or the prefix's n_layers x 2 x kv width) and
 * whether it is a prefix; false with a message naming the problem. */
bool cli_prompt_read(const char *dir, const wisp_hparams *hp, float **rows, int32_t *n_virtual, bool *prefix);

/* What a firmware declares to read DIR statically (`wisp plan --c-header
 * --lora DIR`): wisp_prompt_read's memory for DIR's two files, the rows
 * as F32 in the engine's order, their count and kind. False with a message. */
bool cli_prompt_plan(const char *dir, const wisp_hparams *hp, size_t *index_bytes, size_t *rows_bytes,
                     int32_t *n_virtual, bool *prefix);

/* Read DIR and write it again as OUT (rows in their own type; base_model
 * replaces base_model_name_or_path when not NULL): PEFT to PEFT, byte for
 * byte the same files when nothing is replaced. */
bool cli_prompt_copy(const char *dir, const wisp_hparams *hp, const char *base_model, const char *out);

/* Evaluate the virtual tokens as a context's first positions (n_past must
 * be 0); a prefix goes into the KV cache as they are. */
bool cli_prompt_prime(wisp_ctx *ctx, const float *rows, int32_t n_virtual, bool prefix);

#endif
