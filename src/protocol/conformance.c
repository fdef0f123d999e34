/* The conformance suite: what every backend must do, checked through the public session API
 * only, so built-ins and plugins are held to the same contract. Each check creates what it
 * needs, asserts, and cleans up; a failure names what was expected and what came back. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cordon/session.h>
#include <cordon/volume.h>

#include "base/cleanup.h"
#include "base/fs.h"

struct suite {
  struct cordon_context *ctx;
  const struct cordon_backend *backend;
  struct cordon_session *session; /* shared by the checks that do not destroy it */
  FILE *out;
  bool json;
  json_t *results;
  struct cordon_conformance_summary summary;
  char *why; /* failure or skip reason of the running check */
  bool skipped;
};

/* Record why the running check failed; the first reason wins. Returns -1 for `return fail()`. */
__attribute__((format(printf, 2, 3))) static int fail(struct suite *t, const char *fmt, ...) {
  if (t->why)
    return -1;
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(&t->why, fmt, ap) < 0)
    t->why = NULL;
  va_end(ap);
  return -1;
}

static int fail_err(struct suite *t, const char *what, struct cordon_error *err) {
  int r = fail(t, "%s: %s", what, err && err->message ? err->message : "failed");
  cordon_error_free(err);
  return r;
}

static int skip(struct suite *t, const char *why) {
  t->skipped = true;
  t->why = strdup(why);
  return 0;
}

/* The manifest of a caller that asks for no particular policy: the backend's default egress
 * class (loopback where it can enforce that, open for a backend that enforces nothing). */
static struct cordon_manifest base_manifest(const struct cordon_backend *b) {
  struct cordon_manifest m = {0};
  m.policy.egress = cordon_backend_default_egress(b);
  m.policy.require_enforcement = true;
  return m;
}

static int run(struct suite *t, struct cordon_session *s, const char *const *argv, double timeout,
               const char *stdin_data, size_t max_output, struct cordon_exec_result *res) {
  struct cordon_exec_request req = {
      .argv = argv,
      .timeout = timeout,
      .stdin_data = stdin_data,
      .stdin_length = stdin_data ? strlen(stdin_data) : 0,
      .max_output = max_output,
  };
  struct cordon_error *err = NULL;
  if (cordon_session_exec(s, &req, res, &err) < 0)
    return fail_err(t, argv[0], err);
  return 0;
}

static int expect_output(struct suite *t, const char *what, const unsigned char *got,
                         size_t got_len, const char *want) {
  if (got_len != strlen(want) || memcmp(got, want, got_len) != 0)
    return fail(t, "%s: expected \"%s\", got \"%.*s\"", what, want,
                (int)(got_len > 200 ? 200 : got_len), got ? (const char *)got : "");
  return 0;
}

static int roundtrip(struct suite *t, const char *path, const void *data, size_t len) {
  struct cordon_error *err = NULL;
  if (cordon_session_write(t->session, path, data, len, 0644, &err) < 0)
    return fail_err(t, "write", err);
  _cleanup_free_ unsigned char *back = NULL;
  size_t back_len = 0;
  if (cordon_session_read(t->session, path, &back, &back_len, &err) < 0)
    return fail_err(t, "read", err);
  if (back_len != len || memcmp(back, data, len) != 0)
    return fail(t, "%s: read back %zu bytes that differ from the %zu written", path, back_len, len);
  return 0;
}

/* ---- the checks --------------------------------------------------------------------------- */

static int check_capabilities(struct suite *t) {
  uint32_t c = t->backend->capabilities;
  if (!(c & CORDON_CAP_FILE_RW))
    return fail(t, "file_rw is not declared");
  if (!(c & CORDON_CAP_EXEC))
    return fail(t, "exec is not declared");
  return 0;
}

static int check_utf8_roundtrip(struct suite *t) {
  const char *text = "h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93 \xf0\x9f\x90\xa7\n";
  return roundtrip(t, "unicode-\xc3\xa9t\xc3\xa9.txt", text, strlen(text));
}

static int check_binary_roundtrip(struct suite *t) {
  unsigned char all[512];
  for (int i = 0; i < 512; i++)
    all[i] = (unsigned char)(i % 256);
  return roundtrip(t, "binary.bin", all, sizeof(all));
}

static int check_large_roundtrip(struct suite *t) {
  size_t n = 1u << 20;
  _cleanup_free_ unsigned char *big = malloc(n);
  if (!big)
    return fail(t, "out of memory");
  uint32_t x = 2463534242u;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    big[i] = (unsigned char)x;
  }
  return roundtrip(t, "large.bin", big, n);
}

