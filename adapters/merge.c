#include "merge.h"

#include <math.h>
#include <string.h>

#include "half.h"
#include "types.h"

int wisp_merge_terms_for(const wisp_lora *const *adapters, const float *user_scales, int n_adapters, int32_t layer,
                         int proj, wisp_merge_term *terms, int cap) {
    int n = 0;
    for (int i = 0; i < n_adapters; i++) {
        const wisp_lora *l = adapters[i];
        for (int32_t k = 0; k < l->n_pairs; k++) {
            const wisp_lora_pair *p = &l->pairs[k];
            if (p->layer != layer || p->proj != proj) continue;
            if (n < cap) {
                terms[n].pair = p;
                terms[n].scale = (user_scales ? user_scales[i] : 1.0f) * p->scale;
                terms[n].row0 = 0;
            }
            n++;
            break; /* validated adapters adapt each projection once */
        }
    }
    return n < cap ? n : cap;
}

int wisp_merge_terms_for_tensor(const wisp_lora *const *adapters, const float *user_scales, int n_adapters,
                                const wisp_hparams *hp, const char *name, size_t name_len, wisp_merge_term *terms,
                                int cap) {
    /* "blk.N.<suffix>.weight" */
    if (name_len < 4 || memcmp(name, "blk.", 4) != 0) return 0;
    size_t pos = 4;
    int32_t layer = 0;
    while (pos < name_len && name[pos] >= '0' && name[pos] <= '9' && pos < 10) layer = layer * 10 + (name[pos++] - '0');
    if (pos == 4 || pos >= name_len || name[pos] != '.') return 0;
    const char *suffix_at = name + pos + 1;
    size_t suffix_len = name_len - pos - 1;
    if (suffix_len <= 7 || memcmp(suffix_at + suffix_len - 7, ".weight", 7) != 0) return 0;
    suffix_len -= 7;
    int n = 0;
    for (int proj = 0; proj < WISP_PROJ_COUNT && n < cap; proj++) {
        const char *suffix;
        int64_t row0, rows, cols;
        wisp_proj_source(hp, proj, &suffix, &row0, &rows, &cols);
        if (strlen(suffix) != suffix_len || memcmp(suffix, suffix_at, suffix_len) != 0) continue;
        int got = wisp_merge_terms_for(adapters, user_scales, n_adapters, layer, proj, terms + n, cap - n);
        for (int k = 0; k < got; k++) terms[n + k].row0 = row0;
        n += got;
    }
    return n;
}

static float element(const void *data, int type, size_t i) {
    const uint8_t *b = data;
    if (type == WISP_TYPE_F32) return wisp_load_f32(b + 4 * i);
    if (type == WISP_TYPE_F16) return wisp_f16_to_f32(wisp_load_u16(b + 2 * i));
    return wisp_bf16_to_f32(wisp_load_u16(b + 2 * i));
}

/* DoRA: the merged row is m (W + s B A) / ||W + s B A||, the norm summed in
 * double over the row just formed in float, as the context does at attach
 * (core/dora.c), so merged and attached weights agree to rounding. */
static void dora_rescale_row(const wisp_lora_pair *p, int64_t row, float *w) {
    double ss = 0;
    for (int32_t c = 0; c < p->n_in; c++) ss += (double)w[c] * (double)w[c];
    float f = p->magnitude[row] / (float)sqrt(ss);
    for (int32_t c = 0; c < p->n_in; c++) w[c] *= f;
}

void wisp_merge_add_row(const wisp_merge_term *terms, int n_terms, int64_t row, float *w) {
    for (int t = 0; t < n_terms; t++) {
        const wisp_lora_pair *p = terms[t].pair;
        if (row < terms[t].row0 || row >= terms[t].row0 + p->n_out) continue; /* another part of a fused tensor */
        row -= terms[t].row0;
        const size_t n_in = (size_t)p->n_in;
        for (int32_t k = 0; k < p->rank; k++) {
            const float coef = terms[t].scale * element(p->b, p->type, (size_t)row * (size_t)p->rank + (size_t)k);
            if (coef == 0.0f) continue;
            const size_t base = (size_t)k * n_in;
            if (p->type == WISP_TYPE_F32) {
                const uint8_t *a = (const uint8_t *)p->a + 4 * base;
                for (size_t c = 0; c < n_in; c++) w[c] += coef * wisp_load_f32(a + 4 * c);
            } else {
                for (size_t c = 0; c < n_in; c++) w[c] += coef * element(p->a, p->type, base + c);
            }
        }
        if (p->magnitude) dora_rescale_row(p, row, w); /* alone in its tensor: the merge refuses company */
        row += terms[t].row0;
    }
}
