#include "lora_layout.h"

#include <math.h>
#include <string.h>

#include "half.h"
#include "types.h"

void wisp_lora_proj_shape(const wisp_hparams *hp, int proj, int32_t *n_in, int32_t *n_out) {
    int32_t q_dim = hp->n_heads * hp->head_dim, kv_dim = hp->n_kv_heads * hp->head_dim;
    int32_t in = 0, out = 0;
    switch (proj) {
    case WISP_PROJ_Q: in = hp->dim; out = q_dim; break;
    case WISP_PROJ_K:
    case WISP_PROJ_V: in = hp->dim; out = kv_dim; break;
    case WISP_PROJ_O: in = q_dim; out = hp->dim; break;
    case WISP_PROJ_GATE:
    case WISP_PROJ_UP: in = hp->dim; out = hp->ffn_dim; break;
    case WISP_PROJ_DOWN: in = hp->ffn_dim; out = hp->dim; break;
    default: break;
    }
    *n_in = in;
    *n_out = out;
}

bool wisp_lora_parse_weight_name(const char *s, size_t len, int32_t *layer, int *proj) {
    const char *p = s, *end = s + len;
    if (len < 4 || memcmp(p, "blk.", 4) != 0) return false;
    p += 4;
    int32_t n = 0;
    const char *digits = p;
    while (p < end && *p >= '0' && *p <= '9' && p - digits < 6) n = n * 10 + (*p++ - '0');
    if (p == digits || (p - digits > 1 && *digits == '0') || p >= end || *p != '.') return false;
    p++;
    const char *dot = p;
    while (dot < end && *dot != '.') dot++;
    if (end - dot != 7 || memcmp(dot, ".weight", 7) != 0) return false;
    for (int k = 0; k < WISP_PROJ_COUNT; k++) {
        const char *g = wisp_proj_gguf_name(k);
        if ((size_t)(dot - p) == strlen(g) && memcmp(p, g, (size_t)(dot - p)) == 0) {
            *layer = n;
            *proj = k;
            return true;
        }
    }
    return false;
}

size_t wisp_lora_elem_bytes(int type) {
    switch (type) {
    case WISP_TYPE_F32: return 4;
    case WISP_TYPE_F16:
    case WISP_TYPE_BF16: return 2;
    default: return 0;
    }
}

bool wisp_lora_all_finite(const void *data, int type, size_t n) {
    const uint8_t *b = data;
    for (size_t i = 0; i < n; i++) {
        /* the exponent field all ones means Inf or NaN, in every one of these types */
        if (type == WISP_TYPE_F32) {
            if ((wisp_load_u32(b + 4 * i) & 0x7f800000u) == 0x7f800000u) return false;
        } else {
            uint16_t h = wisp_load_u16(b + 2 * i);
            uint16_t mask = type == WISP_TYPE_F16 ? 0x7c00u : 0x7f80u;
            if ((h & mask) == mask) return false;
        }
    }
    return true;
}

static bool pair_before(const wisp_lora_pair *a, const wisp_lora_pair *b) {
    return a->layer != b->layer ? a->layer < b->layer : a->proj < b->proj;
}

void wisp_lora_sort_pairs(wisp_lora_pair *pairs, int32_t n) {
    /* insertion sort: importers produce nearly sorted lists, and it needs no memory */
    for (int32_t i = 1; i < n; i++) {
        wisp_lora_pair p = pairs[i];
        int32_t j = i;
        while (j > 0 && pair_before(&p, &pairs[j - 1])) {
            pairs[j] = pairs[j - 1];
            j--;
        }
        pairs[j] = p;
    }
}

static wisp_status check_pair(const wisp_lora_pair *p, const wisp_hparams *base, const char *what, wisp_error *err) {
    if (p->proj < 0 || p->proj >= WISP_PROJ_COUNT)
        return wisp_fail(err, WISP_ERR_ARG, "%s: pair has unknown projection %d", what, (int)p->proj);
    const char *pn = wisp_proj_gguf_name(p->proj);
    if (p->layer < 0)
        return wisp_fail(err, WISP_ERR_ARG, "%s: blk.%d.%s: negative layer", what, (int)p->layer, pn);
    if (p->rank < 1 || p->n_in < 1 || p->n_out < 1)
        return wisp_fail(err, WISP_ERR_SHAPE, "%s: blk.%d.%s: rank %d, n_in %d, n_out %d must all be positive", what,
                         (int)p->layer, pn, (int)p->rank, (int)p->n_in, (int)p->n_out);
    if (!wisp_lora_elem_bytes(p->type))
        return wisp_fail(err, WISP_ERR_UNSUPPORTED, "%s: blk.%d.%s: LoRA tensors must be F32, F16 or BF16 (type %d)",
                         what, (int)p->layer, pn, (int)p->type);
    if (!p->a || !p->b) return wisp_fail(err, WISP_ERR_ARG, "%s: blk.%d.%s: missing A or B data", what, (int)p->layer, pn);
    if (!isfinite(p->scale))
        return wisp_fail(err, WISP_ERR_NUMERIC, "%s: blk.%d.%s: scale is not finite", what, (int)p->layer, pn);
    if (!base) return WISP_OK;
    if (p->layer >= base->n_layers)
        return wisp_fail(err, WISP_ERR_SHAPE, "%s: blk.%d.%s: the base model has only %d layers", what, (int)p->layer,
                         pn, (int)base->n_layers);
    int32_t n_in, n_out;
    wisp_lora_proj_shape(base, p->proj, &n_in, &n_out);
    if (p->n_in != n_in || p->n_out != n_out)
        return wisp_fail(err, WISP_ERR_SHAPE,
                         "%s: blk.%d.%s: adapter maps %d inputs to %d outputs, but the base projection maps %d to %d "
                         "(wrong base model?)",
                         what, (int)p->layer, pn, (int)p->n_in, (int)p->n_out, (int)n_in, (int)n_out);
    return WISP_OK;
}

