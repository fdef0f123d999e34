/* A small client of the Docker Engine API on its unix socket (see engine.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "backends/docker/curl-loader.h"
#include "backends/docker/engine.h"
#include "base/cleanup.h"
#include "base/fs.h"

/* Largest JSON answer we accept (container lists of a busy engine stay far below). */
#define RESPONSE_MAX (32u * 1024u * 1024u)
/* Longest an ordinary request may take; stopping a container is the slowest we make. */
#define REQUEST_TIMEOUT_SECONDS 120L
#define CONNECT_TIMEOUT_SECONDS 5L
#define READ_CHUNK 65536

struct docker_engine {
  char *socket_path;
  const struct curl_api *curl; /* NULL until the first request loads libcurl */
  CURL *handle;                /* created on first request; kept for connection reuse */
  pthread_mutex_t lock;
};

int docker_host_socket(const char *docker_host, char **socket_path, struct cordon_error **err) {
  const char *path = DOCKER_DEFAULT_SOCKET;
  if (docker_host && *docker_host) {
    if (strncmp(docker_host, "unix://", 7) != 0)
      return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                              "DOCKER_HOST=%s is not supported: cordon reaches the Docker engine "
                              "over a unix socket only (unix:///path)",
                              docker_host);
    path = docker_host + 7;
    if (path[0] != '/')
      return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                              "DOCKER_HOST=%s: the socket path must be absolute", docker_host);
  }
  if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
    return cordon_error_set(err, CORDON_ERR_USAGE, ENAMETOOLONG, "Docker socket %s", path);
  *socket_path = strdup(path);
  return *socket_path ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "Docker socket");
}

int docker_engine_open(const char *socket_path, struct docker_engine **out,
                       struct cordon_error **err) {
  _cleanup_free_ char *path = NULL;
  if (socket_path) {
    path = strdup(socket_path);
    if (!path)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "Docker socket");
  } else if (docker_host_socket(getenv("DOCKER_HOST"), &path, err) < 0) {
    return -1;
  }
  /* libcurl is loaded at the first request, not here: an exec through the session's agent
   * makes none, and loading it costs 12-17 ms. */
  struct docker_engine *e = calloc(1, sizeof(*e));
  if (!e)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "Docker client");
  e->socket_path = steal_ptr(&path);
  pthread_mutex_init(&e->lock, NULL);
  *out = e;
  return 0;
}

void docker_engine_free(struct docker_engine *e) {
  if (!e)
    return;
  if (e->handle && e->curl)
    e->curl->curl_easy_cleanup(e->handle);
  pthread_mutex_destroy(&e->lock);
  free(e->socket_path);
  free(e);
}

const char *docker_engine_socket(const struct docker_engine *e) {
  return e->socket_path;
}

struct body_buffer {
  char *data;
  size_t length, capacity;
  bool too_large;
};

static size_t collect_body(char *ptr, size_t size, size_t nmemb, void *userdata) {
  struct body_buffer *b = userdata;
  size_t n = size * nmemb;
  if (b->length + n + 1 > RESPONSE_MAX) {
    b->too_large = true;
    return 0; /* aborts the transfer */
  }
  if (b->length + n + 1 > b->capacity) {
    size_t cap = b->capacity ? b->capacity : 4096;
    while (cap < b->length + n + 1)
      cap *= 2;
    char *grown = realloc(b->data, cap);
    if (!grown)
      return 0;
    b->data = grown;
    b->capacity = cap;
  }
  memcpy(b->data + b->length, ptr, n);
  b->length += n;
  b->data[b->length] = 0;
  return n;
}

static int unreachable(struct docker_engine *e, const char *what, struct cordon_error **err) {
  return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                          "cannot reach the Docker engine at %s: %s (is dockerd running? "
                          "DOCKER_HOST selects the socket)",
                          e->socket_path, what);
}

/* The errno of connecting to the socket (0 when it connects). */
static int probe_connect(const char *path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return errno;
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
  int r = connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ? errno : 0;
  close(fd);
  return r;
}

