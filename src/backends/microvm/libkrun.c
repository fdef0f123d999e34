/* The libkrun monitor. Preflight names every missing requirement without side effects:
 * libkrun.so.1 and libkrunfw.so.4 (libkrun's bundled guest kernel) are looked for as files in
 * the library path ($LD_LIBRARY_PATH, then the usual system directories), NOT dlopen'ed, so no
 * library constructor runs just to answer a question (the ld.so cache is not read: a library
 * found only through it is reported missing, never assumed); a /dev/kvm that really works;
 * the guest root directory (rootfs/ in the guest directory, libkrun boots from a host
 * directory); /dev/vhost-vsock; and the guest agent's vsock transport, which this tree does not
 * carry yet. So today libkrun is always refused, by name.
 *
 * Boot, for when all of that is present: a forked child dlopens libkrun and calls
 * krun_create_ctx, krun_set_vm_config, krun_set_root, krun_add_virtiofs (the workspace),
 * krun_set_workdir, krun_set_exec (the guest agent) and krun_start_enter, which becomes the
 * VM and does not return. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/microvm/microvm.h"
#include "base/cleanup.h"

#define LIBKRUN_SONAME "libkrun.so.1"
#define LIBKRUNFW_SONAME "libkrunfw.so.4"
#define LIBKRUN_ROOTFS "rootfs"
#define LIBKRUN_AGENT "/sbin/cordon-agent"
#define VHOST_VSOCK "/dev/vhost-vsock"

static const char *const system_lib_dirs[] = {
    "/lib64",
    "/usr/lib64",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/local/lib64",
    "/usr/local/lib",
    "/lib",
    "/usr/lib",
};

/* Whether `soname` is a file in one of the library path's directories. */
static bool library_on_path(const char *soname) {
  char path[4096];
  const char *env = getenv("LD_LIBRARY_PATH");
  if (env && *env) {
    _cleanup_free_ char *copy = strdup(env);
    char *save = NULL;
    for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save)) {
      snprintf(path, sizeof(path), "%s/%s", d, soname);
      if (d[0] == '/' && microvm_path_is(path, false))
        return true;
    }
  }
  for (size_t i = 0; i < ARRAY_SIZE(system_lib_dirs); i++) {
    snprintf(path, sizeof(path), "%s/%s", system_lib_dirs[i], soname);
    if (microvm_path_is(path, false))
      return true;
  }
  return false;
}

static int libkrun_preflight(const struct microvm_config *cfg, struct microvm_preflight *out,
                             struct cordon_error **err) {
  _cleanup_free_ char *rootfs = NULL;
  if (asprintf(&rootfs, "%s/%s", microvm_guest_dir(cfg), LIBKRUN_ROOTFS) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "preflight");
  out->accel = MICROVM_ACCEL_KVM;
  int r = 0;
  r |= microvm_preflight_add(
      out, "library",
      library_on_path(LIBKRUN_SONAME) ? NULL : "no " LIBKRUN_SONAME " on the library path");
  r |= microvm_preflight_add(out, "kernel",
                             library_on_path(LIBKRUNFW_SONAME) ? NULL
                                                               : "no " LIBKRUNFW_SONAME
                                                                 " (libkrun's guest kernel) on the "
                                                                 "library path");
  if (cfg && cfg->accel == MICROVM_ACCEL_TCG)
    r |= microvm_preflight_add(out, "accel", "libkrun runs only on KVM, and TCG was asked");
  r |= microvm_preflight_kvm(out);
  r |= microvm_path_is(rootfs, true)
           ? microvm_preflight_add(out, "rootfs", NULL)
           : microvm_preflight_add(out, "rootfs", "no guest root directory %s", rootfs);
  r |= microvm_preflight_add(out, "vsock",
                             access(VHOST_VSOCK, F_OK) == 0 ? NULL : "no " VHOST_VSOCK " (vsock)");
  r |= microvm_preflight_add(out, "agent",
                             "the guest agent's vsock transport is not built (it speaks "
                             "virtio-serial, under qemu only)");
  return r < 0 ? cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "preflight") : 0;
}

