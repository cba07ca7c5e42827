/* Packing JSONL records into shared windows (adapters/train_data.h, trl's
 * `packing`): the windows are checked id by id and mask bit by mask bit
 * against a stream rebuilt here from the same records built unpacked (each
 * record's ids and mask, its first id unscored, EOS after it unless it ends
 * with EOS), cut into windows of seq_len + 1 ids overlapping by one. The
 * counts are exact: windows = ceil((stream - 1) / seq_len), scored targets the
 * same as unpacked, nothing truncated; plain text with packing is refused. */
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

static wisp_status build(env *e, const wisp_tokenizer *tok, const char *text, int32_t seq_len, bool packing,
                         const wisp_data_chat *chat, wisp_error *err) {
    wisp_data_options o = {WISP_DATA_JSONL, WISP_DOCS_FILE, seq_len, 0, 1, 0, packing};
    wisp_data_plan_info info;
    memset(e, 0, sizeof *e);
    wisp_status s = chat ? wisp_data_plan_chat(tok, text, strlen(text), &o, chat, &info, err)
                         : wisp_data_plan(tok, text, strlen(text), &o, &info, err);
    if (s) return s;
    data_memory_alloc(&e->mem, &info);
    return chat ? wisp_data_build_chat(&e->d, tok, text, strlen(text), &o, &e->mem, chat, err)
                : wisp_data_build(&e->d, tok, text, strlen(text), &o, &e->mem, err);
}

static void release(env *e) {
    data_memory_free(&e->mem);
}

#define WIDE 512 /* a window no record here reaches: the unpacked reference is never cut */
#define MAX_STREAM 4096

/* Packs `data` with seq_len S and compares every window with the stream rebuilt from the unpacked records. */
static void check_packed(const wisp_tokenizer *tok, const char *what, const char *data, int32_t S, const wisp_data_chat *chat) {
    env ref, packed;
    wisp_error err = {0};
    REQUIRE(!build(&ref, tok, data, WIDE, false, chat, &err), "%s unpacked: %s", what, err.message);
    CHECK(ref.d.n_truncated == 0, "%s: the reference is not cut", what);
    static int32_t stream[MAX_STREAM], ids[WIDE + 1];
    static uint8_t smask[MAX_STREAM], mask[WIDE + 1];
    size_t n = 0;
    int64_t scored = 0;
    int32_t eos = wisp_tokenizer_eos(tok), records = wisp_data_count(&ref.d, WISP_SPLIT_TRAIN);
    for (int32_t r = 0; r < records; r++) {
        wisp_data_get(&ref.d, WISP_SPLIT_TRAIN, r, ids, mask);
        size_t len = ref.mem.examples[r].len;
        REQUIRE(n + len + 1 <= MAX_STREAM, "%s: stream too long for the test", what);
        for (size_t i = 0; i < len; i++) stream[n + i] = ids[i], smask[n + i] = i > 0 && mask[i];
        n += len;
        if (eos >= 0 && stream[n - 1] != eos) stream[n] = eos, smask[n++] = 0;
    }
    for (size_t i = 0; i < n; i++) scored += smask[i];
    CHECK(scored == ref.d.n_scored, "%s: the stream scores %lld targets, unpacked %lld", what, (long long)scored,
          (long long)ref.d.n_scored);

    REQUIRE(!build(&packed, tok, data, S, true, chat, &err), "%s packed: %s", what, err.message);
    int32_t want_windows = (int32_t)((n - 1 + (size_t)S - 1) / (size_t)S);
    CHECK(wisp_data_count(&packed.d, WISP_SPLIT_TRAIN) == want_windows, "%s: %d windows, want %d (stream of %zu ids, S %d)",
          what, wisp_data_count(&packed.d, WISP_SPLIT_TRAIN), want_windows, n, S);
    CHECK(packed.d.n_records == records, "%s: %d records packed, want %d", what, packed.d.n_records, records);
    CHECK(packed.d.n_truncated == 0, "%s: packing cuts nothing (%d cut)", what, packed.d.n_truncated);
    CHECK(packed.d.n_scored == scored, "%s: packed scores %lld, want %lld", what, (long long)packed.d.n_scored, (long long)scored);
    int64_t window_scored = 0;
    for (int32_t w = 0; w < wisp_data_count(&packed.d, WISP_SPLIT_TRAIN); w++) {
        wisp_data_get(&packed.d, WISP_SPLIT_TRAIN, w, ids, mask);
        size_t at = (size_t)w * (size_t)S;
        for (size_t j = 0; j <= (size_t)S; j++) {
            bool in = at + j < n;
            int32_t want_id = in ? stream[at + j] : packed.d.pad;
            uint8_t want_mask = in && j > 0 ? smask[at + j] : 0;
            if (j > 0) window_scored += mask[j];
            if (ids[j] != want_id || (j > 0 && mask[j] != want_mask)) {
                CHECK(false, "%s: window %d position %zu: id %d mask %d, want %d %d", what, w, j, ids[j], mask[j], want_id, want_mask);
                w = INT32_MAX - 1;
                break;
            }
        }
    }
    CHECK(window_scored == scored, "%s: the windows score %lld targets, want %lld (each exactly once)", what,
          (long long)window_scored, (long long)scored);
    release(&ref), release(&packed);
}

