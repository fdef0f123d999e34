/* The seccomp filter of sandboxed commands: a deny list (EPERM, so programs fail cleanly rather
 * than die) of system calls that reach kernel surface a sandboxed program has no business with:
 * terminal injection, keyrings, module loading, mounts, namespaces, tracing other processes,
 * ASLR-weakening personalities. docs/security.md lists every entry and why. */
#ifndef CORDON_CONFINE_SECCOMP_H
#define CORDON_CONFINE_SECCOMP_H

#include <cordon/error.h>

#include <linux/filter.h>

/* A compiled filter (classic BPF), ready for seccomp(SECCOMP_SET_MODE_FILTER). */
struct confine_seccomp_program {
  struct sock_filter *filter; /* malloc'd */
  unsigned short length;
};

int confine_seccomp_build(struct confine_seccomp_program *out, struct cordon_error **err);

/* Build the filter and load it into the calling thread (setting no_new_privs) in one go; what
 * the caller forks afterwards inherits it. (Used by the docker backend's in-container init.) */
int confine_seccomp_install(struct cordon_error **err);

/* The same program, compiled at build time (seccomp-gen): attaching it costs one system call
 * and no compilation. Part of libcordon only. */
const struct confine_seccomp_program *confine_seccomp_prebuilt(void);

/* Attach the program to the calling thread. no_new_privs must be set already (or the caller
 * must hold CAP_SYS_ADMIN). Async-signal-safe; returns 0 or -errno. */
int confine_seccomp_attach(const struct confine_seccomp_program *program);

/* Names of the denied system calls (NULL-terminated), for documentation and tests. */
extern const char *const confine_seccomp_denied[];

#endif