/* In the forked child: become the VM. Returns only on failure (the child then exits 1). */
static void krun_enter(const struct microvm_config *cfg) {
  void *h = dlopen(LIBKRUN_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return;
  int32_t (*create_ctx)(void) = (int32_t(*)(void))dlsym(h, "krun_create_ctx");
  int32_t (*set_vm_config)(uint32_t, uint8_t, uint32_t) =
      (int32_t(*)(uint32_t, uint8_t, uint32_t))dlsym(h, "krun_set_vm_config");
  int32_t (*set_root)(uint32_t, const char *) =
      (int32_t(*)(uint32_t, const char *))dlsym(h, "krun_set_root");
  int32_t (*add_virtiofs)(uint32_t, const char *, const char *) =
      (int32_t(*)(uint32_t, const char *, const char *))dlsym(h, "krun_add_virtiofs");
  int32_t (*set_workdir)(uint32_t, const char *) =
      (int32_t(*)(uint32_t, const char *))dlsym(h, "krun_set_workdir");
  int32_t (*set_exec)(uint32_t, const char *, const char *const *, const char *const *) =
      (int32_t(*)(uint32_t, const char *, const char *const *, const char *const *))dlsym(
          h, "krun_set_exec");
  int32_t (*start_enter)(uint32_t) = (int32_t(*)(uint32_t))dlsym(h, "krun_start_enter");
  if (!create_ctx || !set_vm_config || !set_root || !add_virtiofs || !set_workdir || !set_exec ||
      !start_enter)
    return;
  int32_t ctx = create_ctx();
  if (ctx < 0)
    return;
  char rootfs[4096];
  snprintf(rootfs, sizeof(rootfs), "%s/%s", microvm_guest_dir(cfg), LIBKRUN_ROOTFS);
  unsigned vcpus = cfg->vcpus ? cfg->vcpus : MICROVM_DEFAULT_VCPUS;
  uint64_t memory = cfg->memory_bytes ? cfg->memory_bytes : MICROVM_DEFAULT_MEMORY_BYTES;
  const char *root = cfg->root ? cfg->root : MICROVM_DEFAULT_ROOT;
  const char *const argv[] = {NULL};
  if (set_vm_config((uint32_t)ctx, (uint8_t)vcpus, (uint32_t)(memory >> 20)) < 0 ||
      set_root((uint32_t)ctx, rootfs) < 0 ||
      add_virtiofs((uint32_t)ctx, "workspace", cfg->workspace) < 0 ||
      set_workdir((uint32_t)ctx, root) < 0 ||
      set_exec((uint32_t)ctx, LIBKRUN_AGENT, argv, cfg->env) < 0)
    return;
  start_enter((uint32_t)ctx);
}

static int libkrun_boot(const struct microvm_config *cfg, struct microvm_vm *vm,
                        struct cordon_error **err) {
  /* The guest agent learns --pids from qemu's kernel command line only: refused, not ignored. */
  if (cfg->pids)
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "pids: monitor libkrun does not pass a process limit to the guest");
  pid_t pid = fork();
  if (pid < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "libkrun: fork");
  if (pid == 0) {
    krun_enter(cfg);
    _exit(1);
  }
  vm->vmm_pid = pid;
  vm->vmm_start = microvm_process_start(pid);
  if (asprintf(&vm->state, "{\"pid\":%d,\"start\":%llu}", (int)pid, vm->vmm_start) < 0) {
    vm->state = NULL;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "libkrun");
  }
  return 0;
}

static int libkrun_attach(const struct microvm_config *cfg, const char *state,
                          struct microvm_vm *vm, struct cordon_error **err) {
  (void)cfg;
  return microvm_vmm_attach("libkrun", state, vm, err);
}

static int libkrun_exec(struct microvm_vm *vm, const struct microvm_config *cfg,
                        const struct cordon_exec_request *req, struct cordon_exec_result *res,
                        struct cordon_error **err) {
  (void)vm;
  (void)cfg;
  (void)req;
  (void)res;
  return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                          "libkrun: the guest agent's vsock transport is not built");
}

static int libkrun_shutdown(struct microvm_vm *vm, struct cordon_error **err) {
  (void)err;
  microvm_vmm_stop(vm);
  return 0;
}

const struct microvm_monitor microvm_monitor_libkrun = {
    .name = "libkrun",
    .summary = "libkrun, dlopen'ed in a child (KVM only)",
    .preflight = libkrun_preflight,
    .boot = libkrun_boot,
    .attach = libkrun_attach,
    .exec = libkrun_exec,
    .shutdown = libkrun_shutdown,
};
