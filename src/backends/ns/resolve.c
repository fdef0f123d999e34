/* The ns plan resolved on the host (see plan.h): the plan's host trees and workspace lists
 * followed through symlinks to what they name, checked again once canonical, and the
 * always-hidden set (cordon's state, keys, other projects' .cordon/) found inside them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/ns/plan.h"
#include "base/cleanup.h"
#include "base/strv.h"
#include "confine/policy.h"
#include "confine/private.h"
#include "confine/resolve.h"

void ns_resolved_clear(struct ns_resolved *p) {
  confine_paths_free(p->system, p->n_system);
  confine_paths_free(p->grants, p->n_grants);
  strv_free(p->ro);
  strv_free(p->hidden_dirs);
  strv_free(p->hidden_files);
  strv_free(p->private_dirs);
  strv_free(p->hidden_host_dirs);
  free(p->home);
  for (size_t i = 0; i < p->n_trees; i++)
    if (p->trees[i].tree_fd >= 0)
      close(p->trees[i].tree_fd);
  free(p->trees);
  free(p->workspace_real);
  for (size_t i = 0; i < p->n_volume_trees; i++)
    if (p->volume_trees[i].tree_fd >= 0)
      close(p->volume_trees[i].tree_fd);
  free(p->volume_trees);
  memset(p, 0, sizeof(*p));
}

static int push_resolved(struct ns_resolved *p, const struct confine_path *rp, bool read_only,
                         struct cordon_error **err) {
  char ***list =
      read_only ? &p->ro : (rp->kind == CONFINE_KIND_DIR ? &p->hidden_dirs : &p->hidden_files);
  for (size_t i = 0; *list && (*list)[i]; i++)
    if (strcmp((*list)[i], rp->path) == 0)
      return 0; /* the same path named twice (e.g. .cordon listed explicitly) */
  if (strv_push(list, rp->path) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  return 0;
}

/* Drop the entries of list that `rel` covers; true when one of them covers `rel`. */
static bool hidden_merge(char **list, const char *rel) {
  size_t o = 0;
  bool covered = false;
  for (size_t i = 0; list && list[i]; i++) {
    if (confine_path_covers(list[i], rel))
      covered = true;
    else if (confine_path_covers(rel, list[i])) {
      free(list[i]);
      continue;
    }
    list[o++] = list[i];
  }
  if (list)
    list[o] = NULL;
  return covered;
}

/* A directory of the always-hidden set inside the workspace (canonical, relative): hidden
 * unless the policy hides it (or a parent) already; what the policy hides beneath it goes. */
