/* A race's logs: each candidate's and judge's stdout and stderr, the first `limit` bytes of
 * each kept (the rest read and counted, so the command never blocks on a full pipe, and the
 * log marked truncated), with the SHA-256 of the kept bytes that the receipt binds.
 *
 * Two ways in. Without live output the backend's own bounded capture keeps the head (no
 * thread, no pipe: a race of quiet commands costs what it did). With live output (--stream)
 * the command writes to two pipes this file owns, and one reader thread per exec keeps the
 * head and hands every chunk on as it arrives. Both keep the same bytes, so a receipt does not
 * depend on whether the race was watched. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cordon/session.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "crypto/digest.h"
#include "race/logs.h"

/* After the command has ended, how long the reader still waits for the pipes to close: a
 * process the command left behind may hold them open; what it writes later is not the
 * command's. */
#define DRAIN_GRACE_SECONDS 2.0
#define READ_CHUNK (64u * 1024u)

const char *cordon_race_log_name(enum cordon_race_log_stream stream) {
  switch (stream) {
  case CORDON_RACE_LOG_STDOUT: return "stdout";
  case CORDON_RACE_LOG_STDERR: return "stderr";
  case CORDON_RACE_LOG_JUDGE_STDOUT: return "judge_stdout";
  case CORDON_RACE_LOG_JUDGE_STDERR: return "judge_stderr";
  case CORDON_RACE_LOG_STREAMS: break;
  }
  return "unknown";
}

void race_log_clear(struct cordon_race_log *log) {
  free(log->data);
  memset(log, 0, sizeof(*log));
}

/* Take data (malloc'd or NULL) as the kept bytes of log. */
static int log_set(struct cordon_race_log *log, unsigned char *data, size_t length, uint64_t total,
                   bool truncated, struct cordon_error **err) {
  log->present = true;
  log->data = data;
  log->length = data ? length : 0;
  log->total = total > log->length ? total : log->length;
  log->truncated = truncated || log->total > log->length;
  return crypto_sha256_hex(data ? (const void *)data : "", log->length, log->sha256, err);
}

/* ---- live output: pipes read by a thread ---------------------------------------------------- */

struct kept {
  unsigned char *data;
  size_t length, capacity;
  uint64_t total;
};

struct reader {
  int fds[2]; /* read ends of stdout and stderr; -1 once closed */
  size_t limit;
  struct kept kept[2];
  const struct cordon_race_output *output;
  size_t index;
  enum cordon_race_log_stream first;
  atomic_bool ended; /* the command has returned */
  int error;         /* errno of a failed read or allocation */
};

static int keep(struct kept *k, size_t limit, const unsigned char *bytes, size_t n) {
  k->total += n;
  size_t room = limit - k->length;
  size_t take = n < room ? n : room;
  if (!take)
    return 0;
  if (k->length + take + 1 > k->capacity) {
    size_t capacity = k->capacity ? k->capacity : 4096;
    while (capacity < k->length + take + 1)
      capacity *= 2;
    if (capacity > limit + 1)
      capacity = limit + 1;
    unsigned char *grown = realloc(k->data, capacity);
    if (!grown)
      return -1;
    k->data = grown;
    k->capacity = capacity;
  }
  memcpy(k->data + k->length, bytes, take);
  k->length += take;
  k->data[k->length] = '\0';
  return 0;
}

static void *reader_main(void *arg) {
  struct reader *rd = arg;
  _cleanup_free_ unsigned char *chunk = malloc(READ_CHUNK);
  double deadline = 0;
  if (!chunk)
    rd->error = ENOMEM;
  while (chunk && (rd->fds[0] >= 0 || rd->fds[1] >= 0)) {
    if (atomic_load(&rd->ended)) {
      if (deadline == 0)
        deadline = fs_now() + DRAIN_GRACE_SECONDS;
      else if (fs_now() >= deadline)
        break;
    }
    struct pollfd p[2] = {{rd->fds[0], POLLIN, 0}, {rd->fds[1], POLLIN, 0}};
    int n = poll(p, 2, 100);
    if (n < 0 && errno != EINTR) {
      rd->error = errno;
      break;
    }
    for (int i = 0; n > 0 && i < 2; i++) {
      if (rd->fds[i] < 0 || !p[i].revents)
        continue;
      ssize_t got = read(rd->fds[i], chunk, READ_CHUNK);
      if (got < 0 && (errno == EINTR || errno == EAGAIN))
        continue;
      if (got <= 0) { /* end of the stream (or an error: nothing more will come) */
        close(rd->fds[i]);
        rd->fds[i] = -1;
        continue;
      }
      if (keep(&rd->kept[i], rd->limit, chunk, (size_t)got) < 0)
        rd->error = ENOMEM;
      rd->output->write(rd->output->data, rd->index, rd->first + (enum cordon_race_log_stream)i,
                        chunk, (size_t)got);
    }
  }
  return NULL;
}

