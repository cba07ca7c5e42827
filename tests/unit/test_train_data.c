/* The training data pipeline: plain text packed into BOS-led windows with
 * EOS after each document (whole file or blank-line paragraphs), long texts
 * tokenized in pieces exactly as in one go, JSONL records with masks on the
 * response only (prompt/completion and the Alpaca template), the held-out
 * split, deterministic shuffling per epoch, and cursors that resume. */
#include <stdio.h>

#include "data_memory.h"
#include "test_train_util.h"
#include "train_data.h"

typedef struct data_env {
    wisp_train_data d;
    wisp_data_memory mem;
} data_env;

static bool build(data_env *e, const wisp_tokenizer *tok, const char *text, const wisp_data_options *o, wisp_error *err) {
    wisp_data_plan_info info;
    memset(e, 0, sizeof *e);
    if (wisp_data_plan(tok, text, strlen(text), o, &info, err)) return false;
    data_memory_alloc(&e->mem, &info);
    return !wisp_data_build(&e->d, tok, text, strlen(text), o, &e->mem, err);
}

static void release(data_env *e) {
    data_memory_free(&e->mem);
}

static size_t tokenize(const wisp_tokenizer *tok, const char *s, int32_t *ids, size_t cap) {
    size_t n = 0, scratch = wisp_tokenizer_scratch_bytes(tok, strlen(s));
    void *buf = malloc(scratch);
    wisp_error err = {0};
    wisp_tokenize(tok, s, strlen(s), 0, ids, cap, &n, buf, scratch, &err);
    free(buf);
    return n;
}

static const char STORY[] =
    "Once upon a time, there was a little dog.\nHe liked to run.\n\n\n"
    "One day the dog saw a big red ball. It was shiny!\n  \n"
    "The end.\n";

static void check_text(const wisp_tokenizer *tok) {
    int32_t bos = wisp_tokenizer_bos(tok), eos = wisp_tokenizer_eos(tok);
    wisp_data_options o = {WISP_DATA_TEXT, WISP_DOCS_BLANK_LINE, 8, 0, 1, 0, false};
    data_env e;
    wisp_error err = {0};
    REQUIRE(build(&e, tok, STORY, &o, &err), "build: %s", err.message);
    /* the stream: each paragraph's ids, then EOS */
    const char *paras[3] = {"Once upon a time, there was a little dog.\nHe liked to run.",
                            "One day the dog saw a big red ball. It was shiny!", "The end."};
    int32_t want[256];
    size_t n = 0;
    for (int i = 0; i < 3; i++) {
        n += tokenize(tok, paras[i], want + n, 256 - n);
        want[n++] = eos;
    }
    CHECK(e.d.n_tokens == n && memcmp(e.mem.tokens, want, n * sizeof(int32_t)) == 0, "paragraph stream (%zu vs %zu ids)",
          e.d.n_tokens, n);
    /* windows: BOS then 8 stream ids each, every stream id scored once, the tail padded */
    int32_t n_win = wisp_data_count(&e.d, WISP_SPLIT_TRAIN), ids[9];
    uint8_t mask[9];
    CHECK(n_win == (int32_t)((n + 7) / 8), "%d windows for %zu ids", n_win, n);
    size_t scored = 0;
    for (int32_t w = 0; w < n_win; w++) {
        wisp_data_get(&e.d, WISP_SPLIT_TRAIN, w, ids, mask);
        CHECK(ids[0] == bos && mask[0] == 0, "window %d starts with BOS", w);
        for (int k = 1; k < 9; k++) {
            size_t at = (size_t)w * 8 + (size_t)k - 1;
            if (at < n) CHECK(ids[k] == want[at] && mask[k] == 1, "window %d id %d", w, k);
            else CHECK(mask[k] == 0, "padding is not scored");
            scored += mask[k];
        }
    }
    CHECK(scored == n, "each stream id is a target once (%zu of %zu)", scored, n);
    release(&e);

    /* the whole file as one document; long texts in small pieces give the same ids */
    o.docs = WISP_DOCS_FILE;
    char big[6000];
    size_t len = 0;
    while (len + sizeof STORY < sizeof big) memcpy(big + len, STORY, sizeof STORY - 1), len += sizeof STORY - 1;
    big[len] = 0;
    data_env one, pieces;
    REQUIRE(build(&one, tok, big, &o, &err), "build: %s", err.message);
    o.piece_bytes = 50;
    REQUIRE(build(&pieces, tok, big, &o, &err), "build: %s", err.message);
    CHECK(one.d.n_tokens == pieces.d.n_tokens &&
              memcmp(one.mem.tokens, pieces.mem.tokens, one.d.n_tokens * sizeof(int32_t)) == 0,
          "tokenizing in 50-byte pieces changes the ids (%zu vs %zu)", one.d.n_tokens, pieces.d.n_tokens);
    CHECK(one.mem.tokens[one.d.n_tokens - 1] == eos, "the file ends with EOS");
    release(&one), release(&pieces);
}

