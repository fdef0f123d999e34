/* cordon — the backend protocol.
 *
 * A backend is a `const struct cordon_backend`: a name, a capability set, an isolation tier
 * and operations. `create`/`resume`/`attach`/`destroy` manage sessions; a session offers
 * read, write, exec, ls, snapshot and shutdown. Callers go through the cordon_session_*
 * wrappers (include/cordon/session.h), which validate arguments, check capabilities and
 * persist session state; backends implement the raw operations below.
 *
 * Plugins are shared objects exporting CORDON_PLUGIN_ENTRY_SYMBOL, a function of type
 * cordon_plugin_entry_fn that returns the backend and stores the ABI version it was built
 * against. A mismatch with CORDON_BACKEND_ABI_VERSION is refused by name.
 *
 * A backend declares the policy features it enforces (`enforces`, CORDON_FEATURE_*). The library
 * compares them with what a manifest asks for (cordon_policy_features) before the backend sees
 * it: a request the backend does not enforce is refused by name, unless the manifest lifts
 * require_enforcement, and then the waiver is recorded in the project's audit chain. */
#ifndef CORDON_BACKEND_H
#define CORDON_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CORDON_BACKEND_ABI_VERSION 3u
#define CORDON_PLUGIN_ENTRY_SYMBOL "cordon_plugin_entry"

enum cordon_capability {
  CORDON_CAP_FILE_RW = 1u << 0,
  CORDON_CAP_EXEC = 1u << 1,
  CORDON_CAP_NETWORK = 1u << 2,
  CORDON_CAP_GPU = 1u << 3,
  CORDON_CAP_SNAPSHOT = 1u << 4,
  CORDON_CAP_PERSISTENT_VOLUMES = 1u << 5,
  /* exec honours cordon_exec_request.caller_stdio (the command writes to the caller's fds).
   * A backend without it (a plugin built before the field) gets a capturing request and the
   * library copies the output to the caller's fds when the command has ended. */
  CORDON_CAP_CALLER_STDIO = 1u << 6,
};
#define CORDON_CAP_COUNT 7

/* Ordered: a higher tier isolates more. */
enum cordon_isolation_tier {
  CORDON_TIER_NONE = 0,
  CORDON_TIER_PROCESS,
  CORDON_TIER_CONTAINER,
  CORDON_TIER_VM,
};

/* Ordered: a higher class lets more traffic out. */
enum cordon_egress {
  CORDON_EGRESS_NONE = 0,
  CORDON_EGRESS_LOOPBACK,
  CORDON_EGRESS_RESTRICTED,
  CORDON_EGRESS_OPEN,
};

/* Policy features a backend enforces. Each is a restriction: a backend that declares one applies
 * it whenever a manifest asks for it, or refuses the manifest naming it when this host cannot
 * (a memory limit without a cgroup). Egress `open` restricts nothing, so it is no feature. */
enum cordon_policy_feature {
  CORDON_FEATURE_READ_ONLY_PATHS = 1u << 0, /* policy.read_only */
  CORDON_FEATURE_HIDDEN_PATHS = 1u << 1,    /* policy.hidden */
  CORDON_FEATURE_HOST_GRANTS = 1u << 2,     /* policy.allow_ro: only these host paths, read-only */
  CORDON_FEATURE_MEMORY = 1u << 3,          /* limits.memory_bytes */
  CORDON_FEATURE_PIDS = 1u << 4,            /* limits.pids */
  CORDON_FEATURE_CPU = 1u << 5,             /* limits.cpus */
  CORDON_FEATURE_NOFILE = 1u << 6,          /* limits.nofile */
  CORDON_FEATURE_FSIZE = 1u << 7,           /* limits.fsize_bytes */
  CORDON_FEATURE_TMP_SIZE = 1u << 8,        /* a cap on /tmp and /dev/shm */
  CORDON_FEATURE_NET_NONE = 1u << 9,        /* egress none */
  CORDON_FEATURE_NET_LOOPBACK = 1u << 10,   /* egress loopback */
  CORDON_FEATURE_NET_RESTRICTED = 1u << 11, /* egress restricted */
};
#define CORDON_FEATURE_COUNT 12
#define CORDON_FEATURE_ALL ((1u << CORDON_FEATURE_COUNT) - 1u)

