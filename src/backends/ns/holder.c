/* The ns holder (see holder.h): spawn, setup, the pid-1 loop, workers and the command child.
 *
 * Everything after the clone runs in a copy of the caller's address space, single-threaded.
 * Errors before the holder is ready travel back over a pipe as one message; after that the
 * holder has no one to tell and simply keeps serving (or exits, killing the namespace). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/ns/holder.h"
#include "backends/ns/proto.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "confine/net.h"
#include "confine/seccomp.h"
#include "confine/syscalls.h"
#include "confine/userns.h"

#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"
#define HOSTNAME "cordon"
/* How long a worker waits for a killed tree to go away before giving up on stragglers. */
#define KILL_WAIT_SECONDS 2.0

/* ---- messages from the setup processes back to the caller -------------------------------- */

struct setup_report {
  int32_t pid;  /* spawn report: the holder's host pid; ready report: 0 */
  int32_t kind; /* enum cordon_error_kind, or -1 for success */
  int32_t errnum;
  char message[400];
};

static void report_send(int fd, pid_t pid, const struct cordon_error *e) {
  struct setup_report r;
  memset(&r, 0, sizeof(r));
  r.pid = pid;
  r.kind = e ? (int32_t)e->kind : -1;
  r.errnum = e ? e->errnum : 0;
  if (e && e->message)
    snprintf(r.message, sizeof(r.message), "%s", e->message);
  ssize_t n;
  do
    n = write(fd, &r, sizeof(r));
  while (n < 0 && errno == EINTR);
}

