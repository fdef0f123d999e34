/* One command in the guest. The agent forks a keeper per exec, ahead of it: while the guest
 * is idle the keeper is forked and forks the command's process, which does what does not
 * depend on the request (session, stdio, uid); both then wait for the request on a pipe, so
 * an exec's two forks are not paid while the host waits (a fork costs milliseconds under
 * software emulation). The keeper is the child subreaper of the command's tree, so everything
 * the command starts (setsid, double-forked daemons included) stays its descendant. It runs
 * the command (a new session, the requested uid, environment and cwd), waits for it or its
 * timeout or the agent's SIGUSR1 (the host's kill, or the host hanging up), and writes one
 * exec wire reply to the status pipe:
 *   X  exited (code, 0) or killed by a signal (128+N, N)
 *   E  execve failed: 127 not found, 126 cannot execute (errno), a message on stderr; a
 *      command that exits 126/127 by itself is X, so the host tells them apart
 *   F  the cwd cannot be entered (stage CHDIR), or the process could not be set up
 *   T  the timeout fired; the whole tree was killed
 *   F  with stage LOST: the agent's kill (SIGUSR1) ended it, or its status was never collected:
 *      never an exit code the command did not return
 * A command that ends by itself keeps what it left running: the keeper stays the reaper of
 * that tree, as the ns and docker backends keep background processes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "guest/guest.h"

/* What the command's child tells the keeper through a CLOEXEC pipe before execve (nothing
 * arrives when execve succeeds). */
struct child_report {
  int stage; /* EXEC_WIRE_STAGE_SETUP, EXEC_WIRE_STAGE_CHDIR, or 0 for execve itself */
  int errnum;
};

static bool write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

static _Noreturn void child_fail(int report, int stage, int errnum, int code) {
  struct child_report r = {stage, errnum};
  write_all(report, &r, sizeof(r));
  _exit(code);
}

static bool read_all(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    p += r;
    n -= (size_t)r;
  }
  return true;
}

/* A request as the agent received it (exec wire header and payload), handed on through a pipe:
 * its length, then its bytes. Decoded into *req (which points into *bytes): 0, or -1. */
static int request_receive(int fd, unsigned char **bytes, uint32_t *length_out,
                           struct exec_wire_request *req) {
  uint32_t length = 0;
  struct exec_wire_header h;
  *bytes = NULL;
  if (!read_all(fd, &length, sizeof(length)) || length < sizeof(h) ||
      length > GUEST_WIRE_MAX_REQUEST || !(*bytes = malloc(length)) ||
      !read_all(fd, *bytes, length))
    return -1;
  *length_out = length;
  memcpy(&h, *bytes, sizeof(h));
  struct cordon_error *err = NULL;
  int r =
      h.length == length - sizeof(h) &&
              exec_wire_check_header(&guest_wire_exec_protocol, &h, &err) == 0 &&
              exec_wire_decode(&guest_wire_exec_protocol, &h, *bytes + sizeof(h), req, &err) == 0
          ? 0
          : -1;
  cordon_error_free(err);
  return r;
}

static bool request_send(int fd, const unsigned char *bytes, size_t length) {
  uint32_t n = (uint32_t)length;
  return write_all(fd, &n, sizeof(n)) && write_all(fd, bytes, length);
}

static void oom_score_adjust(const char *value) {
  int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    (void)!write(fd, value, strlen(value));
    close(fd);
  }
}

/* The command's process, forked ahead of its request: everything that does not depend on the
 * request (signals, session, stdio, uid) is done before it comes; then the cwd, the
 * environment and execve. */
