/* PEFT PROMPT_TUNING and PREFIX_TUNING adapters: see peft_prompt.h. */
#include "peft_prompt.h"

#include <string.h>

#include "half.h"
#include "types.h"
#include "json.h"
#include "lora_layout.h"
#include "safetensors.h"

#define TENSOR_NAME "prompt_embeddings"

static bool mentions(const char *config, size_t config_len, const char *needle) {
    size_t n = strlen(needle);
    for (size_t i = 0; config && i + n <= config_len; i++)
        if (memcmp(config + i, needle, n) == 0) return true;
    return false;
}

bool wisp_prompt_config_is_prompt(const char *config, size_t config_len) {
    return mentions(config, config_len, "\"PROMPT_TUNING\"");
}

bool wisp_prompt_config_is_prefix(const char *config, size_t config_len) {
    return mentions(config, config_len, "\"PREFIX_TUNING\"");
}

size_t wisp_prompt_width(const wisp_prompt_adapter *a) {
    return a->prefix ? 2 * (size_t)a->n_layers * (size_t)a->dim : (size_t)a->dim;
}

/* memory: [JSON nodes of the config][safetensors index][unescaped strings] */
typedef struct sizes {
    size_t nodes, st, strings;
} sizes;

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

static wisp_status measure(const char *config, size_t config_len, const void *st, size_t st_len, sizes *s,
                           wisp_error *err) {
    wisp_json j;
    size_t need = 0;
    wisp_status r = wisp_json_parse(&j, config, config_len, NULL, 0, &need, err);
    if (r && r != WISP_ERR_CAPACITY) return r;
    wisp_st_plan plan;
    if ((r = wisp_st_plan_memory(st, st_len, &plan, err))) return r;
    s->nodes = align8(need * sizeof(wisp_json_node));
    s->st = align8(plan.bytes);
    s->strings = config_len + 8; /* an unescaped string is never longer than its JSON text */
    return WISP_OK;
}

wisp_status wisp_prompt_index_bytes(const char *config, size_t config_len, const void *st, size_t st_len, size_t *bytes,
                                    wisp_error *err) {
    sizes s;
    wisp_status r = measure(config, config_len, st, st_len, &s, err);
    if (!r) *bytes = s.nodes + s.st + s.strings;
    return r;
}

/* Copies a string value into the string area; NULL for JSON null. */
static wisp_status take_string(const wisp_json *j, int64_t node, const char *key, char **area, size_t *room,
                               const char **out, wisp_error *err) {
    *out = NULL;
    if (node < 0 || wisp_json_is(j, node, WISP_JSON_NULL)) return WISP_OK;
    if (!wisp_json_is(j, node, WISP_JSON_STRING))
        return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json: '%s' must be a string", key);
    size_t n = wisp_json_string(j, node, NULL, 0);
    if (n + 1 > *room) return wisp_fail(err, WISP_ERR_INTERNAL, "adapter_config.json: string area too small");
    wisp_json_string(j, node, *area, n + 1);
    *out = *area;
    *area += n + 1, *room -= n + 1;
    return WISP_OK;
}

static wisp_status get_int(const wisp_json *j, const char *key, bool required, int64_t *v, wisp_error *err) {
    int64_t node = wisp_json_get(j, 0, key);
    if (node < 0 || wisp_json_is(j, node, WISP_JSON_NULL)) {
        if (required) return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json has no '%s'", key);
        *v = -1;
        return WISP_OK;
    }
    if (!wisp_json_int(j, node, v)) return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json: '%s' must be an integer", key);
    return WISP_OK;
}

