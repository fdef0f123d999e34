/* Unit tests of the process runner (src/exec/runner.c): capture, bounds, stdin, environment,
 * cwd, exit codes, timeouts, process-tree kill, fd and signal hygiene, custom launchers. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/fs.h"
#include "exec/runner.h"

#define ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})
#define TEST_PATH "PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"

static const char *const test_env[] = {TEST_PATH, NULL};

static void run_ok(const struct exec_spec *spec, struct cordon_exec_result *res) {
  struct cordon_error *err = NULL;
  int r = exec_run(spec, res, &err);
  if (r < 0) {
    fail_msg("exec_run(%s): %s", spec->argv[0], err ? err->message : "(no message)");
  }
  assert_null(err);
}

static struct cordon_exec_result run_argv(const char *const *argv) {
  struct exec_spec spec = {.argv = argv, .envp = test_env};
  struct cordon_exec_result res;
  run_ok(&spec, &res);
  return res;
}

/* Every run must have reaped what it started. */
static void assert_no_children(void) {
  errno = 0;
  assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
  assert_int_equal(errno, ECHILD);
}

/* A unique argument that lets us find a process in /proc. Passed to sleep as an extra
 * (tiny) duration, since GNU sleep sums its arguments. */
static void make_marker(char *buf, size_t size) {
  static int counter;
  int n = __atomic_add_fetch(&counter, 1, __ATOMIC_SEQ_CST);
  snprintf(buf, size, "0.000%d%03d1", (int)getpid(), n); /* a trailing 1: no trailing zeros */
}

static bool process_with_argument_exists(const char *marker) {
  DIR *proc = opendir("/proc");
  assert_non_null(proc);
  bool found = false;
  struct dirent *entry;
  while (!found && (entry = readdir(proc))) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9')
      continue;
    char path[300];
    snprintf(path, sizeof(path), "/proc/%s/cmdline", entry->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    char cmdline[4096];
    ssize_t n = read(fd, cmdline, sizeof(cmdline) - 1);
    close(fd);
    if (n <= 0)
      continue;
    cmdline[n] = '\0';
    for (char *arg = cmdline; arg < cmdline + n; arg += strlen(arg) + 1)
      if (strcmp(arg, marker) == 0)
        found = true;
  }
  closedir(proc);
  return found;
}

/* SIGKILL is delivered asynchronously when only the process group is used: allow a moment. */
static bool process_gone_soon(const char *marker) {
  for (int i = 0; i < 100; i++) {
    if (!process_with_argument_exists(marker))
      return true;
    usleep(10000);
  }
  return false;
}

static void kill_processes_with_argument(const char *marker) {
  /* Best-effort cleanup after a failed assertion so the machine is not littered. */
  char command[256];
  snprintf(command, sizeof(command), "pkill -KILL -f -- ' %s$' 2>/dev/null", marker);
  if (system(command) < 0)
    return;
}

/* No process with the marker is left now (the run killed its cgroup leaf and waited for it to
 * empty: no grace); any that is left is killed before the assertion fails. */
static void assert_gone_now(const char *marker) {
  bool gone = !process_with_argument_exists(marker);
  if (!gone)
    kill_processes_with_argument(marker);
  assert_true(gone);
}

/* Whether the runner can use a per-exec cgroup v2 leaf here (its conditions: a v2 hierarchy, the
 * first it finds, our own cgroup writable, cgroup.kill present): own is then our v2 cgroup ("/..."
 * from the "0::" line); else false with the reason. */
