/* A program that knows wisp only through its public header: compiled by
 * tests/cli/test_public_api.sh with nothing but -Icore (and so no internal
 * header reachable by accident from wisp.h) and linked against libwisp.a. It
 * fills in the structs a caller fills in and calls a few public functions,
 * printing what they return for the script to compare. */
#include <stdio.h>
#include <string.h>

#include <wisp.h>

int main(void) {
    wisp_config cfg = wisp_config_default();
    cfg.n_ctx = 256;
    cfg.train.seq_len = 64;
    cfg.train.targets = 1u << WISP_PROJ_Q | 1u << WISP_PROJ_V;
    cfg.train.schedule = WISP_SCHEDULE_LINEAR;
    cfg.train.lr = 0.5f;
    cfg.train.warmup_steps = 4;
    cfg.train.total_steps = 10;

    wisp_memory_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.hp.arch = WISP_ARCH_LLAMA;

    wisp_error err = {.status = WISP_OK};
    const wisp_gguf *no_model = NULL; /* opaque: only a pointer can be held */
    (void)no_model;

    printf("version %s\n", WISP_VERSION);
    printf("kv_type_is_f16 %d\n", cfg.kv_type == WISP_TYPE_F16);
    printf("status %s\n", wisp_status_name(WISP_ERR_ARENA));
    printf("part %s\n", wisp_part_name(WISP_PART_KV_CACHE));
    printf("parts %d\n", (int)(sizeof plan.part / sizeof plan.part[0]));
    printf("lr_at_2 %.4f\n", (double)wisp_train_lr_at(&cfg.train, 2));
    printf("error_fits %d\n", (int)sizeof err.message >= WISP_ERROR_MESSAGE_MAX);
    return 0;
}