wisp_status wisp_prompt_read(const char *config, size_t config_len, const void *st_bytes, size_t st_len,
                             const wisp_hparams *base, void *mem, size_t mem_bytes, wisp_prompt_adapter *out,
                             wisp_error *err) {
    sizes s;
    wisp_status r = measure(config, config_len, st_bytes, st_len, &s, err);
    if (r) return r;
    if (!mem || (uintptr_t)mem % 8 || mem_bytes < s.nodes + s.st + s.strings)
        return wisp_fail(err, WISP_ERR_CAPACITY, "prompt adapter needs %zu bytes (8-byte aligned), got %zu",
                         s.nodes + s.st + s.strings, mem_bytes);
    wisp_json j;
    if ((r = wisp_json_parse(&j, config, config_len, mem, s.nodes / sizeof(wisp_json_node), NULL, err))) return r;
    if (!wisp_json_is(&j, 0, WISP_JSON_OBJECT))
        return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json must hold a JSON object");
    int64_t v = wisp_json_get(&j, 0, "peft_type");
    bool prefix = v >= 0 && wisp_json_string_eq(&j, v, "PREFIX_TUNING");
    if (v < 0 || (!prefix && !wisp_json_string_eq(&j, v, "PROMPT_TUNING")))
        return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json: peft_type is not PROMPT_TUNING or PREFIX_TUNING");
    const char *method = prefix ? "prefix tuning" : "prompt tuning";
    /* every key is known, or refused by name */
    static const char *const known_prompt[] = {"auto_mapping", "base_model_name_or_path", "inference_mode",
                                               "num_attention_heads", "num_layers", "num_transformer_submodules",
                                               "num_virtual_tokens", "peft_type", "peft_version", "prompt_tuning_init",
                                               "prompt_tuning_init_text", "revision", "task_type", "token_dim",
                                               "tokenizer_kwargs", "tokenizer_name_or_path"};
    static const char *const known_prefix[] = {"auto_mapping", "base_model_name_or_path", "encoder_hidden_size",
                                               "inference_mode", "num_attention_heads", "num_layers",
                                               "num_transformer_submodules", "num_virtual_tokens", "peft_type",
                                               "peft_version", "prefix_projection", "revision", "task_type",
                                               "token_dim"};
    const char *const *known = prefix ? known_prefix : known_prompt;
    size_t n_known = prefix ? sizeof known_prefix / sizeof known_prefix[0] : sizeof known_prompt / sizeof known_prompt[0];
    for (int64_t k = wisp_json_first(&j, 0); k >= 0; k = wisp_json_next(&j, k + 1)) {
        bool ok = false;
        for (size_t i = 0; i < n_known && !ok; i++) ok = wisp_json_string_eq(&j, k, known[i]);
        if (!ok) {
            char name[64];
            wisp_json_string(&j, k, name, sizeof name);
            return wisp_fail(err, WISP_ERR_UNSUPPORTED, "adapter_config.json: '%s' is not implemented for %s", name,
                             method);
        }
    }
    v = wisp_json_get(&j, 0, "task_type");
    if (v < 0 || !wisp_json_string_eq(&j, v, "CAUSAL_LM"))
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "adapter_config.json: %s is read for task_type CAUSAL_LM only", method);
    int64_t n_virtual, dim, subs, layers, heads;
    if ((r = get_int(&j, "num_virtual_tokens", true, &n_virtual, err)) || (r = get_int(&j, "token_dim", true, &dim, err)) ||
        (r = get_int(&j, "num_transformer_submodules", false, &subs, err)) ||
        (r = get_int(&j, "num_layers", prefix, &layers, err)) ||
        (r = get_int(&j, "num_attention_heads", prefix, &heads, err)))
        return r;
    if (n_virtual < 1 || n_virtual > 4096)
        return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json: num_virtual_tokens %lld is outside 1..4096",
                         (long long)n_virtual);
    if (subs != -1 && subs != 1)
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "adapter_config.json: num_transformer_submodules %lld (encoder-decoder "
                                                    "prompts) is not implemented; decoder-only models use 1",
                         (long long)subs);
    if (base && !prefix && dim != base->dim)
        return wisp_fail(err, WISP_ERR_SHAPE, "adapter_config.json: token_dim %lld, but the model's dim is %d",
                         (long long)dim, base->dim);
    if (prefix && (layers < 1 || layers > 4096 || heads < 1 || dim < 1 || dim > (1 << 20) || dim % heads))
        return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json: num_layers %lld, num_attention_heads %lld, token_dim "
                                               "%lld do not make a prefix", (long long)layers, (long long)heads, (long long)dim);
    if (prefix && base) {
        int32_t kv = base->n_kv_heads * base->head_dim;
        if (layers != base->n_layers)
            return wisp_fail(err, WISP_ERR_SHAPE, "adapter_config.json: num_layers %lld, but the model has %d layers",
                             (long long)layers, base->n_layers);
        if (heads != base->n_kv_heads || dim != kv)
            return wisp_fail(err, WISP_ERR_SHAPE, "adapter_config.json: num_attention_heads %lld, token_dim %lld, but a "
                                                  "prefix of this model has %d kv heads of %d (token_dim %d)",
                             (long long)heads, (long long)dim, base->n_kv_heads, base->head_dim, kv);
    }
    memset(out, 0, sizeof *out);
    out->n_virtual = (int32_t)n_virtual, out->dim = (int32_t)dim;
    out->n_layers = (int32_t)layers, out->n_heads = (int32_t)heads;
    out->prefix = prefix;
    if (prefix) {
        int64_t hidden;
        if ((r = get_int(&j, "encoder_hidden_size", false, &hidden, err))) return r;
        if (hidden < -1 || hidden == 0 || hidden > (1 << 20))
            return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json: encoder_hidden_size %lld", (long long)hidden);
        out->encoder_hidden_size = (int32_t)hidden;
        v = wisp_json_get(&j, 0, "prefix_projection");
        if (v >= 0 && !wisp_json_is(&j, v, WISP_JSON_NULL) && !wisp_json_bool(&j, v, &out->prefix_projection))
            return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json: 'prefix_projection' must be true or false");
    }
    v = wisp_json_get(&j, 0, "prompt_tuning_init");
    if (v >= 0 && !wisp_json_is(&j, v, WISP_JSON_NULL)) {
        out->text_init = wisp_json_string_eq(&j, v, "TEXT");
        if (!out->text_init && !wisp_json_string_eq(&j, v, "RANDOM"))
            return wisp_fail(err, WISP_ERR_UNSUPPORTED,
                             "adapter_config.json: prompt_tuning_init must be TEXT or RANDOM (SAMPLE_VOCAB is not implemented)");
    }
    char *area = (char *)mem + s.nodes + s.st;
    size_t room = s.strings;
    if ((r = take_string(&j, wisp_json_get(&j, 0, "prompt_tuning_init_text"), "prompt_tuning_init_text", &area, &room,
                         &out->init_text, err)) ||
        (r = take_string(&j, wisp_json_get(&j, 0, "base_model_name_or_path"), "base_model_name_or_path", &area, &room,
                         &out->base_model, err)) ||
        (r = take_string(&j, wisp_json_get(&j, 0, "tokenizer_name_or_path"), "tokenizer_name_or_path", &area, &room,
                         &out->tokenizer, err)))
        return r;

    wisp_safetensors st;
    if ((r = wisp_st_open(&st, st_bytes, st_len, (char *)mem + s.nodes, s.st, err))) return r;
    wisp_st_tensor t;
    if (!wisp_st_find(&st, TENSOR_NAME, &t))
        return wisp_fail(err, WISP_ERR_FORMAT, "adapter_model.safetensors has no tensor '%s'", TENSOR_NAME);
    if (st.n_tensors != 1) {
        for (size_t i = 0; i < st.n_tensors; i++) {
            wisp_st_tensor o;
            wisp_st_tensor_at(&st, i, &o);
            if (o.name_len != sizeof TENSOR_NAME - 1 || memcmp(o.name, TENSOR_NAME, o.name_len) != 0)
                return wisp_fail(err, WISP_ERR_UNSUPPORTED, "adapter_model.safetensors: tensor '%.*s' is not part of a "
                                                            "prompt-tuning adapter", (int)(o.name_len > 80 ? 80 : o.name_len), o.name);
        }
    }
    int type = wisp_st_dtype_to_wisp(t.dtype);
    if (type != WISP_TYPE_F32 && type != WISP_TYPE_F16 && type != WISP_TYPE_BF16)
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "%s: dtype %s; F32, F16 or BF16 are read", TENSOR_NAME,
                         wisp_st_dtype_name(t.dtype) ? wisp_st_dtype_name(t.dtype) : "?");
    size_t width = wisp_prompt_width(out);
    if (t.n_dims != 2 || t.shape[0] != n_virtual || (uint64_t)t.shape[1] != width)
        return wisp_fail(err, WISP_ERR_SHAPE, "%s must be [%lld, %zu] (num_virtual_tokens, %s)", TENSOR_NAME,
                         (long long)n_virtual, width, prefix ? "num_layers x 2 x token_dim" : "token_dim");
    out->type = type;
    out->rows = t.data;
    for (size_t i = 0; i < (size_t)n_virtual * width; i++) {
        float x = wisp_prompt_value(out, i);
        if (!(x == x) || x - x != 0) /* NaN or infinite */
            return wisp_fail(err, WISP_ERR_NUMERIC, "%s row %zu, element %zu is not finite", TENSOR_NAME, i / width,
                             i % width);
    }
    return WISP_OK;
}

