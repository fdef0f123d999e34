/* The host isolation tier: its names, the config chain that declares it, and its audit event
 * (tier.h). Parsing and the event body are pure; reading the three config files and appending
 * to the audit chain are the only effects, kept in the last functions of the file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cordon/audit.h>
#include <cordon/session.h>

#include "agent/tier.h"
#include "agent/yaml-read.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "crypto/jcs.h"

static const char *const layer_names[] = {
    [AGENT_TIER_LAYER_DEFAULT] = "default", [AGENT_TIER_LAYER_FLAG] = "flag",
    [AGENT_TIER_LAYER_ENV] = "env",         [AGENT_TIER_LAYER_PROJECT] = "project",
    [AGENT_TIER_LAYER_USER] = "user",       [AGENT_TIER_LAYER_SYSTEM] = "system",
};

const char *agent_tier_layer_name(enum agent_tier_layer layer) {
  return (size_t)layer < ARRAY_SIZE(layer_names) ? layer_names[layer] : "unknown";
}

int agent_tier_parse(const char *value, const char *what, enum cordon_isolation_tier *out,
                     struct cordon_error **err) {
  /* The protocol's own names (cordon_tier_name), so a declared tier reads as a backend's. */
  for (int t = CORDON_TIER_NONE; t <= CORDON_TIER_VM; t++)
    if (value && !strcmp(value, cordon_tier_name((enum cordon_isolation_tier)t))) {
      *out = (enum cordon_isolation_tier)t;
      return 0;
    }
  return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                          "%s: unknown host isolation tier '%s' (accepted: none, process, "
                          "container, vm)",
                          what, value ? value : "");
}

int agent_tier_config_parse(const char *text, size_t length, const char *what, bool *declared,
                            enum cordon_isolation_tier *tier, char **evidence,
                            struct cordon_error **err) {
  *declared = false;
  *evidence = NULL;
  yaml_document_t doc;
  if (agent_yaml_load(text, length, what, &doc, err) < 0)
    return -1;
  yaml_node_t *top = NULL;
  const char *tier_text = NULL, *evidence_text = NULL;
  int r = agent_yaml_top(&doc, what, &top, err);
  for (yaml_node_pair_t *p = top ? top->data.mapping.pairs.start : NULL;
       r == 0 && p && p < top->data.mapping.pairs.top; p++) {
    const char *key = (const char *)yaml_document_get_node(&doc, p->key)->data.scalar.value;
    yaml_node_t *value = yaml_document_get_node(&doc, p->value);
    /* The file holds other settings too (later issues add them): only these two are ours. */
    if (!strcmp(key, "host_isolation"))
      r = agent_yaml_string(value, what, key, &tier_text, err);
    else if (!strcmp(key, "evidence"))
      r = agent_yaml_string(value, what, key, &evidence_text, err);
  }
  if (r == 0 && tier_text) {
    _cleanup_free_ char *where = NULL;
    if (asprintf(&where, "%s: host_isolation", what) < 0)
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", what);
    else
      r = agent_tier_parse(tier_text, where, tier, err);
  } else if (r == 0 && evidence_text) {
    r = cordon_error_set(err, CORDON_ERR_INVALID, 0,
                         "%s: 'evidence' without 'host_isolation' (evidence of what?)", what);
  }
  if (r == 0 && tier_text) {
    *declared = true;
    if (evidence_text && !(*evidence = strdup(evidence_text)))
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", what);
  }
  yaml_document_delete(&doc);
  return r;
}

json_t *agent_tier_audit_details(const struct agent_host_tier *tier, bool agent_sandbox_dropped,
                                 const char *adapter) {
  json_t *details =
      json_pack("{s:b, s:o, s:s, s:s}", "agent_sandbox_dropped", agent_sandbox_dropped, "evidence",
                tier->evidence ? json_string(tier->evidence) : json_null(), "layer",
                agent_tier_layer_name(tier->layer), "tier", cordon_tier_name(tier->tier));
  if (details && adapter && json_object_set_new(details, "adapter", json_string(adapter)) < 0) {
    json_decref(details);
    return NULL;
  }
  return details;
}

void agent_host_tier_clear(struct agent_host_tier *tier) {
  free(tier->evidence);
  tier->evidence = NULL;
}

/* ---- effects: the environment, the config files, the audit chain ------------------------ */

