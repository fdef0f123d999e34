/* Running a candidate build (build.h): the fresh checkout, the build's own agent policy, the
 * mechanism that confines it (never none), the gate around it, and the outputs verified from
 * an fd anchored at the checkout (no symlink anywhere on the way, regular files only), hashed
 * as they are copied out, so what is recorded is exactly what was kept. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cordon/snapshot.h>

#include "agent/build.h"
#include "backends/git-loader.h"
#include "base/anchor.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "store/hash.h"

/* The read buffer of an output copied into the outputs directory. */
#define COPY_BUFFER (1 << 16)

/* ---- the checkout -------------------------------------------------------------------------- */

static int git_fail(const struct git_api *g, struct cordon_error **err, const char *what) {
  const git_error *e = g->git_error_last();
  return cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0, "git: %s: %s", what,
                          e && e->message ? e->message : "failed");
}

/* The files of revision `rev` of the project's repository, written into dir (the repository's
 * index and working tree are left alone). *commit receives the commit id. */
static int checkout_rev(const char *project, const char *rev, const char *dir, char **commit,
                        struct cordon_error **err) {
  const struct git_api *g = git_api_get(err);
  if (!g)
    return -1;
  g->git_libgit2_init();
  git_repository *repo = NULL;
  git_object *start = NULL, *peeled = NULL;
  int rc = -1;
  if (g->git_repository_open_ext(&repo, project, 0, NULL) < 0)
    git_fail(g, err, project);
  else if (g->git_revparse_single(&start, repo, rev) < 0 ||
           g->git_object_peel(&peeled, start, GIT_OBJECT_COMMIT) < 0)
    git_fail(g, err, rev);
  else {
    git_checkout_options options = GIT_CHECKOUT_OPTIONS_INIT;
    options.checkout_strategy = GIT_CHECKOUT_FORCE | GIT_CHECKOUT_DONT_UPDATE_INDEX;
    options.target_directory = dir;
    if (g->git_checkout_tree(repo, peeled, &options) < 0)
      git_fail(g, err, "checkout");
    else if (!(*commit = strdup(g->git_oid_tostr_s(g->git_object_id(peeled)))))
      cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "build");
    else
      rc = 0;
  }
  g->git_object_free(peeled);
  g->git_object_free(start);
  g->git_repository_free(repo);
  g->git_libgit2_shutdown();
  return rc;
}

/* ---- the build's policy ---------------------------------------------------------------- */

/* The policy of a build: the checkout is the project and the working directory, nothing in it
 * read-only or hidden but .cordon (the builder makes it when the source has none), no host path
 * granted, a minimal environment (PATH, LANG, TERM of the caller; HOME the checkout), no
 * network, a 64 MiB /tmp. */
static int build_policy(const char *work, struct agent_policy **out, struct cordon_error **err) {
  const char *path = getenv("PATH"), *lang = getenv("LANG"), *term = getenv("TERM");
  _cleanup_free_ char *home = NULL, *path_var = NULL, *lang_var = NULL, *term_var = NULL;
  if (asprintf(&home, "HOME=%s", work) < 0 ||
      asprintf(&path_var, "PATH=%s", path ? path : "/usr/local/bin:/usr/bin:/bin") < 0 ||
      (lang && asprintf(&lang_var, "LANG=%s", lang) < 0) ||
      (term && asprintf(&term_var, "TERM=%s", term) < 0))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "build policy");
  const char *environment[5] = {path_var, home};
  size_t n = 2;
  if (lang_var)
    environment[n++] = lang_var;
  if (term_var)
    environment[n++] = term_var;
  struct agent_policy_input in = {
      .project = work,
      .cwd = work,
      .net = "none",
      .tmp_bytes = AGENT_BUILD_TMP_BYTES,
      .environ = environment,
  };
  return agent_policy_build(&in, out, err);
}

/* ---- the outputs ----------------------------------------------------------------------- */

static int output_error(const char *path, const char *why, struct cordon_error **err) {
  return cordon_error_set(err, CORDON_ERR_INVALID, 0, "output %s %s", path, why);
}