CORDON_API const char *cordon_capability_name(enum cordon_capability cap);
/* "read_only_paths", "hidden_paths", "host_grants", "memory", "pids", "cpu", "nofile", "fsize",
 * "tmp_size", "net_none", "net_loopback", "net_restricted". */
CORDON_API const char *cordon_feature_name(enum cordon_policy_feature feature);
CORDON_API const char *cordon_tier_name(enum cordon_isolation_tier tier);
CORDON_API const char *cordon_egress_name(enum cordon_egress egress);
/* Parse a name ("none", "loopback", ...); returns -1 when unknown. */
CORDON_API int cordon_egress_parse(const char *name, enum cordon_egress *out);

/* ---- workspace manifest ------------------------------------------------------------------ */

/* All string arrays in the manifest are NULL-terminated; NULL means empty. */

struct cordon_file_spec {
  const char *path; /* relative to the workspace */
  const void *content;
  size_t length;
  unsigned mode; /* permission bits; 0 means 0644 */
};

struct cordon_repo_spec {
  const char *source;              /* a local git repository */
  const char *branch;              /* NULL: the repository's HEAD */
  const char *const *sparse_paths; /* NULL: the whole tree */
};

/* Zero means "no limit requested". A requested limit that cannot be enforced is refused. */
struct cordon_limits {
  uint64_t memory_bytes;
  uint64_t pids;
  double cpus;     /* CPU bandwidth in cores, e.g. 0.5 */
  uint64_t nofile; /* RLIMIT_NOFILE */
  /* RLIMIT_FSIZE. 0: CORDON_DEFAULT_FSIZE_BYTES on the backends that enforce rlimits (ns,
   * docker), so that no sandboxed command fills the host's disk with one file unless asked to;
   * CORDON_LIMIT_UNLIMITED: none (not a requested limit). */
  uint64_t fsize_bytes;
  uint64_t tmp_bytes; /* size of the sandbox's /tmp and of its /dev/shm, each; 0: the memory
                         limit when there is one, else CORDON_DEFAULT_TMP_BYTES */
};

/* 4 GiB: above any source file, build product or test fixture a command should write in a
 * workspace; a sparse file's apparent size counts, so a 100 GiB hole is refused too. */
#define CORDON_DEFAULT_FSIZE_BYTES ((uint64_t)4 << 30)
#define CORDON_LIMIT_UNLIMITED UINT64_MAX
/* The size of /tmp and of /dev/shm (each) when neither a size nor a memory limit is given. */
#define CORDON_DEFAULT_TMP_BYTES (1ull << 30)

struct cordon_policy {
  const char *const *read_only;    /* workspace-relative paths mounted read-only */
  const char *const *hidden;       /* workspace-relative paths masked (empty dir / empty file) */
  const char *const *allow_ro;     /* extra absolute host paths granted read-only */
  const char *const *system_paths; /* NULL: the backend's default list of system directories */
  enum cordon_egress egress;
  struct cordon_limits limits;
  /* Refuse a manifest asking for a feature the backend does not enforce (and any fallback to
   * running unconfined). false: run without those features; the library records the waiver in
   * the project's audit chain ("enforcement.waived") before the backend starts. */
  bool require_enforcement;
};

/* The features a policy asks for (pure): one bit per non-empty path list and non-zero limit,
 * and the egress class unless it is open. */
CORDON_API uint32_t cordon_policy_features(const struct cordon_policy *policy);

/* A directory mounted into the sandbox outside the workspace (`-v SOURCE:TARGET[:ro]`). */
struct cordon_volume {
  /* A volume name (CORDON_VOLUME_NAME_MAX bytes of [A-Za-z0-9_.-], the first alphanumeric),
   * kept in the project's state as .cordon/volumes/NAME (made on first use, outliving every
   * session, never part of a workspace snapshot); or an existing host directory (absolute),
   * which must not be, contain or lie inside a .cordon/, the key directory or cordon's state
   * home. A backend receives the canonical host directory here either way. */
  const char *source;
  /* Absolute path inside the sandbox: not /, not the workspace root or anything in or above
   * it, nor in or above /proc, /sys, /dev, /tmp, /run, /boot, /etc or the system directories
   * (/usr, /bin, /sbin, /lib*, /opt); no two volumes in or above each other. */
  const char *target;
  bool read_only; /* `:ro`: every write inside fails */
};
#define CORDON_VOLUME_NAME_MAX 64

