#include "lora_load.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lora_gguf.h"
#include "peft.h"
#include "session.h"

bool cli_lora_parse_spec(const char *spec, char *path, size_t cap, float *scale) {
    *scale = 1.0f;
    size_t n = strlen(spec);
    const char *colon = strrchr(spec, ':');
    if (colon && colon[1]) {
        char *end;
        errno = 0;
        double v = strtod(colon + 1, &end);
        if (*end == '\0' && errno == 0 && isfinite(v)) {
            *scale = (float)v;
            n = (size_t)(colon - spec);
        }
    }
    if (n == 0 || n >= cap) return false;
    memcpy(path, spec, n);
    path[n] = '\0';
    return true;
}

static bool load_gguf(cli_lora *l, const wisp_hparams *base) {
    wisp_error err = {0};
    if (!cli_file_open(&l->file, l->path)) return false;
    wisp_lora_gguf_info info;
    wisp_status st = wisp_gguf_open(&l->gguf, l->file.data, l->file.size, &err);
    if (!st) st = wisp_lora_gguf_plan(&l->gguf, &info, &err);
    if (!st && !(l->mem = malloc(info.pairs_bytes ? info.pairs_bytes : 1)))
        st = wisp_fail(&err, WISP_ERR_CAPACITY, "out of memory for %d pairs", (int)info.n_pairs);
    if (!st) st = wisp_lora_gguf_read(&l->gguf, base, l->mem, (size_t)info.n_pairs, &l->lora, &err);
    if (st) {
        cli_report(l->path, &err);
        return false;
    }
    snprintf(l->arch, sizeof l->arch, "%s", info.arch);
    l->format = CLI_LORA_GGUF;
    return true;
}

/* Print what the PEFT reader noticed but accepted. */
static void print_notes(const char *path, const wisp_peft_notes *notes) {
    for (int i = 0; i < notes->n; i++) fprintf(stderr, "wisp: %s: warning: %s\n", path, notes->text[i]);
    if (notes->dropped) fprintf(stderr, "wisp: %s: warning: %d more notes not shown\n", path, notes->dropped);
}

static bool load_peft(cli_lora *l, const wisp_hparams *base) {
    char cfg_path[4200], st_path[4200];
    snprintf(cfg_path, sizeof cfg_path, "%s/adapter_config.json", l->path);
    snprintf(st_path, sizeof st_path, "%s/adapter_model.safetensors", l->path);
    if (!base) {
        fprintf(stderr, "wisp: %s: a PEFT adapter needs its base model (-m) to be read\n", l->path);
        return false;
    }
    cli_file cfg;
    if (!cli_file_open(&cfg, cfg_path)) return false;
    if (!cli_file_open(&l->file, st_path)) {
        cli_file_close(&cfg);
        return false;
    }
    wisp_error err = {0};
    wisp_peft p;
    size_t index_bytes = 0;
    void *index = NULL;
    wisp_status st = wisp_peft_index_bytes((const char *)cfg.data, cfg.size, l->file.data, l->file.size, &index_bytes,
                                           &err);
    if (!st && !(index = malloc(index_bytes ? index_bytes : 8)))
        st = wisp_fail(&err, WISP_ERR_CAPACITY, "out of memory (%zu bytes)", index_bytes);
    if (!st)
        st = wisp_peft_open(&p, (const char *)cfg.data, cfg.size, l->file.data, l->file.size, base, index, index_bytes,
                            &err);
    if (!st && !(l->mem = malloc(p.lora_bytes ? p.lora_bytes : 8)))
        st = wisp_fail(&err, WISP_ERR_CAPACITY, "out of memory (%zu bytes)", p.lora_bytes);
    if (!st) st = wisp_peft_read(&p, l->mem, p.lora_bytes, &l->lora, &err);
    if (!st) print_notes(l->path, &p.info.notes);
    free(index); /* the lora points into the safetensors mapping and l->mem only */
    cli_file_close(&cfg);
    if (st) {
        cli_report(l->path, &err);
        return false;
    }
    snprintf(l->arch, sizeof l->arch, "%s", wisp_arch_name(base->arch));
    snprintf(l->base_model, sizeof l->base_model, "%s", p.info.base_model);
    l->format = CLI_LORA_PEFT;
    return true;
}

bool cli_lora_load(cli_lora *l, const char *spec, const wisp_hparams *base) {
    memset(l, 0, sizeof *l);
    if (!cli_lora_parse_spec(spec, l->path, sizeof l->path, &l->user_scale)) {
        fprintf(stderr, "wisp: --lora '%s': expected PATH or PATH:SCALE\n", spec);
        return false;
    }
    struct stat st;
    if (stat(l->path, &st) != 0) {
        fprintf(stderr, "wisp: %s: %s\n", l->path, strerror(errno));
        return false;
    }
    bool ok = S_ISDIR(st.st_mode) ? load_peft(l, base) : load_gguf(l, base);
    if (!ok) cli_lora_close(l);
    return ok;
}

void cli_lora_close(cli_lora *l) {
    if (l->file.data) cli_file_close(&l->file);
    free(l->mem);
    l->mem = NULL;
    memset(&l->lora, 0, sizeof l->lora);
}
