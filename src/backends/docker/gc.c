/* `cordon gc` for the docker backend (docker.h): find the containers cordon labelled whose
 * session is gone, or whose `cordon run` died, and remove them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/docker/config.h"
#include "backends/docker/container.h"
#include "backends/docker/docker.h"
#include "backends/docker/engine.h"
#include "backends/docker/internal.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "protocol/session-id.h"

/* ---- gc ------------------------------------------------------------------------------------- */

static bool creator_alive(const char *creator) {
  char boot[64];
  int pid = 0;
  unsigned long long start = 0;
  if (!creator || sscanf(creator, "%63[^:]:%d:%llu", boot, &pid, &start) != 3 || pid <= 0)
    return false;
  _cleanup_free_ char *now = docker_creator_identity((pid_t)pid);
  return now && !strcmp(now, creator);
}

static bool state_file_exists(const char *project_state_dir, const char *session) {
  _cleanup_free_ char *path = NULL;
  struct stat st;
  return asprintf(&path, "%s/sessions/%s/state.json", project_state_dir, session) >= 0 &&
         stat(path, &st) == 0;
}

void docker_gc_entries_free(struct docker_gc_entry *entries, size_t count) {
  for (size_t i = 0; entries && i < count; i++) {
    free(entries[i].container);
    free(entries[i].session);
    free(entries[i].project);
    free(entries[i].reason);
    free(entries[i].error);
  }
  free(entries);
}

int docker_gc(struct cordon_context *ctx, bool all_projects, bool dry_run,
              struct docker_gc_entry **entries, size_t *count, struct cordon_error **err) {
  *entries = NULL;
  *count = 0;
  _cleanup_engine_ struct docker_engine *e = NULL;
  _cleanup_json_ json_t *list = NULL;
  /* filters={"label":["org.cordon.session"]}, percent-encoded */
  static const char query[] =
      "/containers/json?all=1&filters=%7B%22label%22%3A%5B%22" DOCKER_LABEL_SESSION "%22%5D%7D";
  if (docker_engine_open(NULL, &e, err) < 0 ||
      docker_engine_call(e, "GET", query, NULL, &list, err) < 0)
    return -1;
  const char *here = cordon_context_state_dir(ctx);
  struct docker_gc_entry *out = calloc(json_array_size(list) + 1, sizeof(*out));
  if (!out)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gc");
  size_t n = 0, i;
  json_t *c;
  json_array_foreach(list, i, c) {
    json_t *labels = json_object_get(c, "Labels");
    const char *id = json_string_value(json_object_get(c, "Id"));
    const char *session = json_string_value(json_object_get(labels, DOCKER_LABEL_SESSION));
    const char *project = json_string_value(json_object_get(labels, DOCKER_LABEL_PROJECT));
    const char *ephemeral = json_string_value(json_object_get(labels, DOCKER_LABEL_EPHEMERAL));
    const char *creator = json_string_value(json_object_get(labels, DOCKER_LABEL_CREATOR));
    if (!id || !session || !project || project[0] != '/' || !cordon_session_id_valid(session))
      continue;
    if (!all_projects && strcmp(project, here) != 0)
      continue;
    /* A session whose state is missing may be in the middle of being created: its creator
     * still runs. Once the creator is gone, nothing will ever record it. */
    const char *reason = NULL;
    bool dead_run = false;
    bool alive = creator_alive(creator);
    if (!state_file_exists(project, session)) {
      if (!alive)
        reason = "its session no longer exists";
    } else if (ephemeral && !strcmp(ephemeral, "1") && !alive) {
      reason = "the `cordon run` that created it is gone";
      dead_run = true;
    }
    if (!reason)
      continue;
    struct docker_gc_entry *g = &out[n++];
    g->container = strndup(id, 12);
    g->session = strdup(session);
    g->project = strdup(project);
    g->reason = strdup(reason);
    if (dry_run)
      continue;
    _cleanup_free_ char *path = NULL;
    long status = 0;
    struct cordon_error *rm_err = NULL;
    if (asprintf(&path, "/containers/%s?force=true&v=true", id) < 0 ||
        docker_engine_request(e, "DELETE", path, NULL, &status, NULL, &rm_err) < 0) {
      g->error = strdup(rm_err && rm_err->message ? rm_err->message : "out of memory");
    } else if (status != 204 && status != 404) {
      if (asprintf(&g->error, "the Docker engine answered HTTP %ld", status) < 0)
        g->error = NULL;
    } else {
      g->removed = true;
      if (dead_run) {
        /* The run's process died before it could remove its session state. */
        _cleanup_free_ char *dir = NULL;
        if (asprintf(&dir, "%s/sessions/%s", project, session) >= 0)
          fs_remove_tree(dir, &rm_err);
      }
    }
    cordon_error_free(rm_err);
  }
  *entries = out;
  *count = n;
  return 0;
}