static bool leaf_possible(char *own, size_t own_size, char *reason, size_t size) {
  const char *mount = NULL;
  const char *candidates[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
  for (size_t i = 0; i < 2 && !mount; i++) {
    struct statfs sfs;
    if (statfs(candidates[i], &sfs) == 0 && sfs.f_type == CGROUP2_SUPER_MAGIC)
      mount = candidates[i];
  }
  if (!mount) {
    snprintf(reason, size, "no cgroup v2 hierarchy mounted");
    return false;
  }
  FILE *f = fopen("/proc/self/cgroup", "re");
  if (!f) {
    snprintf(reason, size, "cannot read /proc/self/cgroup");
    return false;
  }
  char line[4096];
  own[0] = '\0';
  while (fgets(line, sizeof(line), f))
    if (strncmp(line, "0::/", 4) == 0) {
      line[strcspn(line, "\n")] = '\0';
      snprintf(own, own_size, "%s", line + 3);
    }
  fclose(f);
  if (!own[0]) {
    snprintf(reason, size, "no cgroup v2 entry in /proc/self/cgroup");
    return false;
  }
  char probe[8192], kill_file[8300];
  snprintf(probe, sizeof(probe), "%s%s/cordon-test-probe-%d", mount,
           strcmp(own, "/") == 0 ? "" : own, (int)getpid());
  if (mkdir(probe, 0755) < 0) {
    snprintf(reason, size, "cannot create a cgroup under %s%s: %s", mount, own, strerror(errno));
    return false;
  }
  snprintf(kill_file, sizeof(kill_file), "%s/cgroup.kill", probe);
  bool has_kill = access(kill_file, F_OK) == 0;
  rmdir(probe);
  if (!has_kill)
    snprintf(reason, size, "cgroup.kill missing (kernel older than 5.14)");
  return has_kill;
}

/* ---- capture ------------------------------------------------------------------------------ */

static void test_echo_stdout(void **state) {
  struct cordon_exec_result res = run_argv(ARGV("echo", "hello", "world"));
  assert_int_equal(res.exit_code, 0);
  assert_int_equal(res.term_signal, 0);
  assert_false(res.timed_out);
  assert_string_equal((char *)res.stdout_data, "hello world\n");
  assert_int_equal(res.stdout_length, 12);
  assert_int_equal(res.stdout_total, 12);
  assert_false(res.stdout_truncated);
  assert_non_null(res.stderr_data);
  assert_string_equal((char *)res.stderr_data, "");
  assert_int_equal(res.stderr_length, 0);
  assert_true(res.duration > 0);
  cordon_exec_result_clear(&res);
  assert_null(res.stdout_data);
  assert_no_children();
}

static void test_stderr_separate(void **state) {
  struct cordon_exec_result res = run_argv(ARGV("sh", "-c", "echo out; echo err >&2; echo out2"));
  assert_int_equal(res.exit_code, 0);
  assert_string_equal((char *)res.stdout_data, "out\nout2\n");
  assert_string_equal((char *)res.stderr_data, "err\n");
  assert_int_equal(res.stderr_total, 4);
  cordon_exec_result_clear(&res);
  assert_no_children();
}

static void test_exit_code(void **state) {
  struct cordon_exec_result res = run_argv(ARGV("sh", "-c", "exit 7"));
  assert_int_equal(res.exit_code, 7);
  assert_int_equal(res.term_signal, 0);
  assert_false(res.timed_out);
  cordon_exec_result_clear(&res);
  assert_no_children();
}

static void test_killed_by_signal(void **state) {
  struct cordon_exec_result res = run_argv(ARGV("sh", "-c", "kill -9 $$"));
  assert_int_equal(res.exit_code, 137);
  assert_int_equal(res.term_signal, 9);
  assert_false(res.timed_out);
  cordon_exec_result_clear(&res);
  assert_no_children();
}

static void test_env_is_final(void **state) {
  const char *const env[] = {TEST_PATH, "FOO=bar baz", "EMPTY=", NULL};
  struct exec_spec spec = {.argv = ARGV("env"), .envp = env};
  struct cordon_exec_result res;
  run_ok(&spec, &res);
  assert_int_equal(res.exit_code, 0);
  assert_string_equal((char *)res.stdout_data, TEST_PATH "\nFOO=bar baz\nEMPTY=\n");
  cordon_exec_result_clear(&res);

  /* NULL is an empty environment; the program is still found on the default PATH. */
  struct exec_spec empty = {.argv = ARGV("env")};
  run_ok(&empty, &res);
  assert_int_equal(res.exit_code, 0);
  assert_string_equal((char *)res.stdout_data, "");
  cordon_exec_result_clear(&res);
  assert_no_children();
}

static void test_path_from_env(void **state) {
  char dir[] = "/tmp/cordon-test-path-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char tool[512];
  snprintf(tool, sizeof(tool), "%s/cordon-test-tool", dir);
  FILE *f = fopen(tool, "we");
  assert_non_null(f);
  fputs("#!/bin/sh\necho from-tool \"$@\"\n", f);
  fclose(f);
  assert_int_equal(chmod(tool, 0755), 0);

  char path_var[600];
  snprintf(path_var, sizeof(path_var), "PATH=/nonexistent:relative:%s:/usr/bin:/bin", dir);
  const char *const env[] = {path_var, NULL};
  struct exec_spec spec = {.argv = ARGV("cordon-test-tool", "x"), .envp = env};
  struct cordon_exec_result res;
  run_ok(&spec, &res);
  assert_int_equal(res.exit_code, 0);
  assert_string_equal((char *)res.stdout_data, "from-tool x\n");
  cordon_exec_result_clear(&res);

  unlink(tool);
  rmdir(dir);
  assert_no_children();
}

static void test_stdin_small(void **state) {
  struct exec_spec spec = {
      .argv = ARGV("cat"), .envp = test_env, .stdin_data = "abc\0def", .stdin_length = 7};
  struct cordon_exec_result res;
  run_ok(&spec, &res);
  assert_int_equal(res.exit_code, 0);
  assert_int_equal(res.stdout_length, 7);
  assert_memory_equal(res.stdout_data, "abc\0def", 7);
  cordon_exec_result_clear(&res);
  assert_no_children();
}

static void test_stdin_null_and_empty(void **state) {
  /* NULL stdin is /dev/null: cat ends at once. */
  struct exec_spec spec = {
      .argv = ARGV("sh", "-c", "cat; readlink /proc/self/fd/0"), .envp = test_env, .timeout = 10};
  struct cordon_exec_result res;
  run_ok(&spec, &res);
  assert_false(res.timed_out);
  assert_string_equal((char *)res.stdout_data, "/dev/null\n");
  cordon_exec_result_clear(&res);

  /* Non-NULL but empty: an empty pipe. */
  struct exec_spec empty = {
      .argv = ARGV("cat"), .envp = test_env, .stdin_data = "", .stdin_length = 0, .timeout = 10};
  run_ok(&empty, &res);
  assert_false(res.timed_out);
  assert_int_equal(res.exit_code, 0);
  assert_string_equal((char *)res.stdout_data, "");
  cordon_exec_result_clear(&res);
  assert_no_children();
}

static void test_stdin_large_no_deadlock(void **state) {
  size_t size = 1 << 20;
  unsigned char *input = malloc(size);
  assert_non_null(input);
  for (size_t i = 0; i < size; i++)
    input[i] = (unsigned char)(i * 131 + (i >> 9));
  struct exec_spec spec = {.argv = ARGV("cat"),
                           .envp = test_env,
                           .stdin_data = input,
                           .stdin_length = size,
                           .timeout = 30};
  struct cordon_exec_result res;
  run_ok(&spec, &res);
  assert_false(res.timed_out);
  assert_int_equal(res.exit_code, 0);
  assert_int_equal(res.stdout_length, size);
  assert_memory_equal(res.stdout_data, input, size);
  cordon_exec_result_clear(&res);

  /* Both directions and both streams at once. */
  spec.argv = ARGV("sh", "-c", "tee /dev/stderr");
  run_ok(&spec, &res);
  assert_int_equal(res.exit_code, 0);
  assert_int_equal(res.stdout_length, size);
  assert_int_equal(res.stderr_length, size);
  assert_memory_equal(res.stdout_data, input, size);
  assert_memory_equal(res.stderr_data, input, size);
  cordon_exec_result_clear(&res);
  free(input);
  assert_no_children();
}

static void test_stdin_not_read_epipe(void **state) {
  /* The command ignores or stops reading its stdin: EPIPE ends the input, SIGPIPE must not
   * kill us (this test process would die of it). */
  size_t size = 8 << 20;
  unsigned char *input = calloc(1, size);
  assert_non_null(input);
  struct exec_spec spec = {.argv = ARGV("head", "-c", "10"),
                           .envp = test_env,
                           .stdin_data = input,
                           .stdin_length = size,
                           .timeout = 30};
  struct cordon_exec_result res;
  run_ok(&spec, &res);
  assert_int_equal(res.exit_code, 0);
  assert_int_equal(res.stdout_length, 10);
  cordon_exec_result_clear(&res);

  spec.argv = ARGV("true");
  run_ok(&spec, &res);
  assert_int_equal(res.exit_code, 0);
  assert_false(res.timed_out);
  cordon_exec_result_clear(&res);

  /* No SIGPIPE left pending in this thread either. */
  sigset_t pending;
  assert_int_equal(sigpending(&pending), 0);
  assert_int_equal(sigismember(&pending, SIGPIPE), 0);
  free(input);
  assert_no_children();
}

static void test_output_bounded(void **state) {
  struct exec_spec spec = {.argv = ARGV("head", "-c", "20000000", "/dev/zero"),
                           .envp = test_env,
                           .max_output = 1 << 20,
                           .timeout = 60};
  struct cordon_exec_result res;
  run_ok(&spec, &res);
  assert_int_equal(res.exit_code, 0);
  assert_int_equal(res.stdout_length, 1 << 20);
  assert_true(res.stdout_truncated);
  assert_int_equal(res.stdout_total, 20000000);
  assert_int_equal(res.stdout_data[res.stdout_length], 0);
  assert_false(res.stderr_truncated);
  cordon_exec_result_clear(&res);

  /* Exactly at the bound is not truncated; one byte more is. Each stream has its own. */
  spec.argv = ARGV("sh", "-c", "head -c 1024 /dev/zero; head -c 1025 /dev/zero >&2");
  spec.max_output = 1024;
  run_ok(&spec, &res);
  assert_int_equal(res.stdout_length, 1024);
  assert_false(res.stdout_truncated);
  assert_int_equal(res.stdout_total, 1024);
  assert_int_equal(res.stderr_length, 1024);
  assert_true(res.stderr_truncated);
  assert_int_equal(res.stderr_total, 1025);
  cordon_exec_result_clear(&res);
  assert_no_children();
}

/* ---- exec failures ------------------------------------------------------------------------ */

static void test_not_found(void **state) {
  struct cordon_exec_result res = run_argv(ARGV("cordon-no-such-program-xyz", "arg"));
  assert_int_equal(res.exit_code, 127);
  assert_int_equal(res.term_signal, 0);
  assert_string_equal((char *)res.stderr_data,
                      "cordon: cordon-no-such-program-xyz: No such file or directory\n");
  assert_string_equal((char *)res.stdout_data, "");
  cordon_exec_result_clear(&res);

  res = run_argv(ARGV("/nonexistent/cordon-prog"));
  assert_int_equal(res.exit_code, 127);
  assert_non_null(strstr((char *)res.stderr_data, "cordon: /nonexistent/cordon-prog: "));
  cordon_exec_result_clear(&res);
  assert_no_children();
}

static void test_not_executable(void **state) {
  char dir[] = "/tmp/cordon-test-noexec-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char script[512];
  snprintf(script, sizeof(script), "%s/script", dir);
  FILE *f = fopen(script, "we");
  assert_non_null(f);
  fputs("#!/bin/sh\necho should-not-run\n", f);
  fclose(f);
  assert_int_equal(chmod(script, 0644), 0);

  struct cordon_exec_result res = run_argv(ARGV(script));
  assert_int_equal(res.exit_code, 126);
  assert_non_null(strstr((char *)res.stderr_data, "Permission denied"));
  assert_string_equal((char *)res.stdout_data, "");
  cordon_exec_result_clear(&res);

  /* Found on PATH but not executable. */
  char path_var[600];
  snprintf(path_var, sizeof(path_var), "PATH=%s", dir);
  const char *const env[] = {path_var, NULL};
  struct exec_spec spec = {.argv = ARGV("script"), .envp = env};
  run_ok(&spec, &res);
  assert_int_equal(res.exit_code, 126);
  assert_string_equal((char *)res.stderr_data, "cordon: script: Permission denied\n");
  cordon_exec_result_clear(&res);

  /* A directory cannot be executed either; a file without a known format neither. */
  res = run_argv(ARGV(dir));
  assert_int_equal(res.exit_code, 126);
  cordon_exec_result_clear(&res);
  f = fopen(script, "we");
  assert_non_null(f);
  fputs("\177ELF not really", f);
  fclose(f);
  assert_int_equal(chmod(script, 0755), 0);
  res = run_argv(ARGV(script));
  assert_int_equal(res.exit_code, 126);
  assert_non_null(strstr((char *)res.stderr_data, "Exec format error"));
  cordon_exec_result_clear(&res);

  unlink(script);
  rmdir(dir);
  assert_no_children();
}

static void test_find_program(void **state) {
  const char *const env[] = {"PATH=/nonexistent::/bin", NULL};
  char *p = exec_find_program("sh", env);
  assert_non_null(p);
  assert_string_equal(p, "/bin/sh");
  free(p);
  p = exec_find_program("./relative/thing", env);
  assert_string_equal(p, "./relative/thing");
  free(p);
  errno = 0;
  assert_null(exec_find_program("cordon-no-such-program-xyz", env));
  assert_int_equal(errno, ENOENT);
  errno = 0;
  assert_null(exec_find_program("", env));
  assert_int_equal(errno, ENOENT);
  /* /etc/passwd exists but is not executable. */
  const char *const etc[] = {"PATH=/etc", NULL};
  errno = 0;
  assert_null(exec_find_program("passwd", etc));
  assert_int_equal(errno, EACCES);
  /* Without PATH: the default one. */
  p = exec_find_program("sh", NULL);
  assert_non_null(p);
  assert_true(p[0] == '/');
  free(p);
}

/* ---- cwd, fds, signals -------------------------------------------------------------------- */

static void test_cwd(void **state) {
  char dir[] = "/tmp/cordon-test-cwd-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char *real = realpath(dir, NULL);
  assert_non_null(real);
  struct exec_spec spec = {.argv = ARGV("pwd"), .envp = test_env, .cwd = dir};
  struct cordon_exec_result res;
  run_ok(&spec, &res);
  char expected[4200];
  snprintf(expected, sizeof(expected), "%s\n", real);
  assert_string_equal((char *)res.stdout_data, expected);
  cordon_exec_result_clear(&res);

  /* A relative program name with a slash resolves in the command's cwd. */
  char script[512];
  snprintf(script, sizeof(script), "%s/here.sh", dir);
  FILE *f = fopen(script, "we");
  assert_non_null(f);
  fputs("#!/bin/sh\necho here\n", f);
  fclose(f);
  assert_int_equal(chmod(script, 0755), 0);
  spec.argv = ARGV("./here.sh");
  run_ok(&spec, &res);
  assert_int_equal(res.exit_code, 0);
  assert_string_equal((char *)res.stdout_data, "here\n");
  cordon_exec_result_clear(&res);
  unlink(script);

  /* A missing cwd is a failure of the run, named in the error, and leaves no zombie. */
  rmdir(dir);
  struct cordon_error *err = NULL;
  spec.argv = ARGV("pwd");
  assert_true(exec_run(&spec, &res, &err) < 0);
  assert_non_null(err);
  assert_non_null(strstr(err->message, dir));
  assert_int_equal(err->errnum, ENOENT);
  assert_null(res.stdout_data);
  cordon_error_free(err);
  free(real);
  assert_no_children();
}

static void test_only_stdio_fds(void **state) {
  /* A leaked, inheritable fd in the caller must not reach the command. */
  int leak = open("/dev/null", O_RDONLY);
  assert_true(leak >= 0);
  assert_int_equal(dup2(leak, 47), 47);
  struct cordon_exec_result res = run_argv(ARGV("sh", "-c", "ls /proc/$$/fd"));
  assert_int_equal(res.exit_code, 0);
  assert_string_equal((char *)res.stdout_data, "0\n1\n2\n");
  cordon_exec_result_clear(&res);
  close(47);
  close(leak);
  assert_no_children();
}

static void test_signals_reset(void **state) {
  /* The caller ignores and blocks signals; the command starts with defaults. */
  struct sigaction ignore = {.sa_handler = SIG_IGN}, old_term, old_int;
  sigaction(SIGTERM, &ignore, &old_term);
  sigaction(SIGINT, &ignore, &old_int);
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  sigaddset(&block, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &block, &old_mask);

  struct cordon_exec_result res =
      run_argv(ARGV("grep", "-E", "^Sig(Blk|Ign):", "/proc/self/status"));

  pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  sigaction(SIGINT, &old_int, NULL);
  assert_int_equal(res.exit_code, 0);
  assert_string_equal((char *)res.stdout_data,
                      "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
  cordon_exec_result_clear(&res);

  /* And the caller's own state is untouched. */
  struct sigaction now;
  sigaction(SIGCHLD, NULL, &now);
  assert_true(now.sa_handler == SIG_DFL);
  assert_no_children();
}

static void test_own_process_group(void **state) {
  struct cordon_exec_result res =
      run_argv(ARGV("sh", "-c", "cut -d' ' -f5 /proc/$$/stat; echo $$"));
  assert_int_equal(res.exit_code, 0);
  int pgid = 0, pid = 0;
  assert_int_equal(sscanf((char *)res.stdout_data, "%d %d", &pgid, &pid), 2);
  assert_int_equal(pgid, pid);
  assert_int_not_equal(pgid, getpgrp());
  cordon_exec_result_clear(&res);
  assert_no_children();
}

/* ---- timeouts and the process tree -------------------------------------------------------- */

/* The upper bounds below prove that the timeout or the exit cut the wait short (the commands
 * would run 30 s and more), not how fast a loaded host (sanitizers, a parallel suite) reports. */
#define CUT_SHORT 10.0

static void test_timeout(void **state) {
  struct exec_spec spec = {.argv = ARGV("sleep", "30"), .envp = test_env, .timeout = 1};
  struct cordon_exec_result res;
  double start = fs_now();
  run_ok(&spec, &res);
  double elapsed = fs_now() - start;
  assert_true(res.timed_out);
  assert_int_equal(res.exit_code, 137);
  assert_int_equal(res.term_signal, 9);
  assert_true(elapsed >= 0.9);
  assert_true(elapsed < CUT_SHORT);
  assert_true(res.duration >= 0.9 && res.duration < CUT_SHORT);
  cordon_exec_result_clear(&res);

  /* A command that ends in time is not reported as timed out. */
  spec.argv = ARGV("true");
  spec.timeout = 5;
  run_ok(&spec, &res);
  assert_false(res.timed_out);
  assert_int_equal(res.exit_code, 0);
  cordon_exec_result_clear(&res);
  assert_no_children();
}

static void test_timeout_kills_tree(void **state) {
  /* The background sleep holds stdout open: the report must still come in time, and the
   * sleep must be gone afterwards. */
  char marker[64], script[256];
  make_marker(marker, sizeof(marker));
  snprintf(script, sizeof(script), "sleep 30 %s & echo started; sleep 30", marker);
  struct exec_spec spec = {.argv = ARGV("sh", "-c", script), .envp = test_env, .timeout = 1};
  struct cordon_exec_result res;
  double start = fs_now();
  run_ok(&spec, &res);
  double elapsed = fs_now() - start;
  assert_true(res.timed_out);
  assert_int_equal(res.exit_code, 137);
  assert_string_equal((char *)res.stdout_data, "started\n");
  bool gone = process_gone_soon(marker);
  if (!gone)
    kill_processes_with_argument(marker);
  assert_true(gone);
  assert_true(elapsed < CUT_SHORT);
  cordon_exec_result_clear(&res);
  assert_no_children();
}

static void test_background_killed_after_exit(void **state) {
  /* Documented: nothing an exec started survives it, even when the command itself exited. */
  char marker[64], script[256];
  make_marker(marker, sizeof(marker));
  snprintf(script, sizeof(script), "sleep 32 %s & echo done", marker);
  struct exec_spec spec = {.argv = ARGV("sh", "-c", script), .envp = test_env, .timeout = 20};
  struct cordon_exec_result res;
  run_ok(&spec, &res);
  assert_false(res.timed_out);
  assert_int_equal(res.exit_code, 0);
  assert_string_equal((char *)res.stdout_data, "done\n");
  assert_true(res.duration < CUT_SHORT);
  bool gone = process_gone_soon(marker);
  if (!gone)
    kill_processes_with_argument(marker);
  assert_true(gone);
  cordon_exec_result_clear(&res);
  assert_no_children();
}

static void test_daemon_killed_with_cgroup(void **state) {
  char reason[512];
  char own[4096];
  if (!leaf_possible(own, sizeof(own), reason, sizeof(reason))) {
    print_message("SKIP: daemonised grandchildren need a cgroup v2 leaf: %s\n", reason);
    skip();
  }
  /* setsid leaves the process group; only the cgroup holds it. The daemon keeps stdout. */
  char marker[64], script[256];
  make_marker(marker, sizeof(marker));
  snprintf(script, sizeof(script), "(setsid sleep 31 %s &); sleep 0.3; exit 0", marker);
  struct exec_spec spec = {.argv = ARGV("sh", "-c", script), .envp = test_env, .timeout = 20};
  struct cordon_exec_result res;
  run_ok(&spec, &res);
  assert_false(res.timed_out);
  assert_int_equal(res.exit_code, 0);
  assert_true(res.duration < CUT_SHORT);
  /* With the cgroup, kill_tree waits until the leaf is empty: gone at once, no grace. */
  assert_gone_now(marker);
  cordon_exec_result_clear(&res);
  assert_no_children();
}

/* ---- early end ---------------------------------------------------------------------------- */

/* The command writes "done" into a directory watched by inotify and then lingers (sleep 31,
 * with a stray file written first, which the check must not take for the end). */
struct done_watch {
  int inotify;
  char file[PATH_MAX];
  int checks; /* how many times the runner asked */
};

static bool done_written(void *data) {
  struct done_watch *w = data;
  char events[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
  while (read(w->inotify, events, sizeof(events)) > 0)
    ;
  w->checks++;
  char line[16] = {0};
  int fd = open(w->file, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, line, sizeof(line) - 1) : -1;
  if (fd >= 0)
    close(fd);
  return n == 5 && strcmp(line, "done\n") == 0;
}

static void test_early_end(void **state) {
  char reason[512], own[4096];
  if (!leaf_possible(own, sizeof(own), reason, sizeof(reason))) {
    print_message("SKIP: an early end needs the tree killed whole (a cgroup v2 leaf): %s\n",
                  reason);
    skip();
  }
  char dir[] = "/tmp/cordon-test-early.XXXXXX";
  assert_non_null(mkdtemp(dir));
  struct done_watch w = {.inotify = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)};
  assert_true(w.inotify >= 0);
  assert_true(inotify_add_watch(w.inotify, dir, IN_MODIFY | IN_CLOSE_WRITE) >= 0);
  snprintf(w.file, sizeof(w.file), "%s/record", dir);
  char marker[64], script[1024];
  make_marker(marker, sizeof(marker));
  snprintf(script, sizeof(script),
           "echo stray > %s/other; sleep 0.2; echo output; echo done > %s/record; "
           "(setsid sleep 31 %s &); exec sleep 31 %s",
           dir, dir, marker, marker);
  struct exec_early_end early = {.fd = w.inotify, .check = done_written, .data = &w};
  struct exec_spec spec = {
      .argv = ARGV("sh", "-c", script), .envp = test_env, .timeout = 20, .early_end = &early};
  struct cordon_exec_result res;
  run_ok(&spec, &res);
  assert_true(early.ended_early);
  assert_false(res.timed_out);
  assert_true(res.duration < CUT_SHORT);
  assert_string_equal((char *)res.stdout_data, "output\n");
  assert_int_equal(res.term_signal, SIGKILL); /* the process's own status: the kill's */
  /* The lingering command and its daemon went with the tree, before the run returned. */
  assert_gone_now(marker);
  cordon_exec_result_clear(&res);
  assert_no_children();

  /* Writes the check refuses (a stray file, a record cut short) wake it but end nothing: the
   * command ends by itself, with its own code. */
  early.ended_early = true;
  w.checks = 0;
  assert_int_equal(unlink(w.file), 0);
  snprintf(script, sizeof(script),
           "echo stray > %s/other; sleep 0.2; printf don > %s/record; sleep 0.2; exit 4", dir, dir);
  spec.argv = ARGV("sh", "-c", script);
  run_ok(&spec, &res);
  assert_false(early.ended_early);
  assert_true(w.checks >= 1);
  assert_int_equal(res.exit_code, 4);
  cordon_exec_result_clear(&res);
  close(w.inotify);
  char cleanup[600];
  snprintf(cleanup, sizeof(cleanup), "rm -rf %s", dir);
  assert_int_equal(system(cleanup), 0);
}

/* ---- threads ------------------------------------------------------------------------------ */

struct thread_job {
  int index;
  int failures;
};

static void *thread_main(void *arg) {
  struct thread_job *job = arg;
  for (int round = 0; round < 5; round++) {
    char expect[64], input[64];
    snprintf(input, sizeof(input), "thread-%d-round-%d\n", job->index, round);
    snprintf(expect, sizeof(expect), "%s", input);
    struct exec_spec spec = {.argv = ARGV("sh", "-c", "cat; echo err >&2"),
                             .envp = test_env,
                             .stdin_data = input,
                             .stdin_length = strlen(input),
                             .timeout = 30};
    struct cordon_exec_result res;
    struct cordon_error *err = NULL;
    if (exec_run(&spec, &res, &err) < 0) {
      cordon_error_free(err);
      job->failures++;
      continue;
    }
    if (res.exit_code != 0 || strcmp((char *)res.stdout_data, expect) != 0 ||
        strcmp((char *)res.stderr_data, "err\n") != 0)
      job->failures++;
    cordon_exec_result_clear(&res);
  }
  return NULL;
}

static void test_concurrent_threads(void **state) {
  pthread_t threads[4];
  struct thread_job jobs[4];
  for (int i = 0; i < 4; i++) {
    jobs[i] = (struct thread_job){.index = i};
    assert_int_equal(pthread_create(&threads[i], NULL, thread_main, &jobs[i]), 0);
  }
  /* A timeout in this thread meanwhile. */
  struct exec_spec spec = {.argv = ARGV("sleep", "10"), .envp = test_env, .timeout = 0.5};
  struct cordon_exec_result res;
  run_ok(&spec, &res);
  assert_true(res.timed_out);
  cordon_exec_result_clear(&res);
  for (int i = 0; i < 4; i++) {
    pthread_join(threads[i], NULL);
    assert_int_equal(jobs[i].failures, 0);
  }
  assert_no_children();
}

/* ---- custom launchers --------------------------------------------------------------------- */

struct fake_launcher {
  bool fail_start;
  bool leave_holder; /* leave a process that holds stdout and escapes kill_tree */
  pid_t holder;
  int starts, reaps, kills, cleanups;
};

static int fake_start(void *data, const struct exec_spec *spec, const int stdio_fds[3],
                      int *exit_fd, struct cordon_error **err) {
  struct fake_launcher *f = data;
  f->starts++;
  if (f->fail_start)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "fake launcher refuses");
  if (write(stdio_fds[1], "fake out", 8) != 8 || write(stdio_fds[2], "fake err", 8) != 8)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "fake write");
  if (f->leave_holder) {
    f->holder = fork();
    if (f->holder == 0) {
      dup2(stdio_fds[1], 1);
      static const char more[] = " and more";
      if (write(1, more, sizeof(more) - 1) < 0)
        _exit(1);
      sleep(20);
      _exit(0);
    }
  }
  /* An exit fd that is readable at once: a pipe whose write end is closed. */
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "pipe");
  close(p[1]);
  *exit_fd = p[0];
  return 0;
}

