// insn.c: a qemu TCG plugin that counts the guest instructions a process
// executes (all threads together) and prints the total at exit. Used for
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
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id,
    void (*cb)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb));
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb,
    enum qemu_plugin_op op, void *ptr, uint64_t imm);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id,
    void (*cb)(qemu_plugin_id_t id, void *userdata), void *userdata);
void qemu_plugin_outs(const char *string);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

static uint64_t count; // racy across guest threads; benchmarks run one

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
  qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64,
                                           &count, qemu_plugin_tb_n_insns(tb));
}

static void at_exit(qemu_plugin_id_t id, void *p) {
  char buf[64];
  snprintf(buf, sizeof buf, "insns %" PRIu64 "\n", count);
  qemu_plugin_outs(buf);
}

__attribute__((visibility("default"))) int
qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                    char **argv) {
  qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
  qemu_plugin_register_atexit_cb(id, at_exit, NULL);
  return 0;
}
