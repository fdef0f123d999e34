/* Program lookup and waiting for the agent's landlock and gvisor mechanisms (agent-exec.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent-exec.h"
#include "base/cleanup.h"

static int executable_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int agent_exec_resolve(const char *name, const char *search_path, char **out,
                       struct cordon_error **err) {
  if (!name || !*name)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "no program to run");
  if (strchr(name, '/')) {
    *out = strdup(name);
    return *out ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "program path");
  }
  _cleanup_free_ char *dirs = strdup(search_path ? search_path : "/usr/local/bin:/usr/bin:/bin");
  if (!dirs)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "PATH");
  char *save = NULL;
  for (char *dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
    if (dir[0] != '/') /* a relative PATH entry would depend on the directory we start in */
      continue;
    _cleanup_free_ char *candidate = NULL;
    if (asprintf(&candidate, "%s/%s", dir, name) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "program path");
    if (executable_file(candidate)) {
      *out = steal_ptr(&candidate);
      return 0;
    }
  }
  return cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0, "%s: not found on the agent's PATH", name);
}

int agent_exec_wait(pid_t pid, int *exit_code, struct cordon_error **err) {
  struct sigaction ignore = {.sa_handler = SIG_IGN}, old_int, old_quit;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGINT, &ignore, &old_int);
  sigaction(SIGQUIT, &ignore, &old_quit);
  int status = 0;
  pid_t r;
  do
    r = waitpid(pid, &status, 0);
  while (r < 0 && errno == EINTR);
  int saved = errno;
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGQUIT, &old_quit, NULL);
  if (r < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, saved, "waiting for the agent (pid %d)",
                            (int)pid);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return 0;
}