wisp_status wisp_lora_validate(const wisp_lora *l, const wisp_hparams *base, const char *what, wisp_error *err) {
    if (!what) what = "adapter";
    if (l->n_pairs < 0 || (l->n_pairs > 0 && !l->pairs))
        return wisp_fail(err, WISP_ERR_ARG, "%s: invalid pair table", what);
    const wisp_lora_pair *first_of[WISP_PROJ_COUNT] = {0};
    bool sorted = true;
    int32_t max_rank = 0;
    for (int32_t i = 0; i < l->n_pairs; i++) {
        const wisp_lora_pair *p = &l->pairs[i];
        wisp_status st = check_pair(p, base, what, err);
        if (st) return st;
        const wisp_lora_pair *f = first_of[p->proj];
        if (!f) first_of[p->proj] = p;
        else if (f->n_in != p->n_in || f->n_out != p->n_out)
            return wisp_fail(err, WISP_ERR_SHAPE, "%s: blk.%d.%s is %d x %d but blk.%d.%s is %d x %d", what,
                             (int)p->layer, wisp_proj_gguf_name(p->proj), (int)p->n_out, (int)p->n_in, (int)f->layer,
                             wisp_proj_gguf_name(f->proj), (int)f->n_out, (int)f->n_in);
        if (i > 0 && !pair_before(&l->pairs[i - 1], p)) sorted = false;
        if (p->rank > max_rank) max_rank = p->rank;
    }
    /* DoRA is a property of the whole adapter (PEFT's use_dora) */
    for (int32_t i = 1; i < l->n_pairs; i++)
        if (!l->pairs[i].magnitude != !l->pairs[0].magnitude)
            return wisp_fail(err, WISP_ERR_FORMAT, "%s: blk.%d.%s is %s but blk.%d.%s is not: DoRA is all pairs or none",
                             what, (int)l->pairs[i].layer, wisp_proj_gguf_name(l->pairs[i].proj),
                             l->pairs[i].magnitude ? "DoRA" : "plain LoRA", (int)l->pairs[0].layer,
                             wisp_proj_gguf_name(l->pairs[0].proj));
    /* duplicates: adjacent in a sorted table (what importers produce), else a plain scan */
    for (int32_t i = 0; i < l->n_pairs; i++) {
        const wisp_lora_pair *p = &l->pairs[i];
        for (int32_t j = sorted ? (i > 0 ? i - 1 : 0) : 0; j < i; j++)
            if (l->pairs[j].layer == p->layer && l->pairs[j].proj == p->proj)
                return wisp_fail(err, WISP_ERR_FORMAT, "%s: blk.%d.%s is adapted twice", what, (int)p->layer,
                                 wisp_proj_gguf_name(p->proj));
    }
    if (l->max_rank < max_rank) /* consumers size rank-long scratch by it */
        return wisp_fail(err, WISP_ERR_ARG, "%s: max_rank is %d but a pair has rank %d", what, (int)l->max_rank,
                         (int)max_rank);
    return WISP_OK;
}

bool wisp_lora_is_dora(const wisp_lora *l) { return l->n_pairs > 0 && l->pairs && l->pairs[0].magnitude; }

bool wisp_lora_permutes(wisp_arch arch, int proj) {
    return arch == WISP_ARCH_LLAMA && (proj == WISP_PROJ_Q || proj == WISP_PROJ_K);
}

int32_t wisp_lora_hf_row(int32_t gguf_row, int32_t head_dim) {
    int32_t half = head_dim / 2, head = gguf_row / head_dim, j = gguf_row % head_dim;
    return head * head_dim + (j % 2) * half + j / 2;
}

int32_t wisp_lora_gguf_row(int32_t hf_row, int32_t head_dim) {
    int32_t half = head_dim / 2, head = hf_row / head_dim, j = hf_row % head_dim;
    return head * head_dim + (j % half) * 2 + j / half;
}

int32_t wisp_lora_head_rows(const wisp_hparams *hp, int proj) {
    int32_t n_in, n_out;
    wisp_lora_proj_shape(hp, proj, &n_in, &n_out);
    int32_t heads = proj == WISP_PROJ_K ? hp->n_kv_heads : hp->n_heads;
    return heads > 0 ? n_out / heads : 0;
}

float wisp_lora_scale_of(double alpha, int32_t rank, bool rslora) {
    double r = rank > 0 ? (double)rank : 1.0;
    return (float)(alpha / (rslora ? sqrt(r) : r));
}
