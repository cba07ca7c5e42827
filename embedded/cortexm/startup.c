/* Cortex-M (ARMv7-M / ARMv8-M mainline) startup: the vector table, reset,
 * FPU enable, fault reporting and the semihosting trap. */
#include "fw.h"

extern uint32_t __stack_top[];

/* BKPT 0xAB is the M-profile semihosting call: operation in r0, parameter
 * block in r1, result in r0. */
uintptr_t fw_semihost_call(uintptr_t op, const void *arg) {
    register uintptr_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

#define CPACR (*(volatile uint32_t *)0xE000ED88u)
#define CFSR (*(volatile uint32_t *)0xE000ED28u)
#define HFSR (*(volatile uint32_t *)0xE000ED2Cu)
#define MMFAR (*(volatile uint32_t *)0xE000ED34u)
#define BFAR (*(volatile uint32_t *)0xE000ED38u)

__attribute__((noreturn)) void Reset_Handler(void) {
#if defined(__ARM_FP)
    /* Coprocessors 10 and 11 (the FPU) are off at reset: the first float
     * instruction would fault with NOCP. Grant full access first. */
    CPACR |= 0xFu << 20;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
#endif
    uintptr_t sp;
    __asm__ volatile("mov %0, sp" : "=r"(sp));
    fw_start(sp);
}

/* Faults print what the System Control Block recorded and exit with 99, so a
 * test sees a clear failure instead of a hung emulator. */
__attribute__((noreturn)) static void fault(const char *what) {
    fw_eprint("FAULT: %s (CFSR 0x%x, HFSR 0x%x, MMFAR 0x%x, BFAR 0x%x)\n", what, (unsigned)CFSR, (unsigned)HFSR,
              (unsigned)MMFAR, (unsigned)BFAR);
    fw_exit(99);
}

void NMI_Handler(void) { fault("NMI"); }
void HardFault_Handler(void) { fault("HardFault"); }
void MemManage_Handler(void) { fault("MemManage"); }
void BusFault_Handler(void) { fault("BusFault"); }
void UsageFault_Handler(void) { fault("UsageFault"); }
void Unexpected_Handler(void) { fault("unexpected exception or interrupt"); }

typedef void (*vector)(void);

/* 16 architectural entries, then the device interrupts (the MPS2 FPGA images
 * have 32; none is enabled here). */
__attribute__((section(".isr_vector"), used)) const vector fw_vectors[16 + 32] = {
    (vector)(uintptr_t)__stack_top,
    Reset_Handler,
    NMI_Handler,
    HardFault_Handler,
    MemManage_Handler,
    BusFault_Handler,
    UsageFault_Handler,
    [7 ... 10] = 0, /* reserved */
    Unexpected_Handler, /* SVCall */
    Unexpected_Handler, /* DebugMonitor */
    0,
    Unexpected_Handler, /* PendSV */
    Unexpected_Handler, /* SysTick */
    [16 ... 47] = Unexpected_Handler,
};
