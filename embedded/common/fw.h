/* What every wisp firmware gets from its platform layer, on Cortex-M and
 * RISC-V alike: host I/O through semihosting (console, files, the command
 * line, the exit status), a marker for instruction counting, and the stack
 * high-water mark. There is no heap and no libc stdio: text is formatted with
 * core's wisp_format and written straight to the host. */
#ifndef WISP_FW_H
#define WISP_FW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sink.h"
#include "status.h"

/* ---- semihosting (the per-architecture trap lives in the startup code) --- */

/* Perform semihosting operation `op` with parameter block `arg`. */
uintptr_t fw_semihost_call(uintptr_t op, const void *arg);

/* Host files. Modes follow the semihosting table: 0 "r", 1 "rb", 4 "w",
 * 5 "wb", 8 "a". Return a handle (>= 0) or -1. */
enum { FW_OPEN_RB = 1, FW_OPEN_W = 4, FW_OPEN_WB = 5, FW_OPEN_A = 8 };
int fw_open(const char *path, int mode);
/* true when all n bytes were written. */
bool fw_write(int handle, const void *data, size_t n);
bool fw_close(int handle);
bool fw_rename(const char *from, const char *to);
bool fw_remove(const char *path);

/* The command line QEMU passes (the kernel path, then -append's text),
 * NUL-terminated; false (and empty) when it does not fit in cap bytes. */
bool fw_cmdline(char *buf, size_t cap);

/* That command line split into space-separated words (kept in a static
 * buffer): argv[0] is the kernel path. Returns the count, or -1 after
 * printing "<who>: ..." when the line is too long or has more than `max`
 * words. */
int fw_args(const char *who, char **argv, int max);
/* A decimal int32 (optional '-'); false on anything else or overflow. */
bool fw_parse_i32(const char *s, int32_t *out);

/* Report `code` as the emulator's exit status (SYS_EXIT_EXTENDED). */
__attribute__((noreturn)) void fw_exit(int code);

/* ---- console --------------------------------------------------------------- */

/* Formatted text (wisp_format's conversions) to the host's stdout / stderr. */
void fw_print(const char *fmt, ...);
void fw_eprint(const char *fmt, ...);
/* Raw bytes to stdout. */
void fw_put(const void *data, size_t n);

/* A wisp_sink writing to a host file opened with fw_open. */
wisp_sink fw_file_sink(int *handle);

/* ---- measurement ------------------------------------------------------------- */

/* An empty function at a known address: the QEMU instruction-count plugin
 * (embedded/tools/qemu_insn_plugin.c) records the running count every time it
 * executes, so firmware marks phase boundaries (after prefill, after each
 * token, after each training step) without a cycle counter. */
void fw_mark(void);

/* Bytes of stack used so far (the deepest point reached since reset) and the
 * bytes reserved for it by the linker script. */
size_t fw_stack_used(void);
size_t fw_stack_reserved(void);

/* ---- called by the startup code ---------------------------------------------- */

/* Copy .data, zero .bss, paint the stack, run main, exit with its status.
 * `sp` is the current stack pointer (painting stops short of it). */
__attribute__((noreturn)) void fw_start(uintptr_t sp);

int main(void);

#endif
