#include "lora_gguf.h"

#include <math.h>
#include <string.h>

#include "gguf_write.h"
#include "half.h"
#include "lora_layout.h"
#include "types.h"

#define NAME_SHOWN 80 /* longest piece of a hostile tensor name quoted in a message */

static int shown(uint64_t len) { return (int)(len > NAME_SHOWN ? NAME_SHOWN : len); }

static bool ends_with(wisp_str s, const char *suffix) {
    size_t n = strlen(suffix);
    return s.len >= n && memcmp(s.ptr + s.len - n, suffix, n) == 0;
}

/* Which half of a pair a tensor is: 'a', 'b', or 0 for neither. */
static char pair_half(wisp_str name) {
    if (ends_with(name, ".lora_a")) return 'a';
    if (ends_with(name, ".lora_b")) return 'b';
    return 0;
}

static wisp_status need_str_kv(const wisp_gguf *g, const char *key, wisp_str *out, wisp_error *err) {
    wisp_gguf_kv kv;
    if (!wisp_gguf_find_kv(g, key, &kv))
        return wisp_fail(err, WISP_ERR_NOT_FOUND, "not a GGUF LoRA adapter: metadata '%s' is missing", key);
    if (!wisp_gguf_get_str(g, key, out))
        return wisp_fail(err, WISP_ERR_FORMAT, "metadata '%s' must be a string (it is %s)", key,
                         wisp_gguf_vtype_name(kv.type));
    return WISP_OK;
}

wisp_status wisp_lora_gguf_plan(const wisp_gguf *g, wisp_lora_gguf_info *info, wisp_error *err) {
    memset(info, 0, sizeof *info);
    wisp_str s;
    wisp_status st;
    if ((st = need_str_kv(g, "general.type", &s, err))) return st;
    if (!wisp_str_eq(s, "adapter"))
        return wisp_fail(err, WISP_ERR_FORMAT, "not a GGUF LoRA adapter: general.type is '%.*s', expected 'adapter'",
                         shown(s.len), s.ptr);
    if ((st = need_str_kv(g, "adapter.type", &s, err))) return st;
    if (!wisp_str_eq(s, "lora"))
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "adapter.type is '%.*s'; wisp reads only 'lora' adapters",
                         shown(s.len), s.ptr);
    if ((st = need_str_kv(g, "general.architecture", &s, err))) return st;
    if (s.len == 0 || s.len >= sizeof info->arch)
        return wisp_fail(err, WISP_ERR_FORMAT, "general.architecture '%.*s' is not a plausible name", shown(s.len),
                         s.ptr);
    memcpy(info->arch, s.ptr, s.len);
    info->arch[s.len] = '\0';
    wisp_gguf_kv kv;
    if (wisp_gguf_find_kv(g, "adapter.lora.alpha", &kv)) {
        if (!wisp_gguf_get_f32(g, "adapter.lora.alpha", &info->alpha))
            return wisp_fail(err, WISP_ERR_FORMAT, "adapter.lora.alpha must be a float (it is %s)",
                             wisp_gguf_vtype_name(kv.type));
        if (!isfinite(info->alpha))
            return wisp_fail(err, WISP_ERR_NUMERIC, "adapter.lora.alpha is not finite");
    }
    size_t cursor = 0;
    wisp_gguf_tensor t;
    uint64_t n_a = 0, n_b = 0;
    while (wisp_gguf_next_tensor(g, &cursor, &t)) {
        char half = pair_half(t.name);
        if (half == 'a') n_a++;
        else if (half == 'b') n_b++;
        else if (ends_with(t.name, "_norm.weight"))
            return wisp_fail(err, WISP_ERR_UNSUPPORTED,
                             "tensor '%.*s': wisp adapters change projections only, not norms "
                             "(llama.cpp ignores such tensors; remove it to load the rest)",
                             shown(t.name.len), t.name.ptr);
        else
            return wisp_fail(err, WISP_ERR_FORMAT, "tensor '%.*s' is neither a .lora_a nor a .lora_b",
                             shown(t.name.len), t.name.ptr);
    }
    if (n_a != n_b)
        return wisp_fail(err, WISP_ERR_FORMAT, "adapter has %llu .lora_a tensors but %llu .lora_b tensors",
                         (unsigned long long)n_a, (unsigned long long)n_b);
    if (n_a > (uint64_t)WISP_PROJ_COUNT * 65536)
        return wisp_fail(err, WISP_ERR_FORMAT, "adapter has %llu pairs, more than any model has projections",
                         (unsigned long long)n_a);
    info->n_pairs = (int32_t)n_a;
    info->pairs_bytes = (size_t)n_a * sizeof(wisp_lora_pair);
    return WISP_OK;
}