static int perform_locked(struct docker_engine *e, const char *method, const char *path,
                          const char *body_text, long *status, struct body_buffer *body,
                          struct cordon_error **err) {
  if (!e->curl && !(e->curl = curl_api_get(err)))
    return -1;
  const struct curl_api *c = e->curl;
  if (!e->handle) {
    e->handle = c->curl_easy_init();
    if (!e->handle)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "libcurl handle");
  } else {
    c->curl_easy_reset(e->handle); /* options only: the connection cache survives */
  }
  CURL *h = e->handle;
  _cleanup_free_ char *url = NULL;
  if (asprintf(&url, "http://docker/%s%s", DOCKER_API_VERSION, path) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "Docker request");
  struct curl_slist *headers = NULL;
  if (body_text)
    headers = c->curl_slist_append(headers, "Content-Type: application/json");
  /* No "Expect: 100-continue" round trip for larger bodies. */
  struct curl_slist *more = c->curl_slist_append(headers, "Expect:");
  if (!more) {
    c->curl_slist_free_all(headers);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "Docker request");
  }
  headers = more;
  char errbuf[CURL_ERROR_SIZE] = "";
  c->curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, e->socket_path);
  c->curl_easy_setopt(h, CURLOPT_URL, url);
  c->curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
  c->curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  c->curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  c->curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  c->curl_easy_setopt(h, CURLOPT_TIMEOUT, REQUEST_TIMEOUT_SECONDS);
  c->curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_SECONDS);
  c->curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
  c->curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect_body);
  c->curl_easy_setopt(h, CURLOPT_WRITEDATA, body);
  if (body_text) {
    c->curl_easy_setopt(h, CURLOPT_POSTFIELDS, body_text);
    c->curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body_text));
  } else if (!strcmp(method, "POST")) {
    c->curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
    c->curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
  }
  CURLcode rc = c->curl_easy_perform(h);
  c->curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    if (body->too_large)
      return cordon_error_set(err, CORDON_ERR_INVALID, E2BIG,
                              "Docker engine answer to %s %s is larger than %u bytes", method, path,
                              RESPONSE_MAX);
    /* libcurl's "Couldn't connect to server" hides why: ask the socket itself. */
    if (rc == CURLE_COULDNT_CONNECT) {
      int e_connect = probe_connect(e->socket_path);
      if (e_connect)
        return unreachable(e, strerror(e_connect), err);
    }
    return unreachable(e, errbuf[0] ? errbuf : c->curl_easy_strerror(rc), err);
  }
  c->curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
  return 0;
}

int docker_engine_request(struct docker_engine *e, const char *method, const char *path,
                          json_t *body, long *status, json_t **response,
                          struct cordon_error **err) {
  _cleanup_free_ char *body_text = NULL;
  if (body) {
    body_text = json_dumps(body, JSON_COMPACT);
    if (!body_text)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "Docker request");
  }
  struct body_buffer answer = {0};
  pthread_mutex_lock(&e->lock);
  int r = perform_locked(e, method, path, body_text, status, &answer, err);
  pthread_mutex_unlock(&e->lock);
  if (r == 0 && response) {
    *response = answer.length ? json_loadb(answer.data, answer.length, 0, NULL) : NULL;
    /* A plain-text answer (some errors) is kept as a string so it can be shown. */
    if (!*response && answer.length)
      *response = json_stringn(answer.data, answer.length);
  }
  free(answer.data);
  return r;
}

/* The engine's explanation: {"message": "..."} or a bare text body. */
static const char *engine_message(json_t *response) {
  const char *m = json_string_value(json_object_get(response, "message"));
  if (!m)
    m = json_string_value(response);
  return m && *m ? m : "no message";
}

int docker_engine_call(struct docker_engine *e, const char *method, const char *path, json_t *body,
                       json_t **response, struct cordon_error **err) {
  long status = 0;
  json_t *answer = NULL;
  if (docker_engine_request(e, method, path, body, &status, &answer, err) < 0)
    return -1;
  if (status >= 200 && status < 300) {
    if (response)
      *response = answer;
    else
      json_decref(answer);
    return 0;
  }
  enum cordon_error_kind kind = status == 404   ? CORDON_ERR_NOT_FOUND
                                : status == 409 ? CORDON_ERR_INVALID
                                : status == 400 ? CORDON_ERR_INVALID
                                                : CORDON_ERR_SYSTEM;
  char *m = strdup(engine_message(answer));
  json_decref(answer);
  /* Engine messages sometimes end with a newline; errors are one line. */
  for (char *p = m; p && *p; p++)
    if (*p == '\n' || *p == '\r')
      *p = ' ';
  int r = cordon_error_set(err, kind, 0, "Docker engine (%s %s, HTTP %ld): %s", method, path,
                           status, m ? m : "out of memory");
  free(m);
  return r;
}

