/* The qemu monitor's host side of an exec's status (src/backends/microvm/qemu.c), against a
 * fake guest agent on the control dir's socket: a command's result comes from its status
 * record only. A line closed before the record, a record of another exec, a malformed one,
 * and the agent's "no status" records (stage LOST: the keeper died, or the agent ended the
 * command) are errors, never an exit code of 0 (issue 19's finding: "exited 0" with no output
 * for a memory hog the agent had killed). No VM, no root: the fake agent is a forked process. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "backends/microvm/guest-wire.h"
#include "backends/microvm/monitor.h"
#include "backends/microvm/qemu.h"
#include "base/proc.h"

enum act {
  ACT_EXIT_3,      /* control: STDOUT "out", then X 3 */
  ACT_CLOSE,       /* STDOUT, then the line closes: no record */
  ACT_STALE,       /* X 0 of another exec id, then the line closes */
  ACT_KEEPER_DIED, /* F LOST EIO */
  ACT_AGENT_ENDED, /* F LOST ECONNABORTED */
  ACT_BAD_TYPE,    /* a record of a type no result has (R) */
  ACT_GARBAGE,     /* bytes that start no frame, then the line closes */
};

struct fixture {
  char dir[64];
  struct microvm_config cfg;
  struct microvm_vm vm;
};

static void send_frame(int s, enum guest_wire_type type, uint32_t id, const void *data,
                       size_t length) {
  unsigned char buf[sizeof(struct guest_wire_header) + 64];
  guest_wire_header_encode(type, id, (uint32_t)length, buf);
  if (length > 0)
    memcpy(buf + sizeof(struct guest_wire_header), data, length);
  (void)!write(s, buf, sizeof(struct guest_wire_header) + length);
}

static void send_reply(int s, uint32_t id, uint32_t type, int32_t a, int32_t b) {
  struct exec_wire_reply r = {GUEST_WIRE_REPLY_MAGIC, type, a, b};
  send_frame(s, GUEST_WIRE_REPLY, id, &r, sizeof(r));
}

/* The fake agent: one connection; PONG the PING, wait for the REQUEST, then act. */
static _Noreturn void fake_agent(int listener, enum act act) {
  int s = accept(listener, NULL, NULL);
  if (s < 0)
    _exit(1);
  static unsigned char in[GUEST_WIRE_MAX_REQUEST + 64];
  size_t length = 0;
  uint32_t id = 0;
  bool requested = false;
  while (!requested) {
    ssize_t n = read(s, in + length, sizeof(in) - length);
    if (n <= 0)
      _exit(1);
    length += (size_t)n;
    struct guest_wire_header h;
    size_t at = 0;
    while (guest_wire_parse(GUEST_WIRE_TO_GUEST, in + at, length - at, &h, NULL) == 1) {
      if (h.type == GUEST_WIRE_PING)
        send_frame(s, GUEST_WIRE_PONG, h.exec_id, NULL, 0);
      if (h.type == GUEST_WIRE_REQUEST)
        requested = true, id = h.exec_id;
      at += sizeof(h) + h.length;
    }
    memmove(in, in + at, length - at);
    length -= at;
  }
  switch (act) {
  case ACT_EXIT_3:
    send_frame(s, GUEST_WIRE_STDOUT, id, "out", 3);
    send_reply(s, id, EXEC_WIRE_EXITED, 3, 0);
    break;
  case ACT_CLOSE: send_frame(s, GUEST_WIRE_STDOUT, id, "partial", 7); break;
  case ACT_STALE: send_reply(s, id + 1, EXEC_WIRE_EXITED, 0, 0); break;
  case ACT_KEEPER_DIED: send_reply(s, id, EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_LOST, EIO); break;
  case ACT_AGENT_ENDED:
    send_reply(s, id, EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_LOST, ECONNABORTED);
    break;
  case ACT_BAD_TYPE: send_reply(s, id, EXEC_WIRE_RUNNING, 0, 0); break;
  case ACT_GARBAGE: {
    static const char junk[] = "\0\0\0\0not a frame at all, not a status";
    (void)!write(s, junk, sizeof(junk));
    break;
  }
  }
  /* Our end of the line closes; read until the host hangs up too. */
  shutdown(s, SHUT_WR);
  while (read(s, in, sizeof(in)) > 0)
    ;
  _exit(0);
}

