/* The device cgroup rule of an ns sandbox: an eBPF program of type BPF_PROG_TYPE_CGROUP_DEVICE,
 * attached (BPF_CGROUP_DEVICE) to the session's cgroup v2, that lets the processes in it open
 * the nodes its /dev holds and the granted ones (--device, --gpu), and nothing else.
 *
 * The kernel runs the program at every open (and mknod) of a device node by a process of the
 * cgroup or of a cgroup beneath it, with the request's type, numbers and access; 1 allows, 0
 * denies (EPERM). It is built here by hand, a handful of instructions per rule, without libbpf:
 * confine_devfilter_build is pure (rules in, instructions out); the bpf(2) calls that load and
 * attach it, and read it back, are confine_devfilter_attach and confine_devfilter_count. */
#ifndef CORDON_CONFINE_DEVFILTER_H
#define CORDON_CONFINE_DEVFILTER_H

#include <linux/bpf.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>

/* A rule's type and access bits: the kernel's BPF_DEVCG_DEV_* and BPF_DEVCG_ACC_*. */
enum {
  CONFINE_DEV_BLOCK = BPF_DEVCG_DEV_BLOCK,
  CONFINE_DEV_CHAR = BPF_DEVCG_DEV_CHAR,
};
enum {
  CONFINE_DEV_MKNOD = BPF_DEVCG_ACC_MKNOD,
  CONFINE_DEV_READ = BPF_DEVCG_ACC_READ,
  CONFINE_DEV_WRITE = BPF_DEVCG_ACC_WRITE,
};
/* A rule's minor that matches any minor. */
#define CONFINE_DEV_ANY_MINOR UINT32_MAX
/* The largest numbers a device can have (12-bit major, 20-bit minor). */
#define CONFINE_DEV_MAJOR_MAX 0xfffu
#define CONFINE_DEV_MINOR_MAX 0xfffffu
/* How many rules one program takes (the defaults and every granted node fit many times). */
#define CONFINE_DEVFILTER_MAX_RULES 512

/* Allows a request of this type and numbers whose access is within `access`. */
struct confine_dev_rule {
  uint32_t type;       /* CONFINE_DEV_CHAR or CONFINE_DEV_BLOCK */
  uint32_t major;      /* exact, or the first of a range */
  uint32_t minor;      /* exact, or CONFINE_DEV_ANY_MINOR */
  uint32_t access;     /* a non-empty set of CONFINE_DEV_READ | _WRITE | _MKNOD */
  uint32_t major_last; /* the last major of a range major..major_last; 0 (or major): major alone */
};

/* Pure: the rules every ns sandbox gets, read and write, no mknod: the nodes its /dev holds
 * (null, zero, full, random, urandom) and the pseudo-terminal slaves (majors 136-143), which a
 * command reaches only by reopening a terminal it was handed as stdio (/dev/stdin is
 * /proc/self/fd/0): the sandbox mounts no devpts. */
size_t confine_devfilter_defaults(const struct confine_dev_rule **rules);

/* Pure: the program allowing exactly the requests one of `rules` allows (malloc'd into *insns,
 * its length in *count). Refused by name: no rule, too many, a type, access or number out of
 * range. */
int confine_devfilter_build(const struct confine_dev_rule *rules, size_t n_rules,
                            struct bpf_insn **insns, size_t *count, struct cordon_error **err);

/* Load the program and attach it to the cgroup v2 directory cgroup_fd (BPF_F_ALLOW_MULTI: a
 * program an ancestor attached the same way still runs, and every one must allow). Needs
 * CAP_BPF (or CAP_SYS_ADMIN) and a kernel with CONFIG_CGROUP_BPF; the error names what failed.
 * The program lives as long as the cgroup; nothing is left to close. */
int confine_devfilter_attach(int cgroup_fd, const struct bpf_insn *insns, size_t count,
                             struct cordon_error **err);

/* How many device programs are attached to the cgroup directory cgroup_fd itself
 * (BPF_PROG_QUERY). */
int confine_devfilter_count(int cgroup_fd, uint32_t *count, struct cordon_error **err);

#endif
