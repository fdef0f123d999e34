/* `cordon serve`'s HTTP side: the listener (a unix socket reachable only by its owner, or TCP
 * with bearer tokens), the route table with the scope each route needs, the bounded request
 * body and authentication before any route runs (the replies every route gives: reply.c).
 * libmicrohttpd runs one thread per connection, so a route may block (an exec) without
 * holding up the others. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "crypto/jwt.h"
#include "protocol/tokens.h"
#include "server/metrics.h"
#include "server/races.h"
#include "server/serve.h"
#include "server/server.h"

/* ---- routes ------------------------------------------------------------------------------- */

enum route_access {
  ACCESS_OPEN, /* no token: liveness and the public key */
  ACCESS_READ,
  ACCESS_EXEC,
  ACCESS_ADMIN,
};

static const struct route {
  const char *method;
  const char *pattern; /* '*' is one path segment, handed to the route as id */
  enum route_access access;
  route_fn fn;
} routes[] = {
    {"GET", "/healthz", ACCESS_OPEN, route_healthz},
    {"GET", "/.well-known/jwks.json", ACCESS_OPEN, route_jwks},
    {"GET", "/metrics", ACCESS_READ, route_metrics},
    {"GET", "/v1/backends", ACCESS_READ, route_backends},
    {"POST", "/v1/sessions", ACCESS_EXEC, route_session_create},
    {"GET", "/v1/sessions", ACCESS_READ, route_session_list},
    {"GET", "/v1/sessions/*", ACCESS_READ, route_session_show},
    {"DELETE", "/v1/sessions/*", ACCESS_EXEC, route_session_destroy},
    {"GET", "/v1/sessions/*/files", ACCESS_READ, route_session_read},
    {"PUT", "/v1/sessions/*/files", ACCESS_EXEC, route_session_write},
    {"GET", "/v1/sessions/*/ls", ACCESS_READ, route_session_ls},
    {"POST", "/v1/sessions/*/exec", ACCESS_EXEC, route_session_exec},
    {"POST", "/v1/sessions/*/snapshot", ACCESS_EXEC, route_session_snapshot},
    {"POST", "/v1/sessions/*/shutdown", ACCESS_EXEC, route_session_shutdown},
    {"POST", "/v1/snapshots", ACCESS_EXEC, route_snapshot_take},
    {"POST", "/v1/snapshots/import", ACCESS_EXEC, route_snapshot_import},
    {"GET", "/v1/snapshots/*", ACCESS_READ, route_snapshot_show},
    {"GET", "/v1/snapshots/*/export", ACCESS_READ, route_snapshot_export},
    {"POST", "/v1/receipts/verify", ACCESS_READ, route_receipt_verify},
    {"POST", "/v1/audit/verify", ACCESS_ADMIN, route_audit_verify},
    {"POST", "/v1/races", ACCESS_EXEC, route_race_start},
    {"GET", "/v1/races/*", ACCESS_READ, route_race_status},
    {"GET", "/v1/races/*/receipt", ACCESS_READ, route_race_receipt},
    {"POST", "/v1/pools/*/dispatches", ACCESS_EXEC, route_pool_submit},
    {"GET", "/v1/pools/*/dispatches", ACCESS_READ, route_pool_dispatch},
};

/* Whether url matches pattern; the one '*' segment is copied to id (id_size bytes). */
static bool route_match(const char *pattern, const char *url, char *id, size_t id_size) {
  id[0] = 0;
  while (*pattern && *url) {
    if (*pattern == '*') {
      size_t n = strcspn(url, "/");
      if (n == 0 || n >= id_size)
        return false;
      memcpy(id, url, n);
      id[n] = 0;
      url += n;
      pattern++;
      continue;
    }
    if (*pattern++ != *url++)
      return false;
  }
  return !*pattern && !*url;
}

/* The unix socket's peer must be our own user (the socket is 0600 too; this holds even when
 * its mode is changed or a descriptor leaks). */
