/* wisp lora-grad: one forward and backward pass with a given LoRA adapter,
 * printing the loss and the gradients of A and B in the schema of the
 * reference files (../shared/golden/grad/NAME.json), so this engine can be
 * checked against any implementation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "json.h"
#include "json_out.h"
#include "session.h"

typedef struct grad_input {
    cli_file file;
    wisp_json json;
    wisp_json_node *nodes;
    int32_t *tokens;
    int32_t n_tokens, rank;
    double alpha, scale;
    wisp_lora_pair *pairs;
    float *values;
    int32_t n_pairs;
    uint32_t targets;
} grad_input;

static bool fail_input(const char *path, const char *what) {
    fprintf(stderr, "wisp lora-grad: %s: %s\n", path, what);
    return false;
}

/* rows x cols numbers of a JSON array of arrays into dst */
static bool read_matrix(const wisp_json *j, int64_t node, int32_t rows, int32_t cols, float *dst) {
    if (node < 0 || !wisp_json_is(j, node, WISP_JSON_ARRAY) || j->nodes[node].count != (uint32_t)rows) return false;
    int64_t r = wisp_json_first(j, node);
    for (int32_t i = 0; i < rows; i++, r = wisp_json_next(j, r)) {
        if (r < 0 || !wisp_json_is(j, r, WISP_JSON_ARRAY) || j->nodes[r].count != (uint32_t)cols) return false;
        int64_t c = wisp_json_first(j, r);
        for (int32_t k = 0; k < cols; k++, c = wisp_json_next(j, c)) {
            double v;
            if (c < 0 || !wisp_json_number(j, c, &v) || !isfinite(v)) return false;
            dst[(size_t)i * cols + k] = (float)v;
        }
    }
    return true;
}

/* "blk.N.attn_q" (".weight" optional) -> layer, proj */
static bool parse_name(const char *name, int32_t *layer, int *proj) {
    if (strncmp(name, "blk.", 4) != 0) return false;
    char *end;
    long l = strtol(name + 4, &end, 10);
    if (end == name + 4 || *end != '.' || l < 0 || l > 100000) return false;
    const char *p = end + 1, *dot = strchr(p, '.');
    size_t len = dot ? (size_t)(dot - p) : strlen(p);
    if (dot && strcmp(dot, ".weight") != 0) return false;
    *layer = (int32_t)l;
    *proj = wisp_proj_from_name(p, len);
    return *proj >= 0;
}

static bool read_input(grad_input *in, const char *path, const wisp_hparams *hp) {
    memset(in, 0, sizeof *in);
    if (!cli_file_open(&in->file, path)) return false;
    wisp_error err = {0};
    size_t need = 0;
    wisp_json_parse(&in->json, (const char *)in->file.data, in->file.size, NULL, 0, &need, &err);
    in->nodes = malloc(sizeof(wisp_json_node) * (need ? need : 1));
    if (!in->nodes) return fail_input(path, "out of memory");
    if (wisp_json_parse(&in->json, (const char *)in->file.data, in->file.size, in->nodes, need, NULL, &err)) {
        fprintf(stderr, "wisp lora-grad: %s: %s\n", path, err.message);
        return false;
    }
    const wisp_json *j = &in->json;
    int64_t tok = wisp_json_get(j, 0, "tokens"), lora = wisp_json_get(j, 0, "lora");
    int64_t rank;
    if (tok < 0 || !wisp_json_is(j, tok, WISP_JSON_ARRAY) || j->nodes[tok].count < 2)
        return fail_input(path, "'tokens' must be an array of at least 2 token ids");
    if (!wisp_json_int(j, wisp_json_get(j, 0, "rank"), &rank) || rank < 1 || rank > 4096)
        return fail_input(path, "'rank' must be an integer in 1..4096");
    if (!wisp_json_number(j, wisp_json_get(j, 0, "scale"), &in->scale) || !isfinite(in->scale))
        return fail_input(path, "'scale' (alpha / rank) must be a number");
    if (!wisp_json_number(j, wisp_json_get(j, 0, "alpha"), &in->alpha)) in->alpha = in->scale * (double)rank;
    if (lora < 0 || !wisp_json_is(j, lora, WISP_JSON_OBJECT) || j->nodes[lora].count == 0)
        return fail_input(path, "'lora' must be an object of {name: {A, B}}");
    in->rank = (int32_t)rank;
    in->n_tokens = (int32_t)j->nodes[tok].count;
    in->tokens = malloc(sizeof(int32_t) * (size_t)in->n_tokens);
    in->n_pairs = (int32_t)(j->nodes[lora].count / 2);
    in->pairs = calloc((size_t)in->n_pairs, sizeof(wisp_lora_pair));
    for (int64_t k = wisp_json_first(j, lora); k >= 0; k = wisp_json_next(j, wisp_json_next(j, k))) {
        char name[128];
        int32_t layer;
        int proj;
        wisp_json_string(j, k, name, sizeof name);
        if (!parse_name(name, &layer, &proj) || layer >= hp->n_layers) {
            fprintf(stderr, "wisp lora-grad: %s: '%s' is not a projection of this model (blk.N.attn_q ... ffn_down)\n",
                    path, name);
            return false;
        }
        in->targets |= 1u << proj;
    }
    if (!in->tokens || !in->pairs) return fail_input(path, "out of memory");
    int64_t t = wisp_json_first(j, tok);
    for (int32_t i = 0; i < in->n_tokens; i++, t = wisp_json_next(j, t)) {
        int64_t v;
        if (!wisp_json_int(j, t, &v) || v < 0 || v >= hp->n_vocab) return fail_input(path, "a token id is outside the vocabulary");
        in->tokens[i] = (int32_t)v;
    }
    return true;
}

