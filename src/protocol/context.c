/* The project context: where `.cordon/` lives, and the project's identity in it. Also the
 * public calls that take a context for a lower module which knows only directories: the
 * project's store, its audit log (bound to the project's id) and gc of the store (with the
 * project's sessions and receipts as roots). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cordon/audit.h>
#include <cordon/cas.h>
#include <cordon/session.h>

#include "audit/log.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "confine/private.h"
#include "protocol/context.h"
#include "snapshot/gc.h"

static bool has_state_dir(const char *dir) {
  _cleanup_free_ char *p = NULL;
  struct stat st;
  return asprintf(&p, "%s/.cordon", dir) >= 0 && lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int cordon_context_open(const char *project_dir, struct cordon_context **out,
                        struct cordon_error **err) {
  char resolved[PATH_MAX];
  if (!project_dir || !*project_dir)
    project_dir = getenv("CORDON_PROJECT");
  if (project_dir && *project_dir) {
    if (!realpath(project_dir, resolved))
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "project directory %s",
                              project_dir);
  } else {
    if (!getcwd(resolved, sizeof(resolved)))
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot read working directory");
    /* Like git: the nearest ancestor that already holds state, else the working directory. */
    char probe[PATH_MAX];
    strcpy(probe, resolved);
    for (;;) {
      if (has_state_dir(probe)) {
        strcpy(resolved, probe);
        break;
      }
      char *slash = strrchr(probe, '/');
      if (!slash || slash == probe)
        break;
      *slash = 0;
    }
  }
  struct cordon_context *ctx = calloc(1, sizeof(*ctx));
  if (!ctx || !(ctx->project_dir = strdup(resolved)) ||
      asprintf(&ctx->state_dir, "%s%s.cordon", resolved, strcmp(resolved, "/") ? "/" : "") < 0) {
    if (ctx)
      free(ctx->project_dir);
    free(ctx);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "context");
  }
  *out = ctx;
  return 0;
}

void cordon_context_free(struct cordon_context *ctx) {
  if (!ctx)
    return;
  free(ctx->project_dir);
  free(ctx->state_dir);
  free(ctx);
}

const char *cordon_context_project_dir(const struct cordon_context *ctx) {
  return ctx->project_dir;
}

const char *cordon_context_state_dir(const struct cordon_context *ctx) {
  return ctx->state_dir;
}

int context_ensure_dir(struct cordon_context *ctx, const char *sub, char **out,
                       struct cordon_error **err) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "%s/%s", ctx->state_dir, sub) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", sub);
  if (mkdir(ctx->state_dir, 0700) < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s", ctx->state_dir);
  /* Known to every later sandbox plan, so no sandbox of another project sees it (a project
   * made by an older cordon is registered the first time it is used again). */
  if (!ctx->registered) {
    /* Best effort: without a writable state home there is no registry to keep (documented in
     * docs/security.md: such a project is hidden only by its own sandboxes and by a workspace
     * or grant with it at the top). */
    confine_projects_register(ctx->state_dir, NULL);
    ctx->registered = true;
  }
  if (mkdir(path, 0700) < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s", path);
  if (out)
    *out = steal_ptr(&path);
  return 0;
}

/* ---- the project's identity ---------------------------------------------------------------- */

#define PROJECT_ID_FILE "project-id"

static bool valid_project_id(const char *id, size_t length) {
  if (length != CORDON_PROJECT_ID_HEX_LEN)
    return false;
  bool zero = true;
  for (size_t i = 0; i < length; i++) {
    if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
      return false;
    zero = zero && id[i] == '0';
  }
  return !zero; /* all zeros is the genesis of a chain bound to no project */
}

/* 1: read into out; 0: no such file; < 0: unreadable or malformed. */
static int read_project_id(int dirfd, const char *state_dir, char *out, struct cordon_error **err) {
  _cleanup_close_ int fd =
      openat(dirfd, PROJECT_ID_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT)
      return 0;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s/" PROJECT_ID_FILE,
                            state_dir);
  }
  char buf[CORDON_PROJECT_ID_HEX_LEN + 2];
  ssize_t n;
  do
    n = read(fd, buf, sizeof(buf));
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot read %s/" PROJECT_ID_FILE,
                            state_dir);
  if (n != CORDON_PROJECT_ID_HEX_LEN + 1 || buf[CORDON_PROJECT_ID_HEX_LEN] != '\n' ||
      !valid_project_id(buf, CORDON_PROJECT_ID_HEX_LEN))
    return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                            "%s/" PROJECT_ID_FILE " is not 64 lowercase hex digits and a newline",
                            state_dir);
  memcpy(out, buf, CORDON_PROJECT_ID_HEX_LEN);
  out[CORDON_PROJECT_ID_HEX_LEN] = 0;
  return 1;
}

