/* Where cordon keeps what no sandbox may ever see: its per-user state home (keys, the registry
 * of projects) and its runtime directory (control sockets of sessions). Pure lookups of the
 * environment and the password database; nothing is created here. Every confinement hides
 * these paths, inside the workspace and inside every grant. */
#ifndef CORDON_BASE_PRIVATE_DIRS_H
#define CORDON_BASE_PRIVATE_DIRS_H

#include <cordon/error.h>

/* $XDG_STATE_HOME/cordon (when absolute), else $HOME/.local/state/cordon (HOME from the
 * password database when unset). The default key directory is <state home>/keys. */
int private_state_home(char **out, struct cordon_error **err);

/* $CORDON_RUNTIME_DIR (must be absolute); else /run/cordon as root; else
 * $XDG_RUNTIME_DIR/cordon (when absolute); else <state home>/run. */
int private_runtime_dir(char **out, struct cordon_error **err);

#endif
