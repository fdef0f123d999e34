/* The `worktree` backend: a workspace directory on the host and commands run as the caller.
 * It isolates nothing (tier none, no policy feature enforced) and says so; it exists for trusted
 * work, for development and as the reference implementation of the protocol.
 *
 * With a repository in the manifest, the workspace is a git worktree (libgit2) on a fresh
 * branch `cordon/<session id>` cut from the requested branch (or HEAD), so sessions never
 * fight over a checked-out branch; sparse paths limit the checkout. Without one, it is a plain
 * directory: the given --workspace, or a fresh one in the session's state directory. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cordon/session.h>
#include <cordon/snapshot.h>

#include "backends/builtin.h"
#include "protocol/workspace.h"
#include "backends/git-loader.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "exec/runner.h"

static int worktree_available(const struct cordon_backend *self, char **reason) {
  return 1;
}

/* The same table every time once loaded; set before any git call in this file. */
static const struct git_api *g;

static int git_fail(struct cordon_error **err, const char *what) {
  const git_error *e = g->git_error_last();
  return cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "%s: %s", what,
                          e && e->message ? e->message : "libgit2 error");
}

/* Create a worktree of repo->source at `path` on branch cordon/<id>. */
static int add_git_worktree(struct cordon_session *s, const struct cordon_repo_spec *spec,
                            const char *path, char **repo_path_out, struct cordon_error **err) {
  if (!(g = git_api_get(err)))
    return -1;
  g->git_libgit2_init();
  int r = -1;
  git_repository *repo = NULL;
  git_object *start = NULL;
  git_reference *branch = NULL;
  git_worktree *wt = NULL;
  _cleanup_free_ char *branch_name = NULL, *wt_name = NULL;

  if (g->git_repository_open_ext(&repo, spec->source, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0) {
    git_fail(err, spec->source);
    goto out;
  }
  const char *rev = spec->branch && *spec->branch ? spec->branch : "HEAD";
  if (g->git_revparse_single(&start, repo, rev) < 0) {
    git_fail(err, rev);
    cordon_error_prefix(err, "repository %s", spec->source);
    goto out;
  }
  git_object *commit = NULL;
  if (g->git_object_peel(&commit, start, GIT_OBJECT_COMMIT) < 0) {
    git_fail(err, rev);
    goto out;
  }
  if (asprintf(&branch_name, "cordon/%s", s->id) < 0 ||
      asprintf(&wt_name, "cordon-%s", s->id) < 0) {
    g->git_object_free(commit);
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "worktree");
    goto out;
  }
  int br = g->git_branch_create(&branch, repo, branch_name, (git_commit *)commit, 0);
  g->git_object_free(commit);
  if (br < 0) {
    git_fail(err, branch_name);
    goto out;
  }
  git_worktree_add_options opts = GIT_WORKTREE_ADD_OPTIONS_INIT;
  opts.ref = branch;
  size_t n_sparse = strv_length(spec->sparse_paths);
  if (n_sparse > 0) {
    opts.checkout_options.paths.strings = (char **)spec->sparse_paths;
    opts.checkout_options.paths.count = n_sparse;
    opts.checkout_options.checkout_strategy = GIT_CHECKOUT_FORCE;
  }
  if (g->git_worktree_add(&wt, repo, wt_name, path, &opts) < 0) {
    git_fail(err, "git worktree add");
    g->git_reference_delete(branch);
    goto out;
  }
  *repo_path_out = strdup(g->git_repository_commondir(repo));
  r = *repo_path_out ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "worktree");
out:
  g->git_worktree_free(wt);
  g->git_reference_free(branch);
  g->git_object_free(start);
  g->git_repository_free(repo);
  g->git_libgit2_shutdown();
  return r;
}

