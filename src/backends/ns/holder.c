/* The ns holder (see holder.h): spawn, setup, the pid-1 loop, workers and the command child.
 *
 * Everything after the clone runs in a copy of a single-threaded address space: the caller's,
 * or, for a caller with threads, a spawner's, this program exec'd afresh (intermediate_main).
 * Errors before the holder is ready travel back over a pipe as one message; after that the
 * holder has no one to tell and simply keeps serving (or exits, killing the namespace). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <linux/close_range.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/ns/egress.h"
#include "backends/ns/holder.h"
#include "backends/ns/proto.h"
#include "backends/ns/worker.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/proc.h"
#include "base/syscalls.h"
#include "confine/cpus.h"
#include "confine/net.h"
#include "confine/seccomp.h"
#include "confine/userns.h"

#define HOSTNAME "cordon"
#ifndef SIOCGSKNS
#define SIOCGSKNS 0x894C /* linux/sockios.h: the socket's network namespace, as an fd */
#endif

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

/* The error a report carries, as its sender had it: the kind, the errno, and the message,
 * which already ends in the errno's text (not appended a second time). */
static int report_raise(const struct setup_report *r, const char *prefix,
                        struct cordon_error **err) {
  bool had = err && *err;
  int ret = cordon_error_set(err, (enum cordon_error_kind)r->kind, 0, "%s%s", prefix, r->message);
  if (r->errnum <= 0)
    return ret;
  if (err && *err && !had)
    (*err)->errnum = r->errnum;
  return -r->errnum;
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
      sys_close_range(from, (unsigned)keep[i] - 1, 0);
    from = (unsigned)keep[i] + 1;
  }
  sys_close_range(from, ~0U, 0);
}

/* The signals whose disposition is not the default (ignored or caught), from /proc/self/status
 * (SigIgn, SigCgt): 1 when both were read. Bit n-1 is signal n. */
static int signals_not_default(uint64_t *mask) {
  char text[4096];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (n <= 0)
    return 0;
  text[n] = 0;
  int found = 0;
  *mask = 0;
  static const char *const keys[] = {"\nSigIgn:\t", "\nSigCgt:\t"};
  for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
    const char *at = strstr(text, keys[i]);
    char *end = NULL;
    if (!at)
      return 0;
    errno = 0;
    unsigned long long bits = strtoull(at + strlen(keys[i]), &end, 16);
    if (errno || !end || *end != '\n')
      return 0;
    *mask |= bits;
    found++;
  }
  return found == 2;
}

/* Every signal back to its default disposition. Only those that are not already (one read of
 * /proc/self/status, where the kernel lists them), rather than 64 sigaction calls on pid 1's
 * serial path; all 64 when that cannot be read. */
static void reset_signals(void) {
  uint64_t mask = ~(uint64_t)0;
  if (!signals_not_default(&mask))
    mask = ~(uint64_t)0;
  for (int sig = 1; sig < NSIG && sig <= 64; sig++) {
    if (!(mask & (1ull << (sig - 1))))
      continue;
    struct sigaction sa = {.sa_handler = SIG_DFL};
    sigaction(sig, &sa, NULL);
  }
}

/* ---- the sandbox's own setup, in its first process ----------------------------------------- */

/* The one-shot's network namespace, made beside pid 1's mounts (see oneshot_net_start). */
struct oneshot_net;
static int oneshot_net_start(struct oneshot_net *net, struct cordon_error **err);
static int oneshot_net_join(struct oneshot_net *net, struct cordon_error **err);

/* Everything pid 1 does before it can start commands, in both forms (the holder and the
 * one-shot): the cgroup namespace, the sandbox uid (keeping capabilities: it still mounts),
 * the root, the host name and the loopback interface. With net (the one-shot), pid 1 was born
 * in the caller's network namespace: a helper makes the sandbox's own while the root is built,
 * and pid 1 joins it before anything else touches the network. */
