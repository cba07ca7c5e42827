#include "peak_memory.h"

#if defined(__wasi__)
size_t cli_peak_memory_bytes(void) { return (size_t)__builtin_wasm_memory_size(0) * 65536; }
#else
#include <sys/resource.h>

size_t cli_peak_memory_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024; /* kilobytes on Linux */
}
#endif
