/* The bwrap mechanism: the system's bubblewrap, its argv generated from the policy
 * (agent_bwrap_argv, pure) and run with execvp. The host's system directories are bound
 * read-only and nothing else of the host is there but the grants; the project is bound at its
 * own path, read-only paths re-bound read-only over it, hidden directories covered by an empty
 * read-only tmpfs and hidden files by /dev/null; .cordon/agent-visible is re-bound read-only
 * inside the mask of .cordon/. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/mechanism.h"
#include "base/cleanup.h"
#include "base/strv.h"
#include "confine/policy.h"

static int push(char ***v, const char *a, struct cordon_error **err) {
  return strv_push(v, a) < 0 ? cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "bwrap argv") : 0;
}

static int push2(char ***v, const char *a, const char *b, struct cordon_error **err) {
  return push(v, a, err) < 0 || push(v, b, err) < 0 ? -1 : 0;
}

static int push3(char ***v, const char *a, const char *b, const char *c,
                 struct cordon_error **err) {
  return push(v, a, err) < 0 || push2(v, b, c, err) < 0 ? -1 : 0;
}

/* The absolute host path of a project-relative one. */
static int project_path(const struct agent_policy *p, const char *rel, char **out,
                        struct cordon_error **err) {
  if (asprintf(out, "%s/%s", p->project, rel) < 0) {
    *out = NULL;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "bwrap argv");
  }
  return 0;
}

/* The host: system directories and grants (read-only), the read-write grants, /dev, /proc and a
 * private, size-capped /tmp. */
static int host_args(const struct agent_policy *p, char ***v, struct cordon_error **err) {
  for (size_t i = 0; confine_default_system_paths[i]; i++)
    if (push3(v, "--ro-bind-try", confine_default_system_paths[i], confine_default_system_paths[i],
              err) < 0)
      return -1;
  char size[32];
  snprintf(size, sizeof(size), "%llu", (unsigned long long)p->tmp_bytes);
  if (push3(v, "--dev", "/dev", "--proc", err) < 0 || push(v, "/proc", err) < 0 ||
      push2(v, "--size", size, err) < 0 || push2(v, "--tmpfs", "/tmp", err) < 0)
    return -1;
  for (size_t i = 0; p->allow_ro && p->allow_ro[i]; i++)
    if (push3(v, "--ro-bind", p->allow_ro[i], p->allow_ro[i], err) < 0)
      return -1;
  for (size_t i = 0; p->allow_rw && p->allow_rw[i]; i++)
    if (push3(v, "--bind", p->allow_rw[i], p->allow_rw[i], err) < 0)
      return -1;
  return 0;
}

/* The project at its own path, then what the policy carves out of it. */
static int project_args(const struct agent_policy *p, char ***v, struct cordon_error **err) {
  if (push3(v, "--bind", p->project, p->project, err) < 0)
    return -1;
  for (size_t i = 0; p->read_only && p->read_only[i]; i++) {
    _cleanup_free_ char *path = NULL;
    if (confine_reshown(p->read_only[i], (const char *const *)p->hidden_dirs))
      continue; /* shown inside its hidden directory's mask, below */
    if (project_path(p, p->read_only[i], &path, err) < 0 ||
        push3(v, "--ro-bind", path, path, err) < 0)
      return -1;
  }
  for (size_t i = 0; p->hidden_files && p->hidden_files[i]; i++) {
    _cleanup_free_ char *path = NULL;
    if (project_path(p, p->hidden_files[i], &path, err) < 0 ||
        push3(v, "--ro-bind", "/dev/null", path, err) < 0)
      return -1;
  }
  for (size_t i = 0; p->hidden_dirs && p->hidden_dirs[i]; i++) {
    _cleanup_free_ char *path = NULL;
    if (project_path(p, p->hidden_dirs[i], &path, err) < 0 ||
        push2(v, "--perms", "0555", err) < 0 || push2(v, "--tmpfs", path, err) < 0)
      return -1;
    /* The agent-visible directory is bound inside the mask of .cordon/ before the mask turns
     * read-only (its mount point is made in the still-writable tmpfs). */
    if (p->agent_visible && !strcmp(p->hidden_dirs[i], AGENT_STATE_DIR)) {
      _cleanup_free_ char *visible = NULL;
      if (project_path(p, p->agent_visible, &visible, err) < 0 ||
          push3(v, "--ro-bind", visible, visible, err) < 0)
        return -1;
    }
    /* So is a read-only path beneath the hidden directory. */
    for (size_t j = 0; p->read_only && p->read_only[j]; j++) {
      _cleanup_free_ char *shown = NULL;
      if (confine_reshown(p->read_only[j], (const char *const[]){p->hidden_dirs[i], NULL}) &&
          (project_path(p, p->read_only[j], &shown, err) < 0 ||
           push3(v, "--ro-bind", shown, shown, err) < 0))
        return -1;
    }
    if (push2(v, "--remount-ro", path, err) < 0)
      return -1;
  }
  return 0;
}

