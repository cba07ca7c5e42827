#include "peft.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "half.h"
#include "lora_layout.h"
#include "types.h"

#define SHOWN 120 /* longest piece of a hostile name quoted in a message */

static int shown(size_t len) { return (int)(len > SHOWN ? SHOWN : len); }

static size_t round8(size_t n) { return (n + 7) & ~(size_t)7; }

static void add_note(wisp_peft_notes *notes, const char *fmt, ...) {
    if (notes->n >= WISP_PEFT_MAX_NOTES) {
        notes->dropped++;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    wisp_vformat(notes->text[notes->n++], WISP_PEFT_NOTE_MAX, fmt, ap);
    va_end(ap);
}

/* ---- adapter_config.json ------------------------------------------------ */

static bool is_null_or_empty(const wisp_json *j, int64_t v) {
    if (v < 0 || wisp_json_is(j, v, WISP_JSON_NULL)) return true;
    if ((wisp_json_is(j, v, WISP_JSON_ARRAY) || wisp_json_is(j, v, WISP_JSON_OBJECT)) && j->nodes[v].count == 0)
        return true;
    return false;
}

static bool is_false_or_null(const wisp_json *j, int64_t v) {
    return v < 0 || wisp_json_is(j, v, WISP_JSON_NULL) || wisp_json_is(j, v, WISP_JSON_FALSE);
}

/* Fields that do not change what a saved adapter computes (training, init,
 * bookkeeping); accepted without comment. */
static const char *const harmless_fields[] = {
    "lora_dropout", "inference_mode", "init_lora_weights", "revision", "auto_mapping", "loftq_config",
    "eva_config", "corda_config", "megatron_config", "megatron_core", "runtime_config", "exclude_modules",
    "layers_pattern", "qalora_group_size", "ensure_weight_tying", "peft_version", NULL};

/* Fields whose non-default value means semantics wisp does not implement. */
typedef struct refused_field {
    const char *name;
    bool (*is_default)(const wisp_json *j, int64_t v);
    const char *why;
} refused_field;

static bool bias_is_none(const wisp_json *j, int64_t v) {
    return v < 0 || wisp_json_is(j, v, WISP_JSON_NULL) || wisp_json_string_eq(j, v, "none");
}

static const refused_field refused_fields[] = {
    {"modules_to_save", is_null_or_empty, "fully trained extra modules (modules_to_save) are not supported"},
    {"bias", bias_is_none, "trained biases (bias other than \"none\") are not supported"},
    {"fan_in_fan_out", is_false_or_null, "fan_in_fan_out (Conv1D-style weights) does not apply to llama models"},
    {"lora_bias", is_false_or_null, "a bias on lora_B (lora_bias) is not supported"},
    {"layer_replication", is_null_or_empty, "layer_replication is not supported"},
    {"trainable_token_indices", is_null_or_empty, "trainable tokens are not supported"},
    {"target_parameters", is_null_or_empty, "LoRA on parameters (target_parameters) is not supported"},
    {"alora_invocation_tokens", is_null_or_empty, "activated LoRA (alora_invocation_tokens) is not supported"},
    {"use_qalora", is_false_or_null, "QALoRA is not supported"},
    {"arrow_config", is_null_or_empty, "Arrow routing is not supported"},
};

static bool only_dot_syntax(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strchr("*+?[](){}|^$\\", s[i])) return false;
    return true;
}

/* PEFT's get_pattern_key: re.match(rf"(.*\.)?({pattern})$", name), for
 * patterns whose only regex syntax is '.', which matches any character. */
static bool pattern_matches(const char *pat, size_t plen, const char *name, size_t nlen) {
    if (plen > nlen) return false;
    size_t start = nlen - plen;
    if (start > 0 && name[start - 1] != '.') return false;
    for (size_t i = 0; i < plen; i++)
        if (pat[i] != '.' && pat[i] != name[start + i]) return false;
    return true;
}

/* A pattern object's members: keys with only '.' syntax, values numbers
 * (integers >= 1 for ranks). */
static wisp_status check_pattern_object(const wisp_json *j, int64_t obj, const char *field, bool ranks,
                                        wisp_error *err) {
    if (!wisp_json_is(j, obj, WISP_JSON_OBJECT))
        return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json: %s must be an object", field);
    for (int64_t k = wisp_json_first(j, obj); k >= 0; k = wisp_json_next(j, k + 1)) {
        const wisp_json_node *kn = &j->nodes[k];
        const char *key = j->text + kn->start;
        size_t klen = kn->end - kn->start;
        if (memchr(key, '\\', klen) || !only_dot_syntax(key, klen))
            return wisp_fail(err, WISP_ERR_UNSUPPORTED,
                             "adapter_config.json: %s key '%.*s' uses regex syntax; wisp matches module names "
                             "(with '.' as PEFT's wildcard) only",
                             field, shown(klen), key);
        double v;
        int64_t r;
        if (ranks ? !wisp_json_int(j, k + 1, &r) || r < 1 || r > 65536
                  : !wisp_json_number(j, k + 1, &v) || !isfinite(v))
            return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json: %s['%.*s'] must be %s", field, shown(klen),
                             key, ranks ? "a positive integer" : "a number");
    }
    return WISP_OK;
}

/* The value of the first member of `obj` whose key matches `module`, or -1. */
static int64_t pattern_lookup(const wisp_json *j, int64_t obj, const char *module) {
    if (obj < 0) return -1;
    size_t mlen = strlen(module);
    for (int64_t k = wisp_json_first(j, obj); k >= 0; k = wisp_json_next(j, k + 1)) {
        const wisp_json_node *kn = &j->nodes[k];
        if (pattern_matches(j->text + kn->start, kn->end - kn->start, module, mlen)) return k + 1;
    }
    return -1;
}