static int check_exit_zero(struct suite *t) {
  struct cordon_exec_result r;
  const char *argv[] = {"sh", "-c", "echo out; echo err >&2", NULL};
  if (run(t, t->session, argv, 0, NULL, 0, &r) < 0)
    return -1;
  int rc = r.exit_code != 0 ? fail(t, "exit code %d, expected 0", r.exit_code) : 0;
  if (rc == 0)
    rc = expect_output(t, "stdout", r.stdout_data, r.stdout_length, "out\n");
  if (rc == 0)
    rc = expect_output(t, "stderr", r.stderr_data, r.stderr_length, "err\n");
  cordon_exec_result_clear(&r);
  return rc;
}

static int check_exit_seven(struct suite *t) {
  struct cordon_exec_result r;
  const char *argv[] = {"sh", "-c", "echo to-out; echo to-err >&2; exit 7", NULL};
  if (run(t, t->session, argv, 0, NULL, 0, &r) < 0)
    return -1;
  int rc = r.exit_code != 7 ? fail(t, "exit code %d, expected 7", r.exit_code) : 0;
  if (rc == 0)
    rc = expect_output(t, "stdout", r.stdout_data, r.stdout_length, "to-out\n");
  if (rc == 0)
    rc = expect_output(t, "stderr", r.stderr_data, r.stderr_length, "to-err\n");
  cordon_exec_result_clear(&r);
  return rc;
}

static int check_signal_exit(struct suite *t) {
  struct cordon_exec_result r;
  const char *argv[] = {"sh", "-c", "kill -TERM $$", NULL};
  if (run(t, t->session, argv, 0, NULL, 0, &r) < 0)
    return -1;
  int rc = r.exit_code != 128 + 15 ? fail(t, "exit code %d, expected 143", r.exit_code) : 0;
  cordon_exec_result_clear(&r);
  return rc;
}

static int check_not_found(struct suite *t) {
  struct cordon_exec_result r;
  const char *argv[] = {"cordon-no-such-command-xyz", NULL};
  if (run(t, t->session, argv, 0, NULL, 0, &r) < 0)
    return -1;
  int rc = r.exit_code != 127 ? fail(t, "exit code %d, expected 127", r.exit_code) : 0;
  cordon_exec_result_clear(&r);
  return rc;
}

static int check_env_override(struct suite *t) {
  struct cordon_exec_result r;
  const char *argv[] = {"sh", "-c", "printf '%s|%s' \"$CORDON_CONF_VAR\" \"$LANG\"", NULL};
  const char *env[] = {"CORDON_CONF_VAR=v1", "LANG=C", NULL};
  struct cordon_exec_request req = {.argv = argv, .env = env};
  struct cordon_error *err = NULL;
  if (cordon_session_exec(t->session, &req, &r, &err) < 0)
    return fail_err(t, "exec", err);
  int rc = expect_output(t, "stdout", r.stdout_data, r.stdout_length, "v1|C");
  cordon_exec_result_clear(&r);
  return rc;
}

static int check_cwd(struct suite *t) {
  struct cordon_error *err = NULL;
  if (cordon_session_write(t->session, "sub/dir/marker", "m", 1, 0644, &err) < 0)
    return fail_err(t, "write", err);
  const char *argv[] = {"cat", "marker", NULL};
  struct cordon_exec_request req = {.argv = argv, .cwd = "sub/dir"};
  struct cordon_exec_result r;
  if (cordon_session_exec(t->session, &req, &r, &err) < 0)
    return fail_err(t, "exec", err);
  int rc = expect_output(t, "stdout", r.stdout_data, r.stdout_length, "m");
  cordon_exec_result_clear(&r);
  return rc;
}

static int check_stdin(struct suite *t) {
  struct cordon_exec_result r;
  const char *argv[] = {"cat", NULL};
  if (run(t, t->session, argv, 0, "fed through stdin\n", 0, &r) < 0)
    return -1;
  int rc = expect_output(t, "stdout", r.stdout_data, r.stdout_length, "fed through stdin\n");
  cordon_exec_result_clear(&r);
  return rc;
}

/* The bound proves the timeout cut the command short (it would sleep 30 s), not how fast:
 * a loaded CI host with a ptrace-platform gVisor takes seconds to tear an exec down. */
static int check_timeout(struct suite *t) {
  struct cordon_exec_result r;
  const char *argv[] = {"sleep", "30", NULL};
  double start = fs_now();
  if (run(t, t->session, argv, 1.0, NULL, 0, &r) < 0)
    return -1;
  double took = fs_now() - start;
  int rc = 0;
  if (!r.timed_out)
    rc = fail(t, "not reported as timed out (exit %d)", r.exit_code);
  else if (took > 15.0)
    rc = fail(t, "timeout reported after %.2f s, expected within 15 s", took);
  cordon_exec_result_clear(&r);
  return rc;
}

