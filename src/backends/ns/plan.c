/* The ns plan's pure half (see plan.h): from the manifest and the caller's ids to what the
 * sandbox will be, with the policy's lexical checks. No system calls: the host is resolve.c's
 * and ns.c's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/ns/plan.h"
#include "base/cleanup.h"
#include "base/strv.h"
#include "confine/devices.h"
#include "confine/policy.h"

void ns_plan_clear(struct ns_plan *p) {
  strv_free(p->system_paths);
  strv_free(p->grants);
  strv_free(p->read_only);
  strv_free(p->hidden);
  free(p->passwd);
  free(p->group);
  for (size_t i = 0; i < p->n_volumes; i++) {
    free(p->volumes[i].source);
    free(p->volumes[i].target);
  }
  free(p->volumes);
  for (size_t i = 0; i < p->n_devices; i++) {
    free((char *)p->devices[i].source);
    free((char *)p->devices[i].target);
  }
  free(p->devices);
  memset(p, 0, sizeof(*p));
}

/* Normalise each path of list (NULL: none) onto *out; `host` picks host or workspace rules. */
static int normalize_list(const char *const *list, bool host, const char *what, char ***out,
                          struct cordon_error **err) {
  for (size_t i = 0; list && list[i]; i++) {
    char *n = NULL;
    int r = host ? confine_normalize_host_path(list[i], what, &n, err)
                 : confine_normalize_workspace_path(list[i], what, &n, err);
    if (r < 0)
      return -1;
    if (strv_push_take(out, n) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  }
  return 0;
}

/* The host trees: system paths (the default list when the policy names none) and read-only
 * grants, normalised and checked against each other and the sandbox root by name. */
static int plan_host_trees(struct ns_plan *p, const struct cordon_policy *policy, const char *root,
                           struct cordon_error **err) {
  const char *const *sys =
      policy->system_paths ? policy->system_paths : confine_default_system_paths;
  p->system_optional = policy->system_paths == NULL;
  if (normalize_list(sys, true, "system path", &p->system_paths, err) < 0 ||
      normalize_list(policy->allow_ro, true, "read-only grant", &p->grants, err) < 0)
    return -1;
  if (confine_check_sandbox_root(root, (const char *const *)p->system_paths, err) < 0 ||
      confine_check_host_lists((const char *const *)p->system_paths, (const char *const *)p->grants,
                               root, err) < 0)
    return -1;
  return 0;
}

/* The workspace's read-only and hidden lists, normalised and checked by name (they are checked
 * again once resolved: two names may resolve to overlapping trees). */
static int plan_workspace_lists(struct ns_plan *p, const struct cordon_policy *policy,
                                struct cordon_error **err) {
  /* `--ro .`: the whole workspace is mounted read-only; the rest of the list still counts. */
  _cleanup_(strv_freep) char **read_only =
      confine_without_workspace_root(policy->read_only, &p->workspace_read_only);
  if (!read_only)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  if (normalize_list((const char *const *)read_only, false, "read-only path", &p->read_only, err) <
          0 ||
      normalize_list(policy->hidden, false, "hidden path", &p->hidden, err) < 0)
    return -1;
  return confine_check_workspace_lists((const char *const *)p->read_only,
                                       (const char *const *)p->hidden, err);
}

/* Who the sandbox is: as root, the sandbox uid maps to an unprivileged host uid; rootless, to
 * ours. --user root makes the command uid 0 of the sandbox's user namespace instead, mapped to
 * the same unprivileged host uid and, like every command, without any capability. */
static void plan_identity(struct ns_plan *p, const struct ns_plan_host *host, bool user_root) {
  p->rootless = host->euid != 0;
  p->identity = (struct confine_identity){.uid = user_root ? 0 : CONFINE_SANDBOX_UID,
                                          .gid = user_root ? 0 : CONFINE_SANDBOX_GID,
                                          .can_setgroups = !p->rootless};
  p->outer_uid = p->rootless ? host->euid : host->sandbox_host_uid;
  p->outer_gid = p->rootless ? host->egid : host->sandbox_host_gid;
}

/* The identity files: /etc/passwd and /etc/group name only the sandbox uid (its home the
 * private CORDON_SANDBOX_HOME) and the overflow id, the only ids that exist inside. */
static int plan_identity_files(struct ns_plan *p, struct cordon_error **err) {
  if (asprintf(&p->passwd,
               "root:x:0:0:root:/root:/usr/sbin/nologin\n"
               "cordon:x:%u:%u:cordon sandbox:%s:/bin/sh\n"
               "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
               CONFINE_SANDBOX_UID, CONFINE_SANDBOX_GID, CORDON_SANDBOX_HOME) < 0) {
    p->passwd = NULL;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "passwd");
  }
  if (asprintf(&p->group, "root:x:0:\ncordon:x:%u:\nnogroup:x:65534:\n", CONFINE_SANDBOX_GID) < 0) {
    p->group = NULL;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "passwd");
  }
  return 0;
}

