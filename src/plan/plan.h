/* plan.yaml: stages run in order, each in a session on its own backend over the project's
 * directory, and steps in each (an argv, or `run:` a shell line run as /bin/sh -c LINE).
 *
 *   stages:
 *     - name: test
 *       sandbox:                 # optional: without it the stage runs on worktree
 *         backend: ns
 *         options: {image, memory_mb, timeout_seconds, net, read_only, hidden, env}
 *       steps:
 *         - [make, test]         # or argv: [make, test]
 *         - run: "make lint | tee lint.txt"
 *
 * The parse (plan_parse) is pure and refuses, with FILE:LINE:COLUMN, an unknown key, a
 * missing one, a wrong type, a duplicate key or stage name. plan_resolve checks the backends
 * against the registry (again with the place); plan_run runs the stages (run.c). */
#ifndef CORDON_PLAN_PLAN_H
#define CORDON_PLAN_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>
#include <cordon/session.h>

#define PLAN_MAX_BYTES (1u << 20)
#define PLAN_DEFAULT_BACKEND "worktree"
#define PLAN_SHELL "/bin/sh"

struct plan_mark {
  unsigned line, column; /* 1-based */
};

struct plan_step {
  char **argv; /* NULL-terminated; for `run:` {PLAN_SHELL, "-c", LINE} */
  bool shell;  /* written as `run:` */
  struct plan_mark at;
};

struct plan_options {
  char *image;            /* NULL: the backend's default */
  uint64_t memory_mb;     /* 0: no limit */
  double timeout_seconds; /* each step's; 0: none */
  bool net_set;
  enum cordon_egress net; /* when net_set; else the backend's default class */
  char **read_only;       /* workspace-relative paths; NULL-terminated, may be empty */
  char **hidden;
  char **env; /* "KEY=VALUE" */
};

struct plan_stage {
  char *name;
  char *backend; /* PLAN_DEFAULT_BACKEND without `sandbox:` */
  bool has_sandbox;
  struct plan_mark at, backend_at;
  struct plan_options options;
  struct plan_step *steps;
  size_t n_steps;
};

struct plan {
  char *file; /* as the errors name it */
  struct plan_stage *stages;
  size_t n_stages;
};

/* Parse text (file names it in errors) into *out. Pure. */
int plan_parse(const char *file, const char *text, size_t length, struct plan **out,
               struct cordon_error **err);
/* Read path (at most PLAN_MAX_BYTES) and parse it. */
int plan_load(const char *path, struct plan **out, struct cordon_error **err);
void plan_free(struct plan *p);

/* Every stage's backend is one the registry has loaded: else FILE:LINE:COLUMN naming it. */
int plan_resolve(const struct plan *p, const struct cordon_registry *reg,
                 struct cordon_error **err);

/* What plan_run reports as it goes (any may be NULL). */
struct plan_callbacks {
  void *data;
  void (*stage_start)(void *data, const struct plan_stage *stage, size_t index);
  void (*step_start)(void *data, const struct plan_stage *stage, const struct plan_step *step,
                     size_t index);
  void (*step_end)(void *data, const struct plan_stage *stage, const struct plan_step *step,
                   size_t index, const struct cordon_exec_result *res);
};

/* Run the stages in order, each in a session created over the project directory (the same
 * directory for every stage: what one stage writes, the next sees) and destroyed after it. The
 * steps' output goes to out_fd and err_fd. Stops at the first step that exits non-zero:
 * *exit_code is its code (124 when it timed out), 0 when every step succeeded. Returns -1 when
 * cordon itself failed (a session could not be made, an exec not run). */
int plan_run(struct cordon_context *ctx, const struct cordon_registry *reg, const struct plan *p,
             int out_fd, int err_fd, const struct plan_callbacks *cb, int *exit_code,
             struct cordon_error **err);

#endif