/* Read one report; EOF before a whole one means the sender died. */
static int report_receive(int fd, struct setup_report *r) {
  size_t got = 0;
  while (got < sizeof(*r)) {
    ssize_t n = read(fd, (char *)r + got, sizeof(*r) - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    got += (size_t)n;
  }
  r->message[sizeof(r->message) - 1] = 0;
  return 0;
}

static _Noreturn void fail_setup(int report_fd, struct cordon_error *e) {
  report_send(report_fd, 0, e);
  _exit(1);
}

/* ---- small helpers ------------------------------------------------------------------------ */

static int int_cmp(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Close every fd but those in keep (and 0..2). */
static void close_all_except(int *keep, size_t n) {
  qsort(keep, n, sizeof(int), int_cmp);
  unsigned from = 3;
  for (size_t i = 0; i < n; i++) {
    if (keep[i] < 3)
      continue;
    if ((unsigned)keep[i] > from)
      syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0);
    from = (unsigned)keep[i] + 1;
  }
  syscall(SYS_close_range, from, ~0U, 0);
}

static int send_reply(int conn, uint32_t type, int32_t a, int32_t b) {
  struct ns_reply r = {.type = type, .a = a, .b = b};
  ssize_t n;
  do
    n = send(conn, &r, sizeof(r), MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n == (ssize_t)sizeof(r) ? 0 : -1;
}

/* Replace our command line (inherited from the caller, which may carry secrets such as
 * `--env TOKEN=...`) with `title`, as setproctitle does: /proc/PID/cmdline is world-readable
 * inside the sandbox even though we are not dumpable. arg_start/arg_end are fields 48/49 of
 * /proc/self/stat. */
static void set_title(const char *title) {
  prctl(PR_SET_NAME, "cordon", 0, 0, 0);
  char buf[1024];
  _cleanup_close_ int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
  if (n <= 0)
    return;
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  unsigned long start = 0, end = 0;
  for (int field = 2; p && field < 49; field++) {
    p = strchr(p + 1, ' ');
    if (p && field == 47)
      start = strtoul(p + 1, NULL, 10);
    else if (p && field == 48)
      end = strtoul(p + 1, NULL, 10);
  }
  if (!start || end <= start)
    return;
  size_t size = end - start;
  memset((void *)start, 0, size);
  memcpy((void *)start, title, strnlen(title, size - 1));
}

static void reset_signals(void) {
  for (int sig = 1; sig < NSIG; sig++) {
    struct sigaction sa = {.sa_handler = SIG_DFL};
    sigaction(sig, &sa, NULL);
  }
}

/* ---- the command ---------------------------------------------------------------------------- */

struct child_report {
  int32_t stage;
  int32_t errnum;
};
#define STAGE_EXEC 100 /* not a start failure: the command ends with 126/127 */

/* The seccomp program every command attaches, compiled once by the holder. */
static struct confine_seccomp_program seccomp_program;

struct command {
  const struct ns_holder_config *cfg;
  struct ns_request req;
  int stdio[3];
  int report_fd;
};

static _Noreturn void child_fail(int report_fd, int stage, int errnum, int code) {
  struct child_report r = {.stage = stage, .errnum = errnum};
  (void)!write(report_fd, &r, sizeof(r));
  _exit(code);
}

/* Try execve on each PATH entry, like execvp but with the command's own PATH. Returns the errno
 * to report: EACCES if some candidate was found but not executable, else the last failure. */
static int exec_search(const char *name, char *const *argv, char *const *envp) {
  if (strchr(name, '/')) {
    execve(name, argv, envp);
    return errno;
  }
  const char *path = DEFAULT_PATH;
  for (size_t i = 0; envp[i]; i++)
    if (strncmp(envp[i], "PATH=", 5) == 0)
      path = envp[i] + 5;
  size_t nl = strlen(name);
  bool denied = false;
  int last = ENOENT;
  char buf[PATH_MAX];
  for (const char *p = path;;) {
    const char *end = strchrnul(p, ':');
    size_t dl = (size_t)(end - p);
    if (dl > 0 && p[0] == '/' && dl + 1 + nl < sizeof(buf)) {
      memcpy(buf, p, dl);
      buf[dl] = '/';
      memcpy(buf + dl + 1, name, nl + 1);
      execve(buf, argv, envp);
      int e = errno;
      if (e == EACCES)
        denied = true;
      else if (e != ENOENT && e != ENOTDIR && e != ELOOP && e != ENAMETOOLONG)
        return e; /* found but broken (ENOEXEC, E2BIG, ...): stop like execvp */
      last = e;
    }
    if (!*end)
      break;
    p = end + 1;
  }
  return denied ? EACCES : (last == ENOTDIR || last == ELOOP ? ENOENT : last);
}

/* The command, between fork and execve. It was born in its cgroup leaf, with no capabilities
 * and no_new_privs (inherited from the holder): what is left is its own session, its stdio,
 * its limits, its directory and the seccomp filter. */
static _Noreturn void child_run(struct command *c) {
  setsid(); /* new session, no controlling terminal */
  int report = fcntl(c->report_fd, F_DUPFD_CLOEXEC, 3);
  int moved[3];
  for (int i = 0; i < 3; i++) {
    moved[i] = fcntl(c->stdio[i], F_DUPFD_CLOEXEC, 3);
    if (moved[i] < 0 || report < 0)
      child_fail(report, NS_STAGE_SETUP, errno, 126);
  }
  for (int i = 0; i < 3; i++)
    if (dup2(moved[i], i) < 0)
      child_fail(report, NS_STAGE_SETUP, errno, 126);
  /* Everything else goes at execve; the report pipe must survive until then. */
  syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
  if (c->cfg->rlimits.nofile || c->cfg->rlimits.fsize) {
    int r = confine_apply_rlimits(&c->cfg->rlimits);
    if (r < 0)
      child_fail(report, NS_STAGE_SETUP, -r, 126);
  }
  if (chdir(c->req.cwd) < 0)
    child_fail(report, NS_STAGE_CHDIR, errno, 126);
  /* Last: from here on, only what the filter allows (execve and the command itself). */
  int r = confine_seccomp_attach(&seccomp_program);
  if (r < 0)
    child_fail(report, NS_STAGE_SETUP, -r, 126);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  int e = exec_search(c->req.argv[0], (char *const *)c->req.argv, (char *const *)c->req.envp);
  dprintf(2, "cordon: %s: %s\n", c->req.argv[0], strerror(e));
  child_fail(report, STAGE_EXEC, e, e == ENOENT ? 127 : 126);
}

/* ---- a worker: one exec --------------------------------------------------------------------- */

struct worker {
  const struct ns_holder_config *cfg;
  int conn;
  int busy_fd; /* tells the holder to fork our replacement */
  pid_t command;
  bool command_done;
  int status;
  int leaf_fd; /* per-exec cgroup leaf, or -1 */
  char leaf_name[32];
};

static void worker_note_exit(struct worker *w, pid_t pid, int status) {
  if (pid == w->command) {
    w->command_done = true;
    w->status = status;
  }
}

/* Read our children from /proc (we are a subreaper: orphans of the command land here). */
static size_t list_children(pid_t *out, size_t max) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  if (n <= 0)
    return 0;
  buf[n] = 0;
  size_t count = 0;
  for (char *p = buf; *p && count < max;) {
    char *end = NULL;
    long v = strtol(p, &end, 10);
    if (end == p)
      break;
    out[count++] = (pid_t)v;
    p = end;
  }
  return count;
}

/* Kill everything the command started and reap it: the cgroup leaf when we have one (atomic,
 * reaches setsid daemons), and in any case every descendant, layer by layer, as a subreaper. */
static void worker_kill_tree(struct worker *w) {
  if (w->leaf_fd >= 0 && confine_cgroup_populated(w->leaf_fd))
    confine_cgroup_kill_fd(w->leaf_fd, KILL_WAIT_SECONDS);
  double until = fs_now() + KILL_WAIT_SECONDS;
  for (;;) {
    pid_t kids[256];
    size_t n = list_children(kids, ARRAY_SIZE(kids));
    for (size_t i = 0; i < n; i++)
      kill(kids[i], SIGKILL);
    int status;
    pid_t pid = waitpid(-1, &status, n ? 0 : WNOHANG);
    if (pid > 0) {
      worker_note_exit(w, pid, status);
      continue;
    }
    if (pid < 0 && errno == EINTR)
      continue;
    if (pid < 0 || (n == 0 && pid == 0) || fs_now() > until)
      break;
  }
}

static int receive_request(struct worker *w, struct command *c, unsigned char **payload,
                           struct cordon_error **err) {
  struct ns_request_header h;
  union {
    char buf[CMSG_SPACE(sizeof(int) * 3)];
    struct cmsghdr align;
  } control;
  struct iovec iov = {.iov_base = &h, .iov_len = sizeof(h)};
  struct msghdr msg = {
      .msg_iov = &iov,
      .msg_iovlen = 1,
      .msg_control = control.buf,
      .msg_controllen = sizeof(control.buf),
  };
  ssize_t n;
  do
    n = recvmsg(w->conn, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n <= 0)
    return cordon_error_set(err, CORDON_ERR_INVALID, n < 0 ? errno : 0, "no request");
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
      continue;
    size_t nfds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < nfds; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
      if (i < 3 && c->stdio[i] < 0)
        c->stdio[i] = fd;
      else
        close(fd);
    }
  }
  if ((msg.msg_flags & MSG_CTRUNC) || c->stdio[0] < 0 || c->stdio[1] < 0 || c->stdio[2] < 0)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "request without its three stdio fds");
  size_t got = (size_t)n;
  while (got < sizeof(h)) {
    n = read(w->conn, (char *)&h + got, sizeof(h) - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "truncated request");
    got += (size_t)n;
  }
  if (ns_request_check_header(&h, err) < 0)
    return -1;
  *payload = malloc(h.length);
  if (!*payload)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "request");
  got = 0;
  while (got < h.length) {
    n = read(w->conn, *payload + got, h.length - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return cordon_error_set(err, CORDON_ERR_INVALID, 0, "truncated request");
    got += (size_t)n;
  }
  return ns_request_decode(&h, *payload, &c->req, err);
}

