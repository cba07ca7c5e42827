/* wisp export: convert a LoRA adapter between llama.cpp's GGUF LoRA and a
 * PEFT folder, either way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "commands.h"
#include "lora_gguf.h"
#include "lora_load.h"
#include "peft.h"
#include "peft_folder.h"
#include "prompt_adapter.h"
#include "session.h"

static bool write_gguf(const cli_lora *ad, const char *arch, const char *name, const char *out) {
    cli_atomic_file af;
    if (!cli_atomic_open(&af, out)) return false;
    wisp_error err = {0};
    wisp_lora_gguf_written w;
    if (wisp_lora_gguf_write(&ad->lora, arch, name, &af.sink, &w, &err)) {
        cli_report(out, &err);
        cli_atomic_abort(&af);
        return false;
    }
    if (!cli_atomic_commit(&af)) return false;
    fprintf(stderr, "wrote %s: GGUF LoRA, %d pairs, adapter.lora.alpha %g, %llu bytes\n", out, ad->lora.n_pairs,
            (double)w.alpha, (unsigned long long)af.sink.written);
    if (w.n_folded)
        fprintf(stderr,
                "note: %d pairs have a scale that alpha / rank cannot express with one file alpha (mixed ranks with "
                "rsLoRA or per-module alphas); their lora_b was rescaled so llama.cpp applies the same update\n",
                w.n_folded);
    return true;
}

typedef struct lora_tensors {
    const wisp_lora *lora;
    const wisp_hparams *hp;
    void *scratch;
    size_t scratch_bytes;
} lora_tensors;

static wisp_status write_lora_tensors(void *arg, wisp_sink *sink, wisp_error *err) {
    const lora_tensors *t = arg;
    return wisp_peft_write_safetensors(t->lora, t->hp, t->scratch, t->scratch_bytes, sink, err);
}

bool cli_export_peft(const wisp_lora *lora, const wisp_hparams *hp, const char *base_model, const char *out, bool quiet) {
    wisp_error err = {0};
    size_t len = 0;
    wisp_status st = wisp_peft_write_config(lora, hp, base_model, NULL, 0, &len, &err);
    if (st && st != WISP_ERR_CAPACITY) {
        cli_report(out, &err);
        return false;
    }
    char *cfg = malloc(len + 1);
    size_t scratch_bytes = wisp_peft_export_bytes(lora);
    void *scratch = malloc(scratch_bytes ? scratch_bytes : 8);
    bool ok = cfg && scratch;
    if (!ok) fprintf(stderr, "wisp: out of memory\n");
    if (ok && wisp_peft_write_config(lora, hp, base_model, cfg, len + 1, &len, &err)) {
        cli_report(out, &err);
        ok = false;
    }
    lora_tensors t = {lora, hp, scratch, scratch_bytes};
    ok = ok && cli_peft_folder_write(out, cfg, len, write_lora_tensors, &t);
    if (ok && !quiet) {
        fprintf(stderr, "wrote %s: PEFT adapter, %d pairs%s\n", out, lora->n_pairs,
                hp->arch == WISP_ARCH_LLAMA ? ", q/k lora_B rows in Hugging Face order" : "");
        if (!base_model)
            fprintf(stderr, "note: base_model_name_or_path is null; pass --base-model NAME (a Hugging Face id) so "
                            "PEFT can find the base model\n");
    }
    free(cfg);
    free(scratch);
    return ok;
}

int cmd_export(int argc, char **argv) {
    const char *to = NULL, *out = NULL, *model = NULL, *base_model = NULL, *name = NULL;
    const cli_opt opts[] = {
        {"to", 0, OPT_STR, &to, "peft|gguf", "output format"},
        {"output", 'o', OPT_STR, &out, "OUT", "output: a folder for peft, a .gguf file for gguf (replaced only on "
                                              "success)"},
        {"model", 'm', OPT_STR, &model, "BASE.gguf", "the base model (its head counts fix the q/k row order; shapes "
                                                     "are checked against it)"},
        {"base-model", 0, OPT_STR, &base_model, "NAME", "PEFT base_model_name_or_path (default: the input's, if PEFT)"},
        {"name", 0, OPT_STR, &name, "NAME", "general.name of a GGUF output"},
    };
    const cli_command cmd = {
        "export", "ADAPTER --to peft|gguf -m BASE.gguf -o OUT",
        "Convert a LoRA adapter between llama.cpp's GGUF LoRA (a .gguf file) and a PEFT folder\n"
        "(adapter_config.json + adapter_model.safetensors), in either direction. Tensors are copied exactly;\n"
        "for arch llama the rows of lora_B of q_proj/k_proj are reordered between Hugging Face order and\n"
        "GGUF order, as llama.cpp's conversion reorders the q/k weights. For phi3 the PEFT side has\n"
        "Hugging Face's fused modules qkv_proj and gate_up_proj: wisp's q/k/v (gate/up) pairs become one\n"
        "pair with A stacked and B block-diagonal (exact; the rank is their sum; pairs of different scale\n"
        "are refused), and a fused PEFT pair gives each projection the shared A and its rows of B.",
        "The input format is detected: a folder is PEFT, a file is GGUF LoRA.\n"
        "Examples:\n"
        "  wisp export adapter.gguf --to peft -m base.gguf -o my-adapter --base-model HuggingFaceTB/SmolLM2-135M\n"
        "  wisp export my-adapter --to gguf -m base.gguf -o adapter.gguf",
        opts, (int)(sizeof opts / sizeof opts[0]), 1, 1, "ADAPTER"};
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    bool to_peft = to && strcmp(to, "peft") == 0, to_gguf = to && strcmp(to, "gguf") == 0;
    if (!to_peft && !to_gguf) {
        fprintf(stderr, "wisp export: --to must be peft or gguf\n(see: wisp export --help)\n");
        return CLI_USAGE;
    }
    if (!out || !model) {
        fprintf(stderr, "wisp export: missing %s\n(see: wisp export --help)\n",
                !out ? "-o OUT" : "-m BASE.gguf (the base model decides the q/k row order and checks shapes)");
        return CLI_USAGE;
    }
    cli_file bf;
    wisp_gguf bg;
    if (!cli_open_gguf(&bf, &bg, model)) return CLI_FAIL;
    wisp_hparams hp;
    wisp_error err = {0};
    if (wisp_hparams_read(&bg, &hp, &err)) {
        cli_report(model, &err);
        cli_file_close(&bf);
        return CLI_FAIL;
    }
    if (cli_prompt_is_adapter(pos[0])) { /* PEFT PROMPT_TUNING or PREFIX_TUNING: virtual tokens, not a weight update */
        bool ok = false;
        const char *kind = cli_prompt_method(pos[0]);
        if (to_gguf)
            fprintf(stderr, "wisp export: %s is a %s-tuning adapter: llama.cpp cannot load %s tuning, and GGUF "
                            "LoRA has no form for it (keep the PEFT folder; wisp run/eval --lora use it)\n", pos[0], kind,
                    kind);
        else
            ok = cli_prompt_copy(pos[0], &hp, base_model, out);
        cli_file_close(&bf);
        return ok ? CLI_OK : CLI_FAIL;
    }
    cli_lora ad;
    bool ok = cli_lora_load(&ad, pos[0], &hp);
    if (ok && ad.user_scale != 1.0f) {
        fprintf(stderr, "wisp export: ADAPTER takes no :SCALE (the adapter is converted as it is)\n");
        ok = false;
    }
    if (ok) {
        if (!base_model && ad.base_model[0]) base_model = ad.base_model;
        ok = to_gguf ? write_gguf(&ad, wisp_arch_name(hp.arch), name, out) : cli_export_peft(&ad.lora, &hp, base_model, out, false);
    }
    cli_lora_close(&ad);
    cli_file_close(&bf);
    return ok ? CLI_OK : CLI_FAIL;
}