static wisp_status read_pair(const wisp_gguf *g, const wisp_gguf_tensor *a, float alpha, wisp_lora_pair *out,
                             wisp_error *err) {
    int n = shown(a->name.len);
    int32_t layer;
    int proj;
    if (!wisp_lora_parse_weight_name(a->name.ptr, a->name.len - strlen(".lora_a"), &layer, &proj))
        return wisp_fail(err, WISP_ERR_UNSUPPORTED,
                         "tensor '%.*s' names no projection wisp adapts (expected blk.N.<attn_q|attn_k|attn_v|"
                         "attn_output|ffn_gate|ffn_up|ffn_down>.weight.lora_a)",
                         n, a->name.ptr);
    char bname[160];
    wisp_format(bname, sizeof bname, "blk.%d.%s.weight.lora_b", (int)layer, wisp_proj_gguf_name(proj));
    wisp_gguf_tensor b;
    if (!wisp_gguf_find_tensor(g, bname, &b))
        return wisp_fail(err, WISP_ERR_NOT_FOUND, "tensor '%.*s' has no partner '%s'", n, a->name.ptr, bname);
    if (a->n_dims != 2 || b.n_dims != 2)
        return wisp_fail(err, WISP_ERR_SHAPE, "%s: lora_a and lora_b must be 2-D (they have %u and %u dims)", bname,
                         a->n_dims, b.n_dims);
    if (a->type != b.type || !wisp_lora_elem_bytes((int)a->type)) {
        const wisp_type_info *ta = wisp_type_info_of((int)a->type), *tb = wisp_type_info_of((int)b.type);
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "%s: lora_a is %s and lora_b is %s; wisp needs both F32, F16 or BF16",
                         bname, ta ? ta->name : "?", tb ? tb->name : "?");
    }
    if (a->ne[1] != b.ne[0])
        return wisp_fail(err, WISP_ERR_SHAPE, "%s: rank mismatch: lora_a has ne = [%lld, %lld] (rank %lld) but lora_b "
                         "has ne = [%lld, %lld] (rank %lld)",
                         bname, (long long)a->ne[0], (long long)a->ne[1], (long long)a->ne[1], (long long)b.ne[0],
                         (long long)b.ne[1], (long long)b.ne[0]);
    if (a->ne[0] < 1 || a->ne[0] > (1 << 24) || b.ne[1] < 1 || b.ne[1] > (1 << 24) || a->ne[1] < 1 ||
        a->ne[1] > 65536)
        return wisp_fail(err, WISP_ERR_SHAPE, "%s: implausible shape: in %lld, out %lld, rank %lld", bname,
                         (long long)a->ne[0], (long long)b.ne[1], (long long)a->ne[1]);
    memset(out, 0, sizeof *out);
    out->layer = layer;
    out->proj = proj;
    out->rank = (int32_t)a->ne[1];
    out->n_in = (int32_t)a->ne[0];
    out->n_out = (int32_t)b.ne[1];
    out->type = (int32_t)a->type;
    out->a = a->data;
    out->b = b.data;
    out->alpha = alpha;
    /* llama.cpp: s = alpha / r with r = B.ne[0], or 1 when alpha is 0 */
    out->scale = alpha != 0.0f ? alpha / (float)out->rank : 1.0f;
    if (!wisp_lora_all_finite(a->data, out->type, (size_t)a->ne[0] * (size_t)a->ne[1]) ||
        !wisp_lora_all_finite(b.data, out->type, (size_t)b.ne[0] * (size_t)b.ne[1]))
        return wisp_fail(err, WISP_ERR_NUMERIC, "%s: the pair holds NaN or infinite values", bname);
    return WISP_OK;
}