int docker_engine_ping(struct docker_engine *e, struct cordon_error **err) {
  long status = 0;
  json_t *answer = NULL;
  if (docker_engine_request(e, "GET", "/_ping", NULL, &status, &answer, err) < 0)
    return -1;
  json_decref(answer);
  if (status != 200)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "the Docker engine at %s answered /_ping with HTTP %ld", e->socket_path,
                            status);
  return 0;
}

/* ---- exec streams --------------------------------------------------------------------------- */

struct docker_exec_stream {
  int fd;
  const unsigned char *stdin_data;
  size_t stdin_length, stdin_written;
  bool attach_stdin;
  bool write_shut;
  struct docker_demux demux;
  /* Stream bytes that arrived together with the response head. */
  unsigned char *early;
  size_t early_length;
  bool protocol_error;
};

static int write_all_fd(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Read the rest of an error answer after its head and return the engine's message. */
static char *read_error_body(int fd, char *buf, size_t have, const struct docker_http_head *head) {
  size_t limit = 64 * 1024;
  char *body = malloc(limit + 1);
  if (!body)
    return NULL;
  size_t n = have - head->head_length;
  memcpy(body, buf + head->head_length, n);
  while (n < limit && (head->content_length < 0 || (long long)n < head->content_length)) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 2000) <= 0)
      break;
    ssize_t r = recv(fd, body + n, limit - n, 0);
    if (r <= 0)
      break;
    n += (size_t)r;
    if (head->chunked && n >= 5 && !memcmp(body + n - 5, "0\r\n\r\n", 5))
      break;
  }
  body[n] = 0;
  if (head->chunked) {
    long long m = docker_http_dechunk(body, n);
    if (m >= 0)
      body[m] = 0;
  }
  json_t *j = json_loads(body, 0, NULL);
  const char *m = json_string_value(json_object_get(j, "message"));
  char *message = strdup(m ? m : body);
  json_decref(j);
  free(body);
  for (char *p = message; p && *p; p++)
    if (*p == '\n' || *p == '\r')
      *p = ' ';
  return message;
}

int docker_exec_stream_open(struct docker_engine *e, const char *exec_id, const void *stdin_data,
                            size_t stdin_length, bool attach_stdin, struct docker_exec_stream **out,
                            struct cordon_error **err) {
  _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "socket");
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", e->socket_path);
  if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
    return unreachable(e, strerror(errno), err);
  static const char body[] = "{\"Detach\":false,\"Tty\":false}";
  _cleanup_free_ char *request = NULL;
  int len = asprintf(&request,
                     "POST /%s/exec/%s/start HTTP/1.1\r\n"
                     "Host: docker\r\n"
                     "User-Agent: cordon\r\n"
                     "Content-Type: application/json\r\n"
                     "Connection: Upgrade\r\n"
                     "Upgrade: tcp\r\n"
                     "Content-Length: %zu\r\n"
                     "\r\n%s",
                     DOCKER_API_VERSION, exec_id, sizeof(body) - 1, body);
  if (len < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "Docker request");
  if (write_all_fd(fd, request, (size_t)len) < 0)
    return unreachable(e, strerror(errno), err);

  /* The response head; stream bytes may follow it in the same read. */
  char *buf = malloc(DOCKER_HTTP_HEAD_MAX);
  if (!buf)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "Docker response");
  size_t have = 0;
  struct docker_http_head head;
  int parsed = 0;
  double until = fs_now() + (double)REQUEST_TIMEOUT_SECONDS;
  while (parsed == 0) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int ms = (int)((until - fs_now()) * 1000);
    int pr = ms > 0 ? poll(&p, 1, ms) : 0;
    if (pr < 0 && errno == EINTR)
      continue;
    ssize_t r = pr > 0 ? recv(fd, buf + have, DOCKER_HTTP_HEAD_MAX - have, 0) : -1;
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      free(buf);
      return unreachable(e, pr == 0 ? "no answer to exec start" : "connection closed on exec start",
                         err);
    }
    have += (size_t)r;
    parsed = docker_http_parse_head(buf, have, &head);
  }
  if (parsed < 0) {
    free(buf);
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "Docker engine at %s sent a malformed answer to exec start",
                            e->socket_path);
  }
  if (head.status != 101 && head.status != 200) {
    char *message = read_error_body(fd, buf, have, &head);
    free(buf);
    int r = cordon_error_set(err, head.status == 404 ? CORDON_ERR_NOT_FOUND : CORDON_ERR_INVALID, 0,
                             "Docker engine (exec start, HTTP %d): %s", head.status,
                             message ? message : "no message");
    free(message);
    return r;
  }
  struct docker_exec_stream *s = calloc(1, sizeof(*s));
  if (!s) {
    free(buf);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec stream");
  }
  s->early_length = have - head.head_length;
  if (s->early_length) {
    s->early = malloc(s->early_length);
    if (!s->early) {
      free(buf);
      free(s);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "exec stream");
    }
    memcpy(s->early, buf + head.head_length, s->early_length);
  }
  free(buf);
  s->stdin_data = stdin_data;
  s->stdin_length = stdin_data ? stdin_length : 0;
  s->attach_stdin = attach_stdin;
  int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  s->fd = steal_fd(&fd);
  *out = s;
  return 0;
}

