/* cordon-docker-init: the one static binary the docker backend bind-mounts (read-only) into
 * every session container. It has three verbs:
 *
 *   init                     pid 1 of the container: reaps orphans and serves the exec agent
 *                            (below); a SIGTERM/SIGINT/SIGHUP from outside the container
 *                            (docker stop) kills everything and exits at once, so stopping a
 *                            session never waits for a timeout.
 *   exec [options] -- ARGV   the wrapper every cordon exec runs under (see below).
 *   kill-exec TOKEN          fallback used by the host when a wrapper cannot finish its own
 *                            job: kills the wrapper started with --token TOKEN, its tree, and
 *                            every orphan (a process reparented to pid 1 lost its wrapper).
 *   bridge                   egress restricted: started by init when the host's proxy socket
 *                            is in the agent's directory; relays 127.0.0.1:3128 to it.
 *
 * The exec wrapper is what gives docker execs the semantics of cordon's process runner:
 *   - its keeper (a child of the wrapper) is a child subreaper, so everything the command
 *     starts, including daemonised (setsid, double-forked) grandchildren, stays its
 *     descendant; when the timeout fires, it kills that whole tree and nothing else in the
 *     container. A command that ends by itself keeps what it left running: the wrapper
 *     reports and exits (so `docker exec` returns), the keeper goes on under init as the
 *     reaper of that tree until it ends or the session does;
 *   - the command runs in a new session, with exactly the requested environment (--keep names
 *     the variables to keep from what the engine passed), in --cwd, with fds 0-2 only;
 *   - "not found" is 127 and "cannot execute" 126, with a message on stderr;
 *   - cordon's seccomp denials (the ns backend's list, confine/seccomp.c) are installed on top
 *     of the engine's default profile (filters stack: a syscall must pass both), so the
 *     command gets Docker's default plus ours; with no engine profile in force it refuses;
 *   - at the end it writes a status trailer as the last bytes of stderr, which the host strips:
 *     "\0cordon-exec-status:KIND:N\n" with KIND exit, signal, timeout, chdir, setup,
 *     noseccomp or execfail (execve failed: N is 126 or 127, as the exit code). The
 *     engine's exit code (exec inspect) cannot tell "exit 143" from "killed by SIGTERM" or a
 *     timeout from a SIGKILL; the trailer can.
 *
 * The exec agent is the fast path (the engine's exec API costs 70-80 ms per exec, almost all of
 * it `runc exec`): init listens on DOCKER_AGENT_TARGET/DOCKER_AGENT_SOCKET (a host directory
 * private to the session, bind-mounted) and forks one monitor per connection. The monitor
 * reads a request (agent.h: cwd, argv, environment, timeout, and the command's stdio as
 * three fds), runs the command exactly as the exec wrapper does (same child setup, seccomp
 * stacking, 126/127), is the child subreaper of its tree, and kills that whole tree when the
 * host sends 'K' or hangs up, or when the timeout fires; then it replies with the status. A
 * command that ends by itself keeps what it left running in the background: the monitor
 * replies, then stays the subreaper of those processes until they end (monitor_keep), and the
 * session's end kills them. A monitor that dies without finishing (killed from inside the
 * container) leaves orphans to init, which kills every child of its own that is not a live
 * monitor, with its tree. Init and the monitors are not dumpable: the workload (same uid, no
 * capabilities) can neither ptrace them nor reach their fds through /proc.
 *
 * Static (no loader, no libraries in the image needed), no allocation after the command
 * started but what /proc scanning needs. Written for Linux x86-64 containers. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/close_range.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backends/docker/agent.h"
#include "backends/docker/protocol.h"
#include "base/proc.h"
#include "base/syscalls.h"
#include "confine/seccomp.h"
#include "net/daemon.h"
#include "net/proxy.h"

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
/* Upper bound on kill passes over /proc; each pass kills what it finds, so a tree ends in a
 * few passes unless something forks faster than we scan. */
#define KILL_PASSES 2000

extern char **environ;

