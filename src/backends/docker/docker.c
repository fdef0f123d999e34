/* The `docker` backend: each session is a long-running container of the Docker engine, driven
 * over the Engine API on its unix socket (engine.c), never through the docker CLI.
 *
 * The container's pid 1 is cordon-docker-init (init.c, bind-mounted read-only), which reaps
 * orphans. The workspace is a host directory bind-mounted at the manifest root, so read,
 * write and ls work on the host side, anchored beneath it (protocol/workspace.c). The path
 * policy becomes mounts: read-only paths are re-bound read-only, hidden directories are
 * covered by an empty read-only tmpfs, hidden files by an empty read-only file, `.cordon/` is
 * always hidden. Network: NetworkMode none (lo only) unless egress open is asked for. All
 * capabilities dropped, no new privileges, Docker's default seccomp profile with cordon's denials
 * stacked on top by the exec wrapper, memory/CPU/pids limits through the engine's cgroups.
 *
 * Execs go through the exec agent that init serves on a unix socket in the session's runtime
 * directory (exec-agent.c); with CORDON_DOCKER_EXEC=api (or a container without an agent)
 * through the engine's exec API instead (exec-api.c). Containers carry labels (session,
 * project, ephemeral, creator) so that `cordon gc` can find the ones a crash left behind
 * (gc.c). The container's life is session.c's, the workspace's workspace.c's; below them,
 * container.c answers what the exec paths and session ask about the container, agent-dir.c
 * holds the agent's directory and socket, settings.c the settings from the environment.
 *
 * This file owns what ties them together, at the top of the backend's calls: availability,
 * the choice of exec path, and the backend table. Nothing else in the backend calls it. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/builtin.h"
#include "backends/docker/container.h"
#include "backends/docker/docker.h"
#include "backends/docker/engine.h"
#include "backends/docker/exec-agent.h"
#include "backends/docker/exec-api.h"
#include "backends/docker/internal.h"
#include "backends/docker/session.h"
#include "backends/docker/settings.h"
#include "backends/docker/workspace.h"
#include "base/cleanup.h"
#include "exec/stdio.h"

/* ---- availability --------------------------------------------------------------------------- */

static int image_present(struct docker_engine *e, const char *image, struct cordon_error **err) {
  if (docker_check_image_name(image, err) < 0)
    return -1;
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "/images/%s/json", image) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "image");
  long status = 0;
  if (docker_engine_request(e, "GET", path, NULL, &status, NULL, err) < 0)
    return -1;
  if (status == 404)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "image %s is not present in the Docker engine at %s (cordon does not "
                            "pull images: build, pull or import it, e.g. scripts/docker-up; "
                            "CORDON_DOCKER_IMAGE or --image choose another)",
                            image, docker_engine_socket(e));
  if (status != 200)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "the Docker engine at %s answered HTTP %ld for image %s",
                            docker_engine_socket(e), status, image);
  return 0;
}

static int docker_available(const struct cordon_backend *self, char **reason) {
  struct cordon_error *err = NULL;
  _cleanup_engine_ struct docker_engine *e = NULL;
  const char *init = NULL;
  if (docker_init_binary(&init, &err) < 0 || docker_engine_open(NULL, &e, &err) < 0 ||
      docker_engine_ping(e, &err) < 0 || image_present(e, docker_default_image(), &err) < 0) {
    *reason = strdup(err && err->message ? err->message : "unavailable");
    cordon_error_free(err);
    return 0;
  }
  return 1;
}

/* ---- exec: which path ------------------------------------------------------------------- */

struct api_exec {
  struct cordon_session *s;
  struct docker_session *d;
};

static int docker_exec_api_captured(void *data, const struct cordon_exec_request *req,
                                    struct cordon_exec_result *res, struct cordon_error **err) {
  struct api_exec *a = data;
  return docker_exec_api(a->s, a->d, req, res, err);
}

/* CORDON_DOCKER_EXEC: unset or "agent" (the default: the in-container agent, when the
 * container has one) or "api" (the Engine API's exec, one `runc exec` per command). */
