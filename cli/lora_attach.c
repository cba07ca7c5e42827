#include "lora_attach.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prompt_adapter.h"

bool cli_adapters_load(cli_adapters *a, const cli_str_list *specs, float default_scale, const char *model_path) {
    memset(a, 0, sizeof *a);
    if (specs->n == 0) return true;
    cli_file f;
    wisp_gguf g;
    wisp_hparams hp;
    wisp_error err = {0};
    if (!cli_open_gguf(&f, &g, model_path)) return false;
    bool ok = !wisp_hparams_read(&g, &hp, &err);
    if (!ok) cli_report(model_path, &err);
    cli_file_close(&f);
    for (int i = 0; ok && i < specs->n; i++) {
        char path[4096];
        float given;
        if (!cli_lora_parse_spec(specs->items[i], path, sizeof path, &given)) {
            fprintf(stderr, "wisp: --lora '%s': expected FILE or FILE:SCALE\n", specs->items[i]);
            ok = false;
            break;
        }
        bool explicit_scale = strlen(path) < strlen(specs->items[i]);
        if (cli_prompt_is_adapter(path)) {
            if (explicit_scale || a->prompt) {
                fprintf(stderr, "wisp: --lora %s: %s\n", specs->items[i],
                        a->prompt ? "only one prompt- or prefix-tuning adapter can lead the context"
                                  : "a prompt- or prefix-tuning adapter has no scale (it is virtual tokens, not a "
                                    "weight update)");
                ok = false;
                break;
            }
            ok = cli_prompt_read(path, &hp, &a->prompt, &a->n_prompt, &a->prompt_prefix);
            continue;
        }
        ok = cli_lora_load(&a->items[a->n], specs->items[i], &hp);
        if (!ok) break;
        a->scale[a->n] = explicit_scale ? given : default_scale;
        a->n++;
    }
    if (!ok) cli_adapters_close(a);
    return ok;
}

void cli_adapters_plan(const cli_adapters *a, wisp_config *cfg) {
    if (a->n == 0) return;
    cfg->max_adapters = a->n;
    for (int i = 0; i < a->n; i++)
        for (int32_t k = 0; k < a->items[i].lora.n_pairs; k++)
            if (a->items[i].lora.pairs[k].rank > cfg->max_lora_rank) cfg->max_lora_rank = a->items[i].lora.pairs[k].rank;
}

bool cli_adapters_attach(const cli_adapters *a, wisp_ctx *ctx) {
    for (int i = 0; i < a->n; i++) {
        wisp_error err = {0};
        if (wisp_adapter_attach(ctx, &a->items[i].lora, a->scale[i], NULL, &err)) {
            cli_report(a->items[i].path, &err);
            return false;
        }
    }
    return true;
}

bool cli_adapters_rewind(const cli_adapters *a, wisp_ctx *ctx) {
    wisp_rewind(ctx, a->n_prompt);
    if (wisp_n_past(ctx) == a->n_prompt) return true;
    wisp_rewind(ctx, 0); /* the ring dropped some of them: put them back */
    return cli_prompt_prime(ctx, a->prompt, a->n_prompt, a->prompt_prefix);
}

void cli_adapters_close(cli_adapters *a) {
    for (int i = 0; i < a->n; i++) cli_lora_close(&a->items[i]);
    a->n = 0;
    free(a->prompt);
    a->prompt = NULL;
    a->n_prompt = 0;
}

bool cli_adapted_session_open(cli_session *s, cli_adapters *a, const cli_str_list *specs, float default_scale,
                              const cli_model_opts *mo, wisp_config *cfg) {
    if (!cli_adapters_load(a, specs, default_scale, mo->model)) return false;
    cli_adapters_plan(a, cfg);
    cli_model_opts with_prompt = *mo;
    if (a->n_prompt > 0 && with_prompt.ctx > 0) with_prompt.ctx += a->n_prompt; /* the virtual tokens take positions */
    if (!cli_session_open(s, &with_prompt, cfg)) {
        cli_adapters_close(a);
        return false;
    }
    if (!cli_adapters_attach(a, s->ctx) ||
        (a->n_prompt > 0 && !cli_prompt_prime(s->ctx, a->prompt, a->n_prompt, a->prompt_prefix))) {
        cli_session_close(s);
        cli_adapters_close(a);
        return false;
    }
    return true;
}