static bool peer_is_owner(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (!info)
    return false;
  struct ucred cred;
  socklen_t len = sizeof(cred);
  if (getsockopt(info->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
    return false;
  return cred.uid == geteuid();
}

/* The bearer token's check: 0 with *scopes, or a reply already queued (*replied). */
static int authenticate(struct request *req, uint32_t *scopes, enum MHD_Result *replied) {
  struct server *srv = req->srv;
  const char *header =
      MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  if (!header || strncmp(header, "Bearer ", 7)) {
    *replied = reply_error(req, 401, "unauthorized", "a bearer token is required");
    return -1;
  }
  if (!srv->jwks) {
    *replied = reply_error(req, 401, "unauthorized", "the server has no install key");
    return -1;
  }
  struct jwt_claims claims;
  struct cordon_error *err = NULL;
  if (jwt_verify(header + 7, srv->public_key, srv->kid, (int64_t)time(NULL), &claims, &err) < 0) {
    *replied = reply_error(req, 401, "unauthorized", "%s", err->message);
    cordon_error_free(err);
    return -1;
  }
  bool revoked = true;
  if (tokens_is_revoked(srv->state_dir, claims.jti, &revoked, &err) < 0) {
    *replied = reply_error(req, 401, "unauthorized", "cannot check revocation: %s", err->message);
    cordon_error_free(err);
    jwt_claims_clear(&claims);
    return -1;
  }
  if (revoked) {
    *replied = reply_error(req, 401, "unauthorized", "token %s is revoked", claims.jti);
    jwt_claims_clear(&claims);
    return -1;
  }
  *scopes = claims.scopes;
  jwt_claims_clear(&claims);
  return 0;
}

static enum MHD_Result dispatch(struct request *req) {
  const struct route *found = NULL;
  bool path_known = false;
  char id[256];
  for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
    if (route_match(routes[i].pattern, req->url, id, sizeof(id))) {
      path_known = true;
      if (!strcmp(routes[i].method, req->method)) {
        found = &routes[i];
        break;
      }
    }
  enum route_access access = found ? found->access : ACCESS_READ;
  req->scopes = JWT_SCOPE_ADMIN; /* the unix socket's peer is the owner */
  if (access != ACCESS_OPEN && req->srv->require_token) {
    uint32_t scopes = 0;
    enum MHD_Result replied = MHD_NO;
    if (authenticate(req, &scopes, &replied) < 0)
      return replied;
    req->scopes = scopes;
    uint32_t needed = access == ACCESS_ADMIN  ? JWT_SCOPE_ADMIN
                      : access == ACCESS_EXEC ? JWT_SCOPE_EXEC
                                              : JWT_SCOPE_READ;
    if (!jwt_scope_allows(scopes, needed)) {
      _cleanup_free_ char *need = jwt_scope_format(needed);
      return reply_error(req, 403, "forbidden", "this route needs scope %s", need ? need : "?");
    }
  }
  if (!found)
    return path_known ? reply_error(req, 405, "method_not_allowed", "%s is not allowed on %s",
                                    req->method, req->url)
                      : reply_error(req, 404, "no_route", "no route %s %s", req->method, req->url);
  if (req->too_large)
    return reply_error(req, 413, "body_too_large", "request body over %u bytes", SERVER_MAX_BODY);
  return found->fn(req, id[0] ? id : NULL);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **con_cls) {
  struct server *srv = cls;
  struct request *req = *con_cls;
  if (!req) {
    req = calloc(1, sizeof(*req));
    if (!req)
      return MHD_NO;
    req->srv = srv;
    req->conn = conn;
    req->method = method;
    req->url = url;
    *con_cls = req;
    return MHD_YES;
  }
  if (*upload_size) {
    if (req->length + *upload_size > SERVER_MAX_BODY) {
      req->too_large = true; /* read on and drop, to answer 413 at the end */
    } else if (!req->too_large) {
      size_t need = req->length + *upload_size + 1;
      if (need > req->capacity) {
        size_t capacity = req->capacity ? req->capacity : 4096;
        while (capacity < need)
          capacity *= 2;
        char *grown = realloc(req->body, capacity);
        if (!grown)
          return MHD_NO;
        req->body = grown;
        req->capacity = capacity;
      }
      memcpy(req->body + req->length, upload_data, *upload_size);
      req->length += *upload_size;
      req->body[req->length] = 0;
    }
    *upload_size = 0;
    return MHD_YES;
  }
  if (srv->unix_socket && !peer_is_owner(conn))
    return reply_error(req, 403, "forbidden_peer", "only the server's owner may connect");
  return dispatch(req);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  struct request *req = *con_cls;
  if (!req)
    return;
  free(req->body);
  free(req);
  *con_cls = NULL;
}

/* ---- listeners ---------------------------------------------------------------------------- */

static int listen_unix(const char *path, struct cordon_error **err) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof(sa.sun_path))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "socket path %s is too long", path);
  strcpy(sa.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "socket");
  /* A socket left by a server that died is replaced; one that answers is another server's. */
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
    close(fd);
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "a server already listens on %s", path);
  }
  if (errno == ECONNREFUSED)
    unlink(path);
  mode_t old = umask(0177); /* 0600 from the start: no window where others may connect */
  int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
  umask(old);
  if (r < 0 || chmod(path, 0600) < 0 || listen(fd, 64) < 0) {
    int e = errno;
    close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "listen on %s", path);
  }
  return fd;
}