static void write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return;
    p += w;
    n -= (size_t)w;
  }
}

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (n > 0)
    write_all(STDERR_FILENO, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* ---- /proc scanning --------------------------------------------------------------------- */

struct proc {
  pid_t pid, ppid;
  bool marked;
};

struct proc_table {
  struct proc *items;
  size_t count, capacity;
};

/* The parent of a live process. Zombies and dead entries are skipped: they cannot fork and are
 * reaped by their parent (or by us, once reparented). */
static bool read_stat(pid_t pid, pid_t *ppid) {
  struct proc_stat st;
  if (proc_stat_read(pid, &st) < 0 || st.state == 'Z' || st.state == 'X' || st.state == 'x')
    return false;
  *ppid = st.parent;
  return true;
}

static void proc_table_scan(struct proc_table *t) {
  t->count = 0;
  DIR *d = opendir("/proc");
  if (!d)
    return;
  struct dirent *de;
  while ((de = readdir(d))) {
    char *end = NULL;
    long pid = strtol(de->d_name, &end, 10);
    if (!*de->d_name || *end || pid <= 0)
      continue;
    pid_t ppid;
    if (!read_stat((pid_t)pid, &ppid))
      continue;
    if (t->count == t->capacity) {
      size_t cap = t->capacity ? t->capacity * 2 : 256;
      struct proc *items = realloc(t->items, cap * sizeof(*items));
      if (!items)
        break;
      t->items = items;
      t->capacity = cap;
    }
    t->items[t->count++] = (struct proc){.pid = (pid_t)pid, .ppid = ppid};
  }
  closedir(d);
}

/* Mark every process whose ancestry reaches a marked one (fixpoint; tables are small). */
static void proc_table_mark_descendants(struct proc_table *t) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (size_t i = 0; i < t->count; i++) {
      if (t->items[i].marked)
        continue;
      for (size_t j = 0; j < t->count; j++)
        if (t->items[j].marked && t->items[j].pid == t->items[i].ppid) {
          t->items[i].marked = true;
          changed = true;
          break;
        }
    }
  }
}

static void reap_any(void) {
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

/* The command a wrapper or monitor runs, and what became of it. */
struct command {
  pid_t pid;
  int status;
  bool done;
};

/* Reap every child that ended (the command, and orphans of its tree: we are their subreaper),
 * keeping the command's own status. */
static void command_reap(struct command *c) {
  int status;
  pid_t p;
  while ((p = waitpid(-1, &status, WNOHANG)) > 0)
    if (p == c->pid && !c->done) {
      c->status = status;
      c->done = true;
    }
}

/* Kill our descendants (we are their subreaper, so orphans among them come back to us and
 * stay in the tree) until none is left, then make sure the command's status is in. */
static void command_finish(struct command *c) {
  pid_t self = getpid();
  struct proc_table t = {0};
  for (int pass = 0; pass < KILL_PASSES; pass++) {
    proc_table_scan(&t);
    size_t found = 0;
    for (size_t i = 0; i < t.count; i++)
      t.items[i].marked = t.items[i].ppid == self;
    proc_table_mark_descendants(&t);
    for (size_t i = 0; i < t.count; i++)
      if (t.items[i].marked && t.items[i].pid != self) {
        kill(t.items[i].pid, SIGKILL);
        found++;
      }
    command_reap(c);
    if (found == 0)
      break;
    nap_ms(1);
  }
  free(t.items);
  if (!c->done && waitpid(c->pid, &c->status, 0) == c->pid)
    c->done = true;
}

/* ---- seccomp ------------------------------------------------------------------------------ */

/* cordon's denials (confine/seccomp.c, the ns backend's list) on top of the engine's profile. */
static int install_denials(void) {
  struct cordon_error *err = NULL;
  if (confine_seccomp_install(&err) < 0) {
    int e = err && err->errnum ? err->errnum : EINVAL;
    cordon_error_free(err);
    return e;
  }
  return 0;
}

/* Did the engine put us under a seccomp filter? ("Seccomp: 2" in /proc/self/status) */
static bool engine_filter_present(void) {
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return false;
  buf[n] = 0;
  const char *line = strstr(buf, "\nSeccomp:");
  return line && strtol(line + 9, NULL, 10) == 2;
}

/* ---- exec ----------------------------------------------------------------------------------- */

struct exec_options {
  const char *token;
  const char *cwd;
  long timeout_ms; /* 0: none */
  const char **keep;
  size_t n_keep;
  char **argv;
};

enum { STAGE_CHDIR = 1, STAGE_SETUP, STAGE_NO_SECCOMP, STAGE_EXEC };

struct child_report {
  int stage;
  int errnum;
};

static bool kept(const struct exec_options *o, const char *entry) {
  const char *eq = strchr(entry, '=');
  size_t n = eq ? (size_t)(eq - entry) : strlen(entry);
  for (size_t i = 0; i < o->n_keep; i++)
    if (strlen(o->keep[i]) == n && !memcmp(o->keep[i], entry, n))
      return true;
  return false;
}

/* PATH search with the command's own PATH. Returns 0 with *program set, or an errno: ENOENT
 * when nothing was found, EACCES when something was found but is not executable. */
static int find_program(const char *name, char **envp, char *out, size_t out_size) {
  if (strchr(name, '/')) {
    snprintf(out, out_size, "%s", name);
    return 0;
  }
  const char *path = DEFAULT_PATH;
  for (char **e = envp; *e; e++)
    if (!strncmp(*e, "PATH=", 5))
      path = *e + 5;
  int result = ENOENT;
  for (const char *p = path; *p;) {
    const char *colon = strchr(p, ':');
    size_t len = colon ? (size_t)(colon - p) : strlen(p);
    if (len > 0 && p[0] == '/' && len + strlen(name) + 2 <= out_size) {
      memcpy(out, p, len);
      out[len] = '/';
      strcpy(out + len + 1, name);
      if (access(out, X_OK) == 0)
        return 0;
      if (errno == EACCES)
        result = EACCES;
    }
    p += len;
    if (*p == ':')
      p++;
  }
  return result;
}

static _Noreturn void child_fail(int report_fd, int stage, int errnum, int code) {
  struct child_report r = {.stage = stage, .errnum = errnum};
  ssize_t n;
  do
    n = write(report_fd, &r, sizeof(r));
  while (n < 0 && errno == EINTR);
  _exit(code);
}

/* Wait until the command's process exec'd (its end of the report pipe closes at execve) or
 * failed before that: true with *rep filled in the second case. */
static bool command_failed_early(int report_read, struct child_report *rep) {
  ssize_t n;
  do
    n = read(report_read, rep, sizeof(*rep));
  while (n < 0 && errno == EINTR);
  close(report_read);
  return n == (ssize_t)sizeof(*rep) && rep->stage != STAGE_EXEC;
}

/* The command's process: fds 0-2 (from stdio when given), a new session, cwd, exactly envp,
 * cordon's seccomp denials on the engine's profile, then execve. Failures before execve go to
 * report_fd as a child_report. */
/* The agent compiles cordon's filter once, at start: compiling it per exec (libseccomp) costs
 * milliseconds, attaching it one system call. NULL: compile in the child (the exec wrapper). */
static struct confine_seccomp_program agent_filter;
static bool agent_filter_ready;

/* Out of memory in the container, the command is the OOM killer's victim, never init or the
 * exec's monitor (whose death would end the session or lose the exec's status): raise its OOM
 * score to the top, which needs no privilege (lowering it below the engine's does). Its /proc
 * files are root's while it is not dumpable: become dumpable, as execve would make it anyway.
 * Called with the seccomp filters in force, so whatever attaches to it meanwhile gets no more
 * than the command will have. Best effort: without /proc nothing changes. */
static void prefer_as_oom_victim(void) {
  prctl(PR_SET_DUMPABLE, 1);
  int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    (void)!write(fd, "1000", 4);
    close(fd);
  }
}

