/* exec/pipe-relay.c: a program gets pipes of our own, never the caller's fds, and the relay
 * carries input and output between them: bytes in order, stdout and stderr apart, end of input
 * when the caller has none, no hang or SIGPIPE when the program leaves its input unread, output
 * dropped when asked, and an end in bounded time when something that outlived the program
 * keeps its pipes open. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "exec/pipe-relay.h"

/* A file of the test's own, unlinked: the caller's fds are files, as a redirection makes. */
static int scratch_file(const void *data, size_t length) {
  char path[] = "/tmp/cordon-pipe-relay.XXXXXX";
  int fd = mkostemp(path, O_CLOEXEC);
  assert_true(fd >= 0);
  unlink(path);
  if (length)
    assert_int_equal(write(fd, data, length), (ssize_t)length);
  assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
  return fd;
}

static char *file_text(int fd, size_t *length) {
  struct stat st;
  assert_int_equal(fstat(fd, &st), 0);
  char *text = calloc(1, (size_t)st.st_size + 1);
  assert_non_null(text);
  assert_int_equal(pread(fd, text, (size_t)st.st_size, 0), st.st_size);
  *length = (size_t)st.st_size;
  return text;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Run `sh -c script` with the relay's ends as its stdio; its exit code. The program's fds 0-2
 * must be the relay's pipes (never in_fd, out_fd or err_fd): it checks that itself. */
static int run(const char *script, int in_fd, int out_fd, int err_fd) {
  struct exec_pipe_relay *r = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(exec_pipe_relay_open(in_fd, out_fd, err_fd, &r, &err), 0);
  int fds[3];
  exec_pipe_relay_child_fds(r, fds);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    for (int i = 0; i < 3; i++)
      if (dup2(fds[i], i) < 0)
        _exit(125);
    execl("/bin/sh", "sh", "-c", script, (char *)NULL);
    _exit(127);
  }
  assert_int_equal(exec_pipe_relay_start(r, &err), 0);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    assert_int_equal(errno, EINTR);
  exec_pipe_relay_free(r);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The program's stdio are pipes, whatever the caller's are. */
#define ALL_PIPES "for f in 0 1 2; do [ -p /dev/fd/$f ] || exit 40; done; "

static void test_bytes_in_order_streams_apart(void **state) {
  (void)state;
  int in = scratch_file("line one\nline two\n", 18), out = scratch_file(NULL, 0),
      errf = scratch_file(NULL, 0);
  assert_int_equal(run(ALL_PIPES "cat; echo to-out; echo to-err >&2; exit 7", in, out, errf), 7);
  size_t n;
  char *o = file_text(out, &n), *e = file_text(errf, &n);
  assert_string_equal(o, "line one\nline two\nto-out\n");
  assert_string_equal(e, "to-err\n");
  free(o);
  free(e);
  close(in);
  close(out);
  close(errf);
}

static void test_no_input_is_end_of_input(void **state) {
  (void)state;
  int out = scratch_file(NULL, 0);
  assert_int_equal(run(ALL_PIPES "n=$(wc -c); echo \"read $n\"", -1, out, -1), 0);
  size_t n;
  char *o = file_text(out, &n);
  assert_string_equal(o, "read 0\n");
  free(o);
  close(out);
}

/* 4 MiB the program never reads, while it writes 1 MiB: no deadlock (its output flows while the
 * input waits), no SIGPIPE here when it exits with its input unread, all of its output kept. */
static void test_unread_input_and_bulk_output(void **state) {
  (void)state;
  size_t big = 4u << 20;
  char *data = malloc(big);
  assert_non_null(data);
  memset(data, 'x', big);
  int in = scratch_file(data, big), out = scratch_file(NULL, 0);
  free(data);
  assert_int_equal(run("head -c 1048576 /dev/zero; exit 3", in, out, -1), 3);
  struct stat st;
  assert_int_equal(fstat(out, &st), 0);
  assert_int_equal(st.st_size, 1048576);
  /* A file: what the relay read ahead went back, none of it was the program's. */
  assert_int_equal(lseek(in, 0, SEEK_CUR), 0);
  close(in);
  close(out);
}

/* A file as input is left where the program stopped reading (the relay's read-ahead goes
 * back), so the caller's next reader finds the rest: a shell loop over a file's lines, one
 * program per line, loses none. */
static void test_file_input_left_where_the_program_stopped(void **state) {
  (void)state;
  static const char lines[] = "one\ntwo\nthree\n";
  int in = scratch_file(lines, strlen(lines));
  const char *expect[] = {"one\n", "two\n", "three\n"};
  for (int i = 0; i < 3; i++) {
    int out = scratch_file(NULL, 0);
    /* dash's read takes one byte at a time: exactly one line. */
    assert_int_equal(run("read l; echo \"$l\"", in, out, -1), 0);
    size_t n;
    char *o = file_text(out, &n);
    assert_string_equal(o, expect[i]);
    free(o);
    close(out);
  }
  assert_int_equal(lseek(in, 0, SEEK_CUR), (off_t)strlen(lines));
  /* A program that reads it all leaves it at its end. */
  assert_int_equal(lseek(in, 0, SEEK_SET), 0);
  assert_int_equal(run("cat >/dev/null", in, -1, -1), 0);
  assert_int_equal(lseek(in, 0, SEEK_CUR), (off_t)strlen(lines));
  close(in);
}

static void test_dropped_output(void **state) {
  (void)state;
  assert_int_equal(run("head -c 1048576 /dev/zero; head -c 65536 /dev/zero >&2", -1, -1, -1), 0);
}

/* A process that outlives the program and keeps its stdout: the relay stops after a quiet while
 * (bounded), and what came before the program ended is there. */
static void test_escaped_holder_does_not_hang(void **state) {
  (void)state;
  int out = scratch_file(NULL, 0);
  double start = now();
  assert_int_equal(run("echo before; (sleep 5) & exit 0", -1, out, -1), 0);
  double took = now() - start;
  assert_true(took < 4.0);
  size_t n;
  char *o = file_text(out, &n);
  assert_string_equal(o, "before\n");
  free(o);
  close(out);
}

/* The caller's fds 0-2 closed: the pipes still land above them, so the program's dup2 onto 0-2
 * never clobbers one end with another. */
static void test_caller_stdio_closed(void **state) {
  (void)state;
  int out = scratch_file(NULL, 0);
  int saved[3];
  for (int i = 0; i < 3; i++) {
    saved[i] = fcntl(i, F_DUPFD_CLOEXEC, 10);
    assert_true(saved[i] >= 0);
    close(i);
  }
  int code = run(ALL_PIPES "echo ok", -1, out, -1);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(dup2(saved[i], i), i);
    close(saved[i]);
  }
  assert_int_equal(code, 0);
  size_t n;
  char *o = file_text(out, &n);
  assert_string_equal(o, "ok\n");
  free(o);
  close(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bytes_in_order_streams_apart),
      cmocka_unit_test(test_no_input_is_end_of_input),
      cmocka_unit_test(test_unread_input_and_bulk_output),
      cmocka_unit_test(test_file_input_left_where_the_program_stopped),
      cmocka_unit_test(test_dropped_output),
      cmocka_unit_test(test_escaped_holder_does_not_hang),
      cmocka_unit_test(test_caller_stdio_closed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
