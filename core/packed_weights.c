#include "packed_weights.h"

#include <string.h>

#include "status.h"

/* The vectors a forward step reads (norms, biases, RoPE factors) are copied
 * next to the packed weights: the platform may let the file's pages around
 * packed weights go (wisp_config.weight_packed), and reading a vector there
 * maps back the whole page-cache piece around it, 2 MiB on Linux, which for
 * SmolLM2-135M's 2 MiB layers brought nearly all of them back (bench peak
 * RSS 158 MiB against 86 MiB in place). They are about 0.1% of a model. */
static const char *const global_vectors[] = {"output_norm.weight", "rope_freqs.weight", "rope_factors_long.weight",
                                             "rope_factors_short.weight"};
#define N_GLOBAL_VECTORS (int)(sizeof global_vectors / sizeof global_vectors[0])

static size_t vector_size(const wisp_gguf *g, const char *name) {
    wisp_gguf_tensor t;
    return wisp_gguf_find_tensor(g, name, &t) ? wisp_arena_round(t.nbytes) : 0;
}

/* What the kernels would pack a weight of `type`, rows x cols, into (0: nothing). */
static size_t packed_size(const wisp_kernels *k, int64_t type, int64_t rows, int64_t cols) {
    if (!k || type < 0 || type >= WISP_TYPE_COUNT || !k->packing[type].bytes) return 0;
    return wisp_arena_round(k->packing[type].bytes(rows, cols));
}

/* Projection p of layer l as the model will see it (a fused tensor's rows). */
static size_t proj_packed_size(const wisp_gguf *g, const wisp_hparams *hp, int l, int p, const wisp_kernels *k) {
    const char *suffix;
    int64_t row0, rows, cols;
    wisp_proj_source(hp, p, &suffix, &row0, &rows, &cols);
    char name[96];
    wisp_format(name, sizeof name, "blk.%d.%s.weight", l, suffix);
    wisp_gguf_tensor t;
    if (!wisp_gguf_find_tensor(g, name, &t) || t.n_dims > 2) return 0; /* init reports what is wrong */
    return packed_size(k, (int64_t)t.type, rows, cols);
}

size_t wisp_packed_weights_plan(const wisp_gguf *g, const wisp_hparams *hp, const wisp_kernels *k) {
    wisp_gguf_tensor t;
    size_t total = 0;
    if (wisp_gguf_find_tensor(g, hp->tied_output ? "token_embd.weight" : "output.weight", &t) && t.n_dims <= 2)
        total = packed_size(k, (int64_t)t.type, t.ne[1], t.ne[0]);
    for (int l = 0; l < hp->n_layers; l++)
        for (int p = 0; p < WISP_PROJ_COUNT; p++) total = wisp_bytes_add(total, proj_packed_size(g, hp, l, p, k));
    if (!total) return 0;
    for (int v = 0; v < N_GLOBAL_VECTORS; v++) total = wisp_bytes_add(total, vector_size(g, global_vectors[v]));
    const wisp_arch_row *row = wisp_hparams_row(hp);
    char name[96];
    for (int l = 0; l < hp->n_layers; l++)
        for (int lt = 0; lt < WISP_LT_COUNT; lt++) {
            if (wisp_layer_tensor_is_matrix(lt) || !((row->required | row->optional) >> lt & 1u)) continue;
            wisp_format(name, sizeof name, "blk.%d.%s", l, wisp_layer_tensor_name(lt));
            total = wisp_bytes_add(total, vector_size(g, name));
        }
    return total;
}

typedef struct pack_job {
    const wisp_packing *pk;
    const wisp_weight *w;
    uint8_t *dst;
} pack_job;

static void pack_piece(void *arg, int ith, int nth) {
    const pack_job *j = arg;
    int64_t g0, g1;
    wisp_split((j->w->rows + WISP_PACK_GROUP - 1) / WISP_PACK_GROUP, ith, nth, &g0, &g1);
    j->pk->pack(j->dst, j->w->data, j->w->row_bytes, j->w->rows, j->w->cols, g0, g1);
}

static void pack_weight(wisp_weight *w, const wisp_exec *e, wisp_arena *a,
                        void (*done)(void *user, const void *data, size_t bytes), void *user) {
    size_t bytes = packed_size(&e->k, w->type, w->rows, w->cols);
    if (!bytes) return;
    pack_job j = {&e->k.packing[w->type], w, (uint8_t *)wisp_arena_alloc(a, bytes, WISP_PART_PACKED_WEIGHTS)};
    if (!j.dst) return; /* cannot happen after the plan; the carve check would report it */
    wisp_exec_parallel(e, pack_piece, &j);
    w->packed = j.dst;
    if (done) done(user, w->data, (size_t)w->rows * w->row_bytes);
}

static void copy_vector(const float **v, int64_t n, wisp_arena *a) {
    if (!*v) return;
    float *copy = (float *)wisp_arena_alloc(a, (size_t)n * sizeof(float), WISP_PART_PACKED_WEIGHTS);
    if (!copy) return; /* cannot happen after the plan; the carve check would report it */
    memcpy(copy, *v, (size_t)n * sizeof(float));
    *v = copy;
}

/* The weights products read, as the plan walks them: the output, then
 * each layer's projections; i < 1 + n_layers * WISP_PROJ_COUNT. */
static wisp_weight *product_weight(wisp_model *m, int i) {
    return i == 0 ? &m->output : &m->layers[(i - 1) / WISP_PROJ_COUNT].proj[(i - 1) % WISP_PROJ_COUNT];
}

void wisp_packed_weights_make(wisp_model *m, const wisp_exec *e, wisp_arena *a,
                              void (*done)(void *user, const void *data, size_t bytes), void *user) {
    const int n_weights = 1 + m->hp.n_layers * WISP_PROJ_COUNT;
    bool any = false;
    for (int i = 0; i < n_weights && !any; i++) {
        const wisp_weight *w = product_weight(m, i);
        any = packed_size(&e->k, w->type, w->rows, w->cols) > 0;
    }
    if (!any) return; /* the vectors stay in place too */
    /* the vectors first: read after `done` has let the pages around them go,
     * they would bring those pages back */
    const wisp_hparams *hp = &m->hp;
    copy_vector(&m->output_norm, hp->dim, a);
    copy_vector(&m->rope_freqs, hp->rope_dim / 2, a);
    copy_vector(&m->rope_long, hp->rope_dim / 2, a);
    copy_vector(&m->rope_short, hp->rope_dim / 2, a);
    for (int l = 0; l < hp->n_layers; l++)
        for (int v = 0; v < WISP_VEC_COUNT; v++) copy_vector(&m->layers[l].vec[v], wisp_layer_vec_len(hp, v), a);
    for (int i = 0; i < n_weights; i++) pack_weight(product_weight(m, i), e, a, done, user);
}
