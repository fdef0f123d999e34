/* The process runner: run argv (never a shell) with captured, bounded stdout/stderr, stdin
 * bytes, an environment, a working directory and a timeout that kills the command's whole
 * process tree.
 *
 * The runner owns the pipes and the event loop; a launcher owns process creation. The default
 * launcher forks and execs on the host (a new process group, and a per-exec cgroup v2 leaf
 * when one can be made, so daemonised grandchildren die too). Backends that start commands
 * elsewhere (inside a namespace holder, a container, a VM) supply their own launcher. */
#ifndef CORDON_EXEC_RUNNER_H
#define CORDON_EXEC_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <cordon/backend.h>
#include <cordon/error.h>

struct exec_spec {
  const char *const *argv; /* argv[0] searched in PATH (of envp) when it has no '/' */
  const char *cwd;         /* NULL: inherit */
  const char *const *envp; /* the final environment; NULL: empty */
  const void *stdin_data;  /* NULL: /dev/null */
  size_t stdin_length;
  size_t max_output; /* per stream; 0: CORDON_EXEC_DEFAULT_MAX_OUTPUT */
  double timeout;    /* seconds; <= 0: none */
  /* NULL: capture stdout/stderr. Otherwise the command gets caller_fds[1], [2] (and [0] when
   * >= 0) directly, and the result holds no output. */
  const int *caller_fds;
  bool tty; /* fd 0 is a terminal to become the command's controlling terminal */
  /* NULL, or how to tell that the command's work is over before its process ends. */
  struct exec_early_end *early_end;
};

/* A command that reports its result elsewhere before its process ends (gvisor's one-shot run:
 * the status record is written, then runsc tears its sandbox down at leisure). Each time fd
 * becomes readable the runner asks check(data); true ends the run as the command's exit would:
 * the tree killed, the output drained to EOF, the process reaped (its own status is then the
 * kill's, which the caller ignores for the one it was told). Honoured only where the launcher
 * kills the tree whole (exec_launcher.kills_whole_tree); ended_early says whether it was. */
struct exec_early_end {
  int fd;
  bool (*check)(void *data); /* must consume what made fd readable */
  void *data;
  bool ended_early; /* out */
};

/* The spec of a backend's exec request (already normalised by the library: env final, timeout
 * resolved), run in cwd. */
static inline struct exec_spec exec_spec_from_request(const struct cordon_exec_request *req,
                                                      const char *cwd) {
  return (struct exec_spec){
      .argv = req->argv,
      .cwd = cwd,
      .envp = req->env,
      .stdin_data = req->stdin_data,
      .stdin_length = req->stdin_length,
      .max_output = req->max_output,
      .timeout = req->timeout,
      .caller_fds = req->caller_stdio ? req->stdio_fds : NULL,
      .tty = req->caller_stdio && req->tty,
  };
}

/* How a command is started, awaited and killed. All callbacks get launcher->data. */
struct exec_launcher {
  void *data;
  /* Start spec's command with stdio_fds[0..2] as its fds 0, 1, 2 (the launcher must not keep
   * them open after start returns). On success returns 0 and sets *exit_fd to an fd that
   * becomes readable when the command has ended (the runner closes it). A command that cannot
   * be executed is not a start failure: it ends with status 126/127 and a message on stderr. */
  int (*start)(void *data, const struct exec_spec *spec, const int stdio_fds[3], int *exit_fd,
               struct cordon_error **err);
  /* Collect the ended command's status: *exit_code is 0..255, or 128+N with *term_signal = N
   * when killed by a signal. Called once, after exit_fd became readable. */
  int (*reap)(void *data, int *exit_code, int *term_signal, struct cordon_error **err);
  /* Kill every process the command started (called on timeout, and after the command ended,
   * to remove what it left running). Idempotent. */
  void (*kill_tree)(void *data);
  /* Whether kill_tree reaches every process the command started, wherever it went (a cgroup,
   * not a process group). May be NULL: no. */
  bool (*kills_whole_tree)(void *data);
  /* Release resources (called once at the end, whatever happened). May be NULL. */
  void (*cleanup)(void *data);
};

/* Run with the default host launcher. */
int exec_run(const struct exec_spec *spec, struct cordon_exec_result *res,
             struct cordon_error **err);

/* Run with a custom launcher. */
int exec_run_with(const struct exec_spec *spec, const struct exec_launcher *launcher,
                  struct cordon_exec_result *res, struct cordon_error **err);

/* Find argv0 in the PATH of envp (or a default PATH). Returns a malloc'd path, or NULL with
 * errno ENOENT (not found) or EACCES (found but not executable). Names with '/' are returned
 * as they are. Empty and relative PATH entries are skipped (they would depend on a cwd). */
char *exec_find_program(const char *argv0, const char *const *envp);

#endif