static void check_jsonl(const wisp_tokenizer *tok) {
    const char *jsonl = "{\"prompt\": \"Q: What is red?\\nA:\", \"completion\": \" The ball.\"}\n"
                        "\n"
                        "{\"instruction\": \"Name a color.\", \"input\": \"\", \"output\": \"Blue\"}\n"
                        "{\"instruction\": \"Add.\", \"input\": \"2 and 3\", \"output\": \"5\"}\n";
    wisp_data_options o = {WISP_DATA_JSONL, WISP_DOCS_FILE, 200, 0, 1, 0, false};
    data_env e;
    wisp_error err = {0};
    REQUIRE(build(&e, tok, jsonl, &o, &err), "build: %s", err.message);
    CHECK(wisp_data_count(&e.d, WISP_SPLIT_TRAIN) == 3, "3 records");
    int32_t ids[201];
    uint8_t mask[201];
    char text[1024];
    const char *prompts[3] = {
        "Q: What is red?\nA:",
        "Below is an instruction that describes a task. Write a response that appropriately completes the "
        "request.\n\n### Instruction:\nName a color.\n\n### Response:\n",
        "Below is an instruction that describes a task, paired with an input that provides further context. Write a "
        "response that appropriately completes the request.\n\n### Instruction:\nAdd.\n\n### Input:\n2 and "
        "3\n\n### Response:\n"};
    const char *responses[3] = {" The ball.", "Blue", "5"};
    for (int r = 0; r < 3; r++) {
        wisp_data_get(&e.d, WISP_SPLIT_TRAIN, r, ids, mask);
        int32_t first = -1, last = -1;
        for (int k = 0; k < 201; k++)
            if (mask[k]) last = k, first = first < 0 ? k : first;
        REQUIRE(first > 0, "record %d has scored ids", r);
        size_t n = wisp_detokenize(tok, ids + 1, (size_t)first - 1, WISP_DETOKENIZE_STRIP_PREFIX, text, sizeof text);
        text[n < sizeof text ? n : sizeof text - 1] = 0;
        CHECK(strcmp(text, prompts[r]) == 0, "record %d prompt is '%s'", r, text);
        CHECK(ids[last] == wisp_tokenizer_eos(tok), "record %d: the last scored id is EOS", r);
        n = wisp_detokenize(tok, ids + first, (size_t)(last - first), 0, text, sizeof text);
        text[n] = 0;
        CHECK(strcmp(text, responses[r]) == 0, "record %d response is '%s'", r, text);
    }
    release(&e);

    const char *bad[] = {"{\"prompt\": \"x\"}\n", "{\"prompt\": \"a\", \"completion\": \"b\"}\n[1, 2]\n",
                         "{\"prompt\": \"a\", \"completion\": \"b\"}\n{\"prompt\": \"a\", \"completion\": 3}\n",
                         "{\"instruction\": \"a\", \"input\": 3, \"output\": \"b\"}\n", "{\"prompt\": \"a\",\n", "\n \n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        CHECK(!build(&e, tok, bad[i], &o, &err) && err.message[0], "bad JSONL %zu accepted", i);
        CHECK(i == 0 || i == 5 || strstr(err.message, "line"), "bad JSONL %zu: message '%s' names no line", i, err.message);
        release(&e);
    }
}

