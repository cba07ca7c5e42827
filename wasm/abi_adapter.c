/* LoRA adapters through the C ABI: reading GGUF LoRA and PEFT files whose
 * bytes JS copied into wasm memory, attaching them to the model's context,
 * and writing them back out as GGUF or PEFT through the JS sink. All memory
 * an adapter needs (including its export buffers) is allocated when it is
 * made; attaching, detaching, rescaling and exporting allocate nothing. */
#include <stdlib.h>
#include <string.h>

#include "abi.h"
#include "lora_gguf.h"
#include "peft.h"
#include "peft_prompt.h"

/* Output bytes to the JS sink (Module.wispSinkWrite); 0 when JS refused them. */
#ifdef WISP_WASM64
__attribute__((import_module("env"), import_name("js_sink_write"))) int js_sink_write(const void *data, size_t n);
#else
#include <emscripten.h>
EM_JS(int, js_sink_write, (const void *data, size_t n), { return Module["wispSinkWrite"](data, n) ? 1 : 0; });
#endif

static wisp_status js_sink_put(void *user, const void *data, size_t n, wisp_error *err) {
    (void)user;
    if (!js_sink_write(data, n)) return wisp_fail(err, WISP_ERR_IO, "the JS side refused %zu bytes of output", n);
    return WISP_OK;
}

wisp_sink ww_js_sink(void) {
    wisp_sink s = {js_sink_put, NULL, 0};
    return s;
}

static void adapter_free(ww_adapter *a) {
    if (!a) return;
    free(a->file);
    free(a->config);
    free(a->mem);
    free(a->notes);
    free(a->peft_config);
    free(a->peft_scratch);
    free(a->init_text);
    free(a);
}

static ww_adapter *adapter_new(ww_model *m) {
    ww_adapter *a = calloc(1, sizeof *a);
    if (!a) wisp_fail(&m->err, WISP_ERR_CAPACITY, "out of wasm memory for an adapter record");
    return a;
}

/* The name PEFT's config records as the base model: the GGUF's general.name. */
static void base_model_name(const ww_model *m, char *buf, size_t cap) {
    wisp_str s;
    buf[0] = 0;
    if (!wisp_gguf_get_str(&m->gguf, "general.name", &s)) return;
    size_t n = s.len < cap ? (size_t)s.len : cap - 1;
    memcpy(buf, s.ptr, n);
    buf[n] = 0;
}

/* A prompt- or prefix-tuning adapter as PEFT's writer takes it (a
 * prefix's rows: peft_scratch, which ww_adapter_write_safetensors fills). */
wisp_prompt_adapter ww_prompt_adapter_of(const ww_model *m, const ww_adapter *a) {
    const wisp_hparams *hp = wisp_ctx_hparams(m->ctx);
    wisp_prompt_adapter p = {0};
    p.n_virtual = a->n_virtual, p.dim = hp->dim, p.n_layers = hp->n_layers, p.n_heads = hp->n_heads;
    p.text_init = a->init_text != NULL, p.init_text = a->init_text, p.type = WISP_TYPE_F32, p.rows = a->prompt_rows;
    if (a->prefix) { /* PEFT counts a prefix's heads and width in kv heads (grouped-query attention) */
        p.prefix = true, p.n_heads = hp->n_kv_heads, p.dim = hp->n_kv_heads * hp->head_dim, p.rows = a->peft_scratch;
        p.prefix_projection = a->prefix_projection, p.encoder_hidden_size = a->encoder_hidden_size;
    }
    return p;
}

/* adapter_config.json of a prompt- or prefix-tuning adapter, written once,
 * and for a prefix the buffer its rows are put in PEFT's order in. */
static int32_t prepare_prompt_export(ww_model *m, ww_adapter *a) {
    wisp_prompt_adapter p = ww_prompt_adapter_of(m, a);
    if (a->prefix) {
        a->peft_scratch_bytes = (size_t)a->n_virtual * wisp_prompt_width(&p) * sizeof(float);
        if (!(a->peft_scratch = ww_alloc(a->peft_scratch_bytes)))
            return wisp_fail(&m->err, WISP_ERR_CAPACITY, "out of wasm memory for the prefix's export buffer"), -1;
    }
    size_t len = 0;
    wisp_error probe = {0};
    if (wisp_prompt_write_config(&p, NULL, 0, &len, &probe) != WISP_ERR_CAPACITY) {
        m->err = probe;
        return -1;
    }
    if (!(a->peft_config = malloc(len + 1)))
        return wisp_fail(&m->err, WISP_ERR_CAPACITY, "out of wasm memory for the adapter's config"), -1;
    return wisp_prompt_write_config(&p, a->peft_config, len + 1, &a->peft_config_len, &m->err) ? -1 : 0;
}

