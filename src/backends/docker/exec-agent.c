/* The host's side of the exec agent cordon-docker-init serves on a unix socket in the
 * session's runtime directory (agent.h): an exec launcher for the shared runner
 * (exec/runner.c), over the connection agent-dir.c opens. The runner makes the
 * pipes and owns capture, bounds and the timeout; this launcher hands the pipe ends to the
 * agent, whose per-exec monitor runs the command and kills its whole tree, and only it, when
 * told to or at its timeout (a command that ends by itself leaves its background processes
 * running, until the session ends). Everything the agent sends back is parsed as hostile input. */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backends/docker/agent-dir.h"
#include "backends/docker/agent.h"
#include "backends/docker/container.h"
#include "backends/docker/exec-agent.h"
#include "backends/docker/internal.h"
#include "backends/docker/protocol.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "exec/runner.h"

/* How long the agent may take to start a command (fork, exec) and to send its 16-byte final
 * reply once the connection says it is there. */
#define AGENT_START_TIMEOUT_MS 10000
#define AGENT_REPLY_TIMEOUT_MS 5000
/* After a timeout, how many of the runner's kill rounds (one a second) the agent gets to
 * report before the host hangs up on it. */
#define AGENT_KILL_PATIENCE 3

/* ---- exec through the agent ------------------------------------------------------------ */

struct agent_launch {
  struct cordon_session *s;
  struct docker_session *d;
  const char *cwd;
  int conn;
  int kill_rounds;      /* kill_tree calls so far */
  bool ended;           /* the final reply arrived (or the connection broke) */
  bool gave_up;         /* the agent did not report after a timeout: we hung up */
  bool agent_timed_out; /* the agent's own timeout fired first */
  int exec_failure;     /* 126/127: the agent could not execve the command */
};

/* The engine's view of a container whose agent cannot be reached: gone, stopped, or running
 * (then the agent itself is the problem). */
static int agent_unreachable(struct cordon_session *s, struct docker_session *d, int errnum,
                             struct cordon_error **err) {
  long status = 0;
  _cleanup_json_ json_t *info = NULL;
  if (docker_inspect_container(d, &status, &info, err) < 0)
    return cordon_error_prefix(err, "session %s", s->id);
  json_t *state = json_object_get(info, "State");
  if (status == 404)
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0,
                            "session %s: its container %.12s no longer exists (removed outside "
                            "cordon?); destroy the session",
                            s->id, d->container);
  if (status == 200 && !json_is_true(json_object_get(state, "Running")))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "session %s: its container %.12s is not running (stopped or killed "
                            "outside cordon?); destroy the session",
                            s->id, d->container);
  return cordon_error_set(
      err, CORDON_ERR_UNAVAILABLE, errnum,
      "session %s: cannot reach the exec agent of container %.12s in its runtime "
      "directory (CORDON_DOCKER_EXEC=api runs commands through the Engine API "
      "instead)",
      s->id, d->container);
}

/* The connection ended without a final reply: the container died, or the exec's monitor was
 * killed from inside it. */
static int agent_lost(struct cordon_session *s, struct docker_session *d,
                      struct cordon_error **err) {
  int errnum = 0;
  long peer = 0;
  int fd = docker_agent_connect(s, &errnum, &peer);
  if (fd >= 0) {
    close(fd); /* init still serves: the container runs, only this exec's monitor died */
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                            "session %s: the exec's monitor in container %.12s ended without a "
                            "status (killed from inside the container?)",
                            s->id, d->container);
  }
  if (docker_container_gone_error(s, d, true, err) < 0)
    return -1;
  return cordon_error_set(err, CORDON_ERR_SYSTEM, errnum,
                          "session %s: the exec agent of container %.12s stopped answering", s->id,
                          d->container);
}