static void check_order(const wisp_tokenizer *tok) {
    char text[4000];
    size_t len = 0;
    for (int i = 0; i < 60; i++) len += (size_t)snprintf(text + len, sizeof text - len, "Story number %d was about a cat.\n", i);
    wisp_data_options o = {WISP_DATA_TEXT, WISP_DOCS_FILE, 16, 0.2f, 42, 0, false};
    data_env e;
    wisp_error err = {0};
    REQUIRE(build(&e, tok, text, &o, &err), "build: %s", err.message);
    int32_t n_train = wisp_data_count(&e.d, WISP_SPLIT_TRAIN), n_val = wisp_data_count(&e.d, WISP_SPLIT_VAL);
    CHECK(n_val > 0 && n_val == (int32_t)((n_train + n_val) * 0.2f + 0.999f), "held out %d of %d", n_val, n_train + n_val);
    /* two epochs: each visits the windows of a permutation, different from each other */
    int32_t *seen = calloc((size_t)n_train, sizeof(int32_t)), *epoch0 = calloc((size_t)n_train, sizeof(int32_t));
    int32_t ids[17], want_ids[17];
    uint8_t mask[17], want_mask[17];
    bool follows_order = true;
    for (int epoch = 0; epoch < 2; epoch++) {
        for (int32_t i = 0; i < n_train; i++) {
            wisp_data_next(&e.d, 1, ids, mask);
            int32_t w = e.mem.order[i];
            wisp_data_get(&e.d, WISP_SPLIT_TRAIN, w, want_ids, want_mask);
            follows_order &= memcmp(ids, want_ids, sizeof ids) == 0 && memcmp(mask, want_mask, sizeof mask) == 0;
            seen[w]++;
        }
        if (epoch == 0) memcpy(epoch0, e.mem.order, sizeof(int32_t) * (size_t)n_train);
    }
    bool each_twice = true;
    for (int32_t w = 0; w < n_train; w++) each_twice &= seen[w] == 2;
    CHECK(follows_order, "next() gives the windows of the epoch's permutation");
    CHECK(each_twice, "every training window once per epoch");
    CHECK(memcmp(epoch0, e.mem.order, sizeof(int32_t) * (size_t)n_train) != 0, "the second epoch is shuffled differently");
    free(epoch0);
    CHECK(wisp_data_consumed(&e.d) == 2 * n_train, "consumed %lld", (long long)wisp_data_consumed(&e.d));

    /* a cursor taken mid-epoch continues identically in a fresh pipeline */
    int32_t a[5 * 17], b[5 * 17];
    uint8_t ma[5 * 17], mb[5 * 17];
    wisp_data_next(&e.d, 3, a, ma);
    wisp_data_cursor c = wisp_data_cursor_get(&e.d);
    wisp_data_next(&e.d, 5, a, ma);
    data_env f;
    REQUIRE(build(&f, tok, text, &o, &err), "build: %s", err.message);
    CHECK(!wisp_data_cursor_set(&f.d, c, &err), "cursor: %s", err.message);
    wisp_data_next(&f.d, 5, b, mb);
    CHECK(memcmp(a, b, sizeof a) == 0 && memcmp(ma, mb, sizeof ma) == 0, "a restored cursor gives other windows");
    c.pos = n_train + 1;
    CHECK(wisp_data_cursor_set(&f.d, c, &err) == WISP_ERR_ARG, "an impossible cursor is refused");
    o.val_split = 0.999f;
    data_env g;
    CHECK(!build(&g, tok, text, &o, &err) && strstr(err.message, "none to train"), "all held out: %s", err.message);
    release(&g);
    free(seen);
    release(&e), release(&f);
}

static void check_all(const char *path) {
    train_env env = {0};
    wisp_config cfg = wisp_config_default();
    cfg.n_ctx = 8;
    REQUIRE(train_open(&env, path, &cfg), "open");
    const wisp_tokenizer *tok = wisp_ctx_tokenizer(env.ctx);
    check_text(tok);
    check_jsonl(tok);
    check_order(tok);
    train_close(&env);
}

int main(void) {
    check_all(shared_path_or_skip("test_train_data", "models/stories260K.gguf"));
    return check_report("test_train_data");
}
