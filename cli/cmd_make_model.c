/* wisp make-model: a random-weight GGUF at a real model's shape, for speed
 * work and benchmarks (see adapters/model_gen.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic_file.h"
#include "commands.h"
#include "gguf_write.h"
#include "hf_tokenizer.h"
#include "model_gen.h"
#include "plan_print.h"
#include "session.h"

/* A Hugging Face tokenizer.json (and the tokenizer_config.json beside it,
 * when there is one) through adapters/hf_tokenizer.h. */
typedef struct hf_vocab {
    cli_file json, config;
    void *nodes, *tables;
    wisp_hf_tokenizer t;
} hf_vocab;

static wisp_status write_hf_vocab(void *user, wisp_sink *s, wisp_error *err) {
    return wisp_hf_tokenizer_write(&((hf_vocab *)user)->t, s, err);
}

static void hf_vocab_close(hf_vocab *v) {
    free(v->nodes);
    free(v->tables);
    if (v->json.data) cli_file_close(&v->json);
    if (v->config.data) cli_file_close(&v->config);
}

/* false (message printed) on failure; pads the vocabulary to n_vocab ids. */
static bool hf_vocab_open(hf_vocab *v, const char *path, int32_t n_vocab) {
    memset(v, 0, sizeof *v);
    if (!cli_file_open(&v->json, path)) return false;
    char config_path[4096];
    const char *slash = strrchr(path, '/');
    int dir = slash ? (int)(slash - path) + 1 : 0;
    snprintf(config_path, sizeof config_path, "%.*stokenizer_config.json", dir, path);
    wisp_hf_tokenizer_opts opts = {NULL, 0, NULL, n_vocab};
    if (access(config_path, R_OK) == 0) {
        if (!cli_file_open(&v->config, config_path)) return false;
        opts.config = (const char *)v->config.data;
        opts.config_len = v->config.size;
    }
    wisp_error err = {0};
    size_t node_bytes;
    const char *text = (const char *)v->json.data;
    if (wisp_hf_tokenizer_nodes(text, v->json.size, &opts, &node_bytes, &err) ||
        !(v->nodes = malloc(node_bytes ? node_bytes : 1)) ||
        wisp_hf_tokenizer_open(&v->t, text, v->json.size, &opts, v->nodes, node_bytes, &err) ||
        !(v->tables = malloc(v->t.table_bytes ? v->t.table_bytes : 1)) ||
        wisp_hf_tokenizer_index(&v->t, v->tables, v->t.table_bytes, &err)) {
        if (!err.message[0]) wisp_fail(&err, WISP_ERR_CAPACITY, "out of memory");
        cli_report(path, &err);
        return false;
    }
    for (int i = 0; i < v->t.n_notes; i++) fprintf(stderr, "note: %s: %s\n", path, v->t.notes[i]);
    return true;
}

typedef struct progress {
    const char *path;
    double start, last;
    bool tty;
    int last_tenth;
} progress;

static void show_progress(void *user, uint64_t done, uint64_t total) {
    progress *p = user;
    double now = cli_now();
    int tenth = total ? (int)(done * 10 / total) : 10;
    char a[32], b[32];
    if (p->tty) {
        if (now - p->last < 0.2 && done < total) return;
        fprintf(stderr, "\rwriting %s: %3d%% (%s of %s, %.0f s)", p->path, total ? (int)(done * 100 / total) : 100,
                cli_human_bytes(a, sizeof a, (size_t)done), cli_human_bytes(b, sizeof b, (size_t)total), now - p->start);
        if (done == total) fputc('\n', stderr);
    } else if (tenth != p->last_tenth && tenth > 0) { /* logs: one line per tenth */
        fprintf(stderr, "writing %s: %d%% (%.0f s)\n", p->path, tenth * 10, now - p->start);
        p->last_tenth = tenth;
    }
    p->last = now;
}

static void list_shapes(FILE *out) {
    int n;
    const wisp_model_shape *s = wisp_model_shapes(&n);
    for (int i = 0; i < n; i++) {
        fprintf(out, "  %-16s %s: %s, %d layers, dim %d, %d heads (%d kv)", s[i].name, s[i].label, s[i].arch,
                s[i].n_layers, s[i].dim, s[i].n_heads, s[i].n_kv_heads);
        if (s[i].head_dim) fprintf(out, ", head %d", s[i].head_dim);
        fprintf(out, ", ffn %d, vocab %d%s%s", s[i].ffn_dim, s[i].n_vocab, s[i].tied_output ? ", tied output" : "",
                s[i].qkv_bias ? ", q/k/v biases" : "");
        if (s[i].window) fprintf(out, ", window %d", s[i].window);
        if (s[i].rope_freqs) fprintf(out, ", rope_freqs");
        fputc('\n', out);
    }
}

