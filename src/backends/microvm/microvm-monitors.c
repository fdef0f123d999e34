/* The table of monitors and how one is chosen: by the manifest's name, else the environment's,
 * else qemu. An unknown or unusable monitor is refused by name; none stands in for another.
 * Also the side-effect-free host lookups the monitors' preflights share. */
#include <sys/wait.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/microvm/microvm.h"
#include "base/cleanup.h"

static const struct microvm_monitor *const monitors[] = {
    &microvm_monitor_qemu,
    &microvm_monitor_firecracker,
    &microvm_monitor_libkrun,
    &microvm_monitor_fake,
};

const struct microvm_monitor *microvm_monitor_find(const char *name) {
  for (size_t i = 0; name && i < ARRAY_SIZE(monitors); i++)
    if (strcmp(monitors[i]->name, name) == 0)
      return monitors[i];
  return NULL;
}

const char *microvm_monitor_names(void) {
  return "qemu, firecracker, libkrun, fake";
}

int microvm_monitor_choose(const char *asked, const struct microvm_monitor **out,
                           struct cordon_error **err) {
  const char *name = asked;
  const char *from = "--monitor";
  if (!name || !*name) {
    name = getenv(MICROVM_MONITOR_ENV);
    from = MICROVM_MONITOR_ENV;
  }
  if (!name || !*name) {
    name = MICROVM_DEFAULT_MONITOR;
    from = "the default";
  }
  *out = microvm_monitor_find(name);
  if (*out)
    return 0;
  return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                          "unknown microvm monitor '%s' (%s); monitors: %s", name, from,
                          microvm_monitor_names());
}

const char *microvm_guest_dir(const struct microvm_config *cfg) {
  if (cfg && cfg->guest_dir && *cfg->guest_dir)
    return cfg->guest_dir;
  const char *env = getenv(MICROVM_GUEST_DIR_ENV);
  return env && *env ? env : MICROVM_DEFAULT_GUEST_DIR;
}

char *microvm_find_in_path(const char *program) {
  const char *path = getenv("PATH");
  if (!path)
    return NULL;
  _cleanup_free_ char *copy = strdup(path);
  char *save = NULL;
  for (char *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir;
       dir = strtok_r(NULL, ":", &save)) {
    if (dir[0] != '/') /* a relative entry would depend on our cwd */
      continue;
    char *candidate = NULL;
    if (asprintf(&candidate, "%s/%s", dir, program) < 0)
      return NULL;
    struct stat st;
    if (stat(candidate, &st) == 0 && S_ISREG(st.st_mode) && access(candidate, X_OK) == 0)
      return candidate;
    free(candidate);
  }
  return NULL;
}

bool microvm_path_is(const char *path, bool is_dir) {
  struct stat st;
  if (stat(path, &st) < 0)
    return false;
  return is_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode);
}

int microvm_preflight_kvm(struct microvm_preflight *p) {
  char *reason = NULL;
  int usable = microvm_kvm_probe(&reason);
  int r = usable
              ? microvm_preflight_add(p, "kvm", NULL)
              : microvm_preflight_add(p, "kvm", "%s", reason ? reason : "KVM is not usable here");
  free(reason);
  return r;
}

unsigned long long microvm_process_start(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
  if (n <= 0)
    return 0;
  buf[n] = 0;
  /* Field 22 (starttime), counted after the command name, which may hold spaces. */
  char *at = strrchr(buf, ')');
  unsigned long long start = 0;
  for (int field = 2; at && field < 22; field++)
    at = strchr(at + 1, ' ');
  return at && sscanf(at + 1, "%llu", &start) == 1 ? start : 0;
}

/* The state of a monitor whose only handle on its VM is the VMM process (firecracker,
 * libkrun): its pid and start time, so a reused pid is never taken for it. */
int microvm_vmm_attach(const char *monitor, const char *state, struct microvm_vm *vm,
                       struct cordon_error **err) {
  int pid = 0;
  unsigned long long start = 0;
  if (!state || sscanf(state, "{\"pid\":%d,\"start\":%llu}", &pid, &start) != 2 || pid <= 0)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "%s: no VMM in the state", monitor);
  /* A pid reused by another process is not our VMM: nothing to reach, nothing to stop. */
  vm->vmm_pid = microvm_process_start(pid) == start ? pid : 0;
  vm->vmm_start = start;
  vm->state = strdup(state);
  return vm->state ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", monitor);
}

void microvm_vmm_stop(struct microvm_vm *vm) {
  if (vm->vmm_pid > 0 && microvm_process_start(vm->vmm_pid) == vm->vmm_start) {
    kill(vm->vmm_pid, SIGKILL);
    waitpid(vm->vmm_pid, NULL, 0); /* ours when this process booted it; else ECHILD */
  }
  vm->vmm_pid = 0;
}
