/* The C side of reset, shared by every target: initialise memory, paint the
 * stack so its deepest use can be measured, run main, and hand its return
 * value to the host as the exit status.
 *
 * Linker-script symbols (see cortexm/link.ld, riscv/link.ld): initialised
 * data (.data, and .tdata on RISC-V) is copied from __data_load to
 * [__data_start, __data_end); [__bss_start, __bss_end) is zeroed; the stack
 * occupies [__stack_bottom, __stack_top) at the bottom of RAM, so an overflow
 * runs off the start of RAM instead of silently into the arena. */
#include <string.h>

#include "fw.h"

extern uint8_t __data_load[], __data_start[], __data_end[], __bss_start[], __bss_end[];
extern uint32_t __stack_bottom[], __stack_top[];

#define STACK_PAINT 0x5741u /* any value unlikely to be a live word */
#define STACK_PAINT_WORD (STACK_PAINT * 0x00010001u)
#define PAINT_MARGIN_WORDS 64 /* leave the words near the live stack pointer alone */

void fw_start(uintptr_t sp) {
    memcpy(__data_start, __data_load, (size_t)(__data_end - __data_start));
    memset(__bss_start, 0, (size_t)(__bss_end - __bss_start));
    for (uint32_t *w = __stack_bottom; (uintptr_t)(w + PAINT_MARGIN_WORDS) < sp; w++) *w = STACK_PAINT_WORD;
    fw_exit(main());
}

size_t fw_stack_used(void) {
    const uint32_t *w = __stack_bottom;
    while (w < __stack_top && *w == STACK_PAINT_WORD) w++;
    return (size_t)((const uint8_t *)__stack_top - (const uint8_t *)w);
}

size_t fw_stack_reserved(void) { return (size_t)((const uint8_t *)__stack_top - (const uint8_t *)__stack_bottom); }

/* noinline + an empty asm: the call and the function survive optimisation. */
__attribute__((noinline)) void fw_mark(void) { __asm__ volatile("" ::: "memory"); }