/* ADDR:PORT, ADDR an IPv4 address or a bracketed IPv6 one; PORT 0 picks a free one. */
static int listen_tcp(const char *spec, char *shown, size_t shown_size, struct cordon_error **err) {
  _cleanup_free_ char *copy = strdup(spec);
  char *colon = copy ? strrchr(copy, ':') : NULL;
  if (!colon)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "--listen wants ADDR:PORT, not '%s'", spec);
  *colon = 0;
  char *end = NULL;
  unsigned long port = strtoul(colon + 1, &end, 10);
  if (!colon[1] || *end || port > 65535)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "bad port in '%s'", spec);
  struct sockaddr_storage ss = {0};
  socklen_t len;
  char *host = copy;
  size_t hl = strlen(host);
  if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
    host[hl - 1] = 0;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons((uint16_t)port);
    if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1)
      return cordon_error_set(err, CORDON_ERR_USAGE, 0, "bad address in '%s'", spec);
    len = sizeof(*s6);
  } else {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
      return cordon_error_set(err, CORDON_ERR_USAGE, 0, "bad address in '%s'", spec);
    len = sizeof(*s4);
  }
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
      bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 64) < 0 ||
      getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "listen on %s", spec);
  }
  char addr[INET6_ADDRSTRLEN];
  if (ss.ss_family == AF_INET6) {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    inet_ntop(AF_INET6, &s6->sin6_addr, addr, sizeof(addr));
    snprintf(shown, shown_size, "http://[%s]:%u", addr, ntohs(s6->sin6_port));
  } else {
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    inet_ntop(AF_INET, &s4->sin_addr, addr, sizeof(addr));
    snprintf(shown, shown_size, "http://%s:%u", addr, ntohs(s4->sin_port));
  }
  return fd;
}

/* The install key, for tokens and the JWKS route; absent is fine on a unix socket. */
static int load_identity(struct server *srv, bool required, struct cordon_signing_key **key,
                         struct cordon_error **err) {
  struct cordon_error *load_err = NULL;
  if (cordon_signing_key_load(NULL, key, &load_err) < 0) {
    if (required || load_err->kind != CORDON_ERR_NOT_FOUND) {
      *err = load_err;
      return -1;
    }
    cordon_error_free(load_err);
    return 0;
  }
  memcpy(srv->public_key, cordon_signing_key_public(*key), CORDON_ED25519_PUBLIC_LEN);
  snprintf(srv->kid, sizeof(srv->kid), "%s", cordon_signing_key_id(*key));
  return cordon_signing_key_jwks(*key, &srv->jwks, err);
}

/* --token-file: an admin token for whoever started the server, 0600, replaced atomically. */
static int write_token_file(const struct cordon_signing_key *key, const char *path,
                            struct cordon_error **err) {
  struct jwt_claims claims = {.scopes = JWT_SCOPE_ADMIN, .sub = (char *)"serve"};
  _cleanup_free_ char *jti = NULL, *token = NULL, *line = NULL;
  if (fs_random_hex(JWT_ID_HEX_LEN / 2, &jti, err) < 0)
    return -1;
  claims.jti = jti;
  claims.iat = (int64_t)time(NULL);
  claims.exp = claims.iat + SERVE_TOKEN_FILE_TTL;
  if (jwt_sign(key, &claims, &token, err) < 0)
    return -1;
  if (asprintf(&line, "%s\n", token) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "token");
  return fs_write_atomic(path, line, strlen(line), 0600, err);
}