static wisp_status read_config(wisp_peft *p, wisp_error *err) {
    const wisp_json *j = &p->config;
    wisp_peft_info *info = &p->info;
    if (!wisp_json_is(j, 0, WISP_JSON_OBJECT))
        return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json must hold a JSON object");
    int64_t v = wisp_json_get(j, 0, "peft_type");
    if (v < 0) return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json has no peft_type: not a PEFT adapter");
    if (!wisp_json_string_eq(j, v, "LORA")) {
        char t[32];
        wisp_json_string(j, v, t, sizeof t);
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "peft_type is '%s'; wisp reads LORA adapters", t);
    }
    info->r = 8; /* PEFT's defaults, used when the fields are absent */
    info->lora_alpha = 8.0;
    if ((v = wisp_json_get(j, 0, "r")) < 0) add_note(&info->notes, "adapter_config.json: no 'r'; using PEFT's default 8");
    else {
        int64_t r;
        if (!wisp_json_int(j, v, &r) || r < 1 || r > 65536)
            return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json: r must be a positive integer");
        info->r = (int32_t)r;
    }
    if ((v = wisp_json_get(j, 0, "lora_alpha")) < 0)
        add_note(&info->notes, "adapter_config.json: no 'lora_alpha'; using PEFT's default 8");
    else if (!wisp_json_number(j, v, &info->lora_alpha) || !isfinite(info->lora_alpha))
        return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json: lora_alpha must be a number");
    if ((v = wisp_json_get(j, 0, "use_rslora")) >= 0 && !wisp_json_is(j, v, WISP_JSON_NULL) &&
        !wisp_json_bool(j, v, &info->use_rslora))
        return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json: use_rslora must be true or false");
    if ((v = wisp_json_get(j, 0, "use_dora")) >= 0 && !wisp_json_is(j, v, WISP_JSON_NULL) &&
        !wisp_json_bool(j, v, &info->use_dora))
        return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json: use_dora must be true or false");
    v = wisp_json_get(j, 0, "base_model_name_or_path");
    if (v >= 0 && !wisp_json_is(j, v, WISP_JSON_NULL)) {
        if (!wisp_json_is(j, v, WISP_JSON_STRING))
            return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json: base_model_name_or_path must be a string");
        wisp_json_string(j, v, info->base_model, sizeof info->base_model);
    }
    v = wisp_json_get(j, 0, "task_type");
    if (v >= 0 && !wisp_json_is(j, v, WISP_JSON_NULL)) {
        if (!wisp_json_is(j, v, WISP_JSON_STRING))
            return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json: task_type must be a string");
        wisp_json_string(j, v, info->task_type, sizeof info->task_type);
        if (strcmp(info->task_type, "CAUSAL_LM") != 0)
            add_note(&info->notes, "adapter_config.json: task_type '%s' (wisp runs causal language models)",
                     info->task_type);
    }
    for (size_t i = 0; i < sizeof refused_fields / sizeof refused_fields[0]; i++) {
        v = wisp_json_get(j, 0, refused_fields[i].name);
        if (!refused_fields[i].is_default(j, v))
            return wisp_fail(err, WISP_ERR_UNSUPPORTED, "adapter_config.json: %s: %s", refused_fields[i].name,
                             refused_fields[i].why);
    }
    wisp_status st;
    p->rank_pattern = p->alpha_pattern = p->target_modules = p->layers_to_transform = -1;
    if (!is_null_or_empty(j, v = wisp_json_get(j, 0, "rank_pattern"))) {
        if ((st = check_pattern_object(j, v, "rank_pattern", true, err))) return st;
        p->rank_pattern = v;
    }
    if (!is_null_or_empty(j, v = wisp_json_get(j, 0, "alpha_pattern"))) {
        if ((st = check_pattern_object(j, v, "alpha_pattern", false, err))) return st;
        p->alpha_pattern = v;
    }
    v = wisp_json_get(j, 0, "target_modules");
    if (wisp_json_is(j, v, WISP_JSON_ARRAY)) {
        for (int64_t e = wisp_json_first(j, v); e >= 0; e = wisp_json_next(j, e))
            if (!wisp_json_is(j, e, WISP_JSON_STRING))
                return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json: target_modules must list strings");
        p->target_modules = v;
    } else if (v >= 0 && !wisp_json_is(j, v, WISP_JSON_NULL) && !wisp_json_is(j, v, WISP_JSON_STRING)) {
        return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json: target_modules must be a list or a string");
    }
    v = wisp_json_get(j, 0, "layers_to_transform");
    if (v >= 0 && !wisp_json_is(j, v, WISP_JSON_NULL)) {
        bool ok = true;
        int64_t n;
        if (wisp_json_is(j, v, WISP_JSON_ARRAY)) {
            for (int64_t e = wisp_json_first(j, v); e >= 0; e = wisp_json_next(j, e)) ok &= wisp_json_int(j, e, &n);
        } else {
            ok = wisp_json_int(j, v, &n);
        }
        if (!ok)
            return wisp_fail(err, WISP_ERR_FORMAT, "adapter_config.json: layers_to_transform must be an integer or a "
                                                   "list of integers");
        p->layers_to_transform = v;
    }
    /* every other field must be known; unknown ones are reported */
    static const char *const handled[] = {"peft_type", "r", "lora_alpha", "use_rslora", "use_dora", "base_model_name_or_path",
                                          "task_type", "rank_pattern", "alpha_pattern", "target_modules",
                                          "layers_to_transform", NULL};
    for (int64_t k = wisp_json_first(j, 0); k >= 0; k = wisp_json_next(j, k + 1)) {
        bool known = false;
        for (int i = 0; handled[i] && !known; i++) known = wisp_json_string_eq(j, k, handled[i]);
        for (int i = 0; harmless_fields[i] && !known; i++) known = wisp_json_string_eq(j, k, harmless_fields[i]);
        for (size_t i = 0; i < sizeof refused_fields / sizeof refused_fields[0] && !known; i++)
            known = wisp_json_string_eq(j, k, refused_fields[i].name);
        if (!known) {
            char name[64];
            wisp_json_string(j, k, name, sizeof name);
            add_note(&info->notes, "adapter_config.json: unknown field '%s' ignored", name);
        }
    }
    return WISP_OK;
}

/* ---- tensor keys -------------------------------------------------------- */

static const char *parent_of(int proj) { return proj <= WISP_PROJ_O ? "self_attn" : "mlp"; }

void wisp_peft_module_name(int32_t layer, int proj, char *buf, size_t cap) {
    wisp_format(buf, cap, "model.layers.%d.%s.%s", (int)layer, parent_of(proj), wisp_proj_hf_name(proj));
}

/* A Hugging Face module of a layer and the wisp projections whose rows it
 * holds, in row order. Architectures whose GGUF tensors are fused (phi3:
 * attn_qkv, ffn_up holding gate and up) have fused transformers modules
 * too, with the same row order: qkv_proj is [q; k; v] and gate_up_proj is
 * [gate; up] (llama.cpp's converter copies them unchanged). wisp holds one
 * pair per projection, so a fused module maps to 3 (or 2) pairs. */
typedef struct hf_module {
    const char *name; /* "qkv_proj" */
    int first, count; /* projections first .. first + count - 1 */
} hf_module;

#define MAX_MODULES WISP_PROJ_COUNT
static const hf_module qkv_module = {"qkv_proj", WISP_PROJ_Q, 3};
static const hf_module gate_up_module = {"gate_up_proj", WISP_PROJ_GATE, 2};

/* The modules of a layer of `hp`'s architecture (fused or not), in proj order. */
static int modules_of(const wisp_hparams *hp, hf_module out[MAX_MODULES]) {
    const wisp_arch_row *r = wisp_hparams_row(hp);
    const bool fused_qkv = r && (r->required & WISP_LT(QKV)), fused_gate_up = r && (r->required & WISP_LT(GATE_UP));
    int n = 0;
    for (int p = 0; p < WISP_PROJ_COUNT; p++) {
        if (fused_qkv && p <= WISP_PROJ_V) {
            if (p == WISP_PROJ_Q) out[n++] = qkv_module;
        } else if (fused_gate_up && (p == WISP_PROJ_GATE || p == WISP_PROJ_UP)) {
            if (p == WISP_PROJ_GATE) out[n++] = gate_up_module;
        } else {
            out[n++] = (hf_module){wisp_proj_hf_name(p), p, 1};
        }
    }
    return n;
}