static int push_always_hidden(struct ns_resolved *p, const char *rel, struct cordon_error **err) {
  bool covered = hidden_merge(p->hidden_dirs, rel);
  covered |= hidden_merge(p->hidden_files, rel);
  if (!covered && strv_push(&p->hidden_dirs, rel) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  return 0;
}

/* Resolution beneath the workspace, then the plan's overlap checks again on the canonical
 * paths (two names may resolve to overlapping trees). */
int ns_resolve_workspace(struct ns_resolved *p, const struct ns_plan *plan, int ws_fd,
                         struct cordon_error **err) {
  for (size_t i = 0; plan->read_only && plan->read_only[i]; i++) {
    struct confine_path rp = {0};
    int r = confine_resolve_workspace_path(ws_fd, p->workspace_real, plan->read_only[i],
                                           "read-only path", &rp, err);
    if (r == 0)
      r = push_resolved(p, &rp, true, err);
    confine_path_clear(&rp);
    if (r < 0)
      return -1;
  }
  for (size_t i = 0; plan->hidden && plan->hidden[i]; i++) {
    struct confine_path rp = {0};
    int r = confine_resolve_workspace_path(ws_fd, p->workspace_real, plan->hidden[i], "hidden path",
                                           &rp, err);
    if (r == 0)
      r = push_resolved(p, &rp, false, err);
    confine_path_clear(&rp);
    if (r < 0)
      return -1;
  }
  /* A protected file must not stay reachable through another name (a hard link). cordon's own
   * state and keys, added below, are not walked: nothing in a sandbox can name them to link
   * them, and cordon never links out of them. */
  _cleanup_(strv_freep) char **hidden_named = strv_copy((const char *const *)p->hidden_dirs);
  for (size_t i = 0; hidden_named && p->hidden_files && p->hidden_files[i]; i++)
    if (strv_push(&hidden_named, p->hidden_files[i]) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  if (!hidden_named)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  if (confine_check_hard_links(ws_fd, (const char *const *)p->ro, (const char *const *)hidden_named,
                               err) < 0)
    return -1;
  /* cordon's own state, its keys and every other project's .cordon/ are always hidden where
   * the workspace holds them, at any depth; one the policy hides already stays as it is. */
  _cleanup_(strv_freep) char **beneath = NULL;
  if (confine_private_beneath((const char *const *)p->private_dirs, p->workspace_real, true,
                              &beneath, err) < 0)
    return -1;
  for (size_t i = 0; beneath && beneath[i]; i++)
    if (push_always_hidden(p, beneath[i], err) < 0)
      return -1;
  /* Of cordon's own state a sandbox may see only .cordon/agent-visible, read-only. */
  if (confine_check_private_reshown((const char *const *)p->ro, (const char *const *)beneath, err) <
      0)
    return -1;
  _cleanup_(strv_freep) char **hidden_all = strv_copy((const char *const *)p->hidden_dirs);
  for (size_t i = 0; hidden_all && p->hidden_files && p->hidden_files[i]; i++)
    if (strv_push(&hidden_all, p->hidden_files[i]) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  if (!hidden_all)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  if (confine_check_workspace_lists((const char *const *)p->ro, (const char *const *)hidden_all,
                                    err) < 0)
    return cordon_error_prefix(err, "after resolving symlinks");
  return 0;
}

/* The always-hidden set inside every tree bound from the host (system paths and grants, at
 * any depth, and a .cordon/ at the top of a grant even when unregistered): each is covered by
 * an empty read-only tmpfs at its path inside the sandbox. */
static int plan_hidden_host_dirs(struct ns_resolved *p, struct cordon_error **err) {
  for (size_t i = 0; i < p->n_trees; i++) {
    const struct confine_tree *t = &p->trees[i];
    if (t->link || !t->source || !t->is_dir)
      continue;
    _cleanup_(strv_freep) char **beneath = NULL;
    bool grant = i >= p->n_trees - p->n_grant_trees;
    if (confine_private_beneath((const char *const *)p->private_dirs, t->source, grant, &beneath,
                                err) < 0)
      return -1;
    for (size_t j = 0; beneath && beneath[j]; j++) {
      char *target = NULL;
      if (asprintf(&target, "%s/%s", t->target, beneath[j]) < 0 ||
          strv_push_take(&p->hidden_host_dirs, target) < 0)
        return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
    }
  }
  return 0;
}

/* System paths (absent ones skipped when optional) and the grants that nothing wider shows
 * already, each a tree bound from the host; then the always-hidden set inside them. */
int ns_resolve_host(struct ns_resolved *p, const struct ns_plan *plan, struct cordon_error **err) {
  char **grants = plan->grants;
  bool optional = plan->system_optional;
  size_t n_sys = strv_length((const char *const *)plan->system_paths);
  size_t n_grants = strv_length((const char *const *)grants);
  p->system = calloc(n_sys + 1, sizeof(*p->system));
  p->grants = calloc(n_grants + 1, sizeof(*p->grants));
  p->trees = calloc(n_sys + n_grants + 1, sizeof(*p->trees));
  if (!p->system || !p->grants || !p->trees)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "policy");
  p->n_system = n_sys;
  p->n_grants = n_grants;
  for (size_t i = 0; i < n_sys; i++) {
    bool present = false;
    if (confine_resolve_host_path(plan->system_paths[i], true, optional, "system path",
                                  &p->system[i], &present, err) < 0)
      return -1;
    if (!present)
      continue;
    struct confine_tree *t = &p->trees[p->n_trees++];
    *t = (struct confine_tree){
        .target = p->system[i].path,
        .source = p->system[i].source,
        .link = p->system[i].link,
        .tree_fd = -1,
        .is_dir = p->system[i].kind == CONFINE_KIND_DIR,
    };
  }
  for (size_t i = 0; i < n_grants; i++) {
    /* Already visible through a system path or a wider grant: nothing to add. */
    bool covered = false;
    for (size_t j = 0; j < n_sys && !covered; j++)
      covered = p->system[j].path && p->system[j].kind != CONFINE_KIND_SYMLINK &&
                confine_path_covers(p->system[j].path, grants[i]);
    for (size_t j = 0; j < n_grants && !covered; j++)
      covered = j != i && confine_path_covers(grants[j], grants[i]) &&
                (strcmp(grants[j], grants[i]) != 0 || j < i);
    if (covered)
      continue;
    if (confine_resolve_host_path(grants[i], false, false, "read-only grant", &p->grants[i], NULL,
                                  err) < 0 ||
        confine_check_not_private(p->grants[i].source, "read-only grant",
                                  (const char *const *)p->private_dirs, err) < 0)
      return -1;
    p->n_grant_trees++;
    struct confine_tree *t = &p->trees[p->n_trees++];
    *t = (struct confine_tree){
        .target = p->grants[i].path,
        .source = p->grants[i].source,
        .tree_fd = -1,
        .is_dir = p->grants[i].kind == CONFINE_KIND_DIR,
    };
  }
  return plan_hidden_host_dirs(p, err);
}

/* The volumes point into the plan, which outlives its resolved form (both move together to a
 * one-shot's exec). Their sources are opened later, anchored (confine_volume_prepare). */
int ns_resolve_volumes(struct ns_resolved *p, const struct ns_plan *plan,
                       struct cordon_error **err) {
  if (!plan->n_volumes)
    return 0;
  p->volume_trees = calloc(plan->n_volumes, sizeof(*p->volume_trees));
  if (!p->volume_trees)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "volumes");
  for (size_t i = 0; i < plan->n_volumes; i++)
    p->volume_trees[p->n_volume_trees++] = (struct confine_tree){
        .target = plan->volumes[i].target,
        .source = plan->volumes[i].source,
        .tree_fd = -1,
        .is_dir = true,
        .writable = !plan->volumes[i].read_only,
    };
  return 0;
}
