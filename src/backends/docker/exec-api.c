/* Execs through the engine's exec API (CORDON_DOCKER_EXEC=api, and containers made before the
 * agent existed): one engine exec per command, run under cordon-docker-init's exec wrapper,
 * which gives it the agent's semantics (exact environment, 126/127 and exec_failure, a timeout
 * that kills the exec's whole tree and only it, background processes that outlive a command
 * ending by itself, a status trailer on stderr telling signals and timeouts apart); the exit
 * code comes from exec inspect. Whether the container died under an exec
 * is container.c's to tell (both exec paths ask). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/docker/config.h"
#include "backends/docker/container.h"
#include "backends/docker/engine.h"
#include "backends/docker/exec-api.h"
#include "backends/docker/internal.h"
#include "backends/docker/protocol.h"
#include "backends/docker/stream.h"
#include "base/cleanup.h"
#include "base/fs.h"

/* After an exec's own timeout, how long the host waits for the wrapper to report before it
 * kills the exec's tree itself (the wrapper is normally done within milliseconds). */
#define HOST_TIMEOUT_GRACE 2.0
/* How long we keep reading after the fallback kill, and how long exec inspect may keep saying
 * "running" after the stream ended (the engine records the exit asynchronously). */
#define DRAIN_AFTER_KILL 3.0
#define INSPECT_SETTLE 5.0

/* ---- exec --------------------------------------------------------------------------------- */

struct exec_output {
  struct docker_capture out, err_capture, engine;
  struct docker_tail tail;
};

static void exec_sink(void *data, enum docker_stream_id stream, const unsigned char *bytes,
                      size_t length) {
  struct exec_output *o = data;
  switch (stream) {
  case DOCKER_STREAM_STDOUT: docker_capture_append(&o->out, bytes, length); break;
  case DOCKER_STREAM_STDERR: docker_tail_feed(&o->tail, bytes, length); break;
  default: docker_capture_append(&o->engine, bytes, length); break;
  }
}

static void discard_sink(void *data, enum docker_stream_id stream, const unsigned char *bytes,
                         size_t length) {
}

/* Map the engine's answer to exec create onto what happened to the session. */
static int exec_create_error(struct cordon_session *s, struct docker_session *d, long status,
                             json_t *answer, struct cordon_error **err) {
  const char *msg = json_string_value(json_object_get(answer, "message"));
  if (status == 404)
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0,
                            "session %s: its container %.12s no longer exists (removed outside "
                            "cordon?); destroy the session",
                            s->id, d->container);
  if (status == 409)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "session %s: its container %.12s is not running (stopped or killed "
                            "outside cordon?): %s",
                            s->id, d->container, msg ? msg : "no message");
  return cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                          "session %s: the Docker engine refused the exec (HTTP %ld): %s", s->id,
                          status, msg ? msg : "no message");
}

/* Create an exec; *exec_id is malloc'd. */
static int exec_create(struct cordon_session *s, struct docker_session *d, json_t *config,
                       char **exec_id, struct cordon_error **err) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "/containers/%s/exec", d->container) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec");
  long status = 0;
  _cleanup_json_ json_t *answer = NULL;
  if (docker_engine_request(d->engine, "POST", path, config, &status, &answer, err) < 0)
    return cordon_error_prefix(err, "session %s", s->id);
  const char *id = json_string_value(json_object_get(answer, "Id"));
  if (status != 201 || !id)
    return exec_create_error(s, d, status, answer, err);
  *exec_id = strdup(id);
  return *exec_id ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec");
}

/* Exec inspect until the engine has recorded the exit. *exit_code -1 when it never did. */
static int exec_inspect(struct docker_session *d, const char *exec_id, int *exit_code,
                        struct cordon_error **err) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "/exec/%s/json", exec_id) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec inspect");
  double until = fs_now() + INSPECT_SETTLE;
  int nap_us = 200;
  *exit_code = -1;
  for (;;) {
    _cleanup_json_ json_t *info = NULL;
    if (docker_engine_call(d->engine, "GET", path, NULL, &info, err) < 0)
      return -1;
    json_t *code = json_object_get(info, "ExitCode");
    if (!json_is_true(json_object_get(info, "Running")) && json_is_integer(code)) {
      *exit_code = (int)json_integer_value(code);
      return 0;
    }
    if (fs_now() > until)
      return 0;
    usleep((useconds_t)nap_us);
    if (nap_us < 20000)
      nap_us *= 2;
  }
}

