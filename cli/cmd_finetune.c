/* wisp finetune: train a LoRA adapter on a text or JSONL file, inside one
 * planned arena, with a live progress line, periodic validation, atomic
 * checkpoints that resume bit-identically, and an output folder holding the
 * adapter (GGUF LoRA and PEFT), config.json, log.csv and loss.svg. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "peak_memory.h"
#include "commands.h"
#include "finetune_dpo.h"
#include "finetune_settings.h"
#include "chat_template.h"
#include "lora_gguf.h"
#include "plan_print.h"
#include "prompt_adapter.h"
#include "session.h"
#include "train_data_load.h"
#include "train_log.h"

#define CHECKPOINT_MAGIC "WISPCKP1"

static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

typedef struct run {
    ft_settings set;
    const char *out;
    cli_session s;
    cli_data train, val; /* val unused (zeroed) when the split comes from the training file */
    bool separate_val;
    bool dpo;            /* --method dpo: the data are pairs, train/val unused */
    ft_pairs pairs, val_pairs;
    int64_t total_steps;
    int32_t *tok;
    uint8_t *mask;
    double *ref; /* DPO: the micro-step's cached reference log-probs [2 x batch] */
    cli_train_log log;
    double t_start, elapsed_before; /* seconds: this process's start, and runs before a resume */
    int64_t tokens_seen, tokens_at_start;
    uint64_t stop_after; /* stop (with a checkpoint) once this many steps are done; 0: never */
    bool tty, quiet, stopped;
    int32_t skipped, skipped_in_a_row; /* optimizer steps skipped for a non-finite gradient */
    int64_t skipped_total;             /* over the run, resumes included (the engine's count) */
} run;

/* F16 loss scaling may halve its scale from 65536 down to 1 (16 skips) before a step fits;
 * more skips in a row than this mean the model or data itself gives NaN or Inf. */
#define MAX_SKIPS_IN_A_ROW 25

static void path_in(char *buf, size_t cap, const char *dir, const char *name) { snprintf(buf, cap, "%s/%s", dir, name); }

static bool make_dir(const char *path) {
    if (mkdir(path, 0777) == 0 || errno == EEXIST) {
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return true;
    }
    fprintf(stderr, "wisp finetune: cannot create the output folder %s: %s\n", path, strerror(errno));
    return false;
}

/* ---- evaluation ---- */

/* Mean loss over the validation windows (at most eval_windows of them); NaN without any.
 * DPO: the mean DPO loss over validation pairs, with trl's reward statistics in *m. */
static double validate(run *r, cli_dpo_metrics *m) {
    if (r->dpo) {
        double loss;
        const ft_pairs *p = r->separate_val ? &r->val_pairs : &r->pairs;
        wisp_data_split split = r->separate_val ? WISP_SPLIT_TRAIN : WISP_SPLIT_VAL;
        if (!ft_pairs_eval(r->s.ctx, p, split, r->set.batch, r->set.ctx + 1, r->set.eval_windows, r->tok, r->mask, &loss, m))
            return NAN;
        return loss;
    }
    const wisp_train_data *d = r->separate_val ? &r->val.d : &r->train.d;
    wisp_data_split split = r->separate_val ? WISP_SPLIT_TRAIN : WISP_SPLIT_VAL;
    int32_t n = wisp_data_count(d, split), B = r->set.batch, width = r->set.ctx + 1;
    if (r->set.eval_windows > 0 && n > r->set.eval_windows) n = r->set.eval_windows;
    double total = 0;
    int64_t scored = 0;
    wisp_error err = {0};
    for (int32_t i = 0; i < n; i += B) {
        int32_t k = n - i < B ? n - i : B;
        for (int32_t j = 0; j < k; j++) wisp_data_get(d, split, i + j, r->tok + j * width, r->mask + j * width);
        double loss;
        int32_t got;
        if (wisp_train_eval(r->s.ctx, r->tok, r->mask, k, &loss, &got, &err)) {
            cli_report("validation", &err);
            return NAN;
        }
        total += loss * got;
        scored += got;
    }
    return scored ? total / (double)scored : NAN;
}

/* ---- outputs ---- */

/* GGUF LoRA (llama.cpp's format) cannot carry DoRA's magnitudes: a DoRA
 * run's adapter is its PEFT folder alone. */
static bool is_dora(const run *r) { return r->set.method && strcmp(r->set.method, "dora") == 0; }
/* Nor can it (or llama.cpp) carry a prompt- or prefix-tuning adapter: peft/ alone again. */
static bool peft_only(const run *r) { return is_dora(r) || ft_method_is_virtual(&r->set); }
static bool write_peft(run *r);

/* peft/ of a prompt-tuning run (PEFT PROMPT_TUNING) or a prefix-tuning run
 * (PREFIX_TUNING: for grouped-query attention PEFT counts the kv heads) */
static bool write_prompt(run *r) {
    char peft[4200];
    path_in(peft, sizeof peft, r->out, "peft");
    const wisp_hparams *hp = wisp_ctx_hparams(r->s.ctx);
    wisp_prompt_adapter a = {0};
    a.rows = wisp_train_prompt(r->s.ctx, &a.n_virtual);
    a.dim = hp->dim, a.n_layers = hp->n_layers, a.n_heads = hp->n_heads, a.type = WISP_TYPE_F32;
    a.text_init = r->set.prompt_init_text != NULL, a.init_text = r->set.prompt_init_text;
    float *hf = NULL; /* a prefix in PEFT's order */
    if (ft_method_is_prefix(&r->set)) {
        a.prefix = true, a.n_heads = hp->n_kv_heads, a.dim = hp->n_kv_heads * hp->head_dim;
        a.prefix_projection = r->set.prefix_projection; /* the rows are the MLP's output: the final prefix */
        a.encoder_hidden_size = r->set.encoder_hidden_size ? r->set.encoder_hidden_size : a.dim; /* PEFT's default */
        hf = malloc(sizeof(float) * (size_t)a.n_virtual * wisp_prompt_width(&a));
        if (!hf) {
            fprintf(stderr, "wisp finetune: out of memory\n");
            return false;
        }
        wisp_prefix_to_peft(a.rows, hp, a.n_virtual, hf);
        a.rows = hf;
    }
    bool ok = cli_prompt_write(&a, peft, true);
    free(hf);
    return ok;
}

