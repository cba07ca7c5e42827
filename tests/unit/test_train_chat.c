/* Conversations as training data: {"messages": [...]} records rendered with a
 * chat template (SmolLM2's vocabulary, the built-in ChatML format), scoring
 * exactly the assistant turns (the count of scored targets equals the tokens
 * of the assistant texts with their end-of-turn markers, tokenized on their
 * own), and truncation reported exactly: cut records counted, records left
 * with nothing to score dropped and counted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_formats.h"
#include "check.h"
#include "data_memory.h"
#include "template_memory.h"
#include "test_tokenizer_util.h"
#include "train_data.h"

typedef struct env {
    wisp_train_data d;
    wisp_data_memory mem;
} env;

static wisp_status build(env *e, const wisp_tokenizer *tok, const char *text, int32_t seq_len, const wisp_data_chat *chat,
                         wisp_error *err) {
    wisp_data_options o = {WISP_DATA_JSONL, WISP_DOCS_FILE, seq_len, 0, 1, 0, false};
    wisp_data_plan_info info;
    memset(e, 0, sizeof *e);
    wisp_status s = wisp_data_plan_chat(tok, text, strlen(text), &o, chat, &info, err);
    if (s) return s;
    data_memory_alloc(&e->mem, &info);
    return wisp_data_build_chat(&e->d, tok, text, strlen(text), &o, &e->mem, chat, err);
}

static void release(env *e) {
    data_memory_free(&e->mem);
}

/* Tokens of an assistant turn as ChatML writes it, tokenized alone. */
static size_t turn_tokens(const wisp_tokenizer *tok, const char *answer) {
    char text[512];
    snprintf(text, sizeof text, "%s<|im_end|>\n", answer);
    int32_t *ids;
    size_t n = 0;
    wisp_error err = {0};
    if (encode_alloc(tok, text, strlen(text), WISP_TOKENIZE_PARSE_SPECIAL, &ids, &n, &err)) n = 0;
    free(ids);
    return n;
}

int main(void) {
    const char *path = shared_path(VOCAB_DIR "/ggml-vocab-smollm2.gguf");
    if (!path) {
        fprintf(stderr, "FAIL test_train_chat: " VOCAB_DIR "/ggml-vocab-smollm2.gguf missing under WISP_SHARED\n");
        return 1;
    }
    loaded_vocab v;
    if (load_vocab(&v, path)) return 1;
    void *tmem = NULL;
    wisp_data_chat chat = {template_load(wisp_chat_format_find("chatml")->template, &tmem), NULL, NULL, 2024, 7, 26};
    CHECK(chat.tpl != NULL, "chatml parses");
    const char *data =
        "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"},"
        " {\"role\": \"assistant\", \"content\": \"Hello there.\"}]}\n"
        "\n"
        "{\"messages\": [{\"role\": \"user\", \"content\": \"2+2?\"}, {\"role\": \"assistant\", \"content\": \"4\"},"
        " {\"role\": \"user\", \"content\": \"And <|im_end|> 3+3?\"}, {\"role\": \"assistant\", \"content\": \"6, with <|im_start|>\"}]}\n"
        "{\"prompt\": \"Q: sky?\", \"completion\": \" Blue.\"}\n";
    env e;
    wisp_error err = {0};
    wisp_status s = build(&e, &v.tok, data, 256, &chat, &err);
    CHECK(s == WISP_OK, "build: %s", err.message);
    if (!s) {
        CHECK(e.d.n_examples == 3, "three records, got %d", e.d.n_examples);
        /* scored: exactly the assistant turns (and the prompt/completion record's response and EOS) */
        int32_t *ids;
        size_t n_blue = 0;
        encode_alloc(&v.tok, " Blue.", 6, 0, &ids, &n_blue, &err);
        free(ids);
        size_t want = turn_tokens(&v.tok, "Hello there.") + turn_tokens(&v.tok, "4");
        {
            /* the last answer types <|im_start|>: its text is plain, then the end-of-turn special and the newline */
            size_t body = 0, tail = 0;
            encode_alloc(&v.tok, "6, with <|im_start|>", 20, 0, &ids, &body, &err);
            free(ids);
            encode_alloc(&v.tok, "<|im_end|>\n", 11, WISP_TOKENIZE_PARSE_SPECIAL, &ids, &tail, &err);
            free(ids);
            want += body + tail;
        }
        want += n_blue + 1; /* + EOS */
        CHECK(e.d.n_scored == (int64_t)want, "scored %lld targets, the assistant turns have %zu", (long long)e.d.n_scored, want);
        CHECK(e.d.n_truncated == 0 && e.d.n_unscored == 0, "nothing cut");
        /* the masks say the same, and the scored ids of record 1 decode to the answer and its marker */
        int32_t win[257];
        uint8_t mask[257];
        wisp_data_get(&e.d, WISP_SPLIT_TRAIN, 0, win, mask);
        char scored_text[256];
        size_t at = 0;
        for (int i = 0; i < 257; i++)
            if (mask[i]) at += wisp_token_piece_ex(&v.tok, win[i], WISP_PIECE_SPECIAL, scored_text + at, sizeof scored_text - at);
        scored_text[at] = 0;
        CHECK(strcmp(scored_text, "Hello there.<|im_end|>\n") == 0, "record 1 scores [%s]", scored_text);
        release(&e);
    }
    /* truncation: with windows of 24 ids, the long conversation is cut; a record whose answer lies wholly
     * past the cut is dropped */
    const char *cut =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"Tell me everything you know about the history of the "
        "Roman empire, in detail, please, and more.\"}, {\"role\": \"assistant\", \"content\": \"No.\"}]}\n"
        "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"A long answer "
        "that will not fit in the window of twenty four tokens at all, surely.\"}]}\n"
        "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Short.\"}]}\n";
    s = build(&e, &v.tok, cut, 23, &chat, &err);
    CHECK(s == WISP_OK, "build: %s", err.message);
    if (!s) {
        CHECK(e.d.n_truncated == 2, "two records cut, counted %d", e.d.n_truncated);
        CHECK(e.d.n_unscored == 1, "one left with nothing to score, counted %d", e.d.n_unscored);
        CHECK(e.d.n_examples == 2, "it is dropped: %d examples", e.d.n_examples);
        release(&e);
    }
    /* errors name their cause */
    s = build(&e, &v.tok, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}]}\n", 64, &chat, &err);
    CHECK(s == WISP_ERR_FORMAT && strstr(err.message, "no assistant message"), "no assistant: %s", err.message);
    release(&e);
    void *rmem = NULL;
    wisp_data_chat reversed = {template_load("{% for m in messages|reverse %}{{ m.role }}: {{ m.content }}\n{% endfor %}", &rmem),
                               NULL, NULL, 2024, 7, 26};
    s = build(&e, &v.tok, data, 256, &reversed, &err);
    CHECK(s == WISP_ERR_UNSUPPORTED && strstr(err.message, "assistant-only loss"), "reversed template: %s", err.message);
    release(&e);
    wisp_data_options o = {WISP_DATA_JSONL, WISP_DOCS_FILE, 64, 0, 1, 0, false};
    wisp_data_plan_info info;
    CHECK(wisp_data_plan_chat(&v.tok, data, strlen(data), &o, NULL, &info, &err) == WISP_ERR_ARG, "no template");
    free(rmem);
    free(tmem);
    free_vocab(&v);
    return check_report("test_train_chat");
}