static int sandbox_setup(const struct ns_holder_config *cfg, struct oneshot_net *net,
                         struct cordon_error **err) {
  /* Our cgroup namespace is rooted at the session's cgroup, where we were born. */
  if (unshare(CLONE_NEWCGROUP) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create the cgroup namespace");
  int r = confine_become_keeping_caps(&cfg->identity);
  if (r < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, -r, "cannot switch to the sandbox uid %u",
                            (unsigned)cfg->identity.uid);
  struct confine_root_spec root = cfg->root; /* the tree fds we clone ourselves land here */
  struct confine_tree trees[64];
  if (root.n_trees > ARRAY_SIZE(trees))
    return cordon_error_set(err, CORDON_ERR_USAGE, E2BIG, "too many system paths and grants");
  memcpy(trees, root.trees, root.n_trees * sizeof(trees[0]));
  root.trees = trees;
  struct confine_tree volumes[64]; /* the same for the volumes (-v) */
  if (root.n_volumes > ARRAY_SIZE(volumes))
    return cordon_error_set(err, CORDON_ERR_USAGE, E2BIG, "too many volumes");
  if (root.n_volumes)
    memcpy(volumes, root.volumes, root.n_volumes * sizeof(volumes[0]));
  root.volumes = volumes;
  struct confine_tree devices[64]; /* and for the device nodes */
  if (root.n_devices > ARRAY_SIZE(devices))
    return cordon_error_set(err, CORDON_ERR_USAGE, E2BIG, "too many devices");
  if (root.n_devices)
    memcpy(devices, root.devices, root.n_devices * sizeof(devices[0]));
  root.devices = devices;
  if (net && oneshot_net_start(net, err) < 0)
    return -1;
  if (confine_root_prepare_trees(&root, err) < 0 || confine_build_root(&root, err) < 0)
    return -1;
  if (sethostname(HOSTNAME, strlen(HOSTNAME)) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "sethostname");
  if (net) {
    if (oneshot_net_join(net, err) < 0)
      return -1;
  } else if (cfg->new_network && cfg->loopback && confine_loopback_up(err) < 0) {
    return -1;
  }
  if (cfg->egress_fd >= 0 && ns_egress_handoff(cfg->egress_fd, err) < 0)
    return -1;
  if (cfg->cpus_visible && confine_limit_affinity(cfg->cpus_visible, err) < 0)
    return -1;
  return 0;
}

/* The end of pid 1's setup, in both forms: no core dumps, every capability dropped for good
 * (whatever it starts is born with none, no_new_privs), and not dumpable, so nothing in the
 * sandbox may read its memory or /proc/1/{exe,fd,cwd,root}. */
static int sandbox_drop_privileges(struct cordon_error **err) {
  static const struct confine_rlimits no_core = {0};
  int r = confine_apply_rlimits(&no_core);
  if (r == 0)
    r = confine_drop_capabilities();
  if (r < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, -r, "cannot drop capabilities");
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  return 0;
}

/* ---- the holder ----------------------------------------------------------------------------- */

/* The holder's bookkeeping: which of its children are workers, and which of those are idle.
 * Anything else it finds among its children is an orphan whose worker died (killed by the
 * sandbox, which runs as the same uid): it must not outlive its exec.
 *
 * Pairs are prepared ahead: one worker when the session starts, two once an exec has run (so
 * that back-to-back execs always find one ready while the other starts its next command
 * process). A worker comes back idle when its exec is done (WORKER_REARMED), or goes and is
 * replaced then, so preparing the next pair never competes with a running command for the
 * CPU. A client that arrives when no pair is idle (the listening socket has a pending
 * connection) gets one made on demand; such extra workers go once their exec is done and two
 * pairs wait already (idle_slot_take). */
#define MAX_WORKERS 1024
/* How often an idle holder looks whether its session's lease file still exists. */
#define SOCKET_CHECK_MS 5000

struct holder {
  const struct ns_holder_config *cfg;
  int signal_fd, busy_read, busy_write;
  int *idle_pairs; /* shared with the workers: see idle_slot_take(); NULL without */
  pid_t workers[MAX_WORKERS];
  bool idle[MAX_WORKERS];
  bool keeper[MAX_WORKERS]; /* serves no more execs: only keeps what an exec left running */
  size_t n_workers;
  size_t n_keepers;
  double last_spawn;
  bool idle_died; /* an idle pair died without serving anyone */
};

static size_t count_idle(const struct holder *h) {
  size_t n = 0;
  for (size_t i = 0; i < h->n_workers; i++)
    n += h->idle[i];
  return n;
}

static pid_t spawn_worker(struct holder *h) {
  if (h->n_workers >= MAX_WORKERS)
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(h->signal_fd);
    close(h->busy_read);
    if (h->cfg->socket_file_fd >= 0)
      close(h->cfg->socket_file_fd);
    ns_worker_main(h->cfg, h->busy_write, h->idle_pairs);
  }
  if (pid > 0) {
    if (h->idle_pairs)
      __atomic_add_fetch(h->idle_pairs, 1, __ATOMIC_RELAXED);
    h->workers[h->n_workers] = pid;
    h->idle[h->n_workers] = true;
    h->keeper[h->n_workers] = false;
    h->n_workers++;
  }
  return pid;
}

/* Forget a dead worker; returns whether it was one, and whether it was idle. */
static bool forget_worker(struct holder *h, pid_t pid, bool *was_idle) {
  for (size_t i = 0; i < h->n_workers; i++)
    if (h->workers[i] == pid) {
      *was_idle = h->idle[i];
      if (h->keeper[i])
        h->n_keepers--;
      h->n_workers--;
      h->workers[i] = h->workers[h->n_workers];
      h->idle[i] = h->idle[h->n_workers];
      h->keeper[i] = h->keeper[h->n_workers];
      return true;
    }
  return false;
}

static void mark_idle(struct holder *h, pid_t pid, bool idle) {
  for (size_t i = 0; i < h->n_workers; i++)
    if (h->workers[i] == pid)
      h->idle[i] = idle;
}

/* A worker that left its exec's background processes running serves no more execs: it no
 * longer counts among the pairs (replenish), and its leaf and orphans are left alone until it
 * dies (after_worker_death then kills whatever is still there). */
static void mark_keeper(struct holder *h, pid_t pid) {
  for (size_t i = 0; i < h->n_workers; i++)
    if (h->workers[i] == pid && !h->keeper[i]) {
      h->keeper[i] = true;
      h->idle[i] = false;
      h->n_keepers++;
    }
}

static bool is_worker(const struct holder *h, pid_t pid) {
  for (size_t i = 0; i < h->n_workers; i++)
    if (h->workers[i] == pid)
      return true;
  return false;
}

static void kill_orphans(struct holder *h) {
  pid_t kids[256];
  size_t n = ns_list_children(kids, ARRAY_SIZE(kids));
  for (size_t i = 0; i < n; i++)
    if (!is_worker(h, kids[i]))
      kill(kids[i], SIGKILL); /* their children come to us in turn, and die the same way */
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
  kill_orphans(h);
}

/* Bring the workers up to `workers`, and make one more when a client waits and no pair is
 * idle. Fork failures (the pids limit) are retried later. */
static void replenish(struct holder *h, size_t workers, bool client_waiting) {
  while (h->n_workers - h->n_keepers < workers || (client_waiting && count_idle(h) == 0)) {
    /* A pair that died before serving anyone (its setup failed, or the sandbox killed it) is
     * replaced too, but never in a tight loop. */
    if (h->idle_died && fs_now() - h->last_spawn < 0.01)
      poll(NULL, 0, 10);
    h->idle_died = false;
    h->last_spawn = fs_now();
    if (spawn_worker(h) < 0)
      return;
  }
}