/* A process left behind would write the marker after the exec returned. It waits 4 s, well
 * past the 1 s timeout, so a kill delayed by a loaded host is not mistaken for a survivor. */
static int expect_no_survivor(struct suite *t, const char *script, const char *marker) {
  struct cordon_exec_result r;
  const char *argv[] = {"sh", "-c", script, NULL};
  double start = fs_now();
  if (run(t, t->session, argv, 1.0, NULL, 0, &r) < 0)
    return -1;
  bool timed_out = r.timed_out;
  cordon_exec_result_clear(&r);
  if (!timed_out)
    return fail(t, "not reported as timed out");
  /* The survivor would write 4 s after the start; wait past that. */
  double left = start + 5.0 - fs_now();
  if (left > 0) {
    struct timespec wait = {.tv_sec = (time_t)left,
                            .tv_nsec = (long)((left - (double)(time_t)left) * 1e9)};
    while (nanosleep(&wait, &wait) < 0 && errno == EINTR) {
    }
  }
  unsigned char *data = NULL;
  size_t len = 0;
  struct cordon_error *err = NULL;
  if (cordon_session_read(t->session, marker, &data, &len, &err) == 0) {
    free(data);
    return fail(t, "a process outlived the exec's timeout and wrote %s", marker);
  }
  bool not_found = err->kind == CORDON_ERR_NOT_FOUND;
  if (!not_found)
    return fail_err(t, "read", err);
  cordon_error_free(err);
  return 0;
}

static int check_timeout_background_child(struct suite *t) {
  return expect_no_survivor(t, "(sleep 4; echo alive > survivor-bg) & sleep 30", "survivor-bg");
}

static int check_timeout_daemonised_child(struct suite *t) {
  return expect_no_survivor(
      t,
      "setsid sh -c 'sleep 4; echo alive > survivor-daemon' </dev/null >/dev/null 2>&1 & sleep 30",
      "survivor-daemon");
}

static int check_output_bound(struct suite *t) {
  struct cordon_exec_result r;
  const char *argv[] = {"head", "-c", "3000000", "/dev/zero", NULL};
  if (run(t, t->session, argv, 0, NULL, 1u << 20, &r) < 0)
    return -1;
  int rc = 0;
  if (!r.stdout_truncated)
    rc = fail(t, "3 MB of output with a 1 MiB bound was not flagged as truncated");
  else if (r.stdout_length != (1u << 20))
    rc = fail(t, "kept %zu bytes, expected the bound of 1048576", r.stdout_length);
  else if (r.stdout_total != 3000000)
    rc = fail(t, "counted %llu bytes, expected 3000000", (unsigned long long)r.stdout_total);
  else if (r.exit_code != 0)
    rc = fail(t, "exit code %d, expected 0", r.exit_code);
  cordon_exec_result_clear(&r);
  return rc;
}

static int check_only_stdio_fds(struct suite *t) {
  struct cordon_exec_result r;
  /* A child shell lists the outer shell's fd table from outside (the trailing `true` keeps
   * the outer shell from exec'ing the child in its place), so the listing shows what the
   * command inherited. A glob (readdir), not ls: the check is about fds, not about whether
   * the sandbox's kernel takes coreutils' statx flags (gVisor 2022 refuses them). */
  const char *argv[] = {
      "sh", "-c", "sh -c 'for f in /proc/$PPID/fd/*; do echo \"${f##*/}\"; done'; true", NULL};
  if (run(t, t->session, argv, 0, NULL, 0, &r) < 0)
    return -1;
  int rc = expect_output(t, "open fds", r.stdout_data, r.stdout_length, "0\n1\n2\n");
  cordon_exec_result_clear(&r);
  return rc;
}

static int check_ls_sorted(struct suite *t) {
  struct cordon_error *err = NULL;
  const char *names[] = {"zeta", "Alpha", "beta", "a-dir/x"};
  for (size_t i = 0; i < 4; i++)
    if (cordon_session_write(t->session, names[i] + 0, "x", 1, 0, &err) < 0) {
      char p[64];
      snprintf(p, sizeof(p), "write %s", names[i]);
      return fail_err(t, p, err);
    }
  struct cordon_dirent *e = NULL;
  size_t n = 0;
  if (cordon_session_ls(t->session, "", &e, &n, &err) < 0)
    return fail_err(t, "ls", err);
  int rc = 0;
  for (size_t i = 1; i < n && rc == 0; i++)
    if (strcmp(e[i - 1].name, e[i].name) >= 0)
      rc = fail(t, "entries out of order: %s before %s", e[i - 1].name, e[i].name);
  bool saw_dir = false;
  for (size_t i = 0; i < n; i++)
    if (strcmp(e[i].name, "a-dir") == 0 && e[i].kind == CORDON_KIND_DIRECTORY)
      saw_dir = true;
  if (rc == 0 && !saw_dir)
    rc = fail(t, "a-dir missing or not reported as a directory");
  cordon_dirents_free(e, n);
  return rc;
}

