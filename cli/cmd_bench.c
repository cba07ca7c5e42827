/* wisp bench: prefill and decode speed of a model, its peak memory, the
 * weight-read bandwidth decode achieves next to the machine's measured
 * read-only memory bandwidth (decode's roofline), and prefill's FLOPs next
 * to the measured arithmetic peak; with --train, LoRA training throughput
 * and its model FLOPs utilization. The token ids are a fixed sequence, not
 * text, so a peer fed the same ids (bench/llamacpp_bench.mjs) does the same
 * work. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "bench_train.h"
#include "cache_size.h"
#include "compute_peak.h"
#include "json_out.h"
#include "median.h"
#include "membw.h"
#include "model_flops.h"
#include "peak_memory.h"
#include "plan_print.h"
#include "session.h"

/* Token i of the benchmark sequence: spread over the vocabulary, skipping
 * the first ids (specials in most vocabularies). The node peer uses the same
 * formula. */
static int32_t bench_token(int64_t i, int32_t n_vocab) {
    if (n_vocab <= 4) return 0;
    return (int32_t)(3 + (i * 7919 + 13) % (n_vocab - 3));
}

/* Bytes of weights a decode step reads: every projection and the output
 * matrix once, plus the norms; of the embedding only one row (unless it is
 * also the output). */
static uint64_t decode_bytes_per_token(const wisp_model *m) {
    const wisp_hparams *hp = &m->hp;
    uint64_t b = (uint64_t)m->output.rows * m->output.row_bytes;
    if (!hp->tied_output) b += m->tok_embd.row_bytes;
    for (int32_t l = 0; l < hp->n_layers; l++)
        for (int p = 0; p < WISP_PROJ_COUNT; p++)
            b += (uint64_t)m->layers[l].proj[p].rows * m->layers[l].proj[p].row_bytes;
    b += (uint64_t)(2 * hp->n_layers + 1) * (uint64_t)hp->dim * sizeof(float);
    return b;
}

/* on a copy: the runs are listed in their order in --json */
static double median(const double *v, int n) {
    double s[64];
    memcpy(s, v, sizeof(double) * (size_t)n);
    return cli_median_sorting(s, n);
}

static void json_list(const char *key, const double *v, int n) {
    printf("\"%s\":[", key);
    for (int i = 0; i < n; i++) printf("%s%.6g", i ? "," : "", v[i]);
    printf("],");
}

/* a JSON number, or null for a figure not measured (negative) */
static void json_fraction(const char *key, double v, bool last) {
    if (v >= 0)
        printf("\"%s\":%.4f%s", key, v, last ? "" : ",");
    else
        printf("\"%s\":null%s", key, last ? "" : ",");
}

static void json_peaks(const cli_compute_peak *p) {
    printf("\"int8_peak_ops_s\":%.6g,\"f32_peak_flops_s\":%.6g,", p->int8_ops_s, p->f32_flops_s);
}

/* "int8 peak ..., f32 peak ..." and, when the level has no loop, why a figure is missing */
static void print_peaks(const cli_compute_peak *p, const char *kernels) {
    printf("peak       ");
    if (p->int8_ops_s > 0)
        printf("int8 %.1f Gop/s (%.1f per thread)", p->int8_ops_s / 1e9, p->int8_ops_s / 1e9 / p->threads);
    else
        printf("int8 not measured for kernel level %s", kernels);
    if (p->f32_flops_s > 0)
        printf(", F32 FMA %.1f GFLOP/s (%.1f per thread)\n", p->f32_flops_s / 1e9, p->f32_flops_s / 1e9 / p->threads);
    else
        printf(", F32 not measured for kernel level %s\n", kernels);
}

/* The arithmetic peaks of this kernel level and thread count, when asked for (seconds > 0);
 * zeros otherwise. */
static cli_compute_peak peaks_if_asked(const char *kernels, int threads, float seconds) {
    cli_compute_peak none = {0, 0, threads};
    return seconds > 0 ? cli_compute_peak_measure(kernels, threads, seconds) : none;
}

