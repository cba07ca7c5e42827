/* wisp quantize: rewrite a GGUF with its weights in another type, or in a
 * llama.cpp-style mix (q4_k_m). */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "model_rewrite.h"
#include "session.h"

int cmd_quantize(int argc, char **argv) {
    int32_t threads = 0;
    const cli_opt opts[] = {
        {"threads", 't', OPT_INT, &threads, "N", "worker threads; 0: online CPUs, at most 8"},
    };
    char details[1024];
    snprintf(details, sizeof details,
             "TYPE is one of: %s.\n"
             "Plain types convert every 2-D weight; q4_k_m / q5_k_m are llama.cpp's mixes (Q6_K for the output,\n"
             "and for attn_v / ffn_down in the first and last eighth of the layers and every third layer).\n"
             "Norms and biases stay F32. A row length a type cannot split into blocks falls back as llama.cpp\n"
             "does (Q4_K->Q5_0, Q5_K->Q5_1, Q6_K->Q8_0, Q2_K/Q3_K->IQ4_NL, else F16), with a note.\n"
             "Example: wisp quantize model-f32.gguf model-q4_k_m.gguf q4_k_m",
             wisp_qtarget_names);
    const cli_command cmd = {"quantize", "IN.gguf OUT.gguf TYPE [-t N]",
                             "Rewrite a model with its weights quantized to TYPE (OUT is replaced only on success).",
                             details, opts, (int)(sizeof opts / sizeof opts[0]), 3, 3, "IN.gguf OUT.gguf TYPE"};
    const char *pos[3];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    cli_rewrite r;
    memset(&r, 0, sizeof r);
    if (!wisp_qtarget_parse(pos[2], &r.target) || r.target.recipe == WISP_QRECIPE_KEEP) {
        fprintf(stderr, "wisp quantize: unknown TYPE '%s' (one of: %s)\n", pos[2], wisp_qtarget_names);
        return CLI_USAGE;
    }
    if (strcmp(pos[0], pos[1]) == 0) {
        fprintf(stderr, "wisp quantize: IN and OUT are the same file\n");
        return CLI_USAGE;
    }
    cli_file f;
    wisp_gguf g;
    if (!cli_open_gguf(&f, &g, pos[0])) return CLI_FAIL;
    r.out_path = pos[1];
    r.in = &g;
    r.n_threads = threads;
    r.input_mapped = f.mapped;
    cli_rewrite_layers(&g, &r.n_layers, &r.tied);
    bool ok = cli_rewrite_run(&r);
    cli_file_close(&f);
    return ok ? CLI_OK : CLI_FAIL;
}