/* A per-exec leaf under the session's delegated v2 cgroup, made while idle (off the exec's
 * critical path). Best effort: without one, the subreaper walk alone finds the tree. */
static void worker_make_leaf(struct worker *w) {
  if (w->cfg->cgroup_fd < 0)
    return;
  snprintf(w->leaf_name, sizeof(w->leaf_name), "exec-%d", (int)getpid());
  if (mkdirat(w->cfg->cgroup_fd, w->leaf_name, 0755) < 0 && errno != EEXIST)
    return;
  w->leaf_fd = openat(w->cfg->cgroup_fd, w->leaf_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static void worker_remove_leaf(struct worker *w) {
  if (w->leaf_fd < 0)
    return;
  close(w->leaf_fd);
  w->leaf_fd = -1;
  unlinkat(w->cfg->cgroup_fd, w->leaf_name, AT_REMOVEDIR);
}

static _Noreturn void worker_exit(struct worker *w, int code) {
  worker_remove_leaf(w);
  _exit(code);
}

static _Noreturn void worker_serve(struct worker *w) {
  struct command c = {.cfg = w->cfg, .stdio = {-1, -1, -1}, .report_fd = -1};
  _cleanup_free_ unsigned char *payload = NULL;
  struct cordon_error *err = NULL;
  if (receive_request(w, &c, &payload, &err) < 0) {
    send_reply(w->conn, NS_REPLY_FAILED, NS_STAGE_SETUP, err && err->errnum ? err->errnum : EPROTO);
    worker_exit(w, 1);
  }
  int report[2];
  if (pipe2(report, O_CLOEXEC) < 0) {
    send_reply(w->conn, NS_REPLY_FAILED, NS_STAGE_SETUP, errno);
    worker_exit(w, 1);
  }
  c.report_fd = report[1];
  pid_t pid = sys_clone3_fork(0, w->leaf_fd);
  if (pid < 0 && w->leaf_fd >= 0)
    pid = sys_clone3_fork(0, -1); /* the leaf refused us: the subreaper walk still holds */
  if (pid == 0)
    child_run(&c);
  int fork_errno = errno;
  close(report[1]);
  for (int i = 0; i < 3; i++)
    close(c.stdio[i]);
  if (pid < 0) {
    send_reply(w->conn, NS_REPLY_FAILED, NS_STAGE_SETUP, fork_errno);
    worker_exit(w, 1);
  }
  w->command = pid;

  /* EOF: execve happened. A report: it did not (exec failures still count as started). */
  struct child_report cr;
  ssize_t n;
  do
    n = read(report[0], &cr, sizeof(cr));
  while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == (ssize_t)sizeof(cr) && cr.stage != STAGE_EXEC) {
    worker_kill_tree(w);
    send_reply(w->conn, NS_REPLY_FAILED, cr.stage, cr.errnum);
    worker_exit(w, 1);
  }
  bool client_gone = send_reply(w->conn, NS_REPLY_RUNNING, 0, 0) < 0;
  /* Now that the command runs, the holder may fork our replacement. */
  int32_t me = getpid();
  (void)!write(w->busy_fd, &me, sizeof(me));
  close(w->busy_fd);

  int pidfd = sys_pidfd_open(pid, 0);
  while (!w->command_done && !client_gone) {
    struct pollfd pfds[2] = {
        {.fd = w->conn, .events = POLLIN},
        {.fd = pidfd, .events = POLLIN},
    };
    /* Without a pidfd (old kernel), poll the command every 10 ms. */
    int ready = poll(pfds, pidfd >= 0 ? 2 : 1, pidfd >= 0 ? -1 : 10);
    if (ready < 0 && errno != EINTR)
      break;
    if (pfds[0].revents) {
      char byte;
      ssize_t r = recv(w->conn, &byte, 1, MSG_DONTWAIT);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
        client_gone = true; /* nobody waits for this command any more: it dies */
      worker_kill_tree(w);
    }
    int status;
    pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid)
      worker_note_exit(w, got, status);
  }
  /* The command ended (or its client left): nothing it started may stay behind. */
  worker_kill_tree(w);
  if (!w->command_done) {
    int status;
    if (waitpid(pid, &status, 0) == pid)
      worker_note_exit(w, pid, status);
  }
  if (!client_gone) {
    int st = w->status;
    if (WIFSIGNALED(st))
      send_reply(w->conn, NS_REPLY_EXITED, 128 + WTERMSIG(st), WTERMSIG(st));
    else
      send_reply(w->conn, NS_REPLY_EXITED, WEXITSTATUS(st), 0);
  }
  worker_exit(w, 0);
}