int cmd_make_model(int argc, char **argv) {
    const char *like = NULL, *type_name = NULL, *out = NULL, *tokenizer = NULL, *vocab_from = NULL, *name = NULL;
    uint64_t seed = 1;
    int32_t threads = 0, layers = 0;
    const cli_opt opts[] = {
        {"like", 0, OPT_STR, &like, "SHAPE", "smollm2-135m, tinyllama-1.1b, qwen2.5-0.5b, llama-3.2-1b, qwen3-0.6b, gemma-3-270m, gemma-3-1b or phi-3-mini"},
        {"type", 0, OPT_STR, &type_name, "TYPE",
         "weight type: f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_k q3_k q4_k q5_k q6_k iq4_nl, or q4_k_m / q5_k_m"},
        {"output", 'o', OPT_STR, &out, "OUT.gguf", "where to write the model (replaced only on success)"},
        {"tokenizer", 0, OPT_STR, &tokenizer, "tokenizer.json", "carry this Hugging Face tokenizer"},
        {"vocab-from", 0, OPT_STR, &vocab_from, "GGUF", "copy the tokenizer.* metadata of this GGUF"},
        {"seed", 's', OPT_U64, &seed, "S", "random seed; the same seed gives the same file"},
        {"name", 0, OPT_STR, &name, "NAME", "general.name to record (default: the shape's name)"},
        {"threads", 't', OPT_INT, &threads, "N", "quantize with N threads; 0: online CPUs, at most 8"},
        {"layers", 0, OPT_INT, &layers, "N", "keep only the first N layers (quick tests); 0: all of the shape's"},
    };
    const cli_command cmd = {
        "make-model", "--like SHAPE --type TYPE -o OUT.gguf [options]",
        "Write a random-weight model with the exact shape of a published one, for benchmarks: weights are\n"
        "approximately normal (std 0.02, norms near 1) and quantized with wisp's reference quantizers.\n"
        "wisp and llama.cpp both load the result. --tokenizer reads a Hugging Face tokenizer.json (and the\n"
        "tokenizer_config.json beside it, if any); without it or --vocab-from the vocabulary is a\n"
        "synthetic SentencePiece-style one of the shape's size (fine for speed work, meaningless as text).\n"
        "Types are chosen per tensor as `wisp quantize` chooses them: rows that are not a whole number of\n"
        "blocks of TYPE fall back as llama.cpp's quantizer does (Q4_K -> Q5_0, Q6_K -> Q8_0, ...).",
        "Example: wisp make-model --like smollm2-135m --type q4_0 -o smollm2-q4_0.gguf \\\n"
        "           --tokenizer ../shared/models/tokenizers/smollm2/tokenizer.json",
        opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;

    const wisp_model_shape *shape = wisp_model_shape_find(like);
    if (!shape) {
        fprintf(stderr, "wisp make-model: %s%s; known shapes:\n", like ? "unknown shape " : "missing --like SHAPE",
                like ? like : "");
        list_shapes(stderr);
        return CLI_USAGE;
    }
    wisp_qtarget target;
    if (!type_name || !wisp_qtarget_parse(type_name, &target) || target.recipe == WISP_QRECIPE_KEEP) {
        fprintf(stderr, "wisp make-model: %s%s (one of: %s)\n", type_name ? "unknown weight type " : "missing --type TYPE",
                type_name ? type_name : "", wisp_qtarget_names);
        return CLI_USAGE;
    }
    if (!out) {
        fprintf(stderr, "wisp make-model: missing -o OUT.gguf\n");
        return CLI_USAGE;
    }
    if (tokenizer && vocab_from) {
        fprintf(stderr, "wisp make-model: give --tokenizer or --vocab-from, not both\n");
        return CLI_USAGE;
    }
    if (threads < 0 || layers < 0) {
        fprintf(stderr, "wisp make-model: --threads and --layers must not be negative\n");
        return CLI_USAGE;
    }
    wisp_model_shape cut;
    if (layers) {
        cut = *shape;
        if (layers < cut.n_layers) cut.n_layers = layers;
        shape = &cut;
    }

    wisp_model_gen g;
    memset(&g, 0, sizeof g);
    g.shape = shape;
    g.target = target;
    g.seed = seed;
    g.name = name;
    int32_t synth_n = shape->n_vocab;
    cli_file vf = {0};
    wisp_gguf vg;
    hf_vocab *hf = NULL;
    if (tokenizer) {
        if (!(hf = malloc(sizeof *hf))) return CLI_FAIL;
        if (!hf_vocab_open(hf, tokenizer, shape->n_vocab)) {
            hf_vocab_close(hf);
            free(hf);
            return CLI_FAIL;
        }
        g.n_vocab = hf->t.n_vocab;
        g.vocab_kv = wisp_hf_tokenizer_kv_count(&hf->t);
        g.write_vocab = write_hf_vocab;
        g.vocab_user = hf;
        if (g.n_vocab != shape->n_vocab)
            fprintf(stderr, "note: %s has %d tokens; %s has %d; the embedding gets %d rows\n", tokenizer, g.n_vocab,
                    shape->label, shape->n_vocab, g.n_vocab);
    } else if (vocab_from) {
        if (!cli_open_gguf(&vf, &vg, vocab_from)) return CLI_FAIL;
        wisp_gguf_kv tokens;
        if (!wisp_gguf_find_kv(&vg, "tokenizer.ggml.tokens", &tokens) || tokens.type != WISP_GGUF_ARRAY ||
            tokens.count < 1 || tokens.count > INT32_MAX) {
            fprintf(stderr, "wisp: %s: has no tokenizer.ggml.tokens array to copy\n", vocab_from);
            cli_file_close(&vf);
            return CLI_FAIL;
        }
        g.n_vocab = (int32_t)tokens.count;
        g.vocab_kv = wisp_gguf_vocab_kv_count(&vg);
        g.write_vocab = wisp_gguf_vocab_copy_write;
        g.vocab_user = &vg;
        if (g.n_vocab != shape->n_vocab)
            fprintf(stderr, "note: %s has %d tokens; %s has %d; the embedding gets %d rows\n", vocab_from, g.n_vocab,
                    shape->label, shape->n_vocab, g.n_vocab);
    } else {
        g.n_vocab = synth_n;
        g.vocab_kv = WISP_SYNTHETIC_VOCAB_KV;
        g.write_vocab = wisp_synthetic_vocab_write;
        g.vocab_user = &synth_n;
    }

    int n_threads = threads ? threads : cli_default_threads();
    cli_pool *pool = n_threads > 1 ? cli_pool_create(n_threads) : NULL;
    if (n_threads > 1 && !pool) {
        fprintf(stderr, "wisp make-model: could not start %d threads\n", n_threads);
        if (vf.data) cli_file_close(&vf);
        if (hf) hf_vocab_close(hf);
        free(hf);
        return CLI_FAIL;
    }
    g.threads = cli_pool_threads(pool);
    progress pr = {out, cli_now(), 0.0, isatty(2) != 0, -1};
    g.progress = show_progress;
    g.progress_user = &pr;

    int status = CLI_FAIL;
    size_t scratch_bytes = wisp_model_gen_scratch_bytes(&g);
    void *scratch = malloc(scratch_bytes);
    cli_atomic_file af;
    if (!scratch) {
        fprintf(stderr, "wisp make-model: cannot allocate %zu bytes of scratch\n", scratch_bytes);
    } else if (cli_atomic_open(&af, out)) {
        wisp_error err = {0};
        if (wisp_model_gen_write(&g, &af.sink, scratch, scratch_bytes, &err)) {
            if (pr.tty) fputc('\n', stderr);
            cli_report(out, &err);
            cli_atomic_abort(&af);
        } else if (cli_atomic_commit(&af)) {
            char h[32];
            int32_t fb = wisp_model_gen_fallbacks(&g);
            char upper[16];
            size_t k = 0;
            for (; type_name[k] && k + 1 < sizeof upper; k++) upper[k] = (char)toupper((unsigned char)type_name[k]);
            upper[k] = 0;
            fprintf(stderr, "wrote %s: %s-shaped %s, %s, %.1f s", out, shape->label, upper,
                    cli_human_bytes(h, sizeof h, (size_t)af.sink.written), cli_now() - pr.start);
            if (fb) fprintf(stderr, " (%d tensors fell back to another type: rows not a whole number of blocks)", fb);
            fputc('\n', stderr);
            status = CLI_OK;
        }
    }
    free(scratch);
    cli_pool_destroy(pool);
    if (vf.data) cli_file_close(&vf);
    if (hf) hf_vocab_close(hf);
    free(hf);
    return status;
}
