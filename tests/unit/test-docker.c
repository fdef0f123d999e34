/* The docker backend's pure parts, without a daemon: the HTTP head parser, the multiplexed
 * stream demultiplexer, bounded captures and the status trailer, DOCKER_HOST parsing, the
 * container and exec configurations, the path policy resolution, and the exec agent's use of
 * the shared exec wire format (exec/wire.h, tested in tests/unit/test-exec-wire.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "backends/docker/agent.h"
#include "backends/docker/config.h"
#include "backends/docker/engine.h"
#include "backends/docker/stream.h"
#include "base/fs.h"

/* ---- HTTP head ------------------------------------------------------------------------------ */

static void test_http_head(void **state) {
  struct docker_http_head h;
  const char upgraded[] = "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-"
                          "stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\nSTREAM";
  assert_int_equal(docker_http_parse_head(upgraded, sizeof(upgraded) - 1, &h), 1);
  assert_int_equal(h.status, 101);
  assert_int_equal(h.content_length, -1);
  assert_false(h.chunked);
  assert_string_equal(upgraded + h.head_length, "STREAM");

  const char error[] =
      "HTTP/1.1 404 Not Found\r\ncontent-length: 27\r\n\r\n{\"message\":\"No such exec\"}";
  assert_int_equal(docker_http_parse_head(error, sizeof(error) - 1, &h), 1);
  assert_int_equal(h.status, 404);
  assert_int_equal(h.content_length, 27);

  const char chunked[] = "HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n";
  assert_int_equal(docker_http_parse_head(chunked, sizeof(chunked) - 1, &h), 1);
  assert_true(h.chunked);

  /* Incomplete, then malformed. */
  assert_int_equal(docker_http_parse_head(upgraded, 20, &h), 0);
  const char bad[] = "HTTX/1.1 200 OK\r\n\r\n";
  assert_int_equal(docker_http_parse_head(bad, sizeof(bad) - 1, &h), -1);
  const char bad_length[] = "HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n";
  assert_int_equal(docker_http_parse_head(bad_length, sizeof(bad_length) - 1, &h), -1);
  /* A head that never ends is refused once it passes the bound. */
  char *huge = malloc(DOCKER_HTTP_HEAD_MAX);
  memset(huge, 'a', DOCKER_HTTP_HEAD_MAX);
  memcpy(huge, "HTTP/1.1 200 OK\r\n", 17);
  assert_int_equal(docker_http_parse_head(huge, DOCKER_HTTP_HEAD_MAX, &h), -1);
  free(huge);
}

static void test_dechunk(void **state) {
  char body[] = "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
  long long n = docker_http_dechunk(body, strlen(body));
  assert_int_equal(n, 11);
  assert_memory_equal(body, "hello world", 11);
  char truncated[] = "a\r\nshort\r\n";
  assert_int_equal(docker_http_dechunk(truncated, strlen(truncated)), -1);
  char junk[] = "zz\r\n";
  assert_int_equal(docker_http_dechunk(junk, strlen(junk)), -1);
}

/* ---- demultiplexing ------------------------------------------------------------------------ */

struct collected {
  char out[256], err[256], sys[256];
  size_t out_n, err_n, sys_n;
};

static void collect(void *data, enum docker_stream_id stream, const unsigned char *bytes,
                    size_t length) {
  struct collected *c = data;
  char *buf = stream == DOCKER_STREAM_STDOUT   ? c->out
              : stream == DOCKER_STREAM_STDERR ? c->err
                                               : c->sys;
  size_t *n = stream == DOCKER_STREAM_STDOUT   ? &c->out_n
              : stream == DOCKER_STREAM_STDERR ? &c->err_n
                                               : &c->sys_n;
  memcpy(buf + *n, bytes, length);
  *n += length;
}

static size_t frame(unsigned char *out, int stream, const char *payload) {
  size_t n = strlen(payload);
  unsigned char h[8] = {(unsigned char)stream,
                        0,
                        0,
                        0,
                        (unsigned char)(n >> 24),
                        (unsigned char)(n >> 16),
                        (unsigned char)(n >> 8),
                        (unsigned char)n};
  memcpy(out, h, 8);
  memcpy(out + 8, payload, n);
  return n + 8;
}