static void module_name(int32_t layer, const hf_module *m, char *buf, size_t cap) {
    wisp_format(buf, cap, "model.layers.%d.%s.%s", (int)layer, parent_of(m->first), m->name);
}

typedef struct key_parts {
    int32_t layer;
    hf_module module;
    char half; /* 'A' or 'B', 'M' for DoRA's lora_magnitude_vector */
} key_parts;

static bool starts(const char *s, size_t n, const char *prefix) {
    size_t k = strlen(prefix);
    return n >= k && memcmp(s, prefix, k) == 0;
}

/* "[base_model.model.]model.layers.N.<self_attn|mlp>.<module>.lora_<A|B>.weight", or
 * "....<module>.lora_magnitude_vector" (DoRA, as PEFT saves it), with
 * <module> one of `hp`'s architecture */
static bool parse_key(const wisp_hparams *hp, const char *s, size_t n, key_parts *k) {
    size_t pos = starts(s, n, "base_model.model.") ? strlen("base_model.model.") : 0;
    if (!starts(s + pos, n - pos, "model.layers.")) return false;
    pos += strlen("model.layers.");
    int64_t layer = 0;
    size_t digits = pos;
    while (pos < n && s[pos] >= '0' && s[pos] <= '9' && pos - digits < 6) layer = layer * 10 + (s[pos++] - '0');
    if (pos == digits || (pos - digits > 1 && s[digits] == '0') || pos >= n || s[pos] != '.') return false;
    pos++;
    hf_module mods[MAX_MODULES];
    int n_mods = modules_of(hp, mods);
    for (int i = 0; i < n_mods; i++) {
        char tail[64];
        size_t tl = wisp_format(tail, sizeof tail, "%s.%s.", parent_of(mods[i].first), mods[i].name);
        if (!starts(s + pos, n - pos, tail)) continue;
        size_t rest = pos + tl;
        k->layer = (int32_t)layer;
        k->module = mods[i];
        if (n - rest == strlen("lora_A.weight") && (starts(s + rest, n - rest, "lora_A.weight") ||
                                                    starts(s + rest, n - rest, "lora_B.weight"))) {
            k->half = s[rest + 5];
            return true;
        }
        if (n - rest == strlen("lora_magnitude_vector") && starts(s + rest, n - rest, "lora_magnitude_vector")) {
            k->half = 'M';
            return true;
        }
        return false;
    }
    return false;
}

/* Why a key is not something wisp loads. */
static wisp_status unsupported_key(const wisp_hparams *hp, const char *s, size_t n, wisp_error *err) {
    const char *why = "is not a LoRA A/B of a q/k/v/o/gate/up/down projection of a layer";
    char buf[SHOWN + 1];
    size_t m = n < SHOWN ? n : SHOWN;
    memcpy(buf, s, m);
    buf[m] = 0;
    const wisp_arch_row *row = wisp_hparams_row(hp);
    const bool fused_qkv = row && (row->required & WISP_LT(QKV)), fused_gate_up = row && (row->required & WISP_LT(GATE_UP));
    if (strstr(buf, "lora_magnitude_vector")) why = "is a DoRA magnitude of a module wisp does not adapt (or under a name PEFT does not save)";
    else if (strstr(buf, "lora_embedding")) why = "adapts an embedding, which wisp does not support";
    else if (strstr(buf, "lm_head") || strstr(buf, "embed_tokens")) why = "adapts the embedding or output layer, which wisp does not support";
    else if (strstr(buf, ".bias")) why = "is a bias, which wisp adapters do not carry";
    else if (fused_qkv && (strstr(buf, ".q_proj.") || strstr(buf, ".k_proj.") || strstr(buf, ".v_proj.")))
        why = "names a q/k/v_proj module; this architecture's Hugging Face attention has the fused qkv_proj only";
    else if (fused_gate_up && (strstr(buf, ".gate_proj.") || strstr(buf, ".up_proj.")))
        why = "names a gate/up_proj module; this architecture's Hugging Face MLP has the fused gate_up_proj only";
    else if ((!fused_qkv && strstr(buf, ".qkv_proj.")) || (!fused_gate_up && strstr(buf, ".gate_up_proj.")))
        why = "names a fused module (phi3's qkv_proj/gate_up_proj), which this architecture does not have";
    else if (strstr(buf, "lora_A.") || strstr(buf, "lora_B.")) why = "is a LoRA tensor of a module wisp does not adapt";
    return wisp_fail(err, WISP_ERR_UNSUPPORTED, "adapter_model.safetensors: tensor '%.*s' %s", shown(n), s, why);
}

/* ---- opening ------------------------------------------------------------ */

static wisp_status config_nodes(const char *config, size_t len, size_t *n, wisp_error *err) {
    wisp_json j;
    wisp_status st = wisp_json_parse(&j, config, len, NULL, 0, n, err);
    if (st && st != WISP_ERR_CAPACITY) {
        wisp_error_prefix(err, "adapter_config.json");
        return st;
    }
    return WISP_OK;
}

wisp_status wisp_peft_index_bytes(const char *config, size_t config_len, const void *st, size_t st_len, size_t *bytes,
                                  wisp_error *err) {
    size_t n_cfg;
    wisp_st_plan sp;
    wisp_status s = config_nodes(config, config_len, &n_cfg, err);
    if (s) return s;
    if ((s = wisp_st_plan_memory(st, st_len, &sp, err))) {
        wisp_error_prefix(err, "adapter_model.safetensors");
        return s;
    }
    *bytes = round8(n_cfg * sizeof(wisp_json_node)) + round8(sp.bytes);
    return WISP_OK;
}

static int wisp_type_of(const wisp_st_tensor *t) {
    int ty = wisp_st_dtype_to_wisp(t->dtype);
    return wisp_lora_elem_bytes(ty) ? ty : -1;
}

/* DoRA: the module's lora_magnitude_vector, 1-D [out], present exactly when
 * use_dora is; `bname` is the lora_B key (rewritten in place). */
static wisp_status check_magnitude(const wisp_peft *p, char *bname, const char *module, int64_t out, wisp_error *err) {
    strcpy(bname + strlen(bname) - strlen("lora_B.weight"), "lora_magnitude_vector");
    wisp_st_tensor m;
    bool has = wisp_st_find(&p->st, bname, &m);
    if (has != p->info.use_dora)
        return wisp_fail(err, WISP_ERR_FORMAT, has ? "%s: has a lora_magnitude_vector but adapter_config.json does not "
                                                     "set use_dora"
                                                   : "%s: adapter_config.json sets use_dora but the module has no "
                                                     "lora_magnitude_vector",
                         module);
    if (!has) return WISP_OK;
    int tm = wisp_type_of(&m);
    if (tm < 0)
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "%s: lora_magnitude_vector is %s; wisp needs F32, F16 or BF16",
                         module, wisp_st_dtype_name(m.dtype));
    if (m.n_dims != 1 || m.shape[0] != out)
        return wisp_fail(err, WISP_ERR_SHAPE, "%s: lora_magnitude_vector must be 1-D of %lld (the module's outputs)",
                         module, (long long)out);
    if (!wisp_lora_all_finite(m.data, tm, (size_t)m.n_elements))
        return wisp_fail(err, WISP_ERR_NUMERIC, "%s: lora_magnitude_vector holds NaN or infinite values", module);
    return WISP_OK;
}