static void free_input(grad_input *in) {
    free(in->values);
    free(in->pairs);
    free(in->tokens);
    free(in->nodes);
    if (in->file.data) cli_file_close(&in->file);
}

/* The pairs' A and B from the JSON, shaped by the model's weights. */
static bool read_pairs(grad_input *in, const char *path, const wisp_model *m) {
    const wisp_json *j = &in->json;
    int64_t lora = wisp_json_get(j, 0, "lora");
    size_t total = 0;
    int32_t i = 0;
    for (int64_t k = wisp_json_first(j, lora); k >= 0; k = wisp_json_next(j, wisp_json_next(j, k)), i++) {
        char name[128];
        wisp_json_string(j, k, name, sizeof name);
        wisp_lora_pair *p = &in->pairs[i];
        int proj;
        parse_name(name, &p->layer, &proj);
        const wisp_weight *w = &m->layers[p->layer].proj[proj];
        p->proj = proj, p->rank = in->rank, p->n_in = w->cols, p->n_out = w->rows, p->type = WISP_TYPE_F32;
        p->alpha = (float)in->alpha, p->scale = (float)in->scale;
        total += (size_t)in->rank * ((size_t)w->cols + (size_t)w->rows);
    }
    in->values = malloc(sizeof(float) * (total ? total : 1));
    if (!in->values) return fail_input(path, "out of memory");
    float *v = in->values;
    i = 0;
    for (int64_t k = wisp_json_first(j, lora); k >= 0; k = wisp_json_next(j, wisp_json_next(j, k)), i++) {
        wisp_lora_pair *p = &in->pairs[i];
        int64_t val = wisp_json_next(j, k);
        char name[128];
        wisp_json_string(j, k, name, sizeof name);
        if (!read_matrix(j, wisp_json_get(j, val, "A"), p->rank, p->n_in, v) ||
            !read_matrix(j, wisp_json_get(j, val, "B"), p->n_out, p->rank, v + (size_t)p->rank * p->n_in)) {
            fprintf(stderr, "wisp lora-grad: %s: %s: A must be %d x %d and B %d x %d numbers\n", path, name, p->rank,
                    p->n_in, p->n_out, p->rank);
            return false;
        }
        p->a = v;
        p->b = v + (size_t)p->rank * p->n_in;
        v += (size_t)p->rank * ((size_t)p->n_in + (size_t)p->n_out);
    }
    return true;
}

/* rows x cols floats times `factor` as an array of arrays */
static void print_matrix(const float *m, int32_t rows, int32_t cols, float factor) {
    fputc('[', stdout);
    for (int32_t r = 0; r < rows; r++) {
        fputs(r ? ", [" : "[", stdout);
        for (int32_t c = 0; c < cols; c++) {
            if (c) fputs(", ", stdout);
            cli_json_float(stdout, m[(size_t)r * cols + c] * factor);
        }
        fputc(']', stdout);
    }
    fputc(']', stdout);
}

static void print_result(const char *model, const grad_input *in, const wisp_lora *lora, const wisp_lora *grads,
                         float grad_factor, double loss) {
    const char *base = strrchr(model, '/');
    base = base ? base + 1 : model;
    printf("{\"model\": ");
    cli_json_string(stdout, base, strlen(base));
    printf(", \"tokens\": ");
    cli_json_ints(stdout, in->tokens, (size_t)in->n_tokens);
    printf(", \"rank\": %d, \"alpha\": %.9g, \"scale\": %.9g,\n \"loss\": %.17g,\n \"lora\": {", in->rank, in->alpha,
           in->scale, loss);
    for (int32_t i = 0; i < in->n_pairs; i++) {
        const wisp_lora_pair *want = &in->pairs[i];
        for (int32_t k = 0; k < lora->n_pairs; k++) {
            const wisp_lora_pair *p = &lora->pairs[k], *g = &grads->pairs[k];
            if (p->layer != want->layer || p->proj != want->proj) continue;
            printf("%s\n  \"blk.%d.%s\": {\"A\": ", i ? "," : "", p->layer, wisp_proj_gguf_name(p->proj));
            print_matrix(p->a, p->rank, p->n_in, 1.0f);
            printf(",\n   \"B\": ");
            print_matrix(p->b, p->n_out, p->rank, 1.0f);
            printf(",\n   \"dA\": ");
            print_matrix(g->a, p->rank, p->n_in, grad_factor);
            printf(",\n   \"dB\": ");
            print_matrix(g->b, p->n_out, p->rank, grad_factor);
            printf("}");
        }
    }
    printf("}}\n");
}

