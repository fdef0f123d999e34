/* The OCI runtime spec (config.json) that carries a path policy into gVisor's `runsc`: the
 * pieces both users share, so the gvisor backend (src/backends/gvisor/spec.c) and the agent's
 * gvisor mechanism (src/agent/gvisor.c) lower a policy by the same code. Pure: no file is
 * touched; the callers resolve the paths (canonical, beneath the workspace) first. */
#ifndef CORDON_CONFINE_OCI_H
#define CORDON_CONFINE_OCI_H

#include <stdbool.h>

#include <jansson.h>

#include <cordon/error.h>

/* One mount; options is NULL-terminated. 0, or -1 when out of memory. */
int oci_add_mount(json_t *mounts, const char *destination, const char *type, const char *source,
                  const char *const *options);

/* A recursive bind of source at destination, read-write or read-only, nosuid and nodev. */
int oci_add_bind(json_t *mounts, const char *destination, const char *source, bool writable);

/* A workspace and its path policy, as mounts. Paths in the lists are canonical and relative to
 * the workspace (normalised, resolved beneath it with no symlink leaving it). */
struct oci_workspace {
  const char *host;   /* the workspace on the host */
  const char *inside; /* where it appears inside */
  /* The directories between the workspace root and each protected path
   * (confine_protected_ancestors), parents first: each is bound onto itself read-write, so it is
   * a mount point, which gVisor (as Linux) refuses to rename or remove (EBUSY). Without that,
   * `mv deep x; mkdir -p deep/hooks` carries `--ro deep/hooks` away and what is made at the
   * protected name lands on the host. */
  char *const *pinned;
  char *const *read_only;    /* re-bound read-only over themselves */
  char *const *hidden_dirs;  /* an empty tmpfs of mode 000 */
  char *const *hidden_files; /* empty_file bound read-only over them */
  const char *empty_file;    /* an empty, unreadable host file */
  /* Optional: a path beneath a hidden directory bound back read-only on top (the agent's
   * .cordon/agent-visible); the hidden directory holding it keeps search rights (mode 111) so
   * that mount stays reachable. */
  const char *visible;
};

/* The workspace, then the pins, the read-only re-binds, the hidden masks and the visible path,
 * in the order the mounts must stack. 0, or -1 when out of memory. */
int oci_workspace_mounts(json_t *mounts, const struct oci_workspace *w);

/* runsc's --network for a sandbox: "host" when the network is open, else "none" (gVisor's own
 * network stack with loopback only: nothing leaves the sandbox). */
const char *oci_runsc_network(bool open);

/* The namespaces: pid, ipc, uts and mount always; user when asked (id mappings are the caller's);
 * network unless the network is open. */
json_t *oci_namespaces(bool user, bool open_network);

/* A process: argv, env (both NULL-terminated), cwd, uid and gid, every capability set empty and
 * no_new_privs. */
json_t *oci_process(const char *const *argv, const char *const *env, const char *cwd, unsigned uid,
                    unsigned gid, bool terminal);

/* The spec from its parts (stolen, also on failure): a read-only root at root_path. */
int oci_spec(json_t *process, const char *root_path, const char *hostname, json_t *mounts,
             json_t *namespaces, json_t **out, struct cordon_error **err);

#endif
