/* Pre-tokenizers of byte-level BPE vocabularies: the regex splits named by
 * tokenizer.ggml.pre, written as small hand-made matchers over code points
 * (no regex engine). Each pre-tokenizer is a list of splitters applied in
 * turn, as llama.cpp applies its list of regexes: a splitter cuts every piece
 * the previous ones produced, around each of its matches (leftmost match
 * first, ECMAScript alternation order, the piece's ends acting as the ends
 * of the subject); unmatched stretches stay pieces of their own. */
#ifndef WISP_PRETOKENIZE_H
#define WISP_PRETOKENIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

typedef enum wisp_pretok {
    WISP_PRETOK_DEFAULT = 0,     /* "default", or no tokenizer.ggml.pre */
    WISP_PRETOK_GPT2,            /* gpt-2, mpt, olmo, jais, roberta-bpe, phi-2, jina-* ... */
    WISP_PRETOK_LLAMA3,          /* llama-bpe, llama3, llama-v3, falcon3, dbrx, smaug-bpe, chatglm-bpe */
    WISP_PRETOK_QWEN2,           /* qwen2, deepseek-r1-qwen, stablelm2, megrez */
    WISP_PRETOK_DEEPSEEK_LLM,    /* deepseek-llm */
    WISP_PRETOK_DEEPSEEK_CODER,  /* deepseek-coder */
    WISP_PRETOK_FALCON,          /* falcon */
    WISP_PRETOK_STARCODER,       /* starcoder, refact, command-r, smollm, codeshell, exaone, minerva-7b */
    WISP_PRETOK_BLOOM,           /* bloom, poro-chat, gpt3-finnish */
    WISP_PRETOK_VIKING,          /* viking */
    WISP_PRETOK_CHAMELEON,       /* chameleon */
    WISP_PRETOK_COUNT
} wisp_pretok;

enum {
    WISP_PRETOK_IGNORE_MERGES = 1, /* a pre-token that is a whole token is not merged (llama3) */
    WISP_PRETOK_ADD_BOS = 2        /* the model adds BOS by default */
};

/* Pre-tokenizer of a tokenizer.ggml.pre name, -1 if unknown; *flags gets
 * WISP_PRETOK_* flags of that name. */
int wisp_pretok_from_name(wisp_str name, unsigned *flags);

/* One entry per code point: bits 0-20 the code point (U+FFFD for a byte of
 * invalid UTF-8), 21-22 its byte length - 1, 23-26 its wisp_uc_class, 27
 * whitespace, 28 "a piece starts here". */
#define WISP_PT_LEN_SHIFT 21
#define WISP_PT_CLASS_SHIFT 23
#define WISP_PT_SPACE (1u << 27)
#define WISP_PT_START (1u << 28)

/* Decode text (len > 0) into cps[0..n) and mark where the pieces start.
 * cps needs room for len entries; returns n. */
size_t wisp_pretokenize(int pre, const uint8_t *text, size_t len, uint32_t *cps);

/* Walk the pieces: start with *cp = *byte = 0; each call gives the next
 * piece's bytes [*start, *start + *bytes) of the text, false at the end. */
bool wisp_pretok_next(const uint32_t *cps, size_t n, size_t *cp, size_t *byte, size_t *start, size_t *bytes);

#endif
