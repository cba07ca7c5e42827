/* Every `wisp` subcommand: int cmd_NAME(argc, argv) with argv[0] = NAME.
 * Returns the process exit status (0 ok, 1 failure, 2 usage). */
#ifndef WISP_CLI_COMMANDS_H
#define WISP_CLI_COMMANDS_H

#include <stdbool.h>

#include "lora.h"
#include "model.h"

int cmd_run(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_convert_llama2c(int argc, char **argv);
int cmd_make_model(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_export(int argc, char **argv);
/* Write `lora` as a PEFT folder `out` (adapter_config.json, adapter_model.safetensors); prints why not
 * (and, unless quiet, what it wrote). */
bool cli_export_peft(const wisp_lora *lora, const wisp_hparams *hp, const char *base_model, const char *out, bool quiet);
int cmd_merge(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_lora_grad(int argc, char **argv);
int cmd_finetune(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_run_chat(int argc, char **argv); /* wisp run --chat (cli/chat_run.c) */
int cmd_grammar(int argc, char **argv);

#endif
