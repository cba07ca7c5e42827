/* DoRA's row norms (lora.h): n[o] = || W_o + s B_o A ||, computed one output
 * row at a time from a dequantized row of the base weight, so no copy of W
 * is ever formed. Shared by training (every step) and inference (attach). */
#ifndef WISP_DORA_H
#define WISP_DORA_H

#include "exec.h"
#include "lora.h"
#include "model.h"

/* norm[o] for o in [lo, hi) of pair p over base weight w with factor s;
 * `row` is scratch for n_in floats. Sums in double: the norm scales every
 * output of the row, so its rounding should not depend on n_in. */
void wisp_dora_norm_rows(const wisp_exec *e, const wisp_weight *w, const wisp_lora_pair *p, float s, float *row,
                         int64_t lo, int64_t hi, float *norm);

/* The whole pair, split over the exec's workers; scratch holds
 * n_threads x p->n_in floats. */
void wisp_dora_norms(const wisp_exec *e, const wisp_weight *w, const wisp_lora_pair *p, float s, float *scratch,
                     float *norm);

/* y[t][o] = m[o] / n[o] * y[t][o] for n_tok rows with stride ldy: turns
 * W x + s B A x into DoRA's output (before any bias). */
void wisp_dora_scale_rows(const wisp_lora_pair *p, float *y, int64_t ldy, int32_t n_tok);

#endif