static int fake_reap(void *data, int *exit_code, int *term_signal, struct cordon_error **err) {
  struct fake_launcher *f = data;
  f->reaps++;
  *exit_code = 3;
  *term_signal = 0;
  return 0;
}

static void fake_kill_tree(void *data) {
  struct fake_launcher *f = data;
  f->kills++; /* deliberately kills nothing */
}

static void fake_cleanup(void *data) {
  struct fake_launcher *f = data;
  f->cleanups++;
  if (f->holder > 0) {
    kill(f->holder, SIGKILL);
    waitpid(f->holder, NULL, 0);
    f->holder = 0;
  }
}

static void test_custom_launcher(void **state) {
  struct fake_launcher fake = {0};
  const struct exec_launcher launcher = {.data = &fake,
                                         .start = fake_start,
                                         .reap = fake_reap,
                                         .kill_tree = fake_kill_tree,
                                         .cleanup = fake_cleanup};
  struct exec_spec spec = {.argv = ARGV("anything")};
  struct cordon_exec_result res;
  struct cordon_error *err = NULL;
  assert_int_equal(exec_run_with(&spec, &launcher, &res, &err), 0);
  assert_int_equal(res.exit_code, 3);
  assert_string_equal((char *)res.stdout_data, "fake out");
  assert_string_equal((char *)res.stderr_data, "fake err");
  assert_int_equal(fake.starts, 1);
  assert_int_equal(fake.reaps, 1);
  assert_true(fake.kills >= 1); /* after the command ended: remove leftovers */
  assert_int_equal(fake.cleanups, 1);
  cordon_exec_result_clear(&res);
}