int main(void) {
    const char *path = shared_path(VOCAB_DIR "/ggml-vocab-smollm2.gguf");
    if (!path) {
        fprintf(stderr, "FAIL test_train_packing: " VOCAB_DIR "/ggml-vocab-smollm2.gguf missing under WISP_SHARED\n");
        return 1;
    }
    loaded_vocab v;
    if (load_vocab(&v, path)) return 1;
    void *tmem = NULL;
    wisp_data_chat chat = {template_load(wisp_chat_format_find("chatml")->template, &tmem), NULL, NULL, 2024, 7, 26};
    CHECK(chat.tpl != NULL, "chatml parses");
    if (!chat.tpl) return check_report("test_train_packing");
    const char *chats =
        "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"},"
        " {\"role\": \"assistant\", \"content\": \"Hello there.\"}, {\"role\": \"user\", \"content\": \"Name a colour.\"},"
        " {\"role\": \"assistant\", \"content\": \"Red.\"}]}\n"
        "{\"messages\": [{\"role\": \"user\", \"content\": \"2+2?\"}, {\"role\": \"assistant\", \"content\": \"4\"}]}\n"
        "\n"
        "{\"messages\": [{\"role\": \"user\", \"content\": \"A long question about the weather in the mountains "
        "in winter, when it snows for days?\"}, {\"role\": \"assistant\", \"content\": \"Cold, windy and white, "
        "with the passes closed.\"}]}\n";
    /* windows shorter than a record, about one record, longer than all of them together */
    const int32_t lens[] = {5, 16, 23, 64, 300};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "conversations, seq_len %d", lens[i]);
        check_packed(&v.tok, what, chats, lens[i], &chat);
    }
    const char *records = "{\"prompt\": \"Q: What is red?\\nA:\", \"completion\": \" The ball.\"}\n"
                          "{\"instruction\": \"Name a color.\", \"input\": \"\", \"output\": \"Blue\"}\n"
                          "{\"prompt\": \"\", \"completion\": \"Only an answer.\"}\n"
                          "{\"instruction\": \"Add.\", \"input\": \"2 and 3\", \"output\": \"5\"}\n";
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "prompt/completion, seq_len %d", lens[i]);
        check_packed(&v.tok, what, records, lens[i], NULL);
    }
    /* plain text is always packed: asking for packing there is refused, by name */
    wisp_data_options o = {WISP_DATA_TEXT, WISP_DOCS_FILE, 8, 0, 1, 0, true};
    wisp_train_data d;
    wisp_data_memory none = {0};
    wisp_error err = {0};
    CHECK(wisp_data_build(&d, &v.tok, "some text", 9, &o, &none, &err) == WISP_ERR_ARG && strstr(err.message, "packing"),
          "plain text with packing: '%s'", err.message);
    free(tmem);
    free_vocab(&v);
    return check_report("test_train_packing");
}
