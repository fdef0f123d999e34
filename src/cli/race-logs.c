/* `cordon race`'s logs on the command line (race-logs.h): the files of --logs, the tails of
 * --json, the live lines of --stream and the line quoted when a candidate did not pass. The
 * bytes themselves come from the race's result (cordon_race_candidate.logs), already bounded. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "cli/race-logs.h"

/* The file of each stream: TASK.<suffix>. */
static const char *const file_suffix[CORDON_RACE_LOG_STREAMS] = {"stdout", "stderr", "judge.stdout",
                                                                 "judge.stderr"};

int cli_race_logs_prepare(const char *dir, struct cordon_error **err) {
  if (fs_mkdir_p(dir, 0700, err) < 0)
    return cordon_error_prefix(err, "--logs %s", dir);
  _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_USAGE, errno, "--logs %s", dir);
  if (faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) < 0)
    return cordon_error_set(err, CORDON_ERR_DENIED, errno, "--logs %s: cannot write in it", dir);
  return 0;
}

static json_t *log_summary(const struct cordon_race_log *log) {
  return json_pack("{s:I, s:I, s:b, s:s}", "bytes", (json_int_t)log->length, "total",
                   (json_int_t)log->total, "truncated", log->truncated, "sha256", log->sha256);
}

/* Every log as a file of dir and logs.json its index, each replaced atomically, all durable
 * when this returns. */
int cli_race_logs_write(const char *dir, const struct cordon_race_result *res,
                        struct cordon_error **err) {
  _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "--logs %s", dir);
  json_t *index = json_array();
  for (size_t i = 0; index && i < res->n_candidates; i++) {
    const struct cordon_race_candidate *c = &res->candidates[i];
    json_t *files = json_object();
    if (!files || json_array_append_new(
                      index, json_pack("{s:s, s:o}", "task_id", c->task_id, "logs", files)) < 0)
      goto oom;
    for (int s = 0; s < CORDON_RACE_LOG_STREAMS; s++) {
      const struct cordon_race_log *log = &c->logs[s];
      if (!log->present)
        continue;
      char name[CORDON_RACE_TASK_ID_MAX + 16];
      snprintf(name, sizeof(name), "%s.%s", c->task_id, file_suffix[s]);
      if (fs_write_replace_at(fd, name, log->data ? (const void *)log->data : "", log->length, 0600,
                              false, err) < 0) {
        json_decref(index);
        return cordon_error_prefix(err, "--logs %s", dir);
      }
      json_t *summary = log_summary(log);
      if (!summary || json_object_set_new(summary, "file", json_string(name)) < 0 ||
          json_object_set_new(files, cordon_race_log_name((enum cordon_race_log_stream)s),
                              summary) < 0)
        goto oom;
    }
  }
  if (!index)
    goto oom;
  char *text = json_dumps(index, JSON_INDENT(2) | JSON_SORT_KEYS);
  json_decref(index);
  if (!text)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "--logs");
  _cleanup_free_ char *line = NULL;
  if (asprintf(&line, "%s\n", text) < 0) {
    free(text);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "--logs");
  }
  free(text);
  if (fs_write_replace_at(fd, "logs.json", line, strlen(line), 0600, false, err) < 0)
    return cordon_error_prefix(err, "--logs %s", dir);
  /* Each file was replaced atomically; one syncfs makes them all durable at once (a file and
   * an fsync each cost a K=8 race of `true` about an eighth of its time). */
  if (syncfs(fd) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "--logs %s: syncfs", dir);
  return 0;
oom:
  json_decref(index);
  return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "--logs");
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 when there is none. */
static size_t utf8_sequence(const unsigned char *p, size_t n) {
  if (p[0] < 0x80)
    return 1;
  size_t len = p[0] >= 0xc2 && p[0] <= 0xdf   ? 2
               : p[0] >= 0xe0 && p[0] <= 0xef ? 3
               : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4
                                              : 0;
  if (!len || len > n)
    return 0;
  for (size_t i = 1; i < len; i++)
    if ((p[i] & 0xc0) != 0x80)
      return 0;
  /* Overlong forms, surrogates and code points past U+10FFFF. */
  if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] > 0x9f) ||
      (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] > 0x8f))
    return 0;
  return len;
}

/* The bytes as a JSON string: JSON text is Unicode, so a byte that is not part of valid UTF-8
 * becomes U+FFFD (the digest, of the raw bytes, is beside it). */
static json_t *text_json(const unsigned char *p, size_t n) {
  _cleanup_free_ char *out = malloc(n * 3 + 1);
  if (!out)
    return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    size_t len = utf8_sequence(p + i, n - i);
    if (len) {
      memcpy(out + o, p + i, len);
      o += len;
      i += len;
    } else {
      memcpy(out + o, "\xef\xbf\xbd", 3);
      o += 3;
      i++;
    }
  }
  return json_stringn(out, o);
}

