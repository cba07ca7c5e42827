/* How a function of the C ABI is made callable from JS (API), in each build:
 * Emscripten's (wasm32, one thread or threaded) keeps it alive and exports
 * it; the wasm64 build (wasm/wasm64: clang and wasm-ld without Emscripten,
 * every other symbol hidden) exports what is visible; a native build (the
 * layout table's unit test) needs nothing. */
#ifndef WISP_WASM_ABI_EXPORT_H
#define WISP_WASM_ABI_EXPORT_H

#if defined(WISP_WASM64)
#define API __attribute__((used, visibility("default")))
#elif defined(__EMSCRIPTEN__)
#include <emscripten.h>
#define API EMSCRIPTEN_KEEPALIVE
#else
#define API
#endif

#endif
