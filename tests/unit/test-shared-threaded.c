/* libcordon.so in a program of its own, with threads: cordon's code is not in the program's
 * executable, so an ns session's holder and its egress daemon are not fresh images of it but
 * the fork's copies (src/backends/ns/holder.c, src/net/daemon.c). Public API only,
 * linked against the shared library; skips (77) with the reason where the ns backend is
 * unavailable. Traffic stays inside the sandbox and the proxy, which refuses by name. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cordon/session.h>

static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;

static void *idle_thread(void *arg) {
  pthread_mutex_lock(&idle_lock); /* held by main until the end */
  pthread_mutex_unlock(&idle_lock);
  return arg;
}

static int failed(const char *what, struct cordon_error *err) {
  fprintf(stderr, "test-shared-threaded: %s: %s\n", what, err ? err->message : "?");
  cordon_error_free(err);
  return 1;
}

int main(void) {
  struct cordon_error *err = NULL;
  struct cordon_registry *reg = NULL;
  const struct cordon_backend *ns = NULL;
  if (cordon_registry_load(&reg, &err) < 0 || cordon_registry_find(reg, "ns", &ns, &err) < 0)
    return failed("the ns backend", err);
  char *reason = NULL;
  if (ns->available(ns, &reason) != 1) {
    printf("SKIP: the ns backend is unavailable here: %s\n", reason ? reason : "?");
    free(reason);
    cordon_registry_free(reg);
    return 77;
  }
  char project[] = "/tmp/cordon-shared-test-XXXXXX";
  if (!mkdtemp(project) || chmod(project, 0755) < 0)
    return failed("mkdtemp", NULL);
  struct cordon_context *ctx = NULL;
  if (cordon_context_open(project, &ctx, &err) < 0)
    return failed("context", err);
  pthread_mutex_lock(&idle_lock);
  pthread_t t;
  if (pthread_create(&t, NULL, idle_thread, NULL) != 0)
    return failed("pthread_create", NULL);
  int rc = 0;
  for (int i = 0; i < 3 && rc == 0; i++) {
    struct cordon_manifest m = {0};
    struct cordon_session *s = NULL;
    if (cordon_session_create(ctx, ns, &m, &s, &err) < 0)
      return failed("create", err);
    const char *argv[] = {"echo", "shared", NULL};
    struct cordon_exec_request req = {.argv = argv, .timeout = 30};
    struct cordon_exec_result res;
    if (cordon_session_exec(s, &req, &res, &err) < 0)
      return failed("exec", err);
    if (res.exit_code != 0 || strcmp((char *)res.stdout_data, "shared\n") != 0) {
      fprintf(stderr, "test-shared-threaded: exit %d, stdout \"%s\"\n", res.exit_code,
              (char *)res.stdout_data);
      rc = 1;
    }
    cordon_exec_result_clear(&res);
    if (cordon_session_destroy(s, &err) < 0)
      return failed("destroy", err);
  }
  /* Restricted egress: the daemon answers the sandbox's proxy port, refusing a name not listed
   * before it resolves anything. */
  const char *allowed[] = {"allowed.test", NULL};
  struct cordon_egress_rules rules = {.allow_domains = allowed};
  struct cordon_manifest m = {.egress_rules = &rules};
  m.policy.egress = CORDON_EGRESS_RESTRICTED;
  struct cordon_session *s = NULL;
  if (rc == 0 && cordon_session_create(ctx, ns, &m, &s, &err) < 0)
    return failed("create with egress restricted", err);
  const char *script =
      "import socket\n"
      "c = socket.create_connection(('127.0.0.1', 3128), timeout=20)\n"
      "c.sendall(b'CONNECT other.test:80 HTTP/1.1\\r\\nHost: other.test:80\\r\\n\\r\\n')\n"
      "print(c.recv(64).split(b'\\r\\n')[0].decode())\n";
  const char *py[] = {"python3", "-c", script, NULL};
  struct cordon_exec_request req = {.argv = py, .timeout = 60};
  struct cordon_exec_result res;
  if (s && cordon_session_exec(s, &req, &res, &err) < 0)
    return failed("exec through the proxy", err);
  if (s && (res.exit_code != 0 || !strstr((char *)res.stdout_data, " 403"))) {
    fprintf(stderr, "test-shared-threaded: the proxy: exit %d, stdout \"%s\", stderr \"%s\"\n",
            res.exit_code, (char *)res.stdout_data, (char *)res.stderr_data);
    rc = 1;
  }
  if (s) {
    cordon_exec_result_clear(&res);
    if (cordon_session_destroy(s, &err) < 0)
      return failed("destroy", err);
  }
  pthread_mutex_unlock(&idle_lock);
  pthread_join(t, NULL);
  cordon_context_free(ctx);
  cordon_registry_free(reg);
  char cmd[100];
  snprintf(cmd, sizeof(cmd), "rm -rf %s", project);
  if (system(cmd) != 0)
    rc = 1;
  if (rc == 0)
    printf("ok: 3 sessions and one with egress restricted, from a threaded program linking "
           "libcordon.so\n");
  return rc;
}
