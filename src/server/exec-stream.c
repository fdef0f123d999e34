/* A streaming exec (POST /v1/sessions/ID/exec?stream=1): the command's stdout and stderr go to
 * pipes, and the reply is a chunked stream of newline-delimited JSON events as the output is
 * produced: {"stdout": BASE64}, {"stderr": BASE64}, then one {"exit": CODE, ...}. The exec runs
 * on its own thread; the reply's reader waits on the pipes, the exec's end and the client's
 * socket. A client that goes away kills the command: every process that still holds the
 * exec's output pipes is sent SIGKILL (the command and what it started), then the exec's
 * thread is joined. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "protocol/exec-json.h"
#include "server/server.h"

/* Output is read and sent in pieces of at most this many bytes (before base64). */
#define STREAM_PIECE 49152

struct exec_stream {
  struct server *srv;
  struct cordon_context *ctx;
  struct cordon_session *s;
  struct cordon_exec_request x;
  json_t *doc; /* the request, which x's strings point into */
  int out[2], err[2], done[2];
  int conn_fd;
  pthread_t thread;
  bool thread_started;
  bool exec_done; /* the done pipe was seen readable */
  bool out_eof, err_eof, exit_sent;
  int rc;
  struct cordon_exec_result res;
  struct cordon_error *error;
  char *pending;
  size_t pending_length, pending_offset;
};

static void *exec_thread(void *data) {
  struct exec_stream *st = data;
  st->rc = cordon_session_exec(st->s, &st->x, &st->res, &st->error);
  /* Our write ends go; the command's copies end with it, then the reader sees end of file. */
  close(st->out[1]);
  close(st->err[1]);
  st->out[1] = st->err[1] = -1;
  char one = 1;
  if (write(st->done[1], &one, 1) < 0) {
    /* the reader also notices the exec's end by the pipes' end of file */
  }
  return NULL;
}

/* Kill every process but ours that holds one of the exec's output pipes. */
static void kill_pipe_holders(const struct exec_stream *st) {
  struct stat a, b;
  if (fstat(st->out[0], &a) < 0 || fstat(st->err[0], &b) < 0)
    return;
  char want_out[64], want_err[64];
  snprintf(want_out, sizeof(want_out), "pipe:[%lu]", (unsigned long)a.st_ino);
  snprintf(want_err, sizeof(want_err), "pipe:[%lu]", (unsigned long)b.st_ino);
  pid_t self = getpid();
  /* A few passes: a process may start a child between our scan and its kill. */
  for (int pass = 0; pass < 5; pass++) {
    bool killed = false;
    _cleanup_closedir_ DIR *proc = opendir("/proc");
    struct dirent *e;
    while (proc && (e = readdir(proc))) {
      char *end = NULL;
      long pid = strtol(e->d_name, &end, 10);
      if (!*e->d_name || *end || pid <= 0 || pid == self)
        continue;
      char dir[64];
      snprintf(dir, sizeof(dir), "/proc/%ld/fd", pid);
      _cleanup_closedir_ DIR *fds = opendir(dir);
      struct dirent *f;
      while (fds && (f = readdir(fds))) {
        char link[320], target[64];
        snprintf(link, sizeof(link), "%s/%s", dir, f->d_name);
        ssize_t n = readlink(link, target, sizeof(target) - 1);
        if (n <= 0)
          continue;
        target[n] = 0;
        if (!strcmp(target, want_out) || !strcmp(target, want_err)) {
          kill((pid_t)pid, SIGKILL);
          killed = true;
          break;
        }
      }
    }
    if (!killed)
      break;
    usleep(20000);
  }
}

static void stream_free(void *cls) {
  struct exec_stream *st = cls;
  if (st->thread_started) {
    if (!st->exit_sent)
      kill_pipe_holders(st);
    pthread_join(st->thread, NULL);
  }
  for (int i = 0; i < 2; i++) {
    if (st->out[i] >= 0)
      close(st->out[i]);
    if (st->err[i] >= 0)
      close(st->err[i]);
    if (st->done[i] >= 0)
      close(st->done[i]);
  }
  cordon_exec_result_clear(&st->res);
  cordon_error_free(st->error);
  cordon_session_close(st->s);
  cordon_context_free(st->ctx);
  exec_request_clear(&st->x);
  json_decref(st->doc);
  free(st->pending);
  free(st);
}

/* Queue one event line (takes doc). */
static int stream_event(struct exec_stream *st, json_t *doc) {
  char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
  json_decref(doc);
  if (!text)
    return -1;
  size_t n = strlen(text);
  char *line = realloc(text, n + 2);
  if (!line) {
    free(text);
    return -1;
  }
  line[n] = '\n';
  free(st->pending);
  st->pending = line;
  st->pending_length = n + 1;
  st->pending_offset = 0;
  return 0;
}

/* Read one piece of a pipe into an event; 1 queued, 0 nothing now, -1 end of file. */
static int read_piece(struct exec_stream *st, int fd, const char *name) {
  /* On the heap, not a static __thread array: the loader zeroes every thread-local byte at
   * every process start and thread creation, `cordon run` included. */
  _cleanup_free_ unsigned char *piece = malloc(STREAM_PIECE);
  if (!piece)
    return -2;
  ssize_t n = read(fd, piece, STREAM_PIECE);
  if (n > 0)
    return stream_event(st, json_pack("{s:o}", name, exec_base64_json(piece, (size_t)n))) < 0 ? -2
                                                                                              : 1;
  if (n == 0 || (errno != EAGAIN && errno != EINTR))
    return -1;
  return 0;
}