static void test_custom_launcher_start_fails(void **state) {
  struct fake_launcher fake = {.fail_start = true};
  const struct exec_launcher launcher = {.data = &fake,
                                         .start = fake_start,
                                         .reap = fake_reap,
                                         .kill_tree = fake_kill_tree,
                                         .cleanup = fake_cleanup};
  struct exec_spec spec = {.argv = ARGV("anything")};
  struct cordon_exec_result res;
  struct cordon_error *err = NULL;
  assert_true(exec_run_with(&spec, &launcher, &res, &err) < 0);
  assert_non_null(err);
  assert_string_equal(err->message, "fake launcher refuses");
  assert_int_equal(err->kind, CORDON_ERR_UNAVAILABLE);
  assert_int_equal(fake.reaps, 0);
  assert_int_equal(fake.cleanups, 1);
  assert_null(res.stdout_data);
  cordon_error_free(err);

  /* Empty argv is refused before anything starts. */
  struct fake_launcher fresh = {0};
  const struct exec_launcher other = {.data = &fresh,
                                      .start = fake_start,
                                      .reap = fake_reap,
                                      .kill_tree = fake_kill_tree,
                                      .cleanup = fake_cleanup};
  struct exec_spec empty = {.argv = (const char *const[]){NULL}};
  err = NULL;
  assert_true(exec_run_with(&empty, &other, &res, &err) < 0);
  assert_non_null(err);
  assert_int_equal(fresh.starts, 0);
  assert_int_equal(fresh.cleanups, 1);
  cordon_error_free(err);
}