static _Noreturn void child_run(const char *cwd, char *const *argv, char **envp, const int *stdio,
                                int report_fd) {
  for (int sig = 1; sig < NSIG; sig++) {
    struct sigaction sa = {.sa_handler = SIG_DFL};
    sigaction(sig, &sa, NULL);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  setsid();
  umask(022); /* never the caller's or the image's: the same command makes the same tree */
  /* The agent's received fds are all >= 3 (0-2 are init's /dev/null), so no dup2 here can
   * overwrite a source still to be copied. */
  for (int i = 0; stdio && i < 3; i++)
    if (dup2(stdio[i], i) < 0)
      child_fail(report_fd, STAGE_SETUP, errno, 126);
  /* A terminal on fd 0 (cordon -t hands over a pty slave) becomes the controlling terminal of
   * this new session, so the command gets job control and Ctrl-C. Without force: a terminal
   * that already controls a session (the caller's own, under -i) stays with it; failure here
   * only means no controlling terminal, as before. */
  if (stdio)
    (void)ioctl(0, TIOCSCTTY, 0);
  if (cwd && chdir(cwd) < 0)
    child_fail(report_fd, STAGE_CHDIR, errno, 126);
  /* Only 0-2 reach the command; the report pipe closes at execve. */
  if (sys_close_range(3u, ~0u, CLOSE_RANGE_CLOEXEC) < 0)
    for (int fd = 3; fd < 1024; fd++)
      if (fd != report_fd)
        close(fd);
  /* Docker's default profile must already be in force (fail closed): ours adds to it. */
  if (!engine_filter_present())
    child_fail(report_fd, STAGE_NO_SECCOMP, 0, 126);
  int r;
  if (agent_filter_ready) {
    /* The engine set no_new_privs already (no-new-privileges); seccomp needs it said. */
    r = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ? errno : -confine_seccomp_attach(&agent_filter);
  } else {
    r = install_denials();
  }
  if (r != 0)
    child_fail(report_fd, STAGE_SETUP, r, 126);
  prefer_as_oom_victim();
  char program[PATH_MAX];
  int e = find_program(argv[0], envp, program, sizeof(program));
  if (e == 0) {
    execve(program, argv, envp);
    e = errno;
  }
  say("cordon: %s: %s\n", argv[0], strerror(e));
  child_fail(report_fd, STAGE_EXEC, e, e == ENOENT ? 127 : 126);
}

static void trailer(const char *kind, int value) {
  /* The magic starts with a NUL byte: build the line by hand and send it in one write(), so
   * that it lands contiguously at the end of the stream. */
  char buf[128];
  size_t m = sizeof(DOCKER_TRAILER_MAGIC) - 1;
  memcpy(buf, DOCKER_TRAILER_MAGIC, m);
  int n = snprintf(buf + m, sizeof(buf) - m, "%s:%d\n", kind, value);
  if (n > 0)
    write_all(STDERR_FILENO, buf, m + (size_t)n);
}

/* The exec is over and its command left processes running: stay their subreaper (so that
 * init's sweep for orphans, which spares live monitors' trees, leaves them alone) and reap
 * them until none is left. Session shutdown ends them: the engine's stop makes init kill
 * everything. Any living descendant makes a child of ours (orphans come back to us), so
 * waitpid ends with ECHILD exactly when the tree is gone. */
static void monitor_keep(void) {
  for (;;) {
    pid_t p = waitpid(-1, NULL, 0);
    if (p < 0 && errno == ECHILD)
      return;
    if (p < 0 && errno != EINTR)
      nap_ms(100);
  }
}

/* What the exec wrapper's keeper tells the wrapper: the trailer to write and the exit code. */
struct exec_outcome {
  char kind[16];
  int value, code;
};

static void outcome_set(struct exec_outcome *out, const char *kind, int value, int code) {
  snprintf(out->kind, sizeof(out->kind), "%s", kind);
  out->value = value;
  out->code = code;
}

/* The keeper's part of an exec (see exec_main): run the command as the subreaper of its tree,
 * wait for it or its timeout, and say what happened. True when the command ended by itself:
 * what it left running is kept, as the agent's monitor keeps it. */
static bool exec_keeper_run(struct exec_options *o, char **envp, struct exec_outcome *out) {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  int report[2];
  if (pipe2(report, O_CLOEXEC) < 0) {
    outcome_set(out, "setup", errno, 126);
    return false;
  }
  double deadline = o->timeout_ms > 0 ? now() + (double)o->timeout_ms / 1000.0 : 0;
  struct command child = {.pid = fork()};
  if (child.pid < 0) {
    say("cordon: cannot start %s: %s\n", o->argv[0], strerror(errno));
    outcome_set(out, "setup", errno, 126);
    return false;
  }
  if (child.pid == 0)
    child_run(o->cwd, o->argv, envp, NULL, report[1]);
  close(report[1]);
  struct child_report rep = {0};
  bool timed_out = false;
  if (command_failed_early(report[0], &rep)) {
    command_finish(&child);
    outcome_set(out,
                rep.stage == STAGE_CHDIR        ? "chdir"
                : rep.stage == STAGE_NO_SECCOMP ? "noseccomp"
                                                : "setup",
                rep.errnum, 126);
    return false;
  }
  while (!child.done) {
    struct timespec wait = {.tv_sec = 3600}, *wp = &wait;
    if (deadline > 0) {
      double left = deadline - now();
      if (left <= 0) {
        timed_out = true;
        break;
      }
      wait.tv_sec = (time_t)left;
      wait.tv_nsec = (long)((left - (double)wait.tv_sec) * 1e9);
    }
    int sig = sigtimedwait(&mask, NULL, wp);
    if (sig < 0 && errno != EAGAIN && errno != EINTR)
      nap_ms(10);
    command_reap(&child);
  }
  if (timed_out) {
    /* Its time is up: nothing it started may outlive it. */
    command_finish(&child);
    outcome_set(out, "timeout", SIGKILL, 128 + SIGKILL);
    return false;
  }
  if (rep.stage == STAGE_EXEC && WIFEXITED(child.status) &&
      (WEXITSTATUS(child.status) == 126 || WEXITSTATUS(child.status) == 127)) {
    /* execve failed (told through the report pipe before it closed): a kind of its own, so
     * that the host tells it apart from a command that exits 126/127 itself. */
    outcome_set(out, "execfail", WEXITSTATUS(child.status), WEXITSTATUS(child.status));
    return true;
  }
  if (WIFSIGNALED(child.status)) {
    outcome_set(out, "signal", WTERMSIG(child.status), 128 + WTERMSIG(child.status));
    return true;
  }
  int code = WIFEXITED(child.status) ? WEXITSTATUS(child.status) : 126;
  outcome_set(out, "exit", code, code);
  return true;
}

/* The keeper process: the child subreaper of the command's tree. It hands the outcome to the
 * wrapper through report_fd, and when the command ended by itself stays the reaper of what it
 * left running (a server, `cmd &`, a setsid daemon) until that ends or the session does. */
static _Noreturn void exec_keeper(struct exec_options *o, char **envp, int report_fd) {
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  struct exec_outcome out = {0};
  bool keep = exec_keeper_run(o, envp, &out);
  write_all(report_fd, (const char *)&out, sizeof(out));
  close(report_fd);
  if (keep) {
    /* Our copies of the exec's streams must not hold them open: the wrapper has them. */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; null >= 0 && fd < 3; fd++)
      dup2(null, fd);
    monitor_keep();
  }
  _exit(0);
}

