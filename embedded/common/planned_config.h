/* The wisp_config a generated plan header (`wisp plan -t 1 --c-header`)
 * describes, field by field, so init carves exactly what was planned on the
 * host. Include it after that header. Training hyperparameters that do not
 * size the plan (learning rate, seed, ...) are the firmware's to set. */
#ifndef WISP_FW_PLANNED_CONFIG_H
#define WISP_FW_PLANNED_CONFIG_H

#include "cortexm_dsp.h"
#include "wisp.h"

#ifndef WISP_ARENA_BYTES
#error "include the generated plan header first"
#endif
#if WISP_PLAN_N_THREADS != 1
#error "firmware runs one thread: generate the plan header with `wisp plan -t 1 --c-header`"
#endif

static inline wisp_config fw_planned_config(void) {
    wisp_config cfg = wisp_config_default();
    cfg.n_ctx = WISP_PLAN_N_CTX;
    cfg.n_batch = WISP_PLAN_N_BATCH;
    cfg.kv_type = WISP_PLAN_KV_TYPE;
    cfg.logits_all = WISP_PLAN_LOGITS_ALL;
    cfg.max_text_bytes = WISP_PLAN_MAX_TEXT_BYTES;
    cfg.max_adapters = WISP_PLAN_MAX_ADAPTERS;
    cfg.max_lora_rank = WISP_PLAN_MAX_LORA_RANK;
    cfg.kernels = wisp_kernels_cortexm_dsp(); /* NULL without the DSP extension: the reference */
    wisp_train_config *t = &cfg.train;
    t->seq_len = WISP_PLAN_TRAIN_SEQ_LEN;
    t->micro_batch = WISP_PLAN_TRAIN_MICRO_BATCH;
    t->rank = WISP_PLAN_TRAIN_RANK;
    t->targets = WISP_PLAN_TRAIN_TARGETS;
    t->optimizer = WISP_PLAN_TRAIN_OPTIMIZER;
    t->act_type = WISP_PLAN_TRAIN_ACT_TYPE;
    t->checkpointing = WISP_PLAN_TRAIN_CHECKPOINTING;
    t->loss_chunk = WISP_PLAN_TRAIN_LOSS_CHUNK;
    return cfg;
}

#endif