static int check_write_creates_parents(struct suite *t) {
  return roundtrip(t, "deep/er/and/deeper/file.txt", "nested\n", 7);
}

static int check_read_missing(struct suite *t) {
  unsigned char *data = NULL;
  size_t len = 0;
  struct cordon_error *err = NULL;
  if (cordon_session_read(t->session, "no/such/file", &data, &len, &err) == 0) {
    free(data);
    return fail(t, "reading a missing file succeeded");
  }
  int rc = 0;
  if (err->kind != CORDON_ERR_NOT_FOUND)
    rc = fail(t, "error kind %d, expected not-found: %s", err->kind, err->message);
  else if (!strstr(err->message, "no/such/file"))
    rc = fail(t, "error does not name the path: %s", err->message);
  cordon_error_free(err);
  return rc;
}

static int expect_refused_read(struct suite *t, const char *path) {
  unsigned char *data = NULL;
  size_t len = 0;
  struct cordon_error *err = NULL;
  if (cordon_session_read(t->session, path, &data, &len, &err) == 0) {
    free(data);
    return fail(t, "reading %s succeeded", path);
  }
  cordon_error_free(err);
  return 0;
}

static int check_path_escapes(struct suite *t) {
  struct cordon_error *err = NULL;
  if (expect_refused_read(t, "../../../../etc/passwd") < 0 ||
      expect_refused_read(t, "/etc/passwd") < 0 || expect_refused_read(t, "a/../../x") < 0)
    return -1;
  if (cordon_session_write(t->session, "../escaped", "x", 1, 0, &err) == 0)
    return fail(t, "writing ../escaped succeeded");
  cordon_error_free(err);
  err = NULL;
  /* Symlinks planted by the command must not lead the host-side operations out. */
  struct cordon_exec_result r;
  const char *argv[] = {"sh", "-c", "ln -s /etc out-link && ln -s ../../../../../../etc rel-link",
                        NULL};
  if (run(t, t->session, argv, 0, NULL, 0, &r) < 0)
    return -1;
  int code = r.exit_code;
  cordon_exec_result_clear(&r);
  if (code != 0)
    return fail(t, "could not plant symlinks (exit %d)", code);
  if (expect_refused_read(t, "out-link/passwd") < 0 ||
      expect_refused_read(t, "rel-link/passwd") < 0)
    return -1;
  if (cordon_session_write(t->session, "out-link/cordon-escape", "x", 1, 0, &err) == 0)
    return fail(t, "writing through a symlink to /etc succeeded");
  cordon_error_free(err);
  err = NULL;
  struct cordon_dirent *e = NULL;
  size_t n = 0;
  if (cordon_session_ls(t->session, "out-link", &e, &n, &err) == 0) {
    cordon_dirents_free(e, n);
    return fail(t, "listing through a symlink to /etc succeeded");
  }
  cordon_error_free(err);
  return 0;
}

static int check_double_shutdown_destroy(struct suite *t) {
  struct cordon_manifest m = base_manifest(t->backend);
  struct cordon_session *s = NULL;
  struct cordon_error *err = NULL;
  if (cordon_session_create(t->ctx, t->backend, &m, &s, &err) < 0)
    return fail_err(t, "create", err);
  _cleanup_free_ char *id = strdup(s->id);
  if (cordon_session_shutdown(s, &err) < 0 || cordon_session_shutdown(s, &err) < 0) {
    cordon_session_destroy(s, NULL);
    return fail_err(t, "shutdown", err);
  }
  if (cordon_session_destroy(s, &err) < 0)
    return fail_err(t, "destroy", err);
  struct cordon_registry *reg = NULL;
  if (cordon_registry_load(&reg, &err) < 0)
    return fail_err(t, "registry", err);
  int r = cordon_session_destroy_id(t->ctx, reg, id, &err);
  cordon_registry_free(reg);
  if (r < 0)
    return fail_err(t, "second destroy", err);
  return 0;
}