/* The fallback when a wrapper could not do its job (it was killed, or it is stuck): a second
 * exec kills that wrapper's tree and every orphan in the container. Returns -1 when the engine
 * refused or could not start the exec (the container is not running, gone or going), else 0. */
static int kill_exec_tree(struct cordon_session *s, struct docker_session *d, const char *token) {
  const char *argv[] = {DOCKER_INIT_TARGET, "kill-exec", token, NULL};
  _cleanup_json_ json_t *config =
      json_pack("{s:b, s:b, s:b, s:[s, s, s], s:s}", "AttachStdin", 0, "AttachStdout", 1,
                "AttachStderr", 1, "Cmd", argv[0], argv[1], argv[2], "WorkingDir", "/");
  _cleanup_free_ char *exec_id = NULL;
  struct cordon_error *failed = NULL;
  struct docker_exec_stream *stream = NULL;
  bool ended = false;
  int r = 0;
  if (!config)
    return 0;
  if (exec_create(s, d, config, &exec_id, &failed) < 0) {
    r = failed && (failed->kind == CORDON_ERR_INVALID || failed->kind == CORDON_ERR_NOT_FOUND) ? -1
                                                                                               : 0;
  } else if (docker_exec_stream_open(d->engine, exec_id, NULL, 0, false, &stream, &failed) == 0) {
    docker_exec_stream_pump(stream, fs_now() + DRAIN_AFTER_KILL, discard_sink, NULL, &ended,
                            &failed);
    /* A helper that did not run to a clean exit means the container is on its way out. */
    int code = -1;
    if (exec_inspect(d, exec_id, &code, &failed) < 0 || code != 0)
      r = -1;
  } else {
    r = -1;
  }
  docker_exec_stream_close(stream);
  cordon_error_free(failed);
  return r;
}

/* The exec API path (CORDON_DOCKER_EXEC=api, and containers without an agent): one engine
 * exec per command, under the init's exec wrapper. */