/* An idle worker: prepare the exec's leaf, wait for a client, serve. */
static _Noreturn void worker_main(const struct ns_holder_config *cfg, int busy_fd) {
  set_title("cordon: worker");
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  struct worker w = {.cfg = cfg, .conn = -1, .busy_fd = busy_fd, .leaf_fd = -1};
  worker_make_leaf(&w);
  for (;;) {
    int conn = accept4(cfg->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      worker_exit(&w, 1);
    }
    /* Only processes outside the session's pid namespace may drive it: a peer pid we cannot
     * see (0) is outside; any visible pid is one of the sandbox's own processes. */
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid != 0) {
      close(conn);
      continue;
    }
    w.conn = conn;
    break;
  }
  close(cfg->listen_fd);
  worker_serve(&w);
}

/* ---- the holder ----------------------------------------------------------------------------- */

/* The holder's bookkeeping: which of its children are workers. Anything else it finds among
 * its children is an orphan whose worker died (killed by the sandbox, which runs as the same
 * uid): it must not outlive its exec. */
#define MAX_WORKERS 1024

struct holder {
  const struct ns_holder_config *cfg;
  int signal_fd, busy_read, busy_write;
  pid_t idle; /* the worker waiting in accept(), 0 when none */
  pid_t workers[MAX_WORKERS];
  size_t n_workers;
};

