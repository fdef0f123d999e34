/* The worker half of the ns holder (see holder.h for the process tree): a worker serves execs
 * one after the other, each with a command process started ahead of time in the worker's
 * memory (start_command), supervises it as a subreaper, reports its exit status, kills the tree on
 * a timeout and keeps what a command left running in the background until it ends; with the holder
 * it keeps the count of idle pairs (worker.h). */
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
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/ns/proto.h"
#include "backends/ns/worker.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/proc.h"
#include "base/syscalls.h"
#include "confine/clone-run.h"
#include "confine/seccomp.h"

#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

static int send_reply(int conn, enum exec_wire_reply_type type, int32_t a, int32_t b) {
  return exec_wire_send_reply(conn, &ns_protocol, type, a, b);
}

/* ---- process helpers the holder shares ------------------------------------------------- */

void *ns_stack_map(size_t size) {
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return NULL;
  STACK_UNPOISON(p, size);
  return p;
}

void ns_stack_unmap(void *p, size_t size) {
  STACK_UNPOISON(p, size);
  munmap(p, size);
}

/* Replace our command line (inherited from the caller, which may carry secrets such as
 * `--env TOKEN=...`) with `title`, as setproctitle does: /proc/PID/cmdline is world-readable
 * inside the sandbox even though we are not dumpable. */
void ns_set_title(const char *title) {
  sys_prctl_set_name("cordon");
  struct proc_stat st;
  if (proc_stat_read(0, &st) < 0 || !st.arg_start || st.arg_end <= st.arg_start)
    return;
  size_t size = st.arg_end - st.arg_start;
  memset((void *)st.arg_start, 0, size);
  memcpy((void *)st.arg_start, title, strnlen(title, size - 1));
}

/* ---- the command ---------------------------------------------------------------------------- */

/* Every exec is a pair: a worker, and its command process started ahead of time. The command
 * process is born in the exec's cgroup leaf, takes its own session, its limits and the seccomp
 * filter, and only then waits in accept(): when a client comes, nothing slow is left between
 * its request and execve (no fork, no filter to compile). It replies 'R' itself, hands the
 * connection to its worker (which reports the exit status and kills the tree) and execs. */

/* Sent by the command process to its worker over their socketpair, with the client's
 * connection attached, right before execve. */
#define PAIR_CONNECTION 'C'
/* Then, only when its execve failed (the pair closes at a successful one): this tag and the
 * errno, so that the worker reports an exec failure rather than an exit 126/127. */
#define PAIR_EXEC_FAILED 'E'

struct pair_exec_failure {
  char tag;
  int errnum;
};

/* Try execve on each PATH entry, like execvp but with the command's own PATH. Returns the errno
 * to report: EACCES if some candidate was found but not executable, else the last failure. */