static int check_snapshot_roundtrip(struct suite *t) {
  if (!(t->backend->capabilities & CORDON_CAP_SNAPSHOT))
    return skip(t, "the backend does not declare snapshot");
  struct cordon_error *err = NULL;
  if (cordon_session_write(t->session, "snap/file.txt", "before", 6, 0600, &err) < 0)
    return fail_err(t, "write", err);
  _cleanup_free_ char *id = NULL;
  if (cordon_session_snapshot(t->session, &id, &err) < 0)
    return fail_err(t, "snapshot", err);
  if (cordon_session_write(t->session, "snap/file.txt", "after", 5, 0644, &err) < 0)
    return fail_err(t, "write", err);
  struct cordon_manifest m = base_manifest(t->backend);
  struct cordon_session *s = NULL;
  if (cordon_session_resume(t->ctx, t->backend, &m, id, &s, &err) < 0)
    return fail_err(t, "resume", err);
  unsigned char *data = NULL;
  size_t len = 0;
  int rc = 0;
  if (cordon_session_read(s, "snap/file.txt", &data, &len, &err) < 0)
    rc = fail_err(t, "read in resumed session", err);
  else
    rc = expect_output(t, "resumed file", data, len, "before");
  free(data);
  struct cordon_dirent *e = NULL;
  size_t n = 0;
  err = NULL;
  if (rc == 0 && cordon_session_ls(s, "snap", &e, &n, &err) == 0) {
    if (n != 1 || e[0].mode != 0600)
      rc = fail(t, "resumed file mode %o, expected 600", n ? e[0].mode : 0);
    cordon_dirents_free(e, n);
  } else if (rc == 0) {
    rc = fail_err(t, "ls", err);
  }
  cordon_session_destroy(s, NULL);
  return rc;
}

/* ---- the same flags mean the same on every confining backend ------------------------------ */

/* Inside the sandbox: a server on 127.0.0.1 and a client of it, in one script. Prints "reached"
 * or "unreachable: WHY", then "ifaces:" and every interface other than lo (/proc/net/dev).
 * python3 where the sandbox has it, else busybox's nc (the docker test image); neither: "no
 * tool". Only 127.0.0.1 inside the sandbox is ever contacted. */
static const char net_probe_script[] =
    "if command -v python3 >/dev/null 2>&1; then\n"
    "  python3 -c '\n"
    "import socket\n"
    "try:\n"
    "    s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen(1)\n"
    "    c = socket.create_connection(s.getsockname(), timeout=5); a, _ = s.accept()\n"
    "    c.sendall(b\"ping\"); print(\"reached\" if a.recv(4) == b\"ping\" else \"unreachable: "
    "garbled\")\n"
    "except OSError as e:\n"
    "    print(\"unreachable: %s\" % e)'\n"
    "elif command -v busybox >/dev/null 2>&1; then\n"
    "  out=/tmp/.cordon-conformance-nc.$$; port=47311\n"
    /* The server's stdin is a fifo this shell holds open. On EOF there busybox nc half-closes
     * at once, and a client that saw that FIN before reading its own stdin ended without
     * sending the ping: "unreachable" in 1 run of 6 to 12 under load. */
    "  mkfifo $out.in; exec 3<>$out.in\n"
    "  busybox nc -l -p $port <&3 > $out 2>/dev/null & server=$!\n"
    /* Up to 10 s each for the server to listen and for its copy of the ping: under load (a
     * sanitizer build beside other suites) the background server may start seconds late. */
    "  i=0; while [ $i -lt 100 ]; do\n"
    "    echo ping | busybox nc -w 2 127.0.0.1 $port 2>/dev/null && break; sleep 0.1; i=$((i+1))\n"
    "  done\n"
    "  i=0; while [ $i -lt 100 ] && [ ! -s $out ]; do sleep 0.1; i=$((i+1)); done\n"
    "  kill $server 2>/dev/null; wait $server 2>/dev/null; exec 3>&-\n"
    "  if [ \"$(cat $out)\" = ping ]; then echo reached; else echo 'unreachable: no answer'; fi\n"
    "  rm -f $out $out.in\n"
    "else\n"
    "  echo 'no tool'\n"
    "fi\n"
    "echo \"ifaces:$(tail -n +3 /proc/net/dev | grep -v '^ *lo:' | cut -d: -f1 | tr -d ' \\n')\"\n";

/* Runs the probe in s: *reached, and whether an interface other than lo exists (a failure
 * names it). Returns 1 when the sandbox has no tool for it (a skip). */
static int net_probe(struct suite *t, struct cordon_session *s, bool *reached) {
  struct cordon_exec_result r;
  const char *argv[] = {"sh", "-c", net_probe_script, NULL};
  if (run(t, s, argv, 60, NULL, 0, &r) < 0)
    return -1;
  const char *out = (const char *)r.stdout_data;
  int rc = 0;
  const char *ifaces = out ? strstr(out, "ifaces:") : NULL;
  if (!ifaces)
    rc = fail(t, "the network probe printed no interface list (exit %d): %s", r.exit_code,
              out ? out : "");
  else if (ifaces[7] != '\n' && ifaces[7] != 0)
    rc = fail(t, "an interface other than lo exists inside: %s", ifaces + 7);
  else if (!strncmp(out, "no tool", 7))
    rc = 1;
  else
    *reached = !strncmp(out, "reached", 7);
  cordon_exec_result_clear(&r);
  return rc;
}

