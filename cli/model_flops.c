#include "model_flops.h"

#include "types.h"

/* 2 x rows x cols into the part its matmul runs on */
static void add_matmul(cli_flops *f, const wisp_weight *w, double times) {
    double ops = 2.0 * (double)w->rows * (double)w->cols * times;
    if (wisp_type_info_of(w->type)->act_type == WISP_TYPE_F32)
        f->f32 += ops;
    else
        f->int8 += ops;
}

/* Mean positions a token attends to in a causal window of seq_len
 * positions, over all layers' windows (a sliding-window layer sees at most
 * hp->window), times 2 x heads x head_dim: one pass of q.k or p.v. */
static double attention_pass(const wisp_hparams *hp, int32_t seq_len) {
    double total = 0;
    for (int32_t l = 0; l < hp->n_layers; l++) {
        int64_t w = wisp_layer_windowed(hp, l) && hp->window > 0 ? hp->window : seq_len, sum = 0;
        for (int64_t s = 0; s < seq_len; s++) sum += s + 1 < w ? s + 1 : w;
        total += (double)sum / (double)seq_len;
    }
    return 2.0 * hp->n_heads * hp->head_dim * total;
}

cli_flops cli_prefill_flops(const wisp_model *m, int32_t n_prompt) {
    cli_flops f = {0, 0};
    if (n_prompt < 1) return f;
    for (int32_t l = 0; l < m->hp.n_layers; l++)
        for (int p = 0; p < WISP_PROJ_COUNT; p++) add_matmul(&f, &m->layers[l].proj[p], 1.0);
    add_matmul(&f, &m->output, 1.0 / n_prompt);
    f.f32 += 2.0 * attention_pass(&m->hp, n_prompt); /* scores and values */
    return f;
}

cli_flops cli_train_flops(const wisp_model *m, uint32_t targets, int32_t rank, int32_t seq_len) {
    cli_flops f = {0, 0};
    for (int32_t l = 0; l < m->hp.n_layers; l++)
        for (int p = 0; p < WISP_PROJ_COUNT; p++) {
            const wisp_weight *w = &m->layers[l].proj[p];
            add_matmul(&f, w, 1.0);                                 /* forward */
            f.f32 += 2.0 * (double)w->rows * (double)w->cols;       /* backward dx */
            if (targets & (1u << p)) f.f32 += 6.0 * rank * (double)(w->rows + w->cols);
        }
    add_matmul(&f, &m->output, 1.0);
    f.f32 += 2.0 * (double)m->output.rows * (double)m->output.cols;
    f.f32 += 6.0 * attention_pass(&m->hp, seq_len); /* forward 2 passes, backward 4 */
    return f;
}

double cli_peak_fraction(double tok_s, cli_flops f, const cli_compute_peak *p) {
    if ((f.int8 > 0 && !(p->int8_ops_s > 0)) || (f.f32 > 0 && !(p->f32_flops_s > 0))) return -1.0;
    double at_peak = (f.int8 > 0 ? f.int8 / p->int8_ops_s : 0.0) + (f.f32 > 0 ? f.f32 / p->f32_flops_s : 0.0);
    return tok_s * at_peak;
}
