/* llama2.c checkpoints (.bin) and tokenizers (tokenizer .bin) read in place
 * and rewritten as a GGUF that wisp and llama.cpp run directly. llama2.c
 * rotates adjacent pairs like GGUF's arch `llama`, so weights move unchanged. */
#ifndef WISP_LLAMA2C_H
#define WISP_LLAMA2C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sink.h"
#include "status.h"

typedef struct wisp_llama2c {
    int32_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
    bool shared_classifier; /* vocab_size was positive: the output reuses the embedding */
    const uint8_t *bytes;
    size_t size;
    /* byte offsets of each float array in the file */
    size_t off_embedding, off_rms_att, off_wq, off_wk, off_wv, off_wo, off_rms_ffn, off_w1, off_w2, off_w3,
        off_rms_final, off_classifier;
} wisp_llama2c;

/* Validate the header and that the file holds exactly the arrays it implies. */
wisp_status wisp_llama2c_open(wisp_llama2c *m, const void *bytes, size_t size, wisp_error *err);

/* Validate a tokenizer file for `vocab_size` tokens. */
wisp_status wisp_llama2c_check_tokenizer(const void *bytes, size_t size, int32_t vocab_size, wisp_error *err);

/* Write the GGUF (F32 weights, SentencePiece vocabulary with scores and
 * token types) to `sink`. */
wisp_status wisp_llama2c_to_gguf(const wisp_llama2c *m, const void *tok_bytes, size_t tok_size, const char *name,
                                 wisp_sink *sink, wisp_error *err);

#endif
