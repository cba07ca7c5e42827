#include "finetune_settings.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "file_map.h"
#include "json.h"
#include "model.h"

typedef enum { K_STR, K_FLOAT, K_INT, K_I64, K_U64, K_BOOL } kind;

typedef struct setting {
    const char *key;
    kind k;
    size_t offset;
    bool optional; /* added after runs were saved without it: missing keeps the default */
} setting;

#define F(key, k, field) {key, k, offsetof(ft_settings, field), false}
#define NEW(key, k, field) {key, k, offsetof(ft_settings, field), true}
static const setting table[] = {
    F("model", K_STR, model),           F("data", K_STR, data),
    F("val", K_STR, val),               F("val_split", K_FLOAT, val_split),
    F("format", K_STR, format),         F("docs", K_STR, docs),
    F("rank", K_INT, rank),             F("alpha", K_FLOAT, alpha),
    F("rslora", K_BOOL, rslora),        F("lora_dropout", K_FLOAT, dropout),
    F("targets", K_STR, targets),       F("ctx", K_INT, ctx),
    F("batch", K_INT, batch),           F("accum", K_INT, accum),
    F("optimizer", K_STR, optimizer),   F("lr", K_FLOAT, lr),
    F("beta1", K_FLOAT, beta1),         F("beta2", K_FLOAT, beta2),
    F("eps", K_FLOAT, eps),             F("weight_decay", K_FLOAT, weight_decay),
    F("momentum", K_FLOAT, momentum),   F("schedule", K_STR, schedule),
    F("warmup", K_INT, warmup),         F("min_lr_ratio", K_FLOAT, min_lr_ratio),
    F("steps", K_I64, steps),           F("epochs", K_FLOAT, epochs),
    F("clip", K_FLOAT, clip),           F("seed", K_U64, seed),
    F("act_dtype", K_STR, act_dtype),   F("checkpointing", K_BOOL, checkpointing),
    F("loss_chunk", K_INT, loss_chunk), F("loss_scale", K_FLOAT, loss_scale),
    F("eval_every", K_INT, eval_every), F("eval_windows", K_INT, eval_windows),
    F("checkpoint_every", K_INT, checkpoint_every),
    NEW("method", K_STR, method),       NEW("beta", K_FLOAT, beta),
    NEW("label_smoothing", K_FLOAT, label_smoothing), NEW("loss_type", K_STR, loss_type),
    NEW("loss_scale_hysteresis", K_INT, loss_scale_hysteresis), NEW("min_loss_scale", K_FLOAT, min_loss_scale),
    NEW("num_virtual_tokens", K_INT, num_virtual_tokens), NEW("prompt_init_text", K_STR, prompt_init_text),
    NEW("packing", K_BOOL, packing),    NEW("chat_template", K_STR, chat_template),
    NEW("prefix_projection", K_BOOL, prefix_projection), NEW("encoder_hidden_size", K_INT, encoder_hidden_size),
};
#undef F
#undef NEW
#define N_SETTINGS (sizeof table / sizeof table[0])

void ft_settings_default(ft_settings *s) {
    memset(s, 0, sizeof *s);
    s->format = "auto", s->docs = "file", s->targets = "all", s->schedule = "cosine", s->optimizer = "adamw";
    s->act_dtype = "f32", s->method = "lora", s->loss_type = "sigmoid", s->beta = 0.1f;
    s->rank = 8, s->ctx = 256, s->batch = 4, s->accum = 1, s->warmup = -1, s->lr = 1e-3f, s->epochs = 0;
    s->eval_every = 0, s->checkpoint_every = 0, s->seed = 42, s->clip = 1.0f;
    s->num_virtual_tokens = 8; /* PEFT has no default (it is required); its prompt-tuning guide uses 8 */
}

uint32_t ft_parse_targets(const char *list) {
    if (strcmp(list, "all") == 0) return WISP_TARGETS_ALL;
    uint32_t mask = 0;
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        int proj = wisp_proj_from_name(p, n);
        if (proj < 0) return 0;
        mask |= 1u << proj;
        p += n + (e != NULL);
    }
    return mask;
}

static int pick(const char *what, const char *value, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(value, names[i]) == 0) return i;
    fprintf(stderr, "wisp finetune: --%s must be one of:", what);
    for (int i = 0; i < n; i++) fprintf(stderr, " %s", names[i]);
    fprintf(stderr, " (got '%s')\n", value);
    return -1;
}

