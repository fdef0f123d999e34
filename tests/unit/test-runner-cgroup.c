/* exec/runner.c's per-exec cgroup v2 leaf: the command is in the leaf at its first act, born
 * there by clone3 CLONE_INTO_CGROUP (with vfork refused by a seccomp filter, it still is: no
 * vfork-and-join was needed); where the kernel refuses that clone3 (no clone3: ENOSYS; no
 * CLONE_INTO_CGROUP: E2BIG or EINVAL, as a seccomp filter makes it here) the old path, a vfork
 * whose child joins the leaf, still puts the whole tree in the leaf. Either way a setsid daemon
 * the command leaves is killed with the leaf. Skips with the reason where no leaf can be made. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "exec/runner.h"

static const char *const test_env[] = {"PATH=/usr/bin:/bin", NULL};
#define ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Our own v2 cgroup ("/..." from the "0::" line) when the runner can make a leaf under it (a
 * v2 hierarchy, our cgroup writable, cgroup.kill present); else false with the reason. */
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

static bool process_with_argument_exists(const char *marker) {
  DIR *proc = opendir("/proc");
  if (!proc)
    return false;
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

/* What one run found, as a bit set (0: all well), so a forked child can report it. */
enum {
  RUN_FAILED = 1,      /* exec_run failed or the command did not exit 0 */
  NOT_IN_LEAF = 2,     /* the command's first act did not see itself in a leaf of ours */
  DAEMON_LEFT = 4,     /* the setsid daemon outlived the exec: the leaf did not hold it */
  FILTER_MISSING = 8,  /* the seccomp filter could not be installed */
  CLONE3_ALLOWED = 16, /* the filter did not make clone3 fail as asked */
};

/* A unique argument to find the daemon by (GNU sleep sums its arguments). */
static void make_marker(char *buf, size_t size, int salt) {
  snprintf(buf, size, "0.000%d%03d1", (int)getpid(), salt);
}

/* The command reads /proc/self/cgroup as its first act, and leaves a setsid daemon behind,
 * which only the leaf holds (it leaves the process group). */
static int run_and_check(const char *own, int salt, bool with_tree) {
  char marker[64], script[512];
  make_marker(marker, sizeof(marker), salt);
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
      cmocka_unit_test(test_command_in_its_leaf),
      cmocka_unit_test(test_old_path_when_clone3_is_refused),
      cmocka_unit_test(test_born_in_the_leaf),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
