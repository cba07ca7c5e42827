/* The threaded wasm64 build's pool (pool.c), as wasm/abi_threads.c uses it. */
#ifndef WISP_WASM64_POOL_H
#define WISP_WASM64_POOL_H

#include "wasm/abi.h"

/* Makes the pool JS started (n threads, its workers running) the model's;
 * 0, or -1 with the error in m->err. */
int32_t ww_pool64_attach(ww_model *m, int32_t n);
/* Stops the model's pool, if it has one. */
void ww_pool64_detach(ww_model *m);
/* Pieces the pool's workers (not the caller) ran so far. */
double ww_pool64_worker_pieces(const ww_model *m);

#endif
