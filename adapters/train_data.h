/* Training data for LoRA fine-tuning: bytes of a file in, fixed-size
 * windows of token ids and loss masks out, in a deterministic shuffled
 * order that can be saved and resumed. Freestanding (the browser and the
 * firmware reuse it): every array lives in caller memory sized by
 * wisp_data_plan, and nothing is allocated.
 *
 * Formats
 *  - Plain text. Documents are the whole input (WISP_DOCS_FILE, the default:
 *    one file is one document) or paragraphs separated by one or more blank
 *    lines (WISP_DOCS_BLANK_LINE). Documents are tokenized and joined into one
 *    stream with EOS after each, then cut into windows: each window is BOS
 *    (when the model has one, as at the start of its own training documents)
 *    followed by the next seq_len tokens of the stream, every one of them a
 *    scored target, so each stream token is predicted exactly once, as by
 *    `wisp perplexity`. The last window is padded (padding is not scored).
 *  - JSONL: one JSON object per line, {"prompt", "completion"} or
 *    {"instruction", "input" (optional), "output"}. A record is one window:
 *    BOS + prompt + response + EOS, truncated to seq_len + 1 tokens or
 *    padded; only the response and its EOS are scored. Instruction records
 *    use the Alpaca template:
 *        Below is an instruction that describes a task[, paired with an input
 *        that provides further context]. Write a response that appropriately
 *        completes the request.\n\n### Instruction:\n{instruction}\n\n
 *        [### Input:\n{input}\n\n]### Response:\n{output}
 *    and prompt/completion records are the plain concatenation (put any
 *    separating space at the start of the completion, as OpenAI's format does).
 *  - JSONL conversations, {"messages": [{"role", "content"}, ...]} (OpenAI /
 *    trl style), with wisp_data_plan_chat/wisp_data_build_chat and a chat
 *    template: the record is the template's rendering (BOS first unless the
 *    template writes it) and only assistant turns are scored, each from where
 *    the generation prompt ends to the end of the turn (its end-of-turn marker
 *    included), as trl's assistant-only loss. A template that does not render
 *    the conversation turn by turn (a prefix per turn) is an error.
 *
 * Truncation is counted, never silent: a record longer than seq_len + 1 ids
 * is cut (n_truncated), and one left with no scored target after the cut
 * (n_unscored) is dropped for conversations; prompt/completion records keep
 * their window (it scores nothing) but are counted the same way.
 *
 * Packing (JSONL, opt.packing; trl's SFT `packing` in its classic, wrapped
 * form): the kept records are joined into one stream, each followed by EOS
 * (when the model has one) unless it already ends with it (that separator is
 * not scored: the record's
 * own end, its response's EOS or its turn's end marker, is), and the stream is
 * cut into windows of seq_len + 1 ids that overlap by one id, so every stream
 * id after the first is a target exactly once. Each record keeps its own mask
 * (a conversation's assistant turns only), so no scored target belongs to
 * another record than the one it is predicted in, and the first id of every
 * record is unscored. Attention DOES cross record boundaries inside a window
 * (positions are not reset), as in trl's default packing, and a record that
 * does not fit the rest of a window continues in the next one: nothing is
 * truncated (n_truncated stays 0). The last window is padded.
 *
 * Long texts are tokenized in pieces that end after a run of newlines (so
 * no token spans a cut), without SentencePiece's leading space on pieces
 * that continue a text.
 *
 * Validation: with val_split F, the last ceil(F x examples) examples (windows
 * or records, in file order) are held out; a separate validation file is
 * simply a second wisp_train_data used whole.
 *
 * Order: epoch e visits the training examples in a permutation drawn from
 * (seed, e). The cursor (epoch, position) is two integers. */
#ifndef WISP_TRAIN_DATA_H
#define WISP_TRAIN_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "status.h"
#include "template.h"
#include "tokenizer.h"

typedef enum wisp_data_format { WISP_DATA_TEXT, WISP_DATA_JSONL } wisp_data_format;
typedef enum wisp_data_docs { WISP_DOCS_FILE, WISP_DOCS_BLANK_LINE } wisp_data_docs;
typedef enum wisp_data_split { WISP_SPLIT_TRAIN, WISP_SPLIT_VAL } wisp_data_split;

typedef struct wisp_data_options {
    wisp_data_format format;
    wisp_data_docs docs;   /* plain text only */
    int32_t seq_len;       /* a window holds seq_len + 1 ids */
    float val_split;       /* fraction held out, in [0, 1) */
    uint64_t seed;
    size_t piece_bytes;    /* longest text tokenized at once; 0: 4096 */
    bool packing;          /* JSONL: records packed into shared windows (see Packing above) */
} wisp_data_options;

/* How much caller memory the data needs (exact for the arrays it indexes,
 * an upper bound for tokens), from a scan of the bytes. */