int agent_tier_sources_from_env(const char *project, const char *flag, const char *flag_evidence,
                                struct agent_tier_sources *sources, char *paths[3],
                                struct cordon_error **err) {
  *sources = (struct agent_tier_sources){.flag = flag, .flag_evidence = flag_evidence};
  paths[0] = paths[1] = paths[2] = NULL;
  const char *env = getenv(AGENT_TIER_ENV);
  sources->env = env && *env ? env : NULL;
  const char *env_evidence = getenv(AGENT_TIER_EVIDENCE_ENV);
  sources->env_evidence = env_evidence && *env_evidence ? env_evidence : NULL;
  const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
  const char *system = getenv(AGENT_TIER_SYSTEM_CONFIG_ENV);
  int r = 0;
  if (project)
    r = asprintf(&paths[0], "%s/.cordon/config.yaml", project);
  /* XDG: a relative XDG_CONFIG_HOME is invalid and ignored. */
  if (r >= 0 && xdg && xdg[0] == '/')
    r = asprintf(&paths[1], "%s/cordon/config.yaml", xdg);
  else if (r >= 0 && home && home[0] == '/')
    r = asprintf(&paths[1], "%s/.config/cordon/config.yaml", home);
  if (r >= 0)
    r = asprintf(&paths[2], "%s", system && *system ? system : AGENT_TIER_SYSTEM_CONFIG);
  if (r < 0) {
    for (int i = 0; i < 3; i++)
      free(paths[i]), paths[i] = NULL;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "host isolation config");
  }
  sources->project_config = paths[0];
  sources->user_config = paths[1];
  sources->system_config = paths[2];
  return 0;
}

/* One config file's declaration; a missing file declares nothing. */
static int read_config(const char *path, bool *declared, enum cordon_isolation_tier *tier,
                       char **evidence, struct cordon_error **err) {
  *declared = false;
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
    return 0;
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s", path);
  _cleanup_free_ unsigned char *text = NULL;
  size_t length = 0;
  if (fs_read_fd(fd, AGENT_CONFIG_MAX_BYTES, &text, &length, err) < 0)
    return cordon_error_prefix(err, "%s", path);
  return agent_tier_config_parse((const char *)text, length, path, declared, tier, evidence, err);
}

int agent_tier_resolve(const struct agent_tier_sources *sources, struct agent_host_tier *out,
                       struct cordon_error **err) {
  *out = (struct agent_host_tier){.tier = CORDON_TIER_NONE, .layer = AGENT_TIER_LAYER_DEFAULT};
  _cleanup_free_ char *evidence = NULL;
  if (sources->flag) {
    if (agent_tier_parse(sources->flag, "--host-isolation", &out->tier, err) < 0)
      return -1;
    out->layer = AGENT_TIER_LAYER_FLAG;
  } else if (sources->env) {
    if (agent_tier_parse(sources->env, AGENT_TIER_ENV, &out->tier, err) < 0)
      return -1;
    out->layer = AGENT_TIER_LAYER_ENV;
    if (sources->env_evidence && !(evidence = strdup(sources->env_evidence)))
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "host isolation");
  } else {
    const struct {
      const char *path;
      enum agent_tier_layer layer;
    } files[] = {{sources->project_config, AGENT_TIER_LAYER_PROJECT},
                 {sources->user_config, AGENT_TIER_LAYER_USER},
                 {sources->system_config, AGENT_TIER_LAYER_SYSTEM}};
    for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
      bool declared = false;
      if (files[i].path && read_config(files[i].path, &declared, &out->tier, &evidence, err) < 0)
        return -1;
      if (declared) {
        out->layer = files[i].layer;
        break;
      }
    }
  }
  /* The flag's evidence explains whatever declared the tier (the orchestrator knows why). */
  if (sources->flag_evidence) {
    free(evidence);
    if (!(evidence = strdup(sources->flag_evidence)))
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "host isolation");
  }
  out->evidence = steal_ptr(&evidence);
  return 0;
}

int agent_tier_resolve_env(const char *project, const char *flag, const char *flag_evidence,
                           struct agent_host_tier *out, struct cordon_error **err) {
  char *paths[3];
  struct agent_tier_sources sources;
  if (agent_tier_sources_from_env(project, flag, flag_evidence, &sources, paths, err) < 0)
    return -1;
  int r = agent_tier_resolve(&sources, out, err);
  for (int i = 0; i < 3; i++)
    free(paths[i]);
  return r;
}

int agent_tier_record(struct cordon_context *ctx, const struct agent_host_tier *tier,
                      bool agent_sandbox_dropped, const char *adapter, struct cordon_error **err) {
  json_t *details = agent_tier_audit_details(tier, agent_sandbox_dropped, adapter);
  _cleanup_free_ char *text = NULL;
  int r = details ? jcs_dump(details, &text, NULL, err) : -1;
  json_decref(details);
  if (r < 0 || !text)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "audit entry");
  char actor[32];
  snprintf(actor, sizeof(actor), "uid:%u", (unsigned)geteuid());
  struct cordon_audit_event event = {AGENT_TIER_EVENT, actor, "sandbox",
                                     cordon_tier_name(tier->tier), text};
  struct cordon_audit_log *log = NULL;
  r = cordon_audit_open_project(ctx, NULL, &log, err);
  if (r == 0)
    r = cordon_audit_append(log, &event, NULL, err);
  cordon_audit_close(log);
  return r < 0 ? cordon_error_prefix(err, "the host isolation declaration cannot be recorded in "
                                          "the audit log")
               : 0;
}
