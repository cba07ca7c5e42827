/* The WebAssembly SIMD128 level (compile-time: -msimd128), for the WASI CLI
 * and the Emscripten build: vec128_kernels.inc over vec128_wasm.h. */
#include "vec128.h"

#if WISP_HAVE_WASM_SIMD128
#include "vec128_wasm.h"

#define VEC128_NAME "wasm-simd128"
#include "vec128_kernels.inc"

const wisp_kernels *wisp_kernels_wasm_simd128(void) { return &vec128_table; }
#endif
