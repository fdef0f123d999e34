/* The microvm backend's refusal rules, over the fake monitor and the preflights of the others:
 * every missing requirement named (firecracker, libkrun, qemu with an empty guest directory and
 * an empty PATH), KVM asked where the probe says no refused with the probe's reason, no
 * downgrade (a monitor asked that cannot run is refused, never replaced by fake), monitor
 * names, a session over the fake monitor end to end (exec, 125/126/127, snapshot), and the
 * deferred boot of a one-shot session (below). */
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
#include "backends/microvm/microvm.h"
#include "base/fs.h"

static char empty_dir[] = "/tmp/cordon-microvm-test.XXXXXX";
static char *saved_path;

static int no_kvm(char **reason) {
  *reason = strdup("test: KVM refused by the injected probe");
  return 0;
}

static int yes_kvm(char **reason) {
  *reason = NULL;
  return 1;
}

static int setup(void **state) {
  (void)state;
  if (!mkdtemp(empty_dir))
    return -1;
  const char *path = getenv("PATH");
  saved_path = strdup(path ? path : "/usr/bin:/bin");
  setenv(MICROVM_GUEST_DIR_ENV, empty_dir, 1);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  setenv("PATH", saved_path, 1);
  free(saved_path);
  rmdir(empty_dir);
  return 0;
}

/* The one-line description of monitor m's preflight with PATH and the guest dir empty. */
static char *describe_empty(const struct microvm_monitor *m, enum microvm_accel accel) {
  struct microvm_config cfg = {.guest_dir = empty_dir, .accel = accel};
  struct microvm_preflight p = {0};
  setenv("PATH", empty_dir, 1);
  struct cordon_error *err = NULL;
  int r = m->preflight(&cfg, &p, &err);
  setenv("PATH", saved_path, 1);
  assert_int_equal(r, 0);
  char *text = microvm_preflight_describe(m, &p);
  microvm_preflight_clear(&p);
  return text;
}

static void test_names(void **state) {
  (void)state;
  assert_string_equal(microvm_monitor_names(), "qemu, firecracker, libkrun, fake");
  const char *names[] = {"qemu", "firecracker", "libkrun", "fake"};
  for (size_t i = 0; i < 4; i++) {
    const struct microvm_monitor *m = microvm_monitor_find(names[i]);
    assert_non_null(m);
    assert_string_equal(m->name, names[i]);
    assert_true(strstr(microvm_monitor_names(), names[i]) != NULL);
  }
  assert_null(microvm_monitor_find("bogus"));
  assert_null(microvm_monitor_find(NULL));
}

static void test_choose(void **state) {
  (void)state;
  const struct microvm_monitor *m = NULL;
  struct cordon_error *err = NULL;
  unsetenv(MICROVM_MONITOR_ENV);
  assert_int_equal(microvm_monitor_choose(NULL, &m, &err), 0);
  assert_string_equal(m->name, "qemu"); /* the default */
  setenv(MICROVM_MONITOR_ENV, "fake", 1);
  assert_int_equal(microvm_monitor_choose(NULL, &m, &err), 0);
  assert_string_equal(m->name, "fake");
  assert_int_equal(microvm_monitor_choose("libkrun", &m, &err), 0); /* the manifest wins */
  assert_string_equal(m->name, "libkrun");
  assert_int_equal(microvm_monitor_choose("bogus", &m, &err), -1);
  assert_int_equal(err->kind, CORDON_ERR_USAGE);
  assert_non_null(strstr(err->message, "bogus"));
  assert_non_null(strstr(err->message, "qemu, firecracker, libkrun, fake"));
  cordon_error_free(err);
  unsetenv(MICROVM_MONITOR_ENV);
}

