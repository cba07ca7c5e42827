/* A conversation with a model, shared by `wisp chat` and `wisp run --chat`:
 * the messages, the chat template, and the KV cache kept between turns so a
 * turn evaluates only its new tokens. When the conversation outgrows the
 * context, the oldest turns are dropped (the system prompt stays) and the
 * engine says so on stderr. */
#ifndef WISP_CLI_CHAT_ENGINE_H
#define WISP_CLI_CHAT_ENGINE_H

#include <signal.h>
#include <stdbool.h>

#include "chat_cache.h"
#include "chat_template.h"
#include "grammar_source.h"
#include "lora_attach.h"
#include "tool_calls.h"
#include "sampler.h"
#include "session.h"

#define CHAT_MAX_STOPS 8

typedef struct chat_opts {
    cli_model_opts mo;
    const char *chat_template; /* NAME|FILE, or NULL: the model's */
    const char *system;        /* system prompt, or NULL */
    const char *date;          /* for strftime_now, or NULL: today */
    const char *tools;         /* --tools FILE.json, or NULL */
    bool tools_bounded;        /* call arguments: short strings and arrays, no unlisted properties */
    const char *tool_choice;   /* auto (text or a call), required (a call), none (tools only shown); NULL: auto */
    cli_grammar_opts grammar;  /* --grammar/--grammar-file/--json-schema/--json: every answer follows it */
    int32_t n_predict;         /* most tokens per answer */
    wisp_sampler_params sp;
    uint64_t seed;             /* UINT64_MAX: random */
    cli_str_list stops;        /* stop strings */
    bool quiet;                /* no statistics on stderr */
    cli_str_list loras;        /* --lora: adapters as run takes them (LoRA, DoRA, a prompt's virtual tokens) */
    float lora_scale;
} chat_opts;

void chat_opts_default(chat_opts *o);
/* After parsing: false (with a message naming `command`) when a model is
 * missing or -n is below 1. */
bool chat_opts_usable(const chat_opts *o, const char *command);

/* The options chat_opts holds, for a command's table (model options come separately). */
#define CHAT_OPTS(o)                                                                                                  \
    CLI_LORA_OPTS(&(o)->loras, &(o)->lora_scale),                                                                   \
    {"chat-template", 0, OPT_STR, &(o)->chat_template, "NAME|FILE",                                                   \
     "chat format: a built-in (chatml, llama3, gemma, phi3, phi4, zephyr, mistral) or a Jinja file; default: the model's"}, \
    {"n-predict", 'n', OPT_INT, &(o)->n_predict, "N", "most tokens per answer (stops earlier at end of turn)"},       \
    {"temp", 0, OPT_FLOAT, &(o)->sp.temperature, "T", "temperature; 0 picks the most likely token (greedy)"},        \
    {"top-k", 0, OPT_INT, &(o)->sp.top_k, "K", "sample among the K most likely tokens; 0: all"},                    \
    {"top-p", 0, OPT_FLOAT, &(o)->sp.top_p, "P", "sample within the smallest set of probability P; 1: off"},        \
    {"min-p", 0, OPT_FLOAT, &(o)->sp.min_p, "P", "drop tokens less likely than P x the best; 0: off"},              \
    {"repeat-penalty", 0, OPT_FLOAT, &(o)->sp.repeat_penalty, "R", "penalise recently seen tokens; 1: off"},        \
    {"seed", 's', OPT_U64, &(o)->seed, "S", "random seed (default: random)"},                                        \
    {"stop", 0, OPT_STR_LIST, &(o)->stops, "TEXT", "also stop an answer at this text (repeatable, up to 8)"},        \
    {"tools", 0, OPT_STR, &(o)->tools, "FILE.json",                                                                 \
     "OpenAI-style tools [{\"type\":\"function\",\"function\":{name, description, parameters}}] for the template"},  \
    {"tool-choice", 0, OPT_STR, &(o)->tool_choice, "auto|required|none",                                           \
     "with --tools: answer text or one valid call (auto), only a call (required), or unconstrained (none)"},         \
    {"tools-bounded", 0, OPT_FLAG, &(o)->tools_bounded, NULL,                                                       \
     "call arguments as --json-bounded: strings of at most 24 characters, short arrays, only listed properties"},    \
    CLI_GRAMMAR_OPTS(&(o)->grammar),                                                                                \
    {"date", 0, OPT_STR, &(o)->date, "YYYY-MM-DD", "the date templates print (strftime_now); default: today"},      \
    {"quiet", 'q', OPT_FLAG, &(o)->quiet, NULL, "no statistics on stderr"}

typedef struct chat_stats {
    int32_t prompt_tokens; /* the rendered conversation */
    int32_t reused;        /* of them, found in the KV cache */
    int32_t evaluated;     /* of them, evaluated this turn */
    int32_t generated;
    int32_t dropped;       /* messages dropped to fit the context, over the conversation */
    double prefill_s, decode_s;
    bool stopped;          /* interrupted */
    bool truncated;        /* n_predict or the context ended the answer */
} chat_stats;

typedef struct chat_engine {
    cli_session s;
    cli_adapters ad;         /* --lora; a prompt adapter's virtual tokens lead the cache */
    cli_chat_template ct;
    const wisp_tokenizer *tok;
    chat_opts o;
    wisp_chat_message *msgs; /* contents are owned (malloc'd) */
    size_t n_msgs, cap_msgs;
    size_t first;            /* first message kept after the system prompt (older ones dropped) */
    int32_t n_ctx;           /* positions for the conversation (after a prompt adapter's virtual tokens) */
    int32_t *cache_mem, *prompt;
    wisp_chat_cache cache;
    wisp_sampler sampler;
    chat_stats last;
    cli_tool_family tools;   /* the wrapper calls are written in, when answers are constrained to text | call */
    cli_guide guide;         /* that constraint (guide.mem NULL: none) */
    int turn;
} chat_engine;

/* Load the model and template; the system prompt (if any) becomes message 0. */
bool chat_engine_open(chat_engine *e, const chat_opts *o);
void chat_engine_close(chat_engine *e);

/* Append a message (copied). */
bool chat_engine_add(chat_engine *e, const char *role, const char *text, size_t len);
/* Append a whole message (copied), tool-calling keys included; role is a static name. */
bool chat_engine_add_message(chat_engine *e, const char *role, const wisp_chat_message *m);

/* Forget everything but the system prompt (and clear the cache). */
void chat_engine_reset(chat_engine *e);

/* Answer the conversation: stream pieces to `out` as they come, stop at an
 * end-of-generation token, a stop string, n_predict, or when *interrupt
 * becomes nonzero; the answer (as far as it got) is appended as an assistant
 * message. Returns false (message printed) on errors. */
typedef void (*chat_piece_fn)(void *user, const char *text, size_t len);
bool chat_engine_reply(chat_engine *e, chat_piece_fn out, void *user, volatile sig_atomic_t *interrupt);

/* The transcript as a messages JSON file (written atomically), and back. */
bool chat_engine_save(const chat_engine *e, const char *path);
bool chat_engine_load(chat_engine *e, const char *path);

/* "[turn N: ...]" statistics line on stderr (unless quiet). */
void chat_engine_report(const chat_engine *e);

#endif
