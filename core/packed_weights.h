/* The kernel level's packed copies of a model's matrices (kernels.h
 * wisp_packing): planned and made once at init, in part "packed_weights",
 * for every weight that a product reads and whose type and shape the level
 * packs. Products then read the copy; everything else (embedding rows, the
 * backward pass, merging) keeps using the original where it lies. When
 * anything is packed, the norm and bias vectors are copied there too. */
#ifndef WISP_PACKED_WEIGHTS_H
#define WISP_PACKED_WEIGHTS_H

#include "exec.h"
#include "gguf.h"
#include "model.h"

/* Bytes wisp_packed_weights_make carves for this model with kernels `k`
 * (NULL: the reference, which packs nothing). */
size_t wisp_packed_weights_plan(const wisp_gguf *g, const wisp_hparams *hp, const wisp_kernels *k);

/* Carve and fill the copies, spreading the packing over e's threads, point
 * each packed weight's `packed` at its copy and tell `done` (when not NULL)
 * the original's bytes. */
void wisp_packed_weights_make(wisp_model *m, const wisp_exec *e, wisp_arena *a,
                              void (*done)(void *user, const void *data, size_t bytes), void *user);

#endif
