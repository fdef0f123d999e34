/* The HTTP API of `cordon serve` from C (docs/api.md), beside the SDK's pytest suite and
 * tests/cli/serve.bats: a real server ($CORDON serve) spoken to over raw HTTP/1.1 on its unix
 * socket and on TCP 127.0.0.1 with bearer tokens. Every route and the 400, 401, 403, 404,
 * 405, 409 and 413 paths, with the worktree backend (it needs no root, so this runs on any
 * host); the reply bodies' error codes checked; the metrics moved by the work done. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "base/cleanup.h"
#include "base/fs.h"

static const char *cordon_bin;
static char root[256];    /* the test's temporary directory */
static char project[512]; /* a fresh project per test */
static pid_t live[4];     /* servers started and not stopped: a failed test's, for teardown */

struct server {
  pid_t pid;
  bool tcp;
  char path[1024]; /* unix socket */
  int port;        /* TCP */
};

struct reply {
  int status;
  char *head; /* status line and headers */
  char *body; /* NUL-terminated; chunked bodies decoded */
  size_t length;
  json_t *json; /* the body parsed, when it is JSON */
};

static void reply_clear(struct reply *r) {
  free(r->head);
  free(r->body);
  json_decref(r->json);
  memset(r, 0, sizeof(*r));
}

/* Run $CORDON ARGS... in the project; its stdout (without a final newline), NULL on failure. */
static char *run_cordon(const char *first, ...) {
  const char *argv[16] = {cordon_bin, first};
  int n = 2;
  va_list ap;
  va_start(ap, first);
  const char *a;
  while (n < 15 && (a = va_arg(ap, const char *)))
    argv[n++] = a;
  va_end(ap);
  argv[n] = NULL;
  int out[2];
  assert_int_equal(pipe2(out, O_CLOEXEC), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(out[1], 1);
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    dup2(devnull, 2);
    execv(cordon_bin, (char *const *)argv);
    _exit(127);
  }
  close(out[1]);
  char *buf = NULL;
  size_t len = 0;
  char chunk[4096];
  ssize_t got;
  while ((got = read(out[0], chunk, sizeof(chunk))) > 0) {
    buf = realloc(buf, len + (size_t)got + 1);
    memcpy(buf + len, chunk, (size_t)got);
    len += (size_t)got;
  }
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    free(buf);
    return NULL;
  }
  if (!buf)
    return strdup("");
  buf[len] = '\0';
  while (len && buf[len - 1] == '\n')
    buf[--len] = '\0';
  return buf;
}

/* Start $CORDON serve ARGS... in the project and read its ready line. */
static void server_start(struct server *srv, const char *first, ...) {
  const char *argv[12] = {cordon_bin, "serve", first};
  int n = first ? 3 : 2;
  va_list ap;
  va_start(ap, first);
  const char *a;
  while (first && n < 11 && (a = va_arg(ap, const char *)))
    argv[n++] = a;
  va_end(ap);
  argv[n] = NULL;
  int out[2];
  assert_int_equal(pipe2(out, O_CLOEXEC), 0);
  memset(srv, 0, sizeof(*srv));
  srv->pid = fork();
  assert_true(srv->pid >= 0);
  if (srv->pid == 0) {
    dup2(out[1], 1);
    execv(cordon_bin, (char *const *)argv);
    _exit(127);
  }
  close(out[1]);
  for (size_t i = 0; i < sizeof(live) / sizeof(*live); i++)
    if (!live[i]) {
      live[i] = srv->pid;
      break;
    }
  char line[1024];
  size_t len = 0;
  char c;
  while (len + 1 < sizeof(line) && read(out[0], &c, 1) == 1 && c != '\n')
    line[len++] = c;
  line[len] = '\0';
  close(out[0]);
  const char *prefix = "cordon serve: listening on ";
  if (strncmp(line, prefix, strlen(prefix)))
    fail_msg("cordon serve did not start: '%s'", line);
  const char *addr = line + strlen(prefix);
  if (!strncmp(addr, "unix:", 5)) {
    snprintf(srv->path, sizeof(srv->path), "%s", addr + 5);
  } else {
    srv->tcp = true;
    const char *colon = strrchr(addr, ':');
    assert_non_null(colon);
    srv->port = atoi(colon + 1);
    assert_true(srv->port > 0);
  }
}