static int agent_start(void *data, const struct exec_spec *spec, const int stdio_fds[3],
                       int *exit_fd, struct cordon_error **err) {
  struct agent_launch *l = data;
  struct cordon_session *s = l->s;
  struct docker_session *d = l->d;
  _cleanup_free_ unsigned char *buf = NULL;
  size_t len = 0;
  static const char *const empty[] = {NULL};
  /* The agent keeps its own copy of the timeout, in case we cannot tell it (frozen, gone). */
  if (exec_wire_encode(&docker_agent_protocol, spec->cwd, spec->argv,
                       spec->envp ? spec->envp : empty, exec_wire_timeout_ms(spec->timeout), &buf,
                       &len, err) < 0)
    return -1;
  int errnum = 0;
  long peer = 0;
  l->conn = docker_agent_connect(s, &errnum, &peer);
  if (l->conn < 0)
    return agent_unreachable(s, d, errnum, err);
  if (d->agent_pid > 0 && peer > 0 && peer != d->agent_pid)
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "session %s: the exec agent socket of container %.12s is served by "
                            "pid %ld, not by the container's init (pid %ld): it was replaced from "
                            "inside the container; refusing",
                            s->id, d->container, peer, d->agent_pid);
  if (exec_wire_send_with_fds(l->conn, buf, len, stdio_fds, EXEC_WIRE_STDIO_FDS) < 0) {
    l->ended = true;
    return agent_lost(s, d, err);
  }
  struct exec_wire_reply reply;
  int r =
      exec_wire_read_reply(l->conn, &docker_agent_protocol, AGENT_START_TIMEOUT_MS, &reply, err);
  if (r <= 0) {
    l->ended = true;
    return r < 0 ? cordon_error_prefix(err, "session %s", s->id) : agent_lost(s, d, err);
  }
  if (reply.type == EXEC_WIRE_FAILED) {
    l->ended = true;
    if (reply.a == EXEC_WIRE_STAGE_CHDIR)
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, reply.b, "cannot run %s in %s",
                              spec->argv[0], spec->cwd);
    if (reply.a == EXEC_WIRE_STAGE_NO_SECCOMP)
      return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                              "session %s: the Docker engine runs the container without a seccomp "
                              "profile (is the daemon started with seccomp unconfined?); refusing "
                              "to run without it",
                              s->id);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, reply.b,
                            "session %s: the exec agent could not set up %s", s->id, spec->argv[0]);
  }
  if (reply.type != EXEC_WIRE_RUNNING) {
    l->ended = true;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, EPROTO,
                            "session %s: the exec agent answered '%c' before the command ran",
                            s->id, (char)reply.type);
  }
  /* The runner closes its exit fd when it fires: give it a copy, keep ours for the reply. */
  *exit_fd = fcntl(l->conn, F_DUPFD_CLOEXEC, 3);
  if (*exit_fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "dup");
  return 0;
}

static int agent_reap(void *data, int *exit_code, int *term_signal, struct cordon_error **err) {
  struct agent_launch *l = data;
  struct exec_wire_reply reply;
  struct cordon_error *local = NULL;
  int r =
      exec_wire_read_reply(l->conn, &docker_agent_protocol, AGENT_REPLY_TIMEOUT_MS, &reply, &local);
  l->ended = true;
  if (r == 0 && l->gave_up) {
    /* We hung up on an agent that did not report after the timeout; it kills the tree when
     * it sees that. The runner reports the timeout. */
    *exit_code = 128 + 9;
    *term_signal = 9;
    return 0;
  }
  if (r < 0) {
    if (!err) {
      cordon_error_free(local);
      return -1;
    }
    *err = local;
    return cordon_error_prefix(err, "session %s", l->s->id);
  }
  if (r == 0)
    return err ? agent_lost(l->s, l->d, err) : -1;
  if (reply.type == EXEC_WIRE_TIMED_OUT) {
    l->agent_timed_out = true;
    *exit_code = 128 + 9;
    *term_signal = 9;
    return 0;
  }
  if (reply.type == EXEC_WIRE_EXEC_FAILED) {
    l->exec_failure = reply.a;
    *exit_code = reply.a;
    *term_signal = 0;
    return 0;
  }
  if (reply.type != EXEC_WIRE_EXITED)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, EPROTO,
                            "session %s: the exec agent answered '%c' instead of a status",
                            l->s->id, (char)reply.type);
  *exit_code = reply.a;
  *term_signal = reply.b;
  return 0;
}

static void agent_kill_tree(void *data) {
  struct agent_launch *l = data;
  if (l->conn < 0 || l->ended)
    return; /* after the status, the agent has already removed the tree */
  if (l->kill_rounds++ == 0) {
    exec_wire_send_kill(l->conn);
  } else if (l->kill_rounds > AGENT_KILL_PATIENCE && !l->gave_up) {
    /* The agent does not answer (stopped, frozen): hang up, which ends the runner's wait and
     * tells the agent, should it wake, to kill the tree. */
    l->gave_up = true;
    shutdown(l->conn, SHUT_RDWR);
  }
}

static void agent_cleanup(void *data) {
  struct agent_launch *l = data;
  if (l->conn >= 0)
    close(l->conn); /* the agent kills whatever is left when we hang up */
  l->conn = -1;
}

int docker_exec_agent(struct cordon_session *s, struct docker_session *d,
                      const struct cordon_exec_request *req, struct cordon_exec_result *res,
                      struct cordon_error **err) {
  _cleanup_free_ char *cwd = NULL;
  if (docker_container_cwd(s, req->cwd, &cwd, err) < 0)
    return -1;
  struct exec_spec spec = exec_spec_from_request(req, cwd);
  struct agent_launch l = {.s = s, .d = d, .cwd = cwd, .conn = -1};
  const struct exec_launcher launcher = {
      .data = &l,
      .start = agent_start,
      .reap = agent_reap,
      .kill_tree = agent_kill_tree,
      .cleanup = agent_cleanup,
  };
  if (exec_run_with(&spec, &launcher, res, err) < 0)
    return -1;
  if (l.agent_timed_out)
    res->timed_out = true;
  res->exec_failure = l.exec_failure;
  return 0;
}
