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
 * against. A mismatch with CORDON_BACKEND_ABI_VERSION is refused by name. */
#ifndef CORDON_BACKEND_H
#define CORDON_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CORDON_BACKEND_ABI_VERSION 2u
#define CORDON_PLUGIN_ENTRY_SYMBOL "cordon_plugin_entry"

enum cordon_capability {
  CORDON_CAP_FILE_RW = 1u << 0,
  CORDON_CAP_EXEC = 1u << 1,
  CORDON_CAP_NETWORK = 1u << 2,
  CORDON_CAP_GPU = 1u << 3,
  CORDON_CAP_SNAPSHOT = 1u << 4,
  CORDON_CAP_PERSISTENT_VOLUMES = 1u << 5,
};
#define CORDON_CAP_COUNT 6

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

CORDON_API const char *cordon_capability_name(enum cordon_capability cap);
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
  double cpus;          /* CPU bandwidth in cores, e.g. 0.5 */
  uint64_t nofile;      /* RLIMIT_NOFILE */
  uint64_t fsize_bytes; /* RLIMIT_FSIZE */
  uint64_t tmp_bytes;   /* size of the sandbox's /tmp and of its /dev/shm, each; 0: the memory
                           limit when there is one, else CORDON_DEFAULT_TMP_BYTES */
};

/* The size of /tmp and of /dev/shm (each) when neither a size nor a memory limit is given. */
#define CORDON_DEFAULT_TMP_BYTES (1ull << 30)

struct cordon_policy {
  const char *const *read_only;    /* workspace-relative paths mounted read-only */
  const char *const *hidden;       /* workspace-relative paths masked (empty dir / empty file) */
  const char *const *allow_ro;     /* extra absolute host paths granted read-only */
  const char *const *system_paths; /* NULL: the backend's default list of system directories */
  enum cordon_egress egress;
  struct cordon_limits limits;
  bool require_enforcement; /* refuse to run unconfined */
};

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
};

struct cordon_backend {
  uint32_t abi_version; /* CORDON_BACKEND_ABI_VERSION */
  const char *name;
  const char *summary; /* one line for `cordon backends` */
  uint32_t capabilities;
  enum cordon_isolation_tier tier;

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

#ifdef __cplusplus
}
#endif
#endif
