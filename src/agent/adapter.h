/* Adapters for agent CLIs (`cordon agent --adapter NAME`): what cordon must know about a coding
 * agent's CLI to run it confined, kept as data (data/adapters/NAME.yaml, compiled into the
 * binary): the flags that turn its own sandbox and approvals off, its state directories (granted
 * read-write), the variables its provider's auth needs (added to the environment allowlist),
 * and whether it has a sandbox of its own. The rule for dropping that sandbox lives here, pure:
 * only when cordon's confinement or the host's declared tier is container or vm. */
#ifndef CORDON_AGENT_ADAPTER_H
#define CORDON_AGENT_ADAPTER_H

#include <stdbool.h>
#include <stddef.h>

#include <cordon/backend.h>
#include <cordon/error.h>

#include "agent/mechanism.h"

#define AGENT_ADAPTER_MAX_BYTES (16u * 1024u)

struct agent_adapter {
  char *name;
  bool own_sandbox;     /* the CLI confines itself (its sandbox, its approvals) */
  char **disable_flags; /* NULL-terminated: inserted after argv[0] when dropping */
  char **state_dirs;    /* NULL-terminated, each "~/REL" (REL normalised, no ..) */
  char **env;           /* NULL-terminated variable names */
};

/* One embedded data file (adapter-data.c, generated at build time from data/adapters/). */
struct agent_adapter_file {
  const char *name; /* the file's name without .yaml */
  const char *text;
  size_t length;
};
extern const struct agent_adapter_file agent_adapter_files[];
extern const size_t agent_adapter_file_count;

/* Parse one adapter file (pure); name is the file's own name, which `name:` must repeat.
 * Unknown keys, wrong types, a state dir not under ~/ or with "..", a flag not starting with
 * '-', or a bad variable name are refused naming the key. */
int agent_adapter_parse(const char *name, const char *text, size_t length,
                        struct agent_adapter **out, struct cordon_error **err);
/* The embedded adapter NAME; unknown is CORDON_ERR_USAGE listing the names. */
int agent_adapter_load(const char *name, struct agent_adapter **out, struct cordon_error **err);
void agent_adapter_free(struct agent_adapter *adapter);
/* "aider, claude, codex, gemini, generic" (static storage). */
const char *agent_adapter_names(void);

/* The isolation tier a confinement mechanism gives (pure): ns, bwrap and gvisor are container,
 * landlock and seatbelt process (no namespaces: the agent shares the host's view), off none.
 * auto must be resolved first: it counts as none. */
enum cordon_isolation_tier agent_mechanism_tier(enum agent_mechanism_kind kind);

/* Whether the adapter's disable_flags go in (pure): only when there are any and the stronger of
 * cordon's confinement and the host's declared tier is container or vm. At process or none the
 * CLI's own guard stays: cordon's boundary alone is not enough to replace it. */
bool agent_adapter_drops_sandbox(const struct agent_adapter *adapter,
                                 enum cordon_isolation_tier confinement,
                                 enum cordon_isolation_tier host);

/* argv with the disable_flags inserted after argv[0] when drop (else a copy); a flag already
 * present in argv is not repeated. Pure; *out is strv_free'd. */
int agent_adapter_argv(const struct agent_adapter *adapter, const char *const *argv, bool drop,
                       char ***out, struct cordon_error **err);

/* The state directories as absolute paths under home (an absolute path); pure. */
int agent_adapter_state_dirs(const struct agent_adapter *adapter, const char *home, char ***out,
                             struct cordon_error **err);

/* The effect the grant needs: the state directories resolved under home, each created (0700,
 * with its parents) when missing so the CLI can write it inside a read-only host view, and
 * returned canonical (realpath), as the policy's allow_rw wants them. */
int agent_adapter_prepare_state_dirs(const struct agent_adapter *adapter, const char *home,
                                     char ***out, struct cordon_error **err);

#endif