static pid_t spawn_worker(struct holder *h) {
  if (h->n_workers >= MAX_WORKERS)
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(h->signal_fd);
    close(h->busy_read);
    worker_main(h->cfg, h->busy_write);
  }
  if (pid > 0)
    h->workers[h->n_workers++] = pid;
  return pid;
}

static bool forget_worker(struct holder *h, pid_t pid) {
  for (size_t i = 0; i < h->n_workers; i++)
    if (h->workers[i] == pid) {
      h->workers[i] = h->workers[--h->n_workers];
      return true;
    }
  return false;
}

static bool is_worker(const struct holder *h, pid_t pid) {
  for (size_t i = 0; i < h->n_workers; i++)
    if (h->workers[i] == pid)
      return true;
  return false;
}

/* A worker is gone: kill what was in its leaf (if it left one) and every orphan. */
static void after_worker_death(struct holder *h, pid_t worker) {
  if (h->cfg->cgroup_fd >= 0) {
    char name[32];
    snprintf(name, sizeof(name), "exec-%d", (int)worker);
    int leaf = openat(h->cfg->cgroup_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (leaf >= 0) {
      confine_cgroup_kill_fd(leaf, KILL_WAIT_SECONDS);
      close(leaf);
      unlinkat(h->cfg->cgroup_fd, name, AT_REMOVEDIR);
    }
  }
  pid_t kids[256];
  size_t n = list_children(kids, ARRAY_SIZE(kids));
  for (size_t i = 0; i < n; i++)
    if (!is_worker(h, kids[i]))
      kill(kids[i], SIGKILL); /* their children come to us in turn, and die the same way */
}

static _Noreturn void holder_loop(struct holder *h) {
  h->idle = spawn_worker(h);
  for (;;) {
    struct pollfd pfds[2] = {
        {.fd = h->signal_fd, .events = POLLIN},
        {.fd = h->busy_read, .events = POLLIN},
    };
    /* Without an idle worker (fork failed: the pids limit is reached), retry shortly. */
    if (poll(pfds, 2, h->idle > 0 ? -1 : 100) < 0 && errno != EINTR)
      continue;
    if (pfds[0].revents) {
      struct signalfd_siginfo si;
      while (read(h->signal_fd, &si, sizeof(si)) > 0)
        ;
    }
    /* Reap everything: workers, and orphans whose worker died (they come to pid 1). */
    bool worker_died = false;
    for (;;) {
      pid_t pid = waitpid(-1, NULL, WNOHANG);
      if (pid <= 0)
        break;
      if (pid == h->idle)
        h->idle = 0;
      if (forget_worker(h, pid)) {
        after_worker_death(h, pid);
        worker_died = true;
      }
    }
    /* Orphans keep arriving while their parents die: sweep again on every wake-up after a
     * worker death until none is left. */
    if (!worker_died) {
      pid_t kids[256];
      size_t n = list_children(kids, ARRAY_SIZE(kids));
      for (size_t i = 0; i < n; i++)
        if (!is_worker(h, kids[i]))
          kill(kids[i], SIGKILL);
    }
    if (pfds[1].revents) {
      int32_t busy;
      while (read(h->busy_read, &busy, sizeof(busy)) == (ssize_t)sizeof(busy))
        if (busy == h->idle)
          h->idle = 0;
    }
    if (h->idle <= 0)
      h->idle = spawn_worker(h);
  }
}

static _Noreturn void holder_main(const struct ns_holder_config *cfg, int go_fd, int ready_fd) {
  struct cordon_error *err = NULL;
  char go = 0;
  ssize_t n;
  do
    n = read(go_fd, &go, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1 || go != 'G')
    _exit(1); /* the spawner reports its own failure */
  close(go_fd);

  reset_signals();
  setsid();
  set_title("cordon: holder");
  /* Our cgroup namespace is rooted at the session's cgroup, where we were born. */
  if (unshare(CLONE_NEWCGROUP) < 0) {
    cordon_error_set(&err, CORDON_ERR_SYSTEM, errno, "cannot create the cgroup namespace");
    fail_setup(ready_fd, err);
  }
  int r = confine_become_keeping_caps(&cfg->identity);
  if (r < 0) {
    cordon_error_set(&err, CORDON_ERR_SYSTEM, -r, "cannot switch to the sandbox uid %u",
                     (unsigned)cfg->identity.uid);
    fail_setup(ready_fd, err);
  }
  struct confine_root_spec root = cfg->root; /* the tree fds we clone ourselves land here */
  struct confine_tree trees[64];
  if (root.n_trees > ARRAY_SIZE(trees)) {
    cordon_error_set(&err, CORDON_ERR_USAGE, E2BIG, "too many system paths and grants");
    fail_setup(ready_fd, err);
  }
  memcpy(trees, root.trees, root.n_trees * sizeof(trees[0]));
  root.trees = trees;
  if (confine_root_prepare_trees(&root, &err) < 0 || confine_build_root(&root, &err) < 0)
    fail_setup(ready_fd, err);
  if (sethostname(HOSTNAME, strlen(HOSTNAME)) < 0) {
    cordon_error_set(&err, CORDON_ERR_SYSTEM, errno, "sethostname");
    fail_setup(ready_fd, err);
  }
  if (cfg->new_network && cfg->loopback && confine_loopback_up(&err) < 0)
    fail_setup(ready_fd, err);

  /* Daemon: no terminal, no inherited fds, nothing to attach to. */
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(null_fd, 1) < 0 || dup2(null_fd, 2) < 0) {
    cordon_error_set(&err, CORDON_ERR_SYSTEM, errno, "cannot open /dev/null in the sandbox");
    fail_setup(ready_fd, err);
  }
  int busy[2];
  if (pipe2(busy, O_CLOEXEC | O_NONBLOCK) < 0) {
    cordon_error_set(&err, CORDON_ERR_SYSTEM, errno, "pipe");
    fail_setup(ready_fd, err);
  }
  /* Workers write 4 bytes once: keep their end blocking; ours is drained without blocking. */
  fcntl(busy[1], F_SETFL, 0);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  int signal_fd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd < 0) {
    cordon_error_set(&err, CORDON_ERR_SYSTEM, errno, "signalfd");
    fail_setup(ready_fd, err);
  }
  int keep[] = {ready_fd, cfg->listen_fd, cfg->cgroup_fd, busy[0], busy[1], signal_fd};
  close_all_except(keep, ARRAY_SIZE(keep));

  /* From here on nothing needs a privilege: give them all up, so that every worker and
   * command is born with none, no_new_privs and no core dumps. Nothing in the sandbox may read
   * our memory or /proc/1/{exe,fd,cwd,root} either (not dumpable). The seccomp filter is
   * compiled here and attached by each command right before execve: the holder and its
   * workers need clone3, which the filter denies. */
  static const struct confine_rlimits no_core = {0};
  r = confine_apply_rlimits(&no_core);
  if (r == 0)
    r = confine_drop_capabilities();
  if (r < 0) {
    cordon_error_set(&err, CORDON_ERR_SYSTEM, -r, "cannot drop capabilities");
    fail_setup(ready_fd, err);
  }
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  report_send(ready_fd, 0, NULL);
  close(ready_fd);
  /* Compiled after reporting ready, so it overlaps with the caller recording the session; no
   * worker exists before it, so no command can start without it. If it cannot be built the
   * session dies (exec then reports the holder gone): never a command without the filter. */
  if (confine_seccomp_build(&seccomp_program, &err) < 0)
    _exit(1);
  static struct holder h;
  h = (struct holder){
      .cfg = cfg, .signal_fd = signal_fd, .busy_read = busy[0], .busy_write = busy[1]};
  holder_loop(&h);
}