/* The default egress of a backend that enforces loopback is loopback: a server on 127.0.0.1
 * inside answers a client inside (a test suite's local server works), and lo is the only
 * interface. */
static int check_default_egress_loopback(struct suite *t) {
  if (!(t->backend->enforces & CORDON_FEATURE_NET_LOOPBACK))
    return skip(t, "the backend does not enforce net_loopback");
  if (cordon_backend_default_egress(t->backend) != CORDON_EGRESS_LOOPBACK)
    return fail(t, "the default egress is %s, expected loopback",
                cordon_egress_name(cordon_backend_default_egress(t->backend)));
  bool reached = false;
  int r = net_probe(t, t->session, &reached);
  if (r == 1)
    return skip(t, "neither python3 nor busybox inside to run a server on 127.0.0.1");
  if (r == 0 && !reached)
    return fail(t, "a server on 127.0.0.1 inside was not reachable under the default egress");
  return r;
}

/* Egress none: no interface at all (lo stays down), so even 127.0.0.1 inside is unreachable. */
static int check_net_none_no_interface(struct suite *t) {
  if (!(t->backend->enforces & CORDON_FEATURE_NET_NONE))
    return skip(t, "the backend does not enforce net_none (--net none is refused by name)");
  struct cordon_manifest m = base_manifest(t->backend);
  m.policy.egress = CORDON_EGRESS_NONE;
  struct cordon_session *s = NULL;
  struct cordon_error *err = NULL;
  if (cordon_session_create(t->ctx, t->backend, &m, &s, &err) < 0)
    return fail_err(t, "create with egress none", err);
  bool reached = true;
  int r = net_probe(t, s, &reached);
  cordon_session_destroy(s, NULL);
  if (r == 1)
    return skip(t, "neither python3 nor busybox inside to run a server on 127.0.0.1");
  if (r == 0 && reached)
    return fail(t, "a server on 127.0.0.1 inside was reachable under egress none (lo is up)");
  return r;
}

/* A confining backend runs commands as the documented sandbox user: uid and gid 1000, named
 * cordon in /etc/passwd (ns and docker alike; docs/security.md). */
static int check_sandbox_user(struct suite *t) {
  if (t->backend->tier == CORDON_TIER_NONE)
    return skip(t, "the backend isolates nothing: commands run as the caller");
  struct cordon_exec_result r;
  const char *argv[] = {"sh", "-c", "echo \"$(id -u):$(id -g):$(id -un)\"", NULL};
  if (run(t, t->session, argv, 0, NULL, 0, &r) < 0)
    return -1;
  int rc =
      expect_output(t, "id -u:id -g:id -un", r.stdout_data, r.stdout_length, "1000:1000:cordon\n");
  cordon_exec_result_clear(&r);
  return rc;
}

/* ---- driver ------------------------------------------------------------------------------- */

struct check {
  const char *name;
  int (*fn)(struct suite *t);
};

/* Asking for a policy feature the backend does not declare is refused by name, before the
 * backend is called (the library's check, the same for every backend). */
static int check_refuses_unenforced(struct suite *t) {
  uint32_t missing = CORDON_FEATURE_ALL & ~t->backend->enforces & ~CORDON_FEATURE_TMP_SIZE;
  if (!missing)
    return skip(t, "the backend enforces every policy feature");
  uint32_t f = missing & -missing; /* the first one */
  static const char *const one[] = {"conformance-path", NULL};
  static const char *const host[] = {"/usr", NULL};
  struct cordon_manifest m = base_manifest(t->backend);
  struct cordon_policy *p = &m.policy;
  switch (f) {
  case CORDON_FEATURE_READ_ONLY_PATHS: p->read_only = one; break;
  case CORDON_FEATURE_HIDDEN_PATHS: p->hidden = one; break;
  case CORDON_FEATURE_HOST_GRANTS: p->allow_ro = host; break;
  case CORDON_FEATURE_MEMORY: p->limits.memory_bytes = 64u << 20; break;
  case CORDON_FEATURE_PIDS: p->limits.pids = 64; break;
  case CORDON_FEATURE_CPU: p->limits.cpus = 0.5; break;
  case CORDON_FEATURE_NOFILE: p->limits.nofile = 256; break;
  case CORDON_FEATURE_FSIZE: p->limits.fsize_bytes = 1u << 20; break;
  case CORDON_FEATURE_NET_NONE: p->egress = CORDON_EGRESS_NONE; break;
  case CORDON_FEATURE_NET_LOOPBACK: p->egress = CORDON_EGRESS_LOOPBACK; break;
  default: p->egress = CORDON_EGRESS_RESTRICTED; break;
  }
  struct cordon_session *s = NULL;
  struct cordon_error *err = NULL;
  if (cordon_session_create(t->ctx, t->backend, &m, &s, &err) == 0) {
    cordon_session_destroy(s, NULL);
    return fail(t, "a manifest asking for %s (not enforced) was accepted", cordon_feature_name(f));
  }
  int r = 0;
  if (err->kind != CORDON_ERR_DENIED || !strstr(err->message, cordon_feature_name(f)))
    r = fail(t, "expected a refusal naming %s, got: %s", cordon_feature_name(f), err->message);
  cordon_error_free(err);
  return r;
}