static void server_stop(struct server *srv) {
  if (srv->pid > 0) {
    kill(srv->pid, SIGTERM);
    int status = 0;
    waitpid(srv->pid, &status, 0);
    for (size_t i = 0; i < sizeof(live) / sizeof(*live); i++)
      if (live[i] == srv->pid)
        live[i] = 0;
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  srv->pid = 0;
}

static int connect_to(const struct server *srv) {
  int fd;
  if (srv->tcp) {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)srv->port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
  } else {
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    assert_true(strlen(srv->path) < sizeof(sun.sun_path));
    strcpy(sun.sun_path, srv->path);
    assert_int_equal(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
  }
  return fd;
}

static void write_all(int fd, const void *data, size_t length) {
  const char *p = data;
  while (length) {
    ssize_t n = write(fd, p, length);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return; /* the server closed early: its reply tells */
    p += n, length -= (size_t)n;
  }
}

/* Decode a chunked body in place; false when it is malformed or unfinished. */
static bool dechunk(char *body, size_t *length) {
  const char *in = body, *end = body + *length;
  char *out = body;
  for (;;) {
    char *after = NULL;
    unsigned long size = strtoul(in, &after, 16);
    const char *crlf = strstr(after, "\r\n");
    if (after == in || !crlf || crlf + 2 > end)
      return false;
    in = crlf + 2;
    if (size == 0)
      break;
    if ((size_t)(end - in) < size + 2)
      return false;
    memmove(out, in, size);
    out += size, in += size + 2;
  }
  *length = (size_t)(out - body);
  *out = '\0';
  return true;
}

/* One request on its own connection (Connection: close); the reply read to its end. */
static void http(const struct server *srv, const char *method, const char *path, const char *token,
                 const void *body, size_t length, struct reply *r) {
  memset(r, 0, sizeof(*r));
  int fd = connect_to(srv);
  char head[8192];
  int n = snprintf(head, sizeof(head),
                   "%s %s HTTP/1.1\r\nHost: cordon\r\nConnection: close\r\n"
                   "Content-Length: %zu\r\n%s%s%s\r\n",
                   method, path, length, token ? "Authorization: Bearer " : "", token ? token : "",
                   token ? "\r\n" : "");
  assert_true(n > 0 && (size_t)n < sizeof(head));
  write_all(fd, head, (size_t)n);
  if (length)
    write_all(fd, body, length);
  char *buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (cap - len < 65536) {
      cap = cap ? 2 * cap : 131072;
      buf = realloc(buf, cap + 1);
      assert_non_null(buf);
    }
    ssize_t got = read(fd, buf + len, cap - len);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      break;
    len += (size_t)got;
  }
  close(fd);
  assert_non_null(buf);
  buf[len] = '\0';
  char *sep = strstr(buf, "\r\n\r\n");
  assert_non_null(sep);
  assert_int_equal(sscanf(buf, "HTTP/1.1 %d", &r->status), 1);
  r->head = strndup(buf, (size_t)(sep - buf) + 2);
  r->length = len - (size_t)(sep + 4 - buf);
  r->body = malloc(r->length + 1);
  memcpy(r->body, sep + 4, r->length);
  r->body[r->length] = '\0';
  free(buf);
  for (char *p = r->head; *p; p++)
    *p = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
  if (strstr(r->head, "transfer-encoding: chunked"))
    assert_true(dechunk(r->body, &r->length));
  if (strstr(r->head, "content-type: application/json"))
    r->json = json_loadb(r->body, r->length, 0, NULL);
}

static void call(const struct server *srv, const char *method, const char *path, const char *token,
                 const char *body, struct reply *r) {
  http(srv, method, path, token, body, body ? strlen(body) : 0, r);
}

static const char *error_code(const struct reply *r) {
  return json_string_value(json_object_get(json_object_get(r->json, "error"), "code"));
}

static const char *field(const struct reply *r, const char *name) {
  return json_string_value(json_object_get(r->json, name));
}

/* Assert the reply's status and, for an error, its code. */
#define expect(r, want_status, want_code)                                                       \
  do {                                                                                          \
    if ((r)->status != (want_status))                                                           \
      fail_msg("%s:%d: status %d, want %d: %s", __FILE__, __LINE__, (r)->status, (want_status), \
               (r)->body);                                                                      \
    const char *want_code_ = (want_code);                                                       \
    if (want_code_) {                                                                           \
      assert_non_null((r)->json);                                                               \
      assert_non_null(error_code(r));                                                           \
      assert_string_equal(error_code(r), want_code_);                                           \
      assert_non_null(                                                                          \
          json_string_value(json_object_get(json_object_get((r)->json, "error"), "message")));  \
    }                                                                                           \
  } while (0)

/* The value of one sample line "NAME{LABELS} VALUE" in metrics text; -1 when absent. */
static double sample(const char *text, const char *series) {
  size_t n = strlen(series);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
    if (!strncmp(p, series, n) && p[n] == ' ')
      return strtod(p + n + 1, NULL);
  return -1;
}

static char *b64(const char *text) {
  static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t n = strlen(text);
  char *out = calloc(4 * (n / 3 + 1) + 1, 1), *o = out;
  const unsigned char *s = (const unsigned char *)text;
  for (size_t i = 0; i < n; i += 3) {
    unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0) |
                 (i + 2 < n ? s[i + 2] : 0);
    *o++ = al[v >> 18 & 63];
    *o++ = al[v >> 12 & 63];
    *o++ = i + 1 < n ? al[v >> 6 & 63] : '=';
    *o++ = i + 2 < n ? al[v & 63] : '=';
  }
  return out;
}

static int setup(void **state) {
  (void)state;
  static int count;
  snprintf(project, sizeof(project), "%s/project-%d", root, ++count);
  char keys[600];
  snprintf(keys, sizeof(keys), "%s/keys-%d", root, count);
  assert_int_equal(mkdir(project, 0755), 0);
  assert_int_equal(mkdir(keys, 0700), 0);
  setenv("CORDON_PROJECT", project, 1);
  setenv("CORDON_KEY_DIR", keys, 1);
  unsetenv("CORDON_BACKEND");
  assert_int_equal(chdir(project), 0);
  return 0;
}

