#include "plan_print.h"

const char *cli_human_bytes(char *buf, size_t cap, size_t bytes) {
    const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024.0 && u < 4) { v /= 1024.0; u++; }
    if (u == 0) snprintf(buf, cap, "%zu B", bytes);
    else snprintf(buf, cap, "%.2f %s", v, units[u]);
    return buf;
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
    fprintf(out, "},\n \"total_bytes\": %zu, \"weight_bytes\": %zu}\n", plan->total, plan->weight_bytes);
}