/* ---- persistent volumes ---------------------------------------------------------------------- */

#define VOLUME_TARGET "/conformance-volume"

/* A fresh session mounting volume `name` at VOLUME_TARGET, runs `script` in it, destroys it. */
static int run_with_volume(struct suite *t, const char *name, bool read_only, const char *script,
                           struct cordon_exec_result *res) {
  struct cordon_volume v = {.source = name, .target = VOLUME_TARGET, .read_only = read_only};
  struct cordon_manifest m = base_manifest(t->backend);
  m.volumes = &v;
  m.n_volumes = 1;
  struct cordon_session *s = NULL;
  struct cordon_error *err = NULL;
  if (cordon_session_create(t->ctx, t->backend, &m, &s, &err) < 0)
    return fail_err(t, "create with a volume", err);
  const char *argv[] = {"sh", "-c", script, NULL};
  int r = run(t, s, argv, 60, NULL, 0, res);
  if (cordon_session_destroy(s, &err) < 0 && r == 0) {
    cordon_exec_result_clear(res);
    return fail_err(t, "destroy", err);
  }
  cordon_error_free(err);
  return r;
}

/* Data written to a volume in one session is read in the next; a :ro volume refuses writes
 * (and keeps what it held). A backend without persistent_volumes is refused any volume. */
static int check_volumes(struct suite *t) {
  _cleanup_free_ char *hex = NULL, *name = NULL;
  struct cordon_error *err = NULL;
  if (fs_random_hex(6, &hex, &err) < 0 || asprintf(&name, "conformance-%s", hex) < 0)
    return fail_err(t, "volume name", err);
  struct cordon_exec_result r = {0};
  if (!(t->backend->capabilities & CORDON_CAP_PERSISTENT_VOLUMES)) {
    struct cordon_volume v = {.source = name, .target = VOLUME_TARGET};
    struct cordon_manifest m = base_manifest(t->backend);
    m.volumes = &v;
    m.n_volumes = 1;
    struct cordon_session *s = NULL;
    if (cordon_session_create(t->ctx, t->backend, &m, &s, &err) == 0) {
      cordon_session_destroy(s, NULL);
      return fail(t, "a volume was accepted by a backend without persistent_volumes");
    }
    int rc = err->kind == CORDON_ERR_DENIED && strstr(err->message, "persistent_volumes")
                 ? 0
                 : fail(t, "expected a refusal naming persistent_volumes, got: %s", err->message);
    cordon_error_free(err);
    return rc;
  }
  int rc = run_with_volume(t, name, false, "echo kept > " VOLUME_TARGET "/file", &r);
  if (rc == 0 && r.exit_code != 0)
    rc = fail(t, "writing to the volume exited %d: %.200s", r.exit_code, (char *)r.stderr_data);
  cordon_exec_result_clear(&r);
  if (rc == 0 && (rc = run_with_volume(t, name, false, "cat " VOLUME_TARGET "/file", &r)) == 0)
    rc = expect_output(t, "the volume in the next session", r.stdout_data, r.stdout_length,
                       "kept\n");
  cordon_exec_result_clear(&r);
  if (rc == 0 && (rc = run_with_volume(t, name, true,
                                       "echo no > " VOLUME_TARGET "/file 2>/dev/null; "
                                       "echo no > " VOLUME_TARGET "/new 2>/dev/null; "
                                       "cat " VOLUME_TARGET "/file; ls " VOLUME_TARGET,
                                       &r)) == 0)
    rc = expect_output(t, "a read-only volume after writes", r.stdout_data, r.stdout_length,
                       "kept\nfile\n");
  cordon_exec_result_clear(&r);
  if (cordon_volume_remove(t->ctx, name, &err) < 0 && rc == 0)
    return fail_err(t, "volume remove", err);
  cordon_error_free(err);
  return rc;
}

