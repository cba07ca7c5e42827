/* Conversational DPO pairs (trl's {"prompt": [messages], "chosen": [...],
 * "rejected": [...]}) as the two lockstep sides of preference_pairs.h, built
 * with a chat template (SmolLM2's vocabulary): each side's window is the
 * prompt rendered with the generation prompt (unscored), then the rest of the
 * rendering of prompt + answer and an EOS (scored), token for token what the
 * template's texts tokenize to with their special tokens; the shared prompt
 * is cut to what both answers' renderings start with, as trl does (a
 * template whose generation prompt opens a <think> block); and what cannot be
 * rendered that way is refused by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_formats.h"
#include "check.h"
#include "data_memory.h"
#include "template_memory.h"
#include "preference_pairs.h"
#include "test_tokenizer_util.h"
#include "train_data.h"

typedef struct side {
    wisp_train_data d;
    wisp_data_memory mem;
} side;

/* One side of the pairs in `jsonl`, built with `chat`. */
static wisp_status build_side(side *e, const wisp_tokenizer *tok, const char *jsonl, wisp_pair_side which,
                              const wisp_data_chat *chat, wisp_error *err) {
    memset(e, 0, sizeof *e);
    size_t cap = 0, cap_nodes = 0, len = 0, n = strlen(jsonl);
    wisp_status s = wisp_pairs_plan(jsonl, n, &cap, &cap_nodes, err);
    if (s) return s;
    char *text = malloc(cap);
    wisp_json_node *nodes = malloc(cap_nodes * sizeof *nodes);
    s = wisp_pairs_side(jsonl, n, which, nodes, cap_nodes, text, cap, &len, err);
    wisp_data_options o = {WISP_DATA_JSONL, WISP_DOCS_FILE, 127, 0, 1, 0, false};
    wisp_data_plan_info info;
    if (!s) s = chat ? wisp_data_plan_chat(tok, text, len, &o, chat, &info, err) : wisp_data_plan(tok, text, len, &o, &info, err);
    if (!s) {
        data_memory_alloc(&e->mem, &info);
        s = chat ? wisp_data_build_chat(&e->d, tok, text, len, &o, &e->mem, chat, err)
                 : wisp_data_build(&e->d, tok, text, len, &o, &e->mem, err);
    }
    free(text);
    free(nodes);
    return s;
}

/* msgs rendered by the template (as `wisp template` renders them). */
static size_t render(const wisp_data_chat *chat, const wisp_chat_message *m, size_t n, bool gen, char *out, size_t cap) {
    wisp_template_vars v = {m, n, gen, chat->bos_token, chat->eos_token, chat->year, chat->month, chat->day, NULL, 0};
    size_t len = 0;
    wisp_error err = {0};
    return wisp_template_render(chat->tpl, &v, out, cap, &len, &err) ? 0 : len;
}

/* The scored ids of example 0 as text (special tokens written out). */
static void scored_text(const side *e, const wisp_tokenizer *tok, char *out, size_t cap) {
    int32_t win[128];
    uint8_t mask[128];
    wisp_data_get(&e->d, WISP_SPLIT_TRAIN, 0, win, mask);
    size_t at = 0;
    for (int i = 0; i < 128; i++)
        if (mask[i]) at += wisp_token_piece_ex(tok, win[i], WISP_PIECE_SPECIAL, out + at, cap - at);
    out[at] = 0;
}

static const char PAIR[] =
    "{\"prompt\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"What color is "
    "the sky?\"}], \"chosen\": [{\"role\": \"assistant\", \"content\": \"It is blue.\"}], \"rejected\": [{\"role\": "
    "\"assistant\", \"content\": \"It is green.\"}]}\n";

/* Each side's window equals the template's renderings tokenized: BOS when the model adds one, the prompt with
 * the generation prompt, then the answer's text after it and EOS, only those scored. */