/* Check one A tensor and its B; fill the module's pairs (data pointers into
 * st): one pair, or for a fused module one per projection, all sharing A
 * and each with its rows of B. That is exact: row i of the fused module's
 * W + s B A is row i of its projection's W + s B_rows A. */
static wisp_status check_module(const wisp_peft *p, const wisp_st_tensor *a, const key_parts *k,
                                wisp_lora_pair pairs[3], wisp_error *err) {
    char bname[512], module[128];
    if (a->name_len + 16 >= sizeof bname)
        return wisp_fail(err, WISP_ERR_FORMAT, "tensor name '%.*s' is too long", shown(a->name_len), a->name);
    memcpy(bname, a->name, a->name_len);
    bname[a->name_len] = 0;
    bname[a->name_len - strlen("A.weight")] = 'B';
    module_name(k->layer, &k->module, module, sizeof module);
    wisp_st_tensor b;
    if (!wisp_st_find(&p->st, bname, &b))
        return wisp_fail(err, WISP_ERR_NOT_FOUND, "adapter_model.safetensors: '%s' has lora_A but no lora_B", module);
    int ta = wisp_type_of(a), tb = wisp_type_of(&b);
    if (ta < 0 || ta != tb)
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "%s: lora_A is %s and lora_B is %s; wisp needs both F32, F16 or BF16",
                         module, wisp_st_dtype_name(a->dtype), wisp_st_dtype_name(b.dtype));
    if (a->n_dims != 2 || b.n_dims != 2)
        return wisp_fail(err, WISP_ERR_SHAPE, "%s: lora_A and lora_B must be 2-D (they have %u and %u dims)", module,
                         a->n_dims, b.n_dims);
    int64_t r = a->shape[0], in = a->shape[1], out = b.shape[0];
    if (b.shape[1] != r)
        return wisp_fail(err, WISP_ERR_SHAPE, "%s: rank mismatch: lora_A is (%lld, %lld) but lora_B is (%lld, %lld)",
                         module, (long long)r, (long long)in, (long long)b.shape[0], (long long)b.shape[1]);
    if (r < 1 || r > 65536 || in < 1 || out < 1 || in > (1 << 24) || out > (1 << 24))
        return wisp_fail(err, WISP_ERR_SHAPE, "%s: implausible shape: rank %lld, in %lld, out %lld", module,
                         (long long)r, (long long)in, (long long)out);
    /* the rank the config promises */
    int64_t want = p->info.r, rp = pattern_lookup(&p->config, p->rank_pattern, module);
    if (rp >= 0) wisp_json_int(&p->config, rp, &want);
    if (want != r)
        return wisp_fail(err, WISP_ERR_SHAPE, "%s: tensors have rank %lld but adapter_config.json says %lld%s", module,
                         (long long)r, (long long)want, rp >= 0 ? " (rank_pattern)" : " (r)");
    /* the module's rows: its projections' rows, in order */
    int64_t rows[3], want_out = 0;
    for (int i = 0; i < k->module.count; i++) {
        const char *suffix;
        int64_t row0, cols;
        wisp_proj_source(&p->base, k->module.first + i, &suffix, &row0, &rows[i], &cols);
        want_out += rows[i];
    }
    if (k->module.count > 1 && out != want_out)
        return wisp_fail(err, WISP_ERR_SHAPE, "%s: lora_B has %lld rows but the fused module has %lld", module,
                         (long long)out, (long long)want_out);
    double alpha = p->info.lora_alpha;
    int64_t ap = pattern_lookup(&p->config, p->alpha_pattern, module);
    if (ap >= 0) wisp_json_number(&p->config, ap, &alpha);
    const uint8_t *brows = b.data;
    for (int i = 0; i < k->module.count; i++) {
        wisp_lora_pair *pair = &pairs[i];
        memset(pair, 0, sizeof *pair);
        pair->layer = k->layer;
        pair->proj = k->module.first + i;
        pair->rank = (int32_t)r;
        pair->n_in = (int32_t)in;
        pair->n_out = (int32_t)(k->module.count > 1 ? rows[i] : out);
        pair->type = ta;
        pair->a = a->data;
        pair->b = brows;
        pair->alpha = (float)alpha;
        pair->scale = wisp_lora_scale_of(alpha, pair->rank, p->info.use_rslora);
        brows += (size_t)pair->n_out * (size_t)r * wisp_lora_elem_bytes(ta);
    }
    if (!wisp_lora_all_finite(a->data, ta, (size_t)a->n_elements) ||
        !wisp_lora_all_finite(b.data, ta, (size_t)b.n_elements))
        return wisp_fail(err, WISP_ERR_NUMERIC, "%s: the adapter holds NaN or infinite values", module);
    return check_magnitude(p, bname, module, out, err);
}

/* The module is listed in target_modules (exactly or as a '.'-suffix) and
 * its layer in layers_to_transform, when those are lists. */
static wisp_status check_targeted(const wisp_peft *p, const char *module, int32_t layer, wisp_error *err) {
    const wisp_json *j = &p->config;
    if (p->target_modules >= 0) {
        bool hit = false;
        size_t ml = strlen(module);
        for (int64_t e = wisp_json_first(j, p->target_modules); e >= 0 && !hit; e = wisp_json_next(j, e)) {
            const wisp_json_node *n = &j->nodes[e];
            size_t len = n->end - n->start;
            const char *t = j->text + n->start;
            hit = len <= ml && memcmp(module + ml - len, t, len) == 0 && (len == ml || module[ml - len - 1] == '.');
        }
        if (!hit)
            return wisp_fail(err, WISP_ERR_FORMAT, "adapter has tensors for '%s', which target_modules does not list "
                                                   "(PEFT would ignore them)",
                             module);
    }
    if (p->layers_to_transform >= 0) {
        bool hit = false;
        int64_t n;
        if (wisp_json_is(j, p->layers_to_transform, WISP_JSON_ARRAY)) {
            for (int64_t e = wisp_json_first(j, p->layers_to_transform); e >= 0 && !hit; e = wisp_json_next(j, e))
                hit = wisp_json_int(j, e, &n) && n == layer;
        } else {
            hit = wisp_json_int(j, p->layers_to_transform, &n) && n == layer;
        }
        if (!hit)
            return wisp_fail(err, WISP_ERR_FORMAT, "adapter has tensors for layer %d, which layers_to_transform "
                                                   "excludes",
                             (int)layer);
    }
    return WISP_OK;
}

/* Walk every tensor: each must be a LoRA A or B we understand. Fills pairs
 * when `pairs` is non-NULL; counts them and the bytes of rows to move. */
