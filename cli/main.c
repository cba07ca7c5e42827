/* wisp: the command-line front end. Each subcommand lives in its own file. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "wisp.h"

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"run", cmd_run, "generate text from a prompt, streaming it"},
    {"info", cmd_info, "describe a model: architecture, shapes, types, tokenizer, memory"},
    {"tokenize", cmd_tokenize, "show how text is split into tokens"},
    {"plan", cmd_plan, "print the exact memory plan for a model and settings"},
    {"logits", cmd_logits, "print logits and greedy continuations as JSON (for checking against references)"},
    {"embed", cmd_embed, "print one embedding vector per text (mean or last hidden state, L2-normalized)"},
    {"perplexity", cmd_perplexity, "mean negative log-likelihood and perplexity of a text file"},
    {"convert-llama2c", cmd_convert_llama2c, "convert a llama2.c checkpoint and tokenizer to GGUF"},
    {"make-model", cmd_make_model, "write a random-weight model at a real model's shape (for benchmarks)"},
    {"bench", cmd_bench, "measure prefill and decode speed, memory and bandwidth"},
    {"export", cmd_export, "convert a LoRA adapter between GGUF LoRA and PEFT, either way"},
    {"merge", cmd_merge, "merge LoRA adapters into a model's weights (optionally re-quantizing)"},
    {"quantize", cmd_quantize, "rewrite a model's weights in another type or the q4_k_m mix"},
    {"finetune", cmd_finetune, "train a LoRA adapter on a text or JSONL file (QLoRA on any base type)"},
    {"eval", cmd_eval, "mean loss and perplexity of a data file, with or without adapters"},
    {"chat", cmd_chat, "chat with an instruct model in the terminal (multi-turn, streaming)"},
    {"template", cmd_template, "render a conversation with a chat template (the model's, a file or a built-in)"},
    {"grammar", cmd_grammar, "check GBNF grammars and JSON Schemas, match strings, measure constrained sampling"},
    {"lora-grad", cmd_lora_grad, "loss and LoRA gradients of one pass as JSON (for checking against references)"},
};

static void usage(FILE *out) {
    fprintf(out,
            "wisp %s - run and fine-tune llama-family models in one planned arena\n\n"
            "usage: wisp COMMAND [options]   (wisp COMMAND --help for details)\n\ncommands:\n",
            WISP_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-16s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nexample:\n  wisp run -m model.gguf -p \"Once upon a time\" -n 64\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("wisp %s\n", WISP_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "wisp: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