/* The volumes (-v): the library has checked their targets against the workspace root and the
 * directories every sandbox needs and resolved their sources; here their targets are kept off
 * this sandbox's own host trees (system paths, grants), where no mount point can be made. */
static int plan_volumes(struct ns_plan *p, const struct cordon_manifest *m,
                        struct cordon_error **err) {
  if (!m->n_volumes)
    return 0;
  p->volumes = calloc(m->n_volumes, sizeof(*p->volumes));
  if (!p->volumes)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "volumes");
  for (size_t i = 0; i < m->n_volumes; i++) {
    const struct cordon_volume *v = &m->volumes[i];
    struct ns_volume *nv = &p->volumes[p->n_volumes++];
    nv->read_only = v->read_only;
    if (!v->source || v->source[0] != '/')
      return cordon_error_set(err, CORDON_ERR_USAGE, 0, "volume source '%s' is not a host path",
                              v->source ? v->source : "");
    nv->source = strdup(v->source);
    if (!nv->source)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "volumes");
    if (confine_normalize_host_path(v->target, "volume target", &nv->target, err) < 0)
      return -1;
    char **lists[] = {p->system_paths, p->grants};
    for (size_t l = 0; l < 2; l++)
      for (size_t j = 0; lists[l] && lists[l][j]; j++)
        if (confine_path_covers(lists[l][j], nv->target) ||
            confine_path_covers(nv->target, lists[l][j]))
          return cordon_error_set(err, CORDON_ERR_USAGE, 0, "volume target %s overlaps %s %s",
                                  nv->target, l ? "read-only grant" : "system path", lists[l][j]);
  }
  return 0;
}

/* The granted device nodes, checked by name (the holder checks each is a character device when
 * it clones it); no two at one target. */
static int plan_devices(struct ns_plan *p, const struct cordon_manifest *m,
                        struct cordon_error **err) {
  size_t n = strv_length(m->devices);
  if (!n)
    return 0;
  p->devices = calloc(n, sizeof(*p->devices));
  if (!p->devices)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "devices");
  for (size_t i = 0; i < n; i++) {
    char *source, *target;
    if (confine_device_parse(m->devices[i], &source, &target, err) < 0)
      return -1;
    p->devices[p->n_devices++] =
        (struct confine_tree){.source = source, .target = target, .tree_fd = -1};
    for (size_t j = 0; j < i; j++)
      if (strcmp(p->devices[j].target, target) == 0)
        return cordon_error_set(err, CORDON_ERR_USAGE, 0, "two devices at %s", target);
  }
  return 0;
}

int ns_plan_build(const struct cordon_manifest *m, const struct ns_plan_host *host,
                  struct ns_plan *out, struct cordon_error **err) {
  const struct cordon_policy *policy = &m->policy;
  struct ns_plan p = {0};
  if (plan_host_trees(&p, policy, host->root, err) < 0 ||
      plan_workspace_lists(&p, policy, err) < 0 || plan_identity_files(&p, err) < 0 ||
      plan_volumes(&p, m, err) < 0 || plan_devices(&p, m, err) < 0) {
    ns_plan_clear(&p);
    return -1;
  }
  plan_identity(&p, host, m->user_root);
  p.overlay = host->from_snapshot && host->euid == 0 && host->overlay_forks;
  p.one_shot = m->one_shot && !(p.overlay && m->n_files);
  p.rlimits =
      (struct confine_rlimits){.nofile = policy->limits.nofile,
                               .fsize = policy->limits.fsize_bytes ? policy->limits.fsize_bytes
                                                                   : CORDON_DEFAULT_FSIZE_BYTES};
  p.limits = policy->limits;
  /* A holder has a leaf per exec; limits and the device cgroup rule of a grant (start.c) live on
   * the session's cgroup v2. A one-shot sandbox without either needs none: its pid namespace
   * dies with its command, and a cgroup would cost its cold start a third (docs/security.md). */
  bool any_limit = p.limits.memory_bytes || p.limits.pids || p.limits.cpus > 0;
  p.needs_cgroups = !p.one_shot || any_limit || p.n_devices > 0;
  p.oom_shield = p.limits.memory_bytes > 0;
  p.tmp_bytes = confine_tmp_bytes(&policy->limits);
  p.new_network = policy->egress != CORDON_EGRESS_OPEN;
  /* restricted: lo too, where the bridge to the proxy listens */
  p.loopback =
      policy->egress == CORDON_EGRESS_LOOPBACK || policy->egress == CORDON_EGRESS_RESTRICTED;
  *out = p;
  return 0;
}