/* The exec wrapper. `docker exec` lasts as long as the process it started, so that process
 * (this one) cannot also be the keeper of the command's background processes: it forks the
 * keeper, which runs the command, waits for the outcome, writes the trailer and exits. The
 * keeper, a child of ours with our command line (--token included, for kill-exec), goes on
 * under init when we exit. */
static int exec_main(struct exec_options *o) {
  /* Not ptrace-able by the command (same uid): it cannot rewrite our memory or our --token.
   * Inherited by the keeper. */
  prctl(PR_SET_DUMPABLE, 0);

  /* The engine passed the requested environment merged over the container's own; keep only
   * the requested names. */
  size_t n_env = 0;
  for (char **e = environ; *e; e++)
    n_env++;
  char **envp = calloc(n_env + 1, sizeof(char *));
  if (!envp)
    return 126;
  size_t k = 0;
  for (char **e = environ; *e; e++)
    if (kept(o, *e))
      envp[k++] = *e;

  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigprocmask(SIG_BLOCK, &mask, NULL);
  signal(SIGPIPE, SIG_IGN); /* the host may go away; the trailer write must not kill us */

  int outcome_pipe[2];
  if (pipe2(outcome_pipe, O_CLOEXEC) < 0) {
    trailer("setup", errno);
    return 126;
  }
  pid_t keeper = fork();
  if (keeper < 0) {
    say("cordon: cannot start %s: %s\n", o->argv[0], strerror(errno));
    trailer("setup", errno);
    return 126;
  }
  if (keeper == 0) {
    close(outcome_pipe[0]);
    exec_keeper(o, envp, outcome_pipe[1]);
  }
  close(outcome_pipe[1]);
  free(envp);
  struct exec_outcome out;
  ssize_t n;
  do
    n = read(outcome_pipe[0], &out, sizeof(out));
  while (n < 0 && errno == EINTR);
  close(outcome_pipe[0]);
  /* A keeper killed before it reported: no trailer, so the host kills what is left. */
  if (n != (ssize_t)sizeof(out))
    return 126;
  out.kind[sizeof(out.kind) - 1] = 0;
  trailer(out.kind, out.value);
  return out.code;
}