/* Open an output for reading: beneath the checkout, no symlink on the way, a regular file. */
static int open_output(int workfd, const char *given, char **normal, struct cordon_error **err) {
  if (fs_normalize_relative(given, normal, NULL) < 0)
    return output_error(given, "escapes the checkout (absolute or ..)", err);
  if (!**normal)
    return output_error(given, "is not a regular file", err);
  _cleanup_close_ int pathfd = anchor_open(workfd, *normal, O_PATH, 0);
  if (pathfd < 0)
    return errno == ENOENT || errno == ENOTDIR ? output_error(given, "is missing", err)
           : errno == ELOOP ? output_error(given, "is or passes through a symlink", err)
           : errno == EXDEV ? output_error(given, "escapes the checkout", err)
                            : cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "output %s", given);
  struct stat st;
  if (fstat(pathfd, &st) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "output %s", given);
  if (S_ISLNK(st.st_mode))
    return output_error(given, "is or passes through a symlink", err);
  if (!S_ISREG(st.st_mode))
    return output_error(given, "is not a regular file", err);
  char proc_path[64];
  snprintf(proc_path, sizeof(proc_path), "/proc/self/fd/%d", pathfd);
  int fd = open(proc_path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "output %s", given);
  return fd;
}

/* Copy fd to outputs_fd/path, hashing what is copied. */
static int keep_output(int fd, int outputs_fd, const char *path, struct agent_build_output *o,
                       struct cordon_error **err) {
  _cleanup_free_ char *dir = NULL, *base = NULL;
  fs_split_path(path, &dir, &base);
  _cleanup_close_ int dirfd = fs_mkdirs_beneath(outputs_fd, dir, "build outputs", err);
  if (dirfd < 0)
    return -1;
  _cleanup_fs_temp_ struct fs_temp t = FS_TEMP_INIT;
  struct cas_hasher h = {0};
  if (fs_temp_create(dirfd, base, 0644, &t, err) < 0)
    return -1;
  if (cas_hasher_init(&h) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "output %s", path);
  /* On the heap, not a static __thread array: the loader zeroes every thread-local byte at
   * every process start, `cordon run` included. */
  _cleanup_free_ char *buf = malloc(COPY_BUFFER);
  if (!buf) {
    cas_hasher_free(&h);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "output %s", path);
  }
  int rc = 0;
  for (;;) {
    ssize_t n = read(fd, buf, COPY_BUFFER);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 || (n > 0 && fs_write_all(t.fd, buf, (size_t)n) < 0)) {
      rc = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "output %s", path);
      break;
    }
    if (n == 0)
      break;
    cas_hasher_update(&h, buf, (size_t)n);
    o->size += (uint64_t)n;
  }
  unsigned char digest[CAS_DIGEST_LEN];
  cas_hasher_final(&h, digest);
  cas_hasher_free(&h);
  cas_hex(digest, o->sha256);
  if (rc < 0 || fs_temp_commit(&t, base, 0, err) < 0)
    return -1;
  return (o->path = strdup(path)) ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "build");
}

static int collect_outputs(struct cordon_context *ctx, const char *work,
                           const struct agent_build_request *request, struct agent_build_record *r,
                           struct cordon_error **err) {
  size_t n = strv_length(request->outputs);
  if (!(r->outputs = calloc(n + 1, sizeof(*r->outputs))))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "build");
  _cleanup_close_ int workfd = open(work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  _cleanup_close_ int projectfd =
      open(cordon_context_project_dir(ctx), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (workfd < 0 || projectfd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "build %s", r->id);
  _cleanup_free_ char *outputs_dir = NULL;
  if (asprintf(&outputs_dir, "%s/%s/outputs", AGENT_BUILD_DIR, r->id) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "build");
  _cleanup_close_ int outputs_fd = fs_mkdirs_beneath(projectfd, outputs_dir, "project", err);
  if (outputs_fd < 0)
    return -1;
  for (size_t i = 0; i < n; i++) {
    _cleanup_free_ char *normal = NULL;
    _cleanup_close_ int fd = open_output(workfd, request->outputs[i], &normal, err);
    if (fd < 0 || keep_output(fd, outputs_fd, normal, &r->outputs[i], err) < 0)
      return -1;
    r->count++;
  }
  return 0;
}

/* ---- the build ------------------------------------------------------------------------- */

/* Check the source out into a new directory of its own; *top is what to remove afterwards. */
static int make_checkout(struct cordon_context *ctx, struct cordon_cas *cas,
                         const struct agent_build_request *request, struct agent_build_record *r,
                         char **top, char **work, struct cordon_error **err) {
  if (asprintf(top, "%s/cordon-build-%s-XXXXXX", AGENT_BUILD_WORK_ROOT, r->id) < 0 ||
      asprintf(work, "%s/work", *top) < 0 || !mkdtemp(*top)) {
    int e = errno;
    free(*top);
    *top = NULL;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "build directory in %s",
                            AGENT_BUILD_WORK_ROOT);
  }
  memcpy(*work, *top, strlen(*top)); /* mkdtemp filled in the X's of top only */
  /* Traversable, not listable: a mechanism that binds the checkout at its own path may run the
   * command under another uid, which must still reach it through this directory. */
  if (chmod(*top, 0711) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "build directory %s", *top);
  if (request->source == AGENT_BUILD_FROM_SNAPSHOT) {
    if (!(r->source_id = strdup(request->given)))
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "build");
    if (cordon_snapshot_restore(cas, request->given, *work, NULL, err) < 0)
      return -1;
  } else if (checkout_rev(cordon_context_project_dir(ctx), request->given, *work, &r->source_id,
                          err) < 0) {
    return -1;
  }
  if (mkdir(*work, 0755) < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "build checkout %s", *work);
  _cleanup_close_ int workfd = open(*work, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (workfd < 0 || (mkdirat(workfd, ".cordon", 0700) < 0 && errno != EEXIST))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "build checkout %s", *work);
  return 0;
}