typedef struct wisp_data_plan_info {
    size_t max_tokens;     /* int32 token ids */
    size_t max_examples;   /* wisp_data_example entries (and as many int32 for the order) */
    size_t json_nodes;     /* wisp_json_node entries (JSONL: the largest line's) */
    size_t text_bytes;     /* unescaped record text (JSONL) */
    size_t tok_scratch;    /* tokenizer scratch for one piece */
    size_t n_records;      /* JSONL lines with a record */
} wisp_data_plan_info;

typedef struct wisp_data_example {
    uint32_t offset;   /* into the token array */
    uint32_t len;      /* ids of this example in the array */
    uint32_t n_prompt; /* leading ids not scored (JSONL: BOS + prompt) */
    uint32_t bos;      /* 1: the window starts with BOS before its ids (plain text) */
} wisp_data_example;

typedef struct wisp_data_memory {
    int32_t *tokens;
    size_t cap_tokens;
    wisp_data_example *examples;
    int32_t *order;
    size_t cap_examples;
    wisp_json_node *nodes;
    size_t cap_nodes;
    char *text;
    size_t text_bytes;
    void *tok_scratch;
    size_t tok_scratch_bytes;
} wisp_data_memory;

typedef struct wisp_train_data {
    wisp_data_options opt;
    wisp_data_memory mem;
    const wisp_tokenizer *tok;
    size_t n_tokens;
    int32_t n_examples, n_train, n_val;
    int32_t bos, eos, pad;
    int64_t epoch;     /* cursor: epoch and position in its permutation */
    int32_t pos;
    int64_t order_epoch; /* the epoch `order` holds (-1: none yet) */
    const struct wisp_data_chat *chat; /* conversations' template, or NULL */
    int32_t n_truncated;  /* JSONL records cut to seq_len + 1 ids */
    int32_t n_unscored;   /* of them, left with nothing to score */
    int64_t n_scored;     /* scored targets over all examples (within their windows) */
    int32_t n_records;    /* JSONL records kept (with packing, n_examples counts windows) */
    int32_t n_dropped;    /* of the unscored, conversations ({"messages"}) dropped (other records are kept) */
} wisp_train_data;

/* What conversations are rendered with. */
typedef struct wisp_data_chat {
    struct wisp_template *tpl;
    const char *bos_token, *eos_token; /* NULL: undefined in the template */
    int year, month, day;              /* for strftime_now */
} wisp_data_chat;

wisp_status wisp_data_plan(const wisp_tokenizer *tok, const char *bytes, size_t n, const wisp_data_options *opt,
                           wisp_data_plan_info *info, wisp_error *err);

/* Tokenize and index `bytes` (which need not outlive the call). Fails with
 * a message naming the line for malformed JSONL, and when there is nothing
 * to train on. */
wisp_status wisp_data_build(wisp_train_data *d, const wisp_tokenizer *tok, const char *bytes, size_t n,
                            const wisp_data_options *opt, const wisp_data_memory *mem, wisp_error *err);

/* The same with conversations ({"messages": [...]}) accepted in JSONL, rendered
 * with chat->tpl (which must outlive the data). The plan sizes every record's
 * text for a rendering of at most twice its line plus 16 KiB. */
wisp_status wisp_data_plan_chat(const wisp_tokenizer *tok, const char *bytes, size_t n, const wisp_data_options *opt,
                                const wisp_data_chat *chat, wisp_data_plan_info *info, wisp_error *err);
wisp_status wisp_data_build_chat(wisp_train_data *d, const wisp_tokenizer *tok, const char *bytes, size_t n,
                                 const wisp_data_options *opt, const wisp_data_memory *mem, const wisp_data_chat *chat,
                                 wisp_error *err);

int32_t wisp_data_count(const wisp_train_data *d, wisp_data_split split);

/* Example `index` of a split as seq_len + 1 ids and a mask (1: target scored). */
void wisp_data_get(const wisp_train_data *d, wisp_data_split split, int32_t index, int32_t *ids, uint8_t *mask);

/* The next n training examples in shuffled order (wrapping into the next
 * epoch, reshuffled), back to back in ids/mask. */
void wisp_data_next(wisp_train_data *d, int32_t n, int32_t *ids, uint8_t *mask);
/* The same, also writing each example's index in the training split (for
 * values cached per example, such as DPO's reference log-probs). */
void wisp_data_next_indexed(wisp_train_data *d, int32_t n, int32_t *ids, uint8_t *mask, int32_t *index);

/* Training examples taken so far over all epochs. */
int64_t wisp_data_consumed(const wisp_train_data *d);

typedef struct wisp_data_cursor {
    int64_t epoch;
    int32_t pos;
} wisp_data_cursor;
wisp_data_cursor wisp_data_cursor_get(const wisp_train_data *d);
wisp_status wisp_data_cursor_set(wisp_train_data *d, wisp_data_cursor c, wisp_error *err);

#endif