static void finish_stdin(struct docker_exec_stream *s) {
  if (!s->write_shut) {
    /* Half-close: the engine closes the command's stdin and keeps sending its output. */
    shutdown(s->fd, SHUT_WR);
    s->write_shut = true;
  }
}

int docker_exec_stream_pump(struct docker_exec_stream *s, double deadline, docker_frame_sink sink,
                            void *data, bool *ended, struct cordon_error **err) {
  *ended = false;
  if (s->early_length) {
    if (docker_demux_feed(&s->demux, s->early, s->early_length, sink, data) < 0)
      s->protocol_error = true;
    free(s->early);
    s->early = NULL;
    s->early_length = 0;
  }
  if (!s->attach_stdin)
    s->write_shut = true; /* nothing to send; the engine gave the command /dev/null */
  else if (s->stdin_written == s->stdin_length)
    finish_stdin(s);
  unsigned char chunk[READ_CHUNK];
  for (;;) {
    if (s->protocol_error)
      return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                              "the Docker engine's exec stream is not in the multiplexed format");
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    if (!s->write_shut)
      p.events |= POLLOUT;
    int ms = -1;
    if (deadline > 0) {
      double left = deadline - fs_now();
      if (left <= 0)
        return 0;
      ms = (int)(left * 1000) + 1;
    }
    int pr = poll(&p, 1, ms);
    if (pr < 0) {
      if (errno == EINTR)
        continue;
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "exec stream");
    }
    if (pr == 0)
      continue; /* the deadline check above ends the loop */
    if (p.revents & POLLOUT) {
      ssize_t w = send(s->fd, s->stdin_data + s->stdin_written, s->stdin_length - s->stdin_written,
                       MSG_NOSIGNAL);
      if (w > 0)
        s->stdin_written += (size_t)w;
      else if (w < 0 && errno != EAGAIN && errno != EINTR)
        s->stdin_written = s->stdin_length; /* the command stopped reading: drop the rest */
      if (s->stdin_written == s->stdin_length)
        finish_stdin(s);
    }
    if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t r = recv(s->fd, chunk, sizeof(chunk), 0);
      if (r < 0 && (errno == EAGAIN || errno == EINTR))
        continue;
      if (r <= 0) {
        *ended = true;
        return 0;
      }
      if (docker_demux_feed(&s->demux, chunk, (size_t)r, sink, data) < 0)
        s->protocol_error = true;
    }
  }
}

void docker_exec_stream_close(struct docker_exec_stream *s) {
  if (!s)
    return;
  if (s->fd >= 0)
    close(s->fd);
  free(s->early);
  free(s);
}
