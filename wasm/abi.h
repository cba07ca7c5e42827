/* Shared parts of the C ABI the npm package calls (wasm/abi*.c): the model
 * record JS holds a pointer to, and helpers the files share. See abi.c for
 * the memory rules. */
#ifndef WISP_WASM_ABI_H
#define WISP_WASM_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "abi_export.h"
#include "abi_structs.h"
#include "lora.h"
#include "peft_prompt.h"
#include "sampler.h"
#include "wisp.h"

typedef struct ww_model {
    uint8_t *bytes; /* the GGUF, owned (NULL for a header-only plan) */
    size_t size;
    wisp_gguf gguf;
    const wisp_kernels *kernels;
    void *pool;       /* the thread pool (threaded build, more than one thread), owned: abi_threads.c */
    wisp_threads threads; /* what the context runs on: the pool, or serial */
    wisp_memory_plan plan;
    void *arena;
    wisp_ctx *ctx;
    int32_t *cached;  /* [n_ctx] tokens whose keys/values are in the cache, in order */
    int32_t n_cached;
    int32_t *ids;     /* [n_ctx] ids exchanged with JS */
    char *io;         /* [io_cap] text exchanged with JS */
    size_t io_cap;
    wisp_sampler sampler;
    int32_t pending;  /* sampled and returned, not yet evaluated; -1 if none */
    void *guided;     /* the grammar constraining generation, owned: abi_guide.c (NULL: none) */
    float *embedding; /* [dim] the last embedding, owned: abi_embed.c (NULL until the first) */
    void *shards;     /* shards 2..N of a split model and their views, owned: abi_shards.c (NULL: one file) */
    /* the attached prompt-tuning adapter's virtual tokens [n_virtual][dim]
     * (NULL: none): they take the cache's first n_virtual positions, before
     * the cached tokens, as PEFT prepends them to every input. With
     * virtual_prefix the rows are a prefix-tuning adapter's keys and values
     * [n_virtual][n_layers][2][kv width], put straight into the cache. */
    const float *virtual_rows;
    int32_t n_virtual;
    bool virtual_prefix;
    bool virtual_cached; /* they are in the cache now */
    wisp_error err;
} ww_model;

/* A LoRA adapter of one model: loaded (GGUF, PEFT) or trained. The weights
 * are read in place from the file bytes it owns, or from its own block. */
typedef struct ww_adapter {
    void *file;          /* GGUF, or PEFT safetensors: owned, tensors used in place */
    void *config;        /* PEFT adapter_config.json text: owned */
    void *mem;           /* pair table and weights of its own: owned */
    wisp_gguf gguf;
    wisp_lora lora;
    /* a prompt-tuning adapter (PEFT PROMPT_TUNING) instead of LoRA pairs:
     * [n_virtual][dim] F32 rows in mem; lora is then empty. With prefix
     * (PREFIX_TUNING) the rows are [n_virtual][n_layers][2][kv width] keys
     * and values in the engine's order (peft_scratch: room for PEFT's) */
    float *prompt_rows;
    int32_t n_virtual;
    bool prefix;
    bool prefix_projection;      /* recorded in its config (the rows are the MLP's output) */
    int32_t encoder_hidden_size; /* with prefix_projection: that MLP's width */
    char *init_text;     /* prompt_tuning_init_text (owned), or NULL: RANDOM init */
    int32_t handle;      /* > 0 while attached */
    char *notes;         /* what an importer wants the user to know ('\n'-separated), owned */
    /* export buffers, sized when the adapter is made so exporting allocates nothing */
    char *peft_config;   /* adapter_config.json, written once */
    size_t peft_config_len;
    void *peft_scratch;
    size_t peft_scratch_bytes;
} ww_adapter;

/* 64-byte aligned memory (GGUF data is aligned relative to the file start;
 * arenas want cache-line carving). */
void *ww_alloc(size_t n);
void ww_free(void *p);

/* A chat template choice -> its source: spec[0..spec_len) is "" (the model's
 * tokenizer.chat_template), a built-in format's name, or a template's text.
 * False with m->err filled when the name is unknown or the model has none. */
bool ww_template_source(ww_model *m, const char *spec, uint32_t spec_len, wisp_str *src);

/* Forget the KV cache (after anything that changes what the model computes). */
void ww_reset(ww_model *m);

/* The kernel table `name` names ("scalar", "wasm-simd128"; NULL or "auto":
 * the best this build has); NULL with err filled when there is none. */
const wisp_kernels *ww_pick_kernels(const char *name, wisp_error *err);

/* The threads an n-thread configuration runs on: the model's pool once
 * initialised; before that (planning) a serial stand-in with n shares,
 * which plans exactly the memory of n real threads. */
wisp_threads ww_threads(const ww_model *m, int32_t n);

/* Start the model's pool of n threads (nothing for n <= 1); 0 or -1 with
 * m->err filled (the single-thread build has none to start). */
int32_t ww_threads_start(ww_model *m, int32_t n);
void ww_threads_stop(ww_model *m);

/* The figures of a plan as the record JS reads. */
void ww_plan_out(const ww_model *m, const wisp_memory_plan *p, ww_plan_figures *out);

/* Detach (when attached) and free an adapter. */
void ww_adapter_free(ww_model *m, ww_adapter *a);

/* Size and write the export buffers of a finished adapter; 0 or -1. */
int32_t ww_adapter_prepare_export(ww_model *m, ww_adapter *a);

/* A prompt- or prefix-tuning adapter (a->prompt_rows) as PEFT's prompt writer
 * takes it (a prefix's rows: a->peft_scratch, filled by the caller). */
wisp_prompt_adapter ww_prompt_adapter_of(const ww_model *m, const ww_adapter *a);

/* Output files go to JS in pieces through Module.wispSinkWrite, so
 * exporting allocates nothing in wasm memory. */
wisp_sink ww_js_sink(void);

/* abi_guide.c: drop the grammar (frees it); 1 when a guided generation that
 * could not sample ended because the grammar is complete, else 0 (ww_error says why). */
void ww_guide_clear(ww_model *m);
int32_t ww_guide_finished(ww_model *m);

/* How many bytes of a GGUF's start planning needs (abi.c): 0 when the
 * header is all in prefix[0..n), more than n when not, -1 if malformed. */
int32_t ww_header_need(const uint8_t *prefix, size_t n);

/* Free a model's split shards (abi_shards.c). */
void ww_shards_free(ww_model *m);

#endif