struct cordon_manifest {
  const char *root;      /* where the workspace appears inside the sandbox; NULL: "/workspace" */
  const char *workspace; /* existing host directory to use; NULL: a fresh one in session state */
  const struct cordon_repo_spec *repo; /* NULL: no repository */
  const struct cordon_file_spec *files;
  size_t n_files;
  const char *const *env; /* "KEY=VALUE" entries, the session's base environment additions */
  double default_timeout; /* seconds for exec when the request gives none; 0: no timeout */
  const char *image;      /* container/VM image for backends that use one; NULL: default */
  bool ephemeral; /* destroyed by the process that creates it (`cordon run`): state files are
                     written atomically but without fsync, and backends may skip persistence */
  struct cordon_policy policy;
  bool one_shot; /* the session runs exactly one exec (a second is refused): backends may build
                    the sandbox with the command instead of ahead of it. Snapshot stays
                    available after the exec. */
  /* Persistent volumes and host binds (CORDON_CAP_PERSISTENT_VOLUMES): a backend without the
   * capability is refused any. The library checks them and hands the backend a copy of the
   * manifest in which every source is the canonical host directory to bind. */
  const struct cordon_volume *volumes;
  size_t n_volumes;
  /* Run commands as root (uid 0) inside instead of the sandbox user (uid 1000, "cordon"), where
   * the backend can offer it without host privileges (ns: root of the sandbox's user namespace,
   * with no capabilities). A backend that cannot refuses it by name; plugins (ABI 3) never see
   * it: the library refuses it for them. */
  bool user_root;
  /* Added within ABI 3 (zeroed by older callers; plugins never see them set: the library
   * refuses a manifest with them for a backend that does not declare them). */
  /* --net restricted: what the host-side egress proxy lets through (src/net/). NULL: nothing
   * but what the class itself allows. */
  const struct cordon_egress_rules *egress_rules;
  /* microvm: the monitor that runs the VM ("qemu", "firecracker", "libkrun", "fake"); NULL:
   * the backend's default. Any other backend refuses a non-NULL value by name. */
  const char *monitor;
  /* Device nodes granted to the sandbox (--device, --gpu), NULL-terminated: "HOST" or
   * "HOST:TARGET", HOST a character device node on the host, TARGET (beneath /dev) where it
   * appears inside; without it a node under /dev keeps its path, any other appears as
   * /dev/BASENAME. Only ns and docker take devices: the library refuses them for any other
   * backend, plugins included, by name. */
  const char *const *devices;
};

/* The rules of egress class `restricted`, enforced by a proxy outside the sandbox. */
struct cordon_egress_rules {
  const char *const *allow_domains; /* "example.com" (exactly), "*.example.com" (subdomains
                                       only); case-insensitive, a trailing dot tolerated */
  const char *const *allow_cidrs;   /* "10.1.0.0/16", "fd00::/8": ranges opened back in */
  const char *const *resolve;       /* "NAME:ADDR" pins, like curl's --resolve */
};

/* ---- exec --------------------------------------------------------------------------------- */

#define CORDON_EXEC_DEFAULT_MAX_OUTPUT (16u * 1024u * 1024u)

struct cordon_exec_request {
  const char *const *argv; /* argv[0] is looked up in PATH when it has no '/'; never a shell */
  const char *cwd;         /* NULL: the workspace root; relative: under the workspace */
  const char *const *env;  /* "KEY=VALUE" merged over the base environment */
  bool clear_env;          /* start from an empty environment instead of the base */
  double timeout;          /* seconds; 0: the session default; < 0: none */
  const void *stdin_data;  /* NULL: stdin is /dev/null */
  size_t stdin_length;
  size_t max_output; /* per stream; 0: CORDON_EXEC_DEFAULT_MAX_OUTPUT */
  /* Streaming (added within ABI 3; a zeroed tail means capture, as before). caller_stdio: the
   * command's stdout and stderr are stdio_fds[1] and [2] (the caller keeps them), nothing is
   * captured and the result's data is empty; its stdin is stdio_fds[0] when >= 0, else
   * stdin_data or /dev/null as above. Backends that declare CORDON_CAP_CALLER_STDIO hand the
   * fds to the command; for the others the library captures and copies (stdin read first). */
  bool caller_stdio;
  int stdio_fds[3];
  /* stdio_fds[0] is a terminal (the slave of a pty the caller relays): the command, a session
   * leader, makes it its controlling terminal. Needs CORDON_CAP_CALLER_STDIO. */
  bool tty;
};

