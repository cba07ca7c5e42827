/* Every setting of a `wisp finetune` run, described once in a table that
 * writes config.json (all settings, defaults included, so two runs can be
 * diffed) and reads it back for --resume, and the translation into the
 * engine's wisp_train_config. */
#ifndef WISP_CLI_FINETUNE_SETTINGS_H
#define WISP_CLI_FINETUNE_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

#include "wisp.h"

typedef struct ft_settings {
    const char *model, *data, *val, *format, *docs, *targets, *schedule, *optimizer, *act_dtype;
    const char *method, *loss_type; /* --method (lora, rslora, dora, prompt, prefix, dpo); DPO's --loss-type (sigmoid, ipo) */
    float beta, label_smoothing;    /* DPO */
    float min_loss_scale;           /* F16: the floor of the dynamic loss scale */
    int32_t num_virtual_tokens;     /* --method prompt: learned embeddings prepended to every sequence; prefix: positions of keys and values */
    bool prefix_projection;         /* --prefix-projection: train through PEFT's reparameterization MLP */
    int32_t encoder_hidden_size;    /* --encoder-hidden-size: its width; 0: token_dim (PEFT's default) */
    const char *prompt_init_text;   /* --method prompt: PEFT's TEXT init from this text (NULL: RANDOM) */
    int32_t loss_scale_hysteresis;  /* F16: overflows tolerated before the scale halves */
    float val_split, alpha, lr, clip, dropout, weight_decay, momentum, beta1, beta2, eps, min_lr_ratio, epochs;
    float loss_scale;
    int32_t rank, ctx, batch, accum, warmup, eval_every, eval_windows, checkpoint_every, loss_chunk;
    int64_t steps;
    uint64_t seed;
    bool rslora, checkpointing;
    bool packing;              /* JSONL records packed into shared windows (adapters/train_data.h) */
    const char *chat_template; /* --chat-template NAME|FILE for conversations; NULL: the model's */
    char *owned; /* the block ft_settings_read unescaped its strings into; NULL otherwise */
} ft_settings;

void ft_settings_default(ft_settings *s);

/* --method prompt: prompt tuning (PEFT PROMPT_TUNING), no LoRA pairs. */
bool ft_method_is_prompt(const ft_settings *s);
/* --method prefix: prefix tuning (PEFT PREFIX_TUNING), no LoRA pairs. */
bool ft_method_is_prefix(const ft_settings *s);
/* Either: the run's adapter is virtual positions (peft/ alone, no GGUF). */
bool ft_method_is_virtual(const ft_settings *s);
/* --method dpo: pairs of answers, trained with trl's DPO loss. */
bool ft_method_is_dpo(const ft_settings *s);

/* Names -> engine config; prints what is wrong and returns false. */
bool ft_settings_to_config(const ft_settings *s, wisp_train_config *c);
/* Take back the values the engine resolved (alpha, lr, betas, ...). */
void ft_settings_from_resolved(ft_settings *s, const wisp_train_config *c);

/* config.json: the settings plus `extra` members (a JSON fragment of
 * "key": value pairs, may be NULL) written atomically. */
bool ft_settings_write(const ft_settings *s, const char *extra, const char *path);
/* Read config.json; its strings go into one malloc'd block (s->owned). */
bool ft_settings_read(ft_settings *s, const char *path);
/* Free what ft_settings_read allocated (its strings become invalid). */
void ft_settings_release(ft_settings *s);

/* "attn_q,v_proj,..." or "all" -> bitmask; 0 when a name is unknown. */
uint32_t ft_parse_targets(const char *list);

#endif
