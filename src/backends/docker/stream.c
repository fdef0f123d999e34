/* Pure parsers for the engine's hijacked exec stream (see stream.h). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "backends/docker/stream.h"

/* ---- HTTP response head ---------------------------------------------------------------- */

static bool header_is(const char *line, size_t length, const char *name, const char **value) {
  size_t n = strlen(name);
  if (length <= n || line[n] != ':' || strncasecmp(line, name, n) != 0)
    return false;
  const char *v = line + n + 1;
  while (v < line + length && (*v == ' ' || *v == '\t'))
    v++;
  *value = v;
  return true;
}

int docker_http_parse_head(const char *buf, size_t length, struct docker_http_head *head) {
  const char *end = NULL;
  for (size_t i = 0; i + 3 < length; i++)
    if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n') {
      end = buf + i;
      break;
    }
  if (!end)
    return length >= DOCKER_HTTP_HEAD_MAX ? -1 : 0;
  if ((size_t)(end - buf) + 4 > DOCKER_HTTP_HEAD_MAX)
    return -1;
  memset(head, 0, sizeof(*head));
  head->content_length = -1;
  head->head_length = (size_t)(end - buf) + 4;
  /* Status line: HTTP/1.x SP 3DIGIT SP reason */
  if (end - buf < 12 || strncmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ' ||
      !isdigit((unsigned char)buf[9]) || !isdigit((unsigned char)buf[10]) ||
      !isdigit((unsigned char)buf[11]))
    return -1;
  head->status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
  const char *line = memchr(buf, '\n', (size_t)(end - buf));
  while (line && line < end) {
    line++;
    const char *next = memchr(line, '\n', (size_t)(end + 2 - line));
    size_t len = next ? (size_t)(next - line) : (size_t)(end - line);
    if (len > 0 && line[len - 1] == '\r')
      len--;
    const char *value;
    if (header_is(line, len, "Content-Length", &value)) {
      char *stop = NULL;
      errno = 0;
      long long v = strtoll(value, &stop, 10);
      if (errno || stop == value || v < 0)
        return -1;
      head->content_length = v;
    } else if (header_is(line, len, "Transfer-Encoding", &value)) {
      head->chunked = strncasecmp(value, "chunked", 7) == 0;
    }
    line = next;
  }
  return 1;
}

long long docker_http_dechunk(char *buf, size_t length) {
  size_t in = 0, out = 0;
  for (;;) {
    char *stop = NULL;
    if (in >= length)
      return -1;
    unsigned long long size = strtoull(buf + in, &stop, 16);
    if (stop == buf + in)
      return -1;
    char *crlf = memchr(stop, '\n', length - (size_t)(stop - buf));
    if (!crlf)
      return -1;
    in = (size_t)(crlf - buf) + 1;
    if (size == 0)
      return (long long)out;
    if (size > length - in)
      return -1;
    memmove(buf + out, buf + in, size);
    out += size;
    in += size;
    if (in < length && buf[in] == '\r')
      in++;
    if (in < length && buf[in] == '\n')
      in++;
  }
}

/* ---- the multiplexed stream -------------------------------------------------------------- */

int docker_demux_feed(struct docker_demux *d, const unsigned char *bytes, size_t length,
                      docker_frame_sink sink, void *data) {
  while (length > 0) {
    if (d->remaining == 0 && d->header_have < 8) {
      size_t take = 8 - d->header_have;
      if (take > length)
        take = length;
      memcpy(d->header + d->header_have, bytes, take);
      d->header_have += take;
      bytes += take;
      length -= take;
      if (d->header_have < 8)
        return 0;
      if (d->header[0] > DOCKER_STREAM_SYSTEMERR || d->header[1] || d->header[2] || d->header[3])
        return -1;
      d->stream = (enum docker_stream_id)d->header[0];
      d->remaining = (uint32_t)d->header[4] << 24 | (uint32_t)d->header[5] << 16 |
                     (uint32_t)d->header[6] << 8 | (uint32_t)d->header[7];
      if (d->remaining == 0) {
        d->header_have = 0;
        continue;
      }
    }
    size_t take = d->remaining < length ? d->remaining : length;
    sink(data, d->stream, bytes, take);
    bytes += take;
    length -= take;
    d->remaining -= (uint32_t)take;
    if (d->remaining == 0)
      d->header_have = 0;
  }
  return 0;
}

bool docker_demux_complete(const struct docker_demux *d) {
  return d->remaining == 0 && d->header_have == 0;
}

/* ---- bounded capture ----------------------------------------------------------------------- */

void docker_capture_init(struct docker_capture *c, size_t max) {
  memset(c, 0, sizeof(*c));
  c->max = max;
}