static void test_demux_any_split(void **state) {
  unsigned char wire[256];
  size_t n = 0;
  n += frame(wire + n, 1, "out-1 ");
  n += frame(wire + n, 2, "err-1");
  n += frame(wire + n, 1, ""); /* empty frames happen */
  n += frame(wire + n, 1, "out-2");
  n += frame(wire + n, 3, "engine says no");
  /* Every way of cutting the stream in two gives the same result. */
  for (size_t cut = 0; cut <= n; cut++) {
    struct docker_demux d = {0};
    struct collected c = {0};
    assert_int_equal(docker_demux_feed(&d, wire, cut, collect, &c), 0);
    assert_int_equal(docker_demux_feed(&d, wire + cut, n - cut, collect, &c), 0);
    assert_true(docker_demux_complete(&d));
    assert_int_equal(c.out_n, 11);
    assert_memory_equal(c.out, "out-1 out-2", 11);
    assert_int_equal(c.err_n, 5);
    assert_int_equal(c.sys_n, 14);
  }
  /* Byte by byte. */
  struct docker_demux d = {0};
  struct collected c = {0};
  for (size_t i = 0; i < n; i++)
    assert_int_equal(docker_demux_feed(&d, wire + i, 1, collect, &c), 0);
  assert_memory_equal(c.out, "out-1 out-2", 11);
}

static void test_demux_refuses_garbage(void **state) {
  struct docker_demux d = {0};
  struct collected c = {0};
  const unsigned char raw[] = "hello, this is not multiplexed";
  assert_int_equal(docker_demux_feed(&d, raw, sizeof(raw) - 1, collect, &c), -1);
  struct docker_demux d2 = {0};
  const unsigned char bad_pad[8] = {1, 0, 1, 0, 0, 0, 0, 1};
  assert_int_equal(docker_demux_feed(&d2, bad_pad, 8, collect, &c), -1);
  struct docker_demux d3 = {0};
  const unsigned char half[5] = {1, 0, 0, 0, 0};
  assert_int_equal(docker_demux_feed(&d3, half, 5, collect, &c), 0);
  assert_false(docker_demux_complete(&d3));
}

/* ---- captures and the trailer -------------------------------------------------------------- */

static void test_capture_bound(void **state) {
  struct docker_capture c;
  docker_capture_init(&c, 10);
  docker_capture_append(&c, (const unsigned char *)"12345", 5);
  docker_capture_append(&c, (const unsigned char *)"67890abc", 8);
  assert_true(c.truncated);
  assert_int_equal(c.total, 13);
  size_t n = 0;
  unsigned char *data = docker_capture_take(&c, &n);
  assert_int_equal(n, 10);
  assert_string_equal((char *)data, "1234567890");
  free(data);
  docker_capture_init(&c, 10);
  data = docker_capture_take(&c, &n);
  assert_non_null(data);
  assert_int_equal(n, 0);
  free(data);
}

static void feed_text(struct docker_tail *t, const char *text, size_t n, size_t step) {
  for (size_t i = 0; i < n; i += step)
    docker_tail_feed(t, (const unsigned char *)text + i, n - i < step ? n - i : step);
}

static void expect_tail(const char *stream, size_t length, size_t step, const char *want_text,
                        size_t want_length, enum docker_status_kind kind, int value) {
  struct docker_capture c;
  docker_capture_init(&c, 1 << 20);
  struct docker_tail t = {.capture = &c};
  feed_text(&t, stream, length, step);
  struct docker_status s;
  docker_tail_finish(&t, &s);
  assert_int_equal(s.kind, kind);
  assert_int_equal(s.value, value);
  assert_int_equal(c.length, want_length);
  assert_memory_equal(c.data ? (char *)c.data : "", want_text, want_length);
  assert_int_equal(c.total, want_length);
  docker_capture_free(&c);
}

#define MAGIC DOCKER_TRAILER_MAGIC