static _Noreturn void holder_loop(struct holder *h) {
  bool exec_seen = false; /* the second pair only after an exec: a one-shot run never needs it */
  replenish(h, 1, false);
  for (;;) {
    /* With no idle pair, a pending connection on the session socket is a client waiting. */
    bool want_clients = count_idle(h) == 0;
    struct pollfd pfds[3] = {
        {.fd = h->signal_fd, .events = POLLIN},
        {.fd = h->busy_read, .events = POLLIN},
        {.fd = want_clients ? h->cfg->listen_fd : -1, .events = POLLIN},
    };
    /* A fork that failed (the pids limit) is retried every 100 ms while clients wait. */
    bool retry = want_clients && h->n_workers == h->n_keepers;
    int timeout = retry ? 100 : h->cfg->socket_file_fd >= 0 ? SOCKET_CHECK_MS : -1;
    if (poll(pfds, 3, timeout) < 0 && errno != EINTR)
      continue;
    /* The session is gone once its lease file is (its directory deleted): end it (the kernel
     * kills everything in our pid namespace with us). */
    struct stat socket_file;
    if (h->cfg->socket_file_fd >= 0 && fstat(h->cfg->socket_file_fd, &socket_file) == 0 &&
        socket_file.st_nlink == 0)
      _exit(0);
    if (pfds[0].revents) {
      struct signalfd_siginfo si;
      while (read(h->signal_fd, &si, sizeof(si)) > 0)
        ;
    }
    bool client_waiting = pfds[2].revents != 0 || retry;
    if (pfds[1].revents) {
      struct worker_note note;
      while (read(h->busy_read, &note, sizeof(note)) == (ssize_t)sizeof(note)) {
        if (note.event == WORKER_CLAIMED) {
          mark_idle(h, note.pid, false);
        } else if (note.event == WORKER_KEPT) {
          mark_keeper(h, note.pid);
          exec_seen = true;
        } else {
          if (note.event == WORKER_REARMED)
            mark_idle(h, note.pid, true);
          exec_seen = true; /* an exec is done: prepare the next pair now */
        }
      }
    }
    /* Reap everything: workers, and orphans whose worker died (they come to pid 1). */
    for (;;) {
      pid_t pid = waitpid(-1, NULL, WNOHANG);
      if (pid <= 0)
        break;
      bool was_idle = false;
      if (forget_worker(h, pid, &was_idle)) {
        if (was_idle) {
          h->idle_died = true;
          ns_idle_slot_drop(h->idle_pairs);
        }
        after_worker_death(h, pid);
      }
    }
    /* Orphans keep arriving while their parents die: sweep on every wake-up. */
    kill_orphans(h);
    replenish(h, exec_seen ? IDLE_TARGET : 1, client_waiting);
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
  ns_set_title("cordon: holder");
  if (sandbox_setup(cfg, NULL, &err) < 0)
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
  /* Workers write 8-byte notes: keep their end blocking; ours is drained without blocking. */
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
  /* We listen, not our creator: a client's SO_PEERCRED then names us (ns.c checks it). */
  if (listen(cfg->listen_fd, 64) < 0) {
    cordon_error_set(&err, CORDON_ERR_SYSTEM, errno, "cannot listen on the session socket");
    fail_setup(ready_fd, err);
  }
  int keep[] = {ready_fd, cfg->listen_fd, cfg->cgroup_fd,      cfg->socket_file_fd, busy[0],
                busy[1],  signal_fd,      cfg->memory_join_fd, cfg->egress_fd};
  close_all_except(keep, ARRAY_SIZE(keep));

  /* From here on nothing needs a privilege: give them all up, so that every worker and
   * command is born with none, no_new_privs and no core dumps. Nothing in the sandbox may read
   * our memory or /proc/1/{exe,fd,cwd,root} either (not dumpable). The seccomp filter is not
   * ours: each command process attaches it before it accepts a request (the holder and its
   * workers need clone3, which the filter denies). */
  if (sandbox_drop_privileges(&err) < 0)
    fail_setup(ready_fd, err);
  report_send(ready_fd, 0, NULL);
  close(ready_fd);
  static struct holder h;
  h = (struct holder){
      .cfg = cfg, .signal_fd = signal_fd, .busy_read = busy[0], .busy_write = busy[1]};
  void *shared = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  h.idle_pairs = shared == MAP_FAILED ? NULL : shared;
  holder_loop(&h);
}

/* ---- spawn (in the caller) --------------------------------------------------------------------
 */

static int namespace_flags(const struct ns_holder_config *cfg) {
  /* The cgroup namespace comes later (holder_main): made here it would be rooted at our
   * cgroup, not at the session's one the holder is born into. */
  return CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS |
         (cfg->new_network ? CLONE_NEWNET : 0);
}

/* Clone the holder (pid 1 of its own pid namespace, born in the session's v2 cgroup: no
 * migration), put it in the v1 cgroups, write its id maps from this, the parent, namespace and
 * let it go. A raw clone3: the caller must be single-threaded. Returns the holder's pid. */
static pid_t clone_holder(const struct ns_holder_config *cfg, int go[2], int ready[2],
                          int close_in_child, struct cordon_error **err) {
  pid_t pid = sys_clone3_fork((uint64_t)namespace_flags(cfg), cfg->cgroup_fd);
  if (pid == 0) {
    if (close_in_child >= 0)
      close(close_in_child);
    close(go[1]);
    close(ready[0]);
    holder_main(cfg, go[0], ready[1]);
  }
  if (pid < 0)
    return cordon_error_set(err,
                            errno == EPERM || errno == ENOSPC || errno == EINVAL
                                ? CORDON_ERR_UNAVAILABLE
                                : CORDON_ERR_SYSTEM,
                            errno, "cannot create the sandbox namespaces");
  int r = confine_cgroups_join_fds(cfg->cgroup_join_fds, pid);
  if (r < 0) {
    kill(pid, SIGKILL);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, -r, "cannot join the session's cgroups");
  }
  if (confine_userns_write_maps(pid, cfg->identity.uid, cfg->outer_uid, cfg->identity.gid,
                                cfg->outer_gid, cfg->rootless, err) < 0) {
    kill(pid, SIGKILL);
    return -1;
  }
  (void)!write(go[1], "G", 1);
  return pid;
}