static struct agent_build_record *record_new(const struct agent_build_request *request,
                                             struct cordon_error **err) {
  struct agent_build_record *r = calloc(1, sizeof(*r));
  if (!r || fs_random_hex(AGENT_BUILD_ID_HEX / 2, &r->id, err) < 0 ||
      !(r->given = strdup(request->given)) || !(r->argv = strv_copy(request->argv)) ||
      !(r->protect = strv_copy(request->protect))) {
    agent_build_record_free(r);
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "build");
    return NULL;
  }
  r->source = request->source;
  return r;
}

/* Confined run of the command, with the gate around it when paths are protected. */
static int run_confined(struct cordon_cas *cas, const struct agent_build_request *request,
                        const char *work, struct agent_build_record *r,
                        struct agent_gate_report **gate, struct cordon_error **err) {
  struct agent_policy *policy = NULL;
  if (build_policy(work, &policy, err) < 0)
    return -1;
  const struct agent_mechanism *mechanism = NULL;
  struct agent_gate_baseline *before = NULL;
  int exit_code = -1, rc = -1;
  enum agent_mechanism_kind kind = request->kind;
  if (agent_mechanism_choose(&kind, policy, &mechanism, err) < 0 ||
      !(r->mechanism = strdup(mechanism->name)))
    goto out;
  if (r->protect[0] &&
      agent_gate_record(cas, work, (const char *const *)r->protect, &before, err) < 0)
    goto out;
  struct agent_launch launch = {.policy = policy, .argv = request->argv, .tty = false};
  if (mechanism->run(&launch, &exit_code, err) < 0)
    goto out;
  if (exit_code != 0) {
    cordon_error_set(err, CORDON_ERR_INVALID, 0, "the build command exited %d", exit_code);
    goto out;
  }
  if (before && agent_gate_compare(cas, work, before, gate, err) < 0)
    goto out;
  rc = *gate && (*gate)->count ? -1 : 0;
out:
  agent_gate_baseline_free(before);
  agent_policy_free(policy);
  return rc;
}

int agent_build_run(struct cordon_context *ctx, struct cordon_cas *cas,
                    const struct agent_build_request *request, struct agent_build_record **out,
                    struct agent_gate_report **gate, struct cordon_error **err) {
  *out = NULL;
  *gate = NULL;
  /* Refused before anything is checked out: no mechanism can make "off" confined. */
  if (request->kind == AGENT_MECHANISM_OFF || request->kind == AGENT_MECHANISM_SEATBELT)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "a build never runs unconfined; mechanism %s cannot confine it here "
                            "(use auto, ns, bwrap, landlock or gvisor)",
                            agent_mechanism_kind_name(request->kind));
  struct agent_build_record *r = record_new(request, err);
  if (!r)
    return -1;
  _cleanup_free_ char *top = NULL, *work = NULL;
  int rc = -1;
  if (make_checkout(ctx, cas, request, r, &top, &work, err) == 0 &&
      run_confined(cas, request, work, r, gate, err) == 0 &&
      collect_outputs(ctx, work, request, r, err) == 0 && agent_build_record_save(ctx, r, err) == 0)
    rc = 0;
  if (top)
    fs_remove_tree(top, NULL);
  if (rc < 0) {
    agent_build_record_free(r);
    return -1;
  }
  *out = r;
  return 0;
}