static void test_trailer(void **state) {
  static const char exit7[] = "some error text\n" MAGIC "exit:7\n";
  static const char signal15[] = MAGIC "signal:15\n";
  static const char timeout[] = "partial" MAGIC "timeout:9\n";
  static const char none[] = "no trailer here\n";
  static const char fake[] = "x" MAGIC "exit:3\ny"; /* not at the end: kept as text */
  static const char junk[] = "x" MAGIC "exit:\n";   /* malformed: kept as text */
  static const char two[] = MAGIC "exit:1\n" MAGIC "exit:2\n";
  static const char execfail[] =
      "cordon: nosuchcmd: No such file or directory\n" MAGIC "execfail:127\n";
  for (size_t step = 1; step <= 70; step += 3) {
    expect_tail(exit7, sizeof(exit7) - 1, step, "some error text\n", 16, DOCKER_STATUS_EXIT, 7);
    expect_tail(signal15, sizeof(signal15) - 1, step, "", 0, DOCKER_STATUS_SIGNAL, 15);
    expect_tail(timeout, sizeof(timeout) - 1, step, "partial", 7, DOCKER_STATUS_TIMEOUT, 9);
    expect_tail(none, sizeof(none) - 1, step, none, sizeof(none) - 1, DOCKER_STATUS_NONE, 0);
    expect_tail(two, sizeof(two) - 1, step, MAGIC "exit:1\n", sizeof(MAGIC "exit:1\n") - 1,
                DOCKER_STATUS_EXIT, 2);
    expect_tail(execfail, sizeof(execfail) - 1, step,
                "cordon: nosuchcmd: No such file or directory\n", 45, DOCKER_STATUS_EXEC_FAILED,
                127);
  }
  struct docker_capture c;
  docker_capture_init(&c, 1 << 20);
  struct docker_tail t = {.capture = &c};
  feed_text(&t, fake, sizeof(fake) - 1, 4);
  struct docker_status s;
  docker_tail_finish(&t, &s);
  assert_int_equal(s.kind, DOCKER_STATUS_NONE);
  assert_int_equal(c.length, sizeof(fake) - 1);
  docker_capture_free(&c);
  docker_capture_init(&c, 1 << 20);
  t = (struct docker_tail){.capture = &c};
  feed_text(&t, junk, sizeof(junk) - 1, 100);
  docker_tail_finish(&t, &s);
  assert_int_equal(s.kind, DOCKER_STATUS_NONE);
  assert_int_equal(c.length, sizeof(junk) - 1);
  docker_capture_free(&c);
}

static void test_trailer_with_truncation(void **state) {
  /* 1 MB of stderr under a 1000-byte bound, then the trailer: the trailer is not counted. */
  struct docker_capture c;
  docker_capture_init(&c, 1000);
  struct docker_tail t = {.capture = &c};
  char *block = malloc(4096);
  memset(block, 'e', 4096);
  for (int i = 0; i < 256; i++)
    docker_tail_feed(&t, (unsigned char *)block, 4096);
  static const char tr[] = MAGIC "exit:0\n";
  docker_tail_feed(&t, (const unsigned char *)tr, sizeof(tr) - 1);
  struct docker_status s;
  docker_tail_finish(&t, &s);
  assert_int_equal(s.kind, DOCKER_STATUS_EXIT);
  assert_int_equal(c.total, 256 * 4096);
  assert_true(c.truncated);
  assert_int_equal(c.length, 1000);
  docker_capture_free(&c);
  free(block);
  struct docker_status st = {DOCKER_STATUS_SIGNAL, 15};
  assert_int_equal(docker_status_exit_code(&st), 143);
  st = (struct docker_status){DOCKER_STATUS_TIMEOUT, 9};
  assert_int_equal(docker_status_exit_code(&st), 137);
  st = (struct docker_status){DOCKER_STATUS_EXEC_FAILED, 127};
  assert_int_equal(docker_status_exit_code(&st), 127);
}

/* ---- DOCKER_HOST -------------------------------------------------------------------------- */

