// insn.c: a qemu TCG plugin that counts the guest instructions a process
// executes (all threads; qemu-user runs each guest thread as a vCPU, counted
// apart and summed at exit) and prints the total. Used for
// the arm64 kernel instruction counts in bench/RESULTS.md:
//
//	clang-16 -O2 -shared -fPIC -o /tmp/libinsn.so bench/qemu-insn/insn.c
//	qemu-aarch64 -plugin /tmp/libinsn.so -cpu max ./ml.test ...
//
// It declares the few entry points of qemu's plugin API it uses (API
// version 1, qemu 7.x) instead of including qemu-plugin.h, which Debian's
// qemu-user does not ship.
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
    void (*cb)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb));
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
    void (*cb)(unsigned int vcpu_index, void *userdata),
    enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id,
    void (*cb)(qemu_plugin_id_t id, void *userdata), void *userdata);
void qemu_plugin_outs(const char *string);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

#define MAX_VCPUS 1024
static uint64_t count[MAX_VCPUS]; // each written by its own thread only

static void tb_exec(unsigned int vcpu, void *n) {
  if (vcpu < MAX_VCPUS) count[vcpu] += (uintptr_t)n;
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
  qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, QEMU_PLUGIN_CB_NO_REGS,
                                       (void *)(uintptr_t)qemu_plugin_tb_n_insns(tb));
}

static void at_exit(qemu_plugin_id_t id, void *p) {
  uint64_t sum = 0;
  for (int i = 0; i < MAX_VCPUS; i++)
    sum += count[i];
  char buf[64];
  snprintf(buf, sizeof buf, "insns %" PRIu64 "\n", sum);
  qemu_plugin_outs(buf);
}

__attribute__((visibility("default"))) int
qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                    char **argv) {
  qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
  qemu_plugin_register_atexit_cb(id, at_exit, NULL);
  return 0;
}
