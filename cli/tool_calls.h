/* Tool calls in a chat: which wrapper the model family writes a call in,
 * the grammar that lets an answer be either text or one call whose
 * arguments validate against that tool's JSON Schema, and the answer read
 * back as structured data ({"content", "tool_calls"}, as OpenAI returns it). */
#ifndef WISP_CLI_TOOL_CALLS_H
#define WISP_CLI_TOOL_CALLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef enum cli_tool_family {
    TOOLS_UNKNOWN,
    TOOLS_HERMES, /* Qwen, Hermes, chatml: <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> */
    TOOLS_LLAMA3  /* Llama 3.x: {"name": ..., "parameters": {...}} as the whole answer */
} cli_tool_family;

/* The family a chat template writes calls in; TOOLS_UNKNOWN when wisp does not know it. */
cli_tool_family cli_tools_family(const char *template_source);
const char *cli_tools_family_name(cli_tool_family f);

/* GBNF (malloc'd) for an answer: free text or one call (required: only a
 * call). NULL with a message on stderr naming what failed. */
char *cli_tools_gbnf(const char *tools_json, size_t len, cli_tool_family f, bool required, bool bounded);

/* Print {"content": ..., "tool_calls": [...]} for an answer to `out`. False
 * (with a message) when a call-shaped answer does not parse. */
bool cli_tools_print_answer(FILE *out, const char *answer, size_t len, cli_tool_family f);

#endif
