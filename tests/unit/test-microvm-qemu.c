/* The qemu monitor end to end (src/backends/microvm/qemu.c, guest/): boot one VM through
 * microvm_monitor_qemu, run commands in it over the agent's wire (stdout, stderr, stdin,
 * 125/126/127 by themselves and from an execve failure, a signal, a timeout that kills a
 * background tree, a cwd in the workspace), attach from the saved state, shut down. Also the
 * pure parts: the agent's cpio and qemu's command line, and preflight's KVM refusal. Skips
 * with the reason when qemu, the built guest (scripts/build-guest) or root is missing. Every
 * wait is bounded (the monitor's own bounds, and a boot timeout given here). */
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
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "backends/microvm/monitor.h"
#include "backends/microvm/qemu.h"
#include "base/fs.h"
#include "base/proc.h"

#define ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})

static const char *const base_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/user",
                                       "LC_ALL=C", NULL};

#define WORKSPACE_OWNER 4242

struct fixture {
  char dir[64];
  char *workspace, *control;
  struct microvm_config cfg;
  struct microvm_vm vm;
  double boot_seconds;
};

static struct fixture *booted;
static const char *skip_reason;

static void expect_ok(int r, struct cordon_error *err) {
  if (r < 0)
    fail_msg("%s", err ? err->message : "(no message)");
}

static int run(const char *const *argv, const char *stdin_text, double timeout, const char *cwd,
               struct cordon_exec_result *res) {
  struct cordon_exec_request req = {
      .argv = argv,
      .cwd = cwd,
      .env = base_env,
      .timeout = timeout,
      .stdin_data = stdin_text,
      .stdin_length = stdin_text ? strlen(stdin_text) : 0,
  };
  struct cordon_error *err = NULL;
  int r = microvm_monitor_qemu.exec(&booted->vm, &booted->cfg, &req, res, &err);
  if (r < 0) {
    char *tail = qemu_log_tail(booted->control, QEMU_CONSOLE_LOG, 20);
    printf("# console: %s\n", tail ? tail : "");
    free(tail);
  }
  expect_ok(r, err);
  cordon_error_free(err);
  return r;
}

static int group_setup(void **state) {
  char *why = NULL;
  char *binary = qemu_binary_path();
  char *guest = qemu_guest_check(qemu_guest_dir(NULL));
  char *agent = qemu_agent_path();
  if (geteuid() != 0)
    skip_reason = "not root (the VMM is started in namespaces of its own)";
  else if (!binary)
    skip_reason = "no qemu-system-x86_64 in PATH";
  else if (!guest || guest[0])
    skip_reason = "the guest is not built (scripts/build-guest)";
  else if (!agent)
    skip_reason = "no cordon-guest binary";
  free(binary);
  free(guest);
  free(agent);
  free(why);
  if (skip_reason) {
    printf("# skip: %s\n", skip_reason);
    return 0;
  }
  struct fixture *f = calloc(1, sizeof(*f));
  snprintf(f->dir, sizeof(f->dir), "/tmp/cordon-qemu-test.XXXXXX");
  if (!mkdtemp(f->dir))
    return -1;
  if (asprintf(&f->workspace, "%s/ws", f->dir) < 0 || asprintf(&f->control, "%s/ctl", f->dir) < 0)
    return -1;
  /* Owned by someone other than root and the guest's uid, and not world-writable: only the
   * guest's sandbox user, seen as the owner, can write in it. */
  mkdir(f->workspace, 0755);
  chmod(f->workspace, 0755);
  if (chown(f->workspace, WORKSPACE_OWNER, WORKSPACE_OWNER) < 0)
    return -1;
  mkdir(f->control, 0700);
  f->cfg = (struct microvm_config){
      .workspace = f->workspace,
      .control_dir = f->control,
      .egress = CORDON_EGRESS_LOOPBACK,
      .accel = MICROVM_ACCEL_TCG,
      .env = base_env,
      .boot_timeout = 120,
  };
  struct cordon_error *err = NULL;
  double t0 = fs_now();
  if (microvm_monitor_qemu.boot(&f->cfg, &f->vm, &err) < 0) {
    fprintf(stderr, "boot: %s\n", err->message);
    cordon_error_free(err);
    fs_remove_tree(f->dir, NULL);
    free(f->workspace);
    free(f->control);
    free(f);
    return -1;
  }
  f->boot_seconds = fs_now() - t0;
  char *console = qemu_log_tail(f->control, QEMU_CONSOLE_LOG, 3);
  printf("# cold boot to agent ready: %.2f s (console: %s)\n", f->boot_seconds,
         console ? console : "");
  free(console);
  booted = f;
  *state = f;
  return 0;
}

