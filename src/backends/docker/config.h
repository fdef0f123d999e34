/* The docker backend's decisions, kept apart from the engine: path policy resolution (which
 * workspace paths become read-only binds, which are masked), and the container and exec
 * configurations sent to the engine. Only the policy resolution touches the filesystem (to
 * resolve paths beneath the workspace); building the JSON is pure.
 *
 * The path rules are the ns backend's (confine/policy.h and confine/resolve.h, issue 3 §2):
 * relative, non-empty, no "..", resolved without leaving the workspace (symlinks included),
 * each an existing regular file or directory, no overlaps within a list, no read-only path
 * under a hidden one, and `.cordon/` always hidden (with every member of the always-hidden set
 * of confine/private.h, in the workspace and in grants). */
#ifndef CORDON_BACKENDS_DOCKER_CONFIG_H
#define CORDON_BACKENDS_DOCKER_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cordon/backend.h>

#include "confine/resolve.h"

#define DOCKER_LABEL_SESSION "org.cordon.session"
#define DOCKER_LABEL_PROJECT "org.cordon.project"     /* the project's .cordon directory */
#define DOCKER_LABEL_EPHEMERAL "org.cordon.ephemeral" /* "1" for `cordon run` sessions */
#define DOCKER_LABEL_CREATOR "org.cordon.creator"     /* BOOTID:PID:STARTTIME of the creator */

struct docker_path {
  char *relative; /* resolved, workspace-relative, no symlinks */
  bool directory;
};

struct docker_paths {
  struct docker_path *read_only;
  size_t n_read_only;
  struct docker_path *hidden; /* includes .cordon when the workspace has one */
  size_t n_hidden;
};

/* Resolve and validate the policy's paths against the workspace (a real, absolute path). */
/* private_dirs: the always-hidden set (confine/private.h); its members beneath the workspace
 * are hidden too. */
int docker_paths_resolve(const char *workspace, const char *const *read_only,
                         const char *const *hidden, const char *const *private_dirs,
                         struct docker_paths *out, struct cordon_error **err);
void docker_paths_clear(struct docker_paths *paths);

/* What the engine can enforce (from GET /info). */
struct docker_engine_features {
  bool memory_limit, swap_limit, cpu_cfs_quota, pids_limit, seccomp;
  bool userns; /* the daemon runs with userns-remap: uid 0 inside is not the host's root */
  /* The engine has the "nvidia" runtime (nvidia-container-toolkit): what a GPU's device
   * request needs. Asked for only when NVIDIA nodes are granted. */
  bool nvidia_runtime;
};

struct docker_container_spec {
  const char *image;
  const char *session_id;
  const char *project_state_dir;
  const char *creator; /* creator_identity() of the creating process; NULL: unknown */
  bool ephemeral;
  const char *workspace;  /* host path (real) */
  const char *root;       /* where it appears in the container */
  const char *init_path;  /* host path of cordon-docker-init */
  const char *agent_dir;  /* host path of the exec agent's directory; NULL: no agent */
  const char *empty_file; /* host path of an empty read-only file, for hidden files */
  const char *user;       /* "UID:GID" */
  /* A read-only root file system (sessions resumed from a snapshot: race candidates and
   * judges): nothing a command does outside the workspace and /tmp (every container's own capped
   * tmpfs, HostConfig.Tmpfs) persists. */
  bool read_only_root;
  const char *network;                 /* NetworkMode */
  const struct confine_path *allow_ro; /* host paths granted read-only: source -> path */
  size_t n_allow_ro;
  const char *const *hidden_grant_dirs; /* container paths inside grants: empty tmpfs over each */
  const struct docker_paths *paths;
  const struct cordon_limits *limits;
  const struct docker_engine_features *features;
  /* Volumes (-v): canonical host directories (checked by the library) bound at their targets. */
  const struct cordon_volume *volumes;
  size_t n_volumes;
  /* Host paths of the identity files (docker_identity_files), bound read-only over /etc/passwd
   * and /etc/group; NULL: the image's own. */
  const char *passwd, *group;
  bool workspace_read_only; /* `--ro .`: the workspace and every bind inside it read-only */
  const char *cpuset; /* CpusetCpus ("0,1") for `--cpus N` with N whole; NULL: the quota only */
  /* Device nodes (--device, --gpu): the manifest's entries, HOST[:TARGET]; NULL: none. */
  const char *const *devices;
};

/* Pure: whether a manifest's device entries grant an NVIDIA node (a target /dev/nvidia*). */
bool docker_devices_need_nvidia(const char *const *devices);

/* The body of POST /containers/create. Refuses (by name) limits the engine cannot enforce. */
int docker_container_config(const struct docker_container_spec *spec, json_t **out,
                            struct cordon_error **err);

/* Who commands run as (the container's User), decided from the workspace's owner: as on ns,
 * uid/gid 1000 ("cordon") in a workspace cordon made (created as root, it was given to 1000
 * first); in a workspace the caller gave, its owner, since the engine cannot map ids and files
 * must stay the owner's. user_root: 0:0, which only an engine with userns-remap may give
 * (refused by name otherwise). */
int docker_command_identity(uid_t owner_uid, gid_t owner_gid, bool user_root,
                            const struct docker_engine_features *features, uid_t *uid, gid_t *gid,
                            struct cordon_error **err);
/* The /etc/passwd and /etc/group bound read-only into every container: the ns backend's users
 * (root, cordon 1000, nobody), so names resolve alike on both backends; cordon's home is the
 * private HOME (CORDON_SANDBOX_HOME), as on ns. malloc'd. */
int docker_identity_files(char **passwd, char **group, struct cordon_error **err);

/* The NetworkMode for an egress class: none and loopback give "none" (the container has only
 * its own loopback), open gives $CORDON_DOCKER_NETWORK or "bridge"; restricted is refused. */
int docker_network_mode(enum cordon_egress egress, const char *open_network, const char **out,
                        struct cordon_error **err);

struct docker_exec_spec {
  const char *const *argv;
  const char *const *env; /* the complete environment */
  const char *cwd;        /* absolute, inside the container */
  double timeout;         /* seconds; 0: none */
  bool attach_stdin;
  const char *token; /* names the wrapper for the kill-exec fallback */
};

/* The body of POST /containers/ID/exec: the command under the init's exec wrapper. */
int docker_exec_config(const struct docker_exec_spec *spec, json_t **out,
                       struct cordon_error **err);

#endif
