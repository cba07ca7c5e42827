#include "plan_print.h"

#include <math.h>

#include "model.h"
#include "rope.h"

const char *cli_human_bytes(char *buf, size_t cap, size_t bytes) {
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) { v /= 1024.0; u++; }
    if (u == 0) snprintf(buf, cap, "%zu B", bytes);
    else snprintf(buf, cap, "%.2f %s", v, units[u]);
    return buf;
}

static int32_t windowed_layers(const wisp_hparams *hp) {
    int32_t n = 0;
    for (int32_t l = 0; l < hp->n_layers; l++) n += wisp_layer_windowed(hp, l);
    return n;
}

void cli_print_family(FILE *out, const wisp_hparams *hp) {
    const wisp_arch_row *r = wisp_hparams_row(hp);
    fprintf(out, "  %-18s %s, %s-gated feed-forward", "family", r->name, r->act == WISP_ACT_GELU_TANH ? "GELU-tanh" : "SiLU");
    if (r->required & WISP_LT(QKV)) fprintf(out, ", fused q/k/v and gate/up");
    if (r->required & WISP_LT(BIAS_Q)) fprintf(out, ", q/k/v biases");
    if (r->required & WISP_LT(Q_NORM)) fprintf(out, ", per-head q/k RMSNorm");
    if (r->required & WISP_LT(POST_ATTN_NORM)) fprintf(out, ", post-attention and post-FFN norms");
    if (hp->embed_scale != 1.0f) fprintf(out, ", embedding x %g", (double)hp->embed_scale);
    fputc('\n', out);
    fprintf(out, "  %-18s scores x %g", "attention", (double)hp->attn_scale);
    if (hp->attn_softcap > 0) fprintf(out, ", soft-capped at %g", (double)hp->attn_softcap);
    if (hp->window > 0)
        fprintf(out, "; sliding window of %d on %d of %d layers", hp->window, windowed_layers(hp), hp->n_layers);
    if (r->rope_base_swa) fprintf(out, " (their RoPE base %g, unscaled)", (double)hp->rope_base_swa);
    fputc('\n', out);
    if (hp->final_softcap > 0) fprintf(out, "  %-18s soft-capped at %g\n", "logits", (double)hp->final_softcap);
    if (hp->rope_freq_scale != 1.0f || hp->rope_attn_factor != 1.0f || hp->rope_ext_factor != 0.0f || r->rope_freqs ||
        r->longrope) {
        fprintf(out, "  %-18s", "rope scaling");
        if (hp->rope_ext_factor != 0.0f) {
            wisp_rope_spec yarn = {.dim = hp->rope_dim, .base = hp->rope_base, .orig_ctx = hp->rope_orig_ctx};
            double lo, hi;
            wisp_rope_yarn_dims(&yarn, &lo, &hi);
            fprintf(out, " YaRN, factor %g over an original context of %d: rotation pairs up to %g unscaled, from %g "
                         "of %d interpolated, magnitude x %g;", 1.0 / (double)hp->rope_freq_scale, hp->rope_orig_ctx, lo,
                    hi, hp->rope_dim / 2,
                    (double)hp->rope_attn_factor * (1.0 + 0.1 * log(1.0 / (double)hp->rope_freq_scale)));
        } else if (hp->rope_freq_scale != 1.0f) {
            fprintf(out, " linear x %g;", (double)hp->rope_freq_scale);
        }
        if (hp->rope_attn_factor != 1.0f && !r->longrope && hp->rope_ext_factor == 0.0f)
            fprintf(out, " magnitude x %g;", (double)hp->rope_attn_factor);
        if (r->rope_freqs) fprintf(out, " rope_freqs.weight factors when present;");
        if (r->longrope)
            fprintf(out, " LongRoPE factors when present (long beyond %d positions), magnitude x %g;", hp->rope_orig_ctx,
                    (double)hp->rope_attn_factor);
        fputc('\n', out);
    }
}

void cli_print_plan(FILE *out, const wisp_memory_plan *plan) {
    char h[32];
    const wisp_config *c = &plan->cfg;
    fprintf(out, "memory plan: ctx %d, batch %d, kv %s, %d thread%s%s\n", c->n_ctx, c->n_batch,
            c->kv_type == WISP_TYPE_F16 ? "f16" : "f32", c->threads.n_threads, c->threads.n_threads == 1 ? "" : "s",
            c->logits_all ? ", logits for every position" : "");
    for (int i = 0; i < WISP_PART_COUNT; i++) {
        if (!plan->part[i]) continue;
        fprintf(out, "  %-14s %12zu bytes  %12s\n", wisp_part_name(i), plan->part[i],
                cli_human_bytes(h, sizeof h, plan->part[i]));
        const wisp_hparams *hp = &plan->hp;
        int32_t ring = 0;
        for (int32_t l = 0; l < hp->n_layers && !ring; l++)
            if (wisp_layer_windowed(hp, l)) ring = wisp_layer_kv_positions(hp, l, c->n_ctx, c->n_batch);
        if (i == WISP_PART_KV_CACHE && ring && ring < c->n_ctx)
            fprintf(out, "  %-14s %d of %d layers attend through a window of %d: each caches a ring of %d positions "
                         "(window - 1 + batch, in blocks of 64), not %d\n", "", windowed_layers(hp), hp->n_layers, hp->window, ring,
                    c->n_ctx);
    }
    fprintf(out, "  %-14s %12zu bytes  %12s\n", "total (arena)", plan->total, cli_human_bytes(h, sizeof h, plan->total));
    fprintf(out, "  %-14s %12zu bytes  %12s  (the file's tensors, not in the arena)\n", "weights", plan->weight_bytes,
            cli_human_bytes(h, sizeof h, plan->weight_bytes));
}

void cli_print_plan_json(FILE *out, const wisp_memory_plan *plan) {
    const wisp_config *c = &plan->cfg;
    fprintf(out, "{\"n_ctx\": %d, \"n_batch\": %d, \"kv_type\": \"%s\", \"n_threads\": %d, \"logits_all\": %s,\n",
            c->n_ctx, c->n_batch, c->kv_type == WISP_TYPE_F16 ? "f16" : "f32", c->threads.n_threads,
            c->logits_all ? "true" : "false");
    fprintf(out, " \"parts\": {");
    for (int i = 0, first = 1; i < WISP_PART_COUNT; i++) {
        if (!plan->part[i]) continue;
        fprintf(out, "%s\"%s\": %zu", first ? "" : ", ", wisp_part_name(i), plan->part[i]);
        first = 0;
    }
    const wisp_hparams *hp = &plan->hp;
    int32_t ring = c->n_ctx;
    for (int32_t l = 0; l < hp->n_layers; l++)
        if (wisp_layer_windowed(hp, l)) ring = wisp_layer_kv_positions(hp, l, c->n_ctx, c->n_batch);
    fprintf(out, "},\n \"architecture\": \"%s\", \"windowed_layers\": %d, \"window\": %d, \"kv_ring_positions\": %d,\n",
            wisp_arch_name(hp->arch), windowed_layers(hp), hp->window, ring);
    fprintf(out, " \"total_bytes\": %zu, \"weight_bytes\": %zu}\n", plan->total, plan->weight_bytes);
}
