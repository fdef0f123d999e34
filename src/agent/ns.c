/* The ns mechanism: cordon's own confinement (namespaces, seccomp, cgroups), reached through the
 * public session API exactly as `cordon run` uses it. The manifest's workspace is the project
 * and its root (where the workspace appears) is the project's own host path, so every path
 * means the same inside and out; the policy's lists become the manifest's, the read-write
 * grants become host binds (volumes) at their own paths. One exec with the caller's stdio (or
 * a pty), then the session is destroyed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cordon/cordon.h>

#include "agent/mechanism.h"
#include "base/cleanup.h"
#include "base/proc.h"
#include "base/strv.h"
#include "confine/policy.h"
#include "exec/pty.h"
#include "net/proxy.h"

static int find_ns(struct cordon_registry **reg, const struct cordon_backend **b,
                   struct cordon_error **err) {
  if (cordon_registry_load(reg, err) < 0 || cordon_registry_find(*reg, "ns", b, err) < 0)
    return -1;
  _cleanup_free_ char *reason = NULL;
  if ((*b)->available(*b, &reason) != 1)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "agent mechanism ns is unavailable: %s",
                            reason ? reason : "the ns backend cannot run here");
  return 0;
}

static int ns_preflight(const struct agent_policy *policy, struct cordon_error **err) {
  (void)policy;
  struct cordon_registry *reg = NULL;
  const struct cordon_backend *b = NULL;
  int r = find_ns(&reg, &b, err);
  cordon_registry_free(reg);
  return r;
}

/* The manifest's pieces that need memory of their own. */
struct ns_manifest {
  char **hidden;
  struct cordon_volume *volumes;
  char **read_only; /* the policy's, and .cordon/agent-visible shown inside the mask of .cordon */
  struct cordon_egress_rules egress_rules; /* net restricted: the policy's lists (borrowed) */
};

static void ns_manifest_clear(struct ns_manifest *nm) {
  strv_free(nm->hidden);
  free(nm->volumes);
  strv_free(nm->read_only);
}

static int build_manifest(const struct agent_policy *p, struct cordon_manifest *m,
                          struct ns_manifest *nm, struct cordon_error **err) {
  memset(m, 0, sizeof(*m));
  nm->hidden = strv_copy((const char *const *)p->hidden_dirs);
  for (size_t i = 0; nm->hidden && p->hidden_files && p->hidden_files[i]; i++)
    if (strv_push(&nm->hidden, p->hidden_files[i]) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "agent manifest");
  size_t n_rw = strv_length((const char *const *)p->allow_rw);
  nm->volumes = calloc(n_rw + 1, sizeof(*nm->volumes));
  if (!nm->hidden || !nm->volumes)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "agent manifest");
  for (size_t i = 0; i < n_rw; i++)
    nm->volumes[i] = (struct cordon_volume){.source = p->allow_rw[i], .target = p->allow_rw[i]};
  m->workspace = p->project;
  m->root = p->project;
  m->ephemeral = true; /* destroyed below, by this process */
  m->one_shot = true;
  nm->read_only = strv_copy((const char *const *)p->read_only);
  if (!nm->read_only || (p->agent_visible && strv_push(&nm->read_only, p->agent_visible) < 0))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "agent manifest");
  m->policy.read_only = (const char *const *)nm->read_only;
  m->policy.hidden = (const char *const *)nm->hidden;
  m->policy.allow_ro = (const char *const *)p->allow_ro;
  if (cordon_egress_parse(p->net, &m->policy.egress) < 0)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "net %s", p->net);
  nm->egress_rules = (struct cordon_egress_rules){
      .allow_domains = (const char *const *)p->allow_domains,
      .allow_cidrs = (const char *const *)p->allow_cidrs,
      .resolve = (const char *const *)p->resolve,
  };
  if (m->policy.egress == CORDON_EGRESS_RESTRICTED)
    m->egress_rules = &nm->egress_rules;
  m->policy.limits.tmp_bytes = p->tmp_bytes;
  m->policy.require_enforcement = true;
  m->volumes = n_rw ? nm->volumes : NULL;
  m->n_volumes = n_rw;
  return 0;
}