static wisp_status walk(const wisp_peft *p, wisp_lora_pair *pairs, int32_t *n_pairs, size_t *move_bytes,
                        wisp_error *err) {
    int32_t n_a = 0, n_b = 0, n_m = 0, n_pairs_found = 0;
    size_t moved = 0;
    for (size_t i = 0; i < p->st.n_tensors; i++) {
        wisp_st_tensor t;
        wisp_st_tensor_at(&p->st, i, &t);
        key_parts k;
        if (!parse_key(&p->base, t.name, t.name_len, &k)) return unsupported_key(&p->base, t.name, t.name_len, err);
        if (k.half != 'A') {
            n_b += k.half == 'B', n_m += k.half == 'M';
            continue;
        }
        wisp_lora_pair mp[3];
        wisp_status st = check_module(p, &t, &k, mp, err);
        if (st) return st;
        char module[128];
        module_name(k.layer, &k.module, module, sizeof module);
        if ((st = check_targeted(p, module, k.layer, err))) return st;
        for (int j = 0; j < k.module.count; j++) {
            const wisp_lora_pair *pair = &mp[j];
            if (wisp_lora_permutes(p->base.arch, pair->proj))
                moved += round8((size_t)pair->n_out * (size_t)pair->rank * wisp_lora_elem_bytes(pair->type));
            if (p->info.use_dora) moved += 2 * round8((size_t)pair->n_out * sizeof(float)); /* magnitude in F32, norms */
            if (pairs) pairs[n_pairs_found] = *pair;
            n_pairs_found++;
        }
        n_a++;
    }
    if (n_a != n_b)
        return wisp_fail(err, WISP_ERR_FORMAT, "adapter_model.safetensors has %d lora_A but %d lora_B tensors",
                         (int)n_a, (int)n_b);
    if (n_m != (p->info.use_dora ? n_a : 0)) /* each pair found its own: any other is a stray */
        return wisp_fail(err, WISP_ERR_FORMAT, "adapter_model.safetensors has %d lora_magnitude_vector tensors for %d "
                                               "DoRA pairs", (int)n_m, p->info.use_dora ? (int)n_a : 0);
    *n_pairs = n_pairs_found;
    *move_bytes = moved;
    return WISP_OK;
}

wisp_status wisp_peft_open(wisp_peft *p, const char *config, size_t config_len, const void *st, size_t st_len,
                           const wisp_hparams *base, void *index, size_t index_bytes, wisp_error *err) {
    memset(p, 0, sizeof *p);
    if (!base) return wisp_fail(err, WISP_ERR_ARG, "reading a PEFT adapter needs the base model's hyperparameters");
    size_t need;
    wisp_status s = wisp_peft_index_bytes(config, config_len, st, st_len, &need, err);
    if (s) return s;
    if (!index || (uintptr_t)index % 8 || index_bytes < need)
        return wisp_fail(err, WISP_ERR_CAPACITY, "PEFT index needs %zu bytes (8-byte aligned), got %zu", need,
                         index_bytes);
    size_t n_cfg;
    config_nodes(config, config_len, &n_cfg, err);
    wisp_json_node *nodes = index;
    size_t cfg_bytes = round8(n_cfg * sizeof(wisp_json_node));
    if ((s = wisp_json_parse(&p->config, config, config_len, nodes, n_cfg, NULL, err))) {
        wisp_error_prefix(err, "adapter_config.json");
        return s;
    }
    if ((s = wisp_st_open(&p->st, st, st_len, (uint8_t *)index + cfg_bytes, index_bytes - cfg_bytes, err))) {
        wisp_error_prefix(err, "adapter_model.safetensors");
        return s;
    }
    p->base = *base;
    if ((s = read_config(p, err))) return s;
    size_t moved;
    if ((s = walk(p, NULL, &p->n_pairs, &moved, err))) return s;
    p->lora_bytes = round8((size_t)p->n_pairs * sizeof(wisp_lora_pair)) + moved;
    return WISP_OK;
}

/* B rows from HF order (src) to GGUF order (dst). */
static void rows_to_gguf(const wisp_lora_pair *pair, int32_t head_rows, const uint8_t *src, uint8_t *dst) {
    size_t row = (size_t)pair->rank * wisp_lora_elem_bytes(pair->type);
    for (int32_t g = 0; g < pair->n_out; g++)
        memcpy(dst + (size_t)g * row, src + (size_t)wisp_lora_hf_row(g, head_rows) * row, row);
}

/* DoRA's magnitude of a pair into F32, rows in GGUF order (head_rows > 0:
 * the q/k permutation of arch llama). A fused module's magnitude covers all
 * its rows (per-row norms: each projection's rows are its own); the pair
 * takes its range. Checked by walk(): it exists. */
static void read_magnitude(const wisp_peft *p, const wisp_lora_pair *pair, int32_t head_rows, float *dst) {
    hf_module mods[MAX_MODULES];
    int n_mods = modules_of(&p->base, mods), i = 0;
    while (i + 1 < n_mods && !(pair->proj >= mods[i].first && pair->proj < mods[i].first + mods[i].count)) i++;
    int64_t offset = 0; /* rows of the module's projections before this one */
    for (int q = mods[i].first; q < pair->proj; q++) {
        const char *suffix;
        int64_t row0, rows, cols;
        wisp_proj_source(&p->base, q, &suffix, &row0, &rows, &cols);
        offset += rows;
    }
    char module[128], key[512];
    module_name(pair->layer, &mods[i], module, sizeof module);
    wisp_format(key, sizeof key, "base_model.model.%s.lora_magnitude_vector", module);
    wisp_st_tensor m;
    if (!wisp_st_find(&p->st, key, &m)) wisp_st_find(&p->st, key + strlen("base_model.model."), &m);
    int type = wisp_type_of(&m);
    for (int32_t g = 0; g < pair->n_out; g++) {
        size_t h = (head_rows ? (size_t)wisp_lora_hf_row(g, head_rows) : (size_t)g) + (size_t)offset;
        if (type == WISP_TYPE_F32) { /* safetensors offsets need not be aligned */
            memcpy(&dst[g], m.data + 4 * h, 4);
            continue;
        }
        uint16_t bits;
        memcpy(&bits, m.data + 2 * h, 2);
        dst[g] = type == WISP_TYPE_F16 ? wisp_f16_to_f32(bits) : wisp_bf16_to_f32(bits);
    }
}