int agent_bwrap_argv(const struct agent_launch *launch, char ***out, struct cordon_error **err) {
  const struct agent_policy *p = launch->policy;
  *out = NULL;
  _cleanup_(strv_freep) char **v = calloc(1, sizeof(char *));
  if (!v)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "bwrap argv");
  if (push(&v, "bwrap", err) < 0 || push(&v, "--unshare-all", err) < 0 ||
      (!strcmp(p->net, "open") && push(&v, "--share-net", err) < 0) ||
      push(&v, "--die-with-parent", err) < 0 ||
      /* Without a terminal of its own the agent gets no session of ours: no TIOCSTI into the
       * caller's terminal. With one, it needs the caller's for job control. */
      (!launch->tty && push(&v, "--new-session", err) < 0) || host_args(p, &v, err) < 0 ||
      project_args(p, &v, err) < 0 || push2(&v, "--chdir", p->cwd, err) < 0 ||
      push(&v, "--clearenv", err) < 0)
    return -1;
  for (size_t i = 0; p->env && p->env[i]; i++) {
    const char *eq = strchr(p->env[i], '=');
    if (!eq)
      continue;
    _cleanup_free_ char *name = strndup(p->env[i], (size_t)(eq - p->env[i]));
    if (!name || push3(&v, "--setenv", name, eq + 1, err) < 0)
      return name ? -1 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "bwrap argv");
  }
  if (push(&v, "--", err) < 0)
    return -1;
  for (size_t i = 0; launch->argv && launch->argv[i]; i++)
    if (push(&v, launch->argv[i], err) < 0)
      return -1;
  *out = steal_ptr(&v);
  return 0;
}

/* Fork, exec argv (argv[0] looked up in PATH) with stdout and stderr to /dev/null when quiet,
 * and wait: the exit status as a shell gives it (128+signal), or -1 when it could not start. */
static int spawn_wait(char *const *argv, bool quiet) {
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    if (quiet) {
      int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
      if (null >= 0) {
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
      }
    }
    execvp(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int bwrap_preflight(const struct agent_policy *policy, struct cordon_error **err) {
  (void)policy;
  char *const probe[] = {"bwrap", "--unshare-all", "--ro-bind", "/", "/", "--", "true", NULL};
  int r = spawn_wait(probe, true);
  if (r == 127)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "agent mechanism bwrap needs bubblewrap (bwrap), which is not "
                            "installed (no bwrap in PATH)");
  if (r != 0)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "agent mechanism bwrap: bubblewrap cannot make namespaces here "
                            "(`bwrap --unshare-all` failed; user namespaces disabled?)");
  return 0;
}

static int bwrap_unenforced(const struct agent_policy *policy, char ***out,
                            struct cordon_error **err) {
  *out = NULL;
  if (strcmp(policy->net, "none"))
    return 0;
  /* bubblewrap always brings up a private loopback in its network namespace. */
  if (strv_push(out, "net none is NOT enforced under bwrap: the agent has a private loopback "
                     "interface (still no route out)") < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "unenforced list");
  return 0;
}

static int bwrap_run(const struct agent_launch *launch, int *exit_code, struct cordon_error **err) {
  _cleanup_(strv_freep) char **argv = NULL;
  if (agent_bwrap_argv(launch, &argv, err) < 0)
    return -1;
  /* Ctrl-C reaches the agent through the terminal; cordon waits for it to end. */
  struct sigaction ignore = {.sa_handler = SIG_IGN}, old_int, old_quit;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  pid_t pid = fork();
  if (pid == 0) {
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    execvp(argv[0], argv);
    _exit(127);
  }
  int status = 0, r = 0;
  if (pid < 0)
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "starting bwrap");
  while (pid > 0 && waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "waiting for bwrap");
      break;
    }
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGQUIT, &old_quit, NULL);
  if (r < 0)
    return -1;
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return 0;
}

const struct agent_mechanism agent_mechanism_bwrap = {.name = "bwrap",
                                                      .preflight = bwrap_preflight,
                                                      .unenforced = bwrap_unenforced,
                                                      .run = bwrap_run};