/* The agent's working directory as the session API takes it: relative to the workspace. */
static const char *relative_cwd(const struct agent_policy *p) {
  size_t n = strlen(p->project);
  if (strncmp(p->cwd, p->project, n) || (p->cwd[n] && p->cwd[n] != '/'))
    return NULL;
  return p->cwd[n] ? p->cwd + n + 1 : NULL;
}

static int exec_agent(struct cordon_session *s, const struct agent_launch *launch, int *exit_code,
                      struct cordon_error **err) {
  const struct agent_policy *p = launch->policy;
  /* The agent's environment is whole (clear_env): under restricted it gets the proxy's
   * variables itself, under its own (which may override them). */
  _cleanup_(strv_freep) char **env =
      !strcmp(p->net, "restricted")
          ? strv_env_merge(net_proxy_environment, (const char *const *)p->env)
          : strv_copy((const char *const *)p->env);
  if (!env)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "agent environment");
  struct cordon_exec_request req = {
      .argv = launch->argv,
      .cwd = relative_cwd(p),
      .env = (const char *const *)env,
      .clear_env = true,
      .timeout = -1,
      .caller_stdio = true,
      .stdio_fds = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO},
  };
  struct exec_pty *pty = NULL;
  if (launch->tty) {
    int size_fd = isatty(STDIN_FILENO) ? STDIN_FILENO : STDOUT_FILENO;
    if (exec_pty_open(STDIN_FILENO, STDOUT_FILENO, size_fd, &pty, err) < 0)
      return -1;
    int slave = exec_pty_slave(pty);
    req.tty = true;
    req.stdio_fds[0] = req.stdio_fds[1] = req.stdio_fds[2] = slave;
    if (exec_pty_start(pty, err) < 0) {
      exec_pty_free(pty);
      return -1;
    }
  }
  struct cordon_exec_result res;
  int r = cordon_session_exec(s, &req, &res, err);
  exec_pty_free(pty);
  if (r < 0)
    return -1;
  *exit_code = res.exit_code;
  cordon_exec_result_clear(&res);
  return 0;
}

static int ns_run(const struct agent_launch *launch, int *exit_code, struct cordon_error **err) {
  struct cordon_registry *reg = NULL;
  struct cordon_context *ctx = NULL;
  const struct cordon_backend *b = NULL;
  struct cordon_session *s = NULL;
  struct ns_manifest nm = {0};
  struct cordon_manifest m;
  int r = -1;
  if (find_ns(&reg, &b, err) < 0 || build_manifest(launch->policy, &m, &nm, err) < 0 ||
      cordon_context_open(launch->policy->project, &ctx, err) < 0 ||
      cordon_session_create(ctx, b, &m, &s, err) < 0)
    goto out;
  r = exec_agent(s, launch, exit_code, err);
  /* The agent has ended and its sandbox is empty; what is left is the kernel's teardown of the
   * namespaces (an RCU grace period or two, the longest wait of a cold start). The mechanisms
   * are run by CLI verbs that exit once the agent has ended (nothing after this needs pid 1
   * gone), so that teardown is left to our exit, as `cordon run` does (proc.h). */
  if (r == 0)
    proc_exit_pending_set();
  struct cordon_error *destroy_err = NULL;
  if (cordon_session_destroy(s, r < 0 ? &destroy_err : err) < 0 && r == 0)
    r = -1;
  cordon_error_free(destroy_err);
out:
  ns_manifest_clear(&nm);
  cordon_context_free(ctx);
  cordon_registry_free(reg);
  return r;
}

const struct agent_mechanism agent_mechanism_ns = {
    .name = "ns", .preflight = ns_preflight, .run = ns_run};