wisp_status wisp_lora_gguf_read(const wisp_gguf *g, const wisp_hparams *base, wisp_lora_pair *pairs, size_t cap,
                                wisp_lora *out, wisp_error *err) {
    memset(out, 0, sizeof *out);
    wisp_lora_gguf_info info;
    wisp_status st = wisp_lora_gguf_plan(g, &info, err);
    if (st) return st;
    if (cap < (size_t)info.n_pairs)
        return wisp_fail(err, WISP_ERR_CAPACITY, "the adapter has %d pairs but the table has room for %zu",
                         (int)info.n_pairs, cap);
    if (base && strcmp(info.arch, wisp_arch_name(base->arch)) != 0)
        return wisp_fail(err, WISP_ERR_SHAPE, "adapter is for architecture '%s' but the base model is '%s'", info.arch,
                         wisp_arch_name(base->arch));
    /* wisp's own notes (see the writer): nominal alpha and rsLoRA, informational */
    float nominal_alpha = info.alpha;
    bool rslora = false;
    float f;
    if (wisp_gguf_get_f32(g, "wisp.lora.alpha", &f) && isfinite(f)) nominal_alpha = f;
    wisp_gguf_get_bool(g, "wisp.lora.rslora", &rslora);

    size_t cursor = 0;
    wisp_gguf_tensor t;
    int32_t n = 0, max_rank = 0;
    while (wisp_gguf_next_tensor(g, &cursor, &t)) {
        if (pair_half(t.name) != 'a') continue;
        if ((st = read_pair(g, &t, info.alpha, &pairs[n], err))) return st;
        pairs[n].alpha = nominal_alpha;
        if (pairs[n].rank > max_rank) max_rank = pairs[n].rank;
        n++;
    }
    wisp_lora_sort_pairs(pairs, n);
    out->pairs = pairs;
    out->n_pairs = n;
    out->max_rank = max_rank;
    out->rslora = rslora;
    return wisp_lora_validate(out, base, "GGUF LoRA", err);
}

/* ---- writing ------------------------------------------------------------ */

/* The scale llama.cpp derives from a file alpha for rank r. */
static float file_scale(float alpha, int32_t rank) { return alpha != 0.0f ? alpha / (float)rank : 1.0f; }

static int32_t pairs_matching(const wisp_lora *l, float alpha) {
    int32_t n = 0;
    for (int32_t i = 0; i < l->n_pairs; i++) n += file_scale(alpha, l->pairs[i].rank) == l->pairs[i].scale;
    return n;
}

/* An alpha whose alpha / r is exactly `scale` in float, found near scale * r. */
static float alpha_for(float scale, int32_t rank) {
    float a = scale * (float)rank;
    if (a == 0.0f) return a;
    for (int step = 0; step < 8 && file_scale(a, rank) != scale; step++)
        a = nextafterf(a, file_scale(a, rank) < scale ? INFINITY : -INFINITY);
    return a;
}

static float choose_alpha(const wisp_lora *l) {
    if (l->n_pairs == 0) return 0.0f;
    const wisp_lora_pair *p0 = &l->pairs[0];
    float candidates[3] = {p0->alpha, alpha_for(p0->scale, p0->rank), 0.0f};
    float best = candidates[1];
    int32_t best_n = -1;
    for (int c = 0; c < 3; c++) {
        if (!isfinite(candidates[c])) continue;
        int32_t n = pairs_matching(l, candidates[c]);
        if (n > best_n) best_n = n, best = candidates[c];
        if (n == l->n_pairs) break;
    }
    return best;
}

#define FOLD_CHUNK 256

static wisp_status write_folded_b(wisp_sink *s, const wisp_lora_pair *p, double factor, wisp_error *err) {
    size_t n = (size_t)p->n_out * (size_t)p->rank, eb = wisp_lora_elem_bytes(p->type);
    const uint8_t *src = p->b;
    uint8_t buf[FOLD_CHUNK * 4];
    for (size_t i = 0; i < n; i += FOLD_CHUNK) {
        size_t m = n - i < FOLD_CHUNK ? n - i : FOLD_CHUNK;
        for (size_t k = 0; k < m; k++) {
            const uint8_t *e = src + (i + k) * eb;
            double v;
            if (p->type == WISP_TYPE_F32) v = wisp_load_f32(e);
            else if (p->type == WISP_TYPE_F16) v = wisp_f16_to_f32(wisp_load_u16(e));
            else v = wisp_bf16_to_f32(wisp_load_u16(e));
            float r = (float)(v * factor);
            if (p->type == WISP_TYPE_F32) wisp_store_f32(buf + 4 * k, r);
            else if (p->type == WISP_TYPE_F16) wisp_store_u16(buf + 2 * k, wisp_f32_to_f16(r));
            else wisp_store_u16(buf + 2 * k, wisp_f32_to_bf16(r));
        }
        wisp_status st = wisp_sink_write(s, buf, m * eb, err);
        if (st) return st;
    }
    return WISP_OK;
}

