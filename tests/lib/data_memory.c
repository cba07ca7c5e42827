#include "data_memory.h"

#include <stdlib.h>

void data_memory_alloc(wisp_data_memory *m, const wisp_data_plan_info *info) {
    m->tokens = malloc(sizeof(int32_t) * (info->max_tokens + 1));
    m->cap_tokens = info->max_tokens;
    m->examples = malloc(sizeof(wisp_data_example) * (info->max_examples + 1));
    m->order = malloc(sizeof(int32_t) * (info->max_examples + 1));
    m->cap_examples = info->max_examples;
    m->nodes = malloc(sizeof(wisp_json_node) * (info->json_nodes + 1));
    m->cap_nodes = info->json_nodes;
    m->text = malloc(info->text_bytes + 1);
    m->text_bytes = info->text_bytes;
    m->tok_scratch = malloc(info->tok_scratch);
    m->tok_scratch_bytes = info->tok_scratch;
}

void data_memory_free(wisp_data_memory *m) {
    free(m->tokens), free(m->examples), free(m->order), free(m->nodes), free(m->text), free(m->tok_scratch);
}