static int bench_train(cli_model_opts *mo, int32_t steps, int32_t rank, float peak_time, bool json) {
    cli_train_bench b = {mo->ctx ? mo->ctx : 256, mo->batch ? mo->batch : 1, rank, steps, bench_token, 0, 0, 0, 0};
    cli_session s;
    if (!cli_train_bench_run(&s, mo, &b)) return CLI_FAIL;
    size_t peak_rss = cli_peak_memory_bytes(), arena = s.arena_size;
    const char *kernels = wisp_ctx_kernels_name(s.ctx);
    int threads = wisp_ctx_config(s.ctx)->threads.n_threads;
    cli_flops f = cli_train_flops(wisp_ctx_model(s.ctx), b.targets, b.rank, b.seq_len);
    cli_session_close(&s);
    cli_compute_peak peak = peaks_if_asked(kernels, threads, peak_time);
    double mfu = peak_time > 0 ? cli_peak_fraction(b.tok_s, f, &peak) : -1.0;
    if (json) {
        printf("{\"model\":");
        cli_json_string(stdout, mo->model, strlen(mo->model));
        printf(",\"kernels\":\"%s\",\"threads\":%d,\"train_seq_len\":%d,\"train_batch\":%d,\"train_rank\":%d,"
               "\"train_steps\":%d,\"train_tok_s\":%.6g,\"train_loss\":%.6g,\"peak_rss_bytes\":%zu,\"arena_bytes\":%zu,",
               kernels, threads, b.seq_len, b.batch, b.rank, b.steps, b.tok_s, b.loss, peak_rss, arena);
        printf("\"train_int8_ops_per_token\":%.6g,\"train_f32_flops_per_token\":%.6g,", f.int8, f.f32);
        json_peaks(&peak);
        json_fraction("train_mfu", mfu, false);
        printf("\"cpu_share\":%.3f}\n", b.cpu_share);
        return CLI_OK;
    }
    char a[32], c[32];
    printf("model      %s\nkernels    %s, %d thread%s (got %.0f%% of them while measuring)\n", mo->model, kernels, threads,
           threads == 1 ? "" : "s", 100.0 * b.cpu_share);
    printf("train      %8.1f tok/s  (LoRA rank %d, %d x %d tokens per step, %d steps after a warm-up; loss %.3f)\n",
           b.tok_s, b.rank, b.batch, b.seq_len, b.steps, b.loss);
    printf("memory     peak RSS %s, arena %s\n", cli_human_bytes(a, sizeof a, peak_rss), cli_human_bytes(c, sizeof c, arena));
    printf("flops      %.3g per token (%.3g of them int8 dot products, the rest F32)\n", f.int8 + f.f32, f.int8);
    if (peak_time > 0) print_peaks(&peak, kernels);
    if (mfu >= 0) printf("mfu        %.1f%% of the peak (each part at its own peak)\n", 100.0 * mfu);
    return CLI_OK;
}