wisp_status wisp_lora_gguf_write(const wisp_lora *l, const char *arch, const char *name, wisp_sink *sink,
                                 wisp_lora_gguf_written *written, wisp_error *err) {
    wisp_status st;
    if ((st = wisp_lora_validate(l, NULL, "adapter to write", err))) return st;
    if (l->n_pairs > 0 && l->pairs[0].magnitude)
        return wisp_fail(err, WISP_ERR_UNSUPPORTED,
                         "adapter to write is DoRA: GGUF LoRA adapters (llama.cpp's format) cannot carry DoRA's "
                         "magnitude vectors; write it as a PEFT folder, or merge it into the base");
    /* never write a poisoned adapter (the reader would refuse it anyway) */
    for (int32_t i = 0; i < l->n_pairs; i++) {
        const wisp_lora_pair *p = &l->pairs[i];
        if (!wisp_lora_all_finite(p->a, p->type, (size_t)p->rank * (size_t)p->n_in) ||
            !wisp_lora_all_finite(p->b, p->type, (size_t)p->rank * (size_t)p->n_out))
            return wisp_fail(err, WISP_ERR_NUMERIC, "adapter to write: blk.%d.%s holds NaN or infinite values",
                             (int)p->layer, wisp_proj_gguf_name(p->proj));
    }
    if (!arch || !*arch || strlen(arch) >= 32)
        return wisp_fail(err, WISP_ERR_ARG, "a GGUF LoRA needs the base model's architecture");
    const float alpha = choose_alpha(l);
    const float nominal = l->n_pairs ? l->pairs[0].alpha : alpha;
    const bool note_alpha = nominal != alpha && isfinite(nominal);
    uint64_t n_kv = 4 + (name != NULL) + note_alpha + l->rslora;
    if ((st = wisp_gguf_write_header(sink, 2 * (uint64_t)l->n_pairs, n_kv, err))) return st;
    if ((st = wisp_gguf_write_kv_str(sink, "general.architecture", arch, err))) return st;
    if ((st = wisp_gguf_write_kv_str(sink, "general.type", "adapter", err))) return st;
    if (name && (st = wisp_gguf_write_kv_str(sink, "general.name", name, err))) return st;
    if ((st = wisp_gguf_write_kv_str(sink, "adapter.type", "lora", err))) return st;
    if ((st = wisp_gguf_write_kv_f32(sink, "adapter.lora.alpha", alpha, err))) return st;
    if (note_alpha && (st = wisp_gguf_write_kv_f32(sink, "wisp.lora.alpha", nominal, err))) return st;
    if (l->rslora && (st = wisp_gguf_write_kv_bool(sink, "wisp.lora.rslora", true, err))) return st;

    /* infos: A then B of each pair, offsets in that order */
    uint64_t offset = 0;
    for (int32_t i = 0; i < l->n_pairs; i++) {
        const wisp_lora_pair *p = &l->pairs[i];
        char tname[96];
        for (int half = 0; half < 2; half++) {
            wisp_format(tname, sizeof tname, "blk.%d.%s.weight.%s", (int)p->layer, wisp_proj_gguf_name(p->proj),
                        half ? "lora_b" : "lora_a");
            wisp_gguf_out_tensor t = {tname, 2, {half ? p->rank : p->n_in, half ? p->n_out : p->rank, 1, 1},
                                      (uint32_t)p->type};
            if ((st = wisp_gguf_write_tensor_info(sink, &t, offset, err))) return st;
            offset += wisp_gguf_tensor_padded_bytes(&t, WISP_GGUF_DEFAULT_ALIGNMENT);
        }
    }
    if ((st = wisp_sink_pad(sink, WISP_GGUF_DEFAULT_ALIGNMENT, err))) return st;

    int32_t folded = 0;
    for (int32_t i = 0; i < l->n_pairs; i++) {
        const wisp_lora_pair *p = &l->pairs[i];
        size_t eb = wisp_lora_elem_bytes(p->type);
        if ((st = wisp_sink_write(sink, p->a, (size_t)p->rank * (size_t)p->n_in * eb, err))) return st;
        if ((st = wisp_sink_pad(sink, WISP_GGUF_DEFAULT_ALIGNMENT, err))) return st;
        float s = file_scale(alpha, p->rank);
        if (s == p->scale) {
            st = wisp_sink_write(sink, p->b, (size_t)p->n_out * (size_t)p->rank * eb, err);
        } else {
            folded++;
            st = write_folded_b(sink, p, (double)p->scale / (double)s, err);
        }
        if (st) return st;
        if ((st = wisp_sink_pad(sink, WISP_GGUF_DEFAULT_ALIGNMENT, err))) return st;
    }
    if (written) {
        written->alpha = alpha;
        written->n_folded = folded;
    }
    return WISP_OK;
}