/* The spawner (for callers with threads, which must not clone raw): clones the holder,
 * reports its pid and exits, so the holder is re-parented away from the caller. It runs in a
 * fresh image of this program, never in the fork's copy of the caller: a copy holds whatever
 * locks the caller's other threads held at the fork, and the first allocation there could wait
 * for ever (seen with the sanitisers' allocator, which takes no lock around fork; and with
 * their hook of prctl). */
static _Noreturn void intermediate_main(const struct ns_holder_config *cfg, int info_fd, int go[2],
                                        int ready[2]) {
  struct cordon_error *err = NULL;
  pid_t pid = clone_holder(cfg, go, ready, info_fd, &err);
  report_send(info_fd, pid > 0 ? pid : 0, pid > 0 ? NULL : err);
  _exit(pid > 0 ? 0 : 1);
}

#define SPAWNER_FLAG "--cordon-internal-holder-spawner"

/* Before main, in the image ns_holder_config_exec started: a program linking libcordon is the
 * spawner when its argv is PROGRAM SPAWNER_FLAG FDS. The fds: the report pipe's write end, the
 * go pipe's two ends and the ready pipe's two ends (as clone_holder takes them), then the
 * configuration's memfd. */
__attribute__((constructor)) static void holder_spawner_entry(int argc, char **argv) {
  if (argc != 3 || strcmp(argv[1], SPAWNER_FLAG) != 0)
    return;
  int fds[5];
  struct ns_holder_config *cfg = NULL;
  struct cordon_error *err = NULL;
  if (ns_holder_config_from_argv(argv, fds, ARRAY_SIZE(fds), &cfg, &err) < 0) {
    if (err->kind == CORDON_ERR_USAGE) {
      fprintf(stderr, "cordon: %s\n", err->message);
      _exit(2);
    }
    report_send(fds[0], 0, err);
    _exit(1);
  }
  int go[2] = {fds[1], fds[2]}, ready[2] = {fds[3], fds[4]};
  intermediate_main(cfg, fds[0], go, ready);
}

static bool single_threaded(void) {
  struct proc_stat st;
  return proc_stat_read(0, &st) == 0 && st.threads == 1;
}

int ns_holder_spawn(const struct ns_holder_config *cfg, pid_t *pid_out, int *ready_fd,
                    struct cordon_error **err) {
  *ready_fd = -1;
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
  /* Every signal blocked while we make copies of ourselves, so no handler of the caller runs
   * in them (the holder resets every disposition first thing). */
  sigset_t all, old_mask;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &old_mask);
  pid_t holder = -1;
  if (single_threaded()) {
    /* The usual case (the CLI): clone the holder ourselves, saving a process and a hop. The
     * holder is our child until we exit; destroy reaps it if we are still there. */
    close(info[1]);
    holder = clone_holder(cfg, go, ready, -1, err);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    close(go[0]);
    close(go[1]);
    close(ready[1]);
    if (holder < 0)
      return -1;
  } else {
    /* A fresh image of this program, where this code is in its executable (the CLI, a
     * program linking libcordon's archive). From libcordon.so (which a program may have
     * dlopen'd, so that an exec of it runs none of cordon's code) the spawner is still the
     * fork's copy, safe with glibc's allocator, which locks around fork. */
    const int handed[] = {info[1], go[0], go[1], ready[0], ready[1]};
    pid_t mid = -1;
    if (proc_in_executable((const void *)holder_spawner_entry)) {
      mid = ns_holder_config_exec(cfg, SPAWNER_FLAG, handed, ARRAY_SIZE(handed), err);
    } else if ((mid = fork()) == 0) {
      close(info[0]);
      intermediate_main(cfg, info[1], go, ready);
    } else if (mid < 0) {
      cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "fork");
    }
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    close(info[1]);
    close(go[0]);
    close(go[1]);
    close(ready[1]);
    if (mid < 0)
      return -1;
    struct setup_report rep;
    int got = report_receive(info_read, &rep);
    int status = 0;
    while (waitpid(mid, &status, 0) < 0 && errno == EINTR)
      ;
    if (got < 0 && WIFEXITED(status) && WEXITSTATUS(status) == NS_CONFIG_EXEC_FAILED)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                              "cannot start the sandbox spawner: exec of /proc/self/exe");
    if (got < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "the sandbox spawner died");
    if (rep.kind >= 0)
      return report_raise(&rep, "", err);
    holder = rep.pid;
  }
  *pid_out = holder;
  *ready_fd = steal_fd(&ready_read);
  return 0;
}

int ns_holder_wait(pid_t holder, int ready_fd, struct cordon_error **err) {
  _cleanup_close_ int ready_read = ready_fd;
  struct setup_report rep;
  if (report_receive(ready_read, &rep) < 0) {
    kill(holder, SIGKILL);
    waitpid(holder, NULL, WNOHANG);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "the sandbox holder died while setting up");
  }
  if (rep.kind >= 0) {
    kill(holder, SIGKILL);
    waitpid(holder, NULL, WNOHANG);
    return report_raise(&rep, "sandbox setup: ", err);
  }
  return 0;
}

