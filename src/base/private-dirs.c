/* cordon's private directories: see private-dirs.h. */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/private-dirs.h"

static int join(char **out, const char *dir, const char *tail, struct cordon_error **err) {
  if (asprintf(out, "%s%s", dir, tail) < 0) {
    *out = NULL;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "path");
  }
  return 0;
}

int private_state_home(char **out, struct cordon_error **err) {
  const char *state = getenv("XDG_STATE_HOME");
  /* The XDG spec says relative values are to be ignored. */
  if (state && state[0] == '/')
    return join(out, state, "/cordon", err);
  const char *home = getenv("HOME");
  if (!home || home[0] != '/') {
    struct passwd *pw = getpwuid(geteuid());
    home = pw ? pw->pw_dir : NULL;
  }
  if (!home || home[0] != '/')
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "no state directory: set XDG_STATE_HOME or HOME");
  return join(out, home, "/.local/state/cordon", err);
}

int private_runtime_dir(char **out, struct cordon_error **err) {
  const char *env = getenv("CORDON_RUNTIME_DIR");
  if (env && *env) {
    if (env[0] != '/')
      return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                              "CORDON_RUNTIME_DIR must be an absolute path, not '%s'", env);
    return join(out, env, "", err);
  }
  if (geteuid() == 0)
    return join(out, "/run/cordon", "", err);
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  if (xdg && xdg[0] == '/')
    return join(out, xdg, "/cordon", err);
  _cleanup_free_ char *home = NULL;
  if (private_state_home(&home, err) < 0)
    return -1;
  return join(out, home, "/run", err);
}
