/* What every monitor shares: the preflight report (requirements and the one line that names
 * what is missing) and the test of whether KVM really works on this host. */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "backends/microvm/monitor.h"
#include "base/cleanup.h"

int microvm_preflight_add(struct microvm_preflight *p, const char *what, const char *missing_fmt,
                          ...) {
  if (p->count >= MICROVM_MAX_REQUIREMENTS)
    return -E2BIG;
  char *missing = NULL;
  if (missing_fmt) {
    va_list ap;
    va_start(ap, missing_fmt);
    int n = vasprintf(&missing, missing_fmt, ap);
    va_end(ap);
    if (n < 0)
      return -ENOMEM;
  }
  p->items[p->count].what = what;
  p->items[p->count].missing = missing;
  p->count++;
  return 0;
}

char *microvm_preflight_describe(const struct microvm_monitor *m,
                                 const struct microvm_preflight *p) {
  size_t length = strlen(m->name) + 2;
  size_t missing = 0;
  for (size_t i = 0; i < p->count; i++)
    if (p->items[i].missing) {
      length += strlen(p->items[i].missing) + 2;
      missing++;
    }
  if (missing == 0)
    return NULL;
  char *out = malloc(length + 1);
  if (!out)
    return NULL;
  char *at = out + sprintf(out, "%s: ", m->name);
  bool first = true;
  for (size_t i = 0; i < p->count; i++) {
    if (!p->items[i].missing)
      continue;
    at += sprintf(at, "%s%s", first ? "" : "; ", p->items[i].missing);
    first = false;
  }
  return out;
}

void microvm_preflight_clear(struct microvm_preflight *p) {
  for (size_t i = 0; i < p->count; i++)
    free(p->items[i].missing);
  memset(p, 0, sizeof(*p));
}

/* Whether the host's CPU flags offer hardware virtualisation to KVM (vmx or svm). A PVM-backed
 * /dev/kvm (KVM on a paravirtualised host, itself a guest) exposes neither. */
static bool cpu_has_virtualisation(void) {
  _cleanup_fclose_ FILE *f = fopen("/proc/cpuinfo", "re");
  if (!f)
    return false;
  char line[4096];
  while (fgets(line, sizeof(line), f)) {
    if (strncmp(line, "flags", 5) != 0)
      continue;
    for (char *tok = strtok(line + 5, " \t\n:"); tok; tok = strtok(NULL, " \t\n:"))
      if (strcmp(tok, "vmx") == 0 || strcmp(tok, "svm") == 0)
        return true;
    return false;
  }
  return false;
}

int microvm_kvm_usable(char **reason) {
  *reason = NULL;
  _cleanup_close_ int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    if (asprintf(reason, "/dev/kvm cannot be opened: %s", strerror(errno)) < 0)
      *reason = NULL;
    return 0;
  }
  const char *why = NULL;
  if (ioctl(fd, KVM_GET_API_VERSION, 0) != KVM_API_VERSION)
    why = "/dev/kvm does not speak the KVM API this build knows";
  else if (access("/sys/module/kvm_pvm", F_OK) == 0)
    why = "/dev/kvm is PVM-backed (module kvm_pvm): standard guest kernels hang under it";
  else if (!cpu_has_virtualisation())
    why = "the CPU offers no vmx or svm to KVM (a nested or paravirtualised host): standard "
          "guest kernels hang under it";
  if (!why)
    return 1;
  *reason = strdup(why);
  return 0;
}

int (*microvm_kvm_probe)(char **reason) = microvm_kvm_usable;