/* ---- spawn (in the caller) -------------------------------------------------------------------- */

static int namespace_flags(const struct ns_holder_config *cfg) {
  /* The cgroup namespace comes later (holder_main): made here it would be rooted at our
   * cgroup, not at the session's one the holder is born into. */
  return CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
         (cfg->new_network ? CLONE_NEWNET : 0);
}

/* The intermediate process: joins the cgroups, clones the holder, writes its id maps from the
 * parent namespace, lets it go and exits (so the holder is re-parented away from the caller). */
static _Noreturn void intermediate_main(const struct ns_holder_config *cfg, int info_fd,
                                        int go[2], int ready[2]) {
  struct cordon_error *err = NULL;
  int r = confine_cgroups_join_fds(cfg->cgroup_join_fds);
  if (r < 0) {
    cordon_error_set(&err, CORDON_ERR_SYSTEM, -r, "cannot join the session's cgroups");
    report_send(info_fd, 0, err);
    _exit(1);
  }
  /* A raw clone3, fork-like: we are single-threaded here. It makes the holder pid 1 of its own
   * pid namespace directly, born in the session's v2 cgroup (no migration). */
  pid_t pid = sys_clone3_fork((uint64_t)namespace_flags(cfg), cfg->cgroup_fd);
  if (pid == 0) {
    close(info_fd);
    close(go[1]);
    close(ready[0]);
    holder_main(cfg, go[0], ready[1]);
  }
  if (pid < 0) {
    cordon_error_set(&err,
                     errno == EPERM || errno == ENOSPC || errno == EINVAL ? CORDON_ERR_UNAVAILABLE
                                                                            : CORDON_ERR_SYSTEM,
                     errno, "cannot create the sandbox namespaces");
    report_send(info_fd, 0, err);
    _exit(1);
  }
  if (confine_userns_write_maps(pid, cfg->identity.uid, cfg->outer_uid, cfg->identity.gid,
                                cfg->outer_gid, cfg->rootless, &err) < 0) {
    kill(pid, SIGKILL);
    report_send(info_fd, 0, err);
    _exit(1);
  }
  (void)!write(go[1], "G", 1);
  report_send(info_fd, pid, NULL);
  _exit(0);
}