static const struct check checks[] = {
    {"declares-file-rw-and-exec", check_capabilities},
    {"utf8-roundtrip", check_utf8_roundtrip},
    {"binary-roundtrip", check_binary_roundtrip},
    {"1mib-roundtrip", check_large_roundtrip},
    {"write-creates-parents", check_write_creates_parents},
    {"read-missing-is-not-found", check_read_missing},
    {"ls-sorted", check_ls_sorted},
    {"exit-0-stdout-stderr", check_exit_zero},
    {"exit-7-stdout-stderr", check_exit_seven},
    {"signal-exit-128-plus-n", check_signal_exit},
    {"command-not-found-127", check_not_found},
    {"env-override", check_env_override},
    {"cwd", check_cwd},
    {"stdin-delivered", check_stdin},
    {"timeout-reported", check_timeout},
    {"timeout-kills-background-child", check_timeout_background_child},
    {"timeout-kills-daemonised-child", check_timeout_daemonised_child},
    {"output-bounded-and-flagged", check_output_bound},
    {"only-stdio-fds", check_only_stdio_fds},
    {"path-escapes-refused", check_path_escapes},
    {"double-shutdown-and-destroy", check_double_shutdown_destroy},
    {"snapshot-resume-roundtrip", check_snapshot_roundtrip},
    {"unenforced-policy-refused", check_refuses_unenforced},
    {"volume-persists-and-ro-refuses-writes", check_volumes},
    {"default-egress-loopback", check_default_egress_loopback},
    {"net-none-no-interface", check_net_none_no_interface},
    {"sandbox-user-1000", check_sandbox_user},
};

/* A reason on one line: a newline in a command's output shows as \n. */
static void print_reason(FILE *out, const char *why) {
  for (; *why; why++)
    if (*why == '\n')
      fputs("\\n", out);
    else
      fputc(*why, out);
}

static void report(struct suite *t, const char *name, bool ok, double took) {
  const char *status = t->skipped ? "skip" : ok ? "pass" : "fail";
  if (t->skipped)
    t->summary.skipped++;
  else if (ok)
    t->summary.passed++;
  else
    t->summary.failed++;
  json_t *o =
      json_pack("{s:s, s:s, s:f}", "name", name, "status", status, "duration_seconds", took);
  if (t->why)
    json_object_set_new(o, "reason", json_string(t->why));
  json_array_append_new(t->results, o);
  if (!t->json) {
    fprintf(t->out, "%-4s %s", status, name);
    if (t->why) {
      fputs(": ", t->out);
      print_reason(t->out, t->why);
    }
    fputc('\n', t->out);
    fflush(t->out);
  }
}

int cordon_conformance_run(struct cordon_context *ctx, const struct cordon_backend *backend,
                           FILE *out, bool json, struct cordon_conformance_summary *summary,
                           struct cordon_error **err) {
  struct suite t = {.ctx = ctx, .backend = backend, .out = out, .json = json};
  if (cordon_backend_check(backend, err) < 0)
    return -1;
  struct cordon_manifest m = base_manifest(backend);
  if (cordon_session_create(ctx, backend, &m, &t.session, err) < 0)
    return cordon_error_prefix(err, "conformance: cannot create a session");
  t.results = json_array();
  for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
    t.why = NULL;
    t.skipped = false;
    double start = fs_now();
    int r = checks[i].fn(&t);
    if (r < 0 && !t.why)
      t.why = strdup("failed");
    report(&t, checks[i].name, r == 0, fs_now() - start);
    free(t.why);
    t.why = NULL;
  }
  struct cordon_error *destroy_err = NULL;
  t.why = NULL;
  t.skipped = false;
  if (cordon_session_destroy(t.session, &destroy_err) < 0)
    fail_err(&t, "destroy", destroy_err);
  report(&t, "destroy", t.why == NULL, 0);
  free(t.why);
  if (json) {
    json_t *doc = json_pack("{s:s, s:o, s:i, s:i, s:i}", "backend", backend->name, "results",
                            t.results, "passed", t.summary.passed, "failed", t.summary.failed,
                            "skipped", t.summary.skipped);
    json_dumpf(doc, out, JSON_INDENT(2));
    fputc('\n', out);
    json_decref(doc);
  } else {
    fprintf(out, "%d passed, %d failed, %d skipped\n", t.summary.passed, t.summary.failed,
            t.summary.skipped);
    /* The failures again, last: a log cut to its tail still names them. */
    size_t i;
    json_t *o;
    json_array_foreach(t.results, i, o) {
      if (!strcmp(json_string_value(json_object_get(o, "status")), "fail")) {
        fprintf(out, "failed %s: ", json_string_value(json_object_get(o, "name")));
        print_reason(out, json_string_value(json_object_get(o, "reason")));
        fputc('\n', out);
      }
    }
    json_decref(t.results);
  }
  if (summary)
    *summary = t.summary;
  return 0;
}