static void chatml_pair(const wisp_tokenizer *tok, const wisp_data_chat *chat) {
    const wisp_chat_message msgs[3] = {{.role = "system", .role_len = 6, .content = "Be brief.", .content_len = 9},
                                       {.role = "user", .role_len = 4, .content = "What color is the sky?", .content_len = 22},
                                       {.role = "assistant", .role_len = 9, .content = "It is blue.", .content_len = 11}};
    wisp_chat_message other[3] = {msgs[0], msgs[1], {.role = "assistant", .role_len = 9, .content = "It is green.", .content_len = 12}};
    char prompt[512], full[512];
    size_t plen = render(chat, msgs, 2, true, prompt, sizeof prompt), flen = render(chat, msgs, 3, false, full, sizeof full);
    prompt[plen] = 0;
    CHECK(strcmp(prompt, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat color is the sky?<|im_end|>\n"
                         "<|im_start|>assistant\n") == 0, "the ChatML prompt renders as [%s]", prompt);
    REQUIRE(flen > plen && memcmp(prompt, full, plen) == 0, "prompt + answer starts with the prompt");
    for (int k = 0; k < 2; k++) {
        const wisp_chat_message *m = k == 0 ? msgs : other;
        flen = render(chat, m, 3, false, full, sizeof full);
        /* the expected ids: the prompt's rendering and the answer's rest, each tokenized with its special tokens */
        int32_t *pid = NULL, *aid = NULL, want[128];
        size_t np = 0, na = 0, n = 0;
        wisp_error err = {0};
        REQUIRE(!encode_alloc(tok, full, plen, WISP_TOKENIZE_PARSE_SPECIAL, &pid, &np, &err), "%s", err.message);
        REQUIRE(!encode_alloc(tok, full + plen, flen - plen, WISP_TOKENIZE_PARSE_SPECIAL, &aid, &na, &err), "%s", err.message);
        if (wisp_tokenizer_add_bos_default(tok) && wisp_tokenizer_bos(tok) >= 0) want[n++] = wisp_tokenizer_bos(tok);
        size_t n_unscored = n + np;
        for (size_t i = 0; i < np; i++) want[n++] = pid[i];
        for (size_t i = 0; i < na; i++) want[n++] = aid[i];
        want[n++] = wisp_tokenizer_eos(tok);
        free(pid);
        free(aid);
        side e;
        wisp_status s = build_side(&e, tok, PAIR, k == 0 ? WISP_PAIR_CHOSEN : WISP_PAIR_REJECTED, chat, &err);
        CHECK(s == WISP_OK, "side %d: %s", k, err.message);
        if (!s) {
            int32_t win[128];
            uint8_t mask[128];
            wisp_data_get(&e.d, WISP_SPLIT_TRAIN, 0, win, mask);
            size_t bad = n;
            for (size_t i = 0; i < n && bad == n; i++)
                if (win[i] != want[i] || mask[i] != (i >= n_unscored)) bad = i;
            CHECK(e.d.n_examples == 1 && bad == n, "side %d: id %zu is %d (mask %d), the renderings give %d (mask %d)", k,
                  bad, bad < n ? win[bad] : -1, bad < n ? mask[bad] : -1, bad < n ? want[bad] : -1, bad < n ? bad >= n_unscored : -1);
            CHECK(e.d.n_scored == (int64_t)(na + 1), "side %d: %lld scored, the answer's %zu ids and EOS", k,
                  (long long)e.d.n_scored, na);
            printf("side %d: %zu prompt ids, %zu answer ids + EOS, as the template's texts tokenize\n", k, n_unscored, na);
        }
        data_memory_free(&e.mem);
    }
}

/* A generation prompt that opens "<think>\n" which the answers' renderings do not all have: the shared prompt
 * is cut to what every rendering starts with, so the chosen answer (which writes the block itself) keeps it. */
static void think_pair(const wisp_tokenizer *tok) {
    void *mem = NULL;
    wisp_data_chat chat = {template_load("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
                                         "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}",
                                         &mem),
                           NULL, NULL, 2024, 7, 26};
    REQUIRE(chat.tpl, "think template");
    const char *pair = "{\"prompt\": [{\"role\": \"user\", \"content\": \"Sky?\"}], \"chosen\": [{\"role\": \"assistant\", "
                       "\"content\": \"<think>\\nIt is blue.\"}], \"rejected\": [{\"role\": \"assistant\", \"content\": "
                       "\"It is green.\"}]}\n";
    const char *want[2] = {"<think>\nIt is blue.<|im_end|>\n", "It is green.<|im_end|>\n"};
    for (int k = 0; k < 2; k++) {
        side e;
        wisp_error err = {0};
        wisp_status s = build_side(&e, tok, pair, k == 0 ? WISP_PAIR_CHOSEN : WISP_PAIR_REJECTED, &chat, &err);
        CHECK(s == WISP_OK, "think side %d: %s", k, err.message);
        if (!s) {
            char got[256], expect[256];
            scored_text(&e, tok, got, sizeof got);
            wisp_str eos = wisp_token_text(tok, wisp_tokenizer_eos(tok));
            snprintf(expect, sizeof expect, "%s%.*s", want[k], (int)eos.len, eos.ptr);
            CHECK(strcmp(got, expect) == 0, "think side %d scores [%s], trl's answer is [%s]", k, got, expect);
        }
        data_memory_free(&e.mem);
    }
    free(mem);
}