/* A failed test's servers are stopped (SIGTERM: they stop their races too). */
static int teardown(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof(live) / sizeof(*live); i++)
    if (live[i]) {
      kill(live[i], SIGTERM);
      waitpid(live[i], NULL, 0);
      live[i] = 0;
    }
  return 0;
}

/* The default socket: .cordon/serve.sock in the project, mode 0600, ours, removed when the
 * server stops; the routes that need no session (health, keys, backends) answer on it. */
static void test_unix_socket_and_open_routes(void **state) {
  (void)state;
  struct server srv;
  server_start(&srv, NULL);
  char want_path[700];
  snprintf(want_path, sizeof(want_path), "%s/.cordon/serve.sock", project);
  assert_string_equal(srv.path, want_path);
  struct stat st;
  assert_int_equal(stat(srv.path, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0600);
  assert_int_equal(st.st_uid, geteuid());

  struct reply r;
  call(&srv, "GET", "/healthz", NULL, NULL, &r);
  expect(&r, 200, NULL);
  assert_string_equal(field(&r, "status"), "ok");
  reply_clear(&r);
  call(&srv, "GET", "/.well-known/jwks.json", NULL, NULL, &r); /* no install key yet */
  expect(&r, 404, "no_key");
  reply_clear(&r);
  call(&srv, "GET", "/v1/backends", NULL, NULL, &r);
  expect(&r, 200, NULL);
  assert_non_null(strstr(r.body, "\"worktree\""));
  reply_clear(&r);
  server_stop(&srv);
  assert_int_equal(access(want_path, F_OK), -1); /* the socket removed at exit */
}

/* A worktree session with an env and a file: its id in ID (SIZE bytes). */
static void create_session(const struct server *srv, char *id, size_t size) {
  _cleanup_free_ char *content = b64("hello\n");
  char body[1024];
  snprintf(body, sizeof(body),
           "{\"backend\": \"worktree\", \"env\": {\"G\": \"hi\"}, \"timeout_seconds\": 60,"
           " \"files\": [{\"path\": \"a.txt\", \"content\": \"%s\"}]}",
           content);
  struct reply r;
  call(srv, "POST", "/v1/sessions", NULL, body, &r);
  expect(&r, 201, NULL);
  snprintf(id, size, "%s", field(&r, "id"));
  assert_string_equal(field(&r, "backend"), "worktree");
  reply_clear(&r);
}

/* Show (by a unique prefix of the id) and list. */
static void check_show_and_list(const struct server *srv, const char *id) {
  char url[256];
  snprintf(url, sizeof(url), "/v1/sessions/%.8s", id); /* a unique prefix will do */
  struct reply r;
  call(srv, "GET", url, NULL, NULL, &r);
  expect(&r, 200, NULL);
  assert_string_equal(field(&r, "id"), id);
  reply_clear(&r);
  call(srv, "GET", "/v1/sessions", NULL, NULL, &r);
  expect(&r, 200, NULL);
  assert_string_equal(json_string_value(json_object_get(
                          json_array_get(json_object_get(r.json, "sessions"), 0), "id")),
                      id);
  reply_clear(&r);
}

/* Files: a binary file put with its mode and read back, a missing one, no path; then ls. */
static void check_files_and_ls(const struct server *srv, const char *id) {
  char url[256];
  struct reply r;
  snprintf(url, sizeof(url), "/v1/sessions/%s/files?path=d/b.bin&mode=0600", id);
  http(srv, "PUT", url, NULL, "\0\1bin", 5, &r);
  expect(&r, 200, NULL);
  assert_int_equal(json_integer_value(json_object_get(r.json, "bytes")), 5);
  reply_clear(&r);
  snprintf(url, sizeof(url), "/v1/sessions/%s/files?path=d/b.bin", id);
  call(srv, "GET", url, NULL, NULL, &r);
  expect(&r, 200, NULL);
  assert_int_equal(r.length, 5);
  assert_memory_equal(r.body, "\0\1bin", 5);
  reply_clear(&r);
  snprintf(url, sizeof(url), "/v1/sessions/%s/files?path=missing", id);
  call(srv, "GET", url, NULL, NULL, &r);
  expect(&r, 404, "not_found");
  reply_clear(&r);
  snprintf(url, sizeof(url), "/v1/sessions/%s/files", id);
  call(srv, "GET", url, NULL, NULL, &r);
  expect(&r, 400, "bad_request");
  reply_clear(&r);
  snprintf(url, sizeof(url), "/v1/sessions/%s/ls?path=d", id);
  call(srv, "GET", url, NULL, NULL, &r);
  expect(&r, 200, NULL);
  json_t *entry = json_array_get(json_object_get(r.json, "entries"), 0);
  assert_string_equal(json_string_value(json_object_get(entry, "name")), "b.bin");
  assert_string_equal(json_string_value(json_object_get(entry, "mode")), "0600");
  reply_clear(&r);
}

/* exec: the session's env, stdin from the body, stdout and stderr in base64; bad bodies 400. */
static void check_exec(const struct server *srv, const char *id) {
  _cleanup_free_ char *in = b64("in");
  char url[256], body[1024];
  snprintf(url, sizeof(url), "/v1/sessions/%s/exec", id);
  snprintf(body, sizeof(body),
           "{\"argv\": [\"sh\", \"-c\", \"echo $G; cat; echo e >&2; exit 3\"], \"stdin\": \"%s\"}",
           in);
  struct reply r;
  call(srv, "POST", url, NULL, body, &r);
  expect(&r, 200, NULL);
  assert_int_equal(json_integer_value(json_object_get(r.json, "exit_code")), 3);
  _cleanup_free_ char *want_out = b64("hi\nin"), *want_err = b64("e\n");
  assert_string_equal(field(&r, "stdout"), want_out);
  assert_string_equal(field(&r, "stderr"), want_err);
  assert_true(json_is_false(json_object_get(r.json, "stdout_truncated")));
  assert_true(json_real_value(json_object_get(r.json, "duration_seconds")) > 0);
  reply_clear(&r);
  call(srv, "POST", url, NULL, "{\"argv\": \"true\"}", &r);
  expect(&r, 400, "bad_exec");
  reply_clear(&r);
  call(srv, "POST", url, NULL, "{\"argv\": [\"true\"], \"nope\": 1}", &r);
  expect(&r, 400, "bad_exec");
  reply_clear(&r);
}

/* Streamed exec: chunked ndjson, output events then the exit event last. */
static void check_exec_streamed(const struct server *srv, const char *id) {
  char url[256];
  snprintf(url, sizeof(url), "/v1/sessions/%s/exec?stream=1", id);
  struct reply r;
  call(srv, "POST", url, NULL, "{\"argv\": [\"sh\", \"-c\", \"echo a; exit 7\"]}", &r);
  expect(&r, 200, NULL);
  assert_non_null(strstr(r.head, "content-type: application/x-ndjson"));
  assert_non_null(strstr(r.head, "transfer-encoding: chunked"));
  char *nl = strchr(r.body, '\n');
  assert_non_null(nl);
  json_t *first = json_loadb(r.body, (size_t)(nl - r.body), 0, NULL);
  assert_string_equal(json_string_value(json_object_get(first, "stdout")), "YQo=");
  json_decref(first);
  assert_true(r.length >= 2 && r.body[r.length - 1] == '\n');
  r.body[r.length - 1] = '\0';
  const char *last_line = strrchr(r.body, '\n');
  json_t *last = json_loads(last_line ? last_line + 1 : r.body, 0, NULL);
  assert_int_equal(json_integer_value(json_object_get(last, "exit")), 7);
  json_decref(last);
  reply_clear(&r);
}

/* A snapshot of the session; then shutdown (idempotent), after which exec, streamed or not, and
 * file writes are 409. */
static void check_snapshot_and_shutdown(const struct server *srv, const char *id) {
  char url[256];
  struct reply r;
  snprintf(url, sizeof(url), "/v1/sessions/%s/snapshot", id);
  call(srv, "POST", url, NULL, NULL, &r);
  expect(&r, 200, NULL);
  assert_int_equal(strlen(field(&r, "snapshot")), 64);
  reply_clear(&r);

  snprintf(url, sizeof(url), "/v1/sessions/%s/shutdown", id);
  for (int i = 0; i < 2; i++) { /* idempotent */
    call(srv, "POST", url, NULL, NULL, &r);
    expect(&r, 200, NULL);
    assert_true(json_is_true(json_object_get(r.json, "shut_down")));
    reply_clear(&r);
  }
  snprintf(url, sizeof(url), "/v1/sessions/%s/exec", id);
  call(srv, "POST", url, NULL, "{\"argv\": [\"true\"]}", &r);
  expect(&r, 409, "shut_down");
  reply_clear(&r);
  snprintf(url, sizeof(url), "/v1/sessions/%s/exec?stream=1", id);
  call(srv, "POST", url, NULL, "{\"argv\": [\"true\"]}", &r);
  expect(&r, 409, "shut_down");
  reply_clear(&r);
  snprintf(url, sizeof(url), "/v1/sessions/%s/files?path=x", id);
  http(srv, "PUT", url, NULL, "x", 1, &r);
  expect(&r, 409, "shut_down");
  reply_clear(&r);
}

/* Destroy; then the session is 404 to destroy or show, as is exec in an unknown one. */
static void check_destroy(const struct server *srv, const char *id) {
  char url[256];
  snprintf(url, sizeof(url), "/v1/sessions/%s", id);
  struct reply r;
  call(srv, "DELETE", url, NULL, NULL, &r);
  expect(&r, 200, NULL);
  assert_true(json_is_true(json_object_get(r.json, "destroyed")));
  reply_clear(&r);
  call(srv, "DELETE", url, NULL, NULL, &r);
  expect(&r, 404, "not_found");
  reply_clear(&r);
  call(srv, "GET", url, NULL, NULL, &r);
  expect(&r, 404, "not_found");
  reply_clear(&r);
  call(srv, "POST", "/v1/sessions/0123456789abcdef/exec", NULL, "{\"argv\": [\"true\"]}", &r);
  expect(&r, 404, "not_found");
  reply_clear(&r);
}

/* The work of test_unix_session_routes, each counted once: one create, one destroy, the execs
 * that ran. */
static void check_session_metrics(const struct server *srv) {
  struct reply r;
  call(srv, "GET", "/metrics", NULL, NULL, &r);
  expect(&r, 200, NULL);
  assert_non_null(strstr(r.head, "content-type: text/plain; version=0.0.4"));
  assert_true(sample(r.body, "sandbox_session_created_total{backend=\"worktree\"}") == 1);
  assert_true(sample(r.body, "sandbox_session_destroyed_total{backend=\"worktree\"}") == 1);
  assert_true(sample(r.body, "sandbox_active_sessions{backend=\"worktree\"}") == 0);
  assert_true(sample(r.body, "sandbox_exec_count_total{backend=\"worktree\",exit_code=\"3\"}") ==
              1);
  assert_true(sample(r.body, "sandbox_exec_count_total{backend=\"worktree\",exit_code=\"7\"}") ==
              1);
  assert_true(sample(r.body, "sandbox_exec_duration_seconds_count{backend=\"worktree\"}") == 2);
  assert_true(sample(r.body, "sandbox_session_duration_seconds_count{backend=\"worktree\"}") == 1);
  reply_clear(&r);
}

/* A session's life on the unix socket: the manifest, show, list, files, ls, exec (plain and
 * streamed), snapshot, shutdown and its 409s, destroy and its 404s; the metrics moved. One
 * server throughout, so that the metrics count exactly this work. */
static void test_unix_session_routes(void **state) {
  (void)state;
  struct server srv;
  server_start(&srv, NULL);
  char id[64];
  create_session(&srv, id, sizeof(id));
  check_show_and_list(&srv, id);
  check_files_and_ls(&srv, id);
  check_exec(&srv, id);
  check_exec_streamed(&srv, id);
  check_snapshot_and_shutdown(&srv, id);
  check_destroy(&srv, id);
  check_session_metrics(&srv);
  server_stop(&srv);
}

/* Run a shell line in the project; its exit status. */
static int sh(const char *line) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    dup2(devnull, 1);
    dup2(devnull, 2);
    execl("/bin/sh", "sh", "-c", line, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Create a session from BODY, run `cat FILE` in it, check its stdout, destroy it. */
static void create_and_cat(const struct server *srv, const char *body, const char *file,
                           const char *want) {
  struct reply r;
  call(srv, "POST", "/v1/sessions", NULL, body, &r);
  expect(&r, 201, NULL);
  char url[256], exec[512];
  snprintf(url, sizeof(url), "/v1/sessions/%s", field(&r, "id"));
  reply_clear(&r);
  snprintf(exec, sizeof(exec), "%s/exec", url);
  char argv[256];
  snprintf(argv, sizeof(argv), "{\"argv\": [\"cat\", \"%s\"]}", file);
  call(srv, "POST", exec, NULL, argv, &r);
  expect(&r, 200, NULL);
  _cleanup_free_ char *encoded = b64(want);
  assert_int_equal(json_integer_value(json_object_get(r.json, "exit_code")), 0);
  assert_string_equal(field(&r, "stdout"), encoded);
  reply_clear(&r);
  call(srv, "DELETE", url, NULL, NULL, &r);
  expect(&r, 200, NULL);
  reply_clear(&r);
}

/* The manifest's host-path fields end to end: workspace (an existing directory) and repo (a
 * git repository, checked out on a branch); a policy the backend cannot enforce is 403 denied
 * unless require_enforcement is false. */
static void test_unix_manifest_workspace_repo_policy(void **state) {
  (void)state;
  struct server srv;
  server_start(&srv, NULL);
  char body[2048];
  assert_int_equal(sh("mkdir ws && echo from-ws > ws/f"), 0);
  snprintf(body, sizeof(body), "{\"backend\": \"worktree\", \"workspace\": \"%s/ws\"}", project);
  create_and_cat(&srv, body, "f", "from-ws\n");
  assert_int_equal(access("ws/f", F_OK), 0); /* the host's directory outlives the session */

  if (sh("command -v git") != 0) {
    fprintf(stderr, "test-serve-api: the repo field not tested: git is not installed\n");
  } else {
    assert_int_equal(sh("git init -q -b trunk src && echo from-repo > src/r.txt && "
                        "git -C src add r.txt && git -C src -c user.email=t@t -c user.name=t "
                        "commit -qm one"),
                     0);
    snprintf(body, sizeof(body),
             "{\"backend\": \"worktree\", \"repo\": {\"source\": \"%s/src\", "
             "\"branch\": \"trunk\"}}",
             project);
    create_and_cat(&srv, body, "r.txt", "from-repo\n");
  }

  struct reply r;
  call(&srv, "POST", "/v1/sessions", NULL,
       "{\"backend\": \"worktree\", \"policy\": {\"read_only\": [\"x\"]}}", &r);
  expect(&r, 403, "denied");
  reply_clear(&r);
  _cleanup_free_ char *listed = run_cordon("session", "list", NULL);
  assert_string_equal(listed, "");
  _cleanup_free_ char *content = b64("kept\n");
  snprintf(body, sizeof(body),
           "{\"backend\": \"worktree\", \"require_enforcement\": false, \"limits\": "
           "{\"pids\": 64}, \"policy\": {\"read_only\": [\"x\"]}, \"files\": "
           "[{\"path\": \"x\", \"content\": \"%s\", \"mode\": 420}]}",
           content);
  create_and_cat(&srv, body, "x", "kept\n");
  server_stop(&srv);
}

/* The error paths that need no session (400, 404, 405, 413), on a socket named by --socket;
 * none of them makes a session. */
static void test_unix_request_errors(void **state) {
  (void)state;
  struct server srv;
  char sock[700];
  snprintf(sock, sizeof(sock), "%s/api.sock", project);
  server_start(&srv, "--socket", sock, NULL);
  assert_string_equal(srv.path, sock);
  struct reply r;
  call(&srv, "GET", "/v1/nothing", NULL, NULL, &r);
  expect(&r, 404, "no_route");
  reply_clear(&r);
  call(&srv, "PATCH", "/v1/sessions", NULL, NULL, &r);
  expect(&r, 405, "method_not_allowed");
  reply_clear(&r);
  call(&srv, "POST", "/v1/sessions", NULL, "{\"backend\": ", &r);
  expect(&r, 400, "malformed_json");
  reply_clear(&r);
  call(&srv, "POST", "/v1/sessions", NULL, "[1]", &r);
  expect(&r, 400, "malformed_json");
  reply_clear(&r);
  call(&srv, "POST", "/v1/sessions", NULL, "{\"memory\": 5}", &r);
  expect(&r, 400, "bad_manifest");
  reply_clear(&r);
  call(&srv, "POST", "/v1/sessions", NULL, "{\"backend\": \"no-such-backend\"}", &r);
  expect(&r, 404, "not_found");
  reply_clear(&r);
  /* Over the bound: read on and dropped, then 413 (a JSON route and a raw one). */
  size_t big = (64u << 20) + 1;
  char *zeros = calloc(big, 1);
  assert_non_null(zeros);
  http(&srv, "POST", "/v1/snapshots/import", NULL, zeros, big, &r);
  expect(&r, 413, "body_too_large");
  reply_clear(&r);
  memset(zeros, ' ', big);
  http(&srv, "POST", "/v1/sessions", NULL, zeros, big, &r);
  expect(&r, 413, "body_too_large");
  reply_clear(&r);
  free(zeros);
  /* Nothing was made by any of these. */
  _cleanup_free_ char *listed = run_cordon("session", "list", NULL);
  assert_non_null(listed);
  assert_string_equal(listed, "");
  server_stop(&srv);
}

/* Snapshots of a directory: take (the API and the CLI agree), show, export, import it back,
 * refusals. The snapshot's id in SNAP (SIZE bytes). */
static void check_snapshots(const struct server *srv, char *snap, size_t size) {
  char tree[700], file[800], body[1024], url[256];
  snprintf(tree, sizeof(tree), "%s/tree", project);
  snprintf(file, sizeof(file), "%s/f", tree);
  assert_int_equal(mkdir(tree, 0755), 0);
  FILE *f = fopen(file, "we");
  fputs("data\n", f);
  fclose(f);
  snprintf(body, sizeof(body), "{\"path\": \"%s\"}", tree);
  struct reply r;
  call(srv, "POST", "/v1/snapshots", NULL, body, &r);
  expect(&r, 201, NULL);
  snprintf(snap, size, "%s", field(&r, "snapshot"));
  reply_clear(&r);
  _cleanup_free_ char *cli_snap = run_cordon("snapshot", "take", tree, NULL);
  assert_string_equal(cli_snap, snap);
  snprintf(url, sizeof(url), "/v1/snapshots/%.12s", snap);
  call(srv, "GET", url, NULL, NULL, &r);
  expect(&r, 200, NULL);
  assert_int_equal(json_array_size(json_object_get(r.json, "entries")), 2);
  reply_clear(&r);
  snprintf(url, sizeof(url), "/v1/snapshots/%s/export", snap);
  struct reply tar;
  call(srv, "GET", url, NULL, NULL, &tar);
  expect(&tar, 200, NULL);
  assert_non_null(strstr(tar.head, "content-type: application/x-tar"));
  assert_true(tar.length >= 1024 && tar.length % 512 == 0);
  http(srv, "POST", "/v1/snapshots/import", NULL, tar.body, tar.length, &r);
  expect(&r, 201, NULL);
  assert_string_equal(field(&r, "snapshot"), snap);
  reply_clear(&r);
  reply_clear(&tar);
  call(srv, "POST", "/v1/snapshots/import", NULL, "not a tar image", &r);
  expect(&r, 400, "invalid");
  reply_clear(&r);
  call(srv, "POST", "/v1/snapshots", NULL, "{\"path\": \"relative\"}", &r);
  expect(&r, 400, NULL);
  reply_clear(&r);
  call(srv, "GET",
       "/v1/snapshots/ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff/export",
       NULL, NULL, &r);
  expect(&r, 404, "not_found");
  reply_clear(&r);
}

/* Receipts (none given; not one) and the audit chain. */
static void check_receipts_and_audit(const struct server *srv) {
  struct reply r;
  call(srv, "POST", "/v1/receipts/verify", NULL, NULL, &r);
  expect(&r, 400, "bad_request");
  reply_clear(&r);
  call(srv, "POST", "/v1/receipts/verify", NULL, "{\"not\": \"a receipt\"}", &r);
  expect(&r, 200, NULL);
  assert_true(json_is_false(json_object_get(r.json, "verified")));
  reply_clear(&r);
  call(srv, "POST", "/v1/audit/verify", NULL, NULL, &r);
  expect(&r, 200, NULL);
  assert_true(json_is_true(json_object_get(r.json, "intact")));
  reply_clear(&r);
}

/* Start a race of one candidate on SNAP that waits until the file GO exists; its id in RACE. */
static void start_waiting_race(const struct server *srv, const char *snap, const char *go,
                               char *race, size_t size) {
  char body[1024];
  snprintf(body, sizeof(body),
           "{\"base\": \"%.12s\", \"k\": 1, \"backend\": \"worktree\", \"timeout_seconds\": 300,"
           " \"argv\": [\"sh\", \"-c\", \"while [ ! -e %s ]; do sleep 0.05; done\"]}",
           snap, go);
  struct reply r;
  call(srv, "POST", "/v1/races", NULL, body, &r);
  expect(&r, 202, NULL);
  snprintf(race, size, "%s", field(&r, "id"));
  assert_string_equal(field(&r, "status"), "running");
  reply_clear(&r);
}

/* Poll the race until it is no longer running (at most 2 minutes); it must be done. */
static void wait_for_race_done(const struct server *srv, const char *race) {
  char url[256];
  snprintf(url, sizeof(url), "/v1/races/%s", race);
  struct reply r;
  const char *status = "running";
  char last[32] = "";
  for (int i = 0; i < 1200 && !strcmp(status, "running"); i++) {
    call(srv, "GET", url, NULL, NULL, &r);
    expect(&r, 200, NULL);
    snprintf(last, sizeof(last), "%s", field(&r, "status"));
    status = last;
    reply_clear(&r);
    if (!strcmp(status, "running"))
      nanosleep(&(struct timespec){.tv_nsec = 100000000}, NULL);
  }
  assert_string_equal(status, "done");
}

/* Races: a bad body, an unknown race, and the receipt asked for while the race on SNAP runs
 * (409); once it is done, its receipt verifies against the key KID. */
static void check_races(const struct server *srv, const char *snap, const char *kid) {
  struct reply r;
  call(srv, "POST", "/v1/races", NULL, "{\"base\": \"x\", \"k\": 0, \"argv\": [\"true\"]}", &r);
  expect(&r, 400, "bad_race");
  reply_clear(&r);
  call(srv, "GET", "/v1/races/0123456789abcdef", NULL, NULL, &r);
  expect(&r, 404, "not_found");
  reply_clear(&r);
  /* The candidate waits for a file only this test makes, so the race cannot end first. */
  char go[800], race[64], url[256];
  snprintf(go, sizeof(go), "%s/go", project);
  start_waiting_race(srv, snap, go, race, sizeof(race));
  snprintf(url, sizeof(url), "/v1/races/%s/receipt", race);
  call(srv, "GET", url, NULL, NULL, &r);
  expect(&r, 409, "race_running");
  reply_clear(&r);
  FILE *f = fopen(go, "we");
  fclose(f);
  wait_for_race_done(srv, race);
  call(srv, "GET", url, NULL, NULL, &r);
  expect(&r, 200, NULL);
  struct reply v;
  snprintf(url, sizeof(url), "/v1/receipts/verify?expected_keyid=%s", kid);
  http(srv, "POST", url, NULL, r.body, r.length, &v);
  expect(&v, 200, NULL);
  assert_string_equal(field(&v, "verdict"), "verified");
  reply_clear(&v);
  reply_clear(&r);
}

/* Snapshots, receipts, audit, and a race's 409 while it runs, with an install key made first so
 * that the race's receipt is signed. */
static void test_unix_snapshots_receipts_races(void **state) {
  (void)state;
  _cleanup_free_ char *init = run_cordon("key", "init", NULL);
  assert_non_null(init);
  _cleanup_free_ char *kid = run_cordon("key", "show", "--kid", NULL);
  assert_non_null(kid);
  struct server srv;
  server_start(&srv, NULL);
  char snap[80];
  check_snapshots(&srv, snap, sizeof(snap));
  check_receipts_and_audit(&srv);
  check_races(&srv, snap, kid);
  server_stop(&srv);
}

/* TCP: bearer tokens. 401 for none, garbage, alg none, revoked; 403 without the scope; neither
 * reaches the backend; the open routes open. */
static void test_tcp_tokens(void **state) {
  (void)state;
  char token_file[700];
  snprintf(token_file, sizeof(token_file), "%s/admin.token", project);
  struct server srv;
  server_start(&srv, "--listen", "127.0.0.1:0", "--token-file", token_file, NULL);
  assert_true(srv.tcp);
  struct stat st;
  assert_int_equal(stat(token_file, &st), 0);
  assert_int_equal(st.st_mode & 07777, 0600);
  struct reply r;
  call(&srv, "GET", "/healthz", NULL, NULL, &r);
  expect(&r, 200, NULL);
  reply_clear(&r);
  call(&srv, "GET", "/.well-known/jwks.json", NULL, NULL, &r);
  expect(&r, 200, NULL);
  _cleanup_free_ char *jwks = run_cordon("key", "jwks", NULL);
  assert_string_equal(r.body, jwks);
  reply_clear(&r);
  call(&srv, "GET", "/v1/sessions", NULL, NULL, &r);
  expect(&r, 401, "unauthorized");
  reply_clear(&r);
  call(&srv, "GET", "/metrics", NULL, NULL, &r);
  expect(&r, 401, "unauthorized");
  reply_clear(&r);
  call(&srv, "GET", "/v1/sessions", "garbage", NULL, &r);
  expect(&r, 401, "unauthorized");
  reply_clear(&r);
  /* alg none, unsigned, claiming admin. */
  _cleanup_free_ char *hdr = b64("{\"alg\":\"none\",\"typ\":\"JWT\"}");
  _cleanup_free_ char *claims =
      b64("{\"exp\":4102444800,\"iat\":1,\"jti\":\"j\",\"scope\":\"admin\",\"sub\":\"x\"}");
  char none[512];
  snprintf(none, sizeof(none), "%s.%s.", hdr, claims);
  for (char *p = none; *p; p++) /* base64url, no padding */
    *p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
  char *w = none;
  for (char *p = none; *p; p++)
    if (*p != '=')
      *w++ = *p;
  *w = '\0';
  call(&srv, "POST", "/v1/sessions", none, "{\"backend\": \"worktree\"}", &r);
  expect(&r, 401, "unauthorized");
  reply_clear(&r);

  _cleanup_free_ char *reader = run_cordon("token", "create", "--scope", "read", NULL);
  assert_non_null(reader);
  call(&srv, "GET", "/v1/sessions", reader, NULL, &r);
  expect(&r, 200, NULL);
  reply_clear(&r);
  call(&srv, "GET", "/metrics", reader, NULL, &r);
  expect(&r, 200, NULL);
  reply_clear(&r);
  call(&srv, "POST", "/v1/sessions", reader, "{\"backend\": \"worktree\"}", &r);
  expect(&r, 403, "forbidden");
  reply_clear(&r);
  call(&srv, "POST", "/v1/audit/verify", reader, NULL, &r);
  expect(&r, 403, "forbidden");
  reply_clear(&r);
  _cleanup_free_ char *executor = run_cordon("token", "create", "--scope", "exec", NULL);
  call(&srv, "POST", "/v1/sessions", executor, "{\"backend\": \"worktree\"}", &r);
  expect(&r, 403, "forbidden"); /* a backend of tier none is an admin's */
  reply_clear(&r);

  _cleanup_free_ char *json = run_cordon("token", "create", "--scope", "admin", "--json", NULL);
  json_t *doc = json_loads(json, 0, NULL);
  assert_non_null(doc);
  const char *token = json_string_value(json_object_get(doc, "token"));
  call(&srv, "GET", "/v1/sessions", token, NULL, &r);
  expect(&r, 200, NULL);
  reply_clear(&r);
  _cleanup_free_ char *revoked =
      run_cordon("token", "revoke", json_string_value(json_object_get(doc, "jti")), NULL);
  assert_non_null(revoked);
  call(&srv, "GET", "/v1/sessions", token, NULL, &r);
  expect(&r, 401, "unauthorized");
  reply_clear(&r);
  json_decref(doc);
  /* None of the refused requests made a session. */
  _cleanup_free_ char *listed = run_cordon("session", "list", NULL);
  assert_string_equal(listed, "");

  unsigned char *admin_bytes = NULL;
  size_t admin_len = 0;
  struct cordon_error *err = NULL;
  assert_int_equal(fs_read_file(token_file, 8192, &admin_bytes, &admin_len, &err), 0);
  char *admin = (char *)admin_bytes;
  while (admin_len && admin[admin_len - 1] == '\n')
    admin[--admin_len] = '\0';
  call(&srv, "POST", "/v1/audit/verify", admin, NULL, &r);
  expect(&r, 200, NULL);
  reply_clear(&r);
  call(&srv, "POST", "/v1/sessions", admin, "{\"backend\": \"worktree\"}", &r);
  expect(&r, 201, NULL);
  char url[256];
  snprintf(url, sizeof(url), "/v1/sessions/%s", field(&r, "id"));
  reply_clear(&r);
  call(&srv, "DELETE", url, admin, NULL, &r);
  expect(&r, 200, NULL);
  reply_clear(&r);
  free(admin);
  server_stop(&srv);
}

int main(void) {
  cordon_bin = getenv("CORDON");
  if (!cordon_bin || access(cordon_bin, X_OK)) {
    fprintf(stderr, "test-serve-api: skipped: $CORDON does not name the cordon binary\n");
    return 77;
  }
  signal(SIGPIPE, SIG_IGN);
  snprintf(root, sizeof(root), "%s/cordon-serve-api.XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(root))
    return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_unix_socket_and_open_routes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unix_session_routes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unix_request_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unix_snapshots_receipts_races, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tcp_tokens, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unix_manifest_workspace_repo_policy, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  assert_int_equal(chdir("/"), 0);
  struct cordon_error *err = NULL;
  fs_remove_tree(root, &err);
  cordon_error_free(err);
  return failed;
}