static void test_escaped_holder_bounded(void **state) {
  /* A process that escaped kill_tree keeps the stdout pipe open: the run still ends within
   * the short drain grace, with what was written so far. */
  struct fake_launcher fake = {.leave_holder = true};
  const struct exec_launcher launcher = {.data = &fake,
                                         .start = fake_start,
                                         .reap = fake_reap,
                                         .kill_tree = fake_kill_tree,
                                         .cleanup = fake_cleanup};
  struct exec_spec spec = {.argv = ARGV("anything")};
  struct cordon_exec_result res;
  struct cordon_error *err = NULL;
  double start = fs_now();
  assert_int_equal(exec_run_with(&spec, &launcher, &res, &err), 0);
  double elapsed = fs_now() - start;
  assert_true(elapsed < CUT_SHORT); /* the escaped holder keeps the pipe 20 s */
  assert_true(strncmp((char *)res.stdout_data, "fake out", 8) == 0);
  assert_int_equal(fake.cleanups, 1);
  cordon_exec_result_clear(&res);
  assert_no_children();
}

/* ---- the per-exec cgroup v2 leaf ------------------------------------------------------------
 * The command is in the leaf at its first act, born
 * there by clone3 CLONE_INTO_CGROUP (with vfork refused by a seccomp filter, it still is: no
 * vfork-and-join was needed); where the kernel refuses that clone3 (no clone3: ENOSYS; no
 * CLONE_INTO_CGROUP: E2BIG or EINVAL, as a seccomp filter makes it here) the old path, a vfork
 * whose child joins the leaf, still puts the whole tree in the leaf. Either way a setsid daemon
 * the command leaves is killed with the leaf. Skips with the reason where no leaf can be made. */

