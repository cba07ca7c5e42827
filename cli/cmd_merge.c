/* wisp merge: fold LoRA adapters into a base model's weights, optionally
 * re-quantizing, so the result runs (in wisp or llama.cpp) with no adapter. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "lora_load.h"
#include "prompt_adapter.h"
#include "model_rewrite.h"
#include "session.h"

int cmd_merge(int argc, char **argv) {
    const char *model = NULL, *out = NULL, *type = "keep";
    cli_str_list loras = {{0}, 0};
    int32_t threads = 0;
    const cli_opt opts[] = {
        {"model", 'm', OPT_STR, &model, "BASE.gguf", "the base model"},
        {"lora", 0, OPT_STR_LIST, &loras, "ADAPTER[:SCALE]", "a GGUF LoRA file or PEFT folder, with an optional scale "
                                                             "(repeat for several)"},
        {"type", 0, OPT_STR, &type, "TYPE", "re-quantize the result: keep (each tensor keeps its type), q4_k_m, "
                                            "q8_0, f16, ... (see wisp quantize --help)"},
        {"output", 'o', OPT_STR, &out, "MERGED.gguf", "where to write (replaced only on success)"},
        {"threads", 't', OPT_INT, &threads, "N", "worker threads; 0: online CPUs, at most 8"},
    };
    const cli_command cmd = {
        "merge", "-m BASE.gguf --lora ADAPTER[:SCALE] [--lora ...] [--type TYPE] -o MERGED.gguf",
        "Merge LoRA adapters into the base weights: W' = W + sum of scale * s * B A for every adapted\n"
        "projection (s = the adapter's alpha / rank); a DoRA adapter (merged alone) gives\n"
        "W' = m (W + scale * s * B A) / ||W + scale * s * B A|| row by row. Each weight is dequantized, merged and quantized\n"
        "again with wisp's reference quantizers, one row at a time (bounded memory); norms stay F32.",
        "Example: wisp merge -m base.gguf --lora style.gguf:0.5 --lora my-peft-adapter --type q4_k_m -o merged.gguf",
        opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    if (!model || !out || loras.n == 0) {
        fprintf(stderr, "wisp merge: needs -m BASE.gguf, at least one --lora ADAPTER and -o MERGED.gguf\n"
                        "(see: wisp merge --help)\n");
        return CLI_USAGE;
    }
    cli_rewrite r;
    memset(&r, 0, sizeof r);
    if (!wisp_qtarget_parse(type, &r.target)) {
        fprintf(stderr, "wisp merge: unknown --type '%s' (keep, %s)\n", type, wisp_qtarget_names);
        return CLI_USAGE;
    }
    if (strcmp(model, out) == 0) {
        fprintf(stderr, "wisp merge: BASE and MERGED are the same file\n");
        return CLI_USAGE;
    }
    cli_file f;
    wisp_gguf g;
    if (!cli_open_gguf(&f, &g, model)) return CLI_FAIL;
    wisp_hparams hp;
    wisp_error err = {0};
    if (wisp_hparams_read(&g, &hp, &err)) {
        cli_report(model, &err);
        cli_file_close(&f);
        return CLI_FAIL;
    }
    cli_lora adapters[CLI_LIST_MAX];
    const wisp_lora *loras_in[CLI_LIST_MAX];
    float scales[CLI_LIST_MAX];
    int n = 0;
    bool ok = true;
    for (int i = 0; i < loras.n && ok; i++) {
        char path[4096];
        float unused;
        if (cli_lora_parse_spec(loras.items[i], path, sizeof path, &unused) && cli_prompt_is_adapter(path)) {
            fprintf(stderr, "wisp merge: %s: a %s-tuning adapter cannot be merged into the weights (it is virtual "
                            "tokens before the input; use it with run/eval --lora)\n", loras.items[i], cli_prompt_method(path));
            ok = false;
            break;
        }
        ok = cli_lora_load(&adapters[n], loras.items[i], &hp);
        if (ok) {
            loras_in[n] = &adapters[n].lora;
            scales[n] = adapters[n].user_scale;
            n++;
        }
    }
    for (int i = 0; i < n && ok && n > 1; i++)
        if (adapters[i].lora.n_pairs > 0 && adapters[i].lora.pairs[0].magnitude) {
            fprintf(stderr, "wisp merge: %s is DoRA, which merges alone (its row norms are of W + its own B A): "
                            "merge it in a run of its own\n", loras.items[i]);
            ok = false;
        }
    if (ok) {
        r.out_path = out;
        r.in = &g;
        r.n_threads = threads;
        r.adapters = loras_in;
        r.user_scales = scales;
        r.n_adapters = n;
        r.hp = &hp;
        r.input_mapped = f.mapped;
    cli_rewrite_layers(&g, &r.n_layers, &r.tied);
        ok = cli_rewrite_run(&r);
    }
    for (int i = 0; i < n; i++) cli_lora_close(&adapters[i]);
    cli_file_close(&f);
    return ok ? CLI_OK : CLI_FAIL;
}
