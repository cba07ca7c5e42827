/* The --lora FILE[:SCALE] (repeatable) and --lora-scale S options shared by
 * run, logits and eval: load every adapter against the base model, size the
 * plan for them (max_adapters, max_lora_rank), and attach them to the
 * context, each with its own scale (":SCALE", else --lora-scale, else 1). */
#ifndef WISP_CLI_LORA_ATTACH_H
#define WISP_CLI_LORA_ATTACH_H

#include <stdbool.h>

#include "args.h"
#include "lora_load.h"
#include "session.h"
#include "wisp.h"

typedef struct cli_adapters {
    cli_lora items[CLI_LIST_MAX];
    float scale[CLI_LIST_MAX];
    int n;
    /* a prompt-tuning adapter (PEFT PROMPT_TUNING folder; at most one): its
     * virtual tokens, which cli_adapted_session_open puts at the context's
     * first n_prompt positions (keep them: rewind to n_prompt, not 0); or,
     * prompt_prefix set, a prefix-tuning adapter (PREFIX_TUNING): its keys
     * and values, put into the KV cache at those positions */
    float *prompt;
    int32_t n_prompt;
    bool prompt_prefix;
} cli_adapters;

#define CLI_LORA_OPTS(list, scale)                                                                                    \
    {"lora", 0, OPT_STR_LIST, list, "FILE[:SCALE]",                                                                 \
     "apply a LoRA adapter (GGUF LoRA or PEFT folder; a PEFT prompt- or prefix-tuning folder puts its virtual "    \
     "tokens first); repeatable"},                                                                                  \
    {"lora-scale", 0, OPT_FLOAT, scale, "S", "scale of each --lora given without :SCALE"}

/* Load the adapters of `specs` for the model at model_path; prints and
 * returns false on failure (nothing stays loaded). */
bool cli_adapters_load(cli_adapters *a, const cli_str_list *specs, float default_scale, const char *model_path);
/* Room for them in the plan. */
void cli_adapters_plan(const cli_adapters *a, wisp_config *cfg);
bool cli_adapters_attach(const cli_adapters *a, wisp_ctx *ctx);
void cli_adapters_close(cli_adapters *a);
/* Empty the context down to the prompt adapter's virtual tokens (all of it
 * without one), evaluating them again when a windowed layer's ring has
 * overwritten them; false (with a message) if that fails. */
bool cli_adapters_rewind(const cli_adapters *a, wisp_ctx *ctx);

/* All of the above for a command: load the adapters of `specs`, plan room
 * for them in *cfg (a prompt adapter's virtual tokens are added to the
 * context length), open the session and attach them (evaluating the virtual
 * tokens). On failure prints
 * why, leaves nothing open and returns false; else close with
 * cli_session_close and cli_adapters_close. */
bool cli_adapted_session_open(cli_session *s, cli_adapters *a, const cli_str_list *specs, float default_scale,
                              const cli_model_opts *mo, wisp_config *cfg);

#endif