static _Noreturn void child_run(const struct guest_config *cfg, const int stdio[3], int request,
                                int report) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  for (int s = 1; s < NSIG; s++)
    signal(s, SIG_DFL);
  setsid();
  oom_score_adjust("0"); /* the keeper's -1000 is not the command's; while still root */
  for (int fd = 0; fd < 3; fd++)
    if (dup2(stdio[fd], fd) < 0)
      child_fail(report, EXEC_WIRE_STAGE_SETUP, errno, 126);
  /* --pids: every process and thread of the sandbox user in the guest counts (what earlier
   * execs left running too), as a session's pids cgroup does on ns. Set before the uid changes,
   * while we may still raise it; the host refuses --pids for root, whom the kernel exempts. */
  struct rlimit nproc = {(rlim_t)cfg->pids, (rlim_t)cfg->pids};
  if (cfg->pids && cfg->uid != 0 && setrlimit(RLIMIT_NPROC, &nproc) < 0)
    child_fail(report, EXEC_WIRE_STAGE_SETUP, errno, 126);
  if (cfg->uid != 0 && (setgroups(0, NULL) < 0 || setresgid(cfg->uid, cfg->uid, cfg->uid) < 0 ||
                        setresuid(cfg->uid, cfg->uid, cfg->uid) < 0))
    child_fail(report, EXEC_WIRE_STAGE_SETUP, errno, 126);
  unsigned char *bytes = NULL;
  uint32_t length = 0;
  struct exec_wire_request req = {0};
  if (request_receive(request, &bytes, &length, &req) < 0)
    _exit(126); /* the keeper checked it already: it went away */
  close(request);
  if (chdir(req.cwd) < 0)
    child_fail(report, EXEC_WIRE_STAGE_CHDIR, errno, 126);
  /* execvpe looks argv[0] up in the PATH of the environment we run in: the command's own. */
  environ = (char **)req.envp;
  execvpe(req.argv[0], (char *const *)req.argv, (char *const *)req.envp);
  int e = errno;
  dprintf(STDERR_FILENO, "cordon: %s: %s\n", req.argv[0], strerror(e));
  child_fail(report, 0, e, e == ENOENT || e == ENOTDIR ? 127 : 126);
}

/* Every descendant of ours: orphans of the tree come back to us (subreaper), so walking
 * parent links from /proc finds them all. Killed until none is left. */
static void kill_tree(void) {
  pid_t self = getpid();
  for (int pass = 0; pass < 50; pass++) {
    int found = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d))) {
      pid_t pid = (pid_t)atoi(e->d_name);
      if (pid <= 1 || pid == self)
        continue;
      /* Walk up to us or to init: a chain longer than any real tree is not ours. */
      pid_t at = pid;
      for (int depth = 0; depth < 4096 && at > 1 && at != self; depth++) {
        char path[64], line[512];
        snprintf(path, sizeof(path), "/proc/%d/stat", at);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd < 0 ? -1 : read(fd, line, sizeof(line) - 1);
        if (fd >= 0)
          close(fd);
        if (n <= 0) {
          at = 0;
          break;
        }
        line[n] = '\0';
        char *close_paren = strrchr(line, ')');
        int ppid = 0;
        if (!close_paren || sscanf(close_paren + 1, " %*c %d", &ppid) != 1)
          ppid = 0;
        at = ppid;
      }
      if (at == self) {
        kill(pid, SIGKILL);
        found++;
      }
    }
    if (d)
      closedir(d);
    while (waitpid(-1, NULL, WNOHANG) > 0)
      ;
    if (found == 0)
      return;
    usleep(1000);
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Fork the command's process (child_run): its pid, with *go_w where its request goes and
 * *report_r where it says why it could not execve; or -1 with errno set. */
static pid_t child_fork(const struct guest_config *cfg, const int stdio[3], int close_in_child,
                        int *go_w, int *report_r) {
  int report[2], go[2];
  if (pipe2(report, O_CLOEXEC) < 0)
    return -1;
  if (pipe2(go, O_CLOEXEC) < 0) {
    int e = errno;
    close(report[0]);
    close(report[1]);
    errno = e;
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    if (close_in_child >= 0)
      close(close_in_child);
    close(report[0]);
    close(go[1]);
    child_run(cfg, stdio, go[0], report[1]);
  }
  int e = errno;
  close(report[1]);
  close(go[0]);
  if (pid < 0) {
    close(report[0]);
    close(go[1]);
    errno = e;
    return -1;
  }
  *go_w = go[1];
  *report_r = report[0];
  return pid;
}