float wisp_prompt_value(const wisp_prompt_adapter *a, size_t i) {
    const uint8_t *p = a->rows;
    if (a->type == WISP_TYPE_F32) {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p + 2 * i, 2);
    return a->type == WISP_TYPE_F16 ? wisp_f16_to_f32(h) : wisp_bf16_to_f32(h);
}

/* Element `index` of a prefix row block of `width` floats per virtual token,
 * kv heads of head_dim: its index in the other order when it is a key of a
 * family whose keys are reordered (lora_layout.h), else itself. to_hf: the
 * engine's (GGUF) index to HF's, else back. */
static size_t key_index(size_t index, size_t width, int32_t kv_width, int32_t head_dim, bool to_hf) {
    size_t in_row = index % width, in_kv = in_row % (size_t)kv_width;
    if ((in_row / (size_t)kv_width) % 2 != 0) return index; /* a value */
    int32_t j = (int32_t)(in_kv % (size_t)head_dim);
    int32_t moved = to_hf ? wisp_lora_hf_row(j, head_dim) : wisp_lora_gguf_row(j, head_dim);
    return index - (size_t)j + (size_t)moved;
}

static bool keys_move(wisp_arch arch) { return wisp_lora_permutes(arch, WISP_PROJ_K); }

float wisp_prompt_engine_value(const wisp_prompt_adapter *a, wisp_arch arch, size_t index) {
    if (!a->prefix || !keys_move(arch)) return wisp_prompt_value(a, index);
    /* the engine's element j of a key head is HF's element hf_row(j) */
    return wisp_prompt_value(a, key_index(index, wisp_prompt_width(a), a->dim, a->dim / a->n_heads, true));
}

