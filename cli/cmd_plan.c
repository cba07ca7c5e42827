/* wisp plan: the exact arena bytes per part for a model and settings. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "plan_print.h"
#include "session.h"

int cmd_plan(int argc, char **argv) {
    cli_model_opts mo;
    cli_model_opts_default(&mo);
    bool json = false, logits_all = false;
    size_t text_bytes = 0;
    const cli_opt opts[] = {
        CLI_MODEL_OPTS(&mo),
        {"logits-all", 0, OPT_FLAG, &logits_all, NULL, "plan logits for every position of a step (as logits/perplexity do)"},
        {"text-bytes", 0, OPT_SIZE, &text_bytes, "BYTES", "longest text to tokenize at once; 0: 4096"},
        {"json", 0, OPT_FLAG, &json, NULL, "print machine-readable JSON"},
    };
    const cli_command cmd = {
        "plan", "-m MODEL [--ctx N] [--batch B] [--json]",
        "Print the exact number of arena bytes wisp needs for MODEL with these settings, part by part.\n"
        "Initialising with this many bytes works; with one byte less it fails. Weights are not in the arena:\n"
        "they are used in place from the file.",
        NULL, opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    cli_file f;
    wisp_gguf g;
    if (!cli_open_gguf(&f, &g, mo.model)) return CLI_FAIL;
    wisp_config cfg = wisp_config_default();
    cfg.n_ctx = mo.ctx;
    cfg.n_batch = mo.batch;
    cfg.logits_all = logits_all;
    if (text_bytes > UINT32_MAX) {
        fprintf(stderr, "wisp plan: --text-bytes must be below 4 GiB\n");
        cli_file_close(&f);
        return CLI_USAGE;
    }
    cfg.max_text_bytes = (uint32_t)text_bytes;
    cfg.kv_type = mo.kv_type && strcmp(mo.kv_type, "f32") == 0 ? WISP_TYPE_F32 : WISP_TYPE_F16;
    cfg.threads.n_threads = mo.threads ? mo.threads : cli_default_threads();
    cfg.threads.run = cfg.threads.n_threads > 1 ? cli_pool_run : NULL; /* only sizes matter here */
    wisp_memory_plan plan;
    wisp_error err = {0};
    if (wisp_plan(&g, &cfg, &plan, &err)) {
        cli_report(mo.model, &err);
        cli_file_close(&f);
        return CLI_FAIL;
    }
    if (json) cli_print_plan_json(stdout, &plan);
    else cli_print_plan(stdout, &plan);
    cli_file_close(&f);
    return CLI_OK;
}