static int group_teardown(void **state) {
  struct fixture *f = booted;
  if (!f)
    return 0;
  struct cordon_error *err = NULL;
  pid_t pid = f->vm.vmm_pid;
  unsigned long long start = f->vm.vmm_start;
  microvm_monitor_qemu.shutdown(&f->vm, &err);
  /* Idempotent. */
  microvm_monitor_qemu.shutdown(&f->vm, &err);
  microvm_monitor_qemu.release(&f->vm);
  free(f->vm.state);
  cordon_error_free(err);
  bool gone = proc_start_time(pid) != start;
  fs_remove_tree(f->dir, NULL);
  free(f->workspace);
  free(f->control);
  free(f);
  booted = NULL;
  return gone ? 0 : -1;
}

#define NEED_VM() \
  do {            \
    if (!booted)  \
      skip();     \
  } while (0)

static void test_stdout_stderr_stdin(void **state) {
  NEED_VM();
  struct cordon_exec_result res;
  double t0 = fs_now();
  run(ARGV("true"), NULL, 30, NULL, &res);
  printf("# exec of true in the booted VM: %.1f ms\n", (fs_now() - t0) * 1000);
  assert_int_equal(res.exit_code, 0);
  cordon_exec_result_clear(&res);

  run(ARGV("sh", "-c", "echo out; echo err >&2; exit 3"), NULL, 30, NULL, &res);
  assert_int_equal(res.exit_code, 3);
  assert_int_equal(res.exec_failure, 0);
  assert_string_equal((char *)res.stdout_data, "out\n");
  assert_string_equal((char *)res.stderr_data, "err\n");
  cordon_exec_result_clear(&res);

  run(ARGV("tr", "a-z", "A-Z"), "hello guest\n", 30, NULL, &res);
  assert_int_equal(res.exit_code, 0);
  assert_string_equal((char *)res.stdout_data, "HELLO GUEST\n");
  cordon_exec_result_clear(&res);

  /* Commands run as uid 1000 by default, in the workspace. */
  run(ARGV("sh", "-c", "id -u; pwd; echo made >file"), NULL, 30, NULL, &res);
  assert_string_equal((char *)res.stdout_data, "1000\n/workspace\n");
  cordon_exec_result_clear(&res);
  char path[128];
  snprintf(path, sizeof(path), "%s/file", booted->workspace);
  unsigned char *data = NULL;
  size_t length = 0;
  expect_ok(fs_read_file(path, 64, &data, &length, NULL), NULL);
  assert_string_equal((char *)data, "made\n");
  free(data);
}

static void test_exit_codes(void **state) {
  NEED_VM();
  struct cordon_exec_result res;
  for (int code = 125; code <= 127; code++) {
    char script[32];
    snprintf(script, sizeof(script), "exit %d", code);
    run(ARGV("sh", "-c", script), NULL, 30, NULL, &res);
    assert_int_equal(res.exit_code, code);
    assert_int_equal(res.exec_failure, 0); /* by itself: not cordon failing to start it */
    cordon_exec_result_clear(&res);
  }
  run(ARGV("no-such-command-here"), NULL, 30, NULL, &res);
  assert_int_equal(res.exit_code, 127);
  assert_int_equal(res.exec_failure, 127);
  assert_non_null(strstr((char *)res.stderr_data, "no-such-command-here"));
  cordon_exec_result_clear(&res);
  run(ARGV("sh", "-c", "echo plain >plain; chmod 644 plain"), NULL, 30, NULL, &res);
  cordon_exec_result_clear(&res);
  run(ARGV("./plain"), NULL, 30, NULL, &res);
  assert_int_equal(res.exit_code, 126);
  assert_int_equal(res.exec_failure, 126);
  cordon_exec_result_clear(&res);
  run(ARGV("sh", "-c", "kill -TERM $$"), NULL, 30, NULL, &res);
  assert_int_equal(res.exit_code, 128 + 15);
  assert_int_equal(res.term_signal, 15);
  cordon_exec_result_clear(&res);
}

