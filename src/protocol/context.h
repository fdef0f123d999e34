/* The project context (internal layout). */
#ifndef CORDON_BACKEND_CONTEXT_H
#define CORDON_BACKEND_CONTEXT_H

#include <stdbool.h>

#include <cordon/session.h>

struct cordon_context {
  char *project_dir;
  char *state_dir; /* <project>/.cordon */
  bool registered; /* in the registry of projects (confine/private.h) */
};

/* Create (mode 0700) <state_dir>/<sub> and its parent; *out gets the path when out != NULL. */
int context_ensure_dir(struct cordon_context *ctx, const char *sub, char **out,
                       struct cordon_error **err);

/* cordon_context_project_id for a state directory (<project>/.cordon) given by path. */
int context_project_id_at(const char *state_dir, bool create, char *out, struct cordon_error **err);

#endif