int ns_holder_spawn(const struct ns_holder_config *cfg, pid_t *pid_out,
                    struct cordon_error **err) {
  int info[2] = {-1, -1}, go[2] = {-1, -1}, ready[2] = {-1, -1};
  if (pipe2(info, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0 || pipe2(ready, O_CLOEXEC) < 0) {
    int e = errno;
    for (int i = 0; i < 2; i++) {
      if (info[i] >= 0)
        close(info[i]);
      if (go[i] >= 0)
        close(go[i]);
      if (ready[i] >= 0)
        close(ready[i]);
    }
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "pipe");
  }
  _cleanup_close_ int info_read = info[0], ready_read = ready[0];
  /* Fork with every signal blocked, so no handler of the caller runs in the copies. */
  sigset_t all, old_mask;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &old_mask);
  pid_t mid = fork();
  if (mid == 0) {
    close(info[0]);
    intermediate_main(cfg, info[1], go, ready);
  }
  int fork_errno = errno;
  sigprocmask(SIG_SETMASK, &old_mask, NULL);
  close(info[1]);
  close(go[0]);
  close(go[1]);
  close(ready[1]);
  if (mid < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, fork_errno, "fork");

  struct setup_report rep;
  int got = report_receive(info_read, &rep);
  while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
    ;
  if (got < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "the sandbox spawner died");
  if (rep.kind >= 0)
    return cordon_error_set(err, (enum cordon_error_kind)rep.kind, 0, "%s", rep.message);
  pid_t holder = rep.pid;
  if (report_receive(ready_read, &rep) < 0) {
    kill(holder, SIGKILL);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                            "the sandbox holder died while setting up");
  }
  if (rep.kind >= 0) {
    kill(holder, SIGKILL);
    return cordon_error_set(err, (enum cordon_error_kind)rep.kind, 0, "sandbox setup: %s",
                            rep.message);
  }
  *pid_out = holder;
  return 0;
}