json_t *cli_race_logs_tails_json(const struct cordon_race_candidate *c) {
  json_t *j = json_object();
  for (int s = 0; j && s < CORDON_RACE_LOG_STREAMS; s++) {
    const struct cordon_race_log *log = &c->logs[s];
    if (!log->present)
      continue;
    size_t tail = log->length < RACE_LOG_TAIL_BYTES ? log->length : RACE_LOG_TAIL_BYTES;
    json_t *one = log_summary(log);
    if (!one ||
        json_object_set_new(one, "tail", text_json(log->data + log->length - tail, tail)) < 0 ||
        json_object_set_new(one, "tail_bytes", json_integer((json_int_t)tail)) < 0 ||
        json_object_set_new(j, cordon_race_log_name((enum cordon_race_log_stream)s), one) < 0) {
      json_decref(one);
      json_decref(j);
      return NULL;
    }
  }
  return j;
}

void cli_race_logs_last_line(const struct cordon_race_candidate *c, char *buf, size_t size) {
  const struct cordon_race_outcome *o = &c->outcome;
  bool command_failed = o->exit_code != 0 || o->timed_out;
  const struct cordon_race_log *log = command_failed || !o->judged
                                          ? &c->logs[CORDON_RACE_LOG_STDERR]
                                          : &c->logs[CORDON_RACE_LOG_JUDGE_STDERR];
  buf[0] = '\0';
  size_t end = log->length;
  while (end > 0 && (log->data[end - 1] == '\n' || log->data[end - 1] == '\r'))
    end--;
  size_t start = end;
  while (start > 0 && log->data[start - 1] != '\n')
    start--;
  size_t n = end - start < size - 1 ? end - start : size - 1;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = log->data[start + i];
    buf[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
  }
  buf[n] = '\0';
}

/* ---- --stream ------------------------------------------------------------------------------ */

/* One whole line, prefixed, in one write (under s->mu). */
static void emit(struct cli_race_streamer *s, size_t index, enum cordon_race_log_stream stream,
                 const char *line, size_t length) {
  char out[RACE_STREAM_LINE_MAX + 64];
  bool judge = stream == CORDON_RACE_LOG_JUDGE_STDOUT || stream == CORDON_RACE_LOG_JUDGE_STDERR;
  int p = snprintf(out, 64, "candidate-%zu%s| ", index, judge ? " judge" : "");
  memcpy(out + p, line, length);
  out[p + length] = '\n';
  bool to_stdout = !s->all_to_stderr &&
                   (stream == CORDON_RACE_LOG_STDOUT || stream == CORDON_RACE_LOG_JUDGE_STDOUT);
  /* Nothing to do about a closed terminal or pipe here: the race and its logs go on. */
  (void)fs_write_all(to_stdout ? STDOUT_FILENO : STDERR_FILENO, out, (size_t)p + length + 1);
}

static void stream_write(void *data, size_t index, enum cordon_race_log_stream stream,
                         const void *bytes, size_t length) {
  struct cli_race_streamer *s = data;
  if (index >= s->k || stream >= CORDON_RACE_LOG_STREAMS)
    return;
  pthread_mutex_lock(&s->mu);
  struct race_line *line = &s->lines[index * CORDON_RACE_LOG_STREAMS + stream];
  if (!line->data && !(line->data = malloc(RACE_STREAM_LINE_MAX))) {
    pthread_mutex_unlock(&s->mu);
    return;
  }
  if (length == 0 && line->length) { /* the stream ended: its partial last line */
    emit(s, index, stream, line->data, line->length);
    line->length = 0;
  }
  const char *p = bytes;
  for (size_t i = 0; i < length; i++) {
    if (p[i] != '\n')
      line->data[line->length++] = p[i];
    if (p[i] == '\n' || line->length == RACE_STREAM_LINE_MAX) {
      emit(s, index, stream, line->data, line->length);
      line->length = 0;
    }
  }
  pthread_mutex_unlock(&s->mu);
}

int cli_race_streamer_init(struct cli_race_streamer *s, size_t k, bool all_to_stderr) {
  memset(s, 0, sizeof(*s));
  s->lines = calloc(k * CORDON_RACE_LOG_STREAMS, sizeof(*s->lines));
  if (!s->lines)
    return -1;
  pthread_mutex_init(&s->mu, NULL);
  s->k = k;
  s->all_to_stderr = all_to_stderr;
  s->output = (struct cordon_race_output){stream_write, s};
  return 0;
}

void cli_race_streamer_finish(struct cli_race_streamer *s) {
  if (!s->lines)
    return;
  for (size_t i = 0; i < s->k * CORDON_RACE_LOG_STREAMS; i++) {
    struct race_line *line = &s->lines[i];
    if (line->length)
      emit(s, i / CORDON_RACE_LOG_STREAMS,
           (enum cordon_race_log_stream)(i % CORDON_RACE_LOG_STREAMS), line->data, line->length);
    free(line->data);
  }
  free(s->lines);
  s->lines = NULL;
  pthread_mutex_destroy(&s->mu);
}