wisp_status wisp_peft_read(const wisp_peft *p, void *mem, size_t mem_bytes, wisp_lora *out, wisp_error *err) {
    memset(out, 0, sizeof *out);
    if (!mem || (uintptr_t)mem % 8 || mem_bytes < p->lora_bytes)
        return wisp_fail(err, WISP_ERR_CAPACITY, "PEFT adapter needs %zu bytes (8-byte aligned), got %zu",
                         p->lora_bytes, mem_bytes);
    wisp_lora_pair *pairs = mem;
    int32_t n;
    size_t moved;
    wisp_status s = walk(p, pairs, &n, &moved, err);
    if (s) return s;
    uint8_t *rows = (uint8_t *)mem + round8((size_t)n * sizeof(wisp_lora_pair));
    int32_t max_rank = 0;
    for (int32_t i = 0; i < n; i++) {
        wisp_lora_pair *pair = &pairs[i];
        if (pair->rank > max_rank) max_rank = pair->rank;
        bool permutes = wisp_lora_permutes(p->base.arch, pair->proj);
        int32_t head_rows = permutes ? wisp_lora_head_rows(&p->base, pair->proj) : 0;
        if (permutes) {
            if (head_rows < 2 || head_rows % 2 || pair->n_out % head_rows)
                return wisp_fail(err, WISP_ERR_SHAPE, "blk.%d.%s: %d rows do not split into heads of %d",
                                 (int)pair->layer, wisp_proj_gguf_name(pair->proj), (int)pair->n_out, (int)head_rows);
            rows_to_gguf(pair, head_rows, pair->b, rows);
            pair->b = rows;
            rows += round8((size_t)pair->n_out * (size_t)pair->rank * wisp_lora_elem_bytes(pair->type));
        }
        if (p->info.use_dora) {
            read_magnitude(p, pair, permutes ? head_rows : 0, (float *)(void *)rows);
            pair->magnitude = (const float *)(void *)rows;
            rows += round8((size_t)pair->n_out * sizeof(float));
            pair->norm = (float *)(void *)rows; /* filled when attached */
            rows += round8((size_t)pair->n_out * sizeof(float));
        }
    }
    wisp_lora_sort_pairs(pairs, n);
    out->pairs = pairs;
    out->n_pairs = n;
    out->max_rank = max_rank;
    out->rslora = p->info.use_rslora;
    return wisp_lora_validate(out, &p->base, "PEFT adapter", err);
}

/* ---- export ------------------------------------------------------------- */

/* The alpha PEFT needs for a pair to compute the pair's scale. */
static double export_alpha(const wisp_lora_pair *q, bool rslora) {
    if (wisp_lora_scale_of(q->alpha, q->rank, rslora) == q->scale) return q->alpha;
    double a = (double)q->scale * (rslora ? sqrt((double)q->rank) : (double)q->rank);
    return a;
}

/* One module to export: its pairs (NULL where a projection is not adapted)
 * and the single PEFT pair they become. For a fused module (phi3) the pairs'
 * A are stacked and their B placed block-diagonally, so the rank is the sum
 * of theirs: row i of the fused B A is then exactly row i of its
 * projection's B A (the other blocks are zeros), and un-adapted projections
 * get zero rows. When the pairs share one A (what an import of a PEFT fused
 * pair holds), A is written once and the Bs stacked: the same product at
 * the original rank. One PEFT module has one scale, so pairs of different
 * scale or element type are refused rather than rescaled. */
typedef struct export_module {
    int32_t layer;
    hf_module m;
    const wisp_lora_pair *part[3];
    int64_t part_rows[3];
    const wisp_lora_pair *first; /* the first present part */
    bool shared_a;
    wisp_lora_pair fused; /* rank, scale, alpha, type and n_in/n_out of the PEFT pair */
} export_module;

static bool same_a(const wisp_lora_pair *x, const wisp_lora_pair *y) {
    if (x->rank != y->rank || x->n_in != y->n_in || x->type != y->type) return false;
    return x->a == y->a || memcmp(x->a, y->a, (size_t)x->rank * (size_t)x->n_in * wisp_lora_elem_bytes(x->type)) == 0;
}

/* Gather module `m` of `layer`; false when none of its projections is adapted. */
static bool gather(const wisp_lora *l, const wisp_hparams *base, int32_t layer, const hf_module *m, export_module *em) {
    memset(em, 0, sizeof *em);
    em->layer = layer;
    em->m = *m;
    for (int32_t i = 0; i < l->n_pairs; i++) {
        const wisp_lora_pair *q = &l->pairs[i];
        if (q->layer == layer && q->proj >= m->first && q->proj < m->first + m->count) em->part[q->proj - m->first] = q;
    }
    int32_t rank_sum = 0;
    em->shared_a = true;
    for (int i = 0; i < m->count; i++) {
        const char *suffix;
        int64_t row0, cols;
        wisp_proj_source(base, m->first + i, &suffix, &row0, &em->part_rows[i], &cols);
        if (!em->part[i]) continue;
        if (!em->first) em->first = em->part[i];
        else em->shared_a &= same_a(em->first, em->part[i]);
        rank_sum += em->part[i]->rank;
    }
    if (!em->first) return false;
    em->fused = *em->first;
    em->fused.proj = m->first;
    if (m->count > 1) {
        em->fused.rank = em->shared_a ? em->first->rank : rank_sum;
        em->fused.n_out = 0;
        for (int i = 0; i < m->count; i++) em->fused.n_out += (int32_t)em->part_rows[i];
        /* the nominal alpha of the first part stays when it gives the same scale at the fused rank */
        em->fused.alpha = em->first->alpha;
    }
    return true;
}

/* A fused module's pairs must agree on what one PEFT pair holds once. */
static wisp_status check_fusable(const export_module *em, bool rslora, wisp_error *err) {
    if (em->m.count == 1) return WISP_OK;
    char module[128];
    module_name(em->layer, &em->m, module, sizeof module);
    for (int i = 0; i < em->m.count; i++) {
        const wisp_lora_pair *q = em->part[i];
        if (!q) continue;
        if (q->type != em->first->type || q->n_in != em->first->n_in)
            return wisp_fail(err, WISP_ERR_UNSUPPORTED, "%s: blk.%d.%s and blk.%d.%s differ in element type; one PEFT "
                                                        "module holds one", module, (int)q->layer,
                             wisp_proj_gguf_name(q->proj), (int)em->first->layer, wisp_proj_gguf_name(em->first->proj));
        if (q->scale != em->first->scale)
            return wisp_fail(err, WISP_ERR_UNSUPPORTED, "%s: blk.%d.%s has scale %.9g and blk.%d.%s %.9g; one PEFT module "
                                                        "has one scale, and rescaling B would not be exact", module,
                             (int)q->layer, wisp_proj_gguf_name(q->proj), (double)q->scale, (int)em->first->layer,
                             wisp_proj_gguf_name(em->first->proj), (double)em->first->scale);
    }
    /* DoRA: the module's magnitude is its parts' in row order; a part left out would need
     * m = ||W row||, which m / ||W row|| does not give back as exactly 1 */
    for (int i = 0; i < em->m.count; i++)
        if (em->first->magnitude && !em->part[i])
            return wisp_fail(err, WISP_ERR_UNSUPPORTED, "%s: a DoRA adapter of a fused module must adapt all its "
                                                        "projections (blk.%d.%s is not)", module, (int)em->layer,
                             wisp_proj_gguf_name(em->m.first + i));
    if (wisp_lora_scale_of(export_alpha(&em->fused, rslora), em->fused.rank, rslora) != em->fused.scale)
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "%s: no lora_alpha reproduces scale %.9g at the fused rank %d", module,
                         (double)em->fused.scale, (int)em->fused.rank);
    return WISP_OK;
}