static bool write_adapter(run *r) {
    if (ft_method_is_virtual(&r->set)) return write_prompt(r);
    if (is_dora(r)) return write_peft(r);
    char path[4200];
    path_in(path, sizeof path, r->out, "adapter.gguf");
    cli_atomic_file af;
    if (!cli_atomic_open(&af, path)) return false;
    wisp_error err = {0};
    wisp_lora_gguf_written w;
    /* named after the base, not the folder: the same run gives the same bytes wherever it is written */
    const char *base = strrchr(r->set.model, '/');
    char name[256];
    snprintf(name, sizeof name, "LoRA for %s", base ? base + 1 : r->set.model);
    if (wisp_lora_gguf_write(wisp_train_lora(r->s.ctx), wisp_arch_name(wisp_ctx_hparams(r->s.ctx)->arch), name,
                             &af.sink, &w, &err)) {
        cli_report(path, &err);
        cli_atomic_abort(&af);
        return false;
    }
    return cli_atomic_commit(&af);
}

/* The PEFT copy, made by `wisp export` from the GGUF adapter just written
 * (one writer for both commands, and a round trip on every run). */
static bool write_peft(run *r) {
    char gguf[4200], peft[4200];
    if (is_dora(r)) { /* no GGUF to convert: straight from the trainer */
        path_in(peft, sizeof peft, r->out, "peft");
        return cli_export_peft(wisp_train_lora(r->s.ctx), wisp_ctx_hparams(r->s.ctx), NULL, peft, r->quiet);
    }
    path_in(gguf, sizeof gguf, r->out, "adapter.gguf");
    path_in(peft, sizeof peft, r->out, "peft");
    char *argv[] = {"export", gguf, "--to", "peft", "-m", (char *)(uintptr_t)r->set.model, "-o", peft, NULL};
    return cmd_export(8, argv) == 0;
}

static bool write_logs(run *r) {
    char csv[4200], svg[4200], title[4400];
    path_in(csv, sizeof csv, r->out, "log.csv");
    path_in(svg, sizeof svg, r->out, "loss.svg");
    const char *base = strrchr(r->set.model, '/'), *data = strrchr(r->set.data, '/');
    if (ft_method_is_virtual(&r->set))
        snprintf(title, sizeof title, "%s tuning, %d virtual tokens, on %s: %s", r->set.method, r->set.num_virtual_tokens,
                 base ? base + 1 : r->set.model, data ? data + 1 : r->set.data);
    else
        snprintf(title, sizeof title, "%s r%d on %s: %s", r->dpo ? "DPO LoRA" : "LoRA", r->set.rank,
                 base ? base + 1 : r->set.model, data ? data + 1 : r->set.data);
    return cli_log_write_csv(&r->log, csv) && cli_log_write_svg(&r->log, svg, title);
}

/* checkpoint.bin: magic, data cursor, tokens seen, seconds trained, then the engine's state.
 * The adapter and the log go first: a run killed between these writes then
 * has a log that reaches at least the checkpoint's step (a resume truncates
 * it to that step and logs the rest again), never one that stops short. */
static bool write_checkpoint(run *r) {
    if (!write_adapter(r) || !write_logs(r)) return false;
    char path[4200];
    path_in(path, sizeof path, r->out, "checkpoint.bin");
    cli_atomic_file af;
    if (!cli_atomic_open(&af, path)) return false;
    wisp_data_cursor c = wisp_data_cursor_get(r->dpo ? &r->pairs.chosen.d : &r->train.d);
    double seconds = r->elapsed_before + (cli_now() - r->t_start);
    wisp_error err = {0};
    wisp_status st = wisp_sink_write(&af.sink, CHECKPOINT_MAGIC, 8, &err);
    if (!st) st = wisp_sink_write(&af.sink, &c.epoch, sizeof c.epoch, &err);
    if (!st) st = wisp_sink_write(&af.sink, &c.pos, sizeof c.pos, &err);
    if (!st) st = wisp_sink_write(&af.sink, &r->tokens_seen, sizeof r->tokens_seen, &err);
    if (!st) st = wisp_sink_write(&af.sink, &seconds, sizeof seconds, &err);
    if (!st) st = wisp_train_state_save(r->s.ctx, &af.sink, &err);
    if (st) {
        cli_report(path, &err);
        cli_atomic_abort(&af);
        return false;
    }
    return cli_atomic_commit(&af);
}

static bool read_checkpoint(run *r, const char *dir) {
    char path[4200];
    path_in(path, sizeof path, dir, "checkpoint.bin");
    cli_file f;
    if (!cli_file_open(&f, path)) return false;
    const size_t head = 8 + 8 + 4 + 8 + 8;
    wisp_data_cursor c;
    double seconds;
    wisp_error err = {0};
    bool ok = f.size >= head && memcmp(f.data, CHECKPOINT_MAGIC, 8) == 0;
    if (!ok) fprintf(stderr, "wisp: %s: not a wisp finetune checkpoint\n", path);
    if (ok) {
        memcpy(&c.epoch, f.data + 8, 8);
        memcpy(&c.pos, f.data + 16, 4);
        memcpy(&r->tokens_seen, f.data + 20, 8);
        memcpy(&seconds, f.data + 28, 8);
        size_t used;
        ok = (r->dpo ? !wisp_data_cursor_set(&r->pairs.chosen.d, c, &err) && !wisp_data_cursor_set(&r->pairs.rejected.d, c, &err)
                     : !wisp_data_cursor_set(&r->train.d, c, &err)) &&
             !wisp_train_state_load(r->s.ctx, f.data + head, f.size - head, &used, &err);
        if (!ok) cli_report(path, &err);
    }
    if (ok) {
        r->elapsed_before = seconds;
        r->tokens_at_start = r->tokens_seen;
        char csv[4200];
        path_in(csv, sizeof csv, dir, "log.csv");
        cli_log_read_csv(&r->log, csv);
        cli_log_truncate(&r->log, wisp_train_steps(r->s.ctx));
    }
    cli_file_close(&f);
    return ok;
}

