/* PEFT prompt-tuning adapters (peft_type PROMPT_TUNING, task_type CAUSAL_LM):
 * a folder with adapter_config.json and adapter_model.safetensors holding one
 * tensor, `prompt_embeddings` [num_virtual_tokens][token_dim], the learned
 * input embeddings PEFT prepends to every input (BOS included), in the
 * embedding table's unscaled space.
 *
 * Read: every config key is known or refused by name (num_transformer_submodules
 * must be 1, as for decoder-only models; token_dim must be the base's
 * dim); F32, F16 or BF16 rows. Written: the keys PEFT writes, sorted, so
 * that reading a written adapter and writing it again gives the same bytes.
 * Freestanding: the caller gives the memory (wisp_prompt_index_bytes).
 *
 * Prefix tuning (peft_type PREFIX_TUNING, P-tuning v2) shares the layout:
 * `prompt_embeddings` is then [num_virtual_tokens][num_layers x 2 x
 * token_dim], every layer's key then value (each [num_attention_heads]
 * [head_dim]) at the virtual positions, which PEFT hands the model as
 * past_key_values. For grouped-query attention PEFT sets num_attention_heads
 * to the model's kv heads and token_dim to kv heads x head_dim; both are
 * checked against the base, as num_layers. A file saved with
 * prefix_projection true holds the projected (final) prefix all the same
 * (PEFT saves the encoder's output), so it is read the same way.
 *
 * A prefix's keys are in Hugging Face's order within each head. For arch
 * llama the engine's are in GGUF order (llama.cpp's conversion reorders the
 * q/k rows of a head so that RoPE rotates adjacent pairs; lora_layout.h), so
 * wisp_prompt_engine_value and wisp_prefix_to_peft move each key's elements
 * between the two; values, and every other family, keep their order. */
#ifndef WISP_PEFT_PROMPT_H
#define WISP_PEFT_PROMPT_H

#include "model.h"
#include "sink.h"
#include "status.h"

typedef struct wisp_prompt_adapter {
    int32_t n_virtual, dim;
    int32_t n_layers, n_heads;   /* PEFT records them (num_layers, num_attention_heads) */
    bool prefix;                 /* PREFIX_TUNING: rows are [n_virtual][n_layers][2][dim] */
    bool prefix_projection;      /* prefix: trained through PEFT's MLP (recorded; the rows are its output) */
    int32_t encoder_hidden_size; /* prefix: that MLP's width (PEFT's default: token_dim) */
    bool text_init;              /* prompt_tuning_init TEXT (else RANDOM) */
    const char *init_text;       /* prompt_tuning_init_text, or NULL */
    const char *base_model;      /* base_model_name_or_path, or NULL */
    const char *tokenizer;       /* tokenizer_name_or_path, or NULL */
    int32_t type;                /* WISP_TYPE_F32, F16 or BF16 of rows */
    const void *rows;            /* [n_virtual][wisp_prompt_width], any alignment */
} wisp_prompt_adapter;

/* Floats per virtual token: dim, or n_layers x 2 x dim for a prefix. */
size_t wisp_prompt_width(const wisp_prompt_adapter *a);

/* Whether an adapter_config.json says peft_type PROMPT_TUNING (a cheap
 * textual probe: the full check is wisp_prompt_read's). */
bool wisp_prompt_config_is_prompt(const char *config, size_t config_len);
/* The same probe for peft_type PREFIX_TUNING. */
bool wisp_prompt_config_is_prefix(const char *config, size_t config_len);

/* Memory wisp_prompt_read needs for these two files. */
wisp_status wisp_prompt_index_bytes(const char *config, size_t config_len, const void *st, size_t st_len, size_t *bytes,
                                    wisp_error *err);
/* Parse and check both files against the base (hparams); strings and rows
 * of `out` point into `mem` and `st`, which must outlive it. */
wisp_status wisp_prompt_read(const char *config, size_t config_len, const void *st, size_t st_len,
                             const wisp_hparams *base, void *mem, size_t mem_bytes, wisp_prompt_adapter *out,
                             wisp_error *err);
/* Row i element k as F32, in the file's order. */
float wisp_prompt_value(const wisp_prompt_adapter *a, size_t index);
/* The same in the engine's order for a model of architecture `arch` (what
 * wisp_eval_kv_prefix and wisp_train_set_prompt take). */
float wisp_prompt_engine_value(const wisp_prompt_adapter *a, wisp_arch arch, size_t index);
/* A prefix of the engine, [n_virtual][n_layers][2][kv width] F32, in PEFT's
 * order (keys of arch llama reordered) into `peft` (same size, not aliased). */
void wisp_prefix_to_peft(const float *engine, const wisp_hparams *hp, int32_t n_virtual, float *peft);

/* adapter_config.json into buf (NUL-terminated; *len without the NUL; with
 * cap too small WISP_ERR_CAPACITY and *len the need). */
wisp_status wisp_prompt_write_config(const wisp_prompt_adapter *a, char *buf, size_t cap, size_t *len, wisp_error *err);
/* adapter_model.safetensors: `prompt_embeddings` [n_virtual][width] in the rows' type. */
wisp_status wisp_prompt_write_safetensors(const wisp_prompt_adapter *a, wisp_sink *sink, wisp_error *err);

#endif
