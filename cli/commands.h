/* Every `wisp` subcommand: int cmd_NAME(argc, argv) with argv[0] = NAME.
 * Returns the process exit status (0 ok, 1 failure, 2 usage). */
#ifndef WISP_CLI_COMMANDS_H
#define WISP_CLI_COMMANDS_H

int cmd_run(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_convert_llama2c(int argc, char **argv);

#endif
