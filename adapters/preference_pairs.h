/* Preference data for DPO: JSONL records {"prompt", "chosen", "rejected"}
 * (trl's standard explicit-prompt form, strings). Each side is rewritten as
 * prompt/completion JSONL, which the training-data pipeline (train_data.h)
 * turns into windows scored on the completion and its EOS, as trl scores a
 * DPO completion. Both sides keep one record per pair, in file order, so two
 * pipelines built with the same options and seed visit the pairs in
 * lockstep: example i of the chosen side and of the rejected side are the
 * two answers of pair i, in every epoch and in the validation split.
 *
 * Refused by name, never skipped: another key (trl's implicit-prompt form
 * without "prompt", extra fields), a side that is not a string (trl's
 * conversational form, lists of messages), a line that is not an object.
 * The strings are copied as they are written (still escaped), so the output
 * is never longer than 40 bytes more than its line per record. */
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
