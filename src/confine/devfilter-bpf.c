/* The device cgroup program's bpf(2) calls: load, attach, query (devfilter.h). The raw system
 * call, no libbpf: three commands with a few fields each. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "confine/devfilter.h"

static int sys_bpf(int cmd, union bpf_attr *attr) {
  return (int)syscall(SYS_bpf, cmd, attr, sizeof(*attr));
}

static uint64_t ptr_to_u64(const void *p) {
  return (uint64_t)(uintptr_t)p;
}

/* Why a load or attach was refused, in the operator's words. */
static const char *why(int e) {
  switch (e) {
  case EPERM:
  case EACCES: return " (it needs CAP_BPF or root on the host)";
  case ENOSYS: return " (this kernel has no bpf(2))";
  case EINVAL: return " (this kernel may lack CONFIG_CGROUP_BPF)";
  default: return "";
  }
}

/* Before Linux 5.11 a program was charged to RLIMIT_MEMLOCK: raise it as far as we may. */
static void raise_memlock(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_MEMLOCK, &rl);
  }
}

static int load(const struct bpf_insn *insns, size_t count, char *log, size_t log_size) {
  union bpf_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.prog_type = BPF_PROG_TYPE_CGROUP_DEVICE;
  attr.insns = ptr_to_u64(insns);
  attr.insn_cnt = (uint32_t)count;
  attr.license = ptr_to_u64("GPL");
  if (log) {
    log[0] = 0;
    attr.log_level = 1;
    attr.log_buf = ptr_to_u64(log);
    attr.log_size = (uint32_t)log_size;
  }
  return sys_bpf(BPF_PROG_LOAD, &attr);
}

int confine_devfilter_attach(int cgroup_fd, const struct bpf_insn *insns, size_t count,
                             struct cordon_error **err) {
  int fd = load(insns, count, NULL, 0);
  if (fd < 0 && errno == EPERM) {
    raise_memlock();
    fd = load(insns, count, NULL, 0);
  }
  if (fd < 0 && errno == EINVAL) {
    /* The verifier's word, for a program we got wrong. */
    char log[4096];
    fd = load(insns, count, log, sizeof(log));
    if (fd < 0) {
      int e = errno;
      /* its last line before the "processed N insns" summary says why */
      size_t len = strnlen(log, sizeof(log) - 1);
      log[len] = 0;
      for (int lines = 0; lines < 2; lines++) {
        while (len && log[len - 1] == '\n')
          log[--len] = 0;
        char *last = strrchr(log, '\n');
        if (strncmp(last ? last + 1 : log, "processed ", 10) != 0) {
          if (last)
            memmove(log, last + 1, strlen(last + 1) + 1);
          break;
        }
        len = last ? (size_t)(last - log) : 0;
        log[len] = 0;
      }
      return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, e,
                              "cannot load the device cgroup program%s%s%s", why(e),
                              log[0] ? ": " : "", log);
    }
  }
  if (fd < 0) {
    int e = errno;
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, e,
                            "cannot load the device cgroup program%s", why(e));
  }
  _cleanup_close_ int prog = fd;
  union bpf_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.target_fd = (uint32_t)cgroup_fd;
  attr.attach_bpf_fd = (uint32_t)prog;
  attr.attach_type = BPF_CGROUP_DEVICE;
  attr.attach_flags = BPF_F_ALLOW_MULTI;
  if (sys_bpf(BPF_PROG_ATTACH, &attr) < 0) {
    int e = errno;
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, e,
                            "cannot attach the device cgroup program to the session's cgroup%s",
                            why(e));
  }
  return 0; /* the attachment holds the program; our fd goes */
}

int confine_devfilter_count(int cgroup_fd, uint32_t *count, struct cordon_error **err) {
  union bpf_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.query.target_fd = (uint32_t)cgroup_fd;
  attr.query.attach_type = BPF_CGROUP_DEVICE;
  /* prog_ids NULL and prog_cnt 0: the kernel only counts */
  if (sys_bpf(BPF_PROG_QUERY, &attr) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno,
                            "cannot query the device programs of a cgroup");
  *count = attr.query.prog_cnt;
  return 0;
}