struct cordon_exec_result {
  int exit_code;   /* 0..255; 128+N when killed by signal N; 126 cannot execute; 127 not found */
  int term_signal; /* the signal that ended the command, 0 when it exited */
  bool timed_out;  /* the timeout fired and the command's process tree was killed */
  unsigned char *stdout_data; /* NUL-terminated for convenience; stdout_length excludes it */
  size_t stdout_length;
  uint64_t stdout_total; /* bytes the command wrote, including those past the bound */
  bool stdout_truncated;
  unsigned char *stderr_data;
  size_t stderr_length;
  uint64_t stderr_total;
  bool stderr_truncated;
  double duration; /* seconds, monotonic */
  /* Added after ABI 3 (zero from older backends): */
  bool oom_killed; /* killed by the sandbox's memory limit (not by any other SIGKILL) */
  /* 127 (not found) or 126 (cannot execute) when the backend could not execve the command
   * (exit_code is the same); 0 when it ran, whatever it exited with. */
  int exec_failure;
};

CORDON_API void cordon_exec_result_clear(struct cordon_exec_result *res);

/* ---- directory listings ------------------------------------------------------------------- */

enum cordon_file_kind {
  CORDON_KIND_FILE = 0,
  CORDON_KIND_DIRECTORY,
  CORDON_KIND_SYMLINK,
  CORDON_KIND_OTHER,
};

struct cordon_dirent {
  char *name;
  enum cordon_file_kind kind;
  unsigned mode; /* permission bits */
  uint64_t size;
};

CORDON_API const char *cordon_file_kind_name(enum cordon_file_kind kind);
CORDON_API void cordon_dirents_free(struct cordon_dirent *entries, size_t count);

/* ---- sessions and backends ---------------------------------------------------------------- */

struct cordon_context;

/* A live session. The library fills id, ctx, backend, state_dir, root, env and
 * default_timeout before calling create/resume/attach; the backend fills workspace,
 * backend_state (a JSON object as text, persisted in the session's state file and handed back
 * to attach in a later process) and impl (in-process data, freed by release). */
struct cordon_session {
  const struct cordon_backend *backend;
  struct cordon_context *ctx;
  char *id;
  char *state_dir; /* <project>/.cordon/sessions/<id> */
  char *workspace; /* host path of the workspace directory */
  char *root;      /* workspace path inside the sandbox */
  char **env;      /* base environment additions, "KEY=VALUE", NULL-terminated */
  double default_timeout;
  char *backend_state;
  void *impl;
  bool shut_down;
  bool ephemeral; /* from the manifest */
  bool one_shot;  /* from the manifest */
  unsigned execs; /* execs started through this handle */
  /* Set by the library, for a batch, when the backend has `ready`: create/resume may return
   * while the session's sandbox is still being built; `ready` finishes it. */
  bool defer_ready;
  /* The snapshot limit (cordon_snapshot_options.max_bytes) for `snapshot`, set by the caller
   * before it: 0 is CORDON_SNAPSHOT_DEFAULT_MAX_BYTES. Not persisted. */
  uint64_t max_snapshot_bytes;
  /* The memory limit the session was created with (policy.limits.memory_bytes; 0: none),
   * persisted: what a report of an out-of-memory kill names. */
  uint64_t memory_limit;
  /* HOME inside the sandbox: a private writable directory outside the workspace, so caches do
   * not land in the project or its snapshots. Set (malloc'd) by create, resume and attach;
   * NULL (a plugin that knows nothing of it): the workspace root. */
  char *home;
};

/* Where the ns and docker backends put the sandbox's private HOME. */
#define CORDON_SANDBOX_HOME "/home/sandbox"

