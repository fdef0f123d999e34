/* Running a plan (plan.h): its backends resolved against the registry before anything runs,
 * then each stage in a session over the project directory, its steps one after another, the
 * first failing step ending the plan with its exit code. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cordon/session.h>

#include "base/cleanup.h"
#include "plan/plan.h"

int plan_resolve(const struct plan *p, const struct cordon_registry *reg,
                 struct cordon_error **err) {
  for (size_t i = 0; i < p->n_stages; i++) {
    const struct plan_stage *st = &p->stages[i];
    const struct cordon_backend *b = NULL;
    struct cordon_error *why = NULL;
    if (cordon_registry_find(reg, st->backend, &b, &why) == 0)
      continue;
    struct plan_mark at = st->has_sandbox ? st->backend_at : st->at;
    cordon_error_set(err, CORDON_ERR_INVALID, 0, "%s:%u:%u: stage %s: %s", p->file, at.line,
                     at.column, st->name, why && why->message ? why->message : "unknown backend");
    cordon_error_free(why);
    return -1;
  }
  return 0;
}

/* The stage's manifest: the project directory as its workspace, its options as the policy. */
static void stage_manifest(const struct plan_stage *st, const struct cordon_backend *b,
                           const char *project, struct cordon_manifest *m) {
  const struct plan_options *o = &st->options;
  *m = (struct cordon_manifest){0};
  m->workspace = project;
  m->image = o->image;
  m->env = (const char *const *)o->env;
  m->default_timeout = o->timeout_seconds;
  m->ephemeral = true; /* made and destroyed by this process */
  m->policy.read_only = (const char *const *)o->read_only;
  m->policy.hidden = (const char *const *)o->hidden;
  m->policy.egress = o->net_set ? o->net : cordon_backend_default_egress(b);
  m->policy.limits.memory_bytes = o->memory_mb << 20;
  m->policy.require_enforcement = true; /* a plan asks; it never runs with less */
}

static int run_stage(struct cordon_context *ctx, const struct cordon_backend *b,
                     const struct plan_stage *st, int out_fd, int err_fd,
                     const struct plan_callbacks *cb, int *exit_code, struct cordon_error **err) {
  struct cordon_manifest m;
  stage_manifest(st, b, cordon_context_project_dir(ctx), &m);
  struct cordon_session *s = NULL;
  if (cordon_session_create(ctx, b, &m, &s, err) < 0)
    return cordon_error_prefix(err, "stage %s", st->name);
  int r = 0;
  *exit_code = 0;
  for (size_t i = 0; i < st->n_steps && *exit_code == 0; i++) {
    const struct plan_step *step = &st->steps[i];
    if (cb && cb->step_start)
      cb->step_start(cb->data, st, step, i);
    struct cordon_exec_request req = {.argv = (const char *const *)step->argv,
                                      .caller_stdio = true,
                                      .stdio_fds = {-1, out_fd, err_fd}};
    struct cordon_exec_result res = {0};
    if (cordon_session_exec(s, &req, &res, err) < 0) {
      cordon_error_prefix(err, "stage %s, step %zu", st->name, i + 1);
      r = -1;
      break;
    }
    *exit_code = res.timed_out ? 124 : res.exit_code;
    if (cb && cb->step_end)
      cb->step_end(cb->data, st, step, i, &res);
    cordon_exec_result_clear(&res);
    if (cordon_interrupted()) {
      r = cordon_error_set(err, CORDON_ERR_INTERRUPTED, 0, "interrupted");
      break;
    }
  }
  struct cordon_error *destroy_err = NULL;
  if (cordon_session_destroy(s, &destroy_err) < 0 && r == 0) {
    *err = destroy_err;
    return cordon_error_prefix(err, "stage %s", st->name);
  }
  cordon_error_free(destroy_err);
  return r;
}

int plan_run(struct cordon_context *ctx, const struct cordon_registry *reg, const struct plan *p,
             int out_fd, int err_fd, const struct plan_callbacks *cb, int *exit_code,
             struct cordon_error **err) {
  *exit_code = 0;
  if (plan_resolve(p, reg, err) < 0)
    return -1;
  for (size_t i = 0; i < p->n_stages && *exit_code == 0; i++) {
    const struct plan_stage *st = &p->stages[i];
    const struct cordon_backend *b = NULL;
    if (cordon_registry_find(reg, st->backend, &b, err) < 0)
      return -1;
    if (cb && cb->stage_start)
      cb->stage_start(cb->data, st, i);
    if (run_stage(ctx, b, st, out_fd, err_fd, cb, exit_code, err) < 0)
      return -1;
  }
  return 0;
}
