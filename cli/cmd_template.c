/* wisp template: render a conversation with a chat template, to check any
 * template (the model's own, a file, a built-in format) against a reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_formats.h"
#include "chat_template.h"
#include "commands.h"
#include "session.h"

int cmd_template(int argc, char **argv) {
    const char *model = NULL, *template_file = NULL, *messages = NULL, *choice = NULL, *bos = NULL, *eos = NULL, *tools = NULL,
               *date = NULL;
    bool no_gen = false, list = false;
    const cli_opt opts[] = {
        {"model", 'm', OPT_STR, &model, "PATH", "GGUF model: its tokenizer.chat_template and BOS/EOS texts"},
        {"template", 0, OPT_STR, &template_file, "FILE", "a Jinja chat template file instead of a model's"},
        {"chat-template", 0, OPT_STR, &choice, "NAME|FILE", "a built-in format (see --list) or a template file; wins over the others"},
        {"messages", 0, OPT_STR, &messages, "FILE", "the conversation: JSON [{\"role\", \"content\"}, ...] ('-': stdin)"},
        {"no-generation-prompt", 0, OPT_FLAG, &no_gen, NULL, "render add_generation_prompt=false (no assistant header at the end)"},
        {"bos", 0, OPT_STR, &bos, "TEXT", "bos_token for the template (default: the model's BOS token; none without a model)"},
        {"eos", 0, OPT_STR, &eos, "TEXT", "eos_token for the template (default: the model's EOS token)"},
        {"tools", 0, OPT_STR, &tools, "FILE.json", "OpenAI-style tool definitions, given to the template as `tools`"},
        {"date", 0, OPT_STR, &date, "YYYY-MM-DD", "the date strftime_now gives (default: today)"},
        {"list", 0, OPT_FLAG, &list, NULL, "list the built-in formats and exit"},
    };
    const cli_command cmd = {
        "template", "(-m MODEL | --template FILE | --chat-template NAME) --messages FILE.json [options]",
        "Render a conversation with a chat template and print the text the model would be given.",
        "The template runs as Hugging Face's apply_chat_template does (Jinja with trim_blocks and\n"
        "lstrip_blocks). When the template raises (raise_exception), its message is printed and the exit\n"
        "status is 1. Constructs wisp does not implement are errors naming them.\n"
        "Example: wisp template -m SmolLM2-135M-Instruct.gguf --messages chat.json",
        opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    if (list) {
        size_t n;
        const wisp_chat_format *f = wisp_chat_formats(&n);
        for (size_t i = 0; i < n; i++) printf("%-8s %s\n", f[i].name, f[i].summary);
        return CLI_OK;
    }
    if (!messages) {
        fprintf(stderr, "wisp template: missing --messages FILE.json\n(see: wisp template --help)\n");
        return CLI_USAGE;
    }
    if (!model && !template_file && !choice) {
        fprintf(stderr, "wisp template: give -m MODEL, --template FILE or --chat-template NAME\n");
        return CLI_USAGE;
    }
    cli_file file;
    wisp_gguf g;
    if (model && !cli_open_gguf(&file, &g, model)) return CLI_FAIL;
    cli_chat_template ct;
    bool ok = cli_chat_template_open(&ct, model ? &g : NULL, template_file, choice, bos, eos);
    if (ok && tools) ok = cli_chat_template_load_tools(&ct, tools);
    if (ok && !cli_chat_template_set_date(&ct, date)) {
        fprintf(stderr, "wisp template: --date %s: expected YYYY-MM-DD\n", date);
        cli_chat_template_close(&ct);
        if (model) cli_file_close(&file);
        return CLI_USAGE;
    }
    wisp_chat_message *msgs = NULL;
    char *text = NULL, *out = NULL;
    size_t n = 0, len = 0;
    if (ok) ok = cli_load_messages(messages, &msgs, &n, &text);
    if (ok) {
        wisp_error err = {0};
        if (cli_chat_render(&ct, msgs, n, !no_gen, &out, &len, &err)) {
            fprintf(stderr, "wisp template: %s\n", err.message);
            ok = false;
        } else {
            fwrite(out, 1, len, stdout);
            fflush(stdout);
        }
    }
    free(out);
    free(msgs);
    free(text);
    if (ct.tpl || ct.source) cli_chat_template_close(&ct);
    if (model) cli_file_close(&file);
    return ok ? CLI_OK : CLI_FAIL;
}
