/* The kernel level's packed copies of a model's matrices (kernels.h
 * wisp_packing): planned and made once at init, in part "packed_weights",
 * for every weight that a product reads and whose type and shape the level
 * packs. Products then read the copy, and so do the rows of a token
 * embedding the output is tied to; everything else (the backward pass,
 * merging) keeps using the original where it lies. When
 * anything is packed, the norm and bias vectors are copied there too. */
#ifndef WISP_PACKED_WEIGHTS_H
#define WISP_PACKED_WEIGHTS_H

#include "exec.h"
#include "gguf.h"
#include "model.h"

/* The part's one layout (core/arena.h) for kernels `k` (NULL: none, as the
 * reference, which packs nothing): with lay->arena NULL only measured, the
 * model's layers then read from its file one at a time (wisp_model_layout
 * measuring leaves no table); else the copies are carved and filled, the
 * packing spread over e's threads, each packed weight's `packed` pointed at
 * its copy and `done` (when not NULL) told the original's bytes. */
void wisp_packed_weights_layout(wisp_layout *lay, wisp_model *m, const wisp_kernels *k, const wisp_exec *e,
                                void (*done)(void *user, const void *data, size_t bytes), void *user);

#endif