int32_t ww_adapter_prepare_export(ww_model *m, ww_adapter *a) {
    if (a->prompt_rows) return prepare_prompt_export(m, a);
    char base[128];
    base_model_name(m, base, sizeof base);
    const wisp_hparams *hp = wisp_ctx_hparams(m->ctx);
    size_t len = 0;
    wisp_error probe = {0};
    if (wisp_peft_write_config(&a->lora, hp, base[0] ? base : NULL, NULL, 0, &len, &probe) != WISP_ERR_CAPACITY) {
        m->err = probe;
        return -1;
    }
    a->peft_scratch_bytes = wisp_peft_export_bytes(&a->lora);
    a->peft_config = malloc(len + 1);
    a->peft_scratch = ww_alloc(a->peft_scratch_bytes ? a->peft_scratch_bytes : 1);
    if (!a->peft_config || !a->peft_scratch) {
        wisp_fail(&m->err, WISP_ERR_CAPACITY, "out of wasm memory for the adapter's export buffers");
        return -1;
    }
    if (wisp_peft_write_config(&a->lora, hp, base[0] ? base : NULL, a->peft_config, len + 1, &a->peft_config_len,
                               &m->err))
        return -1;
    return 0;
}

/* Read a GGUF LoRA adapter from `bytes` (from ww_alloc; ownership passes,
 * even on failure) and check it against the model. */
API ww_adapter *ww_adapter_open_gguf(ww_model *m, uint8_t *bytes, size_t size) {
    ww_adapter *a = adapter_new(m);
    wisp_lora_gguf_info info;
    if (!a) {
        free(bytes);
        return NULL;
    }
    a->file = bytes;
    if (wisp_gguf_open(&a->gguf, bytes, size, &m->err) || wisp_lora_gguf_plan(&a->gguf, &info, &m->err)) goto fail;
    a->mem = calloc(info.n_pairs ? (size_t)info.n_pairs : 1, sizeof(wisp_lora_pair));
    if (!a->mem) {
        wisp_fail(&m->err, WISP_ERR_CAPACITY, "out of wasm memory for %d adapter pairs", info.n_pairs);
        goto fail;
    }
    if (wisp_lora_gguf_read(&a->gguf, wisp_ctx_hparams(m->ctx), a->mem, (size_t)info.n_pairs, &a->lora, &m->err))
        goto fail;
    if (ww_adapter_prepare_export(m, a)) goto fail;
    return a;
fail:
    adapter_free(a);
    return NULL;
}

/* A PEFT prompt- or prefix-tuning adapter into `a` (which owns both files):
 * its rows as F32 in the engine's order in a block of their own, its init
 * text kept for export. 0 or -1. */
static int32_t open_prompt(ww_model *m, ww_adapter *a, size_t config_len, size_t st_len) {
    size_t bytes = 0;
    wisp_prompt_adapter p;
    if (wisp_prompt_index_bytes(a->config, config_len, a->file, st_len, &bytes, &m->err)) return -1;
    void *index = ww_alloc(bytes ? bytes : 1);
    if (!index) return wisp_fail(&m->err, WISP_ERR_CAPACITY, "out of wasm memory reading the prompt adapter"), -1;
    int32_t rc = -1;
    wisp_status s = wisp_prompt_read(a->config, config_len, a->file, st_len, wisp_ctx_hparams(m->ctx), index, bytes, &p,
                                     &m->err);
    if (!s) {
        wisp_arch arch = wisp_ctx_hparams(m->ctx)->arch;
        size_t n = (size_t)p.n_virtual * wisp_prompt_width(&p);
        size_t text = p.init_text ? strlen(p.init_text) : 0;
        a->mem = ww_alloc(n * sizeof(float));
        a->init_text = p.init_text ? malloc(text + 1) : NULL;
        if (!a->mem || (p.init_text && !a->init_text)) {
            wisp_fail(&m->err, WISP_ERR_CAPACITY, "out of wasm memory for %zu %s floats", n, p.prefix ? "prefix" : "prompt");
        } else {
            a->prompt_rows = a->mem;
            for (size_t i = 0; i < n; i++) a->prompt_rows[i] = wisp_prompt_engine_value(&p, arch, i);
            if (a->init_text) memcpy(a->init_text, p.init_text, text + 1);
            a->n_virtual = p.n_virtual;
            a->prefix = p.prefix, a->prefix_projection = p.prefix_projection, a->encoder_hidden_size = p.encoder_hidden_size;
            rc = ww_adapter_prepare_export(m, a);
        }
    }
    ww_free(index);
    return rc;
}

