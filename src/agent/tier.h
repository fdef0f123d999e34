/* The host isolation tier (`cordon agent --host-isolation`): what the operator declares the host
 * already applies around cordon (none < process < container < vm, the protocol's tiers), with
 * the evidence they give and the layer the declaration came from. Resolved once through a chain
 * (flag, CORDON_HOST_ISOLATION, the project's .cordon/config.yaml, the user's and the system's
 * config.yaml), first layer that declares a tier wins; recorded in the audit chain as
 * `sandbox.host_isolation_declared`. cordon cannot check the declaration: it is the operator's
 * word, kept where it can be shown later. */
#ifndef CORDON_AGENT_TIER_H
#define CORDON_AGENT_TIER_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <cordon/backend.h>
#include <cordon/error.h>

#define AGENT_TIER_EVENT "sandbox.host_isolation_declared"
/* The system layer's file; CORDON_SYSTEM_CONFIG (a path) replaces it, for tests and packagers. */
#define AGENT_TIER_SYSTEM_CONFIG "/etc/cordon/config.yaml"
#define AGENT_TIER_SYSTEM_CONFIG_ENV "CORDON_SYSTEM_CONFIG"
#define AGENT_TIER_ENV "CORDON_HOST_ISOLATION"
#define AGENT_TIER_EVIDENCE_ENV "CORDON_HOST_ISOLATION_EVIDENCE"
#define AGENT_CONFIG_MAX_BYTES (64u * 1024u)

enum agent_tier_layer {
  AGENT_TIER_LAYER_DEFAULT = 0, /* nothing declared: tier none */
  AGENT_TIER_LAYER_FLAG,
  AGENT_TIER_LAYER_ENV,
  AGENT_TIER_LAYER_PROJECT,
  AGENT_TIER_LAYER_USER,
  AGENT_TIER_LAYER_SYSTEM,
};

/* Where each layer is read from; NULL skips a layer. The resolver reads the three files and
 * nothing else (no getenv): agent_tier_sources_from_env fills this from the process. */
struct agent_tier_sources {
  const char *flag;           /* --host-isolation */
  const char *flag_evidence;  /* --host-isolation-evidence: wins over any layer's evidence */
  const char *env;            /* CORDON_HOST_ISOLATION; empty counts as unset */
  const char *env_evidence;   /* CORDON_HOST_ISOLATION_EVIDENCE */
  const char *project_config; /* <project>/.cordon/config.yaml */
  const char *user_config;    /* $XDG_CONFIG_HOME/cordon/config.yaml (~/.config by default) */
  const char *system_config;  /* /etc/cordon/config.yaml */
};

struct agent_host_tier {
  enum cordon_isolation_tier tier;
  char *evidence; /* NULL when none was given */
  enum agent_tier_layer layer;
};

/* "none", "process", "container", "vm"; anything else is CORDON_ERR_USAGE naming the accepted
 * values and what (e.g. "--host-isolation"). Pure. */
int agent_tier_parse(const char *value, const char *what, enum cordon_isolation_tier *out,
                     struct cordon_error **err);
/* "default", "flag", "env", "project", "user", "system". */
const char *agent_tier_layer_name(enum agent_tier_layer layer);

/* One config.yaml's declaration (pure): `host_isolation:` (a tier) and `evidence:` (a string);
 * other keys are left to the settings they belong to. *declared is false when the file names
 * no tier; evidence without a tier is refused. what names the file in errors. */
int agent_tier_config_parse(const char *text, size_t length, const char *what, bool *declared,
                            enum cordon_isolation_tier *tier, char **evidence,
                            struct cordon_error **err);

/* Fill sources from the environment and project (the project root, or NULL for no project
 * layer); the strings in *paths (3 slots) are allocated and freed by the caller with free(). */
int agent_tier_sources_from_env(const char *project, const char *flag, const char *flag_evidence,
                                struct agent_tier_sources *sources, char *paths[3],
                                struct cordon_error **err);

/* Walk the chain. A missing config file is skipped; an unreadable or malformed one is refused
 * (the declaration fails closed rather than falling through to a weaker layer). */
int agent_tier_resolve(const struct agent_tier_sources *sources, struct agent_host_tier *out,
                       struct cordon_error **err);
/* Both in one call, as `cordon agent` needs them: the sources from the environment, then the
 * chain. flag and flag_evidence are the options' values (NULL when not given). */
int agent_tier_resolve_env(const char *project, const char *flag, const char *flag_evidence,
                           struct agent_host_tier *out, struct cordon_error **err);
void agent_host_tier_clear(struct agent_host_tier *tier);

/* The details of the audit event (pure): {"agent_sandbox_dropped", "evidence" (null when none),
 * "layer", "tier"}, plus "adapter" when one was named. */
json_t *agent_tier_audit_details(const struct agent_host_tier *tier, bool agent_sandbox_dropped,
                                 const char *adapter);

struct cordon_context;
/* Append the event to the project's audit chain (actor uid:N, resource sandbox/<tier>). */
int agent_tier_record(struct cordon_context *ctx, const struct agent_host_tier *tier,
                      bool agent_sandbox_dropped, const char *adapter, struct cordon_error **err);

#endif
