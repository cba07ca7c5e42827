#include "ref_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "types.h"

double ref_uniform(uint64_t *s) {
    /* splitmix64: good enough spread for test data, identical everywhere */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

void ref_proj_shape(const wisp_hparams *hp, int32_t proj, int32_t *n_in, int32_t *n_out) {
    int32_t q = hp->n_heads * hp->head_dim, kv = hp->n_kv_heads * hp->head_dim;
    switch (proj) {
    case WISP_PROJ_Q: *n_in = hp->dim, *n_out = q; break;
    case WISP_PROJ_K:
    case WISP_PROJ_V: *n_in = hp->dim, *n_out = kv; break;
    case WISP_PROJ_O: *n_in = q, *n_out = hp->dim; break;
    case WISP_PROJ_DOWN: *n_in = hp->ffn_dim, *n_out = hp->dim; break;
    default: *n_in = hp->dim, *n_out = hp->ffn_dim; break;
    }
}

static double *deq_weight(const wisp_weight *w) {
    double *d = malloc(sizeof(double) * (size_t)w->rows * (size_t)w->cols);
    float *row = malloc(sizeof(float) * (size_t)w->cols);
    if (!d || !row) {
        free(d);
        free(row);
        return NULL;
    }
    for (int32_t r = 0; r < w->rows; r++) {
        wisp_type_info_of(w->type)->dequantize(w->data + (size_t)r * w->row_bytes, row, w->cols);
        for (int32_t c = 0; c < w->cols; c++) d[(size_t)r * w->cols + c] = row[c];
    }
    free(row);
    return d;
}

static double *copy_vec(const float *v, size_t n) {
    if (!v) return NULL;
    double *d = malloc(sizeof(double) * n);
    if (d)
        for (size_t i = 0; i < n; i++) d[i] = v[i];
    return d;
}

bool ref_model_load(ref_model *r, const wisp_model *m) {
    memset(r, 0, sizeof *r);
    const wisp_hparams *hp = &m->hp;
    r->hp = *hp;
    r->model = m;
    r->n_ctx = 4096;
    size_t L = (size_t)hp->n_layers, D = (size_t)hp->dim;
    int32_t q = hp->n_heads * hp->head_dim, kv = hp->n_kv_heads * hp->head_dim;
    r->embd = deq_weight(&m->tok_embd);
    r->out = deq_weight(&m->output);
    r->out_norm = copy_vec(m->output_norm, D);
    r->attn_norm = malloc(sizeof(double) * L * D);
    r->ffn_norm = malloc(sizeof(double) * L * D);
    bool ok = r->embd && r->out && r->out_norm && r->attn_norm && r->ffn_norm;
    for (int p = 0; p < WISP_PROJ_COUNT && ok; p++) {
        int32_t n_in, n_out;
        ref_proj_shape(hp, p, &n_in, &n_out);
        size_t per = (size_t)n_in * (size_t)n_out;
        r->w[p] = malloc(sizeof(double) * L * per);
        ok = r->w[p] != NULL;
        for (size_t l = 0; l < L && ok; l++) {
            double *w = deq_weight(&m->layers[l].proj[p]);
            ok = w != NULL;
            if (ok) memcpy(r->w[p] + l * per, w, sizeof(double) * per);
            free(w);
        }
    }
    if (ok && m->layers[0].bias_q) {
        r->bq = malloc(sizeof(double) * L * (size_t)q);
        r->bk = malloc(sizeof(double) * L * (size_t)kv);
        r->bv = malloc(sizeof(double) * L * (size_t)kv);
        ok = r->bq && r->bk && r->bv;
    }
    for (size_t l = 0; l < L && ok; l++) {
        for (size_t i = 0; i < D; i++) {
            r->attn_norm[l * D + i] = m->layers[l].attn_norm[i];
            r->ffn_norm[l * D + i] = m->layers[l].ffn_norm[i];
        }
        if (r->bq) {
            for (int32_t i = 0; i < q; i++) r->bq[l * (size_t)q + (size_t)i] = m->layers[l].bias_q[i];
            for (int32_t i = 0; i < kv; i++) {
                r->bk[l * (size_t)kv + (size_t)i] = m->layers[l].bias_k[i];
                r->bv[l * (size_t)kv + (size_t)i] = m->layers[l].bias_v[i];
            }
        }
    }
    if (!ok) ref_model_free(r);
    return ok;
}

void ref_model_free(ref_model *r) {
    free(r->embd);
    free(r->out);
    free(r->out_norm);
    free(r->attn_norm);
    free(r->ffn_norm);
    for (int p = 0; p < WISP_PROJ_COUNT; p++) free(r->w[p]);
    free(r->bq);
    free(r->bk);
    free(r->bv);
    memset(r, 0, sizeof *r);
}

static void rmsnorm(double *y, const double *x, const double *w, int32_t n, double eps) {
    double ss = 0;
    for (int32_t i = 0; i < n; i++) ss += x[i] * x[i];
    double s = 1.0 / sqrt(ss / n + eps);
    for (int32_t i = 0; i < n; i++) y[i] = x[i] * s * w[i];
}

/* y[n_out] = W x + bias + sum of the LoRA pairs on (layer, proj); t is the token row (for dropout) */
static void project(const ref_model *r, int32_t layer, int32_t proj, int32_t t, const double *bias, const double *x,
                    double *y) {
    int32_t n_in, n_out;
    ref_proj_shape(&r->hp, proj, &n_in, &n_out);
    const double *w = r->w[proj] + (size_t)layer * (size_t)n_in * (size_t)n_out;
    for (int32_t o = 0; o < n_out; o++) {
        double s = 0.0;
        for (int32_t i = 0; i < n_in; i++) s += w[(size_t)o * n_in + i] * x[i];
        y[o] = s;
    }
    const ref_lora *dora = NULL;
    for (int32_t k = 0; k < r->n_lora; k++) {
        const ref_lora *l = &r->lora[k];
        if (l->layer != layer || l->proj != proj) continue;
        if (l->m) dora = l;
        for (int32_t j = 0; j < l->rank; j++) {
            double h = 0;
            for (int32_t i = 0; i < n_in; i++) {
                double xi = x[i];
                if (r->keep) xi = r->keep(r->keep_user, layer, proj, t, i) ? xi * r->keep_scale : 0.0;
                h += l->a[(size_t)j * n_in + i] * xi;
            }
            for (int32_t o = 0; o < n_out; o++) y[o] += l->scale * l->b[(size_t)o * l->rank + j] * h;
        }
    }
    if (dora) {
        double *norm = malloc(sizeof(double) * (size_t)n_out);
        if (!dora->norm) ref_dora_norms(r, dora, norm);
        for (int32_t o = 0; o < n_out; o++) y[o] *= dora->m[o] / (dora->norm ? dora->norm[o] : norm[o]);
        free(norm);
    }
    if (bias)
        for (int32_t o = 0; o < n_out; o++) y[o] += bias[o];
}

void ref_dora_norms(const ref_model *r, const ref_lora *l, double *norm) {
    const double *w = r->w[l->proj] + (size_t)l->layer * (size_t)l->n_in * (size_t)l->n_out;
    for (int32_t o = 0; o < l->n_out; o++) {
        double ss = 0;
        for (int32_t i = 0; i < l->n_in; i++) {
            double v = w[(size_t)o * l->n_in + i];
            for (int32_t j = 0; j < l->rank; j++) v += l->scale * l->b[(size_t)o * l->rank + j] * l->a[(size_t)j * l->n_in + i];
            ss += v * v;
        }
        norm[o] = sqrt(ss);
    }
}

static bool windowed(const wisp_hparams *hp, int32_t l) {
    if (hp->window <= 0) return false;
    switch (hp->arch) {
    case WISP_ARCH_GEMMA2: return l % 2 == 0;
    case WISP_ARCH_GEMMA3: return l % hp->window_pattern < hp->window_pattern - 1;
    default: return true;
    }
}

/* YaRN (llama.cpp's ggml rope with ext_factor 1, beta_fast 32, beta_slow 1):
 * how much of pair i keeps its unscaled angle. The pair turning b times over
 * the original context n0 is d(b) = n ln(n0 / (2 pi b)) / (2 ln base); pairs
 * up to floor(d(32)) keep it all, from ceil(d(1)) none, linearly between. */
static double yarn_keep(const wisp_hparams *hp, int32_t i) {
    const double pi = 3.14159265358979323846;
    double n = hp->rope_dim, n0 = hp->rope_orig_ctx, lb = log((double)hp->rope_base);
    double lo = fmax(0.0, floor(n * log(n0 / (2 * pi * 32)) / (2 * lb)));
    double hi = fmin(n - 1, ceil(n * log(n0 / (2 * pi)) / (2 * lb)));
    double y = (i - lo) / fmax(0.001, hi - lo);
    return 1.0 - fmin(1.0, fmax(0.0, y));
}

/* theta_i = pos * scale * base^(-2i/n) / factor_i; cos and sin times attn_factor.
 * YaRN: theta_i = pos * base^(-2i/n) / factor_i * (scale (1 - k_i) + k_i),
 * k_i = yarn_keep, and the magnitude gains 1 + 0.1 ln(1 / scale). */
static void rope(const ref_model *r, int32_t layer, double *v, int32_t n_heads, int32_t pos) {
    const wisp_hparams *hp = &r->hp;
    const wisp_model *m = r->model;
    const float *factors = m->rope_freqs ? m->rope_freqs : r->n_ctx > hp->rope_orig_ctx ? m->rope_long : m->rope_short;
    bool local = windowed(hp, layer) && hp->arch == WISP_ARCH_GEMMA3; /* own base, no linear scaling */
    double base = local ? hp->rope_base_swa : hp->rope_base, mag = hp->rope_attn_factor;
    double freq_scale = local ? 1.0 : (double)hp->rope_freq_scale;
    bool yarn = hp->rope_ext_factor != 0.0f && !local;
    if (yarn) mag *= 1.0 + 0.1 * log(1.0 / freq_scale);
    int32_t half = hp->rope_dim / 2;
    for (int32_t h = 0; h < n_heads; h++) {
        double *x = v + (size_t)h * hp->head_dim;
        for (int32_t i = 0; i < half; i++) {
            double k = yarn ? yarn_keep(hp, i) * hp->rope_ext_factor : 0.0;
            double a = pos * (freq_scale * (1 - k) + k) * pow(base, -2.0 * i / hp->rope_dim);
            if (factors) a /= factors[i];
            int32_t p0 = hp->rope_neox ? i : 2 * i, p1 = hp->rope_neox ? i + half : 2 * i + 1;
            double x0 = x[p0], x1 = x[p1];
            x[p0] = mag * (x0 * cos(a) - x1 * sin(a));
            x[p1] = mag * (x0 * sin(a) + x1 * cos(a));
        }
    }
}

static void rmsnorm_f(double *y, const double *x, const float *w, int32_t n, double eps) {
    double ss = 0;
    for (int32_t i = 0; i < n; i++) ss += x[i] * x[i];
    double s = 1.0 / sqrt(ss / n + eps);
    for (int32_t i = 0; i < n; i++) y[i] = x[i] * s * (double)w[i];
}

/* x[D] += rmsnorm(y) w when the layer has that post-norm, else x += y */
static void add_block(double *x, double *y, const float *post_norm, int32_t D, double eps) {
    if (post_norm) rmsnorm_f(y, y, post_norm, D, eps);
    for (int32_t i = 0; i < D; i++) x[i] += y[i];
}

static double cap(double x, double c) { return c > 0 ? c * tanh(x / c) : x; }

static double gelu_tanh(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x))); }