static int docker_exec(struct cordon_session *s, const struct cordon_exec_request *req,
                       struct cordon_exec_result *res, struct cordon_error **err) {
  struct docker_session *d = NULL;
  if (docker_session_handle(s, &d, err) < 0)
    return -1;
  const char *mode = getenv("CORDON_DOCKER_EXEC");
  if (mode && *mode && strcmp(mode, "agent") != 0 && strcmp(mode, "api") != 0)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "CORDON_DOCKER_EXEC=%s: expected agent or api", mode);
  bool api = mode && !strcmp(mode, "api");
  if (!api && !d->agent) {
    if (mode && !strcmp(mode, "agent"))
      return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                              "session %s: its container %.12s has no exec agent (made by an "
                              "earlier cordon); unset CORDON_DOCKER_EXEC to use the Engine API",
                              s->id, d->container);
    api = true;
  }
  if (api && req->tty)
    return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                            "session %s: the Engine API exec path (CORDON_DOCKER_EXEC=api, or a "
                            "container without an agent) cannot give the command a terminal (-t)",
                            s->id);
  /* An OOM kill is a SIGKILL like any other: the container's oom_kill counter, read before
   * and after, tells them apart (State.OOMKilled would not: it stays set once any process of
   * the container was killed). Unreadable from here (a remote engine): never reported. */
  int64_t oom_before = docker_container_oom_kills(d);
  int r;
  if (api && req->caller_stdio) {
    /* The engine's exec API multiplexes the output over its own stream: no fd of ours can reach
     * the command, so the output is captured and copied when it ends (and -t is refused). */
    struct api_exec api_exec = {.s = s, .d = d};
    r = exec_emulate_caller_stdio(req, docker_exec_api_captured, &api_exec, res, err);
  } else {
    r = api ? docker_exec_api(s, d, req, res, err) : docker_exec_agent(s, d, req, res, err);
  }
  if (r == 0 && oom_before >= 0 && res->term_signal == SIGKILL && !res->timed_out &&
      docker_container_oom_kills(d) > oom_before)
    res->oom_killed = true;
  return r;
}

const struct cordon_backend cordon_backend_docker = {
    .abi_version = CORDON_BACKEND_ABI_VERSION,
    .name = "docker",
    .summary = "a container of the Docker engine per session (Engine API on its unix socket)",
    .capabilities = CORDON_CAP_FILE_RW | CORDON_CAP_EXEC | CORDON_CAP_NETWORK |
                    CORDON_CAP_SNAPSHOT | CORDON_CAP_PERSISTENT_VOLUMES | CORDON_CAP_CALLER_STDIO,
    .tier = CORDON_TIER_CONTAINER,
    /* Limits the engine reports it cannot set are refused by name at create. Egress loopback is
     * NetworkMode none: the container's own lo, up, and no other interface. Egress none (no
     * interface up at all) is not declared: the engine brings lo up and commands hold no
     * capability to take it down, so `--net none` is refused by name. restricted is NetworkMode
     * none plus the host-side proxy and init's bridge (session.c, start_egress). /tmp is a capped
     * tmpfs (HostConfig.Tmpfs), /dev/shm as large (ShmSize). */
    .enforces = CORDON_FEATURE_READ_ONLY_PATHS | CORDON_FEATURE_HIDDEN_PATHS |
                CORDON_FEATURE_HOST_GRANTS | CORDON_FEATURE_MEMORY | CORDON_FEATURE_PIDS |
                CORDON_FEATURE_CPU | CORDON_FEATURE_NOFILE | CORDON_FEATURE_FSIZE |
                CORDON_FEATURE_TMP_SIZE | CORDON_FEATURE_NET_LOOPBACK |
                CORDON_FEATURE_NET_RESTRICTED,
    .available = docker_available,
    .create = docker_create,
    .resume = docker_resume,
    .attach = docker_attach,
    .destroy = docker_destroy,
    .shutdown = docker_shutdown,
    .release = docker_release,
    .read = docker_read,
    .write = docker_write,
    .ls = docker_ls,
    .exec = docker_exec,
    .snapshot = docker_snapshot,
};