/* --method: one row per training method; a new method is a new row. */
typedef struct ft_method {
    const char *name;
    bool implemented;  /* the methods of PEFT/trl `--method` names but wisp has not built are refused by name */
    bool rslora;       /* scale alpha / sqrt(rank) */
    bool dora;         /* a learned magnitude per output row times the direction of W + BA */
    bool prompt;       /* prompt tuning: learned input embeddings, no LoRA pairs */
    bool prefix;       /* prefix tuning: learned keys and values of every layer, no LoRA pairs */
    int32_t objective; /* wisp_train_objective */
    int32_t seqs_per_example; /* sequences a --batch example contributes to the micro-batch */
} ft_method;

static const ft_method methods[] = {
    {"lora", true, false, false, false, false, WISP_OBJECTIVE_CAUSAL_LM, 1},
    {"rslora", true, true, false, false, false, WISP_OBJECTIVE_CAUSAL_LM, 1},
    {"dora", true, false, true, false, false, WISP_OBJECTIVE_CAUSAL_LM, 1},
    {"prompt", true, false, false, true, false, WISP_OBJECTIVE_CAUSAL_LM, 1},
    {"prefix", true, false, false, false, true, WISP_OBJECTIVE_CAUSAL_LM, 1},
    {"dpo", true, false, false, false, false, WISP_OBJECTIVE_DPO, 2}, /* a chosen and a rejected answer per pair */
};
#define N_METHODS (sizeof methods / sizeof methods[0])

bool ft_method_is_dpo(const ft_settings *s) { return s->method && strcmp(s->method, "dpo") == 0; }
bool ft_method_is_prompt(const ft_settings *s) { return s->method && strcmp(s->method, "prompt") == 0; }
bool ft_method_is_prefix(const ft_settings *s) { return s->method && strcmp(s->method, "prefix") == 0; }
bool ft_method_is_virtual(const ft_settings *s) { return ft_method_is_prompt(s) || ft_method_is_prefix(s); }