/* Calls `fn` for every adapted module, in layer then module order; stops at an error. */
typedef wisp_status (*module_fn)(const export_module *em, void *ctx, wisp_error *err);

static wisp_status for_each_module(const wisp_lora *l, const wisp_hparams *base, module_fn fn, void *ctx,
                                   wisp_error *err) {
    hf_module mods[MAX_MODULES];
    int n_mods = modules_of(base, mods);
    for (int32_t layer = 0; layer < base->n_layers; layer++)
        for (int i = 0; i < n_mods; i++) {
            export_module em;
            if (!gather(l, base, layer, &mods[i], &em)) continue;
            wisp_status st = check_fusable(&em, l->rslora, err);
            if (st || (st = fn(&em, ctx, err))) return st;
        }
    return WISP_OK;
}

/* What the config needs from a pass over the modules. */
typedef struct config_scan {
    bool rslora;
    bool layer_used[4096];
    unsigned module_mask; /* bit i: modules_of()[i] is adapted somewhere */
    int32_t n_layers_used, n_modules;
    int32_t r0;
    double a0;
    char what; /* pass: 's'can, 'a'lpha_pattern, 'r'ank_pattern, 't'arget list */
    wisp_json_writer *w;
} config_scan;

static wisp_status config_pass(const export_module *em, void *ctx, wisp_error *err) {
    config_scan *c = ctx;
    char module[128];
    module_name(em->layer, &em->m, module, sizeof module);
    double a = export_alpha(&em->fused, c->rslora);
    switch (c->what) {
    case 's':
        if (em->layer >= 4096) return wisp_fail(err, WISP_ERR_ARG, "layer %d is beyond 4096", (int)em->layer);
        if (c->n_modules++ == 0) c->r0 = em->fused.rank, c->a0 = a;
        if (!c->layer_used[em->layer]) c->n_layers_used++;
        c->layer_used[em->layer] = true;
        c->module_mask |= 1u << em->m.first;
        break;
    case 'a':
        if (a != c->a0) wisp_jw_key(c->w, module), wisp_jw_double(c->w, a, 17);
        break;
    case 'r':
        if (em->fused.rank != c->r0) wisp_jw_key(c->w, module), wisp_jw_int(c->w, em->fused.rank);
        break;
    default:
        wisp_jw_string(c->w, module);
    }
    return WISP_OK;
}

wisp_status wisp_peft_write_config(const wisp_lora *l, const wisp_hparams *base, const char *base_model, char *buf,
                                   size_t cap, size_t *len, wisp_error *err) {
    if (!base) return wisp_fail(err, WISP_ERR_ARG, "PEFT export needs the base model's hyperparameters");
    wisp_status st = wisp_lora_validate(l, base, "adapter to export", err);
    if (st) return st;
    if (l->n_pairs == 0) return wisp_fail(err, WISP_ERR_ARG, "the adapter has no pairs to export");
    /* the adapted set: layers x modules, or an explicit list */
    config_scan c;
    memset(&c, 0, sizeof c);
    c.rslora = l->rslora;
    c.what = 's';
    if ((st = for_each_module(l, base, config_pass, &c, err))) return st;
    hf_module mods[MAX_MODULES];
    int n_mods = modules_of(base, mods), n_kinds = 0;
    for (int i = 0; i < n_mods; i++) n_kinds += (int)(c.module_mask >> mods[i].first & 1);
    const bool product = (int64_t)c.n_layers_used * n_kinds == c.n_modules;
    const bool all_layers = c.n_layers_used == base->n_layers;

    wisp_json_writer w;
    c.w = &w;
    wisp_jw_init(&w, buf, cap, true);
    wisp_jw_begin_object(&w); /* keys in sorted order, as PEFT writes them */
    wisp_jw_key(&w, "alpha_pattern");
    wisp_jw_begin_object(&w);
    c.what = 'a';
    for_each_module(l, base, config_pass, &c, err);
    wisp_jw_end_object(&w);
    wisp_jw_key(&w, "base_model_name_or_path");
    if (base_model) wisp_jw_string(&w, base_model);
    else wisp_jw_null(&w);
    wisp_jw_key(&w, "bias");
    wisp_jw_string(&w, "none");
    wisp_jw_key(&w, "fan_in_fan_out");
    wisp_jw_bool(&w, false);
    wisp_jw_key(&w, "inference_mode");
    wisp_jw_bool(&w, true);
    wisp_jw_key(&w, "init_lora_weights");
    wisp_jw_bool(&w, true);
    wisp_jw_key(&w, "layers_to_transform");
    if (product && !all_layers) {
        wisp_jw_begin_array(&w);
        for (int32_t k = 0; k < 4096; k++)
            if (c.layer_used[k]) wisp_jw_int(&w, k);
        wisp_jw_end_array(&w);
    } else {
        wisp_jw_null(&w);
    }
    wisp_jw_key(&w, "lora_alpha");
    wisp_jw_double(&w, c.a0, 17);
    wisp_jw_key(&w, "lora_dropout");
    wisp_jw_double(&w, 0.0, 17);
    wisp_jw_key(&w, "modules_to_save");
    wisp_jw_null(&w);
    wisp_jw_key(&w, "peft_type");
    wisp_jw_string(&w, "LORA");
    wisp_jw_key(&w, "r");
    wisp_jw_int(&w, c.r0);
    wisp_jw_key(&w, "rank_pattern");
    wisp_jw_begin_object(&w);
    c.what = 'r';
    for_each_module(l, base, config_pass, &c, err);
    wisp_jw_end_object(&w);
    wisp_jw_key(&w, "target_modules");
    wisp_jw_begin_array(&w);
    if (product) {
        for (int i = 0; i < n_mods; i++)
            if (c.module_mask >> mods[i].first & 1) wisp_jw_string(&w, mods[i].name);
    } else {
        c.what = 't';
        for_each_module(l, base, config_pass, &c, err);
    }
    wisp_jw_end_array(&w);
    wisp_jw_key(&w, "task_type");
    wisp_jw_string(&w, "CAUSAL_LM");
    wisp_jw_key(&w, "use_dora");
    wisp_jw_bool(&w, wisp_lora_is_dora(l));
    wisp_jw_key(&w, "use_rslora");
    wisp_jw_bool(&w, l->rslora);
    wisp_jw_end_object(&w);
    return wisp_jw_finish_sized(&w, cap, len, "adapter_config.json", err);
}

#define EXPORT_NAME_MAX 96

/* tensors per pair: A, B and, for DoRA, the magnitude */
static size_t tensors_per_pair(const wisp_lora *l) { return wisp_lora_is_dora(l) ? 3 : 2; }

size_t wisp_peft_export_bytes(const wisp_lora *l) {
    return (size_t)(l->n_pairs > 0 ? l->n_pairs : 0) * tensors_per_pair(l) * (sizeof(wisp_st_out_tensor) + EXPORT_NAME_MAX);
}

