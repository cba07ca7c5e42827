/* Host I/O through the semihosting interface (ARM's specification, which
 * RISC-V reuses): each operation is a parameter block of target-word-sized
 * fields handed to the debugger, here QEMU, by a trap instruction. */
#include <string.h>

#include "fw.h"

enum {
    SYS_OPEN = 0x01,
    SYS_CLOSE = 0x02,
    SYS_WRITE = 0x05,
    SYS_REMOVE = 0x0e,
    SYS_RENAME = 0x0f,
    SYS_GET_CMDLINE = 0x15,
    SYS_EXIT_EXTENDED = 0x20,
};

/* "The application exited" (ADP_Stopped_ApplicationExit): with it,
 * SYS_EXIT_EXTENDED's second field becomes the emulator's exit status. */
#define ADP_STOPPED_APPLICATION_EXIT 0x20026u

int fw_open(const char *path, int mode) {
    uintptr_t block[3] = {(uintptr_t)path, (uintptr_t)mode, (uintptr_t)strlen(path)};
    intptr_t h = (intptr_t)fw_semihost_call(SYS_OPEN, block);
    return h < 0 ? -1 : (int)h;
}

bool fw_write(int handle, const void *data, size_t n) {
    if (n == 0) return true;
    uintptr_t block[3] = {(uintptr_t)handle, (uintptr_t)data, (uintptr_t)n};
    return fw_semihost_call(SYS_WRITE, block) == 0; /* the result is the count NOT written */
}

bool fw_close(int handle) {
    uintptr_t block[1] = {(uintptr_t)handle};
    return fw_semihost_call(SYS_CLOSE, block) == 0;
}

bool fw_rename(const char *from, const char *to) {
    uintptr_t block[4] = {(uintptr_t)from, (uintptr_t)strlen(from), (uintptr_t)to, (uintptr_t)strlen(to)};
    return fw_semihost_call(SYS_RENAME, block) == 0;
}

bool fw_remove(const char *path) {
    uintptr_t block[2] = {(uintptr_t)path, (uintptr_t)strlen(path)};
    return fw_semihost_call(SYS_REMOVE, block) == 0;
}

bool fw_cmdline(char *buf, size_t cap) {
    if (cap == 0) return false;
    buf[0] = 0;
    uintptr_t block[2] = {(uintptr_t)buf, (uintptr_t)cap};
    bool ok = fw_semihost_call(SYS_GET_CMDLINE, block) == 0;
    if (!ok) buf[0] = 0;
    buf[cap - 1] = 0;
    return ok;
}

void fw_exit(int code) {
    uintptr_t block[2] = {ADP_STOPPED_APPLICATION_EXIT, (uintptr_t)(intptr_t)code};
    fw_semihost_call(SYS_EXIT_EXTENDED, block);
    for (;;) {
    }
}
