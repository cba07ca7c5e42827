#include "quantize_model.h"

#include <string.h>

#include "gguf_write.h"
#include "lora_layout.h"
#include "types.h"

const char wisp_qtarget_names[] =
    "q4_k_m, q5_k_m, f32, f16, bf16, q8_0, q6_k, q5_k, q5_1, q5_0, q4_k, q4_1, q4_0, iq4_nl, q3_k, q2_k";

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

static bool same_ci(const char *a, const char *b) {
    while (*a && *b && lower((unsigned char)*a) == lower((unsigned char)*b)) a++, b++;
    return !*a && !*b;
}

/* Types the reference quantizers can produce for weights. */
static bool is_target_type(int t) {
    const wisp_type_info *ti = wisp_type_info_of(t);
    return ti && ti->quantize && wisp_type_is_weight(t);
}

bool wisp_qtarget_parse(const char *name, wisp_qtarget *t) {
    t->type = -1;
    if (same_ci(name, "keep")) t->recipe = WISP_QRECIPE_KEEP;
    else if (same_ci(name, "q4_k_m")) t->recipe = WISP_QRECIPE_Q4_K_M;
    else if (same_ci(name, "q5_k_m")) t->recipe = WISP_QRECIPE_Q5_K_M;
    else {
        t->recipe = WISP_QRECIPE_TYPE;
        t->type = wisp_type_from_name(name);
        if (!is_target_type(t->type)) return false;
    }
    return true;
}

bool wisp_quant_is_weight(const wisp_gguf_tensor *t) {
    static const char suffix[] = ".weight";
    size_t n = sizeof suffix - 1;
    return t->n_dims >= 2 && t->ne[1] > 1 && t->name.len > n &&
           memcmp(t->name.ptr + t->name.len - n, suffix, n) == 0;
}

/* llama.cpp's use_more_bits: the first and last eighth of the layers, and
 * every third one between. */