/* half 'A', 'B', or 'M' for DoRA's magnitude, which PEFT saves as
 * "<module>.lora_magnitude_vector" (no ".weight": PEFT >= 0.12 strips the
 * suffix its DoraLinearLayer parameter gained, keeping the 0.9 names) */
static void tensor_key(const export_module *em, char half, char *buf, size_t cap) {
    char module[128];
    module_name(em->layer, &em->m, module, sizeof module);
    if (half == 'M') wisp_format(buf, cap, "base_model.model.%s.lora_magnitude_vector", module);
    else wisp_format(buf, cap, "base_model.model.%s.lora_%c.weight", module, half);
}

/* The safetensors header table, filled module by module. */
typedef struct header_fill {
    size_t per, n;
    wisp_st_out_tensor *ts;
    char *names;
} header_fill;

static wisp_status header_pass(const export_module *em, void *ctx, wisp_error *err) {
    (void)err;
    header_fill *h = ctx;
    const wisp_lora_pair *q = &em->fused;
    int dtype = wisp_st_dtype_from_wisp(q->type);
    for (size_t k = 0; k < h->per; k++) {
        wisp_st_out_tensor *t = &h->ts[h->n];
        char *name = h->names + h->n++ * EXPORT_NAME_MAX;
        tensor_key(em, "ABM"[k], name, EXPORT_NAME_MAX);
        memset(t, 0, sizeof *t);
        t->name = name;
        t->dtype = k == 2 ? wisp_st_dtype_from_wisp(WISP_TYPE_F32) : dtype;
        t->n_dims = k == 2 ? 1 : 2;
        t->shape[0] = k == 2 ? q->n_out : k ? q->n_out : q->rank;
        t->shape[1] = k == 2 ? 0 : k ? q->rank : q->n_in;
    }
    return WISP_OK;
}

typedef struct data_pass_ctx {
    const wisp_hparams *base;
    wisp_sink *sink;
    bool dora;
} data_pass_ctx;

static wisp_status write_zeros(wisp_sink *sink, size_t bytes, wisp_error *err) {
    static const uint8_t zeros[256];
    while (bytes > 0) {
        size_t k = bytes < sizeof zeros ? bytes : sizeof zeros;
        wisp_status st = wisp_sink_write(sink, zeros, k, err);
        if (st) return st;
        bytes -= k;
    }
    return WISP_OK;
}

/* A fused module's A (stacked, or the shared one) and block-diagonal B. */
static wisp_status write_fused(const export_module *em, wisp_sink *sink, wisp_error *err) {
    const size_t eb = wisp_lora_elem_bytes(em->fused.type), in = (size_t)em->fused.n_in;
    wisp_status st;
    for (int i = 0; i < em->m.count; i++) {
        const wisp_lora_pair *q = em->part[i];
        if (!q) continue;
        if ((st = wisp_sink_write(sink, q->a, (size_t)q->rank * in * eb, err))) return st;
        if (em->shared_a) break;
    }
    int32_t col = 0; /* first column of the part's block */
    for (int i = 0; i < em->m.count; i++) {
        const wisp_lora_pair *q = em->part[i];
        const size_t full = (size_t)em->fused.rank * eb;
        if (!q) { /* not adapted: zero rows, a zero delta */
            if ((st = write_zeros(sink, (size_t)em->part_rows[i] * full, err))) return st;
            continue;
        }
        const size_t before = em->shared_a ? 0 : (size_t)col * eb, mine = (size_t)q->rank * eb;
        for (int32_t r = 0; r < q->n_out; r++) {
            if ((st = write_zeros(sink, before, err)) ||
                (st = wisp_sink_write(sink, (const uint8_t *)q->b + (size_t)r * mine, mine, err)) ||
                (st = write_zeros(sink, full - before - mine, err)))
                return st;
        }
        col += q->rank;
    }
    if (!em->first->magnitude) return WISP_OK;
    for (int i = 0; i < em->m.count; i++) /* all present: check_fusable */
        if ((st = wisp_sink_write(sink, em->part[i]->magnitude, (size_t)em->part[i]->n_out * sizeof(float), err)))
            return st;
    return WISP_OK;
}

static wisp_status data_pass(const export_module *em, void *ctx, wisp_error *err) {
    data_pass_ctx *c = ctx;
    if (em->m.count > 1) return write_fused(em, c->sink, err);
    const wisp_lora_pair *q = em->first;
    wisp_sink *sink = c->sink;
    size_t eb = wisp_lora_elem_bytes(q->type), row = (size_t)q->rank * eb;
    wisp_status st;
    if ((st = wisp_sink_write(sink, q->a, (size_t)q->n_in * row, err))) return st;
    bool permutes = wisp_lora_permutes(c->base->arch, q->proj);
    int32_t head_rows = permutes ? wisp_lora_head_rows(c->base, q->proj) : 0;
    if (!permutes) {
        if ((st = wisp_sink_write(sink, q->b, (size_t)q->n_out * row, err))) return st;
    } else {
        for (int32_t h = 0; h < q->n_out; h++) {
            const uint8_t *src = (const uint8_t *)q->b + (size_t)wisp_lora_gguf_row(h, head_rows) * row;
            if ((st = wisp_sink_write(sink, src, row, err))) return st;
        }
    }
    if (!c->dora) return WISP_OK;
    if (!permutes) return wisp_sink_write(sink, q->magnitude, (size_t)q->n_out * sizeof(float), err);
    for (int32_t h = 0; h < q->n_out; h++) /* a magnitude per output row: rows move as B's do */
        if ((st = wisp_sink_write(sink, &q->magnitude[wisp_lora_gguf_row(h, head_rows)], sizeof(float), err)))
            return st;
    return WISP_OK;
}

wisp_status wisp_peft_write_safetensors(const wisp_lora *l, const wisp_hparams *base, void *scratch,
                                        size_t scratch_bytes, wisp_sink *sink, wisp_error *err) {
    if (!base) return wisp_fail(err, WISP_ERR_ARG, "PEFT export needs the base model's hyperparameters");
    wisp_status st = wisp_lora_validate(l, base, "adapter to export", err);
    if (st) return st;
    size_t need = wisp_peft_export_bytes(l);
    if (scratch_bytes < need || (need && (!scratch || (uintptr_t)scratch % 8)))
        return wisp_fail(err, WISP_ERR_CAPACITY, "PEFT export needs %zu bytes of scratch (8-byte aligned), got %zu",
                         need, scratch_bytes);
    /* modules <= pairs, so the pairs' table size is room enough */
    header_fill h = {.per = tensors_per_pair(l), .ts = scratch};
    h.names = (char *)(h.ts + h.per * (size_t)l->n_pairs);
    if ((st = for_each_module(l, base, header_pass, &h, err))) return st;
    static const char *const meta[] = {"format", "pt"};
    if ((st = wisp_st_write_header(sink, h.ts, h.n, meta, 1, err))) return st;
    data_pass_ctx c = {base, sink, h.per == 3};
    return for_each_module(l, base, data_pass, &c, err);
}
