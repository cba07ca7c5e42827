/* A PEFT adapter folder as PEFT's save_pretrained leaves it: DIR (created if
 * missing) with adapter_model.safetensors and adapter_config.json. Each file
 * is written atomically, the tensors first, so a failure never leaves a new
 * config beside old tensors. Shared by every adapter kind the CLI writes
 * (LoRA/DoRA in cmd_export.c, prompt tuning in prompt_adapter.c). */
#ifndef WISP_CLI_PEFT_FOLDER_H
#define WISP_CLI_PEFT_FOLDER_H

#include <stdbool.h>
#include <stddef.h>

#include "sink.h"
#include "status.h"

/* Writes the adapter's safetensors into `sink`. */
typedef wisp_status (*cli_safetensors_writer)(void *arg, wisp_sink *sink, wisp_error *err);

/* `cfg` holds cfg_len bytes of JSON and has room for one more (the final
 * newline). Callers build the config first, where an adapter that cannot be
 * exported is refused, so a refusal leaves no folder behind. false (message
 * printed) on any failure. */
bool cli_peft_folder_write(const char *dir, char *cfg, size_t cfg_len, cli_safetensors_writer write, void *arg);

#endif
