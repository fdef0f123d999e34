/* The project context: where `.cordon/` lives. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cordon/session.h>

#include "backend/context.h"
#include "base/cleanup.h"
#include "confine/private.h"

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