/* ---- progress ---- */

static void format_duration(char *buf, size_t cap, double s) {
    if (!(s >= 0) || s > 1e7) snprintf(buf, cap, "--");
    else if (s >= 3600) snprintf(buf, cap, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    else snprintf(buf, cap, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
}

static void progress(run *r, const cli_log_row *row, bool force) {
    if (r->quiet) return;
    int64_t every = r->total_steps / 50 > 0 ? r->total_steps / 50 : 1;
    if (!r->tty && !force && row->step % every != 0 && !isfinite(row->val_loss)) return;
    double now = cli_now() - r->t_start, rate = (double)(r->tokens_seen - r->tokens_at_start) / (now > 0 ? now : 1e-9);
    double per_step = (double)r->set.ctx * r->set.batch * r->set.accum * (r->dpo ? 2 : 1);
    char eta[32], val[64] = "";
    format_duration(eta, sizeof eta, (double)(r->total_steps - row->step) * per_step / (rate > 0 ? rate : 1e-9));
    if (isfinite(row->val_loss)) snprintf(val, sizeof val, "  val %.4f", row->val_loss);
    if (r->dpo && isfinite(row->val_loss))
        snprintf(val, sizeof val, "  val %.4f acc %.2f margin %.3f", row->val_loss, row->val_rewards.accuracies,
                 row->val_rewards.margins);
    fprintf(stderr, "%sstep %lld/%lld  loss %.4f  lr %.2e  |g| %.3g  %.0f tok/s  ETA %s%s%s", r->tty ? "\r" : "",
            (long long)row->step, (long long)r->total_steps, row->loss, row->lr, row->grad_norm, rate, eta, val,
            r->tty ? "\033[K" : "\n");
    if (r->tty && isfinite(row->val_loss)) fputc('\n', stderr);
}

/* ---- the run ---- */

static bool train(run *r) {
    const int32_t B = r->set.batch;
    wisp_error err = {0};
    const cli_dpo_metrics none = {NAN, NAN, NAN, NAN};
    const wisp_train_data *val_data = r->dpo ? (r->separate_val ? &r->val_pairs.chosen.d : &r->pairs.chosen.d)
                                             : (r->separate_val ? &r->val.d : &r->train.d);
    bool has_val = wisp_data_count(val_data, r->separate_val ? WISP_SPLIT_TRAIN : WISP_SPLIT_VAL) > 0;
    if (wisp_train_steps(r->s.ctx) == 0 && has_val && r->log.n == 0) {
        cli_log_row base = {0, NAN, 0, 0, 0, NAN, none, none}; /* step 0: the base model's loss */
        base.val_loss = validate(r, &base.val_rewards);
        cli_log_add(&r->log, &base);
        if (!r->quiet)
            fprintf(stderr, "validation loss before training (%s): %.4f\n",
                    ft_method_is_virtual(&r->set) ? "the base model after the initial prompt or prefix" : "the base model",
                    base.val_loss);
    }
    while (wisp_train_steps(r->s.ctx) < r->total_steps) {
        double loss_sum = 0;
        int64_t scored = 0;
        cli_dpo_metrics rewards = {0, 0, 0, 0};
        int32_t pairs = 0;
        for (int32_t m = 0; m < r->set.accum; m++) {
            if (r->dpo) { /* losses are means over pairs: weigh by pairs */
                ft_pairs_next(&r->pairs, B, r->set.ctx + 1, r->tok, r->mask, r->ref);
                wisp_dpo_result res;
                if (wisp_train_dpo_micro_step(r->s.ctx, r->tok, r->mask, B, r->pairs.ref ? r->ref : NULL, &res, &err)) {
                    cli_report("finetune", &err);
                    return false;
                }
                ft_dpo_accumulate(&rewards, &loss_sum, &pairs, &res);
                scored = pairs;
                r->tokens_seen += (int64_t)2 * B * r->set.ctx;
                continue;
            }
            wisp_data_next(&r->train.d, B, r->tok, r->mask);
            double loss;
            int32_t n;
            if (wisp_train_micro_step(r->s.ctx, r->tok, r->mask, B, &loss, &n, &err)) {
                cli_report("finetune", &err);
                return false;
            }
            loss_sum += loss * n;
            scored += n;
            r->tokens_seen += (int64_t)B * r->set.ctx;
        }
        wisp_train_step_info info;
        if (wisp_train_optimizer_step(r->s.ctx, &info, &err)) {
            cli_report("finetune", &err);
            return false;
        }
        if (info.skipped) {
            /* F16 storage overflowing is routine (the loss scale finds its level); NaN or Inf in F32 is not */
            bool scaled = wisp_ctx_config(r->s.ctx)->train.act_type == WISP_TYPE_F16;
            r->skipped++;
            r->skipped_total = info.skipped_steps;
            if (++r->skipped_in_a_row >= MAX_SKIPS_IN_A_ROW) {
                fprintf(stderr, "%swisp finetune: %d steps in a row had a NaN or infinite gradient (loss %g): the model "
                                "or the data gives non-finite values (a NaN weight in %s?); stopped without writing "
                                "the adapter\n",
                        r->tty ? "\n" : "", r->skipped_in_a_row, scored ? loss_sum / (double)scored : NAN,
                        r->set.model);
                return false;
            }
            if (!scaled || !r->quiet)
                fprintf(stderr, "%sstep %lld skipped: the gradient is not finite (loss %g)%s; nothing was updated\n",
                        r->tty ? "\n" : "", (long long)info.step + 1, scored ? loss_sum / (double)scored : NAN,
                        scaled ? ", F16 overflow: the loss scale is halved" : "");
            continue;
        }
        r->skipped_in_a_row = 0;
        r->skipped_total = info.skipped_steps;
        double now = cli_now() - r->t_start;
        cli_log_row row = {info.step, scored ? loss_sum / (double)scored : NAN, info.lr, info.grad_norm,
                           (double)(r->tokens_seen - r->tokens_at_start) / (now > 0 ? now : 1e-9), NAN, none, none};
        if (r->dpo && pairs)
            row.rewards = (cli_dpo_metrics){rewards.chosen / pairs, rewards.rejected / pairs, rewards.accuracies / pairs,
                                            rewards.margins / pairs};
        bool last = info.step == r->total_steps;
        if (has_val && ((r->set.eval_every > 0 && info.step % r->set.eval_every == 0) || last))
            row.val_loss = validate(r, &row.val_rewards);
        cli_log_add(&r->log, &row);
        progress(r, &row, last);
        bool stop = interrupted || (r->stop_after && (uint64_t)info.step >= r->stop_after && !last);
        if ((r->set.checkpoint_every > 0 && info.step % r->set.checkpoint_every == 0) || stop)
            if (!write_checkpoint(r)) return false;
        if (stop) {
            fprintf(stderr, "%sstopped at step %lld: checkpoint saved; continue with: wisp finetune --resume %s\n",
                    r->tty ? "\n" : "", (long long)info.step, r->out);
            r->stopped = true;
            return false;
        }
    }
    if (r->tty && !r->quiet) fputc('\n', stderr);
    return true;
}

static double first_finite(const cli_train_log *log, bool val, bool last) {
    for (size_t k = 0; k < log->n; k++) {
        const cli_log_row *row = &log->rows[last ? log->n - 1 - k : k];
        double v = val ? row->val_loss : row->loss;
        if (isfinite(v)) return v;
    }
    return NAN;
}

static void summary(run *r) {
    char arena[32];
    double secs = cli_now() - r->t_start, rate = (double)(r->tokens_seen - r->tokens_at_start) / (secs > 0 ? secs : 1e-9);
    double v0 = first_finite(&r->log, true, false), v1 = first_finite(&r->log, true, true);
    fprintf(stderr, "trained %lld steps (%lld tokens) in %.1f s: %.0f tok/s; train loss %.4f -> %.4f",
            (long long)wisp_train_steps(r->s.ctx), (long long)r->tokens_seen, r->elapsed_before + secs, rate,
            first_finite(&r->log, false, false), first_finite(&r->log, false, true));
    if (isfinite(v0) && isfinite(v1)) fprintf(stderr, "; validation loss %.4f -> %.4f (%+.1f%%)", v0, v1, 100 * (v1 / v0 - 1));
    if (r->dpo && r->log.n && isfinite(r->log.rows[0].val_rewards.margins) &&
        isfinite(r->log.rows[r->log.n - 1].val_rewards.margins)) {
        const cli_dpo_metrics *a = &r->log.rows[0].val_rewards, *b = &r->log.rows[r->log.n - 1].val_rewards;
        fprintf(stderr, "; held-out rewards/accuracies %.3f -> %.3f, rewards/margins %.4f -> %.4f", a->accuracies,
                b->accuracies, a->margins, b->margins);
    }
    if (r->skipped_total)
        fprintf(stderr, "; %lld steps skipped (non-finite gradient%s)", (long long)r->skipped_total,
                wisp_ctx_config(r->s.ctx)->train.act_type == WISP_TYPE_F16 ? ", F16 overflows as the loss scale settles" : "");
    fprintf(stderr, "\nmemory: arena %s, peak RSS %.1f MiB; wrote %s/{%speft,config.json,log.csv,loss.svg}\n",
            cli_human_bytes(arena, sizeof arena, r->s.arena_size), (double)cli_peak_memory_bytes() / 1048576.0, r->out,
            peft_only(r) ? "" : "adapter.gguf,");
}

/* With --resume the settings come from the run's config.json; only these may be given too. */
static bool resume_args_ok(int argc, char **argv) {
    static const char *const allowed[] = {"--resume", "-o", "--output", "-t", "--threads", "--arena", "--quiet", "-q",
                                          "--stop-after"};
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-') continue;
        bool ok = false;
        for (size_t k = 0; k < sizeof allowed / sizeof allowed[0]; k++)
            ok |= strncmp(argv[i], allowed[k], strlen(allowed[k])) == 0 &&
                  (argv[i][strlen(allowed[k])] == 0 || argv[i][strlen(allowed[k])] == '=');
        if (!ok) {
            fprintf(stderr, "wisp finetune: %s cannot be combined with --resume: the run's settings come from its "
                            "config.json\n", argv[i]);
            return false;
        }
    }
    return true;
}

static bool setup_data(run *r) {
    const wisp_tokenizer *tok = wisp_ctx_tokenizer(r->s.ctx);
    wisp_data_options o = {WISP_DATA_TEXT, WISP_DOCS_FILE, r->set.ctx, r->set.val ? 0.0f : r->set.val_split, r->set.seed, 0,
                           r->set.packing};
    if (!cli_data_format(r->set.format, r->set.data, &o.format) || !cli_data_docs(r->set.docs, &o.docs)) {
        fprintf(stderr, "wisp finetune: --format must be auto, text or jsonl and --docs file or blank\n");
        return false;
    }
    if ((r->set.packing && r->dpo) || ((r->set.packing || r->set.chat_template) && o.format != WISP_DATA_JSONL)) {
        fprintf(stderr, "wisp finetune: --packing and --chat-template are for JSONL records (plain text is always packed; "
                        "--method dpo scores each answer in a window of its own)\n");
        return false;
    }
    /* JSONL conversations (and DPO's conversational pairs) are rendered with --chat-template, else the model's chat
     * template (cli/chat_template.h); a chosen template that cannot be used stops the run */
    cli_chat_template ct;
    wisp_str has;
    bool chosen = r->set.chat_template != NULL;
    if (chosen && !cli_chat_template_open(&ct, &r->s.gguf, NULL, r->set.chat_template, NULL, NULL)) return false;
    bool chat = chosen || (o.format == WISP_DATA_JSONL && wisp_gguf_get_str(&r->s.gguf, "tokenizer.chat_template", &has) &&
                           cli_chat_template_open(&ct, &r->s.gguf, NULL, NULL, NULL, NULL));
    wisp_data_chat dc = {chat ? ct.tpl : NULL, chat ? ct.bos : NULL, chat ? ct.eos : NULL, chat ? ct.year : 0,
                         chat ? ct.month : 0, chat ? ct.day : 0};
    wisp_data_options v = o;
    if (r->set.val) cli_data_format(r->set.format, r->set.val, &v.format);
    const wisp_data_chat *val_chat = chat && v.format == WISP_DATA_JSONL ? &dc : NULL;
    bool ok;
    if (r->dpo) { /* pairs: two lockstep pipelines per file */
        ok = ft_pairs_load(&r->pairs, r->set.data, tok, &o, chat ? &dc : NULL);
        if (ok && r->set.val) ok = ft_pairs_load(&r->val_pairs, r->set.val, tok, &v, val_chat), r->separate_val = ok;
    } else {
        ok = cli_data_load_chat(&r->train, r->set.data, tok, &o, chat ? &dc : NULL);
        if (ok && r->set.val) ok = cli_data_load_chat(&r->val, r->set.val, tok, &v, val_chat), r->separate_val = ok;
    }
    if (chat) cli_chat_template_close(&ct);
    return ok;
}

/* The files a resumed run's config.json names must still be readable; if
 * not, say which setting of which config.json named them. */
static bool resume_files_ok(const ft_settings *set, const char *cfg_path) {
    const char *const paths[3] = {set->model, set->data, set->val}, *const what[3] = {"model", "data", "val"};
    for (int i = 0; i < 3; i++)
        if (paths[i] && access(paths[i], R_OK) != 0) {
            fprintf(stderr, "wisp: %s: the run's %s file %s cannot be read: %s\n", cfg_path, what[i], paths[i],
                    strerror(errno));
            return false;
        }
    return true;
}

/* A resumed run's data settings are checked where they were read, so that a
 * damaged config.json is named (setup_data's message speaks of options). */
static bool resume_data_settings_ok(const ft_settings *set, const char *cfg_path) {
    wisp_data_format format;
    wisp_data_docs docs;
    if (!set->format || !cli_data_format(set->format, set->data ? set->data : "", &format)) {
        fprintf(stderr, "wisp: %s: setting \"format\" must be auto, text or jsonl\n", cfg_path);
        return false;
    }
    if (!set->docs || !cli_data_docs(set->docs, &docs)) {
        fprintf(stderr, "wisp: %s: setting \"docs\" must be file or blank\n", cfg_path);
        return false;
    }
    return true;
}

/* Temporaries a killed run left next to its outputs (never the outputs themselves). */
static void remove_stale_outputs(const char *dir) {
    static const char *const names[] = {"adapter.gguf", "checkpoint.bin", "config.json", "log.csv", "loss.svg",
                                        "peft/adapter_model.safetensors", "peft/adapter_config.json"};
    int n = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[4200];
        path_in(path, sizeof path, dir, names[i]);
        n += cli_atomic_remove_stale(path);
    }
    if (n) fprintf(stderr, "wisp finetune: removed %d temporary files an interrupted run left in %s\n", n, dir);
}