static int parse_exec(int argc, char **argv, struct exec_options *o) {
  o->keep = calloc((size_t)argc, sizeof(char *));
  if (!o->keep)
    return -1;
  int i = 2;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) {
      i++;
      break;
    }
    if (i + 1 >= argc)
      return -1;
    if (!strcmp(a, "--token"))
      o->token = argv[++i];
    else if (!strcmp(a, "--cwd"))
      o->cwd = argv[++i];
    else if (!strcmp(a, "--timeout-ms"))
      o->timeout_ms = strtol(argv[++i], NULL, 10);
    else if (!strcmp(a, "--keep"))
      o->keep[o->n_keep++] = argv[++i];
    else
      return -1;
  }
  if (i >= argc)
    return -1;
  o->argv = argv + i;
  return 0;
}

/* ---- kill-exec ---------------------------------------------------------------------------- */

/* Is pid a wrapper started with --token token (any token when NULL)? (argv: INIT exec --token
 * TOKEN ...) */
static bool is_wrapper(pid_t pid, const char *token) {
  char path[64], buf[4096];
  snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return false;
  buf[n] = 0;
  const char *args[4] = {0};
  size_t count = 0;
  for (const char *p = buf; p < buf + n && count < 4; p += strlen(p) + 1)
    args[count++] = p;
  return count == 4 && !strcmp(args[1], "exec") && !strcmp(args[2], "--token") &&
         (!token || !strcmp(args[3], token));
}

/* Is pid the egress bridge (argv exactly: DOCKER_INIT_TARGET bridge)? */
static bool is_bridge(pid_t pid) {
  char path[64], buf[256];
  snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return false;
  buf[n] = 0;
  const char *verb = buf + strlen(buf) + 1;
  return !strcmp(buf, DOCKER_INIT_TARGET) && verb < buf + n && !strcmp(verb, "bridge") &&
         verb + sizeof("bridge") == buf + n;
}

