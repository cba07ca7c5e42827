/* Hugging Face tokenizer.json -> GGUF tokenizer metadata (tokenizer.* keys),
 * so an HF model's vocabulary can be attached to a GGUF that wisp and
 * llama.cpp tokenize exactly as Hugging Face does.
 *
 * Two kinds are understood:
 *   - byte-level BPE (GPT-2 style, e.g. SmolLM2, Llama 3, Qwen2):
 *     tokenizer.ggml.model "gpt2", tokens as in the vocabulary, merges, and
 *     tokenizer.ggml.pre detected from the pre_tokenizer (GPT-2's ByteLevel
 *     regex -> gpt-2; Digits(individual) + ByteLevel -> smollm; the Llama 3
 *     and Qwen2 Split regexes -> llama-bpe / qwen2), or forced by the caller;
 *   - SentencePiece BPE (a "BPE" model with byte_fallback and Metaspace /
 *     "▁" normalisation, e.g. Llama 2): tokenizer.ggml.model "llama", with
 *     scores -rank of the first merge producing each token (llama.cpp merges
 *     by highest score, which then follows the merge order), byte tokens
 *     typed BYTE, and add_space_prefix.
 * Token types follow llama.cpp's converter: added tokens that are special, or
 * look special (<|...|>, <pad>, ...), are CONTROL; other added tokens
 * USER_DEFINED; the unknown token UNKNOWN; ids without a token become
 * "[PAD<id>]" UNUSED. bos/eos/unk/pad ids, add_bos/add_eos and the chat
 * template come from tokenizer_config.json when given, else from the
 * post_processor template and the model's unk_token.
 *
 * Memory, in three steps so every byte is planned by the caller:
 *
 *     size_t nodes;                 // 1: JSON node memory for both files
 *     wisp_hf_tokenizer_nodes(json, len, &opts, &nodes, &err);
 *     wisp_hf_tokenizer t;          // 2: parse, detect, count (t.table_bytes)
 *     wisp_hf_tokenizer_open(&t, json, len, &opts, <nodes bytes>, nodes, &err);
 *     wisp_hf_tokenizer_index(&t, <t.table_bytes bytes>, t.table_bytes, &err);   // 3: id tables
 *     n_kv += wisp_hf_tokenizer_kv_count(&t);        // for the GGUF header
 *     wisp_hf_tokenizer_write(&t, &sink, &err);      // the tokenizer.* pairs
 *
 * The texts (and all memory) must outlive `t` until the write is done. */
#ifndef WISP_HF_TOKENIZER_H
#define WISP_HF_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "sink.h"
#include "status.h"

typedef struct wisp_hf_tokenizer_opts {
    const char *config;   /* tokenizer_config.json text, or NULL */
    size_t config_len;
    const char *pre;      /* tokenizer.ggml.pre to write instead of the detected one, or NULL */
    int32_t n_vocab;      /* pad with [PAD<id>] tokens up to this many (0: as many as the tokenizer has) */
} wisp_hf_tokenizer_opts;

#define WISP_HF_MAX_TOKEN_BYTES 4096
#define WISP_HF_MAX_NOTES 8

typedef struct wisp_hf_tokenizer {
    wisp_json json;          /* tokenizer.json */
    wisp_json config;        /* tokenizer_config.json (n_nodes 0 when absent) */
    bool spm;                /* "llama" (SentencePiece BPE) rather than "gpt2" */
    char pre[32];            /* tokenizer.ggml.pre (gpt2 only) */
    int32_t n_vocab;         /* tokens written (ids 0..n_vocab-1) */
    int32_t n_merges;
    int32_t n_holes;         /* ids without a token, written as [PAD<id>] */
    int32_t bos, eos, unk, pad; /* -1 when unknown */
    int8_t add_bos, add_eos; /* -1 unknown, 0/1 */
    bool add_space_prefix;   /* spm */
    int64_t vocab, merges, added, chat_template; /* JSON nodes (-1 absent) */
    size_t table_bytes;      /* step 3 memory */
    /* built by wisp_hf_tokenizer_index */
    uint32_t *id_node;       /* [n_vocab] node of the token's text, UINT32_MAX for a hole */
    uint8_t *id_type;        /* [n_vocab] wisp_token_type */
    float *score;            /* [n_vocab] spm only */
    char *template_text;     /* the chat template, unescaped */
    size_t template_len;
    char notes[WISP_HF_MAX_NOTES][160];
    int n_notes;
    int64_t merge_cursor;    /* the merge written last */
    char text[WISP_HF_MAX_TOKEN_BYTES + 8]; /* one token's text while writing */
} wisp_hf_tokenizer;

/* JSON node memory (in bytes) for tokenizer.json and the optional config. */
wisp_status wisp_hf_tokenizer_nodes(const char *json, size_t len, const wisp_hf_tokenizer_opts *opts, size_t *bytes,
                                    wisp_error *err);

/* Parse both files into `nodes` (8-byte aligned), detect the kind and
 * pre-tokenizer, find the special tokens, count tokens and merges. */
wisp_status wisp_hf_tokenizer_open(wisp_hf_tokenizer *t, const char *json, size_t len,
                                   const wisp_hf_tokenizer_opts *opts, void *nodes, size_t node_bytes,
                                   wisp_error *err);

/* Build the id tables (and scores) in `mem` (8-byte aligned, t->table_bytes). */
wisp_status wisp_hf_tokenizer_index(wisp_hf_tokenizer *t, void *mem, size_t mem_bytes, wisp_error *err);

/* Metadata pairs wisp_hf_tokenizer_write will write. */
uint64_t wisp_hf_tokenizer_kv_count(const wisp_hf_tokenizer *t);

/* Write the tokenizer.* pairs (in the middle of a GGUF's metadata). */
wisp_status wisp_hf_tokenizer_write(wisp_hf_tokenizer *t, wisp_sink *sink, wisp_error *err);

#endif