static void test_docker_host(void **state) {
  char *path = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(docker_host_socket(NULL, &path, &err), 0);
  assert_string_equal(path, DOCKER_DEFAULT_SOCKET);
  free(path);
  assert_int_equal(docker_host_socket("unix:///run/x/docker.sock", &path, &err), 0);
  assert_string_equal(path, "/run/x/docker.sock");
  free(path);
  assert_true(docker_host_socket("tcp://10.0.0.1:2375", &path, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_UNAVAILABLE);
  assert_non_null(strstr(err->message, "tcp://10.0.0.1:2375"));
  cordon_error_free(err);
  err = NULL;
  assert_true(docker_host_socket("unix://relative.sock", &path, &err) < 0);
  cordon_error_free(err);
}

/* ---- configurations ------------------------------------------------------------------------ */

static void test_exec_config(void **state) {
  const char *argv[] = {"sh", "-c", "echo hi", NULL};
  const char *env[] = {"PATH=/bin", "HOME=/workspace", "A=b=c", NULL};
  struct docker_exec_spec spec = {
      .argv = argv, .env = env, .cwd = "/workspace/sub", .timeout = 1.5, .token = "t0k"};
  json_t *config = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(docker_exec_config(&spec, &config, &err), 0);
  char *text = json_dumps(config, JSON_COMPACT);
  assert_string_equal(
      text, "{\"AttachStdin\":false,\"AttachStdout\":true,\"AttachStderr\":true,\"Tty\":false,"
            "\"Cmd\":[\"/.cordon-init\",\"exec\",\"--token\",\"t0k\",\"--timeout-ms\",\"1500\","
            "\"--cwd\",\"/workspace/sub\",\"--keep\",\"PATH\",\"--keep\",\"HOME\",\"--keep\","
            "\"A\",\"--\",\"sh\",\"-c\",\"echo hi\"],\"Env\":[\"PATH=/bin\",\"HOME=/workspace\","
            "\"A=b=c\"],\"WorkingDir\":\"/\"}");
  free(text);
  json_decref(config);
  const char *bad[] = {"printf", "\xff\xfe", NULL};
  spec.argv = bad;
  assert_true(docker_exec_config(&spec, &config, &err) < 0);
  assert_non_null(strstr(err->message, "UTF-8"));
  cordon_error_free(err);
}

static json_t *mount_with_target(json_t *config, const char *target) {
  size_t i;
  json_t *m;
  json_array_foreach(json_object_get(json_object_get(config, "HostConfig"), "Mounts"), i, m) {
    if (!strcmp(json_string_value(json_object_get(m, "Target")), target))
      return m;
  }
  return NULL;
}

static void test_container_config(void **state) {
  struct docker_path ro[] = {{"src/generated", true}};
  struct docker_path hidden[] = {{"secrets", true}, {".env", false}};
  struct docker_paths paths = {ro, 1, hidden, 2};
  struct cordon_limits limits = {.memory_bytes = 64u << 20, .pids = 50, .cpus = 0.5, .nofile = 64};
  struct docker_engine_features features = {true, false, true, true, true};
  struct confine_path grant = {.path = "/opt/tools", .source = "/srv/tools"};
  struct docker_container_spec spec = {
      .image = "cordon-test:busybox",
      .session_id = "abc123",
      .project_state_dir = "/p/.cordon",
      .creator = "boot:1:2",
      .ephemeral = true,
      .workspace = "/p/.cordon/sessions/abc123/workspace",
      .root = "/workspace",
      .init_path = "/usr/libexec/cordon/cordon-docker-init",
      .agent_dir = "/p/.cordon/sessions/abc123/agent",
      .empty_file = "/p/.cordon/sessions/abc123/docker-empty",
      .user = "0:0",
      .network = "none",
      .allow_ro = &grant,
      .n_allow_ro = 1,
      .hidden_grant_dirs = (const char *const[]){"/opt/tools/proj/.cordon", NULL},
      .paths = &paths,
      .limits = &limits,
      .features = &features,
  };
  json_t *config = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(docker_container_config(&spec, &config, &err), 0);
  json_t *host = json_object_get(config, "HostConfig");
  assert_string_equal(json_string_value(json_object_get(host, "NetworkMode")), "none");
  assert_string_equal(json_string_value(json_array_get(json_object_get(host, "CapDrop"), 0)),
                      "ALL");
  assert_int_equal(json_integer_value(json_object_get(host, "Memory")), 64 << 20);
  assert_null(json_object_get(host, "MemorySwap")); /* no swap accounting on this engine */
  assert_int_equal(json_integer_value(json_object_get(host, "PidsLimit")), 50);
  assert_int_equal(json_integer_value(json_object_get(host, "NanoCpus")), 500000000);
  assert_true(json_is_true(json_object_get(config, "NetworkDisabled")));
  assert_string_equal(
      json_string_value(json_object_get(json_object_get(config, "Labels"), DOCKER_LABEL_SESSION)),
      "abc123");
  json_t *m = mount_with_target(config, "/workspace");
  assert_non_null(m);
  assert_false(json_is_true(json_object_get(m, "ReadOnly")));
  m = mount_with_target(config, "/workspace/src/generated");
  assert_string_equal(json_string_value(json_object_get(m, "Source")),
                      "/p/.cordon/sessions/abc123/workspace/src/generated");
  assert_true(json_is_true(json_object_get(m, "ReadOnly")));
  /* The directory above a protected path is pinned: bound onto itself, read-write, before the
   * read-only bind under it. */
  m = mount_with_target(config, "/workspace/src");
  assert_non_null(m);
  assert_string_equal(json_string_value(json_object_get(m, "Source")),
                      "/p/.cordon/sessions/abc123/workspace/src");
  assert_false(json_is_true(json_object_get(m, "ReadOnly")));
  size_t index_of_parent = 0, index_of_child = 0, i;
  json_t *each;
  json_array_foreach(json_object_get(host, "Mounts"), i, each) {
    const char *target = json_string_value(json_object_get(each, "Target"));
    if (!strcmp(target, "/workspace/src"))
      index_of_parent = i;
    if (!strcmp(target, "/workspace/src/generated"))
      index_of_child = i;
  }
  assert_true(index_of_parent < index_of_child);
  m = mount_with_target(config, "/workspace/secrets");
  assert_string_equal(json_string_value(json_object_get(m, "Type")), "tmpfs");
  m = mount_with_target(config, "/workspace/.env");
  assert_string_equal(json_string_value(json_object_get(m, "Source")), spec.empty_file);
  m = mount_with_target(config, "/opt/tools");
  assert_string_equal(json_string_value(json_object_get(m, "Source")), "/srv/tools");
  /* cordon's state inside a grant: an empty read-only tmpfs over it. */
  m = mount_with_target(config, "/opt/tools/proj/.cordon");
  assert_string_equal(json_string_value(json_object_get(m, "Type")), "tmpfs");
  assert_true(json_is_true(json_object_get(m, "ReadOnly")));
  m = mount_with_target(config, "/.cordon-init");
  assert_true(json_is_true(json_object_get(m, "ReadOnly")));
  m = mount_with_target(config, DOCKER_AGENT_TARGET);
  assert_string_equal(json_string_value(json_object_get(m, "Source")), spec.agent_dir);
  /* /tmp and /dev/shm are capped: by default at the memory limit, else at --tmp-size. */
  assert_string_equal(json_string_value(json_object_get(json_object_get(host, "Tmpfs"), "/tmp")),
                      "rw,exec,nosuid,nodev,size=67108864,mode=1777");
  assert_int_equal(json_integer_value(json_object_get(host, "ShmSize")), 64 << 20);
  /* A session given its own workspace keeps a writable root. */
  assert_null(json_object_get(host, "ReadonlyRootfs"));
  json_decref(config);
  limits.tmp_bytes = 8u << 20;
  assert_int_equal(docker_container_config(&spec, &config, &err), 0);
  host = json_object_get(config, "HostConfig");
  assert_int_equal(json_integer_value(json_object_get(host, "ShmSize")), 8 << 20);
  assert_string_equal(json_string_value(json_object_get(json_object_get(host, "Tmpfs"), "/tmp")),
                      "rw,exec,nosuid,nodev,size=8388608,mode=1777");
  json_decref(config);
  limits.tmp_bytes = 0;

  /* A session resumed from a snapshot (race candidates and judges): a read-only root file
   * system, /tmp its capped tmpfs as for every session. */
  spec.read_only_root = true;
  assert_int_equal(docker_container_config(&spec, &config, &err), 0);
  host = json_object_get(config, "HostConfig");
  assert_true(json_is_true(json_object_get(host, "ReadonlyRootfs")));
  assert_non_null(json_object_get(json_object_get(host, "Tmpfs"), "/tmp"));
  assert_null(mount_with_target(config, "/tmp"));
  json_decref(config);
  spec.read_only_root = false;

  /* A limit the engine cannot enforce is refused by name, never dropped. */
  features.pids_limit = false;
  assert_true(docker_container_config(&spec, &config, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_UNAVAILABLE);
  assert_non_null(strstr(err->message, "pids limit"));
  cordon_error_free(err);
}

static void test_network_mode(void **state) {
  const char *mode = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(docker_network_mode(CORDON_EGRESS_NONE, NULL, &mode, &err), 0);
  assert_string_equal(mode, "none");
  assert_int_equal(docker_network_mode(CORDON_EGRESS_LOOPBACK, NULL, &mode, &err), 0);
  assert_string_equal(mode, "none");
  assert_int_equal(docker_network_mode(CORDON_EGRESS_OPEN, NULL, &mode, &err), 0);
  assert_string_equal(mode, "bridge");
  assert_int_equal(docker_network_mode(CORDON_EGRESS_OPEN, "mynet", &mode, &err), 0);
  assert_string_equal(mode, "mynet");
  assert_int_equal(docker_network_mode(CORDON_EGRESS_RESTRICTED, NULL, &mode, &err), 0);
  assert_string_equal(mode, "none"); /* lo only; the proxy is outside (session.c) */
  assert_true(docker_network_mode((enum cordon_egress)99, NULL, &mode, &err) < 0);
  assert_non_null(strstr(err->message, "not implemented"));
  cordon_error_free(err);
}

/* The command's identity: the workspace owner (1000 once cordon gave it its own workspace); root
 * only on a userns-remapped engine. The identity files name ns's users. */
static void test_command_identity(void **state) {
  (void)state;
  struct docker_engine_features plain = {0}, remapped = {.userns = true};
  struct cordon_error *err = NULL;
  uid_t uid = 1;
  gid_t gid = 1;
  assert_int_equal(docker_command_identity(1000, 1000, false, &plain, &uid, &gid, &err), 0);
  assert_int_equal(uid, 1000);
  assert_int_equal(gid, 1000);
  assert_int_equal(docker_command_identity(4242, 4343, false, &plain, &uid, &gid, &err), 0);
  assert_int_equal(uid, 4242);
  assert_int_equal(gid, 4343);
  assert_true(docker_command_identity(1000, 1000, true, &plain, &uid, &gid, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_UNSUPPORTED);
  assert_non_null(strstr(err->message, "userns-remap"));
  cordon_error_free(err);
  err = NULL;
  assert_int_equal(docker_command_identity(1000, 1000, true, &remapped, &uid, &gid, &err), 0);
  assert_int_equal(uid, 0);
  assert_int_equal(gid, 0);
  char *passwd = NULL, *group = NULL;
  assert_int_equal(docker_identity_files(&passwd, &group, &err), 0);
  assert_non_null(strstr(passwd, "\ncordon:x:1000:1000:cordon sandbox:/home/sandbox:/bin/sh\n"));
  assert_non_null(strstr(group, "\ncordon:x:1000:\n"));
  free(passwd);
  free(group);
}

/* ---- path policy ---------------------------------------------------------------------------- */

static void write_file(const char *dir, const char *name) {
  char path[4200];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("x", f);
  fclose(f);
}

static void test_paths(void **state) {
  char tmpl[] = "/tmp/cordon-test-docker.XXXXXX";
  char *ws = mkdtemp(tmpl);
  assert_non_null(ws);
  char real[4096];
  assert_non_null(realpath(ws, real));
  char p[4200];
  const char *dirs[] = {"src", "src/gen", "secret", ".cordon", NULL};
  for (size_t i = 0; dirs[i]; i++) {
    snprintf(p, sizeof(p), "%s/%s", real, dirs[i]);
    assert_int_equal(mkdir(p, 0755), 0);
  }
  write_file(real, "key.pem");
  snprintf(p, sizeof(p), "%s/out", real);
  assert_int_equal(symlink("/etc", p), 0);
  snprintf(p, sizeof(p), "%s/alias", real);
  assert_int_equal(symlink("src/gen", p), 0);

  struct docker_paths paths;
  struct cordon_error *err = NULL;
  const char *ro[] = {"./src//gen/", NULL};
  const char *hidden[] = {"secret", "key.pem", NULL};
  assert_int_equal(docker_paths_resolve(real, ro, hidden, NULL, &paths, &err), 0);
  assert_int_equal(paths.n_read_only, 1);
  assert_string_equal(paths.read_only[0].relative, "src/gen");
  assert_true(paths.read_only[0].directory);
  assert_int_equal(paths.n_hidden, 3); /* + .cordon */
  assert_false(paths.hidden[1].directory);
  assert_string_equal(paths.hidden[2].relative, ".cordon");
  docker_paths_clear(&paths);

  /* A symlink inside resolves to its target; one that leaves is refused. */
  const char *alias[] = {"alias", NULL};
  assert_int_equal(docker_paths_resolve(real, alias, NULL, NULL, &paths, &err), 0);
  assert_string_equal(paths.read_only[0].relative, "src/gen");
  docker_paths_clear(&paths);
  const char *escape[] = {"out", NULL};
  assert_true(docker_paths_resolve(real, escape, NULL, NULL, &paths, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  const char *dotdot[] = {"../x", NULL};
  assert_true(docker_paths_resolve(real, NULL, dotdot, NULL, &paths, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  const char *missing[] = {"nope", NULL};
  assert_true(docker_paths_resolve(real, missing, NULL, NULL, &paths, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  /* Overlaps, also through two names of one directory; read-only under hidden. */
  const char *overlap[] = {"src", "src/gen", NULL};
  assert_true(docker_paths_resolve(real, overlap, NULL, NULL, &paths, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  const char *two_names[] = {"alias", "src/gen", NULL};
  assert_true(docker_paths_resolve(real, two_names, NULL, NULL, &paths, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  const char *hide_src[] = {"src", NULL};
  assert_true(docker_paths_resolve(real, ro, hide_src, NULL, &paths, &err) < 0);
  assert_non_null(strstr(err->message, "under hidden"));
  cordon_error_free(err);
  err = NULL;
  const char *under_state[] = {".cordon", NULL};
  assert_true(docker_paths_resolve(real, under_state, NULL, NULL, &paths, &err) < 0);
  cordon_error_free(err);
  err = NULL;

  /* The always-hidden set (another project's .cordon/ deep inside, the policy's own hidden
   * directory named again, a directory elsewhere): hidden once each, at any depth. */
  snprintf(p, sizeof(p), "%s/src/gen/.cordon", real);
  assert_int_equal(mkdir(p, 0700), 0);
  char secret[4200];
  snprintf(secret, sizeof(secret), "%s/secret", real);
  const char *private_dirs[] = {"/nonexistent-cordon-state", p, secret, NULL};
  const char *hide_secret[] = {"secret", NULL};
  assert_int_equal(docker_paths_resolve(real, NULL, hide_secret, private_dirs, &paths, &err), 0);
  assert_int_equal(paths.n_hidden, 3);
  assert_string_equal(paths.hidden[0].relative, "secret");
  assert_string_equal(paths.hidden[1].relative, ".cordon");
  assert_string_equal(paths.hidden[2].relative, "src/gen/.cordon");
  assert_true(paths.hidden[2].directory);
  docker_paths_clear(&paths);
  /* A read-only path may not expose one. */
  const char *ro_state[] = {"src/gen/.cordon", NULL};
  assert_true(docker_paths_resolve(real, ro_state, NULL, private_dirs, &paths, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  /* A hidden file with another name (a hard link) is refused, naming both, unless every name
   * is hidden. */
  char target[4200];
  snprintf(p, sizeof(p), "%s/key.pem", real);
  snprintf(target, sizeof(target), "%s/src/key-copy", real);
  assert_int_equal(link(p, target), 0);
  assert_true(docker_paths_resolve(real, NULL, hidden, NULL, &paths, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_DENIED);
  assert_non_null(strstr(err->message, "key.pem"));
  assert_non_null(strstr(err->message, "src/key-copy"));
  cordon_error_free(err);
  err = NULL;
  const char *every_name[] = {"key.pem", "src/key-copy", NULL};
  assert_int_equal(docker_paths_resolve(real, NULL, every_name, NULL, &paths, &err), 0);
  docker_paths_clear(&paths);
  fs_remove_tree(real, NULL);
}

/* ---- the exec agent's protocol -------------------------------------------------------------- */

/* The agent's use of the shared format (tested once in tests/unit/test-exec-wire.c): its magic
 * numbers, the timeout it carries, and the replies only it sends. */
static void test_agent_request(void **state) {
  const char *argv[] = {"sh", "-c", "echo hi", NULL};
  const char *envp[] = {"PATH=/bin", "HOME=/workspace", NULL};
  unsigned char *buf = NULL;
  size_t len = 0;
  struct cordon_error *err = NULL;
  assert_int_equal(
      exec_wire_encode(&docker_agent_protocol, "/workspace", argv, envp, 1500, &buf, &len, &err),
      0);
  assert_memory_equal(buf, "CDA1", 4); /* docs/formats.md */
  struct exec_wire_header h;
  memcpy(&h, buf, sizeof(h));
  struct exec_wire_request r;
  assert_int_equal(exec_wire_decode(&docker_agent_protocol, &h, buf + sizeof(h), &r, &err), 0);
  assert_string_equal(r.argv[2], "echo hi");
  assert_int_equal(r.timeout_ms, 1500);
  exec_wire_request_clear(&r);
  /* Another magic (another protocol's request) is refused. */
  h.magic = 0x314e4443u; /* "CDN1", the ns holder's */
  assert_true(exec_wire_decode(&docker_agent_protocol, &h, buf + sizeof(h), &r, &err) < 0);
  cordon_error_free(err);
  free(buf);
}

static int parse_agent_reply(uint32_t magic, uint32_t type, int32_t a, int32_t b) {
  struct exec_wire_reply in = {.magic = magic, .type = type, .a = a, .b = b}, out;
  struct cordon_error *err = NULL;
  int r =
      exec_wire_reply_parse(&docker_agent_protocol, (unsigned char *)&in, sizeof(in), &out, &err);
  cordon_error_free(err);
  return r;
}

static void test_agent_replies(void **state) {
  const uint32_t m = DOCKER_AGENT_REPLY_MAGIC;
  assert_memory_equal(&m, "CDR1", 4);
  assert_int_equal(parse_agent_reply(m, EXEC_WIRE_TIMED_OUT, 0, 0), 0);
  assert_int_equal(parse_agent_reply(m, EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_NO_SECCOMP, 0), 0);
  assert_int_equal(parse_agent_reply(m, EXEC_WIRE_EXITED, 137, 9), 0);
  assert_true(parse_agent_reply(m, EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_NO_SECCOMP + 1, 0) < 0);
  /* A request's magic where a reply's belongs. */
  assert_true(parse_agent_reply(DOCKER_AGENT_REQUEST_MAGIC, EXEC_WIRE_EXITED, 0, 0) < 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_http_head),
      cmocka_unit_test(test_dechunk),
      cmocka_unit_test(test_demux_any_split),
      cmocka_unit_test(test_demux_refuses_garbage),
      cmocka_unit_test(test_capture_bound),
      cmocka_unit_test(test_trailer),
      cmocka_unit_test(test_trailer_with_truncation),
      cmocka_unit_test(test_docker_host),
      cmocka_unit_test(test_exec_config),
      cmocka_unit_test(test_container_config),
      cmocka_unit_test(test_network_mode),
      cmocka_unit_test(test_paths),
      cmocka_unit_test(test_agent_request),
      cmocka_unit_test(test_agent_replies),
      cmocka_unit_test(test_command_identity),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