/* ---- one-shot (see holder.h) ------------------------------------------------------------------
 */

#define ONESHOT_STACK_SIZE (256 * 1024)
#define ONESHOT_STACK_PREFAULT (16 * 1024)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* The one-shot sandbox's network namespace is the slowest one to make (the kernel runs every
 * per-namespace init of the network stack: ~0.3-0.5 ms here), and bringing lo up in it costs
 * more. Neither needs the mount tree: so pid 1 is born without CLONE_NEWNET and, first thing,
 * clones a helper (CLONE_VM | CLONE_FILES, on the command's stack, unused until then) that
 * makes a new network namespace (unshare: in its own time, where a clone would make it in
 * pid 1's) and brings lo up there while pid 1 builds the root on the other
 * core. pid 1 then reaps the helper and joins its namespace (setns), all before it drops its
 * capabilities and long before the command exists. The namespace is owned
 * by the sandbox's user namespace, as one made by pid 1's own clone would be. Should the join
 * fail, the setup fails: the command never runs in the caller's network namespace. */
struct oneshot_net {
  const struct ns_holder_config *cfg;
  unsigned char *stack_top;
  pid_t pid;
  volatile int nsfd;  /* the helper's network namespace, in the fd table it shares with pid 1 */
  volatile int ready; /* helper -> pid 1: 1 once it is done (lo up, or a step failed) */
  volatile int error; /* errno of the helper's failed step, or 0 */
  volatile int stage; /* which step failed (oneshot_net_join names them), or 0 */
};

struct ns_oneshot {
  const struct ns_holder_config *cfg;
  /* oom_shield: the thread whose vfork pid 1 is (see ns_oneshot_start). pid1_started is 0
   * until pid 1 runs (1) or the clone failed (-errno); pid1_tid gets pid 1's pid from the
   * kernel (CLONE_PARENT_SETTID) before pid 1 first runs. */
  pthread_t vfork_thread;
  bool vfork_thread_started;
  volatile int pid1_started;
  pid_t pid1_tid;
  const struct ns_oneshot_command *cmd;
  unsigned char *stacks; /* pid 1's, then the command's */
  pid_t pid1;
  bool reaped;
  /* Pipes. Shared memory: the caller closes its copies of pid 1's ends but never changes these
   * numbers, which pid 1 reads. */
  int go[2];     /* caller -> pid 1: the id maps are written */
  int report[2]; /* pid 1 -> caller: one setup_report; EOF when pid 1 is gone */
  bool child_ends_closed;
  bool dumpable_held; /* pid 1 lives: it holds the caller's flag cleared (dumpable_hold) */
  /* Shared memory: written by pid 1 or the command, read by the caller once pid 1 is reaped
   * (or, for exec_stage, once pid 1 has reported). */
  volatile int command_status;
  volatile int command_done;
  volatile int exec_stage; /* 0, or NS_STAGE_* when the command failed before execve */
  volatile int exec_errno;
  struct ns_oneshot *left_next; /* on left_at_exit */
  struct oneshot_net net;
};

/* Ended sandboxes whose pid 1 this process, about to exit, does not wait for (see
 * ns_oneshot_release): kept reachable, since pid 1 may still run on the stacks they hold. */
static struct ns_oneshot *left_at_exit;

/* The dumpable flag belongs to the memory, which every one-shot pid 1 shares with the caller:
 * each pid 1 clears it (sandbox_drop_privileges), so that its sandbox can neither see pid 1
 * (hidepid) nor open /proc/1/mem, which would be the caller's memory. Several sandboxes of one
 * process (a race's candidates) share that one flag, so it comes back only when the last of
 * them has ended: restored by whichever ended first, it would open every other one's pid 1,
 * and the caller's memory with it, to that sandbox's commands. */
static pthread_mutex_t dumpable_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned dumpable_holds;
static int dumpable_saved;

static void dumpable_hold(struct ns_oneshot *o) {
  pthread_mutex_lock(&dumpable_lock);
  if (dumpable_holds++ == 0)
    dumpable_saved = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
  o->dumpable_held = true;
  pthread_mutex_unlock(&dumpable_lock);
}

/* Once o's pid 1 is gone. Idempotent. */
static void dumpable_release(struct ns_oneshot *o) {
  pthread_mutex_lock(&dumpable_lock);
  if (o->dumpable_held && --dumpable_holds == 0 && dumpable_saved > 0)
    prctl(PR_SET_DUMPABLE, dumpable_saved, 0, 0, 0);
  o->dumpable_held = false;
  pthread_mutex_unlock(&dumpable_lock);
}

ON_OWN_STACK static int oneshot_command_main(void *arg) {
  struct ns_oneshot *o = arg;
  const struct ns_oneshot_command *cmd = o->cmd;
  setsid(); /* new session, no controlling terminal */
  /* umask 022, never the caller's (see command_main) */
  umask(022);
  int r = ns_join_memory_cgroup(o->cfg);
  if (r == 0)
    r = confine_apply_rlimits(&o->cfg->rlimits);
  if (r == 0)
    r = confine_seccomp_attach(confine_seccomp_prebuilt());
  int moved[3] = {-1, -1, -1};
  /* Move stdio above 2 first: one of them may sit on 0..2 and the dup2s would clobber it. */
  for (int i = 0; r == 0 && i < 3; i++)
    if ((moved[i] = fcntl(cmd->stdio[i], F_DUPFD_CLOEXEC, 3)) < 0)
      r = -errno;
  for (int i = 0; r == 0 && i < 3; i++)
    if (dup2(moved[i], i) < 0)
      r = -errno;
  /* As in the session worker (command_main in worker.c): a terminal on fd 0 becomes ours. */
  if (r == 0)
    (void)ioctl(0, TIOCSCTTY, 0);
  if (r < 0) {
    o->exec_errno = -r;
    o->exec_stage = NS_STAGE_SETUP;
    _exit(127);
  }
  sys_close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  if (chdir(cmd->cwd) < 0) {
    o->exec_errno = errno;
    o->exec_stage = NS_STAGE_CHDIR;
    _exit(127);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  int e = ns_exec_search(cmd->argv[0], (char *const *)cmd->argv, (char *const *)cmd->envp);
  o->exec_errno = e; /* a result: the command's 126/127 */
  dprintf(2, "cordon: %s: %s\n", cmd->argv[0], strerror(e));
  _exit(e == ENOENT ? 127 : 126);
}

ON_OWN_STACK static _Noreturn void oneshot_fail(struct ns_oneshot *o, struct cordon_error *err) {
  report_send(o->report[1], 0, err);
  cordon_error_free(err); /* the caller's heap: nothing may leak into it */
  _exit(1);
}

ON_OWN_STACK static void futex_wake_all(volatile int *word) {
  sys_futex((uint32_t *)word, FUTEX_WAKE, INT_MAX);
}

/* The helper: only system calls (it shares pid 1's memory and fd table, and runs beside it).
 * It hands its namespace over as an fd (SIOCGSKNS on a socket of it: no /proc, whose view
 * changes while pid 1 pivots, and no pidfd, which setns checks like ptrace against the memory
 * we share with the caller), then exits: the fd keeps the namespace. */
ON_OWN_STACK static int oneshot_net_main(void *arg) {
  struct oneshot_net *net = arg;
  int stage = 0, error = 0, nsfd = -1, sock = -1;
  struct ifreq ifr;
  memset(&ifr, 0, sizeof(ifr));
  memcpy(ifr.ifr_name, "lo", 3);
  /* Made here, not by the clone: a clone makes its namespaces in the parent's time. */
  if (unshare(CLONE_NEWNET) < 0)
    stage = 5, error = errno;
  else if ((sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
    stage = 1, error = errno;
  else if ((nsfd = ioctl(sock, SIOCGSKNS)) < 0)
    stage = 2, error = errno;
  else if (net->cfg->loopback && ioctl(sock, SIOCGIFFLAGS, &ifr) < 0)
    stage = 3, error = errno;
  else if (net->cfg->loopback &&
           (ifr.ifr_flags |= IFF_UP | IFF_RUNNING, ioctl(sock, SIOCSIFFLAGS, &ifr) < 0))
    stage = 4, error = errno;
  if (sock >= 0)
    close(sock);
  net->nsfd = nsfd;
  net->stage = stage;
  net->error = error;
  __atomic_store_n(&net->ready, 1, __ATOMIC_SEQ_CST);
  _exit(0);
}

ON_OWN_STACK static int oneshot_net_start(struct oneshot_net *net, struct cordon_error **err) {
  net->pid = clone(oneshot_net_main, net->stack_top, CLONE_VM | CLONE_FILES | SIGCHLD, net);
  if (net->pid < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno,
                            "cannot create the sandbox's network namespace");
  return 0;
}

ON_OWN_STACK static int oneshot_net_join(struct oneshot_net *net, struct cordon_error **err) {
  /* Its exit is its answer: a helper killed before it could give one fails the setup. */
  while (waitpid(net->pid, NULL, __WALL) < 0 && errno == EINTR)
    ;
  int r = 0;
  if (!__atomic_load_n(&net->ready, __ATOMIC_SEQ_CST)) {
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                         "the helper making the sandbox's network namespace died");
  } else if (net->stage) {
    static const char *const what[] = {"",
                                       "socket in the sandbox's network namespace",
                                       "cannot name the sandbox's network namespace",
                                       "cannot read the flags of lo",
                                       "cannot bring lo up",
                                       "cannot create the sandbox's network namespace"};
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, net->error, "%s", what[net->stage]);
  } else if (setns(net->nsfd, CLONE_NEWNET) < 0) {
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno,
                         "cannot join the sandbox's network namespace");
  }
  if (net->nsfd >= 0)
    close(net->nsfd);
  net->nsfd = -1;
  return r;
}

ON_OWN_STACK static int oneshot_pid1_main(void *arg) {
  struct ns_oneshot *o = arg;
  struct cordon_error *err = NULL;
  if (o->cfg->oom_shield) {
    __atomic_store_n(&o->pid1_started, 1, __ATOMIC_SEQ_CST);
    futex_wake_all(&o->pid1_started);
  }
  char go = 0;
  ssize_t n;
  do
    n = read(o->go[0], &go, 1);
  while (n < 0 && errno == EINTR);
  if (n != 1 || go != 'G')
    _exit(1);      /* the caller reports its own failure */
  reset_signals(); /* the caller's handlers must never run here */
  setsid();
  if (sandbox_setup(o->cfg, o->cfg->new_network ? &o->net : NULL, &err) < 0)
    oneshot_fail(o, err);
  /* Nothing below needs a privilege: the command is born with none. Not dumpable, so nothing in
   * the sandbox may read this memory, which is also the caller's (its arguments included). */
  if (sandbox_drop_privileges(&err) < 0)
    oneshot_fail(o, err);
  int keep[] = {o->report[1],     o->go[0],         o->cmd->stdio[0],
                o->cmd->stdio[1], o->cmd->stdio[2], o->cfg->memory_join_fd,
                o->cfg->egress_fd};
  close_all_except(keep, ARRAY_SIZE(keep));
  /* The sandbox dies with the caller (killed, crashed): its thread's death kills us, and with
   * us the namespace. Asked only now: the setup's change of uid clears the parent-death signal.
   * A caller that died before we asked has closed its end of the go pipe: we see a hang-up. */
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  struct pollfd caller = {.fd = o->go[0], .events = POLLIN};
  if (poll(&caller, 1, 0) > 0)
    _exit(1);
  close(o->go[0]);
  /* Returns once the command has exec'd or failed: it borrows this memory until then. */
  pid_t pid = clone(oneshot_command_main, o->stacks + 2 * ONESHOT_STACK_SIZE,
                    CLONE_VM | CLONE_VFORK | SIGCHLD, o);
  if (pid < 0) {
    cordon_error_set(&err, CORDON_ERR_SYSTEM, errno, "cannot start %s", o->cmd->argv[0]);
    oneshot_fail(o, err);
  }
  if (o->exec_stage) {
    waitpid(pid, NULL, 0);
    if (o->exec_stage == NS_STAGE_CHDIR)
      cordon_error_set(&err, CORDON_ERR_SYSTEM, o->exec_errno, "cannot run %s in %s",
                       o->cmd->argv[0], o->cmd->cwd);
    else
      cordon_error_set(&err, CORDON_ERR_SYSTEM, o->exec_errno, "the sandbox could not set up %s",
                       o->cmd->argv[0]);
    oneshot_fail(o, err);
  }
  report_send(o->report[1], 0, NULL);
  for (int i = 0; i < 3; i++)
    if (o->cmd->stdio[i] > 2)
      close(o->cmd->stdio[i]);
  /* From here on only system calls: the caller is running again, in this same memory. The
   * report pipe stays open until we exit: that EOF is the caller's "ended". */
  for (;;) {
    int status;
    pid_t got = waitpid(-1, &status, __WALL);
    if (got == pid) {
      o->command_status = status;
      o->command_done = 1;
      break;
    }
    if (got < 0 && errno != EINTR)
      break;
  }
  /* The command has ended: end whatever it left behind and reap it, so that nothing in the
   * sandbox runs any more, then say "ended" by closing the report pipe ourselves. The caller
   * goes on (removes the workspace) while the kernel takes the namespaces down as we exit, an
   * expedited RCU grace period of milliseconds that our exit would otherwise make it wait for.
   * kill(-1) from pid 1 reaches every process of its pid namespace and nothing outside it. */
  if (getpid() == 1)
    kill(-1, SIGKILL);
  while (waitpid(-1, NULL, __WALL) >= 0 || errno == EINTR)
    ;
  close(o->report[1]);
  _exit(0);
}

static void oneshot_close_child_ends(struct ns_oneshot *o) {
  if (o->child_ends_closed)
    return;
  if (o->go[0] >= 0)
    close(o->go[0]);
  if (o->report[1] >= 0)
    close(o->report[1]);
  o->child_ends_closed = true;
}

static void oneshot_close_pipes(struct ns_oneshot *o) {
  oneshot_close_child_ends(o);
  if (o->go[1] >= 0)
    close(o->go[1]);
  if (o->report[0] >= 0)
    close(o->report[0]);
  o->go[1] = o->report[0] = -1;
}

static void oneshot_wait(struct ns_oneshot *o, int *status) {
  if (o->reaped || o->pid1 <= 0)
    return;
  while (waitpid(o->pid1, status, __WALL) < 0 && errno == EINTR)
    ;
  o->reaped = true;
  dumpable_release(o);
}

void ns_oneshot_kill(struct ns_oneshot *o) {
  if (o && o->pid1 > 0 && !o->reaped)
    kill(o->pid1, SIGKILL);
}

void ns_oneshot_release(struct ns_oneshot *o) {
  if (!o)
    return;
  /* The command's tree is gone and pid 1 has hung up: all it has left to do is _exit, and the
   * kernel's teardown of its namespaces (an RCU grace period or two, the longest wait of a
   * cold `cordon run`). A process about to exit need not wait for that: its exit hands pid 1
   * to init. Not with the OOM shield, whose thread waits for pid 1. */
  if (o->command_done && !o->vfork_thread_started && proc_exit_pending()) {
    o->left_next = left_at_exit;
    left_at_exit = o;
    return;
  }
  ns_oneshot_free(o);
}

pid_t ns_oneshot_pid1_finishing(const struct ns_oneshot *o) {
  if (!o || !o->command_done || o->vfork_thread_started || o->reaped || o->pid1 <= 0 ||
      o->report[0] < 0)
    return 0;
  /* pid 1 hangs up only after it has killed and reaped everything else */
  struct pollfd pfd = {.fd = o->report[0], .events = POLLIN};
  if (poll(&pfd, 1, 0) != 1 || !(pfd.revents & POLLHUP))
    return 0;
  return o->pid1;
}

void ns_oneshot_free(struct ns_oneshot *o) {
  if (!o)
    return;
  int status;
  ns_oneshot_kill(o);
  oneshot_wait(o, &status);
  /* pid 1 is gone: its vfork is over, and its thread returns. */
  if (o->vfork_thread_started)
    pthread_join(o->vfork_thread, NULL);
  oneshot_close_pipes(o);
  if (o->stacks)
    ns_stack_unmap(o->stacks, 2 * ONESHOT_STACK_SIZE);
  free(o);
}

/* pid 1 of a one-shot sandbox: its network namespace comes from its helper (oneshot_net). */
static int oneshot_namespace_flags(const struct ns_holder_config *cfg) {
  return namespace_flags(cfg) & ~CLONE_NEWNET;
}

/* oom_shield: pid 1 as a vfork of this thread, which waits in the clone until pid 1 ends. */
static void *oneshot_vfork_thread(void *arg) {
  struct ns_oneshot *o = arg;
  pid_t pid = clone(oneshot_pid1_main, o->stacks + ONESHOT_STACK_SIZE,
                    CLONE_VM | CLONE_VFORK | CLONE_PARENT_SETTID | oneshot_namespace_flags(o->cfg) |
                        SIGCHLD,
                    o, &o->pid1_tid);
  if (pid < 0) {
    __atomic_store_n(&o->pid1_started, -errno, __ATOMIC_SEQ_CST);
    futex_wake_all(&o->pid1_started);
  }
  return NULL;
}

/* Clone pid 1 as a vfork of a thread of its own (see oom_shield); its pid, or -1 with errno. */
static pid_t oneshot_clone_shielded(struct ns_oneshot *o) {
  int r = pthread_create(&o->vfork_thread, NULL, oneshot_vfork_thread, o);
  if (r != 0) {
    errno = r;
    return -1;
  }
  o->vfork_thread_started = true;
  int started;
  while ((started = __atomic_load_n(&o->pid1_started, __ATOMIC_SEQ_CST)) == 0)
    sys_futex((uint32_t *)&o->pid1_started, FUTEX_WAIT, 0);
  if (started < 0) {
    errno = -started;
    return -1;
  }
  return o->pid1_tid;
}

int ns_oneshot_start(const struct ns_holder_config *cfg, const struct ns_oneshot_command *cmd,
                     struct ns_oneshot **out, int *exit_fd, struct cordon_error **err) {
  struct ns_oneshot *o = calloc(1, sizeof(*o));
  if (!o)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "sandbox");
  *o = (struct ns_oneshot){
      .cfg = cfg, .cmd = cmd, .go = {-1, -1}, .report = {-1, -1}, .net = {.cfg = cfg, .nsfd = -1}};
  *out = o;
  o->stacks = ns_stack_map(2 * ONESHOT_STACK_SIZE);
  if (!o->stacks)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "sandbox stacks");
  o->net.stack_top = o->stacks + 2 * ONESHOT_STACK_SIZE; /* the command's, free until then */
  /* The tops of both stacks, which pid 1 and the command's process use, mapped now in one
   * call each rather than faulted in page by page (a fault costs ten times a populated page
   * in a VM); best effort, as in the CLI's start-up. */
  for (int i = 1; i <= 2; i++)
    (void)madvise(o->stacks + i * ONESHOT_STACK_SIZE - ONESHOT_STACK_PREFAULT,
                  ONESHOT_STACK_PREFAULT, MADV_POPULATE_WRITE);
  if (pipe2(o->go, O_CLOEXEC) < 0 || pipe2(o->report, O_CLOEXEC) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "pipe");
  /* Every signal blocked across the clone, so no handler of ours runs in pid 1 before it resets
   * them all. */
  sigset_t all, old_mask;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old_mask);
  pid_t pid = cfg->oom_shield ? oneshot_clone_shielded(o)
                              : clone(oneshot_pid1_main, o->stacks + ONESHOT_STACK_SIZE,
                                      CLONE_VM | oneshot_namespace_flags(cfg) | SIGCHLD, o);
  int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
  if (pid < 0)
    return cordon_error_set(err,
                            clone_errno == EPERM || clone_errno == ENOSPC || clone_errno == EINVAL
                                ? CORDON_ERR_UNAVAILABLE
                                : CORDON_ERR_SYSTEM,
                            clone_errno, "cannot create the sandbox namespaces");
  o->pid1 = pid;
  dumpable_hold(o); /* before the go: pid 1 clears the flag only after it */
  oneshot_close_child_ends(o);
  int r = confine_cgroups_join_fds(cfg->cgroup_join_fds, pid);
  if (r == 0 && cfg->cgroup_fd >= 0) {
    char text[16];
    int len = snprintf(text, sizeof(text), "%d", (int)pid);
    _cleanup_close_ int procs = openat(cfg->cgroup_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
    if (procs < 0 || write(procs, text, (size_t)len) != len)
      r = -errno;
  }
  if (r < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, -r, "cannot join the session's cgroups");
  if (confine_userns_write_maps(pid, cfg->identity.uid, cfg->outer_uid, cfg->identity.gid,
                                cfg->outer_gid, cfg->rootless, err) < 0)
    return -1;
  if (write(o->go[1], "G", 1) != 1)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot start the sandbox");
  struct setup_report rep;
  if (report_receive(o->report[0], &rep) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "the sandbox died while setting up");
  if (rep.kind >= 0)
    return report_raise(&rep, "sandbox setup: ", err);
  *exit_fd = fcntl(o->report[0], F_DUPFD_CLOEXEC, 3);
  if (*exit_fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "dup");
  return 0;
}