static void test_timeout_kills_tree(void **state) {
  NEED_VM();
  struct cordon_exec_result res;
  /* A background child in a session of its own, and the shell itself, both sleeping: the
   * timeout kills both. */
  double t0 = fs_now();
  run(ARGV("sh", "-c", "setsid sleep 300 & echo $! >bg.pid; sleep 300"), NULL, 1.5, NULL, &res);
  assert_true(res.timed_out);
  assert_true(fs_now() - t0 < 30);
  cordon_exec_result_clear(&res);
  run(ARGV("sh", "-c", "kill -0 $(cat bg.pid) 2>/dev/null && echo alive || echo gone"), NULL, 30,
      NULL, &res);
  assert_string_equal((char *)res.stdout_data, "gone\n");
  cordon_exec_result_clear(&res);
}

static void test_cwd_and_bounds(void **state) {
  NEED_VM();
  struct cordon_exec_result res;
  run(ARGV("sh", "-c", "mkdir -p sub"), NULL, 30, NULL, &res);
  cordon_exec_result_clear(&res);
  run(ARGV("pwd"), NULL, 30, "sub", &res);
  assert_string_equal((char *)res.stdout_data, "/workspace/sub\n");
  cordon_exec_result_clear(&res);
  struct cordon_exec_request req = {.argv = ARGV("head", "-c", "300000", "/dev/zero"),
                                    .env = base_env,
                                    .timeout = 30,
                                    .max_output = 1000};
  struct cordon_error *err = NULL;
  expect_ok(microvm_monitor_qemu.exec(&booted->vm, &booted->cfg, &req, &res, &err), err);
  assert_int_equal(res.stdout_length, 1000);
  assert_true(res.stdout_truncated);
  assert_int_equal(res.stdout_total, 300000);
  cordon_exec_result_clear(&res);
  /* A cwd that does not exist is an error, not an exit code. */
  req = (struct cordon_exec_request){.argv = ARGV("true"), .env = base_env, .cwd = "nope"};
  assert_int_equal(microvm_monitor_qemu.exec(&booted->vm, &booted->cfg, &req, &res, &err) < 0,
                   true);
  cordon_error_free(err);
}

static void test_attach(void **state) {
  NEED_VM();
  struct microvm_vm other = {0};
  struct cordon_error *err = NULL;
  expect_ok(microvm_monitor_qemu.attach(&booted->cfg, booted->vm.state, &other, &err), err);
  assert_int_equal(other.vmm_pid, booted->vm.vmm_pid);
  struct cordon_exec_request req = {.argv = ARGV("echo", "again"), .env = base_env, .timeout = 30};
  struct cordon_exec_result res;
  expect_ok(microvm_monitor_qemu.exec(&other, &booted->cfg, &req, &res, &err), err);
  assert_string_equal((char *)res.stdout_data, "again\n");
  cordon_exec_result_clear(&res);
  microvm_monitor_qemu.release(&other);
  free(other.state);
}

/* The VMM itself: nobody's uid, no_new_privs, a seccomp filter (qemu's -sandbox), namespaces
 * of its own (network included); and what the guest wrote is the workspace owner's on disk. */
static void test_vmm_confined(void **state) {
  NEED_VM();
  char path[64], line[256];
  snprintf(path, sizeof(path), "/proc/%d/status", (int)booted->vm.vmm_pid);
  FILE *f = fopen(path, "re");
  assert_non_null(f);
  bool uid = false, nnp = false, seccomp = false;
  while (fgets(line, sizeof(line), f)) {
    uid |= strcmp(line, "Uid:\t65534\t65534\t65534\t65534\n") == 0;
    nnp |= strcmp(line, "NoNewPrivs:\t1\n") == 0;
    seccomp |= strcmp(line, "Seccomp:\t2\n") == 0;
  }
  fclose(f);
  assert_true(uid);
  assert_true(nnp);
  assert_true(seccomp);
  static const char *const kinds[] = {"net", "mnt", "pid", "ipc", "uts", "user"};
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
    struct stat ours, its;
    snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)booted->vm.vmm_pid, kinds[i]);
    char own[64];
    snprintf(own, sizeof(own), "/proc/self/ns/%s", kinds[i]);
    assert_int_equal(stat(path, &its), 0);
    assert_int_equal(stat(own, &ours), 0);
    assert_true(its.st_ino != ours.st_ino);
  }
  struct cordon_exec_result res;
  run(ARGV("sh", "-c", "echo x >owned"), NULL, 30, NULL, &res);
  cordon_exec_result_clear(&res);
  struct stat ws, owned;
  snprintf(path, sizeof(path), "%s/owned", booted->workspace);
  assert_int_equal(stat(booted->workspace, &ws), 0);
  assert_int_equal(stat(path, &owned), 0);
  assert_int_equal(owned.st_uid, ws.st_uid);
}

