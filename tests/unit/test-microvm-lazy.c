/* The microvm backend's deferred boot, over the fake monitor: a one-shot session boots its VM
 * with its one exec, not at create or resume, so one only read, written and snapshotted (as
 * attest's resume-compare does) never boots; its state says so, so another process that opens
 * it neither attaches to a VM that does not exist nor runs a command in one, and destroys it
 * all the same. A session that is not one-shot boots at create, as before. The fake monitor's
 * boot leaves "vm":{"monitor":"fake"} in the state: what these tests look for. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <cordon/session.h>

#include "backends/builtin.h"
#include "base/fs.h"

#define BOOTED "\"vm\":{\"monitor\":\"fake\"}"
#define PENDING "\"boot_pending\":true"

static struct cordon_context *open_project(char **project) {
  char tmpl[] = "/tmp/cordon-microvm-lazy.XXXXXX";
  *project = strdup(mkdtemp(tmpl));
  struct cordon_context *ctx = NULL;
  assert_int_equal(cordon_context_open(*project, &ctx, NULL), 0);
  return ctx;
}

static void close_project(struct cordon_context *ctx, char *project) {
  cordon_context_free(ctx);
  fs_remove_tree(project, NULL);
  free(project);
}

static int exec_echo(struct cordon_session *s, struct cordon_error **err) {
  const char *argv[] = {"sh", "-c", "echo ran > ran; exit 7", NULL};
  struct cordon_exec_request req = {.argv = argv};
  struct cordon_exec_result r;
  if (cordon_session_exec(s, &req, &r, err) < 0)
    return -1;
  int code = r.exit_code;
  cordon_exec_result_clear(&r);
  return code;
}

/* The session's state as another process reads it from disk. */
static char *state_on_disk(struct cordon_context *ctx, const struct cordon_registry *reg,
                           const char *id) {
  struct cordon_session *other = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_session_open(ctx, reg, id, &other, &err), 0);
  char *state = strdup(other->backend_state);
  cordon_session_close(other);
  return state;
}

static void test_one_shot_boots_with_its_exec(void **state) {
  (void)state;
  char *project = NULL;
  struct cordon_context *ctx = open_project(&project);
  struct cordon_registry *reg = NULL;
  assert_int_equal(cordon_registry_load(&reg, NULL), 0);
  struct cordon_manifest m = {.monitor = "fake", .one_shot = true};
  struct cordon_session *s = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_session_create(ctx, &cordon_backend_microvm, &m, &s, &err), 0);
  assert_non_null(strstr(s->backend_state, PENDING));
  assert_null(strstr(s->backend_state, BOOTED));
  /* Host-side work needs no VM. */
  assert_int_equal(cordon_session_write(s, "in", "x\n", 2, 0644, &err), 0);
  char *first = NULL;
  assert_int_equal(cordon_session_snapshot(s, &first, &err), 0);
  assert_null(strstr(s->backend_state, BOOTED));
  /* The exec boots, runs, and the state naming the VM is on disk at once. */
  assert_int_equal(exec_echo(s, &err), 7);
  assert_non_null(strstr(s->backend_state, BOOTED));
  assert_null(strstr(s->backend_state, PENDING));
  char *disk = state_on_disk(ctx, reg, s->id);
  assert_non_null(strstr(disk, BOOTED));
  assert_null(strstr(disk, PENDING));
  free(disk);
  unsigned char *data = NULL;
  size_t length = 0;
  assert_int_equal(cordon_session_read(s, "ran", &data, &length, &err), 0);
  assert_int_equal(length, 4);
  assert_memory_equal(data, "ran\n", 4);
  free(data);
  /* Still one command only. */
  assert_int_equal(exec_echo(s, &err), -1);
  cordon_error_free(err);
  err = NULL;
  assert_int_equal(cordon_session_destroy(s, &err), 0);
  free(first);
  cordon_registry_free(reg);
  close_project(ctx, project);
}

static void test_one_shot_resume_never_boots(void **state) {
  (void)state;
  char *project = NULL;
  struct cordon_context *ctx = open_project(&project);
  struct cordon_registry *reg = NULL;
  assert_int_equal(cordon_registry_load(&reg, NULL), 0);
  struct cordon_manifest m = {.monitor = "fake"};
  struct cordon_session *s = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_session_create(ctx, &cordon_backend_microvm, &m, &s, &err), 0);
  assert_non_null(strstr(s->backend_state, BOOTED)); /* not one-shot: booted at create */
  assert_null(strstr(s->backend_state, PENDING));
  assert_int_equal(cordon_session_write(s, "f", "kept\n", 5, 0644, &err), 0);
  char *id = NULL;
  assert_int_equal(cordon_session_snapshot(s, &id, &err), 0);
  assert_int_equal(cordon_session_destroy(s, &err), 0);

  m.one_shot = true;
  assert_int_equal(cordon_session_resume(ctx, &cordon_backend_microvm, &m, id, &s, &err), 0);
  assert_non_null(strstr(s->backend_state, PENDING));
  assert_null(strstr(s->backend_state, BOOTED));
  unsigned char *data = NULL;
  size_t length = 0;
  assert_int_equal(cordon_session_read(s, "f", &data, &length, &err), 0);
  assert_int_equal(length, 5);
  free(data);
  char *again = NULL;
  assert_int_equal(cordon_session_snapshot(s, &again, &err), 0);
  assert_string_equal(again, id);
  free(again);
  /* Another process: it opens the session, refuses a command (no VM, and not its to boot),
   * and destroys it. */
  struct cordon_session *other = NULL;
  assert_int_equal(cordon_session_open(ctx, reg, s->id, &other, &err), 0);
  assert_int_equal(exec_echo(other, &err), -1);
  assert_non_null(strstr(err->message, "not running"));
  cordon_error_free(err);
  err = NULL;
  assert_int_equal(cordon_session_destroy(other, &err), 0);
  cordon_session_close(s);
  free(id);
  cordon_registry_free(reg);
  close_project(ctx, project);
}

/* Shut down before its command: it never boots, and an exec after is refused. */
static void test_one_shot_shutdown_before_exec(void **state) {
  (void)state;
  char *project = NULL;
  struct cordon_context *ctx = open_project(&project);
  struct cordon_manifest m = {.monitor = "fake", .one_shot = true};
  struct cordon_session *s = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_session_create(ctx, &cordon_backend_microvm, &m, &s, &err), 0);
  assert_int_equal(cordon_session_shutdown(s, &err), 0);
  assert_int_equal(exec_echo(s, &err), -1);
  cordon_error_free(err);
  err = NULL;
  assert_null(strstr(s->backend_state, BOOTED));
  assert_int_equal(cordon_session_destroy(s, &err), 0);
  close_project(ctx, project);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_shot_boots_with_its_exec),
      cmocka_unit_test(test_one_shot_resume_never_boots),
      cmocka_unit_test(test_one_shot_shutdown_before_exec),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
