/* wisp info: what a GGUF holds and what running it will take. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "plan_print.h"
#include "session.h"

static void print_str_kv(const wisp_gguf *g, const char *key, const char *label) {
    wisp_str s;
    if (wisp_gguf_get_str(g, key, &s)) printf("  %-18s %.*s\n", label, (int)(s.len > 200 ? 200 : s.len), s.ptr);
}

int cmd_info(int argc, char **argv) {
    cli_model_opts mo;
    cli_model_opts_default(&mo);
    bool tensors = false;
    const cli_opt opts[] = {
        CLI_MODEL_OPTS(&mo),
        {"tensors", 0, OPT_FLAG, &tensors, NULL, "also list every tensor with its type and shape"},
    };
    const cli_command cmd = {"info", "-m MODEL [--tensors]",
                             "Describe MODEL: architecture, shapes, tensor types, tokenizer, and the memory plan.",
                             NULL, opts, (int)(sizeof opts / sizeof opts[0]), 0, 0, NULL};
    const char *pos[1];
    int n_pos;
    int rc = cli_parse(&cmd, argc, argv, pos, &n_pos);
    if (rc) return rc == 1 ? CLI_OK : CLI_USAGE;
    cli_file f;
    wisp_gguf g;
    if (!cli_open_gguf(&f, &g, mo.model)) return CLI_FAIL;

    printf("%s: GGUF v%u, %llu tensors, %llu metadata keys, %llu bytes", mo.model, g.version,
           (unsigned long long)wisp_gguf_tensor_count(&g), (unsigned long long)g.n_kv,
           (unsigned long long)wisp_gguf_total_bytes(&g));
    if (wisp_gguf_shard_count(&g) > 1) printf(" in %u shards", wisp_gguf_shard_count(&g));
    printf("\n");
    print_str_kv(&g, "general.name", "name");
    print_str_kv(&g, "general.architecture", "architecture");
    wisp_hparams hp;
    wisp_error err = {0};
    bool runnable = wisp_hparams_read(&g, &hp, &err) == WISP_OK;
    if (runnable) {
        printf("  %-18s %d\n  %-18s %d\n  %-18s %d (%d key/value heads%s)\n  %-18s %d\n  %-18s %d\n  %-18s %d\n",
               "layers", hp.n_layers, "embedding", hp.dim, "heads", hp.n_heads, hp.n_kv_heads,
               hp.n_kv_heads < hp.n_heads ? ", grouped-query" : "", "head size", hp.head_dim, "feed-forward",
               hp.ffn_dim, "vocabulary", hp.n_vocab);
        printf("  %-18s %s pairs, %d dims, base %g\n  %-18s %d\n  %-18s %g\n  %-18s %s\n", "rope",
               hp.rope_neox ? "half-split (NEOX)" : "adjacent", hp.rope_dim, (double)hp.rope_base, "trained context",
               hp.ctx_train, "rms epsilon", (double)hp.rms_eps, "output", hp.tied_output ? "tied to the embedding" : "separate");
        cli_print_family(stdout, &hp);
    } else {
        printf("  (cannot run: %s)\n", err.message);
    }
    print_str_kv(&g, "tokenizer.ggml.model", "tokenizer");
    print_str_kv(&g, "tokenizer.ggml.pre", "pre-tokenizer");

    /* tensor types, by count and bytes */
    uint64_t count[WISP_TYPE_COUNT] = {0}, bytes[WISP_TYPE_COUNT] = {0};
    size_t cur = 0;
    wisp_gguf_tensor t;
    while (wisp_gguf_next_tensor(&g, &cur, &t)) {
        if (tensors)
            printf("  tensor %-32.*s %-7s [%lld, %lld, %lld, %lld]\n", (int)t.name.len, t.name.ptr,
                   wisp_type_info_of((int)t.type)->name, (long long)t.ne[0], (long long)t.ne[1], (long long)t.ne[2],
                   (long long)t.ne[3]);
        if (t.type < WISP_TYPE_COUNT) { count[t.type]++; bytes[t.type] += t.nbytes; }
    }
    printf("  %-18s", "tensor types");
    char h[32];
    for (int i = 0; i < WISP_TYPE_COUNT; i++)
        if (count[i])
            printf(" %s x%llu (%s)", wisp_type_info_of(i)->name, (unsigned long long)count[i],
                   cli_human_bytes(h, sizeof h, (size_t)bytes[i]));
    printf("\n  %-18s %s\n", "kernels", cli_kernels()->name);
    if (runnable) {
        wisp_config cfg = wisp_config_default();
        cfg.n_ctx = mo.ctx;
        cfg.n_batch = mo.batch;
        cfg.threads.n_threads = mo.threads ? mo.threads : cli_default_threads();
        cfg.threads.run = cfg.threads.n_threads > 1 ? cli_pool_run : NULL;
        cfg.kernels = cli_kernels();
        wisp_memory_plan plan;
        if (wisp_plan(&g, &cfg, &plan, &err) == WISP_OK) cli_print_plan(stdout, &plan);
        else printf("  (no plan: %s)\n", err.message);
    }
    cli_file_close(&f);
    return CLI_OK;
}