static int kill_exec_main(const char *token) {
  pid_t self = getpid();
  struct proc_table t = {0};
  for (int pass = 0; pass < KILL_PASSES; pass++) {
    proc_table_scan(&t);
    for (size_t i = 0; i < t.count; i++) {
      struct proc *p = &t.items[i];
      /* The wrapper (and its keeper), and every orphan: a process reparented to pid 1 lost
       * its wrapper. The keepers of earlier execs are orphans too, and what they keep must
       * outlive this exec: spared, with their trees. So is init's egress bridge. */
      p->marked = p->pid != 1 && p->pid != self &&
                  (is_wrapper(p->pid, token) ||
                   (p->ppid == 1 && !is_wrapper(p->pid, NULL) && !is_bridge(p->pid)));
    }
    proc_table_mark_descendants(&t);
    size_t found = 0;
    for (size_t i = 0; i < t.count; i++)
      if (t.items[i].marked && t.items[i].pid != self && t.items[i].pid != 1) {
        kill(t.items[i].pid, SIGKILL);
        found++;
      }
    if (found == 0)
      break;
    nap_ms(2);
  }
  free(t.items);
  return 0;
}

/* ---- the exec agent ------------------------------------------------------------------------ */

/* A host that hung up has nobody to tell: a failed reply is not an error here. */
static void send_reply(int conn, enum exec_wire_reply_type type, int32_t a, int32_t b) {
  (void)exec_wire_send_reply(conn, &docker_agent_protocol, type, a, b);
}

static int ms_left(double deadline) {
  double left = (deadline - now()) * 1000.0;
  return left <= 0 ? 0 : left > 3600000.0 ? 3600000 : (int)left + 1;
}

/* One exec, in a process of its own forked by init: read the request, run the command,
 * report, and leave nothing of its tree behind. Returns the monitor's exit code: 0 when it
 * did its job (init sweeps for orphans after any other end). */
static int monitor_serve(int conn) {
  /* Everything the command starts stays below us, daemons included. */
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  int fds[EXEC_WIRE_STDIO_FDS];
  struct exec_wire_request req;
  struct cordon_error *e = NULL;
  int r = exec_wire_receive_request(conn, &docker_agent_protocol, EXEC_WIRE_REQUEST_TIMEOUT_MS, fds,
                                    &req, &e);
  /* 0: a connection closed before a full header is the host's readiness probe (or noise). */
  if (r <= 0) {
    if (r < 0)
      send_reply(conn, EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_SETUP,
                 e && e->errnum ? e->errnum : EINVAL);
    cordon_error_free(e);
    return 0;
  }

  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  int report[2];
  if (sfd < 0 || pipe2(report, O_CLOEXEC) < 0) {
    send_reply(conn, EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_SETUP, errno);
    return 0;
  }
  double started = now();
  struct command child = {.pid = fork()};
  if (child.pid < 0) {
    send_reply(conn, EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_SETUP, errno);
    return 0;
  }
  if (child.pid == 0)
    child_run(req.cwd, (char *const *)req.argv, (char **)req.envp, fds, report[1]);
  /* The command holds the stdio now; our copies would keep the host from seeing EOF. */
  close(report[1]);
  for (int i = 0; i < EXEC_WIRE_STDIO_FDS; i++)
    close(fds[i]);
  uint32_t timeout_ms = req.timeout_ms;
  exec_wire_request_clear(&req);
  struct child_report rep = {0};
  bool timed_out = false;
  if (command_failed_early(report[0], &rep)) {
    command_finish(&child);
    int stage = rep.stage == STAGE_CHDIR        ? EXEC_WIRE_STAGE_CHDIR
                : rep.stage == STAGE_NO_SECCOMP ? EXEC_WIRE_STAGE_NO_SECCOMP
                                                : EXEC_WIRE_STAGE_SETUP;
    int errnum = rep.errnum >= 0 && rep.errnum <= EXEC_WIRE_MAX_ERRNO ? rep.errnum : EINVAL;
    send_reply(conn, EXEC_WIRE_FAILED, stage, errnum);
    return 0;
  }
  send_reply(conn, EXEC_WIRE_RUNNING, 0, 0);

  double until = timeout_ms ? started + (double)timeout_ms / 1000.0 : 0;
  while (!child.done) {
    struct pollfd pfds[2] = {{.fd = sfd, .events = POLLIN}, {.fd = conn, .events = POLLIN}};
    int ready = poll(pfds, 2, until > 0 ? ms_left(until) : -1);
    if (ready < 0 && errno != EINTR)
      nap_ms(10);
    if (pfds[0].revents) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
      }
      command_reap(&child);
    }
    if (!child.done && pfds[1].revents) {
      /* 'K', any other byte, or the host hanging up: the exec is over. */
      char byte;
      ssize_t got = recv(conn, &byte, 1, MSG_DONTWAIT);
      if (got >= 0 || (errno != EAGAIN && errno != EINTR))
        break;
    }
    if (!child.done && until > 0 && now() >= until) {
      timed_out = true;
      break;
    }
  }
  /* Killed (timeout, 'K', the host gone): nothing it started may outlive it. A command that
   * ended by itself keeps what it started in the background (a server, `cmd &`, a setsid
   * daemon) for the session's next execs, as `docker exec` does: monitor_keep. */
  bool killed = !child.done;
  if (killed)
    command_finish(&child);
  else
    command_reap(&child);
  if (timed_out) {
    send_reply(conn, EXEC_WIRE_TIMED_OUT, 0, 0);
  } else if (rep.stage == STAGE_EXEC && WIFEXITED(child.status) &&
             (WEXITSTATUS(child.status) == 126 || WEXITSTATUS(child.status) == 127)) {
    /* The command's execve failed (reported through the pipe before it closed): a result,
     * told apart from a command that exits 126/127 itself. */
    send_reply(conn, EXEC_WIRE_EXEC_FAILED, WEXITSTATUS(child.status),
               rep.errnum >= 0 && rep.errnum <= EXEC_WIRE_MAX_ERRNO ? rep.errnum : EINVAL);
  } else if (WIFSIGNALED(child.status)) {
    int sig = WTERMSIG(child.status);
    send_reply(conn, EXEC_WIRE_EXITED, 128 + sig, sig);
  } else {
    send_reply(conn, EXEC_WIRE_EXITED, WIFEXITED(child.status) ? WEXITSTATUS(child.status) : 126,
               0);
  }
  close(conn);
  close(sfd);
  if (!killed)
    monitor_keep();
  return 0;
}