static bool use_more_bits(int32_t i, int32_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static int recipe_type(const wisp_qtarget *target, const wisp_gguf_tensor *t, int32_t n_layers, bool tied) {
    int base = target->recipe == WISP_QRECIPE_Q4_K_M ? WISP_TYPE_Q4_K : WISP_TYPE_Q5_K;
    if (wisp_str_eq(t->name, "output.weight") || (tied && wisp_str_eq(t->name, "token_embd.weight")))
        return WISP_TYPE_Q6_K;
    int32_t layer;
    int proj;
    if (wisp_lora_parse_weight_name(t->name.ptr, (size_t)t->name.len, &layer, &proj) &&
        (proj == WISP_PROJ_V || proj == WISP_PROJ_DOWN) && use_more_bits(layer, n_layers))
        return WISP_TYPE_Q6_K;
    return base;
}

/* llama.cpp's substitutes when a row does not split into the type's blocks. */
static int fallback_of(int type) {
    switch (type) {
    case WISP_TYPE_Q4_K: return WISP_TYPE_Q5_0;
    case WISP_TYPE_Q5_K: return WISP_TYPE_Q5_1;
    case WISP_TYPE_Q6_K: return WISP_TYPE_Q8_0;
    case WISP_TYPE_Q2_K:
    case WISP_TYPE_Q3_K: return WISP_TYPE_IQ4_NL;
    default: return WISP_TYPE_F16;
    }
}

int wisp_qtarget_tensor_type(const wisp_qtarget *target, const wisp_gguf_tensor *t, int32_t n_layers, bool tied,
                             int *wanted) {
    int type = (int)t->type;
    if (target->recipe != WISP_QRECIPE_KEEP && wisp_quant_is_weight(t))
        type = target->recipe == WISP_QRECIPE_TYPE ? target->type : recipe_type(target, t, n_layers, tied);
    if (wanted) *wanted = type;
    if (type == (int)t->type) return type; /* kept as it is, whatever its row length */
    if (!wisp_type_row_bytes(type, t->ne[0])) type = fallback_of(type);
    if (!wisp_type_row_bytes(type, t->ne[0])) type = WISP_TYPE_F16;
    return type;
}

uint32_t wisp_qtarget_file_type(const wisp_qtarget *t) {
    if (t->recipe == WISP_QRECIPE_Q4_K_M) return 15;
    if (t->recipe == WISP_QRECIPE_Q5_K_M) return 17;
    switch (t->type) {
    case WISP_TYPE_F32: return 0;
    case WISP_TYPE_F16: return 1;
    case WISP_TYPE_Q4_0: return 2;
    case WISP_TYPE_Q4_1: return 3;
    case WISP_TYPE_Q8_0: return 7;
    case WISP_TYPE_Q5_0: return 8;
    case WISP_TYPE_Q5_1: return 9;
    case WISP_TYPE_Q2_K: return 10;
    case WISP_TYPE_Q3_K: return 11;
    case WISP_TYPE_Q4_K: return 14;
    case WISP_TYPE_Q5_K: return 16;
    case WISP_TYPE_Q6_K: return 18;
    case WISP_TYPE_IQ4_NL: return 25;
    case WISP_TYPE_BF16: return 32;
    default: return 0;
    }
}

int64_t wisp_tensor_rows(const wisp_gguf_tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

static bool is_float_type(uint32_t t) { return t == WISP_TYPE_F32 || t == WISP_TYPE_F16 || t == WISP_TYPE_BF16; }

/* Input metadata the output does not copy: the split.* keys of a gguf-split
 * input, and unless the types are kept, the file-type facts it replaces. */
static bool dropped_key(const wisp_gguf_kv *kv, bool keep) {
    if (kv->key.len > 6 && memcmp(kv->key.ptr, "split.", 6) == 0) return true;
    return !keep && (wisp_str_eq(kv->key, "general.file_type") || wisp_str_eq(kv->key, "general.quantization_version"));
}

wisp_status wisp_model_rewrite_header(const wisp_gguf *in, const wisp_qtarget *target, const uint32_t *out_types,
                                      wisp_sink *sink, wisp_error *err) {
    const bool keep = target->recipe == WISP_QRECIPE_KEEP;
    bool quantized = false;
    const uint64_t n_tensors = wisp_gguf_tensor_count(in); /* over every shard of a split input */
    for (uint64_t i = 0; i < n_tensors; i++) quantized |= !is_float_type(out_types[i]);
    /* metadata: everything of the input, file type facts replaced; a split
     * input's split.* keys are dropped, the output being one file */
    uint64_t n_kv = 0;
    size_t cursor = 0;
    wisp_gguf_kv kv;
    while (wisp_gguf_next_kv(in, &cursor, &kv))
        n_kv += !dropped_key(&kv, keep);
    if (!keep) n_kv += 1 + quantized;
    wisp_status st = wisp_gguf_write_header(sink, n_tensors, n_kv, err);
    cursor = 0;
    while (!st && wisp_gguf_next_kv(in, &cursor, &kv)) {
        if (dropped_key(&kv, keep)) continue;
        st = wisp_gguf_write_kv_copy(sink, &kv, err);
    }
    if (!st && !keep) st = wisp_gguf_write_kv_u32(sink, "general.file_type", wisp_qtarget_file_type(target), err);
    if (!st && !keep && quantized) st = wisp_gguf_write_kv_u32(sink, "general.quantization_version", 2, err);
    if (st) return st;
    /* tensor infos, same order, new types */
    cursor = 0;
    wisp_gguf_tensor t;
    uint64_t offset = 0, i = 0;
    char name[512];
    while (wisp_gguf_next_tensor(in, &cursor, &t)) {
        if (t.name.len >= sizeof name)
            return wisp_fail(err, WISP_ERR_UNSUPPORTED, "tensor name of %llu bytes is too long",
                             (unsigned long long)t.name.len);
        memcpy(name, t.name.ptr, t.name.len);
        name[t.name.len] = 0;
        wisp_gguf_out_tensor o = {name, t.n_dims, {t.ne[0], t.ne[1], t.ne[2], t.ne[3]}, out_types[i++]};
        const wisp_type_info *ti = wisp_type_info_of((int)t.type), *to = wisp_type_info_of((int)o.type);
        if (o.type != t.type && (!ti || !ti->dequantize || !to || !to->quantize))
            return wisp_fail(err, WISP_ERR_UNSUPPORTED, "tensor '%s': wisp cannot convert %s to %s", name,
                             ti ? ti->name : "?", to ? to->name : "?");
        if (!wisp_gguf_tensor_bytes(&o))
            return wisp_fail(err, WISP_ERR_ARG, "tensor '%s': rows of %lld cannot be stored as %s", name,
                             (long long)t.ne[0], wisp_type_info_of((int)o.type) ? wisp_type_info_of((int)o.type)->name : "?");
        if ((st = wisp_gguf_write_tensor_info(sink, &o, offset, err))) return st;
        offset += wisp_gguf_tensor_padded_bytes(&o, in->alignment);
    }
    return wisp_sink_pad(sink, in->alignment, err);
}

void wisp_model_rewrite_rows(const wisp_gguf_tensor *t, int out_type, const wisp_merge_term *terms, int n_terms,
                             int64_t r0, int64_t r1, float *scratch, uint8_t *out) {
    const int64_t cols = t->ne[0];
    const size_t in_row = wisp_type_row_bytes((int)t->type, cols), out_row = wisp_type_row_bytes(out_type, cols);
    const uint8_t *src = (const uint8_t *)t->data + (size_t)r0 * in_row;
    if (n_terms == 0 && out_type == (int)t->type) {
        memcpy(out, src, (size_t)(r1 - r0) * in_row);
        return;
    }
    const wisp_type_info *ti = wisp_type_info_of((int)t->type), *to = wisp_type_info_of(out_type);
    for (int64_t r = r0; r < r1; r++, src += in_row, out += out_row) {
        ti->dequantize(src, scratch, cols);
        if (n_terms) wisp_merge_add_row(terms, n_terms, r, scratch);
        to->quantize(scratch, out, cols);
    }
}
