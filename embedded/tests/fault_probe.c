/* A firmware that faults. The trap handlers must report the fault and exit
 * with 99 instead of hanging the emulator; `make test-embedded` checks that. */
#include "fw.h"

int main(void) {
    fw_print("fault-probe: executing a trap instruction\n");
    __builtin_trap();
}
