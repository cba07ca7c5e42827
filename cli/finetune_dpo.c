#include "finetune_dpo.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_map.h"
#include "preference_batches.h"
#include "preference_pairs.h"
#include "session.h"

bool ft_pairs_load(ft_pairs *p, const char *path, const wisp_tokenizer *tok, const wisp_data_options *opt,
                   const wisp_data_chat *chat) {
    memset(p, 0, sizeof *p);
    if (opt->format != WISP_DATA_JSONL) {
        fprintf(stderr, "wisp: %s: DPO takes JSONL pairs {\"prompt\", \"chosen\", \"rejected\"}, not plain text\n", path);
        return false;
    }
    cli_file f;
    if (!cli_file_open(&f, path)) return false;
    wisp_error err = {0};
    size_t cap = 0, cap_nodes = 0, len = 0;
    bool ok = !wisp_pairs_plan((const char *)f.data, f.size, &cap, &cap_nodes, &err);
    char *text = ok ? malloc(cap) : NULL;
    wisp_json_node *nodes = ok ? malloc(cap_nodes * sizeof *nodes) : NULL;
    if (ok && (!text || !nodes)) ok = !wisp_fail(&err, WISP_ERR_CAPACITY, "out of memory for %zu bytes", cap);
    const wisp_pair_side sides[2] = {WISP_PAIR_CHOSEN, WISP_PAIR_REJECTED};
    cli_data *dst[2] = {&p->chosen, &p->rejected};
    for (int k = 0; k < 2 && ok; k++) {
        ok = !wisp_pairs_side((const char *)f.data, f.size, sides[k], nodes, cap_nodes, text, cap, &len, &err);
        if (!ok) break;
        char name[4200];
        snprintf(name, sizeof name, "%s (%s)", path, k == 0 ? "chosen" : "rejected");
        if (!cli_data_load_bytes(dst[k], name, text, len, tok, opt, chat)) {
            err.message[0] = 0; /* already printed */
            ok = false;
        }
    }
    /* the two sides must index the same pairs (they do: one record per pair each) */
    if (ok && p->chosen.d.n_examples != p->rejected.d.n_examples)
        ok = !wisp_fail(&err, WISP_ERR_INTERNAL, "%d chosen but %d rejected answers", p->chosen.d.n_examples,
                        p->rejected.d.n_examples);
    if (!ok && err.message[0]) fprintf(stderr, "wisp: %s: %s\n", path, err.message);
    if (!ok) ft_pairs_free(p);
    free(text);
    free(nodes);
    cli_file_close(&f);
    return ok;
}

void ft_pairs_free(ft_pairs *p) {
    cli_data_free(&p->chosen);
    cli_data_free(&p->rejected);
    free(p->ref);
    p->ref = NULL;
}

bool ft_pairs_reference(wisp_ctx *ctx, ft_pairs *p, int32_t b, int32_t width, int32_t *tok, uint8_t *mask) {
    int32_t n = wisp_data_count(&p->chosen.d, WISP_SPLIT_TRAIN);
    free(p->ref);
    p->ref = malloc(sizeof(double) * 2 * (size_t)(n > 0 ? n : 1));
    if (!p->ref) {
        fprintf(stderr, "wisp finetune: out of memory for %d reference log-probs\n", 2 * n);
        return false;
    }
    wisp_error err = {0}; /* 2b sequences of one side at a time: the micro-batch's size */
    if (wisp_pairs_reference(ctx, &p->chosen.d, &p->rejected.d, 2 * b, width, tok, mask, p->ref, &err)) {
        cli_report("reference log-probs", &err);
        return false;
    }
    return true;
}

void ft_pairs_next(ft_pairs *p, int32_t n, int32_t width, int32_t *tok, uint8_t *mask, double *ref) {
    wisp_pairs_next(&p->chosen.d, &p->rejected.d, p->ref, n, width, tok, mask, ref);
}

void ft_dpo_accumulate(cli_dpo_metrics *sum, double *loss_sum, int32_t *pairs, const wisp_dpo_result *r) {
    *loss_sum += r->loss * r->n_pairs;
    sum->chosen += r->rewards_chosen * r->n_pairs;
    sum->rejected += r->rewards_rejected * r->n_pairs;
    sum->accuracies += r->rewards_accuracies * r->n_pairs;
    sum->margins += r->rewards_margins * r->n_pairs;
    *pairs += r->n_pairs;
}

bool ft_pairs_eval(wisp_ctx *ctx, const ft_pairs *p, wisp_data_split split, int32_t b, int32_t width, int32_t max_pairs,
                   int32_t *tok, uint8_t *mask, double *loss, cli_dpo_metrics *m) {
    int32_t n = wisp_data_count(&p->chosen.d, split), pairs = 0;
    if (max_pairs > 0 && n > max_pairs) n = max_pairs;
    cli_dpo_metrics sum = {0, 0, 0, 0};
    double loss_sum = 0;
    wisp_error err = {0};
    for (int32_t i = 0; i < n; i += b) {
        int32_t k = n - i < b ? n - i : b;
        for (int32_t j = 0; j < k; j++) {
            wisp_data_get(&p->chosen.d, split, i + j, tok + (size_t)j * width, mask + (size_t)j * width);
            wisp_data_get(&p->rejected.d, split, i + j, tok + (size_t)(k + j) * width, mask + (size_t)(k + j) * width);
        }
        wisp_dpo_result r;
        if (wisp_train_dpo_eval(ctx, tok, mask, k, NULL, &r, &err)) {
            cli_report("validation", &err);
            return false;
        }
        ft_dpo_accumulate(&sum, &loss_sum, &pairs, &r);
    }
    double inv = pairs ? 1.0 / pairs : NAN;
    *loss = loss_sum * inv;
    *m = (cli_dpo_metrics){sum.chosen * inv, sum.rejected * inv, sum.accuracies * inv, sum.margins * inv};
    return true;
}