static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof(*f));
  assert_non_null(f);
  strcpy(f->dir, "/tmp/cordon-test-mvstatus.XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  f->cfg.control_dir = f->dir;
  char state_text[256];
  /* Attach to "a VMM" that is this process: attach checks only that it lives. */
  snprintf(state_text, sizeof(state_text), "{\"pid\":%d,\"start\":%llu,\"control_dir\":\"%s\"}",
           (int)getpid(), proc_start_time(getpid()), f->dir);
  struct cordon_error *err = NULL;
  int r = microvm_monitor_qemu.attach(&f->cfg, state_text, &f->vm, &err);
  if (r < 0)
    fail_msg("attach: %s", err ? err->message : "?");
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fixture *f = *state;
  free(f->vm.state);
  microvm_monitor_qemu.release(&f->vm);
  char path[128];
  snprintf(path, sizeof(path), "%s/%s", f->dir, QEMU_AGENT_SOCKET);
  unlink(path);
  snprintf(path, sizeof(path), "%s/agent.lock", f->dir);
  unlink(path);
  rmdir(f->dir);
  free(f);
  return 0;
}

/* Run `true` against a fake agent that does `act`: exec's return, *res and *err as it left
 * them. */
static int exec_against(struct fixture *f, enum act act, struct cordon_exec_result *res,
                        struct cordon_error **err) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  char *path = sa.sun_path;
  snprintf(path, sizeof(sa.sun_path), "%s/%s", f->dir, QEMU_AGENT_SOCKET);
  unlink(path);
  int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(listener >= 0);
  assert_int_equal(bind(listener, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(listener, 1), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0)
    fake_agent(listener, act);
  close(listener);
  const char *const argv[] = {"true", NULL};
  const char *const env[] = {"PATH=/bin", NULL};
  struct cordon_exec_request req = {.argv = argv, .env = env, .timeout = 20};
  memset(res, 0, sizeof(*res));
  res->exit_code = -1;
  int r = microvm_monitor_qemu.exec(&f->vm, &f->cfg, &req, res, err);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0); /* the fake agent saw a request */
  return r;
}

/* The fake agent works: a real record gives its exit code and the output before it. */
static void test_control(void **state) {
  struct cordon_exec_result res;
  struct cordon_error *err = NULL;
  int r = exec_against(*state, ACT_EXIT_3, &res, &err);
  if (r < 0)
    fail_msg("%s", err ? err->message : "?");
  assert_int_equal(res.exit_code, 3);
  assert_int_equal(res.stdout_length, 3);
  assert_memory_equal(res.stdout_data, "out", 3);
  cordon_exec_result_clear(&res);
}

static void expect_error(struct fixture *f, enum act act, const char *needle) {
  struct cordon_exec_result res;
  struct cordon_error *err = NULL;
  int r = exec_against(f, act, &res, &err);
  if (r == 0)
    fail_msg("act %d: a result (exit %d) without a status record", (int)act, res.exit_code);
  assert_non_null(err);
  if (!strstr(err->message, needle))
    fail_msg("act %d: error \"%s\" does not say \"%s\"", (int)act, err->message, needle);
  cordon_error_free(err);
}

static void test_closed_before_status(void **state) {
  expect_error(*state, ACT_CLOSE, "hung up before the command's status");
}

static void test_stale_record_is_not_ours(void **state) {
  expect_error(*state, ACT_STALE, "hung up before the command's status");
}

static void test_keeper_died(void **state) {
  expect_error(*state, ACT_KEEPER_DIED, "no exit status");
}

static void test_agent_ended_it(void **state) {
  expect_error(*state, ACT_AGENT_ENDED, "no exit status");
}

static void test_record_of_no_result(void **state) {
  expect_error(*state, ACT_BAD_TYPE, "unknown type");
}

static void test_garbage_then_close(void **state) {
  expect_error(*state, ACT_GARBAGE, "bad magic");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_control, setup, teardown),
      cmocka_unit_test_setup_teardown(test_closed_before_status, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stale_record_is_not_ours, setup, teardown),
      cmocka_unit_test_setup_teardown(test_keeper_died, setup, teardown),
      cmocka_unit_test_setup_teardown(test_agent_ended_it, setup, teardown),
      cmocka_unit_test_setup_teardown(test_record_of_no_result, setup, teardown),
      cmocka_unit_test_setup_teardown(test_garbage_then_close, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