static void server_clear(struct server *srv) {
  cordon_registry_free(srv->reg);
  free(srv->project_dir);
  free(srv->state_dir);
  free(srv->jwks);
  races_free(srv->races);
  metrics_free(srv->metrics);
}

/* The sessions that exist as the server starts, for sandbox_active_sessions; the event log
 * (followed from before this listing) brings the creates and destroys after it. A session that
 * cannot be opened is not counted: it cannot be used either. */
static int count_present_sessions(const struct cordon_registry *reg, struct metrics *m,
                                  struct cordon_error **err) {
  struct cordon_context *ctx = NULL;
  char **ids = NULL;
  if (cordon_context_open(NULL, &ctx, err) < 0 || cordon_session_list(ctx, &ids, err) < 0) {
    cordon_context_free(ctx);
    return -1;
  }
  for (size_t i = 0; ids[i]; i++) {
    struct cordon_session *s = NULL;
    struct cordon_error *open_err = NULL;
    if (cordon_session_open(ctx, reg, ids[i], &s, &open_err) == 0) {
      metrics_session_present(m, s->id, s->backend->name);
      cordon_session_close(s);
    }
    cordon_error_free(open_err);
  }
  cordon_strv_free(ids);
  cordon_context_free(ctx);
  return 0;
}

static int server_setup(struct server *srv, const char *listen_spec, const char *token_file,
                        struct cordon_error **err) {
  struct cordon_context *ctx = NULL;
  if (cordon_context_open(NULL, &ctx, err) < 0)
    return -1;
  srv->project_dir = strdup(cordon_context_project_dir(ctx));
  srv->state_dir = strdup(cordon_context_state_dir(ctx));
  cordon_context_free(ctx);
  if (!srv->project_dir || !srv->state_dir)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "serve");
  if (fs_mkdir_p(srv->state_dir, 0755, err) < 0 || cordon_registry_load(&srv->reg, err) < 0)
    return -1;
  if (metrics_new(srv->state_dir, &srv->metrics, err) < 0 ||
      count_present_sessions(srv->reg, srv->metrics, err) < 0)
    return -1;
  srv->races = races_new();
  if (!srv->races)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "races");
  srv->require_token = listen_spec != NULL;
  srv->unix_socket = listen_spec == NULL;
  struct cordon_signing_key *key = NULL;
  int r = load_identity(srv, srv->require_token || token_file, &key, err);
  if (r == 0 && token_file)
    r = write_token_file(key, token_file, err);
  cordon_signing_key_free(key);
  return r;
}

int server_run(const char *listen_spec, const char *given_socket, const char *token_file,
               FILE *announce, struct cordon_error **err) {
  struct server srv = {0};
  _cleanup_free_ char *socket_path = NULL;
  char shown[512] = "";
  int fd = -1;
  if (mhd_api_load(err) < 0 || server_setup(&srv, listen_spec, token_file, err) < 0)
    goto fail;
  if (listen_spec) {
    fd = listen_tcp(listen_spec, shown, sizeof(shown), err);
  } else {
    if (given_socket)
      socket_path = strdup(given_socket);
    else if (asprintf(&socket_path, "%s/%s", srv.state_dir, SERVE_DEFAULT_SOCKET) < 0)
      socket_path = NULL;
    if (!socket_path) {
      cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "serve");
      goto fail;
    }
    fd = listen_unix(socket_path, err);
    snprintf(shown, sizeof(shown), "unix:%s", socket_path);
  }
  if (fd < 0)
    goto fail;
  /* The signals that stop the server are taken by sigwait below; every thread libmicrohttpd
   * starts inherits the mask. A client gone mid-reply is an error on that write, no signal. */
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);
  signal(SIGPIPE, SIG_IGN);
  struct MHD_Daemon *d = MHD_start_daemon(
      MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, on_request,
      &srv, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SERVE_IDLE_TIMEOUT, MHD_OPTION_END);
  if (!d) {
    close(fd);
    cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "cannot start the HTTP server");
    goto fail;
  }
  fprintf(announce, "cordon serve: listening on %s\n", shown);
  fflush(announce);
  int sig = 0;
  sigwait(&stop, &sig);
  MHD_stop_daemon(d);
  close(fd);
  if (socket_path)
    unlink(socket_path);
  server_clear(&srv);
  return 0;
fail:
  server_clear(&srv);
  return -1;
}