/* Whether text holds the line "0::OWN/cordon-exec-" followed by 16 hex digits: the runner's
 * leaf under our own cgroup, not our cgroup itself. */
static bool names_a_leaf(const char *text, const char *own) {
  char prefix[4200];
  snprintf(prefix, sizeof(prefix), "0::%s/cordon-exec-", strcmp(own, "/") == 0 ? "" : own);
  const char *at = strstr(text, prefix);
  if (!at || (at != text && at[-1] != '\n'))
    return false;
  at += strlen(prefix);
  for (int i = 0; i < 16; i++)
    if (!((at[i] >= '0' && at[i] <= '9') || (at[i] >= 'a' && at[i] <= 'f')))
      return false;
  return at[16] == '\n';
}

/* What one run found, as a bit set (0: all well), so a forked child can report it. */
enum {
  RUN_FAILED = 1,      /* exec_run failed or the command did not exit 0 */
  NOT_IN_LEAF = 2,     /* the command's first act did not see itself in a leaf of ours */
  DAEMON_LEFT = 4,     /* the setsid daemon outlived the exec: the leaf did not hold it */
  FILTER_MISSING = 8,  /* the seccomp filter could not be installed */
  CLONE3_ALLOWED = 16, /* the filter did not make clone3 fail as asked */
};