/* The guest's sandbox user (1000, named cordon by the guest's own /etc/passwd, not the host's)
 * sees the workspace root as its own and can make a file and a symlink in it; on the host
 * both are the workspace owner's. */
static void test_guest_user_owns_workspace(void **state) {
  NEED_VM();
  struct cordon_exec_result res;
  run(ARGV("sh", "-c",
           "echo $(id -u) $(id -un) $(id -gn) $(stat -c '%u:%g' /workspace) $(getent passwd "
           "nobody | cut -d: -f1); echo made >made && ln -s made link"),
      NULL, 30, NULL, &res);
  assert_int_equal(res.exit_code, 0);
  assert_string_equal((char *)res.stdout_data, "1000 cordon cordon 1000:1000 nobody\n");
  cordon_exec_result_clear(&res);
  char path[128];
  const char *names[] = {"made", "link"};
  for (size_t i = 0; i < 2; i++) {
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", booted->workspace, names[i]);
    assert_int_equal(lstat(path, &st), 0);
    assert_int_equal(st.st_uid, WORKSPACE_OWNER);
    assert_int_equal(st.st_gid, WORKSPACE_OWNER);
    assert_int_equal(S_ISLNK(st.st_mode), i == 1);
  }
  /* The identity files are not the guest user's to change. */
  run(ARGV("sh", "-c", "echo x >>/etc/passwd"), NULL, 30, NULL, &res);
  assert_int_not_equal(res.exit_code, 0);
  cordon_exec_result_clear(&res);
}

static void test_no_network_but_loopback(void **state) {
  NEED_VM();
  struct cordon_exec_result res;
  run(ARGV("sh", "-c", "ls /sys/class/net | tr '\\n' ' '"), NULL, 30, NULL, &res);
  assert_string_equal((char *)res.stdout_data, "lo ");
  cordon_exec_result_clear(&res);
}

/* ---- pure ---------------------------------------------------------------------------------- */

static void test_cpio_single(void **state) {
  unsigned char *out = NULL;
  size_t length = 0;
  assert_int_equal(qemu_cpio_single("init", (const unsigned char *)"abc", 3, &out, &length), 0);
  assert_memory_equal(out, "070701", 6);
  assert_int_equal(length % 4, 0);
  /* Name after the 110-byte header, data 4-aligned after it, then the trailer. */
  assert_memory_equal(out + 110, "init", 5);
  assert_memory_equal(out + 116, "abc", 3);
  assert_non_null(memmem(out, length, "TRAILER!!!", 10));
  free(out);
}