/* The records DPO's sides are made of, given directly: trl's conversational prompt/completion (SFT data). */
static void prompt_completion(const wisp_tokenizer *tok, const wisp_data_chat *chat) {
    const char *rec = "{\"prompt\": [{\"role\": \"user\", \"content\": \"Sky?\"}], \"completion\": [{\"role\": "
                      "\"assistant\", \"content\": \"It is blue.\"}]}\n";
    wisp_data_options o = {WISP_DATA_JSONL, WISP_DOCS_FILE, 127, 0, 1, 0, false};
    wisp_data_plan_info info;
    wisp_error err = {0};
    side e;
    memset(&e, 0, sizeof e);
    wisp_status s = wisp_data_plan_chat(tok, rec, strlen(rec), &o, chat, &info, &err);
    if (!s) {
        data_memory_alloc(&e.mem, &info);
        s = wisp_data_build_chat(&e.d, tok, rec, strlen(rec), &o, &e.mem, chat, &err);
    }
    CHECK(s == WISP_OK, "prompt/completion record: %s", err.message);
    if (!s) {
        char got[256], expect[256];
        scored_text(&e, tok, got, sizeof got);
        wisp_str eos = wisp_token_text(tok, wisp_tokenizer_eos(tok));
        snprintf(expect, sizeof expect, "It is blue.<|im_end|>\n%.*s", (int)eos.len, eos.ptr);
        CHECK(strcmp(got, expect) == 0, "prompt/completion scores [%s], expected [%s]", got, expect);
    }
    data_memory_free(&e.mem);
    /* a key such a record does not have, and an answer that is not a list of messages: named */
    const char *bad[2][2] = {
        {"{\"prompt\": [{\"role\": \"user\", \"content\": \"Sky?\"}], \"completion\": [], \"score\": 1}\n", "key \"score\""},
        {"{\"prompt\": [{\"role\": \"user\", \"content\": \"Sky?\"}], \"completion\": \"blue\"}\n",
         "\"completion\" must be a list of messages"}};
    for (int i = 0; i < 2; i++) {
        memset(&e, 0, sizeof e);
        s = wisp_data_plan_chat(tok, bad[i][0], strlen(bad[i][0]), &o, chat, &info, &err);
        if (!s) {
            data_memory_alloc(&e.mem, &info);
            s = wisp_data_build_chat(&e.d, tok, bad[i][0], strlen(bad[i][0]), &o, &e.mem, chat, &err);
            data_memory_free(&e.mem);
        }
        CHECK(s != WISP_OK && strstr(err.message, bad[i][1]) && strstr(err.message, "line 1"),
              "bad record %d: [%s], expected it to say [%s]", i, err.message, bad[i][1]);
    }
}

static void refusals(const wisp_tokenizer *tok, const wisp_data_chat *chat) {
    struct {
        const char *line, *says;
        bool with_chat;
    } cases[] = {
        {"{\"prompt\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Well\"}], "
         "\"chosen\": [{\"role\": \"assistant\", \"content\": \"a\"}], \"rejected\": [{\"role\": \"assistant\", \"content\": \"b\"}]}\n",
         "continuation of a final assistant message is not implemented", true},
        {"{\"prompt\": \"Hi\", \"chosen\": [{\"role\": \"assistant\", \"content\": \"a\"}], \"rejected\": \"b\"}\n",
         "all be strings or all be lists", true},
        {PAIR, "needs a chat template", false},
        {"{\"prompt\": [], \"chosen\": [{\"role\": \"assistant\", \"content\": \"a\"}], \"rejected\": [{\"role\": \"assistant\", \"content\": \"b\"}]}\n",
         "the prompt has no messages", true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        side e;
        wisp_error err = {0};
        wisp_status s = build_side(&e, tok, cases[i].line, WISP_PAIR_CHOSEN, cases[i].with_chat ? chat : NULL, &err);
        CHECK(s != WISP_OK && strstr(err.message, cases[i].says), "case %zu: [%s], expected it to say [%s]", i, err.message,
              cases[i].says);
        data_memory_free(&e.mem);
    }
}

static void all(void) {
    const char *path = shared_path(VOCAB_DIR "/ggml-vocab-smollm2.gguf");
    REQUIRE(path, VOCAB_DIR "/ggml-vocab-smollm2.gguf missing under WISP_SHARED");
    loaded_vocab v;
    REQUIRE(!load_vocab(&v, path), "load %s", path);
    void *tmem = NULL;
    wisp_data_chat chat = {template_load(wisp_chat_format_find("chatml")->template, &tmem), NULL, NULL, 2024, 7, 26};
    REQUIRE(chat.tpl, "chatml parses");
    chatml_pair(&v.tok, &chat);
    think_pair(&v.tok);
    prompt_completion(&v.tok, &chat);
    refusals(&v.tok, &chat);
    free(tmem);
    free_vocab(&v);
}

int main(void) {
    all();
    return check_report("test_train_dpo_chat");
}
