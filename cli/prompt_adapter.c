#include "prompt_adapter.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "file_map.h"
#include "peft_folder.h"
#include "session.h"

static wisp_status write_prompt_tensors(void *arg, wisp_sink *sink, wisp_error *err) {
    return wisp_prompt_write_safetensors(arg, sink, err);
}

bool cli_prompt_write(const wisp_prompt_adapter *a, const char *dir, bool quiet) {
    wisp_error err = {0};
    size_t len = 0;
    wisp_status s = wisp_prompt_write_config(a, NULL, 0, &len, &err);
    if (s && s != WISP_ERR_CAPACITY) {
        cli_report(dir, &err);
        return false;
    }
    char *cfg = malloc(len + 2);
    bool ok = cfg && !wisp_prompt_write_config(a, cfg, len + 1, &len, &err);
    if (!ok) {
        if (!cfg) wisp_fail(&err, WISP_ERR_CAPACITY, "out of memory");
        cli_report(dir, &err);
        free(cfg);
        return false;
    }
    ok = cli_peft_folder_write(dir, cfg, len, write_prompt_tensors, (void *)(uintptr_t)a);
    if (ok && !quiet)
        fprintf(stderr, "wrote %s: PEFT %s-tuning adapter, %d virtual tokens\n", dir, a->prefix ? "prefix" : "prompt",
                a->n_virtual);
    free(cfg);
    return ok;
}

/* Which of the two DIR's adapter_config.json names: 1 prompt, 2 prefix, 0 neither. */
static int method_of(const char *dir) {
    char cfg_path[4200];
    snprintf(cfg_path, sizeof cfg_path, "%s/adapter_config.json", dir);
    cli_file f;
    struct stat st;
    if (stat(cfg_path, &st) != 0 || !cli_file_open(&f, cfg_path)) return 0;
    int kind = wisp_prompt_config_is_prompt((const char *)f.data, f.size)   ? 1
               : wisp_prompt_config_is_prefix((const char *)f.data, f.size) ? 2
                                                                             : 0;
    cli_file_close(&f);
    return kind;
}

bool cli_prompt_is_adapter(const char *dir) { return method_of(dir) != 0; }
bool cli_prompt_is_prefix(const char *dir) { return method_of(dir) == 2; }
const char *cli_prompt_method(const char *dir) { return cli_prompt_is_prefix(dir) ? "prefix" : "prompt"; }

/* Both files of DIR, mapped and parsed (close with opened_close). */
typedef struct opened {
    cli_file cfg, st;
    void *mem;
    wisp_prompt_adapter a;
} opened;

static bool opened_open(opened *o, const char *dir, const wisp_hparams *hp) {
    char cfg_path[4200], st_path[4200];
    snprintf(cfg_path, sizeof cfg_path, "%s/adapter_config.json", dir);
    snprintf(st_path, sizeof st_path, "%s/adapter_model.safetensors", dir);
    memset(o, 0, sizeof *o);
    if (!cli_file_open(&o->cfg, cfg_path)) return false;
    if (!cli_file_open(&o->st, st_path)) {
        cli_file_close(&o->cfg);
        return false;
    }
    wisp_error err = {0};
    size_t bytes = 0;
    bool ok = !wisp_prompt_index_bytes((const char *)o->cfg.data, o->cfg.size, o->st.data, o->st.size, &bytes, &err) &&
              (o->mem = aligned_alloc(8, (bytes + 7) / 8 * 8)) &&
              !wisp_prompt_read((const char *)o->cfg.data, o->cfg.size, o->st.data, o->st.size, hp, o->mem, bytes, &o->a,
                                &err);
    if (!ok) {
        if (!err.message[0]) wisp_fail(&err, WISP_ERR_CAPACITY, "out of memory");
        cli_report(dir, &err);
        free(o->mem);
        cli_file_close(&o->cfg);
        cli_file_close(&o->st);
    }
    return ok;
}

static void opened_close(opened *o) {
    free(o->mem);
    cli_file_close(&o->cfg);
    cli_file_close(&o->st);
}

bool cli_prompt_read(const char *dir, const wisp_hparams *hp, float **rows, int32_t *n_virtual, bool *prefix) {
    opened o;
    if (!opened_open(&o, dir, hp)) return false;
    size_t n = (size_t)o.a.n_virtual * wisp_prompt_width(&o.a);
    *rows = malloc(sizeof(float) * n);
    for (size_t i = 0; *rows && i < n; i++) (*rows)[i] = wisp_prompt_engine_value(&o.a, hp->arch, i);
    if (*rows) *n_virtual = o.a.n_virtual, *prefix = o.a.prefix;
    else fprintf(stderr, "wisp: out of memory\n");
    opened_close(&o);
    return *rows != NULL;
}

bool cli_prompt_plan(const char *dir, const wisp_hparams *hp, size_t *index_bytes, size_t *rows_bytes,
                     int32_t *n_virtual, bool *prefix) {
    opened o;
    if (!opened_open(&o, dir, hp)) return false;
    wisp_error err = {0};
    bool ok = !wisp_prompt_index_bytes((const char *)o.cfg.data, o.cfg.size, o.st.data, o.st.size, index_bytes, &err);
    if (!ok) cli_report(dir, &err);
    *rows_bytes = (size_t)o.a.n_virtual * wisp_prompt_width(&o.a) * sizeof(float);
    *n_virtual = o.a.n_virtual, *prefix = o.a.prefix;
    opened_close(&o);
    return ok;
}

bool cli_prompt_copy(const char *dir, const wisp_hparams *hp, const char *base_model, const char *out) {
    opened o;
    if (!opened_open(&o, dir, hp)) return false;
    if (base_model) o.a.base_model = base_model;
    bool ok = cli_prompt_write(&o.a, out, false);
    opened_close(&o);
    return ok;
}

bool cli_prompt_prime(wisp_ctx *ctx, const float *rows, int32_t n_virtual, bool prefix) {
    wisp_error err = {0};
    if (prefix ? wisp_eval_kv_prefix(ctx, rows, n_virtual, &err) : wisp_eval_embeddings(ctx, rows, n_virtual, &err)) {
        cli_report(prefix ? "prefix-tuning adapter" : "prompt-tuning adapter", &err);
        return false;
    }
    return true;
}