/* Made whole under a temporary name and linked into place: linkat never replaces, so when two
 * processes race the first id wins and the other reads it. */
static int make_project_id(int dirfd, const char *state_dir, struct cordon_error **err) {
  _cleanup_free_ char *id = NULL;
  do {
    free(id);
    id = NULL;
    if (fs_random_hex(CORDON_PROJECT_ID_HEX_LEN / 2, &id, err) < 0)
      return -1;
  } while (!valid_project_id(id, strlen(id)));
  char line[CORDON_PROJECT_ID_HEX_LEN + 2];
  snprintf(line, sizeof(line), "%s\n", id);
  /* No replace: when two processes make the id at once, the first one's stays. */
  _cleanup_fs_temp_ struct fs_temp t = FS_TEMP_INIT;
  if (fs_temp_create(dirfd, PROJECT_ID_FILE, 0600, &t, err) < 0)
    return -1;
  if (fs_write_all(t.fd, line, strlen(line)) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s/" PROJECT_ID_FILE,
                            state_dir);
  return fs_temp_commit(&t, PROJECT_ID_FILE, FS_COMMIT_NO_REPLACE, err) < 0 ? -1 : 0;
}

/* The project's store is <state dir>/cas: the store itself only knows how to open a directory. */
int cordon_cas_open_project(struct cordon_context *ctx, struct cordon_cas **out,
                            struct cordon_error **err) {
  _cleanup_free_ char *dir = NULL;
  if (context_ensure_dir(ctx, "cas", &dir, err) < 0)
    return -1;
  return cordon_cas_open(dir, out, err);
}

int context_project_id_at(const char *state_dir, bool create, char *out,
                          struct cordon_error **err) {
  out[0] = 0;
  if (create && mkdir(state_dir, 0700) < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s", state_dir);
  _cleanup_close_ int dirfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) {
    if (errno == ENOENT && !create)
      return 0;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s", state_dir);
  }
  int r = read_project_id(dirfd, state_dir, out, err);
  if (r != 0 || !create)
    return r;
  if (make_project_id(dirfd, state_dir, err) < 0)
    return -1;
  r = read_project_id(dirfd, state_dir, out, err);
  return r == 0 ? cordon_error_set(err, CORDON_ERR_SYSTEM, ENOENT,
                                   "%s/" PROJECT_ID_FILE " vanished as it was made", state_dir)
                : r;
}

int cordon_context_project_id(struct cordon_context *ctx, bool create, char *out,
                              struct cordon_error **err) {
  return context_project_id_at(ctx->state_dir, create, out, err);
}

/* ---- the calls that bind a lower module to the project ------------------------------------ */

int cordon_audit_open_project(struct cordon_context *ctx, const struct cordon_audit_options *opts,
                              struct cordon_audit_log **out, struct cordon_error **err) {
  _cleanup_free_ char *dir = NULL;
  if (asprintf(&dir, "%s/audit", ctx->state_dir) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "audit log");
  /* The project's id is read (or made, at the first append) only when the log needs it. */
  return audit_open_bound(dir, opts, context_project_id_at, ctx->state_dir, out, err);
}

int cordon_cas_gc(struct cordon_context *ctx, struct cordon_cas *cas, bool dry_run,
                  struct cordon_cas_gc_report *report, struct cordon_error **err) {
  return snap_gc(cas, ctx ? ctx->state_dir : NULL, dry_run, report, err);
}