/* A unique argument to find the daemon by (GNU sleep sums its arguments). */

/* The command reads /proc/self/cgroup as its first act, and leaves a setsid daemon behind,
 * which only the leaf holds (it leaves the process group). */
static int run_and_check(const char *own, int salt, bool with_tree) {
  char marker[64], script[512];
  make_marker(marker, sizeof(marker));
  snprintf(script, sizeof(script), "cat /proc/self/cgroup; (setsid sleep 37 %s &); sleep 0.2",
           marker);
  /* First the command's own first act (cat is what the runner execs), then a tree. */
  int found = 0;
  struct exec_spec first = {
      .argv = ARGV("cat", "/proc/self/cgroup"), .envp = test_env, .timeout = 20};
  struct cordon_exec_result res;
  struct cordon_error *err = NULL;
  if (exec_run(&first, &res, &err) < 0 || res.exit_code != 0) {
    cordon_error_free(err);
    return RUN_FAILED;
  }
  if (!names_a_leaf((const char *)res.stdout_data, own))
    found |= NOT_IN_LEAF;
  cordon_exec_result_clear(&res);
  if (!with_tree)
    return found;

  struct exec_spec daemon = {.argv = ARGV("sh", "-c", script), .envp = test_env, .timeout = 20};
  if (exec_run(&daemon, &res, &err) < 0 || res.exit_code != 0) {
    cordon_error_free(err);
    return found | RUN_FAILED;
  }
  if (!names_a_leaf((const char *)res.stdout_data, own))
    found |= NOT_IN_LEAF;
  cordon_exec_result_clear(&res);
  /* The leaf's kill waits until it is empty: the daemon is gone by now. */
  if (process_with_argument_exists(marker)) {
    found |= DAEMON_LEFT;
    char command[256];
    snprintf(command, sizeof(command), "pkill -KILL -f -- ' %s$' 2>/dev/null", marker);
    (void)!system(command);
  }
  return found;
}