static void remove_git_worktree(const char *repo_path, const char *id) {
  if (!(g = git_api_get(NULL)))
    return;
  g->git_libgit2_init();
  git_repository *repo = NULL;
  if (g->git_repository_open_ext(&repo, repo_path, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) == 0) {
    char name[128], branch_name[128];
    snprintf(name, sizeof(name), "cordon-%s", id);
    snprintf(branch_name, sizeof(branch_name), "cordon/%s", id);
    git_worktree *wt = NULL;
    if (g->git_worktree_lookup(&wt, repo, name) == 0) {
      git_worktree_prune_options popts = GIT_WORKTREE_PRUNE_OPTIONS_INIT;
      popts.flags = GIT_WORKTREE_PRUNE_VALID | GIT_WORKTREE_PRUNE_WORKING_TREE;
      g->git_worktree_prune(wt, &popts);
      g->git_worktree_free(wt);
    }
    git_reference *branch = NULL;
    /* git_reference_delete, not git_branch_delete: the branch has no config section to
     * remove, and libgit2 1.5 leaks regex match data while scanning the config for one. */
    if (g->git_branch_lookup(&branch, repo, branch_name, GIT_BRANCH_LOCAL) == 0) {
      g->git_reference_delete(branch);
      g->git_reference_free(branch);
    }
    g->git_repository_free(repo);
  }
  g->git_libgit2_shutdown();
}

static int save_backend_state(struct cordon_session *s, const char *repo_path, bool owned,
                              const char *snapshot_id, struct cordon_error **err) {
  json_t *o = json_pack("{s:b}", "owned_workspace", owned);
  if (repo_path)
    json_object_set_new(o, "repo", json_string(repo_path));
  /* Also what keeps the snapshot from `cas gc` while the session lives. */
  if (snapshot_id)
    json_object_set_new(o, "from_snapshot", json_string(snapshot_id));
  free(s->backend_state);
  s->backend_state = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(o);
  return s->backend_state ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "state");
}

/* Commands run as the caller, whoever that is: there is no sandbox user to swap for root. */
static int refuse_user_root(const struct cordon_manifest *m, struct cordon_error **err) {
  if (!m->user_root)
    return 0;
  return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                          "commands run as the caller, with no user to change: "
                          "--user root is refused (use ns)");
}

/* HOME: a directory in the session's state directory (no sandbox, so a host path), made on
 * first use, so caches and shell history stay out of the workspace and its snapshots. */
static int worktree_home(struct cordon_session *s, struct cordon_error **err) {
  free(s->home);
  if (asprintf(&s->home, "%s/home", s->state_dir) < 0) {
    s->home = NULL;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "home");
  }
  if (mkdir(s->home, 0700) < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s", s->home);
  return 0;
}

static int worktree_create(struct cordon_session *s, const struct cordon_manifest *m,
                           struct cordon_error **err) {
  if (refuse_user_root(m, err) < 0)
    return -1;
  if (m->repo && m->workspace)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "give a repository or a workspace, not both");
  _cleanup_free_ char *repo_path = NULL;
  char resolved[PATH_MAX];
  bool owned = !m->workspace;
  if (m->workspace) {
    struct stat st;
    if (!realpath(m->workspace, resolved) || stat(resolved, &st) < 0)
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "workspace %s", m->workspace);
    if (!S_ISDIR(st.st_mode))
      return cordon_error_set(err, CORDON_ERR_USAGE, ENOTDIR, "workspace %s", m->workspace);
    s->workspace = strdup(resolved);
  } else {
    if (asprintf(&s->workspace, "%s/workspace", s->state_dir) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
    if (m->repo) {
      if (add_git_worktree(s, m->repo, s->workspace, &repo_path, err) < 0)
        return -1;
    } else if (mkdir(s->workspace, 0755) < 0 || chmod(s->workspace, 0755) < 0) { /* not umask's */
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s", s->workspace);
    }
  }
  if (!s->workspace)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
  /* No sandbox: the command sees host paths, so the workspace root is the host path. */
  free(s->root);
  s->root = strdup(s->workspace);
  if (!s->root)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
  if (save_backend_state(s, repo_path, owned, NULL, err) < 0 || worktree_home(s, err) < 0)
    return -1;
  return workspace_write_manifest_files(s->workspace, m, err);
}

/* Resume: a fresh owned workspace restored from the snapshot (every blob verified), then the
 * manifest's files on top. */
static int worktree_resume(struct cordon_session *s, const struct cordon_manifest *m,
                           const char *snapshot_id, struct cordon_error **err) {
  if (refuse_user_root(m, err) < 0)
    return -1;
  if (m->repo || m->workspace)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "a session resumed from a snapshot gets a fresh workspace; a "
                            "repository or workspace cannot be given too");
  if (asprintf(&s->workspace, "%s/workspace", s->state_dir) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
  if (workspace_restore(s, snapshot_id, s->workspace, err) < 0)
    return -1;
  free(s->root);
  s->root = strdup(s->workspace);
  if (!s->root)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "workspace");
  if (save_backend_state(s, NULL, true, snapshot_id, err) < 0 || worktree_home(s, err) < 0)
    return -1;
  return workspace_write_manifest_files(s->workspace, m, err);
}

