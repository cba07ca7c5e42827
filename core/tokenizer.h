/* Tokenizers driven by GGUF metadata, reproducing llama.cpp's (and so Hugging
 * Face's) token ids:
 *   - "llama": SentencePiece BPE by scores, with byte fallback (<0xXX>)
 *   - "gpt2":  byte-level BPE with ranked merges and the regex pre-tokenizer
 *              named by tokenizer.ggml.pre (see core/pretokenize.h)
 *   - "bert":  WordPiece with BERT's normaliser (lowercase, accent stripping,
 *              punctuation and CJK splitting)
 *
 * Memory: wisp_tokenizer is a fixed-size struct. Its lookup tables (token
 * index, string hash, merge hash) are carved from a caller arena sized by
 * wisp_tokenizer_plan; token strings, scores and types are read in place from
 * the GGUF bytes, which must outlive the tokenizer. wisp_tokenize works in a
 * caller scratch buffer of wisp_tokenizer_scratch_bytes(text_len) bytes and
 * allocates nothing. Sizes: tables are about 4 bytes per token (index) +
 * 4-8 per token (hash, power of two >= 1.5 n) + 12-20 per merge; scratch is
 * about 40 bytes per input byte for SPM and BPE (one symbol per byte in the
 * worst case), a constant (under 1 KiB) for WordPiece, plus 1 byte per input byte and
 * 8 KiB when the vocabulary has special tokens. The tokenizer is read-only
 * after init: threads may share it, each with its own scratch.
 *
 * Special tokens: with WISP_TOKENIZE_PARSE_SPECIAL, the texts of control and
 * unknown tokens ("<s>", "<|im_start|>") in the input become their ids.
 * User-defined tokens (Hugging Face "added tokens" that are not special, e.g.
 * runs of spaces in GPT-NeoX vocabularies or single accented letters in
 * DeepSeek's) are always matched, with or without the flag, exactly as
 * llama.cpp and Hugging Face do; the reference vectors depend on it. */
#ifndef WISP_TOKENIZER_H
#define WISP_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "gguf.h"
#include "status.h"
#include "text_span.h"
#include "wisp.h"

typedef enum wisp_vocab_kind {
    WISP_VOCAB_SPM = 1, /* tokenizer.ggml.model = "llama" */
    WISP_VOCAB_BPE = 2, /* "gpt2" */
    WISP_VOCAB_WPM = 3  /* "bert" */
} wisp_vocab_kind;

/* Token types as GGUF stores them in tokenizer.ggml.token_type. */
typedef enum wisp_token_type {
    WISP_TOKEN_UNDEFINED = 0,
    WISP_TOKEN_NORMAL = 1,
    WISP_TOKEN_UNKNOWN = 2,
    WISP_TOKEN_CONTROL = 3,
    WISP_TOKEN_USER_DEFINED = 4,
    WISP_TOKEN_UNUSED = 5,
    WISP_TOKEN_BYTE = 6
} wisp_token_type;

#define WISP_TOKENIZER_MAX_EOG 16
#define WISP_TOKENIZER_MAX_FORCED 8

typedef struct wisp_tokenizer {
    int kind;              /* wisp_vocab_kind */
    int pre;               /* wisp_pretok (BPE only) */
    int32_t n_vocab;
    int32_t n_merges;
    int32_t max_token_len; /* bytes */
    uint8_t token_bytes[32]; /* bit set of the bytes that occur in some token's text */

    /* in the GGUF bytes */
    const uint8_t *tok_base;  /* first string of tokenizer.ggml.tokens */
    const uint8_t *scores;    /* f32 array, NULL when absent (all 0) */
    const uint8_t *types;     /* integer array, NULL when absent (all normal) */
    uint32_t types_elem;      /* its GGUF element type */

    /* in the arena */
    const uint32_t *tok_off;  /* [n_vocab] offset of each string from tok_base */
    const uint32_t *tok_hash; /* [tok_hash_mask + 1] id + 1, 0 = empty */
    uint32_t tok_hash_mask;
    const uint32_t *merge_hash; /* [merge_hash_mask + 1] rank + 1, 0 = empty */
    uint32_t merge_hash_mask;
    const int32_t *merges;      /* [n_merges][3]: left id, right id, merged id */
    const int32_t *byte_tok;    /* [256] token of each byte, -1 if none */
    const int32_t *special;     /* [n_special] special-token ids, longest text first */
    int32_t n_special;
    int32_t n_user_defined;     /* how many of them are user-defined */

    int32_t bos, eos, unk, sep, pad, eot, eom; /* -1 when absent */
    int32_t eog[WISP_TOKENIZER_MAX_EOG];        /* end-of-generation ids */
    int32_t n_eog;
    int32_t forced_control[WISP_TOKENIZER_MAX_FORCED]; /* EOG-looking tokens treated as control */
    int32_t n_forced_control;

    bool add_space_prefix; /* SPM: "▁" before the text and after each special token */
    bool add_bos, add_eos; /* model defaults (tokenizer.ggml.add_bos_token / add_eos_token) */
    bool ignore_merges;    /* BPE: a pre-token that is itself a token is emitted whole (llama3) */
    bool rstrip_special;   /* phi-3: whitespace after special tokens is dropped */
} wisp_tokenizer;