int cmd_lora_grad(int argc, char **argv) {
    cli_model_opts mo;
    cli_model_opts_default(&mo);
    const char *init = NULL, *act_dtype = "f32";
    bool json = false, checkpointing = false;
    const cli_opt opts[] = {
        {"model", 'm', OPT_STR, &mo.model, "PATH", "GGUF base model"},
        {"init", 0, OPT_STR, &init, "FILE.json", "tokens, rank, alpha/scale and A, B per tensor (golden/grad schema)"},
        {"json", 0, OPT_FLAG, &json, NULL, "JSON output (the only format; required for clarity)"},
        {"threads", 't', OPT_INT, &mo.threads, "N", "worker threads; 0: online CPUs, at most 8"},
        {"act-dtype", 0, OPT_STR, &act_dtype, "f32|bf16|f16", "type of the activations saved for the backward pass"},
        {"checkpointing", 0, OPT_FLAG, &checkpointing, NULL, "recompute each layer during the backward pass"},
        {"arena", 0, OPT_SIZE, &mo.arena, "BYTES", "use exactly one arena of this size (default: the plan)"},
    };
    const cli_command cmd = {
        "lora-grad", "-m MODEL --init FILE.json --json",
        "Run one forward and backward pass of MODEL with the LoRA adapter in FILE.json on its tokens and\n"
        "print the mean cross-entropy of tokens[1:] given tokens[:-1] and the gradients dA, dB of every\n"
        "tensor, in the schema of ../shared/golden/grad/*.json:\n"
        "{model, tokens, rank, alpha, scale, loss, lora: {\"blk.N.attn_q\": {A, B, dA, dB}, ...}}.\n"
        "A is (rank x in) and B (out x rank), PEFT's orientation; y = W x + scale * B (A x).",
        NULL, opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    if (!json || !init || !mo.model) {
        fprintf(stderr, "wisp lora-grad: needs -m MODEL, --init FILE.json and --json\n(see: wisp lora-grad --help)\n");
        return CLI_USAGE;
    }
    int32_t act_type = strcmp(act_dtype, "f32") == 0    ? WISP_TYPE_F32
                       : strcmp(act_dtype, "bf16") == 0 ? WISP_TYPE_BF16
                       : strcmp(act_dtype, "f16") == 0  ? WISP_TYPE_F16
                                                        : -1;
    if (act_type < 0) {
        fprintf(stderr, "wisp lora-grad: --act-dtype must be f32, bf16 or f16\n");
        return CLI_USAGE;
    }
    /* the header first: the model's shapes check the file */
    cli_file mf;
    wisp_gguf g;
    if (!cli_open_gguf(&mf, &g, mo.model)) return CLI_FAIL;
    wisp_hparams hp;
    wisp_error err = {0};
    if (wisp_hparams_read(&g, &hp, &err)) {
        cli_report(mo.model, &err);
        cli_file_close(&mf);
        return CLI_FAIL;
    }
    cli_file_close(&mf);
    grad_input in;
    if (!read_input(&in, init, &hp)) {
        free_input(&in);
        return CLI_FAIL;
    }
    wisp_config cfg = wisp_config_default();
    cfg.n_ctx = in.n_tokens;
    cfg.kv_type = WISP_TYPE_F32;
    cfg.train.seq_len = in.n_tokens - 1;
    cfg.train.rank = in.rank;
    cfg.train.alpha = (float)(in.scale * in.rank); /* the file's scale is what the reference applied */
    cfg.train.act_type = act_type;
    cfg.train.checkpointing = checkpointing;
    mo.ctx = in.n_tokens;
    /* every projection the file names; pairs it lacks train from B = 0 and are not printed */
    cfg.train.targets = in.targets;
    mo.kv_type = "f32";
    cli_session s;
    if (!cli_session_open(&s, &mo, &cfg)) {
        free_input(&in);
        return CLI_FAIL;
    }
    int ok = read_pairs(&in, init, wisp_ctx_model(s.ctx));
    wisp_lora src = {in.pairs, in.n_pairs, in.rank, false};
    double loss = 0;
    int32_t n_scored = 0;
    wisp_status st = ok ? wisp_train_set_lora(s.ctx, &src, &err) : WISP_ERR_FORMAT;
    if (ok && !st) st = wisp_train_micro_step(s.ctx, in.tokens, NULL, 1, &loss, &n_scored, &err);
    if (ok && st) cli_report("lora-grad", &err);
    if (!st) print_result(mo.model, &in, wisp_train_lora(s.ctx), wisp_train_gradients(s.ctx),
                          1.0f / wisp_train_loss_scale(s.ctx), loss);
    cli_session_close(&s);
    free_input(&in);
    return st ? CLI_FAIL : CLI_OK;
}
