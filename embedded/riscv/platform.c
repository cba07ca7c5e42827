/* RISC-V semihosting trap and the trap handler. */
#include "fw.h"

/* The semihosting call is an EBREAK between two marker instructions that
 * tell the debugger it is not a breakpoint: slli x0,x0,0x1f / ebreak /
 * srai x0,x0,7. They must be uncompressed and on one page, hence norvc and
 * the alignment. Operation in a0, parameter block in a1, result in a0. */
uintptr_t fw_semihost_call(uintptr_t op, const void *arg) {
    register uintptr_t a0 __asm__("a0") = op;
    register const void *a1 __asm__("a1") = arg;
    __asm__ volatile(".option push\n\t"
                     ".option norvc\n\t"
                     ".balign 16\n\t"
                     "slli x0, x0, 0x1f\n\t"
                     "ebreak\n\t"
                     "srai x0, x0, 7\n\t"
                     ".option pop"
                     : "+r"(a0)
                     : "r"(a1)
                     : "memory");
    return a0;
}

static uintptr_t read_mcause(void) {
    uintptr_t v;
    __asm__ volatile("csrr %0, mcause" : "=r"(v));
    return v;
}

static uintptr_t read_mepc(void) {
    uintptr_t v;
    __asm__ volatile("csrr %0, mepc" : "=r"(v));
    return v;
}

static uintptr_t read_mtval(void) {
    uintptr_t v;
    __asm__ volatile("csrr %0, mtval" : "=r"(v));
    return v;
}

/* mtvec target (direct mode, so 4-byte aligned). Never returns: report and
 * exit with 99, so a test sees a clear failure instead of a hung emulator. */
__attribute__((aligned(4), noreturn)) void fw_trap(void) {
    fw_eprint("FAULT: trap (mcause 0x%lx, mepc 0x%lx, mtval 0x%lx)\n", (unsigned long)read_mcause(),
              (unsigned long)read_mepc(), (unsigned long)read_mtval());
    fw_exit(99);
}
