/* Streaming stdio and -i/-t for run and session exec (see stream.h). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/strv.h"
#include "cli/cli.h"
#include "cli/stream.h"
#include "exec/pty.h"

/* The pty a SIGWINCH resizes; one exec per process at a time. */
static struct exec_pty *volatile resized_pty;
static struct sigaction previous_winch;
static bool winch_installed;

static void on_window_change(int sig) {
  (void)sig;
  int saved = errno;
  exec_pty_resize(resized_pty);
  errno = saved;
}

int cli_stream_check(struct cli_stream *st, const char *verb, const char **stdin_file) {
  if ((st->interactive || st->tty) && *stdin_file) {
    cli_usage_error(verb, "--stdin cannot be combined with -i or -t");
    return -1;
  }
  if (st->tty && st->json) {
    cli_usage_error(verb, "-t gives the command a terminal, which --json cannot capture");
    return -1;
  }
  if (st->interactive && st->json)
    *stdin_file = "-";
  st->stdin_file = *stdin_file;
  return 0;
}

int cli_stream_prepare(struct cli_stream *st, const char *const *env,
                       struct cordon_exec_request *req, struct cordon_error **err) {
  const char *term = getenv("TERM");
  if (st->tty && term && *term) {
    char *entry = NULL;
    if (asprintf(&entry, "TERM=%s", term) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "environment");
    const char *const ours[] = {entry, NULL};
    /* An explicit --env TERM=... wins over cordon's own. */
    st->env = strv_env_merge(ours, env);
    free(entry);
  } else {
    st->env = strv_copy(env);
  }
  if (!st->env)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "environment");
  req->env = (const char *const *)st->env;
  if (st->json)
    return 0;
  req->caller_stdio = true;
  req->stdio_fds[0] = st->interactive ? STDIN_FILENO : -1;
  req->stdio_fds[1] = STDOUT_FILENO;
  req->stdio_fds[2] = STDERR_FILENO;
  if (!st->tty)
    return 0;
  /* The window follows cordon's terminal: stdin's, else stdout's. */
  int size_fd = isatty(STDIN_FILENO) ? STDIN_FILENO : isatty(STDOUT_FILENO) ? STDOUT_FILENO : -1;
  if (exec_pty_open(st->interactive ? STDIN_FILENO : -1, STDOUT_FILENO, size_fd, &st->pty, err) < 0)
    return -1;
  int slave = exec_pty_slave(st->pty);
  req->tty = true;
  req->stdio_fds[0] = req->stdio_fds[1] = req->stdio_fds[2] = slave;
  return 0;
}

int cli_stream_start(struct cli_stream *st, struct cordon_error **err) {
  if (!st->pty)
    return 0;
  resized_pty = st->pty;
  struct sigaction sa = {.sa_handler = on_window_change, .sa_flags = SA_RESTART};
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGWINCH, &sa, &previous_winch) == 0)
    winch_installed = true;
  return exec_pty_start(st->pty, err);
}

void cli_stream_end(struct cli_stream *st) {
  if (st->pty) {
    if (winch_installed)
      sigaction(SIGWINCH, &previous_winch, NULL);
    winch_installed = false;
    resized_pty = NULL;
    exec_pty_free(st->pty);
    st->pty = NULL;
  }
  strv_free(st->env);
  st->env = NULL;
}
