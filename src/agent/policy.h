/* The agent's confinement policy (`cordon agent`): one pure value, built and validated once
 * (policy.c: flags, the policy file, the environment allowlist), then lowered by each mechanism
 * (mechanism.h) into its own terms: ns mounts, a bubblewrap argv, Landlock rules, an OCI spec,
 * a seatbelt profile. Every path is resolved before a mechanism sees it, so no mechanism looks a
 * path up twice or decides policy on its own. */
#ifndef CORDON_AGENT_POLICY_H
#define CORDON_AGENT_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>

/* Where the agent sees cordon's own state: `.cordon/` is always hidden, except this directory
 * (when it exists), which the agent sees read-only: documents the orchestrator leaves for it. */
#define AGENT_STATE_DIR ".cordon"
#define AGENT_VISIBLE_DIR ".cordon/agent-visible"

struct agent_policy {
  char *project; /* absolute, canonical host path of the project root */
  char *cwd;     /* absolute host path the agent starts in: the project or beneath it */
  /* Project-relative, normalised, NULL-terminated; overlaps checked (confine/policy.c rules). */
  char **read_only;
  char **hidden_dirs;  /* existing directories; always holds AGENT_STATE_DIR */
  char **hidden_files; /* existing non-directories */
  char *agent_visible; /* AGENT_VISIBLE_DIR when it exists (read-only for the agent), else NULL */
  /* Absolute canonical host paths outside the project, NULL-terminated. */
  char **allow_ro;
  char **allow_rw;
  char **env;         /* the agent's whole environment, NAME=VALUE, already filtered */
  char *net;          /* "none", "loopback", "restricted" (mechanism ns only) or "open" */
  uint64_t tmp_bytes; /* the private /tmp's size */
  /* net restricted: what its proxy lets through (flags and file joined; NULL-terminated, or
   * NULL when none given) */
  char **allow_domains, **allow_cidrs, **resolve;
};

void agent_policy_free(struct agent_policy *policy);

/* ---- building a policy (policy.c) ---- */

/* The largest policy file read (bytes). */
#define AGENT_POLICY_FILE_MAX (64u * 1024u)

/* What a policy is built from: the flags, the policy file, the caller's environment. Every list
 * is NULL-terminated (NULL: empty). */
struct agent_policy_input {
  const char *project;          /* the project directory (any spelling) */
  const char *cwd;              /* where the caller stands; NULL: the project */
  const char *const *read_only; /* --ro: project-relative */
  const char *const *hidden;    /* --hide: project-relative, each must exist */
  const char *const *allow_ro;  /* --allow-ro: absolute host paths */
  const char *sandbox_allow;    /* CORDON_SANDBOX_ALLOW: colon-separated host paths */
  const char *const *env_allow; /* --env-allow NAME */
  const char *const *extra_env; /* names a caller adds (an adapter's auth variables) */
  const char *policy_file;      /* --policy FILE, or NULL */
  const char *net;              /* --net, or NULL: the file's, else "loopback" */
  uint64_t tmp_bytes;           /* --tmp-size; 0: CORDON_DEFAULT_TMP_BYTES */
  const char *const *environ;   /* the caller's environment, NAME=VALUE */
  /* Host paths a caller grants read-write (an adapter's state directories): absolute,
   * existing, outside the project; they join the file's allow_rw. */
  const char *const *extra_allow_rw;
  /* --allow-domain, --allow-cidr, --resolve: net restricted only */
  const char *const *allow_domains, *const *allow_cidrs, *const *resolve;
};

/* The lists of a policy file (pure parse; every list NULL-terminated or NULL). */
struct agent_policy_file {
  char **read_only, **hidden, **allow_ro, **allow_rw, **env_allow;
  char *net;
  char **allow_domains, **allow_cidrs, **resolve; /* net restricted's rules */
};
void agent_policy_file_clear(struct agent_policy_file *file);
/* Parse a policy file's YAML text (pure): a mapping whose keys are read_only, hidden, allow_ro,
 * allow_rw, env_allow, allow_domains, allow_cidrs, resolve (lists of strings) and net (a
 * string). An unknown key or a value of the
 * wrong type is CORDON_ERR_USAGE naming the key. */
int agent_policy_file_parse(const char *text, size_t length, const char *name,
                            struct agent_policy_file *out, struct cordon_error **err);

/* Whether the environment variable NAME (length bytes) may reach the agent (pure): PATH, HOME,
 * USER, LANG, LC_*, TERM, TZ, CORDON_SANDBOX*, and the names in `extra`. */
bool agent_env_name_allowed(const char *name, size_t length, const char *const *extra);
/* The agent's environment (pure): the entries of environ whose names are allowed, then TMPDIR,
 * TMP and TEMP pointing at the private /tmp. *out is NULL-terminated, freed with strv_free. */
int agent_env_filter(const char *const *environ, const char *const *extra, char ***out,
                     struct cordon_error **err);

/* Build and validate the policy once (reads the file system: the project, the hidden and
 * read-only paths, the grants; creates the project's .cordon/ when missing, so it can be
 * hidden). *out freed with agent_policy_free. */
int agent_policy_build(const struct agent_policy_input *in, struct agent_policy **out,
                       struct cordon_error **err);

#endif
