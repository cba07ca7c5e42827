/* Printing a memory plan for people (aligned table) and programs (JSON). */
#ifndef WISP_CLI_PLAN_PRINT_H
#define WISP_CLI_PLAN_PRINT_H

#include <stdio.h>

#include "wisp.h"

void cli_print_plan(FILE *out, const wisp_memory_plan *plan);
void cli_print_plan_json(FILE *out, const wisp_memory_plan *plan);
/* The family's specifics (activation, norms, RoPE scaling, attention
 * variants), indented lines for `wisp info` and `wisp plan`. */
void cli_print_family(FILE *out, const wisp_hparams *hp);
/* "1.5 MiB" style, into buf. */
const char *cli_human_bytes(char *buf, size_t cap, size_t bytes);

#endif