static void test_argv(void **state) {
  struct microvm_config cfg = {.workspace = "/w",
                               .control_dir = "/c",
                               .memory_bytes = 512ull << 20,
                               .vcpus = 2,
                               .egress = CORDON_EGRESS_NONE};
  char **argv =
      qemu_argv_build("/usr/bin/qemu", &cfg, false, false, "/g/vmlinux", "/c/initrd.img", "/w");
  assert_non_null(argv);
  bool tcg = false, mem = false, smp = false, sandbox = false, net = false, acpi_off = false;
  bool mitigations_off = false, rtc = false, norandmaps = false, noapictimer = false;
  for (size_t i = 0; argv[i]; i++) {
    /* The RTC stays: without it the guest's boot polls the absent CMOS for up to a second. */
    rtc |= strcmp(argv[i], "microvm,rtc=on") == 0;
    tcg |= strncmp(argv[i], "tcg,", 4) == 0 || strcmp(argv[i], "tcg") == 0;
    mem |= strcmp(argv[i], "512M") == 0;
    smp |= i > 0 && strcmp(argv[i - 1], "-smp") == 0 && strcmp(argv[i], "2") == 0;
    sandbox |= strncmp(argv[i], "on,obsolete=deny", 16) == 0;
    net |= strstr(argv[i], "netdev") || strstr(argv[i], "virtio-net");
    acpi_off |= strstr(argv[i], "acpi=off") != NULL;
    if (strstr(argv[i], "cordon.root=")) {
      assert_non_null(strstr(argv[i], "cordon.net=none"));
      mitigations_off |= strstr(argv[i], "mitigations=off") != NULL;
      norandmaps |= strstr(argv[i], " norandmaps") != NULL;
      noapictimer |= strstr(argv[i], " noapictimer") != NULL;
    }
  }
  assert_true(tcg && mem && smp && sandbox && rtc);
  assert_false(net);            /* no NIC at all */
  assert_false(acpi_off);       /* Debian's kernel needs ACPI on microvm */
  assert_true(mitigations_off); /* TCG: nothing to protect, much to pay */
  assert_true(norandmaps);      /* TCG: translated code found again at the same addresses */
  assert_false(noapictimer);    /* Debian's kernel: its tick stopped without the APIC timer */
  qemu_argv_free(argv);
  /* The minimal kernel: no ACPI on the machine; under KVM the guest keeps its mitigations. */
  argv = qemu_argv_build("/usr/bin/qemu", &cfg, true, true, "/g/vmlinux", "/c/initrd.img", "/w");
  assert_non_null(argv);
  acpi_off = mitigations_off = norandmaps = noapictimer = false;
  for (size_t i = 0; argv[i]; i++) {
    acpi_off |= strcmp(argv[i], "microvm,rtc=on,acpi=off") == 0;
    mitigations_off |= strstr(argv[i], "mitigations=off") != NULL;
    norandmaps |= strstr(argv[i], "norandmaps") != NULL;
    noapictimer |= strstr(argv[i], "noapictimer") != NULL;
  }
  assert_true(acpi_off);
  assert_false(mitigations_off);
  assert_false(norandmaps);  /* KVM: the guest keeps its ASLR */
  assert_false(noapictimer); /* KVM: the guest keeps its APIC timer */
  qemu_argv_free(argv);
  /* The minimal kernel under TCG: no busy-polled calibration of the APIC timer at boot. */
  argv = qemu_argv_build("/usr/bin/qemu", &cfg, false, true, "/g/vmlinux", "/c/initrd.img", "/w");
  assert_non_null(argv);
  noapictimer = false;
  for (size_t i = 0; argv[i]; i++)
    noapictimer |= strstr(argv[i], "cordon.root=") && strstr(argv[i], " noapictimer ");
  assert_true(noapictimer);
  qemu_argv_free(argv);
}

static void test_preflight_refuses_kvm(void **state) {
  char *why = NULL;
  if (microvm_kvm_usable(&why)) {
    free(why);
    skip();
  }
  struct microvm_config cfg = {.accel = MICROVM_ACCEL_KVM};
  struct microvm_preflight pf;
  expect_ok(microvm_monitor_qemu.preflight(&cfg, &pf, NULL), NULL);
  char *line = microvm_preflight_describe(&microvm_monitor_qemu, &pf);
  assert_non_null(line);
  assert_non_null(strstr(line, "KVM was asked for"));
  assert_int_equal(pf.accel, MICROVM_ACCEL_KVM); /* never TCG instead */
  free(line);
  free(why);
  microvm_preflight_clear(&pf);
  /* AUTO where KVM does not work: TCG. */
  cfg.accel = MICROVM_ACCEL_AUTO;
  expect_ok(microvm_monitor_qemu.preflight(&cfg, &pf, NULL), NULL);
  assert_int_equal(pf.accel, MICROVM_ACCEL_TCG);
  microvm_preflight_clear(&pf);
}

int main(void) {
  const struct CMUnitTest pure[] = {
      cmocka_unit_test(test_cpio_single),
      cmocka_unit_test(test_argv),
      cmocka_unit_test(test_preflight_refuses_kvm),
  };
  const struct CMUnitTest vm[] = {
      cmocka_unit_test(test_stdout_stderr_stdin),
      cmocka_unit_test(test_exit_codes),
      cmocka_unit_test(test_timeout_kills_tree),
      cmocka_unit_test(test_cwd_and_bounds),
      cmocka_unit_test(test_attach),
      cmocka_unit_test(test_vmm_confined),
      cmocka_unit_test(test_no_network_but_loopback),
      cmocka_unit_test(test_guest_user_owns_workspace),
  };
  int failed = cmocka_run_group_tests_name("qemu-pure", pure, NULL, NULL);
  failed += cmocka_run_group_tests_name("qemu-vm", vm, group_setup, group_teardown);
  return failed;
}