static void test_command_in_its_leaf(void **state) {
  (void)state;
  char own[4096], reason[512];
  if (!leaf_possible(own, sizeof(own), reason, sizeof(reason))) {
    print_message("SKIP: the per-exec leaf cannot be made here: %s\n", reason);
    skip();
  }
  assert_int_equal(run_and_check(own, 1, true), 0);
}

/* System call nr fails with errnum, everything else is allowed (an x86-64 filter; elsewhere the
 * test skips). Returns 0, or -1 when it cannot be installed. */
static int refuse_syscall(long nr, int errnum) {
#if defined(__x86_64__)
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)errnum & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = sizeof(filter) / sizeof(filter[0]), .filter = filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
    return -1;
  return 0;
#else
  (void)nr, (void)errnum;
  errno = ENOSYS;
  return -1;
#endif
}

/* In a child of ours (the filter cannot be taken off again): system call nr refused with
 * errnum, the runner must still contain the tree in its leaf. */
static void check_refused(long nr, int errnum, const char *own, bool with_tree) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (refuse_syscall(nr, errnum) < 0)
      _exit(FILTER_MISSING);
    /* The filter works: a bare clone3 now fails with errnum. */
    uint64_t args[11] = {0};
    errno = 0;
    if (nr == SYS_clone3 && (syscall(SYS_clone3, args, sizeof(args)) != -1 || errno != errnum))
      _exit(CLONE3_ALLOWED);
    _exit(run_and_check(own, 10 + errnum + (int)nr, with_tree));
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) == FILTER_MISSING) {
    print_message("SKIP: cannot install a seccomp filter here\n");
    skip();
  }
  if (WEXITSTATUS(status) != 0)
    print_message("system call %ld refused with %s: what went wrong: 0x%x\n", nr,
                  strerrorname_np(errnum), WEXITSTATUS(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_old_path_when_clone3_is_refused(void **state) {
  (void)state;
  char own[4096], reason[512];
  if (!leaf_possible(own, sizeof(own), reason, sizeof(reason))) {
    print_message("SKIP: the per-exec leaf cannot be made here: %s\n", reason);
    skip();
  }
  check_refused(SYS_clone3, ENOSYS, own, true); /* before Linux 5.3, or a sandbox's filter */
  check_refused(SYS_clone3, E2BIG, own, true);  /* clone3 without the cgroup field (5.3-5.6) */
  check_refused(SYS_clone3, EINVAL, own, true); /* a flag it does not know */
}

/* With vfork refused, only the clone3 into the leaf can start the command: it ran, in its leaf
 * from its first act, so no exec went through a migration. (No tree here: dash itself starts
 * its commands with vfork.) */
static void test_born_in_the_leaf(void **state) {
  (void)state;
  char own[4096], reason[512];
  if (!leaf_possible(own, sizeof(own), reason, sizeof(reason))) {
    print_message("SKIP: the per-exec leaf cannot be made here: %s\n", reason);
    skip();
  }
  check_refused(SYS_vfork, EPERM, own, false);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_echo_stdout),
      cmocka_unit_test(test_stderr_separate),
      cmocka_unit_test(test_exit_code),
      cmocka_unit_test(test_killed_by_signal),
      cmocka_unit_test(test_env_is_final),
      cmocka_unit_test(test_path_from_env),
      cmocka_unit_test(test_stdin_small),
      cmocka_unit_test(test_stdin_null_and_empty),
      cmocka_unit_test(test_stdin_large_no_deadlock),
      cmocka_unit_test(test_stdin_not_read_epipe),
      cmocka_unit_test(test_output_bounded),
      cmocka_unit_test(test_not_found),
      cmocka_unit_test(test_not_executable),
      cmocka_unit_test(test_find_program),
      cmocka_unit_test(test_cwd),
      cmocka_unit_test(test_only_stdio_fds),
      cmocka_unit_test(test_signals_reset),
      cmocka_unit_test(test_own_process_group),
      cmocka_unit_test(test_timeout),
      cmocka_unit_test(test_timeout_kills_tree),
      cmocka_unit_test(test_background_killed_after_exit),
      cmocka_unit_test(test_daemon_killed_with_cgroup),
      cmocka_unit_test(test_early_end),
      cmocka_unit_test(test_concurrent_threads),
      cmocka_unit_test(test_custom_launcher),
      cmocka_unit_test(test_custom_launcher_start_fails),
      cmocka_unit_test(test_escaped_holder_bounded),
      cmocka_unit_test(test_command_in_its_leaf),
      cmocka_unit_test(test_old_path_when_clone3_is_refused),
      cmocka_unit_test(test_born_in_the_leaf),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