int docker_exec_api(struct cordon_session *s, struct docker_session *d,
                    const struct cordon_exec_request *req, struct cordon_exec_result *res,
                    struct cordon_error **err) {
  double started = fs_now();
  _cleanup_free_ char *cwd = NULL, *token = NULL, *exec_id = NULL;
  if (docker_container_cwd(s, req->cwd, &cwd, err) < 0 || fs_random_hex(8, &token, err) < 0)
    return -1;
  bool attach_stdin = req->stdin_data != NULL;
  struct docker_exec_spec spec = {
      .argv = req->argv,
      .env = req->env,
      .cwd = cwd,
      .timeout = req->timeout,
      .attach_stdin = attach_stdin,
      .token = token,
  };
  _cleanup_json_ json_t *config = NULL;
  if (docker_exec_config(&spec, &config, err) < 0 || exec_create(s, d, config, &exec_id, err) < 0)
    return -1;

  struct exec_output o;
  docker_capture_init(&o.out, req->max_output);
  docker_capture_init(&o.err_capture, req->max_output);
  docker_capture_init(&o.engine, 4096);
  memset(&o.tail, 0, sizeof(o.tail));
  o.tail.capture = &o.err_capture;
  struct docker_exec_stream *stream = NULL;
  int r = -1;
  bool ended = false, host_killed = false, container_dead = false;
  if (docker_exec_stream_open(d->engine, exec_id, req->stdin_data, req->stdin_length, attach_stdin,
                              &stream, err) < 0) {
    cordon_error_prefix(err, "session %s", s->id);
    goto out;
  }
  /* The wrapper enforces the timeout; the host steps in only if it did not. */
  double deadline = req->timeout > 0 ? started + req->timeout + HOST_TIMEOUT_GRACE : 0;
  if (docker_exec_stream_pump(stream, deadline, exec_sink, &o, &ended, err) < 0)
    goto out;
  if (!ended) {
    container_dead = kill_exec_tree(s, d, token) < 0;
    host_killed = true;
    if (docker_exec_stream_pump(stream, fs_now() + DRAIN_AFTER_KILL, exec_sink, &o, &ended, err) <
        0)
      goto out;
  }
  docker_exec_stream_close(stream);
  stream = NULL;

  struct docker_status status;
  docker_tail_finish(&o.tail, &status);
  int inspected = -1;
  if (exec_inspect(d, exec_id, &inspected, err) < 0)
    goto out;
  if (status.kind == DOCKER_STATUS_NONE) {
    /* The wrapper did not finish: the container died, or something killed the wrapper. Its
     * orphans must not outlive the exec; the helper exec also tells whether the container
     * still runs. */
    if (!host_killed)
      container_dead = kill_exec_tree(s, d, token) < 0;
    if (docker_container_gone_error(s, d, container_dead, err) < 0)
      goto out;
    if (inspected < 0 && !host_killed) {
      size_t n = 0;
      unsigned char *engine_text = docker_capture_take(&o.engine, &n);
      cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                       "session %s: the Docker engine reported no exit status for the exec%s%.*s",
                       s->id, n ? ": " : "", (int)(n > 300 ? 300 : n),
                       engine_text ? (const char *)engine_text : "");
      free(engine_text);
      goto out;
    }
  } else if (status.kind == DOCKER_STATUS_CHDIR) {
    cordon_error_set(err, CORDON_ERR_NOT_FOUND, status.value, "cannot run %s in %s", req->argv[0],
                     cwd);
    goto out;
  } else if (status.kind == DOCKER_STATUS_SETUP) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, status.value,
                     "session %s: the exec wrapper could not set up %s", s->id, req->argv[0]);
    goto out;
  } else if (status.kind == DOCKER_STATUS_NO_SECCOMP) {
    cordon_error_set(err, CORDON_ERR_DENIED, 0,
                     "session %s: the Docker engine ran the command without a seccomp profile "
                     "(is the daemon started with seccomp unconfined?); refusing to run "
                     "without it",
                     s->id);
    goto out;
  }

  /* The exit code is the engine's; the trailer says how it came about when they agree. */
  int code = inspected >= 0 ? inspected : docker_status_exit_code(&status);
  bool agree = status.kind != DOCKER_STATUS_NONE && docker_status_exit_code(&status) == code;
  res->exit_code = code & 0xff;
  if (agree && status.kind == DOCKER_STATUS_SIGNAL)
    res->term_signal = status.value;
  /* The trailer is the workload's stderr's last bytes: only the two values execve's failure
   * can have count. */
  if (agree && status.kind == DOCKER_STATUS_EXEC_FAILED && (code == 126 || code == 127))
    res->exec_failure = code;
  if ((agree && status.kind == DOCKER_STATUS_TIMEOUT) || host_killed) {
    res->timed_out = true;
    res->exit_code = 128 + 9;
    res->term_signal = 9;
  }
  res->stdout_total = o.out.total;
  res->stdout_truncated = o.out.truncated;
  res->stderr_total = o.err_capture.total;
  res->stderr_truncated = o.err_capture.truncated;
  res->stdout_data = docker_capture_take(&o.out, &res->stdout_length);
  res->stderr_data = docker_capture_take(&o.err_capture, &res->stderr_length);
  if (!res->stdout_data || !res->stderr_data || o.out.failed || o.err_capture.failed) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "cannot store the command's output");
    goto out;
  }
  res->duration = fs_now() - started;
  r = 0;
out:
  docker_exec_stream_close(stream);
  docker_capture_free(&o.out);
  docker_capture_free(&o.err_capture);
  docker_capture_free(&o.engine);
  return r;
}