/* Logits and/or final hidden states (either may be NULL). */
static void forward(const ref_model *r, const int32_t *tokens, int32_t n_tok, double *logits, double *hidden) {
    const int32_t P = r->n_prompt, n = P + n_tok; /* prompt tuning: its rows come first */
    const wisp_hparams *hp = &r->hp;
    int32_t D = hp->dim, hd = hp->head_dim, H = hp->n_heads, KVH = hp->n_kv_heads, F = hp->ffn_dim;
    int32_t Q = H * hd, KV = KVH * hd, V = hp->n_vocab;
    size_t N = (size_t)n;
    double *x = malloc(sizeof(double) * N * D), *xn = malloc(sizeof(double) * (size_t)(D > Q ? D : Q));
    double *q = malloc(sizeof(double) * N * Q), *k = malloc(sizeof(double) * N * KV), *v = malloc(sizeof(double) * N * KV);
    double *att = malloc(sizeof(double) * N * Q), *tmp = malloc(sizeof(double) * (size_t)(D > F ? D : F));
    double *g = malloc(sizeof(double) * (size_t)F), *u = malloc(sizeof(double) * (size_t)F);
    const int32_t A = r->n_prefix; /* prefix tuning: keys and values before every layer's, the text after them */
    double *p = malloc(sizeof(double) * (N + (size_t)A));
    double emb_scale = wisp_hparams_row(hp)->embed_scale ? sqrt((double)D) : 1.0;
    for (size_t t = 0; t < N; t++)
        for (int32_t i = 0; i < D; i++)
            x[t * D + (size_t)i] = (t < (size_t)P ? r->prompt[t * D + (size_t)i]
                                                  : r->embd[(size_t)tokens[t - (size_t)P] * D + (size_t)i]) * emb_scale;
    for (int32_t l = 0; l < hp->n_layers; l++) {
        const wisp_layer *W = &r->model->layers[l];
        for (int32_t t = 0; t < n; t++) {
            rmsnorm(xn, x + (size_t)t * D, r->attn_norm + (size_t)l * D, D, hp->rms_eps);
            project(r, l, WISP_PROJ_Q, t, r->bq ? r->bq + (size_t)l * Q : NULL, xn, q + (size_t)t * Q);
            project(r, l, WISP_PROJ_K, t, r->bk ? r->bk + (size_t)l * KV : NULL, xn, k + (size_t)t * KV);
            project(r, l, WISP_PROJ_V, t, r->bv ? r->bv + (size_t)l * KV : NULL, xn, v + (size_t)t * KV);
            for (int32_t h = 0; h < H && W->q_norm; h++)
                rmsnorm_f(q + (size_t)t * Q + (size_t)h * hd, q + (size_t)t * Q + (size_t)h * hd, W->q_norm, hd, hp->rms_eps);
            for (int32_t h = 0; h < KVH && W->k_norm; h++)
                rmsnorm_f(k + (size_t)t * KV + (size_t)h * hd, k + (size_t)t * KV + (size_t)h * hd, W->k_norm, hd,
                          hp->rms_eps);
            rope(r, l, q + (size_t)t * Q, H, A + t);
            rope(r, l, k + (size_t)t * KV, KVH, A + t);
        }
        int32_t win = windowed(hp, l) ? hp->window : 0;
        for (int32_t t = 0; t < n; t++)
            for (int32_t h = 0; h < H; h++) {
                const double *qh = q + (size_t)t * Q + (size_t)h * hd;
                int32_t kvh = h / (H / KVH);
                double m = -INFINITY, sum = 0;
                int32_t j0 = win && t - win + 1 > 0 ? t - win + 1 : 0; /* keys t - j < window */
                /* score of key j: the prefix's j < A (PEFT's layout, stored keys used as they are), then the tokens' */
                for (int32_t j = 0; j < A + t + 1; j++) {
                    if (j >= A && j - A < j0) continue;
                    const double *kj = j < A ? r->prefix + ((size_t)j * hp->n_layers * 2 + 2 * (size_t)l) * KV
                                             : k + (size_t)(j - A) * KV;
                    double s = 0;
                    for (int32_t i = 0; i < hd; i++) s += qh[i] * kj[(size_t)kvh * hd + i];
                    p[j] = cap(s * (double)hp->attn_scale, hp->attn_softcap);
                    if (p[j] > m) m = p[j];
                }
                for (int32_t j = 0; j < A + t + 1; j++)
                    if (j < A || j - A >= j0) sum += (p[j] = exp(p[j] - m));
                double *o = att + (size_t)t * Q + (size_t)h * hd;
                for (int32_t i = 0; i < hd; i++) {
                    double s = 0;
                    for (int32_t j = 0; j < A + t + 1; j++) {
                        if (j >= A && j - A < j0) continue;
                        const double *vj = j < A ? r->prefix + ((size_t)j * hp->n_layers * 2 + 2 * (size_t)l + 1) * KV
                                                 : v + (size_t)(j - A) * KV;
                        s += p[j] * vj[(size_t)kvh * hd + i];
                    }
                    o[i] = s / sum;
                }
            }
        for (int32_t t = 0; t < n; t++) {
            double *xt = x + (size_t)t * D;
            project(r, l, WISP_PROJ_O, t, NULL, att + (size_t)t * Q, tmp);
            add_block(xt, tmp, W->post_attn_norm, D, hp->rms_eps);
            rmsnorm(xn, xt, r->ffn_norm + (size_t)l * D, D, hp->rms_eps);
            project(r, l, WISP_PROJ_GATE, t, NULL, xn, g);
            project(r, l, WISP_PROJ_UP, t, NULL, xn, u);
            bool gelu = wisp_hparams_row(hp)->act == WISP_ACT_GELU_TANH;
            for (int32_t i = 0; i < F; i++) g[i] = (gelu ? gelu_tanh(g[i]) : g[i] / (1.0 + exp(-g[i]))) * u[i];
            project(r, l, WISP_PROJ_DOWN, t, NULL, g, tmp);
            add_block(xt, tmp, W->post_ffn_norm, D, hp->rms_eps);
        }
    }
    for (int32_t t = P; t < n; t++) {
        rmsnorm(xn, x + (size_t)t * D, r->out_norm, D, hp->rms_eps);
        if (hidden) memcpy(hidden + (size_t)(t - P) * D, xn, sizeof(double) * (size_t)D);
        for (int32_t o = 0; o < V && logits; o++) {
            double s = 0;
            for (int32_t i = 0; i < D; i++) s += r->out[(size_t)o * D + i] * xn[i];
            logits[(size_t)(t - P) * V + o] = cap(s, hp->final_softcap);
        }
    }
    free(x), free(xn), free(q), free(k), free(v), free(att), free(tmp), free(g), free(u), free(p);
}