/* Read a PEFT adapter: adapter_config.json text and adapter_model.safetensors
 * bytes (both from ww_alloc; ownership passes, even on failure): LoRA (DoRA
 * included), prompt or prefix tuning. */
API ww_adapter *ww_adapter_open_peft(ww_model *m, char *config, size_t config_len, uint8_t *st, size_t st_len) {
    ww_adapter *a = adapter_new(m);
    wisp_peft p;
    void *index = NULL;
    size_t index_bytes = 0;
    if (!a) {
        free(config);
        free(st);
        return NULL;
    }
    a->config = config;
    a->file = st;
    if (wisp_prompt_config_is_prompt(config, config_len) || wisp_prompt_config_is_prefix(config, config_len)) {
        if (open_prompt(m, a, config_len, st_len)) goto fail;
        return a;
    }
    const wisp_hparams *hp = wisp_ctx_hparams(m->ctx);
    if (wisp_peft_index_bytes(config, config_len, st, st_len, &index_bytes, &m->err)) goto fail;
    index = ww_alloc(index_bytes ? index_bytes : 1);
    if (!index) {
        wisp_fail(&m->err, WISP_ERR_CAPACITY, "out of wasm memory reading the PEFT index (%zu bytes)", index_bytes);
        goto fail;
    }
    if (wisp_peft_open(&p, config, config_len, st, st_len, hp, index, index_bytes, &m->err)) goto fail;
    a->mem = ww_alloc(p.lora_bytes ? p.lora_bytes : 1);
    if (!a->mem) {
        wisp_fail(&m->err, WISP_ERR_CAPACITY, "out of wasm memory for the adapter (%zu bytes)", p.lora_bytes);
        goto fail;
    }
    if (wisp_peft_read(&p, a->mem, p.lora_bytes, &a->lora, &m->err)) goto fail;
    size_t notes_len = 0;
    for (int i = 0; i < p.info.notes.n; i++) notes_len += strlen(p.info.notes.text[i]) + 1;
    if (notes_len && (a->notes = malloc(notes_len + 1))) {
        a->notes[0] = 0;
        for (int i = 0; i < p.info.notes.n; i++) {
            strcat(a->notes, p.info.notes.text[i]);
            strcat(a->notes, "\n");
        }
    }
    free(index);
    index = NULL;
    if (ww_adapter_prepare_export(m, a)) goto fail;
    return a;
fail:
    free(index);
    adapter_free(a);
    return NULL;
}

API int32_t ww_adapter_pairs(ww_adapter *a) { return a->lora.n_pairs; }
API int32_t ww_adapter_rank(ww_adapter *a) { return a->lora.max_rank; }
API float ww_adapter_alpha(ww_adapter *a) { return a->lora.n_pairs ? a->lora.pairs[0].alpha : 0.0f; }
API int32_t ww_adapter_virtual_tokens(ww_adapter *a) { return a->prompt_rows ? a->n_virtual : 0; }
API int32_t ww_adapter_is_prefix(ww_adapter *a) { return a->prefix ? 1 : 0; }
API const char *ww_adapter_notes(ww_adapter *a) { return a->notes ? a->notes : ""; }

/* Attach with a user scale, or rescale when attached already. The KV cache
 * is cleared: what the model computes changes. A prompt- or prefix-tuning
 * adapter takes the cache's first positions instead. 0 or -1. */