int ns_exec_search(const char *name, char *const *argv, char *const *envp) {
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

/* Tell the client that the command could not start, then go (the worker, seeing us gone
 * without a connection, goes too). */
ON_OWN_STACK static _Noreturn void command_fail(int conn, int stage, int errnum) {
  send_reply(conn, EXEC_WIRE_FAILED, stage, errnum);
  _exit(1);
}

/* The command process: everything slow first, then wait for a client. */
/* A command process joins the memory cgroup itself (see memory_join_fd): still a vfork of its
 * worker (start_command keeps the vfork for it) or pid 1 until its execve, which the OOM killer
 * never picks. Async-signal-safe. */
int ns_join_memory_cgroup(const struct ns_holder_config *cfg) {
  if (cfg->memory_join_fd < 0)
    return 0;
  ssize_t n;
  do
    n = write(cfg->memory_join_fd, "0", 1);
  while (n < 0 && errno == EINTR);
  return n == 1 ? 0 : n < 0 ? -errno : -EIO;
}

ON_OWN_STACK static _Noreturn void command_main(const struct ns_holder_config *cfg, int pair) {
  setsid(); /* new session, no controlling terminal */
  /* umask 022, never the caller's: the same command makes the same tree (and snapshot ids) */
  umask(022);
  int r = ns_join_memory_cgroup(cfg);
  if (r == 0 && (cfg->rlimits.nofile || cfg->rlimits.fsize))
    r = confine_apply_rlimits(&cfg->rlimits);
  /* Compiled and JIT-ed by the kernel here, while nobody waits. From now on only what the
   * filter allows: accept, recvmsg, sendmsg, dup2, chdir and execve all are. */
  if (r == 0)
    r = confine_seccomp_attach(confine_seccomp_prebuilt());
  if (r < 0)
    _exit(1); /* the worker sees us gone before any client: it exits and is replaced */
  int conn;
  for (;;) {
    conn = accept4(cfg->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (conn < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      _exit(1);
    }
    /* Only processes outside the session's pid namespace may drive it: a peer pid we cannot
     * see (0) is outside; any visible pid is one of the sandbox's own processes. It must be
     * the operator's uid, and prove the session's secret (other sandboxes, of the same host
     * uid when rootless, cannot). */
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid == 0 &&
        cred.uid == cfg->client_uid && ns_auth_serve(conn, cfg->auth, NS_AUTH_TIMEOUT_MS) == 0)
      break;
    close(conn);
  }
  close(cfg->listen_fd);

  int stdio[EXEC_WIRE_STDIO_FDS];
  struct exec_wire_request req;
  struct cordon_error *err = NULL;
  if (exec_wire_receive_request(conn, &ns_protocol, EXEC_WIRE_REQUEST_TIMEOUT_MS, stdio, &req,
                                &err) <= 0)
    command_fail(conn, NS_STAGE_SETUP, err && err->errnum ? err->errnum : EINVAL);
  /* Move stdio above 2 first: one of them may sit on 0..2 and the dup2s would clobber it. */
  int moved[3];
  for (int i = 0; i < 3; i++) {
    moved[i] = fcntl(stdio[i], F_DUPFD_CLOEXEC, 3);
    if (moved[i] < 0)
      command_fail(conn, NS_STAGE_SETUP, errno);
  }
  for (int i = 0; i < 3; i++)
    if (dup2(moved[i], i) < 0)
      command_fail(conn, NS_STAGE_SETUP, errno);
  /* A terminal on fd 0 (cordon -t hands over a pty slave) becomes the controlling terminal of
   * this new session, so the command gets job control and Ctrl-C. Without force: a terminal
   * that already controls a session (the caller's own, under -i) stays with it; failure here
   * only means no controlling terminal, as before. */
  (void)ioctl(0, TIOCSCTTY, 0);
  /* Everything else, the connection and the pair included, goes at execve. */
  sys_close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  if (chdir(req.cwd) < 0)
    command_fail(conn, NS_STAGE_CHDIR, errno);
  /* Running: an exec failure from here on is the command's result (126/127), not cordon's.
   * The connection goes to the worker only now, when we no longer read from it: it wakes the
   * worker once, which then owns the exit status and the client's kill byte. */
  send_reply(conn, EXEC_WIRE_RUNNING, 0, 0);
  char tag = PAIR_CONNECTION;
  if (exec_wire_send_with_fds(pair, &tag, 1, &conn, 1) < 0)
    _exit(1); /* no worker to report our status: the client sees EOF instead */
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  int e = ns_exec_search(req.argv[0], (char *const *)req.argv, (char *const *)req.envp);
  dprintf(2, "cordon: %s: %s\n", req.argv[0], strerror(e));
  struct pair_exec_failure failure = {.tag = PAIR_EXEC_FAILED, .errnum = e};
  (void)!send(pair, &failure, sizeof(failure), MSG_NOSIGNAL);
  _exit(e == ENOENT ? 127 : 126);
}

/* ---- a worker: one exec --------------------------------------------------------------------- */

struct worker {
  const struct ns_holder_config *cfg;
  int conn;    /* the client, once the command process has handed it over */
  int pair;    /* socketpair with the command process */
  int busy_fd; /* tells the holder what becomes of us (struct worker_note) */
  pid_t command;
  bool command_done;
  int status;
  int leaf_fd; /* the cgroup leaf of our execs, or -1 */
  char leaf_name[32];
  unsigned served; /* execs so far */
  int *idle_pairs; /* how many pairs of the session are idle (shared memory), or NULL */
};

static void worker_note_exit(struct worker *w, pid_t pid, int status) {
  if (pid == w->command) {
    w->command_done = true;
    w->status = status;
  }
}

/* The bound on /proc/.../children: a pid takes at most 8 bytes there (pid_max is at most
 * 4194304), so 1 MiB lists 131072 children, far more than a host runs at once in practice. */
#define CHILDREN_LIST_MAX (1 << 20)

/* Read our children from /proc (we are a subreaper: orphans of the command land here). */
size_t ns_list_children(pid_t *out, size_t max) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
  _cleanup_free_ unsigned char *text = NULL;
  size_t length = 0;
  if (fs_read_file(path, CHILDREN_LIST_MAX, &text, &length, NULL) < 0)
    return 0;
  size_t count = 0;
  for (char *p = (char *)text; *p && count < max;) {
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
    size_t n = ns_list_children(kids, ARRAY_SIZE(kids));
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

/* A per-exec leaf under the session's delegated v2 cgroup. Best effort: without one, the
 * subreaper walk alone finds the tree. */
static void worker_make_leaf(struct worker *w) {
  if (w->cfg->cgroup_fd < 0)
    return;
  snprintf(w->leaf_name, sizeof(w->leaf_name), "exec-%d", (int)getpid());
  if (mkdirat(w->cfg->cgroup_fd, w->leaf_name, 0755) < 0 && errno != EEXIST)
    return;
  w->leaf_fd = openat(w->cfg->cgroup_fd, w->leaf_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static _Noreturn void worker_exit(struct worker *w, int code) {
  if (w->leaf_fd >= 0) {
    close(w->leaf_fd);
    unlinkat(w->cfg->cgroup_fd, w->leaf_name, AT_REMOVEDIR);
  }
  _exit(code);
}

/* Receive one message from the command process: its tag, and an fd when one came along. */
static int pair_receive(int pair, char *tag, int *fd) {
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  struct iovec iov = {.iov_base = tag, .iov_len = 1};
  struct msghdr msg = {
      .msg_iov = &iov,
      .msg_iovlen = 1,
      .msg_control = control.buf,
      .msg_controllen = sizeof(control.buf),
  };
  *fd = -1;
  ssize_t n;
  do
    n = recvmsg(pair, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n <= 0)
    return -1; /* EOF: the command process exec'd or died */
  struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
  if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
      cm->cmsg_len == CMSG_LEN(sizeof(int)))
    memcpy(fd, CMSG_DATA(cm), sizeof(int));
  return 0;
}

/* The command process shares its worker's memory: clone3 with CLONE_VM onto a stack of its
 * own, born in the exec's leaf. It borrows the worker's memory until its execve (or exit),
 * while the worker, which has nothing else to do meanwhile, waits for that; so no address
 * space is copied for it, which on a virtualised host was a third of an exec's cost
 * (bench/startup). The worker is single-threaded and runs nothing but that wait while the
 * command runs, so whatever the command calls (malloc included) finds its state consistent,
 * and leaves it so for the worker.
 *
 * How the worker waits: not as a vfork parent (CLONE_VFORK), which sleeps uninterruptibly
 * (state D) until the execve, that is for the whole life of an idle session: one more on the
 * host's load average per idle pair, and a worker no signal reaches. It sleeps on a futex the
 * kernel wakes when the command lets go of its memory (sys_clone3_run_shared), interruptibly.
 * One exception keeps the vfork: a command that joins a v1 memory cgroup
 * (cfg->memory_join_fd) does so while it waits, and only a vfork child is passed over by the
 * OOM killer (in_vfork); a command sharing its worker's memory without one would be a victim
 * that frees nothing (the memory is the worker's, charged elsewhere) and takes its worker
 * with it (docs/security.md, "Out of memory"). Where clone3 onto a stack of our own is not
 * implemented, a fork. */
struct command_start {
  const struct ns_holder_config *cfg;
  int pair;     /* the command's end of the socketpair */
  int close[2]; /* the worker's fds the command must not keep */
};

#define COMMAND_STACK_SIZE (256 * 1024)

ON_OWN_STACK static int command_entry(void *arg) {
  const struct command_start *start = arg;
  close(start->close[0]);
  close(start->close[1]);
  command_main(start->cfg, start->pair);
}

/* Whether the command must be a vfork (see above): only one that joins a v1 memory cgroup. */
static bool command_needs_vfork(const struct ns_holder_config *cfg) {
  return cfg->memory_join_fd >= 0;
}

static pid_t start_command(struct command_start *start, int leaf_fd) {
  /* One stack per worker, above a guard page: its commands use it one after the other. */
  static unsigned char *stack;
  if (!stack) {
    unsigned char *m = ns_stack_map(COMMAND_STACK_SIZE + 4096);
    if (m && mprotect(m, 4096, PROT_NONE) == 0)
      stack = m + 4096;
  }
  if (stack) {
    /* The last command on it (a worker serves several) exec'd from deep in its frames. */
    STACK_UNPOISON(stack, COMMAND_STACK_SIZE);
    pid_t pid =
        command_needs_vfork(start->cfg)
            ? sys_clone3_run(CLONE_VM | CLONE_VFORK, leaf_fd, stack, COMMAND_STACK_SIZE,
                             command_entry, start)
            : sys_clone3_run_shared(0, leaf_fd, stack, COMMAND_STACK_SIZE, command_entry, start);
    if (pid >= 0 || errno != ENOSYS)
      return pid;
  }
  pid_t pid = sys_clone3_fork(0, leaf_fd);
  if (pid == 0)
    command_entry(start);
  return pid;
}

static void worker_tell(const struct worker *w, enum worker_event event) {
  struct worker_note note = {.pid = getpid(), .event = event};
  (void)!write(w->busy_fd, &note, sizeof(note));
}

/* One idle pair less in the shared count, never below zero (a late note can make the holder
 * count a death twice). */
void ns_idle_slot_drop(int *idle_pairs) {
  if (!idle_pairs)
    return;
  int n = __atomic_load_n(idle_pairs, __ATOMIC_RELAXED);
  while (n > 0 && !__atomic_compare_exchange_n(idle_pairs, &n, n - 1, false, __ATOMIC_RELAXED,
                                               __ATOMIC_RELAXED)) {
  }
}

/* Count ourselves idle again unless IDLE_TARGET pairs wait already (execs ran side by side):
 * then we go, rather than hold processes (and pids of the session's limit) that nobody needs.
 * The count is kept by the workers themselves (claimed: one less; rearmed: one more) and the
 * holder (a new worker: one more; an idle one dead: one less), in memory they all share, so a
 * worker's own claim counts at once, however late the holder reads its notes. */
static bool idle_slot_take(int *idle_pairs) {
  if (!idle_pairs)
    return true;
  int n = __atomic_load_n(idle_pairs, __ATOMIC_RELAXED);
  do {
    if (n >= IDLE_TARGET)
      return false;
  } while (!__atomic_compare_exchange_n(idle_pairs, &n, n + 1, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
  return true;
}

/* Serve one exec with a command process started ahead (command_main): wait for its client,
 * supervise, kill its tree, report. 0 once the tree is gone; -1 when the worker must go. */
static int worker_serve(struct worker *w) {
  const struct ns_holder_config *cfg = w->cfg;
  int sp[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
    return -1;
  /* Born in the leaf: everything the command starts is in it, with no migration. */
  struct command_start start = {.cfg = cfg, .pair = sp[1], .close = {sp[0], w->busy_fd}};
  pid_t pid = start_command(&start, w->leaf_fd);
  if (pid < 0 && w->leaf_fd >= 0)
    pid = start_command(&start, -1); /* the leaf refused us: the subreaper walk still holds */
  close(sp[1]);
  if (pid < 0) {
    close(sp[0]);
    return -1;
  }
  w->conn = -1;
  w->pair = sp[0];
  w->command = pid;
  w->command_done = false;
  w->status = 0;

  /* Idle until the command process has started a client's command (or failed, or died: then
   * we go, and are replaced). */
  char tag = 0;
  if (pair_receive(w->pair, &tag, &w->conn) < 0 || tag != PAIR_CONNECTION || w->conn < 0) {
    close(w->pair);
    worker_kill_tree(w);
    return -1;
  }
  ns_idle_slot_drop(w->idle_pairs);
  worker_tell(w, WORKER_CLAIMED);
  w->served++;
  int pidfd = sys_pidfd_open(pid, 0);
  bool client_gone = false, killed = false;
  while (!w->command_done && !client_gone) {
    struct pollfd pfds[2] = {
        {.fd = w->conn, .events = POLLIN},
        {.fd = pidfd, .events = POLLIN},
    };
    /* Without a pidfd (old kernel), poll the command every 10 ms. */
    int ready = poll(pfds, 2, pidfd >= 0 ? -1 : 10);
    if (ready < 0 && errno != EINTR)
      break;
    if (pfds[0].revents) {
      char byte;
      ssize_t r = recv(w->conn, &byte, 1, MSG_DONTWAIT);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
        client_gone = true; /* nobody waits for this command any more: it dies */
      killed = true;        /* a timeout or an interrupt, or the client left */
      worker_kill_tree(w);
    }
    int status;
    pid_t got = waitpid(pid, &status, WNOHANG);
    if (got == pid)
      worker_note_exit(w, got, status);
  }
  if (pidfd >= 0)
    close(pidfd);
  /* Killed (timeout, interrupt, client gone): nothing it started may stay behind. A command
   * that ended by itself keeps what it started in the background (a server, `cmd &`, a setsid
   * daemon) running for the session's next execs, as `docker exec` does; the worker stays
   * their subreaper (ns_worker_main) and the session's end kills them. */
  if (killed || !w->command_done)
    worker_kill_tree(w);
  if (!w->command_done) {
    int status;
    if (waitpid(pid, &status, 0) == pid)
      worker_note_exit(w, pid, status);
  }
  /* The command process says so on the pair when its execve failed; it has ended, so what
   * it sent is there now. */
  struct pair_exec_failure failure = {0};
  bool exec_failed =
      recv(w->pair, &failure, sizeof(failure), MSG_DONTWAIT) == (ssize_t)sizeof(failure) &&
      failure.tag == PAIR_EXEC_FAILED && WIFEXITED(w->status) &&
      (WEXITSTATUS(w->status) == 126 || WEXITSTATUS(w->status) == 127);
  close(w->pair);
  if (!client_gone) {
    int st = w->status;
    if (exec_failed)
      send_reply(w->conn, EXEC_WIRE_EXEC_FAILED, WEXITSTATUS(st),
                 failure.errnum >= 0 && failure.errnum <= EXEC_WIRE_MAX_ERRNO ? failure.errnum
                                                                              : EINVAL);
    else if (WIFSIGNALED(st))
      send_reply(w->conn, EXEC_WIRE_EXITED, 128 + WTERMSIG(st), WTERMSIG(st));
    else
      send_reply(w->conn, EXEC_WIRE_EXITED, WEXITSTATUS(st), 0);
  }
  close(w->conn);
  w->conn = -1;
  return 0;
}

/* Whether nothing of the last exec is left: no child of ours, and an empty leaf. */
static bool worker_clean(const struct worker *w) {
  pid_t kids[1];
  return ns_list_children(kids, 1) == 0 &&
         (w->leaf_fd < 0 || !confine_cgroup_populated(w->leaf_fd));
}

/* The last exec left processes running: serve no more execs, only reap them (we are their
 * subreaper) until none is left, then go; the holder kills what is still in our leaf then. A
 * timeout of a later exec cannot reach them, since that exec runs in another worker's leaf. */
static _Noreturn void worker_keep(struct worker *w) {
  worker_tell(w, WORKER_KEPT);
  ns_set_title("cordon: keeper");
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0 && errno == EINTR)
      continue;
    if (pid < 0 && worker_clean(w))
      break;
    if (pid < 0)
      poll(NULL, 0, 100); /* no child, but the leaf still holds something of ours */
  }
  worker_exit(w, 0);
}

/* A worker serves execs one after the other: once an exec's tree is gone it starts its next
 * command process (in our memory: no fork per exec), up to WORKER_MAX_EXECS, since what each
 * command process allocates before its execve stays in our heap. Anything left of an exec (what a
 * command left running, or a process that would not die within the kill's bounded wait) makes
 * the worker a keeper instead (worker_keep), and the holder makes a new pair. */
#define WORKER_MAX_EXECS 64

_Noreturn void ns_worker_main(const struct ns_holder_config *cfg, int busy_fd, int *idle_pairs) {
  ns_set_title("cordon: worker");
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  struct worker w = {.cfg = cfg,
                     .conn = -1,
                     .pair = -1,
                     .busy_fd = busy_fd,
                     .leaf_fd = -1,
                     .idle_pairs = idle_pairs};
  worker_make_leaf(&w);
  for (;;) {
    if (worker_serve(&w) < 0)
      worker_exit(&w, 1);
    if (!worker_clean(&w))
      worker_keep(&w);
    if (w.served >= WORKER_MAX_EXECS || !idle_slot_take(w.idle_pairs)) {
      /* Done: now the holder may prepare a replacement, off this exec's critical path. */
      worker_tell(&w, WORKER_DONE);
      worker_exit(&w, 0);
    }
    /* Idle again as soon as the next command process waits (it borrows our memory, so it is
     * started last: we wait, interruptibly, until it runs a client's command). */
    worker_tell(&w, WORKER_REARMED);
  }
}
