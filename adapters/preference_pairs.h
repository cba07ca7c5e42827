/* Preference data for DPO: JSONL records {"prompt", "chosen", "rejected"}
 * (trl's explicit-prompt form): strings, or lists of messages (trl's
 * conversational form, rendered with a chat template). Each side is rewritten
 * as prompt/completion JSONL, which the training-data pipeline (train_data.h)
 * turns into windows scored on the completion and its EOS, as trl scores a
 * DPO completion; a conversational side keeps its lists and carries the other
 * answer as "paired_completion", because trl cuts the shared prompt to what
 * the renderings of both answers start with. Both sides keep one record per
 * pair, in file order, so two pipelines built with the same options and seed
 * visit the pairs in lockstep: example i of the chosen side and of the
 * rejected side are the two answers of pair i, in every epoch and in the
 * validation split.
 *
 * Refused by name, never skipped: another key (trl's implicit-prompt form
 * without "prompt", extra fields), a record mixing strings and lists, a line
 * that is not an object. The parts are copied as they are written (strings
 * still escaped), so the output is never longer than 64 bytes more than its
 * line per record. */
#ifndef WISP_PREFERENCE_PAIRS_H
#define WISP_PREFERENCE_PAIRS_H

#include <stddef.h>

#include "json.h"
#include "status.h"

typedef enum wisp_pair_side { WISP_PAIR_CHOSEN, WISP_PAIR_REJECTED } wisp_pair_side;

/* Bytes the output of either side may need, and JSON nodes for the longest line. */
wisp_status wisp_pairs_plan(const char *bytes, size_t n, size_t *out_bytes, size_t *json_nodes, wisp_error *err);

/* Writes one side as prompt/completion JSONL into out (cap bytes, as planned);
 * *out_len receives its length. Errors name the line. */
wisp_status wisp_pairs_side(const char *bytes, size_t n, wisp_pair_side side, wisp_json_node *nodes, size_t cap_nodes,
                            char *out, size_t cap, size_t *out_len, wisp_error *err);

#endif
