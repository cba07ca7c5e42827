/* wisp bench --train: a few LoRA optimizer steps at a model's shape, in the
 * planned training arena, through the same settings and engine calls as
 * `wisp finetune` (finetune_settings.h, wisp_train_micro_step and
 * wisp_train_optimizer_step), on a fixed sequence of token ids: training
 * throughput without a data set. */
#ifndef WISP_CLI_BENCH_TRAIN_H
#define WISP_CLI_BENCH_TRAIN_H

#include <stdint.h>

#include "session.h"

typedef struct cli_train_bench {
    /* in */
    int32_t seq_len, batch, rank, steps; /* steps measured, after one warm-up step */
    int32_t (*token)(int64_t i, int32_t n_vocab);
    /* out */
    double tok_s;      /* seq_len x batch x steps over their wall time */
    double cpu_share;  /* CPU time over wall time x threads while measuring */
    uint32_t targets;  /* the adapted projections (bit p: projection p) */
    double loss;       /* the last step's loss (finite: the steps really ran) */
} cli_train_bench;

/* Opens mo's model into s with a training plan and runs the steps; s stays
 * open for the caller to read (kernels, threads, arena) and close. On
 * failure prints what went wrong, leaves nothing open and returns false. */
bool cli_train_bench_run(cli_session *s, cli_model_opts *mo, cli_train_bench *b);

#endif
