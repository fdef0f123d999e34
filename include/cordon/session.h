/* cordon — contexts, the backend registry and sessions.
 *
 * A context is one project: the directory that holds `.cordon/` (sessions, CAS, receipts).
 * The registry lists the built-in backends and the plugins found on CORDON_PLUGIN_PATH.
 * Sessions outlive the process that created them: their state is a JSON file under
 * `.cordon/sessions/<id>/state.json`, written atomically, from which cordon_session_open()
 * re-attaches in another process. */
#ifndef CORDON_SESSION_H
#define CORDON_SESSION_H

#include <stdio.h>

#include <cordon/backend.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- context ------------------------------------------------------------------------------ */

/* project_dir NULL: $CORDON_PROJECT, else the nearest ancestor of the working directory that
 * holds `.cordon/`, else the working directory itself. Nothing is created until needed. */
CORDON_API int cordon_context_open(const char *project_dir, struct cordon_context **out,
                                   struct cordon_error **err);
CORDON_API void cordon_context_free(struct cordon_context *ctx);
CORDON_API const char *cordon_context_project_dir(const struct cordon_context *ctx);
/* <project>/.cordon */
CORDON_API const char *cordon_context_state_dir(const struct cordon_context *ctx);

/* The project's identity: 64 lowercase hex digits (32 random bytes) kept in
 * <project>/.cordon/project-id, made once (the first writer wins) and stable when the project
 * moves. The audit chain starts from it, so one project's log is never another's. */
#define CORDON_PROJECT_ID_HEX_LEN 64
/* out gets CORDON_PROJECT_ID_HEX_LEN + 1 bytes. create false: returns 0 with out "" when the
 * project has none yet; otherwise 1 (read or made). A malformed file is an integrity error. */
CORDON_API int cordon_context_project_id(struct cordon_context *ctx, bool create, char *out,
                                         struct cordon_error **err);

/* ---- registry ----------------------------------------------------------------------------- */

struct cordon_registry_entry {
  const char *name;                     /* backend name, or the plugin file name on failure */
  const struct cordon_backend *backend; /* NULL when the plugin failed to load */
  const char *origin;                   /* "builtin" or the plugin's path */
  const char *load_error;               /* why a plugin was refused; NULL when loaded */
};

struct cordon_registry;

/* Built-ins plus every plugin on CORDON_PLUGIN_PATH (colon-separated directories of *.so, or
 * .so files). A broken plugin becomes an entry with load_error; the others still load. */
CORDON_API int cordon_registry_load(struct cordon_registry **out, struct cordon_error **err);
CORDON_API void cordon_registry_free(struct cordon_registry *reg);
CORDON_API size_t cordon_registry_count(const struct cordon_registry *reg);
CORDON_API const struct cordon_registry_entry *
cordon_registry_entry(const struct cordon_registry *reg, size_t index);
/* Find a loaded backend by name; a plugin that failed to load is reported with its reason. */
CORDON_API int cordon_registry_find(const struct cordon_registry *reg, const char *name,
                                    const struct cordon_backend **out, struct cordon_error **err);
/* The backend `cordon run` uses when none is named: $CORDON_BACKEND, else the default. */
CORDON_API const char *cordon_registry_default_name(void);

/* Validate a plugin-provided or built-in backend description (ABI, name, operations). */
CORDON_API int cordon_backend_check(const struct cordon_backend *backend,
                                    struct cordon_error **err);

/* ---- sessions ----------------------------------------------------------------------------- */

CORDON_API int cordon_session_create(struct cordon_context *ctx,
                                     const struct cordon_backend *backend,
                                     const struct cordon_manifest *manifest,
                                     struct cordon_session **out, struct cordon_error **err);
CORDON_API int cordon_session_resume(struct cordon_context *ctx,
                                     const struct cordon_backend *backend,
                                     const struct cordon_manifest *manifest,
                                     const char *snapshot_id, struct cordon_session **out,
                                     struct cordon_error **err);

/* A batch of sessions resumed from one snapshot (`cordon session create --from ID --count K`,
 * and the candidates of `cordon race`). */
#define CORDON_SESSION_BATCH_MAX 256u