static int exec_streamed(struct cordon_session *session, const struct cordon_exec_request *req,
                         size_t limit, const struct cordon_race_output *output, size_t index,
                         enum cordon_race_log_stream first, struct cordon_race_log logs[2],
                         struct cordon_exec_result *res, struct cordon_error **err) {
  int out[2] = {-1, -1}, errp[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
    int e = errno;
    for (int i = 0; i < 2; i++) {
      if (out[i] >= 0)
        close(out[i]);
    }
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "the command's output pipes");
  }
  struct reader rd = {
      .fds = {out[0], errp[0]}, .limit = limit, .output = output, .index = index, .first = first};
  atomic_init(&rd.ended, false);
  pthread_t thread;
  int rc = pthread_create(&thread, NULL, reader_main, &rd);
  if (rc != 0) {
    close(out[0]), close(out[1]), close(errp[0]), close(errp[1]);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, rc, "the command's output reader");
  }
  struct cordon_exec_request streamed = *req;
  streamed.caller_stdio = true;
  streamed.stdio_fds[0] = -1;
  streamed.stdio_fds[1] = out[1];
  streamed.stdio_fds[2] = errp[1];
  int r = cordon_session_exec(session, &streamed, res, err);
  /* Our write ends closed, the pipes end when the command's copies are gone. */
  close(out[1]);
  close(errp[1]);
  atomic_store(&rd.ended, true);
  pthread_join(thread, NULL);
  for (int i = 0; i < 2; i++) {
    if (rd.fds[i] >= 0)
      close(rd.fds[i]);
    /* The end of the stream: a partial last line can be shown now. */
    output->write(output->data, index, first + (enum cordon_race_log_stream)i, NULL, 0);
  }
  if (r == 0 && rd.error)
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, rd.error, "the command's output");
  for (int i = 0; i < 2; i++) {
    struct kept *k = &rd.kept[i];
    if (r < 0) {
      free(k->data);
      continue;
    }
    /* The log owns the bytes from here, even when their digest fails. */
    if (log_set(&logs[i], steal_ptr(&k->data), k->length, k->total, false, err) < 0)
      r = -1;
  }
  return r;
}

int race_exec_logged(struct cordon_session *session, const struct cordon_exec_request *req,
                     size_t limit, const struct cordon_race_output *output, size_t index,
                     enum cordon_race_log_stream first, struct cordon_race_log logs[2],
                     struct cordon_exec_result *res, struct cordon_error **err) {
  race_log_clear(&logs[0]);
  race_log_clear(&logs[1]);
  if (output && output->write)
    return exec_streamed(session, req, limit, output, index, first, logs, res, err);
  struct cordon_exec_request captured = *req;
  captured.max_output = limit;
  if (cordon_session_exec(session, &captured, res, err) < 0)
    return -1;
  /* The logs own the bytes; the result keeps its status only. */
  size_t out_length = res->stdout_length, err_length = res->stderr_length;
  res->stdout_length = res->stderr_length = 0;
  if (log_set(&logs[0], steal_ptr(&res->stdout_data), out_length, res->stdout_total,
              res->stdout_truncated, err) < 0 ||
      log_set(&logs[1], steal_ptr(&res->stderr_data), err_length, res->stderr_total,
              res->stderr_truncated, err) < 0)
    return -1;
  return 0;
}

/* ---- the receipt's form ---------------------------------------------------------------------- */

json_t *race_logs_json(const struct cordon_race_log logs[CORDON_RACE_LOG_STREAMS]) {
  json_t *j = json_object();
  for (int i = 0; j && i < CORDON_RACE_LOG_STREAMS; i++) {
    if (!logs[i].present)
      continue;
    json_t *one = json_pack("{s:I, s:s, s:b}", "bytes", (json_int_t)logs[i].length, "sha256",
                            logs[i].sha256, "truncated", logs[i].truncated);
    if (!one ||
        json_object_set_new(j, cordon_race_log_name((enum cordon_race_log_stream)i), one) < 0) {
      json_decref(j);
      return NULL;
    }
  }
  return j;
}

const char *race_logs_check(const json_t *logs, bool judged) {
  if (!json_is_object(logs) || json_object_size(logs) != (judged ? 4u : 2u))
    return judged ? "a candidate's logs must be exactly stdout, stderr, judge_stdout and "
                    "judge_stderr (the race had a judge)"
                  : "a candidate's logs must be exactly stdout and stderr";
  for (int i = 0; i < (judged ? 4 : 2); i++) {
    const json_t *one = json_object_get(logs, cordon_race_log_name((enum cordon_race_log_stream)i));
    const json_t *bytes = json_object_get(one, "bytes");
    const char *digest = json_string_value(json_object_get(one, "sha256"));
    double b = json_number_value(bytes);
    if (!json_is_object(one) || json_object_size(one) != 3 || !json_is_number(bytes) ||
        !(b >= 0 && b <= CORDON_RACE_LOG_MAX_LIMIT) || b != floor(b) || !digest ||
        !crypto_is_sha256_hex(digest) || !json_is_boolean(json_object_get(one, "truncated")))
      return "a candidate's log must be exactly {bytes, sha256, truncated}: bytes an integer up "
             "to 2^30, sha256 64 lowercase hex digits, truncated a boolean";
  }
  return NULL;
}