int cmd_bench(int argc, char **argv) {
    cli_model_opts mo;
    cli_model_opts_default(&mo);
    int32_t n_prompt = 128, n_gen = 64, reps = 3;
    size_t mem_test = (size_t)256 << 20;
    bool json = false, train = false;
    int32_t steps = 3, rank = 8;
    float peak_time = 0.5f;
    const cli_opt opts[] = {
        CLI_MODEL_OPTS(&mo),
        {"prompt-tokens", 'p', OPT_INT, &n_prompt, "N", "prompt length for the prefill measurement (0: skip it)"},
        {"gen-tokens", 'n', OPT_INT, &n_gen, "N", "tokens decoded one at a time after the prompt (0: skip)"},
        {"reps", 'r', OPT_INT, &reps, "N", "measured repetitions (after one warm-up); medians are reported"},
        {"mem-test", 0, OPT_SIZE, &mem_test, "BYTES",
         "array size of the memory bandwidth tests (the read test uses at least 4x the last-level cache); 0: skip them"},
        {"peak-time", 0, OPT_FLOAT, &peak_time, "SECONDS",
         "CPU seconds per thread of each arithmetic peak test (int8 dot products, F32 FMA); 0: skip them"},
        {"train", 0, OPT_FLAG, &train, NULL,
         "LoRA training instead: --ctx positions (default 256) x --batch sequences (default 1) per step"},
        {"steps", 0, OPT_INT, &steps, "N", "(train) optimizer steps measured, after one warm-up step"},
        {"rank", 0, OPT_INT, &rank, "R", "(train) LoRA rank, on all seven projections"},
        {"json", 0, OPT_FLAG, &json, NULL, "print one JSON object instead of a table"},
    };
    const cli_command cmd = {
        "bench", "-m MODEL [-t THREADS] [-p PROMPT_TOKENS] [-n GEN_TOKENS] [-r REPS] [--train] [--json]",
        "Measure MODEL's prefill speed (the prompt in one batch) and decode speed (one token per step),\n"
        "the peak resident memory, and the weight bytes decode streams per token against the machine's\n"
        "read-only memory bandwidth with as many threads (a sum over a buffer at least 4x the last-level\n"
        "cache): decode's roofline. A STREAM-like copy is measured too, for comparison. Prefill's FLOPs\n"
        "are set against the machine's arithmetic peak, measured with the instructions of the kernel level\n"
        "in use (int8 dot products for quantized weights, F32 FMA for float ones) on as many threads.\n"
        "--train measures LoRA training instead (finetune's defaults: AdamW, rank 8 on all projections):\n"
        "tokens/s, peak memory, and model FLOPs utilization against the same peaks.",
        "Tokens are a fixed id sequence (3 + (i*7919 + 13) mod (n_vocab - 3)), the same for every run and\n"
        "for the llama.cpp side of `make bench`. Unless --ctx/--batch say otherwise the context holds the\n"
        "prompt and the decoded tokens, and the prompt is one batch (up to 512 tokens).\n"
        "FLOPs count 2 per multiply-add: prefill every projection per token, the output matrix once\n"
        "(only the last logits), causal attention; training forward 2 and backward 2 (dx only) per frozen\n"
        "weight, 6 r (d_in + d_out) per adapted matrix, attention forward and backward (README: bench).\n"
        "WISP_KERNELS=scalar|avx2|avx512 forces a kernel level.\n"
        "Example: wisp bench -m smollm2-q8_0.gguf -t 2 -p 128 -n 64",
        opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    if (!(peak_time >= 0 && peak_time <= 60) || steps < 1 || rank < 1) {
        fprintf(stderr, "wisp bench: need 0 <= --peak-time <= 60, --steps >= 1 and --rank >= 1\n");
        return CLI_USAGE;
    }
    /* options of the other mode would be ignored: refuse them (defaults are what the user did not give) */
    if (train ? n_prompt != 128 || n_gen != 64 || reps != 3 || mem_test != ((size_t)256 << 20) : steps != 3 || rank != 8) {
        fprintf(stderr, "wisp bench: %s\n", train ? "-p, -n, -r and --mem-test measure inference, not --train"
                                                  : "--steps and --rank belong to --train");
        return CLI_USAGE;
    }
    if (train) return bench_train(&mo, steps, rank, peak_time, json);
    if (n_prompt < 0 || n_gen < 0 || n_prompt + n_gen < 1 || reps < 1 || reps > 63) {
        fprintf(stderr, "wisp bench: need -p >= 0, -n >= 0 (not both 0) and 1 <= -r <= 63\n");
        return CLI_USAGE;
    }
    if (!mo.ctx) mo.ctx = n_prompt + n_gen;
    if (!mo.batch) mo.batch = n_prompt > 0 ? (n_prompt < 512 ? n_prompt : 512) : 1;

    wisp_config cfg = wisp_config_default();
    cli_session s;
    if (!cli_session_open(&s, &mo, &cfg)) return CLI_FAIL;
    wisp_ctx *ctx = s.ctx;
    const wisp_hparams *hp = wisp_ctx_hparams(ctx);
    if (n_prompt + n_gen > wisp_ctx_config(ctx)->n_ctx) {
        fprintf(stderr, "wisp bench: %d + %d tokens do not fit a context of %d (raise --ctx)\n", n_prompt, n_gen,
                wisp_ctx_config(ctx)->n_ctx);
        cli_session_close(&s);
        return CLI_USAGE;
    }
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)(n_prompt + n_gen));
    if (!tokens) {
        cli_session_close(&s);
        return CLI_FAIL;
    }
    for (int32_t i = 0; i < n_prompt + n_gen; i++) tokens[i] = bench_token(i, hp->n_vocab);

    double prefill[64], decode[64], wall = 0.0, cpu = 0.0;
    const bool tty = !json && isatty(2);
    wisp_error err = {0};
    wisp_status st = WISP_OK;
    for (int r = -1; r < reps && !st; r++) { /* r = -1: warm-up (faults the weights in) */
        double c0 = cli_cpu_seconds();
        wisp_rewind(ctx, 0);
        double t0 = cli_now();
        if (n_prompt) st = wisp_eval(ctx, tokens, n_prompt, &err);
        double t1 = cli_now();
        for (int32_t i = 0; i < n_gen && !st; i++) st = wisp_eval(ctx, &tokens[n_prompt + i], 1, &err);
        double t2 = cli_now();
        if (r >= 0) {
            prefill[r] = n_prompt ? n_prompt / (t1 - t0) : 0.0;
            decode[r] = n_gen ? n_gen / (t2 - t1) : 0.0;
            wall += t2 - t0;
            cpu += cli_cpu_seconds() - c0;
        }
        if (tty) fprintf(stderr, "\rbench: %s %d of %d", r < 0 ? "warm-up" : "run", r + 1, reps);
    }
    if (tty) fputc('\n', stderr);
    if (st) {
        cli_report(mo.model, &err);
        free(tokens);
        cli_session_close(&s);
        return CLI_FAIL;
    }
    size_t peak_rss = cli_peak_memory_bytes(); /* before the bandwidth test's arrays */
    const char *kernels = wisp_ctx_kernels_name(ctx);
    int threads = wisp_ctx_config(ctx)->threads.n_threads;
    uint64_t per_token = decode_bytes_per_token(wisp_ctx_model(ctx));
    cli_flops prefill_flops = cli_prefill_flops(wisp_ctx_model(ctx), n_prompt);
    size_t weight_bytes = s.plan.weight_bytes, packed = s.plan.part[WISP_PART_PACKED_WEIGHTS];
    size_t arena = s.arena_size, file_bytes = (size_t)wisp_gguf_total_bytes(&s.gguf); /* all shards */
    long long huge = cli_file_huge_bytes(&s.file);
    free(tokens);
    cli_session_close(&s);

    double pf = n_prompt ? median(prefill, reps) : 0.0, dc = n_gen ? median(decode, reps) : 0.0;
    double achieved = dc * (double)per_token;
    /* below 1 when other processes took the CPUs (spinning workers count as busy) */
    double cpu_share = wall > 0 ? cpu / (wall * threads) : 0.0;
    double membw = mem_test ? cli_copy_bandwidth(threads, mem_test) : 0.0;
    /* decode only reads its weights: the roofline is a read-only test, over a
     * buffer the last-level cache cannot hold */
    const size_t llc = cli_llc_bytes();
    const size_t read_test = mem_test && mem_test < 4 * llc ? 4 * llc : mem_test;
    double readbw = read_test ? cli_read_bandwidth(threads, read_test) : 0.0;
    /* weights that fit in the last-level cache are read from it, not from
     * memory: such a row can pass the roofline */
    const bool fits_llc = llc && per_token <= llc;
    cli_compute_peak peak = peaks_if_asked(kernels, threads, peak_time);
    const double peak_fraction = peak_time > 0 && n_prompt ? cli_peak_fraction(pf, prefill_flops, &peak) : -1.0;
    if (json) {
        printf("{\"model\":");
        cli_json_string(stdout, mo.model, strlen(mo.model));
        printf(",\"kernels\":\"%s\",\"threads\":%d,\"prompt_tokens\":%d,\"gen_tokens\":%d,\"reps\":%d,", kernels, threads,
               n_prompt, n_gen, reps);
        printf("\"prefill_tok_s\":%.6g,\"decode_tok_s\":%.6g,", pf, dc);
        json_list("prefill_tok_s_runs", prefill, n_prompt ? reps : 0);
        json_list("decode_tok_s_runs", decode, n_gen ? reps : 0);
        printf("\"peak_rss_bytes\":%zu,\"arena_bytes\":%zu,\"weight_bytes\":%zu,\"packed_weight_bytes\":%zu,"
               "\"decode_bytes_per_token\":%llu,",
               peak_rss, arena, weight_bytes, packed, (unsigned long long)per_token);
        if (huge >= 0)
            printf("\"file_huge_page_bytes\":%lld,", huge);
        else
            printf("\"file_huge_page_bytes\":null,");
        printf("\"decode_bandwidth_bytes_s\":%.6g,\"mem_bandwidth_bytes_s\":%.6g,\"read_bandwidth_bytes_s\":%.6g,"
               "\"read_test_bytes\":%zu,\"llc_bytes\":%zu,\"weights_fit_llc\":%s,\"roofline_fraction\":%.4f,",
               achieved, membw, readbw, read_test, llc, fits_llc ? "true" : "false", readbw > 0 ? achieved / readbw : 0.0);
        printf("\"prefill_int8_ops_per_token\":%.6g,\"prefill_f32_flops_per_token\":%.6g,", prefill_flops.int8,
               prefill_flops.f32);
        json_peaks(&peak);
        json_fraction("prefill_peak_fraction", peak_fraction, false);
        printf("\"cpu_share\":%.3f}\n", cpu_share);
    } else {
        char a[32], b[32], c[32];
        printf("model      %s\nkernels    %s, %d thread%s (got %.0f%% of them while measuring)\n", mo.model, kernels,
               threads, threads == 1 ? "" : "s", 100.0 * cpu_share);
        if (n_prompt) printf("prefill    %8.1f tok/s  (%d-token prompt, median of %d)\n", pf, n_prompt, reps);
        if (n_gen) printf("decode     %8.1f tok/s  (%d tokens, median of %d)\n", dc, n_gen, reps);
        printf("memory     peak RSS %s, arena %s, weights %s (", cli_human_bytes(a, sizeof a, peak_rss),
               cli_human_bytes(b, sizeof b, arena), cli_human_bytes(c, sizeof c, weight_bytes));
        if (packed) /* the file's copies of those then leave the process (session.c) */
            printf("%s of them packed into the arena; --in-place-weights: none", cli_human_bytes(a, sizeof a, packed));
        else if (huge >= 0)
            printf("mapped; %s of the file in 2 MiB pages", cli_human_bytes(a, sizeof a, (size_t)huge));
        else
            printf("mapped");
        printf(")\n");
        /* a fifth of a model in small pages cost 3-7% of decode on a VM here;
         * packed weights are read from the arena instead (their pages in the
         * file are dropped), so only the rest counts */
        const size_t small = huge < 0 || (size_t)huge + packed >= file_bytes ? 0 : file_bytes - (size_t)huge - packed;
        if (small > file_bytes / 10 && file_bytes >= ((size_t)8 << 20))
            printf("note       %s of the model is mapped in 4 KiB pages: the page cache holds those parts in small\n"
                   "           pieces, as a download, a copy or an earlier read leaves them. Decode ran 14-34%% slower\n"
                   "           with all of a model so on a VM here. Drop the file from the page cache\n"
                   "           (dd if=%s iflag=nocache count=0) and the next run reads it back in 2 MiB pages\n"
                   "           where the kernel can (ext4 from Linux 6.16, xfs).\n",
                   cli_human_bytes(a, sizeof a, small), mo.model);
        if (n_gen)
            printf("bandwidth  decode reads %s/token -> %.2f GB/s", cli_human_bytes(a, sizeof a, (size_t)per_token),
                   achieved / 1e9);
        if (readbw > 0)
            printf("; memory read %.2f GB/s: %.0f%% of the roofline (%.1f tok/s)", readbw / 1e9, 100.0 * achieved / readbw,
                   readbw / (double)per_token);
        if (membw > 0) printf("; copy %.2f GB/s", membw / 1e9);
        printf("\n");
        if (peak_time > 0) print_peaks(&peak, kernels);
        if (peak_fraction >= 0)
            printf("arithmetic prefill does %.3g ops/token (%.0f%% int8): %.1f%% of the peak\n",
                   prefill_flops.int8 + prefill_flops.f32, 100.0 * prefill_flops.int8 / (prefill_flops.int8 + prefill_flops.f32),
                   100.0 * peak_fraction);
        if (n_gen && fits_llc)
            printf("note       decode reads %s per token and the last-level cache holds %s: the weights stay in\n"
                   "           the cache, so this is not a memory roofline\n",
                   cli_human_bytes(a, sizeof a, (size_t)per_token), cli_human_bytes(b, sizeof b, llc));
    }
    return CLI_OK;
}
