/* The buffers a wisp_data_plan asks for, from malloc: the unit tests build
 * training data outside any arena (the CLI plans them in its own). */
#ifndef WISP_TEST_DATA_MEMORY_H
#define WISP_TEST_DATA_MEMORY_H

#include "train_data.h"

/* Allocate every buffer `info` sizes (one spare element each, so a build that
 * writes one past its plan is caught by ASan/valgrind, not hidden by size 0). */
void data_memory_alloc(wisp_data_memory *m, const wisp_data_plan_info *info);
void data_memory_free(wisp_data_memory *m);

#endif