bool ft_settings_to_config(const ft_settings *s, wisp_train_config *c) {
    static const char *const schedules[] = {"constant", "cosine", "linear", "1cycle"};
    static const char *const optimizers[] = {"adamw", "sgd"};
    static const char *const dtypes[] = {"f32", "bf16", "f16"};
    static const int32_t dtype_ids[] = {WISP_TYPE_F32, WISP_TYPE_BF16, WISP_TYPE_F16};
    memset(c, 0, sizeof *c);
    int sched = pick("schedule", s->schedule, schedules, 4), opt = pick("optimizer", s->optimizer, optimizers, 2);
    int dt = pick("act-dtype", s->act_dtype, dtypes, 3);
    const char *method_names[N_METHODS];
    for (size_t i = 0; i < N_METHODS; i++) method_names[i] = methods[i].name;
    static const char *const loss_types[] = {"sigmoid", "ipo"};
    static const int32_t loss_ids[] = {WISP_DPO_SIGMOID, WISP_DPO_IPO};
    int me = pick("method", s->method ? s->method : "lora", method_names, (int)N_METHODS);
    int lt = pick("loss-type", s->loss_type ? s->loss_type : "sigmoid", loss_types, 2);
    if (sched < 0 || opt < 0 || dt < 0 || me < 0 || lt < 0) return false;
    const ft_method *m = &methods[me];
    if (!m->implemented) {
        fprintf(stderr, "wisp finetune: method '%s' is not implemented yet\n", m->name);
        return false;
    }
    if (m->objective != WISP_OBJECTIVE_DPO && (s->label_smoothing != 0 || strcmp(s->loss_type, "sigmoid") != 0)) {
        fprintf(stderr, "wisp finetune: --label-smoothing and --loss-type belong to --method dpo\n");
        return false;
    }
    c->targets = ft_parse_targets(s->targets);
    if (!c->targets) {
        fprintf(stderr, "wisp finetune: --targets '%s': use 'all' or a comma-separated list of attn_q, attn_k, attn_v, "
                        "attn_output, ffn_gate, ffn_up, ffn_down (or q_proj ... down_proj)\n", s->targets);
        return false;
    }
    bool virt = m->prompt || m->prefix; /* the methods of learned virtual positions */
    if (!virt && (s->prompt_init_text || s->num_virtual_tokens != 8)) {
        fprintf(stderr, "wisp finetune: --num-virtual-tokens and --prompt-init-text belong to --method prompt "
                        "(--num-virtual-tokens also to --method prefix)\n");
        return false;
    }
    if (m->prefix && s->prompt_init_text) {
        fprintf(stderr, "wisp finetune: --prompt-init-text belongs to --method prompt (PEFT's prefix tuning has no "
                        "text init)\n");
        return false;
    }
    if (!m->prefix && (s->prefix_projection || s->encoder_hidden_size)) {
        fprintf(stderr, "wisp finetune: --prefix-projection and --encoder-hidden-size belong to --method prefix\n");
        return false;
    }
    if (s->encoder_hidden_size && !s->prefix_projection) {
        fprintf(stderr, "wisp finetune: --encoder-hidden-size is the width of --prefix-projection's MLP\n");
        return false;
    }
    if (s->encoder_hidden_size < 0 || s->encoder_hidden_size > 65536) {
        fprintf(stderr, "wisp finetune: --encoder-hidden-size must be in 1..65536\n");
        return false;
    }
    if (virt && (s->num_virtual_tokens < 1 || s->num_virtual_tokens > 4096)) {
        fprintf(stderr, "wisp finetune: --num-virtual-tokens must be in 1..4096\n");
        return false;
    }
    /* alpha: 0 as given, or its resolved default 2 x rank as a saved run's config.json holds it */
    bool alpha_set = s->alpha != 0 && s->alpha != 2.0f * (float)s->rank;
    if (virt && (s->dropout > 0 || s->rslora || strcmp(s->targets, "all") != 0 || s->rank != 8 || alpha_set)) {
        fprintf(stderr, "wisp finetune: --rank, --alpha, --lora-dropout, --rslora and --targets are LoRA settings; "
                        "--method %s trains only the virtual tokens\n", m->name);
        return false;
    }
    if (s->ctx < 1 || s->batch < 1 || s->accum < 1 || s->rank < 1) {
        fprintf(stderr, "wisp finetune: --ctx, --batch, --accum and --rank must be positive\n");
        return false;
    }
    if (s->batch > 4096 / m->seqs_per_example) {
        fprintf(stderr, "wisp finetune: --batch %d is too large\n", s->batch);
        return false;
    }
    c->seq_len = s->ctx, c->micro_batch = s->batch * m->seqs_per_example, c->rank = s->rank, c->alpha = s->alpha;
    c->rslora = s->rslora || m->rslora, c->dora = m->dora;
    c->virtual_tokens = virt ? s->num_virtual_tokens : 0, c->prefix = m->prefix;
    c->prefix_projection = s->prefix_projection, c->encoder_hidden_size = s->encoder_hidden_size;
    c->objective = m->objective, c->dpo_beta = s->beta, c->dpo_label_smoothing = s->label_smoothing;
    c->dpo_loss = loss_ids[lt];
    c->loss_scale_hysteresis = s->loss_scale_hysteresis, c->min_loss_scale = s->min_loss_scale;
    c->dropout = s->dropout, c->seed = s->seed, c->optimizer = opt, c->lr = s->lr, c->beta1 = s->beta1;
    c->beta2 = s->beta2, c->eps = s->eps, c->weight_decay = s->weight_decay, c->momentum = s->momentum;
    c->schedule = sched, c->warmup_steps = s->warmup < 0 ? 0 : s->warmup, c->total_steps = s->steps;
    c->min_lr_ratio = s->min_lr_ratio, c->clip_norm = s->clip, c->act_type = dtype_ids[dt];
    c->checkpointing = s->checkpointing, c->loss_chunk = s->loss_chunk, c->loss_scale = s->loss_scale;
    return true;
}

void ft_settings_from_resolved(ft_settings *s, const wisp_train_config *c) {
    s->alpha = c->alpha, s->lr = c->lr, s->beta1 = c->beta1, s->beta2 = c->beta2, s->eps = c->eps;
    s->momentum = c->momentum, s->loss_chunk = c->loss_chunk, s->loss_scale = c->loss_scale;
    s->warmup = c->warmup_steps, s->beta = c->dpo_beta;
    s->loss_scale_hysteresis = c->loss_scale_hysteresis, s->min_loss_scale = c->min_loss_scale;
}

static void *field_of(const ft_settings *s, const setting *t) { return (char *)(uintptr_t)s + t->offset; }

