/* The record of a fine-tuning run: one row per optimizer step, written as
 * log.csv (step, loss, lr, grad_norm, tokens_per_s, val_loss; val_loss is
 * empty on steps without an evaluation) and drawn as loss.svg, a small
 * self-contained chart of training loss and validation loss by step. Rows
 * can be read back from a log.csv so a resumed run keeps its history. */
#ifndef WISP_CLI_TRAIN_LOG_H
#define WISP_CLI_TRAIN_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* DPO's reward statistics, named as trl logs them (rewards/chosen, ...). */
typedef struct cli_dpo_metrics {
    double chosen, rejected, accuracies, margins;
} cli_dpo_metrics;

typedef struct cli_log_row {
    int64_t step;
    double loss, lr, grad_norm, tokens_per_s;
    double val_loss; /* NaN when not evaluated */
    cli_dpo_metrics rewards, val_rewards; /* DPO logs only; NaN when not measured */
} cli_log_row;

/* A DPO log (dpo set) adds the columns rewards/chosen, rewards/rejected,
 * rewards/accuracies, rewards/margins and the same prefixed eval_. */
typedef struct cli_train_log {
    cli_log_row *rows;
    size_t n, cap;
    bool dpo;
} cli_train_log;

bool cli_log_add(cli_train_log *log, const cli_log_row *row);
/* Keep rows with step <= last_step. */
void cli_log_truncate(cli_train_log *log, int64_t last_step);
/* Replace the rows with those of a log.csv; false (silently) if it cannot be read. */
bool cli_log_read_csv(cli_train_log *log, const char *path);
/* Write log.csv / loss.svg atomically; false after printing why. */
bool cli_log_write_csv(const cli_train_log *log, const char *path);
bool cli_log_write_svg(const cli_train_log *log, const char *path, const char *title);
void cli_log_free(cli_train_log *log);

#endif
