#include "bench_train.h"

#include <stdio.h>
#include <stdlib.h>

#include "finetune_settings.h"

bool cli_train_bench_run(cli_session *s, cli_model_opts *mo, cli_train_bench *b) {
    /* finetune's defaults (AdamW, all seven projections, F32 saved
     * activations), a constant rate without warmup */
    ft_settings set;
    ft_settings_default(&set);
    set.model = mo->model, set.ctx = b->seq_len, set.batch = b->batch, set.rank = b->rank;
    set.steps = b->steps + 1, set.warmup = 0, set.schedule = "constant";
    wisp_config cfg = wisp_config_default();
    if (!ft_settings_to_config(&set, &cfg.train)) return false;
    b->targets = cfg.train.targets;
    mo->ctx = 16; /* inference: as finetune, training plans its own buffers */
    if (!cli_session_open(s, mo, &cfg)) return false;
    const int32_t width = b->seq_len + 1, n_vocab = wisp_ctx_hparams(s->ctx)->n_vocab;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)width * (size_t)b->batch);
    if (!tok) {
        fprintf(stderr, "wisp bench: out of memory\n");
        cli_session_close(s);
        return false;
    }
    wisp_error err = {0};
    wisp_status st = WISP_OK;
    double t0 = 0, c0 = 0;
    int64_t next = 0;
    for (int32_t step = 0; step <= b->steps && !st; step++) { /* step 0: warm-up (faults the weights in) */
        if (step == 1) t0 = cli_now(), c0 = cli_cpu_seconds();
        for (int32_t i = 0; i < width * b->batch; i++) tok[i] = b->token(next++, n_vocab);
        int32_t scored;
        st = wisp_train_micro_step(s->ctx, tok, NULL, b->batch, &b->loss, &scored, &err);
        wisp_train_step_info info;
        if (!st) st = wisp_train_optimizer_step(s->ctx, &info, &err);
    }
    double wall = cli_now() - t0, cpu = cli_cpu_seconds() - c0;
    free(tok);
    if (st) {
        cli_report(mo->model, &err);
        cli_session_close(s);
        return false;
    }
    int threads = wisp_ctx_config(s->ctx)->threads.n_threads;
    b->tok_s = wall > 0 ? (double)b->seq_len * b->batch * b->steps / wall : 0.0;
    b->cpu_share = wall > 0 ? cpu / (wall * threads) : 0.0;
    return true;
}
