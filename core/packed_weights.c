#include "packed_weights.h"

#include <string.h>

#include "status.h"

/* What the kernels would pack a weight of `type`, rows x cols, into (0: nothing). */
static size_t packed_size(const wisp_kernels *k, int64_t type, int64_t rows, int64_t cols) {
    if (!k || type < 0 || type >= WISP_TYPE_COUNT || !k->packing[type].bytes) return 0;
    return wisp_arena_round(k->packing[type].bytes(rows, cols));
}

/* Layer l as the layout sees it: the model's own when carving; when
 * measuring (no layer table yet) read from the file into `one`, as init will
 * read it. A layer init refuses counts what could be read of it: init then
 * fails naming the tensor, so its plan does not matter. */
static wisp_layer *layer_of(wisp_model *m, int l, wisp_layer *one) {
    if (m->layers) return &m->layers[l];
    wisp_model_read_layer(&m->gguf, &m->hp, l, one, NULL);
    return one;
}

static size_t weight_packed_size(const wisp_kernels *k, const wisp_weight *w) {
    return w->data ? packed_size(k, w->type, w->rows, w->cols) : 0;
}

/* Whether the kernels pack any weight a product reads. */
static bool any_packed(wisp_model *m, const wisp_kernels *k) {
    if (weight_packed_size(k, &m->output)) return true;
    wisp_layer one;
    for (int l = 0; l < m->hp.n_layers; l++) {
        const wisp_layer *L = layer_of(m, l, &one);
        for (int p = 0; p < WISP_PROJ_COUNT; p++)
            if (weight_packed_size(k, &L->proj[p])) return true;
    }
    return false;
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

static void pack_weight(wisp_layout *lay, const wisp_kernels *k, const wisp_exec *e, wisp_weight *w,
                        void (*done)(void *user, const void *data, size_t bytes), void *user) {
    size_t bytes = weight_packed_size(k, w);
    if (!bytes) return;
    pack_job j = {&k->packing[w->type], w, (uint8_t *)wisp_layout_take(lay, bytes, 1, WISP_PART_PACKED_WEIGHTS)};
    if (!j.dst) return; /* measuring, or (after the plan, impossible) short: the carve check would report it */
    wisp_exec_parallel(e, pack_piece, &j);
    w->packed = j.dst;
    if (done) done(user, w->data, (size_t)w->rows * w->row_bytes);
}

/* The vectors a forward step reads (norms, biases, RoPE factors) are copied
 * next to the packed weights: the platform may let the file's pages around
 * packed weights go (wisp_config.weight_packed), and reading a vector there
 * maps back the whole page-cache piece around it, 2 MiB on Linux, which for
 * SmolLM2-135M's 2 MiB layers brought nearly all of them back (bench peak
 * RSS 158 MiB against 86 MiB in place). They are about 0.1% of a model. */
static void copy_vector(wisp_layout *lay, const float **v, int64_t n) {
    if (!*v) return;
    float *copy = (float *)wisp_layout_take(lay, (size_t)n, sizeof(float), WISP_PART_PACKED_WEIGHTS);
    if (!copy) return; /* measuring, or short: as above */
    memcpy(copy, *v, (size_t)n * sizeof(float));
    *v = copy;
}

void wisp_packed_weights_layout(wisp_layout *lay, wisp_model *m, const wisp_kernels *k, const wisp_exec *e,
                                void (*done)(void *user, const void *data, size_t bytes), void *user) {
    if (!k || !any_packed(m, k)) return; /* the vectors stay in place too */
    /* the vectors first: read after `done` has let the pages around them go,
     * they would bring those pages back */
    const wisp_hparams *hp = &m->hp;
    wisp_layer one;
    copy_vector(lay, &m->output_norm, hp->dim);
    copy_vector(lay, &m->rope_freqs, hp->rope_dim / 2);
    copy_vector(lay, &m->rope_long, hp->rope_dim / 2);
    copy_vector(lay, &m->rope_short, hp->rope_dim / 2);
    for (int l = 0; l < hp->n_layers; l++) {
        wisp_layer *L = layer_of(m, l, &one);
        for (int v = 0; v < WISP_VEC_COUNT; v++) copy_vector(lay, &L->vec[v], wisp_layer_vec_len(hp, v));
    }
    /* then the weights products read: the output, then each layer's projections */
    pack_weight(lay, k, e, &m->output, done, user);
    /* a tied embedding is the output's matrix: its rows are read from the copy (wisp_embed_row) */
    if (hp->tied_output && m->tok_embd.data == m->output.data) m->tok_embd.packed = m->output.packed;
    for (int l = 0; l < hp->n_layers; l++) {
        wisp_layer *L = layer_of(m, l, &one);
        for (int p = 0; p < WISP_PROJ_COUNT; p++) pack_weight(lay, k, e, &L->proj[p], done, user);
    }
}
