/* The landlock mechanism's pure decisions, apart from its system calls so tests can check them
 * on any kernel: which trees get which rights, which projects are refused, and what the
 * mechanism cannot enforce. */
#ifndef CORDON_AGENT_LANDLOCK_H
#define CORDON_AGENT_LANDLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>

#include "agent/policy.h"
#include "confine/seccomp.h"

/* Filesystem rights (uapi/linux/landlock.h). Debian 12's headers stop at ABI 2: the later
 * ones are spelled out here with the ABI that introduced them. */
#define AGENT_LL_EXECUTE (1ULL << 0)
#define AGENT_LL_WRITE_FILE (1ULL << 1)
#define AGENT_LL_READ_FILE (1ULL << 2)
#define AGENT_LL_READ_DIR (1ULL << 3)
#define AGENT_LL_REMOVE_DIR (1ULL << 4)
#define AGENT_LL_REMOVE_FILE (1ULL << 5)
#define AGENT_LL_MAKE_CHAR (1ULL << 6)
#define AGENT_LL_MAKE_DIR (1ULL << 7)
#define AGENT_LL_MAKE_REG (1ULL << 8)
#define AGENT_LL_MAKE_SOCK (1ULL << 9)
#define AGENT_LL_MAKE_FIFO (1ULL << 10)
#define AGENT_LL_MAKE_BLOCK (1ULL << 11)
#define AGENT_LL_MAKE_SYM (1ULL << 12)
#define AGENT_LL_REFER (1ULL << 13)     /* ABI 2 */
#define AGENT_LL_TRUNCATE (1ULL << 14)  /* ABI 3 */
#define AGENT_LL_IOCTL_DEV (1ULL << 15) /* ABI 5 */
/* Network rights (ABI 4) and scopes (ABI 6). */
#define AGENT_LL_NET_BIND_TCP (1ULL << 0)
#define AGENT_LL_NET_CONNECT_TCP (1ULL << 1)
#define AGENT_LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define AGENT_LL_SCOPE_SIGNAL (1ULL << 1)

/* The rights that apply to a file (not a directory): a rule on a file may hold only these. */
#define AGENT_LL_FILE_RIGHTS                                                         \
  (AGENT_LL_EXECUTE | AGENT_LL_WRITE_FILE | AGENT_LL_READ_FILE | AGENT_LL_TRUNCATE | \
   AGENT_LL_IOCTL_DEV)

/* What a ruleset handles (denies unless a rule grants it) on a kernel of this ABI. */
struct agent_landlock_handled {
  uint64_t fs;
  uint64_t net;    /* 0 below ABI 4, or when the policy's network is open */
  uint64_t scoped; /* 0 below ABI 6 */
};
void agent_landlock_handled_for(int abi, const char *net, struct agent_landlock_handled *out);

struct agent_landlock_grant {
  const char *path; /* borrowed from the policy, the tmp path or a static table */
  uint64_t access;  /* already masked to what the ABI handles; narrowed to AGENT_LL_FILE_RIGHTS
                       by the caller when the path is not a directory */
  bool optional;    /* a system path that may be missing on this host: skipped then */
};

/* The grants for policy on a kernel of this ABI, with the agent's private tmp at tmp_dir:
 * read+execute on the system trees and allow_ro; everything on the project, allow_rw and
 * tmp_dir; read+write on the terminal and the harmless devices. *out is malloc'd (the paths
 * inside are borrowed), *count its length. */
int agent_landlock_grants(const struct agent_policy *policy, const char *tmp_dir, int abi,
                          struct agent_landlock_grant **out, size_t *count,
                          struct cordon_error **err);

/* CORDON_ERR_DENIED when the project cannot be confined by Landlock: it lies at or under
 * tmp_base (where the private tmp is made: a shared, world-writable tree) or an allow_rw
 * tree (a writable grant around the project), or it contains tmp_base or a system tree that
 * only gets read rights (granting the project would make those writable). Pure. */
int agent_landlock_check_project(const struct agent_policy *policy, const char *tmp_base,
                                 struct cordon_error **err);

/* The lines of the policy Landlock does not enforce on a kernel of this ABI (see mechanism.h);
 * *out NULL-terminated. Pure. */
int agent_landlock_unenforced_lines(const struct agent_policy *policy, int abi, char ***out,
                                    struct cordon_error **err);

/* The seccomp program that refuses every socket family but AF_UNIX (landlock-net.c), for a
 * policy whose network is not open; out->filter is malloc'd. */
int agent_landlock_net_filter(struct confine_seccomp_program *out, struct cordon_error **err);
/* The same rule for x86-64's x32 ABI, a static program (NULL on other architectures). */
const struct confine_seccomp_program *agent_landlock_x32_socket_filter(void);

/* Where the private tmp directories are made. */
#define AGENT_LANDLOCK_TMP_BASE "/tmp"

#endif
