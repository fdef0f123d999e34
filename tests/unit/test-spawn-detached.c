/* proc_spawn_detached (src/base/spawn-detached.c): the program starts in a session of its own,
 * with stdio on /dev/null, the kept fd as fd 3 and no other fd of ours, an empty signal mask,
 * the environment given, and arguments copied (freed by the caller at once). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/spawn-detached.h"

static char *read_all(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f)
    return NULL;
  static char buf[8192];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  buf[n] = 0;
  fclose(f);
  return strdup(buf);
}

static void test_spawn(void **state) {
  (void)state;
  char dir[] = "/tmp/cordon-spawn-detached.XXXXXX";
  assert_non_null(mkdtemp(dir));
  char kept[256], out[256], script[1024];
  snprintf(kept, sizeof(kept), "%s/kept", dir);
  snprintf(out, sizeof(out), "%s/out", dir);
  int keep = open(kept, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  assert_true(keep >= 0);
  /* An fd of ours that must not reach the child, on 5 or above. */
  int stray = open("/dev/null", O_RDONLY); /* not O_CLOEXEC on purpose */
  assert_true(stray >= 0);
  /* Signals blocked here must not stay blocked there. */
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGTERM);
  sigprocmask(SIG_BLOCK, &block, &old);
  snprintf(script, sizeof(script),
           "exec >%s; ls /proc/$$/fd | sort -n | tr '\\n' ' '; echo; "
           "readlink /proc/$$/fd/3; echo \"$MARK\"; "
           "echo pgid=$(ps -o pgid= -p $$ | tr -d ' '); grep SigBlk /proc/$$/status; echo \"$1\"",
           out);
  char *argv_heap[] = {strdup("sh"), strdup("-c"),     strdup(script),
                       strdup("sh"), strdup("copied"), NULL};
  char *envp_heap[] = {strdup("MARK=from-envp"), strdup("PATH=/usr/bin:/bin"), NULL};
  pid_t pid = proc_spawn_detached("/bin/sh", argv_heap, envp_heap, keep);
  /* The caller may free its vectors at once: the child has its own copies. */
  for (char **a = argv_heap; *a; a++) {
    memset(*a, 'X', strlen(*a));
    free(*a);
  }
  for (char **e = envp_heap; *e; e++)
    free(*e);
  sigprocmask(SIG_SETMASK, &old, NULL);
  assert_true(pid > 0);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char *text = read_all(out);
  assert_non_null(text);
  /* fds 0-3 (and the one ls reads /proc/$$/fd through is its own, not the shell's) */
  assert_non_null(strstr(text, "0 1 2 3 \n"));
  assert_non_null(strstr(text, kept));
  assert_non_null(strstr(text, "from-envp"));
  char pgid[64];
  snprintf(pgid, sizeof(pgid), "pgid=%d\n", pid); /* its own process group */
  assert_non_null(strstr(text, pgid));
  assert_non_null(strstr(text, "SigBlk:\t0000000000000000"));
  assert_non_null(strstr(text, "copied\n"));
  free(text);
  close(keep);
  close(stray);
  unlink(kept);
  unlink(out);
  rmdir(dir);
}

static void test_missing_program(void **state) {
  (void)state;
  char *argv[] = {"nothing", NULL};
  char *envp[] = {NULL};
  pid_t pid = proc_spawn_detached("/nonexistent/program", argv, envp, -1);
  assert_true(pid > 0); /* started: the exec fails in the child, which exits 127 */
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 127);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_spawn),
                                     cmocka_unit_test(test_missing_program)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