void wisp_prefix_to_peft(const float *engine, const wisp_hparams *hp, int32_t n_virtual, float *peft) {
    int32_t kv = hp->n_kv_heads * hp->head_dim;
    size_t width = 2 * (size_t)hp->n_layers * (size_t)kv, n = (size_t)n_virtual * width;
    bool move = keys_move(hp->arch);
    for (size_t i = 0; i < n; i++) peft[move ? key_index(i, width, kv, hp->head_dim, true) : i] = engine[i];
}

static void key_string(wisp_json_writer *w, const char *key, const char *value) {
    wisp_jw_key(w, key);
    if (value) wisp_jw_string(w, value);
    else wisp_jw_null(w);
}

static void key_int(wisp_json_writer *w, const char *key, int64_t value) {
    wisp_jw_key(w, key);
    wisp_jw_int(w, value);
}

static void key_null(wisp_json_writer *w, const char *key) {
    wisp_jw_key(w, key);
    wisp_jw_null(w);
}

/* PROMPT_TUNING's or PREFIX_TUNING's keys, sorted, as PEFT writes them (the two share most; the
 * union of their keys is in one sorted order, so each kind's own keys just come or not). */
wisp_status wisp_prompt_write_config(const wisp_prompt_adapter *a, char *buf, size_t cap, size_t *len, wisp_error *err) {
    const bool prefix = a->prefix;
    wisp_json_writer w;
    wisp_jw_init(&w, buf, cap, true);
    wisp_jw_begin_object(&w);
    key_null(&w, "auto_mapping");
    key_string(&w, "base_model_name_or_path", a->base_model);
    if (prefix) key_int(&w, "encoder_hidden_size", a->encoder_hidden_size > 0 ? a->encoder_hidden_size : a->dim);
    wisp_jw_key(&w, "inference_mode");
    wisp_jw_bool(&w, true);
    key_int(&w, "num_attention_heads", a->n_heads);
    key_int(&w, "num_layers", a->n_layers);
    key_int(&w, "num_transformer_submodules", 1);
    key_int(&w, "num_virtual_tokens", a->n_virtual);
    key_string(&w, "peft_type", prefix ? "PREFIX_TUNING" : "PROMPT_TUNING");
    if (prefix) {
        wisp_jw_key(&w, "prefix_projection");
        wisp_jw_bool(&w, a->prefix_projection);
    } else {
        key_string(&w, "prompt_tuning_init", a->text_init ? "TEXT" : "RANDOM");
        key_string(&w, "prompt_tuning_init_text", a->init_text);
    }
    key_null(&w, "revision");
    key_string(&w, "task_type", "CAUSAL_LM");
    key_int(&w, "token_dim", a->dim);
    if (!prefix) {
        key_null(&w, "tokenizer_kwargs");
        key_string(&w, "tokenizer_name_or_path", a->tokenizer);
    }
    wisp_jw_end_object(&w);
    return wisp_jw_finish_sized(&w, cap, len, "adapter_config.json", err);
}

wisp_status wisp_prompt_write_safetensors(const wisp_prompt_adapter *a, wisp_sink *sink, wisp_error *err) {
    if (a->n_virtual < 1 || a->dim < 1 || (a->prefix && a->n_layers < 1) || !a->rows)
        return wisp_fail(err, WISP_ERR_ARG, "prompt adapter to export has no rows");
    wisp_st_out_tensor t;
    memset(&t, 0, sizeof t);
    t.name = TENSOR_NAME;
    t.dtype = wisp_st_dtype_from_wisp(a->type);
    t.n_dims = 2;
    t.shape[0] = a->n_virtual, t.shape[1] = (int64_t)wisp_prompt_width(a);
    static const char *const meta[] = {"format", "pt"};
    wisp_status r = wisp_st_write_header(sink, &t, 1, meta, 1, err);
    if (r) return r;
    return wisp_sink_write(sink, a->rows, (size_t)wisp_st_out_bytes(&t), err);
}