void docker_capture_append(struct docker_capture *c, const unsigned char *bytes, size_t length) {
  c->total += length;
  size_t room = c->max - c->length;
  size_t keep = length < room ? length : room;
  if (keep < length)
    c->truncated = true;
  if (keep == 0 || c->failed)
    return;
  if (c->length + keep + 1 > c->capacity) {
    size_t cap = c->capacity ? c->capacity : 4096;
    while (cap < c->length + keep + 1)
      cap *= 2;
    if (cap > c->max + 1)
      cap = c->max + 1;
    unsigned char *grown = realloc(c->data, cap);
    if (!grown) {
      c->failed = true;
      return;
    }
    c->data = grown;
    c->capacity = cap;
  }
  memcpy(c->data + c->length, bytes, keep);
  c->length += keep;
  c->data[c->length] = 0;
}

unsigned char *docker_capture_take(struct docker_capture *c, size_t *length) {
  unsigned char *data = c->data ? c->data : calloc(1, 1);
  *length = c->data ? c->length : 0;
  c->data = NULL;
  c->length = c->capacity = 0;
  return data;
}

void docker_capture_free(struct docker_capture *c) {
  free(c->data);
  c->data = NULL;
}

/* ---- stderr with the trailer held back --------------------------------------------------- */

void docker_tail_feed(struct docker_tail *t, const unsigned char *bytes, size_t length) {
  if (length >= DOCKER_TRAILER_MAX) {
    docker_capture_append(t->capture, t->held, t->held_length);
    docker_capture_append(t->capture, bytes, length - DOCKER_TRAILER_MAX);
    memcpy(t->held, bytes + length - DOCKER_TRAILER_MAX, DOCKER_TRAILER_MAX);
    t->held_length = DOCKER_TRAILER_MAX;
    return;
  }
  size_t overflow = t->held_length + length > DOCKER_TRAILER_MAX
                        ? t->held_length + length - DOCKER_TRAILER_MAX
                        : 0;
  if (overflow > 0) {
    docker_capture_append(t->capture, t->held, overflow);
    memmove(t->held, t->held + overflow, t->held_length - overflow);
    t->held_length -= overflow;
  }
  memcpy(t->held + t->held_length, bytes, length);
  t->held_length += length;
}

static bool parse_status(const unsigned char *p, size_t n, struct docker_status *status) {
  static const struct {
    const char *name;
    enum docker_status_kind kind;
  } kinds[] = {{"exit", DOCKER_STATUS_EXIT},           {"signal", DOCKER_STATUS_SIGNAL},
               {"timeout", DOCKER_STATUS_TIMEOUT},     {"chdir", DOCKER_STATUS_CHDIR},
               {"setup", DOCKER_STATUS_SETUP},         {"noseccomp", DOCKER_STATUS_NO_SECCOMP},
               {"execfail", DOCKER_STATUS_EXEC_FAILED}};
  if (n < 3 || p[n - 1] != '\n')
    return false;
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
    size_t len = strlen(kinds[i].name);
    if (n < len + 3 || memcmp(p, kinds[i].name, len) != 0 || p[len] != ':')
      continue;
    long value = 0;
    size_t digits = 0;
    for (size_t j = len + 1; j < n - 1; j++, digits++) {
      if (p[j] < '0' || p[j] > '9' || digits >= 9)
        return false;
      value = value * 10 + (p[j] - '0');
    }
    if (digits == 0)
      return false;
    status->kind = kinds[i].kind;
    status->value = (int)value;
    return true;
  }
  return false;
}

void docker_tail_finish(struct docker_tail *t, struct docker_status *status) {
  static const char magic[] = DOCKER_TRAILER_MAGIC;
  const size_t magic_length = sizeof(magic) - 1;
  status->kind = DOCKER_STATUS_NONE;
  status->value = 0;
  size_t keep = t->held_length;
  /* The trailer, when there is one, is the last occurrence of the magic. */
  for (size_t at = t->held_length >= magic_length ? t->held_length - magic_length + 1 : 0;
       at-- > 0;) {
    if (memcmp(t->held + at, magic, magic_length) != 0)
      continue;
    if (parse_status(t->held + at + magic_length, t->held_length - at - magic_length, status))
      keep = at;
    break;
  }
  docker_capture_append(t->capture, t->held, keep);
  t->held_length = 0;
}

int docker_status_exit_code(const struct docker_status *status) {
  switch (status->kind) {
  case DOCKER_STATUS_EXIT:
  case DOCKER_STATUS_EXEC_FAILED: return status->value;
  case DOCKER_STATUS_SIGNAL: return 128 + status->value;
  case DOCKER_STATUS_TIMEOUT: return 128 + 9;
  case DOCKER_STATUS_CHDIR:
  case DOCKER_STATUS_SETUP:
  case DOCKER_STATUS_NO_SECCOMP: return 126;
  default: return -1;
  }
}