struct cordon_session_batch {
  size_t count; /* 1..CORDON_SESSION_BATCH_MAX */
  /* Sessions set up at once (threads, the caller's among them); 0: online cores. Unused for a
   * backend with `ready` (ns): one thread starts them all, and their sandboxes build at once. */
  unsigned jobs;
  /* Optional, called with a lock held (never twice at once): session `index` is starting
   * (ready NULL), or is ready. */
  void (*progress)(void *data, size_t index, struct cordon_session *ready);
  void *data;
  size_t failed_index; /* out: the session whose failure is reported, or SIZE_MAX */
};

/* Resume batch->count sessions from snapshot_id (on a pool of threads, or, for a backend with
 * `ready`, started one after the other and then waited for); out[] receives them in index
 * order. All or none: after the first failure no further session starts, the ones that
 * did are destroyed, and that failure is returned. Unless the manifest is ephemeral, every
 * session's state is durable on return (one syncfs for the whole batch). */
CORDON_API int cordon_session_resume_many(struct cordon_context *ctx,
                                          const struct cordon_backend *backend,
                                          const struct cordon_manifest *manifest,
                                          const char *snapshot_id,
                                          struct cordon_session_batch *batch,
                                          struct cordon_session **out, struct cordon_error **err);
/* Re-open a persisted session by id. */
CORDON_API int cordon_session_open(struct cordon_context *ctx, const struct cordon_registry *reg,
                                   const char *id, struct cordon_session **out,
                                   struct cordon_error **err);
/* Ids of the persisted sessions, sorted; NULL-terminated, free with cordon_strv_free. */
CORDON_API int cordon_session_list(struct cordon_context *ctx, char ***ids,
                                   struct cordon_error **err);
/* The session id `given` names, malloc'd in *id: the id of a session of this project, or a
 * unique prefix of at least 8 hex digits of one. Unknown: CORDON_ERR_NOT_FOUND ("no such
 * session"); ambiguous: CORDON_ERR_USAGE naming the candidates; not an id's form:
 * CORDON_ERR_USAGE. */
CORDON_API int cordon_session_resolve_id(struct cordon_context *ctx, const char *given, char **id,
                                         struct cordon_error **err);
/* Free the in-process handle; the session lives on. */
CORDON_API void cordon_session_close(struct cordon_session *s);

CORDON_API int cordon_session_read(struct cordon_session *s, const char *path, unsigned char **data,
                                   size_t *length, struct cordon_error **err);
CORDON_API int cordon_session_write(struct cordon_session *s, const char *path, const void *data,
                                    size_t length, unsigned mode, struct cordon_error **err);
CORDON_API int cordon_session_ls(struct cordon_session *s, const char *path,
                                 struct cordon_dirent **entries, size_t *count,
                                 struct cordon_error **err);
CORDON_API int cordon_session_exec(struct cordon_session *s, const struct cordon_exec_request *req,
                                   struct cordon_exec_result *res, struct cordon_error **err);
CORDON_API int cordon_session_snapshot(struct cordon_session *s, char **snapshot_id,
                                       struct cordon_error **err);
CORDON_API int cordon_session_shutdown(struct cordon_session *s, struct cordon_error **err);
/* Destroy the session, remove its state and free the handle (s is invalid afterwards, even on
 * failure). Destroying an already destroyed session succeeds. */
CORDON_API int cordon_session_destroy(struct cordon_session *s, struct cordon_error **err);
/* Destroy by id without a live handle; an unknown id succeeds (idempotent). */
CORDON_API int cordon_session_destroy_id(struct cordon_context *ctx,
                                         const struct cordon_registry *reg, const char *id,
                                         struct cordon_error **err);

/* Normalise a session path: strips the sandbox root prefix if absolute, rejects "..", empty
 * components are dropped. "." or "" mean the workspace root (returned as ""). */
CORDON_API int cordon_session_path_normalize(const struct cordon_session *s, const char *path,
                                             char **out, struct cordon_error **err);

CORDON_API void cordon_strv_free(char **strv);

/* ---- conformance -------------------------------------------------------------------------- */

struct cordon_conformance_summary {
  int passed;
  int failed;
  int skipped;
};

/* Run the conformance suite against a backend; progress lines go to out (one per test, or one
 * JSON document when json is true), the last line being "N passed, N failed". */
CORDON_API int cordon_conformance_run(struct cordon_context *ctx,
                                      const struct cordon_backend *backend, FILE *out, bool json,
                                      struct cordon_conformance_summary *summary,
                                      struct cordon_error **err);

#ifdef __cplusplus
}
#endif
#endif