struct cordon_backend {
  uint32_t abi_version; /* CORDON_BACKEND_ABI_VERSION */
  const char *name;
  const char *summary; /* one line for `cordon backends` */
  uint32_t capabilities;
  enum cordon_isolation_tier tier;
  /* CORDON_FEATURE_* this backend enforces (ABI 3). 0: none (say so in the summary). */
  uint32_t enforces;

  /* 1 when usable on this host; 0 with *reason (malloc'd) naming what is missing. */
  int (*available)(const struct cordon_backend *self, char **reason);

  int (*create)(struct cordon_session *s, const struct cordon_manifest *m,
                struct cordon_error **err);
  /* Optional (SNAPSHOT): create a session whose workspace is the given snapshot. */
  int (*resume)(struct cordon_session *s, const struct cordon_manifest *m, const char *snapshot_id,
                struct cordon_error **err);
  /* Re-open a session created by another process from s->backend_state. */
  int (*attach)(struct cordon_session *s, struct cordon_error **err);
  /* Stop everything running in the session and remove what create made. Idempotent. */
  int (*destroy)(struct cordon_session *s, struct cordon_error **err);
  /* Stop the session's processes; files stay. Idempotent. */
  int (*shutdown)(struct cordon_session *s, struct cordon_error **err);
  /* Free impl (no effect on the session itself). May be NULL. */
  void (*release)(struct cordon_session *s);

  /* Paths given to these are normalised, workspace-relative and never contain "..". */
  int (*read)(struct cordon_session *s, const char *path, unsigned char **data, size_t *length,
              struct cordon_error **err);
  int (*write)(struct cordon_session *s, const char *path, const void *data, size_t length,
               unsigned mode, struct cordon_error **err);
  int (*ls)(struct cordon_session *s, const char *path, struct cordon_dirent **entries,
            size_t *count, struct cordon_error **err);
  /* The library resolves the request first: env is the complete environment (clear_env is
   * true), cwd is NULL/"" (the workspace root), a normalised workspace-relative path, or an
   * absolute path outside the workspace; timeout > 0 is in seconds, 0 means none; max_output
   * is set. A command that cannot be executed is a result (126/127), not an error. */
  int (*exec)(struct cordon_session *s, const struct cordon_exec_request *req,
              struct cordon_exec_result *res, struct cordon_error **err);
  /* Optional (SNAPSHOT): *snapshot_id is malloc'd. */
  int (*snapshot)(struct cordon_session *s, char **snapshot_id, struct cordon_error **err);
  /* Optional (ABI 2): wait until a session whose create/resume returned early (s->defer_ready)
   * is ready, or fail. A batch starts all its sessions from one thread and then calls this for
   * each, so K sandboxes build at once without K threads. A no-op for a session that did not
   * return early. */
  int (*ready)(struct cordon_session *s, struct cordon_error **err);
};

typedef const struct cordon_backend *(*cordon_plugin_entry_fn)(uint32_t *abi_version);

/* What the backend would be asked for and does not enforce (pure): features(policy) minus
 * backend->enforces. */
CORDON_API uint32_t cordon_backend_unenforced(const struct cordon_backend *backend,
                                              const struct cordon_policy *policy);
/* The egress class for a caller that names none (the CLI without --net): loopback where the
 * backend enforces it (ns, docker), else the most restrictive one it enforces, open when it
 * enforces none (worktree). */
CORDON_API enum cordon_egress cordon_backend_default_egress(const struct cordon_backend *backend);
/* The --net classes a backend can be asked for, as (1u << class) bits: each class it enforces,
 * and open (which restricts nothing) wherever commands have a network at all. */
CORDON_API uint32_t cordon_backend_egress_offered(const struct cordon_backend *backend);
/* The capabilities the backend has on this host: its declared ones, plus `gpu` for ns and
 * docker where this host has GPU device nodes (CORDON_DEV_ROOT, for tests, names the directory
 * searched instead of /dev). What `cordon backends` reports. */
CORDON_API uint32_t cordon_backend_capabilities(const struct cordon_backend *backend);
/* Names of the features in mask, comma-separated ("memory, net_none"); malloc'd, NULL on ENOMEM. */
CORDON_API char *cordon_features_describe(uint32_t mask);

#ifdef __cplusplus
}
#endif
#endif
