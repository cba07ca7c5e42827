/* RISC-V (RV64, machine mode, no OS) reset: QEMU's virt board with -bios none
 * jumps here with the hart in M-mode and nothing set up. */
    .section .text.start, "ax"
    .global _start
_start:
    .option push
    .option norelax
    la gp, __global_pointer$    /* small-data base, for linker relaxation */
    .option pop
    la sp, __stack_top
    la tp, __tls_base           /* picolibc keeps errno in thread-local storage */
    la t0, fw_trap
    csrw mtvec, t0              /* any trap reports itself and exits */
    li t0, 1 << 13
    csrs mstatus, t0            /* mstatus.FS = Initial: the FPU is off at reset */
    csrwi fcsr, 0
    mv a0, sp
    call fw_start
1:  j 1b