/* PEFT's TEXT init: the embeddings of the text's tokens as its tokenizer
 * call gives them (special tokens included: BOS when the model adds one). */
static bool init_prompt_from_text(run *r) {
    const char *text = r->set.prompt_init_text;
    wisp_error err = {0};
    size_t n = 0, len = strlen(text);
    unsigned flags = wisp_tokenizer_add_bos_default(wisp_ctx_tokenizer(r->s.ctx)) ? WISP_TOKENIZE_ADD_BOS : 0;
    wisp_status s = wisp_tokenize_text(r->s.ctx, text, len, flags, NULL, 0, &n, &err);
    if (s && s != WISP_ERR_CAPACITY) {
        cli_report("--prompt-init-text", &err);
        return false;
    }
    int32_t *ids = malloc(sizeof(int32_t) * (n ? n : 1));
    bool ok = ids && !wisp_tokenize_text(r->s.ctx, text, len, flags, ids, n, &n, &err) &&
              !wisp_train_set_prompt(r->s.ctx, NULL, ids, (int32_t)n, &err);
    if (!ok) cli_report("--prompt-init-text", &err);
    free(ids);
    return ok;
}

/* Every exit after the settings are read releases what --resume read. */
static int finish(ft_settings *set, int rc) {
    ft_settings_release(set);
    return rc;
}