/* The agent's listening socket, or -1 when the container has no agent directory (a container
 * made before the agent existed: the host uses the exec API). */
static int agent_listen(void) {
  struct stat st;
  if (stat(DOCKER_AGENT_TARGET, &st) < 0 || !S_ISDIR(st.st_mode))
    return -1;
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/%s", DOCKER_AGENT_TARGET, DOCKER_AGENT_SOCKET);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return -1;
  /* A socket left by an earlier start of this container (docker start by hand). */
  unlink(addr.sun_path);
  /* Only our uid (and the host's root or session owner) may connect. */
  mode_t old = umask(0077);
  int r = bind(fd, (struct sockaddr *)&addr, sizeof(addr));
  umask(old);
  if (r < 0 || listen(fd, 128) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

struct monitors {
  pid_t *pids;
  size_t count, capacity;
};

static void monitors_add(struct monitors *m, pid_t pid) {
  if (m->count == m->capacity) {
    size_t cap = m->capacity ? m->capacity * 2 : 16;
    pid_t *grown = realloc(m->pids, cap * sizeof(*grown));
    if (!grown)
      return; /* unrecorded: its end will not trigger a sweep, its tree still dies with it */
    m->pids = grown;
    m->capacity = cap;
  }
  m->pids[m->count++] = pid;
}

static bool monitors_contains(const struct monitors *m, pid_t pid) {
  for (size_t i = 0; i < m->count; i++)
    if (m->pids[i] == pid)
      return true;
  return false;
}

static bool monitors_remove(struct monitors *m, pid_t pid) {
  for (size_t i = 0; i < m->count; i++)
    if (m->pids[i] == pid) {
      m->pids[i] = m->pids[--m->count];
      return true;
    }
  return false;
}

/* A monitor died without finishing its job: its tree was reparented to us. Kill every child
 * of ours that is not a live monitor, and everything below it. */
static void kill_orphans(struct monitors *m, pid_t bridge) {
  pid_t self = getpid();
  struct proc_table t = {0};
  for (int pass = 0; pass < KILL_PASSES; pass++) {
    proc_table_scan(&t);
    for (size_t i = 0; i < t.count; i++)
      t.items[i].marked = t.items[i].ppid == self && t.items[i].pid != self &&
                          t.items[i].pid != bridge && !monitors_contains(m, t.items[i].pid);
    proc_table_mark_descendants(&t);
    size_t found = 0;
    for (size_t i = 0; i < t.count; i++)
      if (t.items[i].marked) {
        kill(t.items[i].pid, SIGKILL);
        found++;
      }
    /* Reap what we killed, not monitors: their ends are judged by the main loop. */
    for (size_t i = 0; i < t.count; i++)
      if (t.items[i].marked)
        waitpid(t.items[i].pid, NULL, WNOHANG);
    if (found == 0)
      break;
    nap_ms(1);
  }
  free(t.items);
}

/* ---- the egress bridge ---------------------------------------------------------------------- */

/* Egress restricted: the host's proxy has put its socket in the agent's directory (the
 * backend's egress.c). The bridge listens on 127.0.0.1:NET_BRIDGE_PORT of the container's own
 * network namespace (lo only) and hands every connection, socket and all, over that socket
 * (net/handoff.h); the proxy outside decides and relays. A process of its own (exec'd, so kill-exec
 * knows it by its verb), not dumpable. */
static int bridge_connect(void *arg) {
  (void)arg;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/%s", DOCKER_AGENT_TARGET, NET_EGRESS_SOCKET);
  if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

static int bridge_main(void) {
  prctl(PR_SET_DUMPABLE, 0);
  signal(SIGPIPE, SIG_IGN); /* a client gone mid-relay ends that pair only */
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET,
                             .sin_port = htons(NET_BRIDGE_PORT),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int one = 1;
  if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
      bind(s, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(s, 128) < 0)
    return 1;
  /* It ends with the container: nothing ever stops it before. */
  int never = eventfd(0, EFD_CLOEXEC);
  struct cordon_error *err = NULL;
  int r = never < 0 ? -1 : net_bridge_serve(s, bridge_connect, NULL, never, &err);
  cordon_error_free(err);
  return r < 0;
}

/* The bridge, when the proxy's socket is there; 0 when not (another class, or no agent). */
static pid_t bridge_spawn(void) {
  struct stat st;
  if (stat(DOCKER_AGENT_TARGET "/" NET_EGRESS_SOCKET, &st) < 0 || !S_ISSOCK(st.st_mode))
    return 0;
  pid_t pid = fork();
  if (pid == 0) {
    char *argv[] = {DOCKER_INIT_TARGET, "bridge", NULL};
    char *envp[] = {NULL};
    execve(DOCKER_INIT_TARGET, argv, envp);
    _exit(127);
  }
  return pid < 0 ? 0 : pid;
}

/* ---- init ----------------------------------------------------------------------------------- */

static int init_main(void) {
  prctl(PR_SET_CHILD_SUBREAPER, 1); /* for when the engine does not make us pid 1 */
  /* The workload runs with our uid: it must not ptrace us nor take our fds via /proc. */
  prctl(PR_SET_DUMPABLE, 0);
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL);
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    /* Nobody reads the container's own streams: a full log pipe must not block us. */
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    if (null > STDERR_FILENO)
      close(null);
  }
  int sfd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
  int lfd = agent_listen();
  struct cordon_error *filter_err = NULL;
  if (lfd >= 0)
    agent_filter_ready = confine_seccomp_build(&agent_filter, &filter_err) == 0;
  cordon_error_free(filter_err);
  pid_t bridge = bridge_spawn();
  struct monitors monitors = {0};
  for (;;) {
    struct pollfd pfds[2] = {{.fd = sfd, .events = POLLIN}, {.fd = lfd, .events = POLLIN}};
    if (sfd < 0) {
      /* No signalfd (cannot happen on a supported kernel): reap on a timer. */
      nap_ms(100);
      reap_any();
      continue;
    }
    if (poll(pfds, lfd >= 0 ? 2 : 1, -1) < 0)
      continue;
    if (pfds[0].revents) {
      struct signalfd_siginfo si;
      bool sweep = false;
      while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        int sig = (int)si.ssi_signo;
        if (sig == SIGCHLD)
          continue;
        /* Signals from inside the container carry the sender's pid; from outside (the
         * engine's stop or kill) the sender is invisible here (pid 0). Only the engine may
         * end us. */
        if ((sig == SIGTERM || sig == SIGINT || sig == SIGHUP) && si.ssi_pid == 0) {
          kill(-1, SIGKILL);
          double until = now() + 2.0;
          while (now() < until) {
            pid_t p = waitpid(-1, NULL, 0);
            if (p < 0 && errno == ECHILD)
              break;
          }
          return 0;
        }
      }
      pid_t p;
      int st;
      while ((p = waitpid(-1, &st, WNOHANG)) > 0)
        if (monitors_remove(&monitors, p) && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
          sweep = true;
      if (sweep)
        kill_orphans(&monitors, bridge);
    }
    if (lfd >= 0 && (pfds[1].revents & POLLIN)) {
      int conn;
      while ((conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
        pid_t pid = fork();
        if (pid == 0) {
          close(lfd);
          close(sfd);
          _exit(monitor_serve(conn));
        }
        if (pid > 0)
          monitors_add(&monitors, pid);
        else /* at the pids limit, say so rather than hang up without a word */
          send_reply(conn, EXEC_WIRE_FAILED, EXEC_WIRE_STAGE_SETUP, errno);
        close(conn);
      }
    }
  }
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "init"))
    return init_main();
  if (argc >= 2 && !strcmp(argv[1], "exec")) {
    struct exec_options o = {0};
    if (parse_exec(argc, argv, &o) < 0) {
      say("cordon-docker-init: usage: exec [--token T] [--cwd DIR] [--timeout-ms N] "
          "[--keep NAME]... -- ARGV\n");
      trailer("setup", EINVAL);
      return 126;
    }
    return exec_main(&o);
  }
  if (argc == 2 && !strcmp(argv[1], "bridge"))
    return bridge_main();
  if (argc == 3 && !strcmp(argv[1], "kill-exec"))
    return kill_exec_main(argv[2]);
  say("cordon-docker-init: usage: init | exec [options] -- ARGV | kill-exec TOKEN | bridge\n");
  return 2;
}