void ref_forward(const ref_model *r, const int32_t *tokens, int32_t n, double *logits) {
    forward(r, tokens, n, logits, NULL);
}

void ref_hidden(const ref_model *r, const int32_t *tokens, int32_t n, double *hidden) {
    forward(r, tokens, n, NULL, hidden);
}

double ref_loss(const ref_model *r, const int32_t *tokens, int32_t n, const uint8_t *mask) {
    int32_t V = r->hp.n_vocab;
    double *logits = malloc(sizeof(double) * (size_t)n * (size_t)V);
    if (!logits) return NAN;
    ref_forward(r, tokens, n, logits);
    double total = 0;
    int32_t scored = 0;
    for (int32_t j = 1; j < n; j++) {
        if (mask && !mask[j]) continue;
        const double *z = logits + (size_t)(j - 1) * V;
        double m = z[0], s = 0;
        for (int32_t i = 1; i < V; i++)
            if (z[i] > m) m = z[i];
        for (int32_t i = 0; i < V; i++) s += exp(z[i] - m);
        total += log(s) + m - z[tokens[j]];
        scored++;
    }
    free(logits);
    return scored ? total / scored : NAN;
}

ref_lora ref_lora_random(const wisp_hparams *hp, int32_t layer, int32_t proj, int32_t rank, double scale, double amp,
                         uint64_t *rng) {
    ref_lora l = {layer, proj, rank, 0, 0, NULL, NULL, scale, NULL, NULL};
    ref_proj_shape(hp, proj, &l.n_in, &l.n_out);
    l.a = malloc(sizeof(double) * (size_t)rank * (size_t)l.n_in);
    l.b = malloc(sizeof(double) * (size_t)rank * (size_t)l.n_out);
    if (!l.a || !l.b) {
        ref_lora_free(&l);
        return l;
    }
    for (size_t i = 0; i < (size_t)rank * (size_t)l.n_in; i++) l.a[i] = (2 * ref_uniform(rng) - 1) * amp;
    for (size_t i = 0; i < (size_t)rank * (size_t)l.n_out; i++) l.b[i] = (2 * ref_uniform(rng) - 1) * amp;
    return l;
}

void ref_lora_free(ref_lora *l) {
    free(l->a);
    free(l->b);
    free(l->m);
    l->a = l->b = l->m = NULL;
}

double ref_batch_loss(const ref_model *r, const int32_t *tok, const uint8_t *mask, int32_t n_seq, int32_t seq) {
    double total = 0;
    int32_t count = 0;
    for (int32_t b = 0; b < n_seq; b++) {
        const uint8_t *m = mask ? mask + b * (seq + 1) : NULL;
        int32_t n = 0;
        for (int32_t j = 1; j <= seq; j++) n += !m || m[j];
        if (n) total += ref_loss(r, tok + b * (seq + 1), seq + 1, m) * n;
        count += n;
    }
    return total / count;
}