int cmd_finetune(int argc, char **argv) {
    run r;
    memset(&r, 0, sizeof r);
    ft_settings *set = &r.set;
    ft_settings_default(set);
    cli_model_opts mo;
    cli_model_opts_default(&mo);
    const char *resume = NULL;
    bool overwrite = false;
    const cli_opt opts[] = {
        {"model", 'm', OPT_STR, &set->model, "PATH", "GGUF base model (any weight type; it stays frozen)"},
        {"data", 0, OPT_STR, &set->data, "FILE", "training data: plain text, or JSONL records (.jsonl)"},
        {"val", 0, OPT_STR, &set->val, "FILE", "validation data (else --val-split of --data is held out)"},
        {"val-split", 0, OPT_FLOAT, &set->val_split, "F", "fraction of --data held out for validation (the last part)"},
        {"format", 0, OPT_STR, &set->format, "auto|text|jsonl", "data format; auto: JSONL for .jsonl/.json files"},
        {"docs", 0, OPT_STR, &set->docs, "file|blank", "plain-text documents: the whole file, or blank-line paragraphs"},
        {"packing", 0, OPT_FLAG, &set->packing, NULL,
         "JSONL: pack records, EOS between them, into shared --ctx windows (attention crosses records, as trl's packing)"},
        {"chat-template", 0, OPT_STR, &set->chat_template, "NAME|FILE",
         "template for {\"messages\"} records: chatml, llama3, gemma, phi3, phi4, zephyr, mistral or a Jinja file "
         "(default: the model's)"},
        {"output", 'o', OPT_STR, &r.out, "OUTDIR", "folder for the adapter, config.json, log.csv, loss.svg, checkpoints"},
        {"method", 0, OPT_STR, &set->method, "lora|rslora|dora|prompt|prefix|dpo",
         "lora; rslora (alpha / sqrt(rank)); dora (a trained magnitude per output row, PEFT use_dora); prompt: learned "
         "virtual tokens before the input (PEFT PROMPT_TUNING); prefix: learned keys and values every layer attends to "
         "first (PEFT PREFIX_TUNING, P-tuning v2); dpo: preference pairs, trl's DPO loss"},
        {"num-virtual-tokens", 0, OPT_INT, &set->num_virtual_tokens, "N",
         "(prompt) learned embeddings before every input; (prefix) learned key/value positions of every layer"},
        {"prefix-projection", 0, OPT_FLAG, &set->prefix_projection, NULL,
         "(prefix) train through PEFT's reparameterization W2 tanh(W1 e + b1) + b2 (exported as the final prefix)"},
        {"encoder-hidden-size", 0, OPT_INT, &set->encoder_hidden_size, "H",
         "(prefix --prefix-projection) width of that MLP; default token_dim (kv heads x head_dim)"},
        {"prompt-init-text", 0, OPT_STR, &set->prompt_init_text, "TEXT",
         "(prompt) start from the embeddings of TEXT's tokens, repeated or cut to N (PEFT's TEXT init); default random"},
        {"beta", 0, OPT_FLOAT, &set->beta, "B", "(dpo) strength of the pull towards the base model (trl's beta)"},
        {"label-smoothing", 0, OPT_FLOAT, &set->label_smoothing, "E", "(dpo) assumed fraction of flipped labels, in [0, 0.5) (cDPO)"},
        {"loss-type", 0, OPT_STR, &set->loss_type, "sigmoid|ipo", "(dpo) trl's loss_type: sigmoid (DPO) or ipo"},
        {"rank", 'r', OPT_INT, &set->rank, "R", "LoRA rank"},
        {"alpha", 0, OPT_FLOAT, &set->alpha, "A", "LoRA alpha (scale alpha / rank); 0: 2 x rank"},
        {"rslora", 0, OPT_FLAG, &set->rslora, NULL, "rank-stabilised scale alpha / sqrt(rank)"},
        {"lora-dropout", 0, OPT_FLOAT, &set->dropout, "P", "dropout on the LoRA path's input"},
        {"targets", 0, OPT_STR, &set->targets, "LIST", "projections to adapt: all, or e.g. attn_q,attn_v (q_proj,v_proj)"},
        {"ctx", 'c', OPT_INT, &set->ctx, "N", "tokens per training sequence"},
        {"batch", 'b', OPT_INT, &set->batch, "B", "sequences per micro-step"},
        {"accum", 0, OPT_INT, &set->accum, "K", "micro-steps per optimizer step (gradient accumulation)"},
        {"optimizer", 0, OPT_STR, &set->optimizer, "adamw|sgd", "AdamW (decoupled weight decay) or SGD with momentum"},
        {"lr", 0, OPT_FLOAT, &set->lr, "LR", "peak learning rate"},
        {"weight-decay", 0, OPT_FLOAT, &set->weight_decay, "WD", "weight decay"},
        {"momentum", 0, OPT_FLOAT, &set->momentum, "M", "SGD momentum; 0: 0.9, negative: none"},
        {"schedule", 0, OPT_STR, &set->schedule, "S", "constant, cosine, linear or 1cycle"},
        {"warmup", 0, OPT_INT, &set->warmup, "W", "warmup steps; -1: 5% of the steps"},
        {"min-lr-ratio", 0, OPT_FLOAT, &set->min_lr_ratio, "F", "cosine/linear decay floor as a fraction of --lr"},
        {"steps", 0, OPT_U64, &set->steps, "N", "optimizer steps (default: --epochs)"},
        {"epochs", 0, OPT_FLOAT, &set->epochs, "E", "passes over the training data when --steps is not given; 0: 1"},
        {"clip", 0, OPT_FLOAT, &set->clip, "C", "clip the global gradient norm to C; 0: off"},
        {"seed", 's', OPT_U64, &set->seed, "S", "seed of the initialisation, dropout and data order"},
        {"act-dtype", 0, OPT_STR, &set->act_dtype, "f32|bf16|f16", "storage of saved activations (f16: dynamic loss scaling)"},
        {"loss-scale-hysteresis", 0, OPT_INT, &set->loss_scale_hysteresis, "H", "(f16) overflows tolerated before the loss scale halves; 0: 2 (DeepSpeed's)"},
        {"min-loss-scale", 0, OPT_FLOAT, &set->min_loss_scale, "S", "(f16) the loss scale never halves below S; 0: 1"},
        {"checkpointing", 0, OPT_FLAG, &set->checkpointing, NULL, "activation checkpointing: recompute layers, save memory"},
        {"eval-every", 0, OPT_INT, &set->eval_every, "N", "validation loss every N steps (and at the end); 0: end only"},
        {"eval-windows", 0, OPT_INT, &set->eval_windows, "N", "validate on at most N windows; 0: all"},
        {"checkpoint-every", 0, OPT_INT, &set->checkpoint_every, "N", "write a resumable checkpoint every N steps"},
        {"resume", 0, OPT_STR, &resume, "DIR", "continue the run saved in DIR (settings from DIR/config.json)"},
        {"stop-after", 0, OPT_U64, &r.stop_after, "N", "stop after N steps with a checkpoint, as Ctrl-C does; --resume goes on"},
        {"overwrite", 0, OPT_FLAG, &overwrite, NULL, "replace a run already in OUTDIR"},
        {"threads", 't', OPT_INT, &mo.threads, "N", "worker threads; 0: online CPUs, at most 8 (results do not change)"},
        {"arena", 0, OPT_SIZE, &mo.arena, "BYTES", "use exactly one arena of this size (default: the plan)"},
        {"quiet", 'q', OPT_FLAG, &r.quiet, NULL, "no progress output"},
    };
    const cli_command cmd = {
        "finetune", "-m BASE --data FILE -o OUTDIR [options]",
        "Train a LoRA adapter on a frozen base model (quantized bases included: QLoRA) inside one planned arena.",
        "Data: plain text is packed into windows of --ctx tokens led by BOS, with EOS after each document\n"
        "(--docs); JSONL records {\"prompt\",\"completion\"} or {\"instruction\",\"input\",\"output\"} (Alpaca template)\n"
        "are one window each, scored on the response only; conversations {\"messages\": [{\"role\",\"content\"},...]}\n"
        "are rendered with the model's chat template (or --chat-template) and scored on assistant turns only.\n"
        "Records longer than the window are cut (counted on stderr). --packing instead joins records into one\n"
        "stream (EOS after each, unscored) cut into full windows: nothing is cut, each record keeps its own mask,\n"
        "attention sees earlier records of the same window (positions are not reset). The loss is the mean\n"
        "cross-entropy of next tokens.\n"
        "--method dpo: JSONL pairs {\"prompt\",\"chosen\",\"rejected\"}; --batch counts pairs; the loss is trl's DPO\n"
        "loss against the base model without the adapter (the reference), logged with trl's rewards/* columns.\n"
        "OUTDIR receives adapter.gguf (llama.cpp GGUF LoRA), peft/ (Hugging Face PEFT), config.json (every\n"
        "setting), log.csv, loss.svg and, with --checkpoint-every or on Ctrl-C, checkpoint.bin for --resume,\n"
        "which continues bit-identically. --method dora writes no adapter.gguf (llama.cpp's format has no\n"
        "DoRA magnitudes): peft/ is the adapter (use_dora, lora_magnitude_vector). --method prompt trains only\n"
        "--num-virtual-tokens input embeddings put before every sequence (the base and its tokens untouched);\n"
        "peft/ holds them (PROMPT_TUNING, prompt_embeddings), llama.cpp cannot load them; wisp run/chat/eval\n"
        "--lora OUTDIR/peft use them. --method prefix trains --num-virtual-tokens keys and values per layer\n"
        "(the text after them; peft/: PREFIX_TUNING, prompt_embeddings [N, layers x 2 x kv_heads x head_dim]),\n"
        "which llama.cpp cannot load either; models with sliding-window layers are refused. --prefix-projection\n"
        "trains it through PEFT's MLP (prefix_projection) and exports its output, as PEFT saves it.\n"
        "Example: wisp finetune -m stories260K.gguf --data tinyshakespeare.txt --val-split 0.1 --ctx 128 \\\n"
        "           --rank 8 --steps 500 --eval-every 50 -o shakespeare-lora",
        opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    if (resume) {
        if (!resume_args_ok(argc, argv)) return CLI_USAGE;
        char cfg_path[4200];
        path_in(cfg_path, sizeof cfg_path, resume, "config.json");
        if (!ft_settings_read(set, cfg_path)) return CLI_FAIL;
        if (!resume_files_ok(set, cfg_path) || !resume_data_settings_ok(set, cfg_path)) return finish(set, CLI_FAIL);
        if (!r.out) r.out = resume;
    }
    if (!set->model || !set->data || !r.out) {
        fprintf(stderr, "wisp finetune: needs -m BASE, --data FILE and -o OUTDIR\n(see: wisp finetune --help)\n");
        return finish(set, CLI_USAGE);
    }
    if (!(set->val_split >= 0 && set->val_split < 1) || set->eval_every < 0 || set->checkpoint_every < 0 ||
        set->epochs < 0 || set->eval_windows < 0) {
        fprintf(stderr, "wisp finetune: --val-split must be in [0, 1); --epochs, --eval-every, --eval-windows and "
                        "--checkpoint-every must not be negative\n");
        return finish(set, CLI_USAGE);
    }
    char config_path[4200];
    path_in(config_path, sizeof config_path, r.out, "config.json");
    if (!resume && !overwrite && access(config_path, F_OK) == 0) {
        fprintf(stderr, "wisp finetune: %s already holds a run; continue it with --resume %s, or pass --overwrite\n",
                r.out, r.out);
        return finish(set, CLI_USAGE);
    }
    if (!make_dir(r.out)) return finish(set, CLI_FAIL);
    remove_stale_outputs(r.out);

    /* the data first (its size sets the step count), tokenized with a small context of its own */
    wisp_config cfg = wisp_config_default();
    if (!ft_settings_to_config(set, &cfg.train)) return finish(set, CLI_USAGE);
    r.dpo = r.log.dpo = ft_method_is_dpo(set);
    mo.model = set->model;
    mo.ctx = 16; /* inference: room to attach the adapter and try a prompt; training has its own buffers */
    if (!cli_session_open(&r.s, &mo, &(wisp_config){.kv_type = WISP_TYPE_F16})) return finish(set, CLI_FAIL);
    bool ok = setup_data(&r);
    cli_session_close(&r.s);
    if (ok && set->steps == 0) {
        double e = set->epochs > 0 ? set->epochs : 1;
        int64_t per_step = (int64_t)set->batch * set->accum;
        int64_t n = wisp_data_count(r.dpo ? &r.pairs.chosen.d : &r.train.d, WISP_SPLIT_TRAIN);
        set->steps = (int64_t)ceil(e * (double)n / (double)per_step);
        if (set->steps < 1) set->steps = 1;
    }
    r.total_steps = set->steps;
    if (set->warmup < 0) set->warmup = (int32_t)(set->steps / 20);
    if (ok) ok = ft_settings_to_config(set, &cfg.train) && cli_session_open(&r.s, &mo, &cfg);
    if (ok) {
        ft_settings_from_resolved(set, &wisp_ctx_config(r.s.ctx)->train);
        r.train.d.tok = r.val.d.tok = wisp_ctx_tokenizer(r.s.ctx); /* the probe's is gone */
        r.pairs.chosen.d.tok = r.pairs.rejected.d.tok = wisp_ctx_tokenizer(r.s.ctx);
        r.val_pairs.chosen.d.tok = r.val_pairs.rejected.d.tok = wisp_ctx_tokenizer(r.s.ctx);
    }
    if (ok) {
        size_t seqs = (size_t)set->batch * (r.dpo ? 2 : 1), width = (size_t)set->ctx + 1;
        r.tok = malloc(sizeof(int32_t) * width * seqs);
        r.mask = malloc(width * seqs);
        r.ref = malloc(sizeof(double) * seqs);
        ok = r.tok && r.mask && r.ref;
    }
    if (ok && ft_method_is_prompt(set) && set->prompt_init_text) ok = init_prompt_from_text(&r);
    r.tty = isatty(2);
    r.t_start = cli_now();
    if (ok && resume) {
        char ck[4200];
        path_in(ck, sizeof ck, resume, "checkpoint.bin");
        if (access(ck, F_OK) != 0 && errno == ENOENT) { /* stopped before its first checkpoint: the settings suffice */
            if (!r.quiet) fprintf(stderr, "wisp finetune: %s has no checkpoint yet: starting the run again from step 0\n", resume);
        } else {
            ok = read_checkpoint(&r, resume);
        }
    }
    if (ok && !resume) {
        char extra[512];
        snprintf(extra, sizeof extra,
                 "\"train_examples\": %d,\n  \"val_examples\": %d,\n  \"tokens_per_step\": %lld,\n  \"arena_bytes\": %zu",
                 wisp_data_count(r.dpo ? &r.pairs.chosen.d : &r.train.d, WISP_SPLIT_TRAIN),
                 r.dpo ? (r.separate_val ? wisp_data_count(&r.val_pairs.chosen.d, WISP_SPLIT_TRAIN)
                                         : wisp_data_count(&r.pairs.chosen.d, WISP_SPLIT_VAL))
                 : r.separate_val ? wisp_data_count(&r.val.d, WISP_SPLIT_TRAIN) : wisp_data_count(&r.train.d, WISP_SPLIT_VAL),
                 (long long)set->ctx * set->batch * set->accum * (r.dpo ? 2 : 1), r.s.arena_size);
        ok = ft_settings_write(set, extra, config_path);
    }
    if (ok && !r.quiet) {
        char a[32], w[32];
        fprintf(stderr, "finetune: %d training %s of %d tokens, %lld steps of %d x %d %s; arena %s (the model's "
                        "%s outside it), %d threads\n",
                wisp_data_count(r.dpo ? &r.pairs.chosen.d : &r.train.d, WISP_SPLIT_TRAIN), r.dpo ? "pairs" : "windows",
                set->ctx, (long long)r.total_steps, set->accum, set->batch,
                r.dpo ? "pairs" : "sequences", cli_human_bytes(a, sizeof a, r.s.arena_size), cli_human_bytes(w, sizeof w, r.s.plan.weight_bytes),
                wisp_ctx_config(r.s.ctx)->threads.n_threads);
    }
    /* The reference's log-probs never change: with at least one epoch to train, score every pair once
     * up front (trl's precompute_ref_log_probs); a shorter run scores only the pairs it meets, in the step. */
    if (ok && r.dpo && set->steps * set->batch * set->accum >= wisp_data_count(&r.pairs.chosen.d, WISP_SPLIT_TRAIN)) {
        double t0 = cli_now();
        ok = ft_pairs_reference(r.s.ctx, &r.pairs, set->batch, set->ctx + 1, r.tok, r.mask);
        if (ok && !r.quiet)
            fprintf(stderr, "finetune: reference log-probs of %d pairs (the base without the adapter) in %.1f s\n",
                    wisp_data_count(&r.pairs.chosen.d, WISP_SPLIT_TRAIN), cli_now() - t0);
    }
    signal(SIGINT, on_sigint);
    if (ok) ok = train(&r);
    signal(SIGINT, SIG_DFL);
    if (ok) ok = write_adapter(&r) && write_logs(&r);
    if (ok && !peft_only(&r) && !write_peft(&r))
        fprintf(stderr, "wisp finetune: warning: the PEFT copy could not be written\n");
    if (ok && set->checkpoint_every > 0) ok = write_checkpoint(&r);
    if (ok && !r.quiet) summary(&r);
    cli_log_free(&r.log);
    free(r.tok);
    free(r.mask);
    free(r.ref);
    cli_data_free(&r.train);
    cli_data_free(&r.val);
    ft_pairs_free(&r.pairs);
    ft_pairs_free(&r.val_pairs);
    cli_session_close(&r.s);
    if (r.stopped && !interrupted) return finish(set, CLI_OK); /* --stop-after: a planned pause */
    return finish(set, ok ? CLI_OK : interrupted ? 130 : CLI_FAIL);
}
