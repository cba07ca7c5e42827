/* wisp run --chat: one answer to a conversation given as messages JSON (a
 * file or stdin), printed to stdout, for scripts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_engine.h"
#include "commands.h"

static void print_piece(void *user, const char *text, size_t len) {
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
}

/* --json-output: the answer is kept whole, then printed as structured data. */
typedef struct kept {
    char *s;
    size_t len, cap;
    bool failed;
} kept;

static void keep_piece(void *user, const char *text, size_t len) {
    kept *k = user;
    if (k->failed) return;
    if (k->len + len + 1 > k->cap) {
        size_t cap = (k->len + len + 1) * 2;
        char *bigger = realloc(k->s, cap);
        if (!bigger) { k->failed = true; return; }
        k->s = bigger;
        k->cap = cap;
    }
    memcpy(k->s + k->len, text, len);
    k->len += len;
}

int cmd_run_chat(int argc, char **argv) {
    chat_opts o;
    chat_opts_default(&o);
    bool chat = false;
    const char *messages = "-";
    bool json_output = false;
    const cli_opt opts[] = {
        CLI_MODEL_OPTS(&o.mo),
        {"chat", 0, OPT_FLAG, &chat, NULL, "answer a conversation instead of continuing text"},
        {"messages", 0, OPT_STR, &messages, "FILE", "the conversation: JSON [{\"role\", \"content\"}, ...] ('-': stdin)"},
        {"system", 0, OPT_STR, &o.system, "TEXT", "a system prompt put before the messages"},
        {"json-output", 0, OPT_FLAG, &json_output, NULL,
         "print the answer as JSON {\"content\", \"tool_calls\": [{\"type\", \"function\": {\"name\", \"arguments\"}}]}"},
        CHAT_OPTS(&o),
    };
    const cli_command cmd = {
        "run --chat", "-m MODEL [--messages FILE.json] [options]",
        "Answer a conversation with an instruct model and print the answer.",
        "The messages are rendered with the model's chat template (or --chat-template), tokenized with\n"
        "the template's special tokens (the messages' own text never becomes special tokens), and the\n"
        "answer stops at the model's end-of-turn token, a --stop text or -n tokens.\n"
        "With --tools, the answer is either text or one call of a listed tool whose arguments are valid\n"
        "under its JSON Schema (--tool-choice required: always a call), written the way the template's\n"
        "family writes calls (hermes/Qwen <tool_call>, llama3 JSON); --json-output returns it parsed.\n"
        "Example: echo '[{\"role\":\"user\",\"content\":\"Hi!\"}]' | wisp run -m model.gguf --chat",
        opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    if (!chat_opts_usable(&o, "run --chat")) return CLI_USAGE;
    wisp_chat_message *msgs = NULL;
    char *text = NULL;
    size_t n = 0;
    if (!cli_load_messages(messages, &msgs, &n, &text)) return CLI_FAIL;
    chat_engine e;
    bool ok = chat_engine_open(&e, &o);
    for (size_t i = 0; ok && i < n; i++) {
        static const char *const roles[] = {"system", "user", "assistant", "tool"};
        const char *role = NULL;
        for (int k = 0; k < 4; k++)
            if (strlen(roles[k]) == msgs[i].role_len && memcmp(roles[k], msgs[i].role, msgs[i].role_len) == 0) role = roles[k];
        if (!role) {
            fprintf(stderr, "wisp run --chat: message %zu has role \"%.*s\" (system, user, assistant or tool)\n", i,
                    (int)msgs[i].role_len, msgs[i].role);
            ok = false;
        } else {
            ok = chat_engine_add_message(&e, role, &msgs[i]);
        }
    }
    if (ok && e.n_msgs == 0) {
        fprintf(stderr, "wisp run --chat: no messages\n");
        ok = false;
    }
    if (ok) {
        kept k = {0};
        ok = json_output ? chat_engine_reply(&e, keep_piece, &k, NULL) : chat_engine_reply(&e, print_piece, NULL, NULL);
        if (ok && json_output && k.failed) {
            fprintf(stderr, "wisp run --chat: out of memory\n");
            ok = false;
        }
        /* free text never starts like a call (the grammar sees to it), so a call cut short by -n is told apart */
        bool call_shaped = k.len && (k.s[0] == '<' || k.s[0] == '{');
        if (ok && json_output && e.guide.mem && (call_shaped || e.tools == TOOLS_UNKNOWN) && !wisp_guide_done(&e.guide.guide)) {
            fprintf(stderr, "wisp run --chat: the %s is incomplete: it stopped before its end (raise -n)\n",
                    e.tools != TOOLS_UNKNOWN ? "tool call" : "constrained answer");
            ok = false;
        }
        if (ok && json_output)
            ok = cli_tools_print_answer(stdout, k.s ? k.s : "", k.len, e.guide.mem ? e.tools : TOOLS_UNKNOWN);
        else if (!json_output)
            printf("\n");
        free(k.s);
        chat_engine_report(&e);
    }
    free(msgs);
    free(text);
    if (e.s.ctx || e.ct.tpl) chat_engine_close(&e);
    return ok ? CLI_OK : CLI_FAIL;
}