/* The tokenizer's one layout (core/arena.h), in part WISP_PART_TOKENIZER:
 * with lay->arena NULL it only measures the tables and fills what planners
 * need (the kind and the special-token count, for
 * wisp_tokenizer_scratch_bytes); else it carves them and loads the
 * vocabulary. The GGUF bytes must outlive the tokenizer. */
wisp_status wisp_tokenizer_layout(wisp_tokenizer *tok, const wisp_gguf *g, wisp_layout *lay, wisp_error *err);

/* Exact bytes wisp_tokenizer_init will carve (the layout, measuring). */
wisp_status wisp_tokenizer_plan(const wisp_gguf *g, size_t *table_bytes, wisp_error *err);

/* The layout carving from `arena`; on failure nothing stays carved. */
wisp_status wisp_tokenizer_init(wisp_tokenizer *tok, const wisp_gguf *g, wisp_arena *arena, wisp_error *err);

/* Working memory wisp_tokenize needs for text_len bytes of input (a linear bound). */
size_t wisp_tokenizer_scratch_bytes(const wisp_tokenizer *tok, size_t text_len);

/* The same figure from the GGUF alone, for planners that size memory before
 * any tokenizer exists. */
wisp_status wisp_tokenizer_plan_scratch(const wisp_gguf *g, size_t text_len, size_t *scratch_bytes, wisp_error *err);

/* The flags below (WISP_TOKENIZE_ADD_BOS, ...) are public: wisp.h */

/* Encode text[0..len). If cap is too small, returns WISP_ERR_CAPACITY with
 * *n_ids = the number of ids needed (ids[0..cap) hold the first ones). A
 * scratch buffer smaller than wisp_tokenizer_scratch_bytes(len) gives
 * WISP_ERR_ARENA. Invalid UTF-8 never fails: SPM encodes the bytes with byte
 * fallback; byte-level BPE pre-tokenizes a bad byte as U+FFFD but keeps the
 * byte itself (so decoding gives the input back); WordPiece drops it. For
 * WordPiece, ADD_BOS adds [CLS] and ADD_EOS adds [SEP]. */
wisp_status wisp_tokenize(const wisp_tokenizer *tok, const char *text, size_t len, unsigned flags,
                          int32_t *ids, size_t cap, size_t *n_ids,
                          void *scratch, size_t scratch_bytes, wisp_error *err);

/* wisp_tokenize with WISP_TOKENIZE_PARSE_SPECIAL, except inside the byte
 * ranges `literal` (sorted, not overlapping): there the text of a control
 * token stays text, tokenized as if typed. For chats: the template's own
 * "<|im_start|>" is one token, a user's typed "<|im_start|>" is characters.
 * (User-defined tokens match everywhere, as with wisp_tokenize.) */
wisp_status wisp_tokenize_literal(const wisp_tokenizer *tok, const char *text, size_t len, unsigned flags,
                                  const wisp_text_span *literal, size_t n_literal, int32_t *ids, size_t cap,
                                  size_t *n_ids, void *scratch, size_t scratch_bytes, wisp_error *err);

/* wisp_token_piece (public: wisp.h) gives the bytes of a token, full length
 * returned even if > cap. Beyond what wisp.h says: WordPiece's word-initial
 * "▁" becomes a space; control and unknown tokens give nothing (see
 * wisp_token_piece_ex); unused and undefined tokens always give nothing;
 * user-defined tokens give their text as is. */

enum { WISP_PIECE_SPECIAL = 1 /* control and unknown tokens give their text */ };
size_t wisp_token_piece_ex(const wisp_tokenizer *tok, int32_t id, unsigned flags, char *buf, size_t cap);

/* Concatenated pieces of ids[0..n) (full length returned, min(len,cap) copied).
 * With WISP_DETOKENIZE_STRIP_PREFIX, the space SPM's add_space_prefix put in
 * front of the first piece is removed, so detokenize(tokenize(s)) == s. */
enum { WISP_DETOKENIZE_SPECIAL = 1, WISP_DETOKENIZE_STRIP_PREFIX = 2 };
size_t wisp_detokenize(const wisp_tokenizer *tok, const int32_t *ids, size_t n, unsigned flags,
                       char *buf, size_t cap);

int32_t wisp_tokenizer_n_vocab(const wisp_tokenizer *tok);
int32_t wisp_tokenizer_bos(const wisp_tokenizer *tok);   /* -1 if none */
int32_t wisp_tokenizer_eos(const wisp_tokenizer *tok);
/* wisp_tokenizer_is_eog: wisp.h */
bool wisp_tokenizer_add_bos_default(const wisp_tokenizer *tok); /* from tokenizer.ggml.add_bos_token; true for SPM when absent */

/* The token's text as stored in the GGUF (not NUL-terminated), and its type
 * (wisp_token_type, after llama.cpp's adjustments); both for id in range. */
wisp_str wisp_token_text(const wisp_tokenizer *tok, int32_t id);
int wisp_token_type_of(const wisp_tokenizer *tok, int32_t id);

/* Id of a token by its exact text, -1 if none. */
int32_t wisp_token_lookup(const wisp_tokenizer *tok, const char *text, size_t len);

#endif