API int32_t ww_adapter_attach(ww_model *m, ww_adapter *a, float scale) {
    if (a->prompt_rows) { /* virtual positions before every input: no scale, one adapter of the kind */
        const char *kind = a->prefix ? "prefix" : "prompt";
        if (scale != 1.0f)
            return wisp_fail(&m->err, WISP_ERR_ARG, "a %s-tuning adapter has no scale (got %g): attach it with 1", kind,
                             (double)scale), -1;
        if (m->virtual_rows && m->virtual_rows != a->prompt_rows)
            return wisp_fail(&m->err, WISP_ERR_ARG, "another %s-tuning adapter is attached: detach it first",
                             m->virtual_prefix ? "prefix" : "prompt"), -1;
        if (a->n_virtual >= wisp_ctx_config(m->ctx)->n_ctx)
            return wisp_fail(&m->err, WISP_ERR_CAPACITY, "the adapter's %d virtual tokens fill the context (n_ctx %d)",
                             a->n_virtual, wisp_ctx_config(m->ctx)->n_ctx), -1;
        ww_reset(m);
        m->virtual_rows = a->prompt_rows, m->n_virtual = a->n_virtual, m->virtual_prefix = a->prefix;
        a->handle = 1;
        return 0;
    }
    wisp_status s = a->handle > 0 ? wisp_adapter_set_scale(m->ctx, a->handle, scale, &m->err)
                                  : wisp_adapter_attach(m->ctx, &a->lora, scale, &a->handle, &m->err);
    if (s) return -1;
    ww_reset(m);
    return 0;
}

API int32_t ww_adapter_detach(ww_model *m, ww_adapter *a) {
    if (a->handle <= 0) return 0;
    if (a->prompt_rows) {
        ww_reset(m);
        m->virtual_rows = NULL, m->n_virtual = 0, m->virtual_prefix = false;
        a->handle = 0;
        return 0;
    }
    if (wisp_adapter_detach(m->ctx, a->handle, &m->err)) return -1;
    a->handle = 0;
    ww_reset(m);
    return 0;
}

API void ww_adapter_free(ww_model *m, ww_adapter *a) {
    if (!a) return;
    if (m && m->ctx) ww_adapter_detach(m, a);
    adapter_free(a);
}

/* Write the adapter as a GGUF LoRA through the JS sink (or, with
 * count_only, only count the bytes). Returns the byte count, or -1. */
API int32_t ww_adapter_write_gguf(ww_model *m, ww_adapter *a, const char *name, int32_t count_only) {
    if (a->prompt_rows)
        return wisp_fail(&m->err, WISP_ERR_UNSUPPORTED, "the adapter to write is %s tuning: GGUF LoRA adapters "
                                                         "(llama.cpp's format) cannot carry %s; write it as a PEFT folder",
                         a->prefix ? "prefix" : "prompt", a->prefix ? "a key/value prefix" : "virtual tokens"), -1;
    wisp_sink sink = count_only ? wisp_count_sink_make() : ww_js_sink();
    const char *arch = wisp_arch_name(wisp_ctx_hparams(m->ctx)->arch);
    if (wisp_lora_gguf_write(&a->lora, arch, name, &sink, NULL, &m->err)) return -1;
    return (int32_t)sink.written;
}

/* PEFT's adapter_config.json (written when the adapter was made). */
API const char *ww_adapter_peft_config(ww_adapter *a) { return a->peft_config; }
API uint32_t ww_adapter_peft_config_len(ww_adapter *a) { return (uint32_t)a->peft_config_len; }

/* PEFT's adapter_model.safetensors through the JS sink (or counted). */
API int32_t ww_adapter_write_safetensors(ww_model *m, ww_adapter *a, int32_t count_only) {
    wisp_sink sink = count_only ? wisp_count_sink_make() : ww_js_sink();
    if (a->prompt_rows) {
        if (a->prefix) wisp_prefix_to_peft(a->prompt_rows, wisp_ctx_hparams(m->ctx), a->n_virtual, a->peft_scratch);
        wisp_prompt_adapter p = ww_prompt_adapter_of(m, a);
        if (wisp_prompt_write_safetensors(&p, &sink, &m->err)) return -1;
        return (int32_t)sink.written;
    }
    if (wisp_peft_write_safetensors(&a->lora, wisp_ctx_hparams(m->ctx), a->peft_scratch, a->peft_scratch_bytes, &sink,
                                    &m->err))
        return -1;
    return (int32_t)sink.written;
}
