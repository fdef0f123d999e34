/* Stands in for the qemu monitor (qemu.c) until that lands: it never boots anything, and its
 * preflight says so, so choosing qemu is refused by name rather than replaced by another
 * monitor. Dropped when qemu.c is merged. */
#include <errno.h>

#include "backends/microvm/monitor.h"

static int placeholder_preflight(const struct microvm_config *cfg, struct microvm_preflight *out,
                                 struct cordon_error **err) {
  (void)cfg;
  return microvm_preflight_add(out, "monitor", "qemu monitor not built") < 0
             ? cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "preflight")
             : 0;
}

static int placeholder_boot(const struct microvm_config *cfg, struct microvm_vm *vm,
                            struct cordon_error **err) {
  (void)cfg;
  (void)vm;
  return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "qemu: qemu monitor not built");
}

static int placeholder_attach(const struct microvm_config *cfg, const char *state,
                              struct microvm_vm *vm, struct cordon_error **err) {
  (void)cfg;
  (void)state;
  (void)vm;
  return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "qemu: qemu monitor not built");
}

static int placeholder_exec(struct microvm_vm *vm, const struct microvm_config *cfg,
                            const struct cordon_exec_request *req, struct cordon_exec_result *res,
                            struct cordon_error **err) {
  (void)vm;
  (void)cfg;
  (void)req;
  (void)res;
  return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "qemu: qemu monitor not built");
}

static int placeholder_shutdown(struct microvm_vm *vm, struct cordon_error **err) {
  (void)vm;
  (void)err;
  return 0;
}

const struct microvm_monitor microvm_monitor_qemu = {
    .name = "qemu",
    .summary = "qemu-system-x86_64 -M microvm (not built in this tree)",
    .preflight = placeholder_preflight,
    .boot = placeholder_boot,
    .attach = placeholder_attach,
    .exec = placeholder_exec,
    .shutdown = placeholder_shutdown,
};