/* The keeper: run the command and say how it ended (see the top of this file). */
static _Noreturn void keeper(const struct guest_config *cfg, int request_r, const int stdio[3],
                             int status_w) {
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  /* Out of the OOM killer's choice (the command's process takes the default back): a keeper
   * it picked would leave its command without a status (the host then reports an error). */
  oom_score_adjust("-1000");
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGUSR1);
  sigprocmask(SIG_BLOCK, &mask, NULL);
  struct exec_wire_reply r = {.magic = GUEST_WIRE_REPLY_MAGIC};
  /* The command's process, ahead of the request too (see child_run). */
  int go = -1, report = -1;
  pid_t pid = child_fork(cfg, stdio, request_r, &go, &report);
  int fork_errno = errno;
  /* Wait for the request; the agent closing the pipe instead means it is not needed. */
  unsigned char *bytes = NULL;
  uint32_t length = 0;
  struct exec_wire_request req = {0};
  int got = request_receive(request_r, &bytes, &length, &req);
  close(request_r);
  if (got < 0) {
    if (pid > 0)
      kill(pid, SIGKILL);
    _exit(0);
  }
  double deadline = req.timeout_ms ? now_s() + req.timeout_ms / 1000.0 : 0;
  struct child_report rep = {-1, 0};
  bool reported = false;
  if (pid > 0 && !request_send(go, bytes, length)) {
    /* Gone before its request: it failed its setup (and said so), or something killed it
     * (a process an earlier command of the sandbox's user left running can): then one forked
     * now takes the request. */
    reported = read(report, &rep, sizeof(rep)) == sizeof(rep);
    if (!reported) {
      close(go);
      close(report);
      go = report = -1;
      pid = child_fork(cfg, stdio, -1, &go, &report);
      fork_errno = errno;
      if (pid > 0)
        request_send(go, bytes, length);
    }
  }
  if (go >= 0)
    close(go);
  for (int fd = 0; fd < 3; fd++)
    close(stdio[fd]);
  exec_wire_request_clear(&req);
  free(bytes);
  if (pid < 0)
    rep = (struct child_report){EXEC_WIRE_STAGE_SETUP, fork_errno};
  else if (!reported && read(report, &rep, sizeof(rep)) != sizeof(rep))
    rep.stage = -1; /* execve succeeded */
  if (report >= 0)
    close(report);
  int status = 0;
  bool done = false, timed_out = false, killed = false;
  while (pid > 0 && !done) {
    struct timespec wait = {.tv_sec = 3600};
    if (deadline > 0) {
      double left = deadline - now_s();
      if (left <= 0) {
        timed_out = true;
        break;
      }
      wait.tv_sec = (time_t)left;
      wait.tv_nsec = (long)((left - (double)wait.tv_sec) * 1e9);
    }
    int sig = sigtimedwait(&mask, NULL, &wait);
    if (sig == SIGUSR1) {
      killed = true;
      break;
    }
    pid_t p;
    int st;
    while ((p = waitpid(-1, &st, WNOHANG)) > 0)
      if (p == pid)
        status = st, done = true;
  }
  if (timed_out || killed || rep.stage > 0) {
    /* The command first, reaped with its status: kill_tree reaps without one (a status never
     * collected once read as 0, "exited 0", for a command the agent had killed). */
    if (!done && pid > 0 && kill(pid, SIGKILL) == 0 && waitpid(pid, &status, 0) == pid)
      done = true;
    kill_tree();
  }
  if (rep.stage > 0)
    r.type = EXEC_WIRE_FAILED, r.a = rep.stage, r.b = rep.errnum;
  else if (timed_out)
    r.type = EXEC_WIRE_TIMED_OUT;
  else if (killed)
    /* The agent's kill (its host hung up, or asked): the command did not end by itself, and
     * what it would have returned is unknown. Never an exit code. */
    r.type = EXEC_WIRE_FAILED, r.a = EXEC_WIRE_STAGE_LOST, r.b = ECONNABORTED;
  else if (!done)
    r.type = EXEC_WIRE_FAILED, r.a = EXEC_WIRE_STAGE_LOST, r.b = ECHILD;
  else if (rep.stage == 0 && WIFEXITED(status) &&
           (WEXITSTATUS(status) == 126 || WEXITSTATUS(status) == 127))
    r.type = EXEC_WIRE_EXEC_FAILED, r.a = WEXITSTATUS(status), r.b = rep.errnum;
  else if (WIFSIGNALED(status))
    r.type = EXEC_WIRE_EXITED, r.a = 128 + WTERMSIG(status), r.b = WTERMSIG(status);
  else
    r.type = EXEC_WIRE_EXITED, r.a = WEXITSTATUS(status);
  write_all(status_w, &r, sizeof(r));
  close(status_w);
  if (timed_out || killed || r.type == EXEC_WIRE_FAILED)
    _exit(0);
  /* Ended by itself: keep reaping what it left running until that ends too. */
  for (;;) {
    pid_t p = waitpid(-1, NULL, 0);
    if (p < 0 && errno == ECHILD)
      _exit(0);
  }
}