bool ft_settings_write(const ft_settings *s, const char *extra, const char *path) {
    char *buf = NULL;
    size_t cap = 0;
    FILE *f = open_memstream(&buf, &cap);
    if (!f) return false;
    fprintf(f, "{\n  \"wisp_version\": \"%s\"", WISP_VERSION);
    for (size_t i = 0; i < N_SETTINGS; i++) {
        const setting *t = &table[i];
        const void *p = field_of(s, t);
        fprintf(f, ",\n  \"%s\": ", t->key);
        switch (t->k) {
        case K_STR: {
            const char *v = *(const char *const *)p;
            if (!v) {
                fputs("null", f);
                break;
            }
            fputc('"', f);
            for (; *v; v++)
                if (*v == '"' || *v == '\\') fprintf(f, "\\%c", *v);
                else if ((unsigned char)*v < 0x20) fprintf(f, "\\u%04x", *v);
                else fputc(*v, f);
            fputc('"', f);
            break;
        }
        case K_FLOAT: fprintf(f, "%.9g", (double)*(const float *)p); break;
        case K_INT: fprintf(f, "%d", *(const int32_t *)p); break;
        case K_I64: fprintf(f, "%lld", (long long)*(const int64_t *)p); break;
        case K_U64: fprintf(f, "%llu", (unsigned long long)*(const uint64_t *)p); break;
        case K_BOOL: fputs(*(const bool *)p ? "true" : "false", f); break;
        }
    }
    if (extra && *extra) fprintf(f, ",\n  %s", extra);
    fputs("\n}\n", f);
    fclose(f);
    bool ok = cli_write_file_atomic(path, buf, strlen(buf));
    free(buf);
    return ok;
}

bool ft_settings_read(ft_settings *s, const char *path) {
    cli_file file;
    if (!cli_file_open(&file, path)) return false;
    wisp_json j;
    wisp_error err = {0};
    size_t need = 0;
    wisp_json_parse(&j, (const char *)file.data, file.size, NULL, 0, &need, &err);
    wisp_json_node *nodes = need ? malloc(need * sizeof *nodes) : NULL;
    bool ok = nodes && !wisp_json_parse(&j, (const char *)file.data, file.size, nodes, need, NULL, &err);
    if (!ok) fprintf(stderr, "wisp: %s: %s\n", path, err.message[0] ? err.message : "not a JSON object");
    /* an unescaped string is never longer than its JSON text: the file's size bounds them all */
    size_t used = 0, room = file.size + N_SETTINGS;
    ft_settings_release(s);
    if (ok && !(s->owned = malloc(room))) ok = false;
    for (size_t i = 0; ok && i < N_SETTINGS; i++) {
        const setting *t = &table[i];
        void *p = field_of(s, t);
        int64_t node = wisp_json_get(&j, 0, t->key);
        double d = 0;
        int64_t v = 0;
        bool b = false, got = false;
        switch (t->k) {
        case K_STR:
            if (node >= 0 && wisp_json_is(&j, node, WISP_JSON_NULL)) {
                *(const char **)p = NULL;
                got = true;
            } else if (node >= 0 && wisp_json_is(&j, node, WISP_JSON_STRING)) {
                size_t n = wisp_json_string(&j, node, NULL, 0);
                char *str = used + n + 1 <= room ? s->owned + used : NULL;
                if (str) wisp_json_string(&j, node, str, n + 1), used += n + 1;
                *(const char **)p = str;
                got = str != NULL;
            }
            break;
        case K_FLOAT: got = wisp_json_number(&j, node, &d) && isfinite(d), *(float *)p = (float)d; break;
        case K_INT: got = wisp_json_int(&j, node, &v) && v >= INT32_MIN && v <= INT32_MAX, *(int32_t *)p = (int32_t)v; break;
        case K_I64: got = wisp_json_int(&j, node, &v), *(int64_t *)p = v; break;
        case K_U64:
            got = wisp_json_number(&j, node, &d) && d >= 0;
            if (got) { /* exact for any integer: read the digits */
                char digits[32];
                size_t n = j.nodes[node].end - j.nodes[node].start;
                got = n < sizeof digits;
                if (got) {
                    memcpy(digits, j.text + j.nodes[node].start, n);
                    digits[n] = 0;
                    *(uint64_t *)p = strtoull(digits, NULL, 10);
                }
            }
            break;
        case K_BOOL: got = wisp_json_bool(&j, node, &b), *(bool *)p = b; break;
        }
        if (!got && node < 0 && t->optional) continue; /* the default set before reading stays */
        if (!got) {
            fprintf(stderr, "wisp: %s: setting \"%s\" is missing or has the wrong type\n", path, t->key);
            ok = false;
        }
    }
    free(nodes);
    cli_file_close(&file);
    if (!ok) ft_settings_release(s);
    return ok;
}

void ft_settings_release(ft_settings *s) {
    free(s->owned);
    s->owned = NULL;
}