static int final_event(struct exec_stream *st) {
  st->exit_sent = true;
  if (st->rc < 0)
    return stream_event(
        st, json_pack("{s:{s:s, s:s}}", "error", "code", "exec_failed", "message",
                      st->error && st->error->message ? st->error->message : "exec failed"));
  json_t *result = exec_result_json(&st->res, true);
  if (!result)
    return -1;
  json_object_del(result, "stdout"); /* already streamed */
  json_object_del(result, "stderr");
  json_object_set_new(result, "exit", json_integer(st->res.exit_code));
  return stream_event(st, result);
}

/* Produce the next event; 0 queued, -1 the stream ends in error (client gone). */
static int next_event(struct exec_stream *st) {
  for (;;) {
    if (!st->out_eof) {
      int r = read_piece(st, st->out[0], "stdout");
      if (r != 0 && r != -1)
        return r > 0 ? 0 : -1;
      st->out_eof = r == -1;
    }
    if (!st->err_eof) {
      int r = read_piece(st, st->err[0], "stderr");
      if (r != 0 && r != -1)
        return r > 0 ? 0 : -1;
      st->err_eof = r == -1;
    }
    /* Both drained to their end, or the exec returned and nothing is waiting in them (a child
     * left running with the pipes is not waited for). */
    if ((st->out_eof && st->err_eof) || st->exec_done) {
      if (!st->exec_done) {
        char one;
        struct pollfd d = {.fd = st->done[0], .events = POLLIN};
        if (poll(&d, 1, -1) < 0 && errno != EINTR)
          return -1;
        if (read(st->done[0], &one, 1) == 1)
          st->exec_done = true;
        continue;
      }
      return final_event(st);
    }
    struct pollfd fds[4] = {
        {.fd = st->out_eof ? -1 : st->out[0], .events = POLLIN},
        {.fd = st->err_eof ? -1 : st->err[0], .events = POLLIN},
        {.fd = st->done[0], .events = POLLIN},
        {.fd = st->conn_fd, .events = POLLRDHUP},
    };
    if (poll(fds, 4, -1) < 0 && errno != EINTR)
      return -1;
    if (fds[3].revents & (POLLRDHUP | POLLHUP | POLLERR))
      return -1; /* the client went away: stream_free kills the command */
    if (fds[2].revents & POLLIN) {
      char one;
      if (read(st->done[0], &one, 1) == 1)
        st->exec_done = true;
    }
  }
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
  struct exec_stream *st = cls;
  if (st->pending_offset == st->pending_length) {
    if (st->exit_sent)
      return MHD_CONTENT_READER_END_OF_STREAM;
    if (next_event(st) < 0)
      return MHD_CONTENT_READER_END_WITH_ERROR;
  }
  size_t n = st->pending_length - st->pending_offset;
  if (n > max)
    n = max;
  memcpy(buf, st->pending + st->pending_offset, n);
  st->pending_offset += n;
  return (ssize_t)n;
}

enum MHD_Result exec_stream_start(struct request *req, struct cordon_context *ctx,
                                  struct cordon_session *s, const struct cordon_exec_request *x,
                                  json_t *request_doc) {
  struct exec_stream *st = calloc(1, sizeof(*st));
  if (!st) {
    struct cordon_exec_request copy = *x;
    exec_request_clear(&copy);
    cordon_session_close(s);
    cordon_context_free(ctx);
    json_decref(request_doc);
    return MHD_NO;
  }
  st->srv = req->srv;
  st->ctx = ctx;
  st->s = s;
  st->x = *x;
  st->doc = request_doc;
  st->out[0] = st->out[1] = st->err[0] = st->err[1] = st->done[0] = st->done[1] = -1;
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  st->conn_fd = info ? info->connect_fd : -1;
  /* The read ends are ours alone and never block; the write ends go to the command. */
  if (pipe2(st->out, O_CLOEXEC) < 0 || pipe2(st->err, O_CLOEXEC) < 0 ||
      pipe2(st->done, O_CLOEXEC) < 0 || fcntl(st->out[0], F_SETFL, O_NONBLOCK) < 0 ||
      fcntl(st->err[0], F_SETFL, O_NONBLOCK) < 0) {
    int e = errno;
    stream_free(st);
    return reply_error(req, 500, "internal", "pipe: %s", strerror(e));
  }
  st->x.caller_stdio = true;
  st->x.stdio_fds[0] = -1; /* stdin: the request's "stdin", else /dev/null */
  st->x.stdio_fds[1] = st->out[1];
  st->x.stdio_fds[2] = st->err[1];
  if (pthread_create(&st->thread, NULL, exec_thread, st) != 0) {
    stream_free(st);
    return reply_error(req, 500, "internal", "cannot start the exec's thread");
  }
  st->thread_started = true;
  struct MHD_Response *r =
      MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, stream_read, st, stream_free);
  if (!r) {
    stream_free(st);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
  enum MHD_Result ret = MHD_queue_response(req->conn, 200, r);
  MHD_destroy_response(r);
  return ret;
}
