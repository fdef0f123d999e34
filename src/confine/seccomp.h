/* The seccomp filter of sandboxed commands: a deny list (EPERM, so programs fail cleanly rather
 * than die) of system calls that reach kernel surface a sandboxed program has no business with:
 * terminal injection, keyrings, module loading, mounts, namespaces, tracing other processes,
 * ASLR-weakening personalities. docs/security.md lists every entry and why. */
#ifndef CORDON_CONFINE_SECCOMP_H
#define CORDON_CONFINE_SECCOMP_H

#include <cordon/error.h>

#include <linux/filter.h>

/* The compiled filter: built once (libseccomp) by the holder, attached by each command just
 * before execve with one system call. */
struct confine_seccomp_program {
  struct sock_filter *filter; /* malloc'd */
  unsigned short length;
};

int confine_seccomp_build(struct confine_seccomp_program *out, struct cordon_error **err);

/* Build the filter and load it into the calling thread (setting no_new_privs) in one go; what
 * the caller forks afterwards inherits it. (Used by the docker backend's in-container init.) */
int confine_seccomp_install(struct cordon_error **err);

/* Attach the program to the calling thread. no_new_privs must be set already (or the caller
 * must hold CAP_SYS_ADMIN). Async-signal-safe; returns 0 or -errno. */
int confine_seccomp_attach(const struct confine_seccomp_program *program);

/* Names of the denied system calls (NULL-terminated), for documentation and tests. */
extern const char *const confine_seccomp_denied[];

#endif
