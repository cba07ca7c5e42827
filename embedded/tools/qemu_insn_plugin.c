/* A QEMU TCG plugin that counts executed guest instructions, exactly and
 * deterministically (one vCPU, no timing involved), and records the running
 * count each time the guest executes a marker address: firmware calls an
 * empty function (fw_mark) at phase boundaries, so the difference between
 * two marks is the instruction count of one token or one training step.
 *
 *   qemu-system-arm ... -plugin libinsn.so,mark=0x1234 -d plugin -D out.txt
 *
 * prints "mark <i> <count>" for every execution of the marker and
 * "total <count>" at exit. Debian ships QEMU with plugin support but no
 * qemu-plugin.h, so the few declarations of the (version 1) API used here are
 * written out below; they match QEMU 7.2's include/qemu/qemu-plugin.h. */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the QEMU plugin API (v1), declared by hand ---------------------------- */
typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t; /* only passed through */
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn, enum qemu_plugin_op op, void *ptr,
                                                uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
void qemu_plugin_outs(const char *string);

#define EXPORT __attribute__((visibility("default")))
EXPORT int qemu_plugin_version = 1;

/* ---- counting ---------------------------------------------------------------- */

/* One vCPU: plain counters are exact. Every instruction adds one to `insns`
 * inline as it executes (counting per instruction rather than per block keeps
 * the count right when a block is left early, e.g. by a fault). */
static uint64_t insns;
static uint64_t mark_addr;
static bool have_mark;
static uint64_t n_marks;

static void on_mark(unsigned int vcpu, void *userdata) {
    (void)vcpu;
    (void)userdata;
    char line[64];
    snprintf(line, sizeof line, "mark %" PRIu64 " %" PRIu64 "\n", n_marks++, insns);
    qemu_plugin_outs(line);
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    size_t n = qemu_plugin_tb_n_insns(tb);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &insns, 1);
        if (have_mark && qemu_plugin_insn_vaddr(insn) == mark_addr)
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_mark, QEMU_PLUGIN_CB_NO_REGS, NULL);
    }
}

static void report_total(qemu_plugin_id_t id, void *userdata) {
    (void)id;
    (void)userdata;
    char line[64];
    snprintf(line, sizeof line, "total %" PRIu64 "\n", insns);
    qemu_plugin_outs(line);
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
    (void)info;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "mark=", 5) == 0) {
            char *end;
            /* Thumb function symbols carry the interworking bit: drop it. */
            mark_addr = strtoull(argv[i] + 5, &end, 0) & ~(uint64_t)1;
            have_mark = *end == 0 && end != argv[i] + 5;
            if (!have_mark) {
                fprintf(stderr, "insn plugin: bad marker address '%s'\n", argv[i] + 5);
                return -1;
            }
        } else {
            fprintf(stderr, "insn plugin: unknown argument '%s' (expected mark=ADDRESS)\n", argv[i]);
            return -1;
        }
    }
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, report_total, NULL);
    return 0;
}