int ns_oneshot_exec_failure(const struct ns_oneshot *o) {
  /* exec_errno without exec_stage: set by the command process when execve failed. */
  if (!o || !o->command_done || o->exec_stage || !o->exec_errno)
    return 0;
  int status = o->command_status;
  if (!WIFEXITED(status) || (WEXITSTATUS(status) != 126 && WEXITSTATUS(status) != 127))
    return 0;
  return WEXITSTATUS(status);
}

int ns_oneshot_reap(struct ns_oneshot *o, int *exit_code, int *term_signal,
                    struct cordon_error **err) {
  int status = 0;
  /* pid 1 records the command's status, and ends the rest of the sandbox, before it hangs up:
   * the status needs no wait for pid 1's exit (ns_oneshot_free reaps it). */
  if (!o->command_done)
    oneshot_wait(o, &status);
  if (o->command_done)
    status = o->command_status;
  else if (!WIFSIGNALED(status))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0,
                            "the sandbox ended without the command's status");
  /* Not the command's status: pid 1 was killed (the timeout, or from outside), and the command
   * with it. */
  if (WIFSIGNALED(status)) {
    *term_signal = WTERMSIG(status);
    *exit_code = 128 + WTERMSIG(status);
  } else {
    *term_signal = 0;
    *exit_code = WEXITSTATUS(status);
  }
  return 0;
}