/* Fork a keeper (and, by it, the command's process) ahead of its request: the two forks of an
 * exec happen while the guest is idle, not while the host waits. */
int guest_keeper_prefork(const struct guest_config *cfg, struct guest_keeper *k) {
  int rq[2] = {-1, -1}, in[2] = {-1, -1}, out[2] = {-1, -1}, errp[2] = {-1, -1}, st[2] = {-1, -1};
  if (pipe2(rq, O_CLOEXEC) < 0 || pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 ||
      pipe2(errp, O_CLOEXEC) < 0 || pipe2(st, O_CLOEXEC) < 0) {
    int e = errno;
    int all[] = {rq[0], rq[1], in[0], in[1], out[0], out[1], errp[0], errp[1], st[0], st[1]};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
      if (all[i] >= 0)
        close(all[i]);
    errno = e;
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(rq[1]);
    close(in[1]);
    close(out[0]);
    close(errp[0]);
    close(st[0]);
    int stdio[3] = {in[0], out[1], errp[1]};
    keeper(cfg, rq[0], stdio, st[1]);
  }
  int e = errno;
  close(rq[0]);
  close(in[0]);
  close(out[1]);
  close(errp[1]);
  close(st[1]);
  if (pid < 0) {
    close(rq[1]);
    close(in[1]);
    close(out[0]);
    close(errp[0]);
    close(st[0]);
    errno = e;
    return -1;
  }
  fcntl(in[1], F_SETFL, O_NONBLOCK);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(errp[0], F_SETFL, O_NONBLOCK);
  *k = (struct guest_keeper){pid, rq[1], {in[1], out[0], errp[0], st[0]}};
  return 0;
}

void guest_keeper_discard(struct guest_keeper *k) {
  int all[] = {k->request_w, k->fds.stdin_w, k->fds.stdout_r, k->fds.stderr_r, k->fds.status_r};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
    if (all[i] >= 0)
      close(all[i]);
  /* Closing the request pipe ends the keeper, which ends its waiting child. */
  *k = (struct guest_keeper){0, -1, {-1, -1, -1, -1}};
}

int guest_keeper_start(struct guest_keeper *k, const unsigned char *request, size_t length,
                       struct guest_exec_fds *fds) {
  bool sent = request_send(k->request_w, request, length);
  int e = errno;
  close(k->request_w);
  k->request_w = -1;
  if (!sent) {
    guest_keeper_discard(k);
    errno = e ? e : EPIPE;
    return -1;
  }
  *fds = k->fds;
  k->fds = (struct guest_exec_fds){-1, -1, -1, -1};
  return 0;
}
