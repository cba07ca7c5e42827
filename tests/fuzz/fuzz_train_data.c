/* libFuzzer harness: arbitrary bytes as LoRA training data, plain text or
 * JSONL. The first byte picks the options (format, document splitting,
 * window length, validation split, seed, packing of JSONL records); the rest
 * is the file. Plan, build the index in exactly the planned memory, then draw
 * batches across epochs,
 * read every validation example, and move the cursor back and forth. Every
 * id handed out must be inside the vocabulary. The tokenizer is a real
 * vocabulary GGUF named by WISP_FUZZ_VOCAB. JSONL also takes conversations
 * ({"messages"}), rendered with the built-in ChatML format. */
#include <stdlib.h>
#include <string.h>

#include "chat_formats.h"
#include "fuzz_util.h"
#include "train_data.h"

static unsigned char *vocab_file;
static wisp_gguf vocab_g;
static wisp_tokenizer tok;

static void load_vocab(void) {
    const char *path = getenv("WISP_FUZZ_VOCAB");
    size_t n, bytes;
    wisp_error err = {0};
    if (!path || !(vocab_file = fuzz_slurp(path, &n)) || wisp_gguf_open(&vocab_g, vocab_file, n, &err) ||
        wisp_tokenizer_plan(&vocab_g, &bytes, &err)) {
        fprintf(stderr, "fuzz_train_data: set WISP_FUZZ_VOCAB to a model or vocabulary GGUF (%s)\n", err.message);
        abort();
    }
    void *tables = aligned_alloc(64, (bytes + 64) & ~(size_t)63);
    wisp_arena a;
    wisp_arena_init(&a, tables, bytes);
    if (wisp_tokenizer_init(&tok, &vocab_g, &a, &err)) {
        fprintf(stderr, "fuzz_train_data: %s: %s\n", path, err.message);
        abort();
    }
}

static wisp_data_chat chat;

static void load_chat(void) {
    const char *src = wisp_chat_format_find("chatml")->template;
    size_t bytes = 0;
    wisp_error err = {0};
    void *mem = NULL;
    if (wisp_template_plan(src, strlen(src), NULL, &bytes, &err) || !(mem = fuzz_exact(bytes)) ||
        wisp_template_init(&chat.tpl, mem, bytes, src, strlen(src), NULL, &err)) {
        fprintf(stderr, "fuzz_train_data: chatml: %s\n", err.message);
        abort();
    }
    chat.year = 2024, chat.month = 7, chat.day = 26;
}

static void check_ids(const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= wisp_tokenizer_n_vocab(&tok)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!vocab_file) load_vocab();
    if (!chat.tpl) load_chat();
    if (size < 1) return 0;
    static const float splits[4] = {0.0f, 0.1f, 0.5f, 0.9f};
    uint8_t o = data[0];
    wisp_data_options opt = {(o & 1) ? WISP_DATA_JSONL : WISP_DATA_TEXT,
                             (o & 2) ? WISP_DOCS_BLANK_LINE : WISP_DOCS_FILE,
                             1 + ((o >> 2) & 15) * 3,
                             splits[(o >> 6) & 3],
                             o,
                             (o & 0x20) ? 16 : 0,
                             (o & 0x10) != 0};
    size_t n = size - 1;
    char *text = fuzz_exact(n);
    memcpy(text, data + 1, n);
    wisp_data_plan_info info;
    wisp_error err;
    const wisp_data_chat *conv = opt.format == WISP_DATA_JSONL ? &chat : NULL;
    if ((conv ? wisp_data_plan_chat(&tok, text, n, &opt, conv, &info, &err) : wisp_data_plan(&tok, text, n, &opt, &info, &err)) ==
        WISP_OK) {
        wisp_data_memory m = {fuzz_exact(info.max_tokens * sizeof(int32_t)), info.max_tokens,
                              fuzz_exact(info.max_examples * sizeof(wisp_data_example)),
                              fuzz_exact(info.max_examples * sizeof(int32_t)), info.max_examples,
                              fuzz_exact(info.json_nodes * sizeof(wisp_json_node)), info.json_nodes,
                              fuzz_exact(info.text_bytes), info.text_bytes,
                              fuzz_exact(info.tok_scratch), info.tok_scratch};
        wisp_train_data d;
        /* the text need not outlive the build: free it first, so a later read of it is caught */
        wisp_status built = conv ? wisp_data_build_chat(&d, &tok, text, n, &opt, &m, conv, &err)
                              : wisp_data_build(&d, &tok, text, n, &opt, &m, &err);
        free(text);
        text = NULL;
        if (built == WISP_OK) {
            size_t width = (size_t)opt.seq_len + 1;
            int32_t *ids = fuzz_exact(3 * width * sizeof(int32_t));
            uint8_t *mask = fuzz_exact(3 * width);
            int32_t n_train = wisp_data_count(&d, WISP_SPLIT_TRAIN), n_val = wisp_data_count(&d, WISP_SPLIT_VAL);
            if (n_train > 0) {
                for (int k = 0; k < 4; k++) {
                    wisp_data_next(&d, 3, ids, mask);
                    check_ids(ids, 3 * width);
                }
                wisp_data_cursor c = wisp_data_cursor_get(&d);
                wisp_data_next(&d, 2, ids, mask);
                if (wisp_data_cursor_set(&d, c, &err)) abort(); /* a cursor it gave must be accepted */
                c.pos = -1;
                (void)wisp_data_cursor_set(&d, c, &err);
            }
            for (int32_t i = 0; i < n_val && i < 64; i++) {
                wisp_data_get(&d, WISP_SPLIT_VAL, i, ids, mask);
                check_ids(ids, width);
            }
            free(ids);
            free(mask);
        }
        free(m.tokens), free(m.examples), free(m.order), free(m.nodes), free(m.text), free(m.tok_scratch);
    }
    free(text);
    return 0;
}