static void test_firecracker_names_everything(void **state) {
  (void)state;
  microvm_kvm_probe = no_kvm;
  char *text = describe_empty(&microvm_monitor_firecracker, MICROVM_ACCEL_AUTO);
  microvm_kvm_probe = microvm_kvm_usable;
  assert_non_null(text);
  assert_non_null(strstr(text, "firecracker: "));
  assert_non_null(strstr(text, "no firecracker binary in PATH"));
  assert_non_null(strstr(text, "test: KVM refused by the injected probe"));
  assert_non_null(strstr(text, "vmlinux"));
  assert_non_null(strstr(text, "rootfs.ext4"));
  assert_non_null(strstr(text, "agent's vsock transport"));
  free(text);
  /* Only KVM: TCG asked is refused by name too. */
  text = describe_empty(&microvm_monitor_firecracker, MICROVM_ACCEL_TCG);
  assert_non_null(strstr(text, "TCG was asked"));
  free(text);
}

static void test_libkrun_names_everything(void **state) {
  (void)state;
  microvm_kvm_probe = no_kvm;
  setenv("LD_LIBRARY_PATH", empty_dir, 1);
  char *text = describe_empty(&microvm_monitor_libkrun, MICROVM_ACCEL_AUTO);
  unsetenv("LD_LIBRARY_PATH");
  microvm_kvm_probe = microvm_kvm_usable;
  assert_non_null(text);
  assert_non_null(strstr(text, "libkrun: "));
  if (access("/usr/lib64/libkrun.so.1", F_OK) != 0 &&
      access("/usr/lib/x86_64-linux-gnu/libkrun.so.1", F_OK) != 0)
    assert_non_null(strstr(text, "no libkrun.so.1 on the library path"));
  assert_non_null(strstr(text, "test: KVM refused by the injected probe"));
  assert_non_null(strstr(text, "no guest root directory"));
  assert_non_null(strstr(text, "agent's vsock transport"));
  free(text);
}

static void test_qemu_refused_by_name(void **state) {
  (void)state;
  char *text = describe_empty(&microvm_monitor_qemu, MICROVM_ACCEL_AUTO);
  assert_non_null(text); /* no qemu binary and no guest in empty dirs, built or not */
  assert_non_null(strstr(text, "qemu: "));
  free(text);
}

static void test_fake_kvm_refused_with_reason(void **state) {
  (void)state;
  char *text = describe_empty(&microvm_monitor_fake, MICROVM_ACCEL_AUTO);
  assert_null(text); /* present whatever the host has */
  microvm_kvm_probe = no_kvm;
  text = describe_empty(&microvm_monitor_fake, MICROVM_ACCEL_KVM);
  assert_non_null(text);
  assert_string_equal(text, "fake: test: KVM refused by the injected probe");
  free(text);
  microvm_kvm_probe = yes_kvm;
  text = describe_empty(&microvm_monitor_fake, MICROVM_ACCEL_KVM);
  assert_null(text);
  microvm_kvm_probe = microvm_kvm_usable;
}

/* ---- sessions through the library ----------------------------------------------------------- */

static struct cordon_context *open_project(char **project) {
  char tmpl[] = "/tmp/cordon-microvm-project.XXXXXX";
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

static void test_no_downgrade(void **state) {
  (void)state;
  char *project = NULL;
  struct cordon_context *ctx = open_project(&project);
  const char *asked[] = {"qemu", "firecracker", "libkrun"};
  setenv(MICROVM_MONITOR_ENV, "fake", 1); /* fake is available: it must never stand in */
  setenv("PATH", empty_dir, 1);
  for (size_t i = 0; i < 3; i++) {
    struct cordon_manifest m = {.monitor = asked[i], .policy.egress = CORDON_EGRESS_NONE};
    struct cordon_session *s = NULL;
    struct cordon_error *err = NULL;
    assert_int_equal(cordon_session_create(ctx, &cordon_backend_microvm, &m, &s, &err), -1);
    assert_null(s);
    assert_int_equal(err->kind, CORDON_ERR_UNAVAILABLE);
    assert_non_null(strstr(err->message, asked[i]));
    assert_null(strstr(err->message, "fake"));
    cordon_error_free(err);
  }
  setenv("PATH", saved_path, 1);
  unsetenv(MICROVM_MONITOR_ENV);
  close_project(ctx, project);
}

static void test_monitor_refused_elsewhere(void **state) {
  (void)state;
  char *project = NULL;
  struct cordon_context *ctx = open_project(&project);
  struct cordon_manifest m = {.monitor = "fake"};
  struct cordon_session *s = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_session_create(ctx, &cordon_backend_worktree, &m, &s, &err), -1);
  assert_int_equal(err->kind, CORDON_ERR_USAGE);
  assert_non_null(strstr(err->message, "worktree"));
  cordon_error_free(err);
  close_project(ctx, project);
}