static int worktree_snapshot(struct cordon_session *s, char **snapshot_id,
                             struct cordon_error **err) {
  /* A git worktree's .git is a link file naming this session's administrative directory in the
   * repository: host state, not content, and wrong in any other session. */
  json_t *state = s->backend_state ? json_loads(s->backend_state, 0, NULL) : NULL;
  bool git = json_object_get(state, "repo") != NULL;
  json_decref(state);
  const char *const exclude[] = {".git", NULL};
  return workspace_snapshot(s, git ? exclude : NULL, snapshot_id, err);
}

static int worktree_attach(struct cordon_session *s, struct cordon_error **err) {
  struct stat st;
  if (stat(s->workspace, &st) < 0 || !S_ISDIR(st.st_mode))
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno ? errno : ENOTDIR, "workspace %s",
                            s->workspace);
  return worktree_home(s, err);
}

static int worktree_destroy(struct cordon_session *s, struct cordon_error **err) {
  json_t *state = s->backend_state ? json_loads(s->backend_state, 0, NULL) : NULL;
  const char *repo = json_string_value(json_object_get(state, "repo"));
  if (repo)
    remove_git_worktree(repo, s->id);
  json_decref(state);
  /* An owned workspace lives in the state directory, which the library removes. */
  return 0;
}

static int worktree_shutdown(struct cordon_session *s, struct cordon_error **err) {
  return 0; /* every exec's process tree is killed when it ends: nothing keeps running */
}

static int worktree_read(struct cordon_session *s, const char *path, unsigned char **data,
                         size_t *length, struct cordon_error **err) {
  return workspace_read(s->workspace, path, data, length, err);
}

static int worktree_write(struct cordon_session *s, const char *path, const void *data,
                          size_t length, unsigned mode, struct cordon_error **err) {
  return workspace_write(s->workspace, path, data, length, mode, err);
}

static int worktree_ls(struct cordon_session *s, const char *path, struct cordon_dirent **entries,
                       size_t *count, struct cordon_error **err) {
  return workspace_ls(s->workspace, path, entries, count, err);
}

static int worktree_exec(struct cordon_session *s, const struct cordon_exec_request *req,
                         struct cordon_exec_result *res, struct cordon_error **err) {
  if (req->cwd && req->cwd[0] == '/')
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "working directory %s is outside the workspace", req->cwd);
  /* Resolve the working directory beneath the workspace, then hand the runner its real path. */
  _cleanup_close_ int root = open(s->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (root < 0)
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "workspace %s", s->workspace);
  _cleanup_close_ int dir = fs_open_beneath(root, req->cwd ? req->cwd : "", O_PATH | O_DIRECTORY, 0,
                                            "the workspace", err);
  if (dir < 0)
    return cordon_error_prefix(err, "working directory");
  char link[64], cwd[PATH_MAX];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", dir);
  ssize_t n = readlink(link, cwd, sizeof(cwd) - 1);
  if (n < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "working directory");
  cwd[n] = 0;
  struct exec_spec spec = exec_spec_from_request(req, cwd);
  return exec_run(&spec, res, err);
}

const struct cordon_backend cordon_backend_worktree = {
    .abi_version = CORDON_BACKEND_ABI_VERSION,
    .name = "worktree",
    .summary = "host directory or git worktree; NO isolation: commands run as you, on the host",
    .capabilities = CORDON_CAP_FILE_RW | CORDON_CAP_EXEC | CORDON_CAP_NETWORK |
                    CORDON_CAP_SNAPSHOT | CORDON_CAP_CALLER_STDIO,
    .tier = CORDON_TIER_NONE,
    /* Nothing: no path policy, no limit, no network class. The library refuses a manifest that
     * asks for any (unless enforcement is waived, which the audit chain records); its default
     * egress is therefore open, what it gives anyway. */
    .enforces = 0,
    .available = worktree_available,
    .create = worktree_create,
    .resume = worktree_resume,
    .attach = worktree_attach,
    .destroy = worktree_destroy,
    .shutdown = worktree_shutdown,
    .read = worktree_read,
    .write = worktree_write,
    .ls = worktree_ls,
    .exec = worktree_exec,
    .snapshot = worktree_snapshot,
};
