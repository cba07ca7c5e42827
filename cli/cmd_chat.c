/* wisp chat: an interactive conversation in the terminal, streamed as the
 * model writes; the KV cache is kept between turns. Ctrl-C stops an answer
 * (not the program); /reset, /save FILE, /load FILE, /quit. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_engine.h"
#include "commands.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

static void print_piece(void *user, const char *text, size_t len) {
    (void)user;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
}

/* One line from stdin without its newline; NULL at end of input. A Ctrl-C
 * while typing discards the line. */
static char *read_line(char **buf, size_t *cap) {
    for (;;) {
        interrupted = 0;
        errno = 0;
        ssize_t n = getline(buf, cap, stdin);
        if (n >= 0) {
            while (n > 0 && ((*buf)[n - 1] == '\n' || (*buf)[n - 1] == '\r')) (*buf)[--n] = 0;
            return *buf;
        }
        if (errno == EINTR || interrupted) {
            clearerr(stdin);
            printf("\n(Ctrl-C stops an answer; /quit or Ctrl-D leaves)\n> ");
            fflush(stdout);
            continue;
        }
        return NULL;
    }
}

static void help(void) {
    printf("commands: /reset (forget the conversation, keep the system prompt), /save FILE, /load FILE, /quit\n");
}

int cmd_chat(int argc, char **argv) {
    chat_opts o;
    chat_opts_default(&o);
    /* `-sys TEXT` is the spelling other chat tools use */
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "-sys") == 0) argv[i] = "--system";
    const cli_opt opts[] = {
        CLI_MODEL_OPTS(&o.mo),
        {"system", 0, OPT_STR, &o.system, "TEXT", "system prompt (also -sys TEXT)"},
        CHAT_OPTS(&o),
    };
    const cli_command cmd = {
        "chat", "-m MODEL [-sys TEXT] [options]", "Chat with an instruct model in the terminal.",
        "Type a message and press Enter; the answer streams as it is written. The conversation is\n"
        "rendered with the model's chat template (or --chat-template) and the KV cache is kept between\n"
        "turns, so each turn only evaluates its own new tokens. Ctrl-C stops an answer; Ctrl-D or /quit\n"
        "leaves. Commands: /reset, /save FILE (the transcript as messages JSON), /load FILE, /help.\n"
        "When the context fills, the oldest turns are dropped (the system prompt stays) and a note says so.\n"
        "Example: wisp chat -m SmolLM2-135M-Instruct-Q8_0.gguf -sys \"You are brief.\"",
        opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    if (!chat_opts_usable(&o, "chat")) return CLI_USAGE;
    chat_engine e;
    if (!chat_engine_open(&e, &o)) return CLI_FAIL;
#if defined(__wasi__) /* WASI emulates signal() only */
    signal(SIGINT, on_sigint);
#else
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint; /* no SA_RESTART: a read in progress returns */
    sigaction(SIGINT, &sa, NULL);
#endif
    printf("wisp chat: %s, chat template from %s. /help for commands, Ctrl-D to leave.\n> ", o.mo.model, e.ct.origin);
    fflush(stdout);
    char *line = NULL;
    size_t cap = 0;
    int status = CLI_OK;
    while (read_line(&line, &cap)) {
        if (line[0] == '/') {
            char *arg = strchr(line, ' ');
            if (arg) *arg++ = 0;
            while (arg && *arg == ' ') arg++;
            if (strcmp(line, "/quit") == 0 || strcmp(line, "/exit") == 0) break;
            if (strcmp(line, "/reset") == 0) {
                chat_engine_reset(&e);
                printf("(conversation reset%s)\n", e.n_msgs ? "; the system prompt stays" : "");
            } else if (strcmp(line, "/save") == 0 && arg && *arg) {
                if (chat_engine_save(&e, arg)) printf("(saved %zu messages to %s)\n", e.n_msgs, arg);
            } else if (strcmp(line, "/load") == 0 && arg && *arg) {
                if (chat_engine_load(&e, arg)) printf("(loaded %zu messages from %s)\n", e.n_msgs, arg);
            } else {
                help();
            }
        } else if (line[0]) {
            if (!chat_engine_add(&e, "user", line, strlen(line))) { status = CLI_FAIL; break; }
            interrupted = 0;
            bool ok = chat_engine_reply(&e, print_piece, NULL, &interrupted);
            printf("%s\n", e.last.stopped ? " [stopped]" : "");
            fflush(stdout);
            chat_engine_report(&e);
            if (!ok) {
                /* the user's message stays out of the conversation that failed */
                if (e.n_msgs && strcmp(e.msgs[e.n_msgs - 1].role, "user") == 0) {
                    free((char *)e.msgs[--e.n_msgs].content);
                }
            }
        }
        printf("> ");
        fflush(stdout);
    }
    printf("\n");
    free(line);
    chat_engine_close(&e);
    return status;
}