static int exec_status(struct cordon_session *s, const char *script) {
  const char *argv[] = {"sh", "-c", script, NULL};
  struct cordon_exec_request req = {.argv = argv};
  struct cordon_exec_result r;
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_session_exec(s, &req, &r, &err), 0);
  int code = r.exit_code;
  assert_int_equal(r.exec_failure, 0);
  cordon_exec_result_clear(&r);
  return code;
}

static void test_fake_session(void **state) {
  (void)state;
  char *project = NULL;
  struct cordon_context *ctx = open_project(&project);
  struct cordon_manifest m = {.monitor = "fake", .policy.egress = CORDON_EGRESS_LOOPBACK};
  m.policy.limits.memory_bytes = 128u << 20;
  m.policy.limits.cpus = 2;
  struct cordon_session *s = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(cordon_session_create(ctx, &cordon_backend_microvm, &m, &s, &err), 0);
  assert_non_null(strstr(s->backend_state, "\"monitor\":\"fake\""));
  assert_non_null(strstr(s->backend_state, "\"vcpus\":2"));
  assert_int_equal(exec_status(s, "echo hi > made"), 0);
  assert_int_equal(exec_status(s, "exit 125"), 125);
  assert_int_equal(exec_status(s, "exit 126"), 126);
  assert_int_equal(exec_status(s, "exit 127"), 127);
  unsigned char *data = NULL;
  size_t length = 0;
  assert_int_equal(cordon_session_read(s, "made", &data, &length, &err), 0);
  assert_memory_equal(data, "hi\n", 3);
  free(data);
  assert_int_equal(cordon_session_destroy(s, &err), 0);

  /* A share of a vCPU is refused by name, not rounded. */
  m.policy.limits.cpus = 0.5;
  assert_int_equal(cordon_session_create(ctx, &cordon_backend_microvm, &m, &s, &err), -1);
  assert_non_null(strstr(err->message, "whole vCPUs"));
  cordon_error_free(err);
  close_project(ctx, project);
}

/* ---- the deferred boot: a one-shot session boots its VM with its one exec, not at create or
 * resume, so one only read, written and snapshotted (as attest's resume-compare does) never
 * boots; its state says so, so another process that opens it neither attaches to a VM that does
 * not exist nor runs a command in one, and destroys it all the same. A session that is not
 * one-shot boots at create, as before. The fake monitor's boot leaves "vm":{"monitor":"fake"}
 * in the state: what these tests look for. ---------------------------------------------------- */

#define BOOTED "\"vm\":{\"monitor\":\"fake\"}"
#define PENDING "\"boot_pending\":true"

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
      cmocka_unit_test(test_names),
      cmocka_unit_test(test_choose),
      cmocka_unit_test(test_firecracker_names_everything),
      cmocka_unit_test(test_libkrun_names_everything),
      cmocka_unit_test(test_qemu_refused_by_name),
      cmocka_unit_test(test_fake_kvm_refused_with_reason),
      cmocka_unit_test(test_no_downgrade),
      cmocka_unit_test(test_monitor_refused_elsewhere),
      cmocka_unit_test(test_fake_session),
      cmocka_unit_test(test_one_shot_boots_with_its_exec),
      cmocka_unit_test(test_one_shot_resume_never_boots),
      cmocka_unit_test(test_one_shot_shutdown_before_exec),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
