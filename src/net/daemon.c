/* The egress proxy's daemon (daemon.h): its start, its confinement (no fd, signal, terminal
 * or core of cordon's; a mount namespace of its own, as root then uid nobody, as another user
 * in a user namespace of its own without its capabilities; the proxy's
 * seccomp filter), the handoff it waits for, and the serving. A listening socket handed over
 * from inside the sandbox (ns) is the proxy's own: no bridge relays it to a unix socket first,
 * so a byte crosses one relay, not two (bench/egress). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/clone-run.h"
#include "base/proc.h"
#include "base/syscalls.h"
#include "net/daemon.h"
#include "net/proxy.h"
#include "net/rules.h"

/* nobody: the proxy's uid and gid when cordon runs as root */
#define OVERFLOW_ID 65534
/* Where the daemon builds its root before pivoting into it (in its own mount namespace, so
 * nobody else sees the tmpfs mounted there). */
#define STAGING "/tmp"

struct egress_daemon {
  struct net_rules *rules;
  bool serves_bridge; /* the proxy serves a listener handed over (NET_EGRESS_BRIDGE) */
  int handoff;        /* the one fd arrives here; for a listener, its hang-up ends us */
  int proxy_listen;   /* NET_EGRESS_SOCKET in the session's runtime directory, or -1 (ns) */
  int events_fd;
};

static int receive_handoff(int handoff, char *kind) {
  struct iovec iov = {.iov_base = kind, .iov_len = 1};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } control;
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buf,
                       .msg_controllen = sizeof(control.buf)};
  ssize_t n;
  do
    n = recvmsg(handoff, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  struct cmsghdr *c = n == 1 ? CMSG_FIRSTHDR(&msg) : NULL;
  if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
      c->cmsg_len != CMSG_LEN(sizeof(int)))
    return -1; /* the sandbox ended (or failed) before its setup: nothing to serve */
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof(fd));
  return fd;
}

int net_egress_hand(int handoff, enum net_egress_handoff kind, int fd, struct cordon_error **err) {
  char byte = (char)kind;
  struct iovec iov = {.iov_base = &byte, .iov_len = 1};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } control;
  memset(&control, 0, sizeof(control));
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buf,
                       .msg_controllen = sizeof(control.buf)};
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof(fd));
  if (sendmsg(handoff, &msg, MSG_NOSIGNAL) != 1)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot hand the egress proxy its %s",
                            kind == NET_EGRESS_BRIDGE ? "bridge's socket" : "session's lifetime");
  return 0;
}

/* Nothing of cordon's but what the daemon serves with: no other fd, no handler, no terminal,
 * no core, no new privileges, not dumpable. */
static void daemon_detach(const struct egress_daemon *d) {
  int keep[] = {d->handoff, d->proxy_listen, d->events_fd};
  for (int fd = 3; fd < 1024; fd++) {
    bool kept = false;
    for (size_t i = 0; i < ARRAY_SIZE(keep); i++)
      kept |= keep[i] == fd;
    if (!kept)
      close(fd);
  }
  sys_close_range(1024, ~0U, 0);
  /* Not even cordon's stdio: a reader of cordon's output (a pipe) must see its end when cordon
   * exits, not when the session does. A failure is said in the event log (daemon_failed). */
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd >= 0) {
    for (int i = 0; i < 3; i++)
      dup2(null_fd, i);
    if (null_fd > 2)
      close(null_fd);
  }
  for (int sig = 1; sig < NSIG; sig++)
    signal(sig, SIG_DFL);
  signal(SIGPIPE, SIG_IGN); /* a client gone mid-write is that connection's end only */
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  static const struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  (void)!chdir("/");
  prctl(PR_SET_NAME, "cordon-egress", 0, 0, 0);
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

/* One line in the event log (the only output the daemon has) when the proxy could not serve. */
static void daemon_failed(int events_fd, const char *what, const struct cordon_error *err) {
  char line[512];
  const char *m = err && err->message ? err->message : "failed";
  size_t k = 0;
  for (const char *p = m; *p && k < 200; p++) /* a message in a JSON string: no quote, no \\ */
    line[k++] = (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) ? '?' : *p;
  line[k] = 0;
  dprintf(events_fd, "{\"kind\":\"egress.error\",\"in\":\"%s\",\"message\":\"%s\"}\n", what, line);
}

/* ---- the daemon's file system ------------------------------------------------------------ */

/* What getaddrinfo reads: the name service's configuration, the loader's cache (dlopen of an
 * NSS module finds multiarch directories only through it) and the libraries such a module may
 * load. Absent ones are skipped. */
static const char *const resolver_files[] = {
    "etc/hosts",     "etc/resolv.conf", "etc/nsswitch.conf", "etc/gai.conf",
    "etc/host.conf", "etc/services",    "etc/protocols",     "etc/ld.so.cache",
};
static const char *const library_dirs[] = {"lib", "lib64", "lib32", "usr/lib", "usr/lib64"};

static int bind_read_only(const char *source, const char *target, unsigned long extra) {
  if (mount(source, target, NULL, MS_BIND | extra, NULL) < 0)
    return -1;
  return mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | extra,
               NULL);
}

/* An empty file (or directory) in the staging root for a bind mount to land on. */
static int make_target(const char *path, bool dir) {
  if (dir)
    return mkdir(path, 0755) < 0 && errno != EEXIST ? -1 : 0;
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return -1;
  close(fd);
  return 0;
}

/* One host path into the staging root: a symlink (usrmerge's /lib -> usr/lib) is copied as a
 * symlink, a directory or file is bound read-only. */
static int stage_host_path(const char *rel, bool dir) {
  char source[256], target[256], link[256];
  snprintf(source, sizeof(source), "/%s", rel);
  snprintf(target, sizeof(target), STAGING "/%s", rel);
  struct stat st;
  if (lstat(source, &st) < 0)
    return errno == ENOENT ? 0 : -1;
  if (S_ISLNK(st.st_mode) && dir) {
    ssize_t n = readlink(source, link, sizeof(link) - 1);
    if (n < 0)
      return -1;
    link[n] = 0;
    return symlink(link, target);
  }
  if (dir ? !S_ISDIR(st.st_mode) : stat(source, &st) < 0 || !S_ISREG(st.st_mode))
    return 0;
  if (make_target(target, dir) < 0)
    return -1;
  return bind_read_only(source, target, dir ? MS_REC : 0);
}

/* As root: a mount namespace whose root is a tmpfs holding resolver_files and library_dirs,
 * read-only; the host's tree is gone (pivot_root, then detached). The fds the daemon holds
 * stay its only other reach. */
static int isolate_filesystem(struct cordon_error **err) {
  const char *step = "unshare";
  if (unshare(CLONE_NEWNS) < 0)
    goto fail;
  step = "private mounts";
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    goto fail;
  step = "tmpfs";
  if (mount("cordon-egress", STAGING, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
            "mode=0755,size=64k") < 0)
    goto fail;
  step = "directories";
  if (mkdir(STAGING "/etc", 0755) < 0 || mkdir(STAGING "/usr", 0755) < 0 ||
      mkdir(STAGING "/.old", 0700) < 0)
    goto fail;
  for (size_t i = 0; i < ARRAY_SIZE(resolver_files); i++) {
    step = resolver_files[i];
    if (stage_host_path(resolver_files[i], false) < 0)
      goto fail;
  }
  for (size_t i = 0; i < ARRAY_SIZE(library_dirs); i++) {
    step = library_dirs[i];
    if (stage_host_path(library_dirs[i], true) < 0)
      goto fail;
  }
  step = "pivot_root";
  if (sys_pivot_root(STAGING, STAGING "/.old") < 0 || chdir("/") < 0)
    goto fail;
  step = "detach the host's tree";
  if (umount2("/.old", MNT_DETACH) < 0 || rmdir("/.old") < 0)
    goto fail;
  step = "read-only root";
  if (mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    goto fail;
  return 0;
fail:
  return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "egress proxy's file system: %s", step);
}

/* One line into a /proc/self file (uid_map, gid_map, setgroups). */
static int write_proc(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = write(fd, text, strlen(text));
  int e = errno;
  close(fd);
  errno = e;
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* Not root: a user namespace of the daemon's own (its uid and gid mapped to themselves), in
 * which it may build the same mount namespace as root does. 1 when made; 0 when the kernel
 * offers none to this user (unprivileged user namespaces disabled): the daemon then serves
 * without, as documented; -1 when made but not set up (the caller fails closed). */
static int own_user_namespace(struct cordon_error **err) {
  uid_t uid = geteuid();
  gid_t gid = getegid();
  if (unshare(CLONE_NEWUSER) < 0)
    return 0;
  /* A process that is not dumpable cannot open its own /proc files for writing: dumpable for
   * the maps only, before anything from the sandbox arrives. */
  prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  char map[64];
  const char *step = "setgroups";
  if (write_proc("/proc/self/setgroups", "deny") < 0)
    goto fail;
  step = "uid_map";
  snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
  if (write_proc("/proc/self/uid_map", map) < 0)
    goto fail;
  step = "gid_map";
  snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
  if (write_proc("/proc/self/gid_map", map) < 0)
    goto fail;
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  return 1;
fail:
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "egress proxy's user namespace: %s", step);
}

/* The capabilities a user namespace's creator holds in it: none are needed once the root is
 * built (they reach nothing of the host's, but the proxy has no use for them). */
static int drop_capabilities(void) {
  struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  struct __user_cap_data_struct data[2] = {{0, 0, 0}, {0, 0, 0}};
  return sys_capset(&header, data);
}

/* ---- serving ------------------------------------------------------------------------------- */

static _Noreturn void egress_main(struct egress_daemon *d) {
  daemon_detach(d);
  struct cordon_error *err = NULL;
  /* Fail closed: a daemon that can have a mount namespace (root, or a user namespace of its
   * own) and cannot shed the host's file system in it does not serve. */
  int userns = geteuid() == 0 ? 0 : own_user_namespace(&err);
  if (userns < 0 || ((geteuid() == 0 || userns > 0) && isolate_filesystem(&err) < 0) ||
      (userns > 0 && drop_capabilities() < 0 &&
       cordon_error_set(&err, CORDON_ERR_SYSTEM, errno, "capabilities") < 0)) {
    daemon_failed(d->events_fd, "confine", err);
    _exit(1);
  }
  /* The proxy's seccomp filter, before anything from the sandbox arrives. */
  if (net_proxy_confine(&err) < 0) {
    daemon_failed(d->events_fd, "confine", err);
    _exit(1);
  }
  char kind = 0;
  int received = receive_handoff(d->handoff, &kind);
  if (received < 0)
    _exit(0);
  int listen_fd = d->proxy_listen, stop_fd = d->handoff;
  if (kind == NET_EGRESS_BRIDGE && d->serves_bridge)
    listen_fd = received; /* the sandbox's 127.0.0.1:3128: its clients are the proxy's */
  else if (kind == NET_EGRESS_LIFETIME && d->proxy_listen >= 0)
    stop_fd = received;
  else
    _exit(1);
  /* The proxy needs no one's files: as root, it serves as nobody (no capability left). */
  if (geteuid() == 0 &&
      (setgroups(0, NULL) < 0 || setresgid(OVERFLOW_ID, OVERFLOW_ID, OVERFLOW_ID) < 0 ||
       setresuid(OVERFLOW_ID, OVERFLOW_ID, OVERFLOW_ID) < 0)) {
    cordon_error_set(&err, CORDON_ERR_SYSTEM, errno, "cannot drop to uid %d", OVERFLOW_ID);
    daemon_failed(d->events_fd, "proxy", err);
    _exit(1);
  }
  /* Docker: the bridge in the container hands over each client's socket (handoff.h). */
  struct net_proxy_options o = {
      .rules = d->rules, .events_fd = d->events_fd, .handoff = listen_fd == d->proxy_listen};
  int r = net_proxy_serve(&o, listen_fd, stop_fd, &err);
  if (r < 0)
    daemon_failed(d->events_fd, "proxy", err);
  _exit(r < 0);
}

int net_egress_events_wait(int fd, int timeout_ms) {
  for (int waited = 0;; waited += 10) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
      flock(fd, LOCK_UN);
      return 0;
    }
    if ((errno != EWOULDBLOCK && errno != EINTR) || waited >= timeout_ms)
      return -1;
    struct timespec step = {0, 10 * 1000 * 1000};
    nanosleep(&step, NULL);
  }
}

static int proxy_socket(const struct net_egress_daemon_spec *spec, struct cordon_error **err) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "socket");
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d/%s", spec->run_fd,
           NET_EGRESS_SOCKET);
  if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
      fchmodat(spec->run_fd, NET_EGRESS_SOCKET, 0600, 0) < 0 ||
      ((spec->socket_uid != (uid_t)-1 || spec->socket_gid != (gid_t)-1) &&
       fchownat(spec->run_fd, NET_EGRESS_SOCKET, spec->socket_uid, spec->socket_gid,
                AT_SYMLINK_NOFOLLOW) < 0) ||
      listen(fd, 128) < 0) {
    int e = errno;
    close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "cannot create the egress proxy's socket");
  }
  return fd;
}

/* ---- the start: fork, then exec a fresh image ---------------------------------------------
 *
 * The caller may have threads (a race's workers, `cordon serve`). A child forked from such a
 * process holds copies of whatever locks other threads held at that instant; the first
 * allocation there can wait forever (seen with the sanitisers' allocator, which takes no lock
 * around fork). So the daemon never runs in the fork's copy: the grandchild only moves its fds
 * into place (async-signal-safe calls alone) and execs this very program again, as runc does
 * for its init. The new image finds the marker in its argv before main (egress_daemon_entry)
 * and serves. */

#define EGRESS_DAEMON_FLAG "--cordon-internal-egress-daemon"
/* The daemon's fds, as the new image finds them. */
enum {
  DAEMON_FD_HANDOFF = 3,
  DAEMON_FD_EVENTS = 4,
  DAEMON_FD_RULES = 5,
  DAEMON_FD_LISTEN = 6,      /* the proxy's socket; absent when it serves the sandbox's listener */
  DAEMON_FD_EXEC_STATUS = 7, /* close-on-exec: the parent reads an errno if the exec failed */
};

static bool fd_is_socket(int fd, int type) {
  struct stat st;
  int t = 0;
  socklen_t len = sizeof t;
  return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
         getsockopt(fd, SOL_SOCKET, SO_TYPE, &t, &len) == 0 && t == type;
}

/* The daemon, from the fds it was handed (the rules are read from their memfd), forked away
 * from this process in a session of its own, so that it is nobody's child there: a caller
 * that lives on (a race) must not find it among its children, and `session create` may exit
 * at once. This process exits (0 once the daemon exists). */
static _Noreturn void serve_detached(bool bridge, int handoff, int events, int rules, int listen) {
  setsid();
  pid_t daemon = fork();
  if (daemon != 0)
    _exit(daemon < 0);
  struct egress_daemon d = {
      .serves_bridge = bridge, .handoff = handoff, .proxy_listen = listen, .events_fd = events};
  struct cordon_error *err = NULL;
  if (net_rules_load(rules, &d.rules, &err) < 0) {
    daemon_failed(d.events_fd, "rules", err);
    _exit(1);
  }
  close(rules);
  egress_main(&d);
}

/* Before main, in the image the caller's child exec'd: a program linking libcordon is the
 * daemon when its argv is exactly PROGRAM EGRESS_DAEMON_FLAG bridge|socket (glibc hands argc
 * and argv to constructors). */
__attribute__((constructor)) static void egress_daemon_entry(int argc, char **argv) {
  if (argc != 3 || strcmp(argv[1], EGRESS_DAEMON_FLAG) != 0)
    return;
  bool bridge = strcmp(argv[2], "bridge") == 0;
  if ((!bridge && strcmp(argv[2], "socket") != 0) ||
      !fd_is_socket(DAEMON_FD_HANDOFF, SOCK_SEQPACKET) ||
      (!bridge && !fd_is_socket(DAEMON_FD_LISTEN, SOCK_STREAM))) {
    fprintf(stderr, "cordon: %s is cordon's own: it is not meant to be run by hand\n",
            EGRESS_DAEMON_FLAG);
    _exit(2);
  }
  serve_detached(bridge, DAEMON_FD_HANDOFF, DAEMON_FD_EVENTS, DAEMON_FD_RULES,
                 bridge ? -1 : DAEMON_FD_LISTEN);
}

/* The child, between its clone and its exec, sharing the caller's memory (a vfork):
 * async-signal-safe calls only, nothing of the caller's written but errno. It only puts the
 * fds in place (in its own fd table) and leaves no other; the new image detaches the rest
 * (stdio, signals, mask: daemon_detach). Every fd it is given is close-on-exec here; each is
 * copied above the targets first so that no move overwrites one still to be moved. Not
 * instrumented by ASan: it runs on a stack of its own. */
struct daemon_exec {
  char *const *argv;
  const int *from;
  size_t count;
  int exec_status;
};

__attribute__((no_sanitize_address)) static int exec_daemon(void *arg) {
  const struct daemon_exec *x = arg;
  char *const *argv = x->argv;
  const int *from = x->from;
  size_t count = x->count;
  int exec_status = x->exec_status;
  int high[8];
  for (size_t i = 0; i < count; i++)
    high[i] = from[i] < 0 ? -1 : fcntl(from[i], F_DUPFD_CLOEXEC, 16);
  int report = fcntl(exec_status, F_DUPFD_CLOEXEC, 16);
  int e = report < 0 ? errno : 0;
  for (size_t i = 0; i < count && !e; i++)
    if (from[i] >= 0 && (high[i] < 0 || dup2(high[i], DAEMON_FD_HANDOFF + (int)i) < 0))
      e = high[i] < 0 ? EBADF : errno;
  if (!e && dup3(report, DAEMON_FD_EXEC_STATUS, O_CLOEXEC) < 0)
    e = errno;
  if (!e) {
    report = DAEMON_FD_EXEC_STATUS;
    if (sys_close_range(DAEMON_FD_EXEC_STATUS + 1, ~0U, 0) < 0)
      e = errno;
  }
  if (!e) {
    extern char **environ;
    execve("/proc/self/exe", argv, environ);
    e = errno;
  }
  (void)!write(report >= 0 ? report : exec_status, &e, sizeof e);
  _exit(127);
}

int net_egress_daemon_start(const struct net_egress_daemon_spec *spec, int *handoff,
                            struct cordon_error **err) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "socketpair");
  _cleanup_close_ int ours = pair[0];
  _cleanup_close_ int theirs = pair[1];
  /* A daemon given the sandbox's listener (ns) needs no socket of its own. */
  _cleanup_close_ int listen_fd = spec->serves_bridge ? -1 : proxy_socket(spec, err);
  if (listen_fd < 0 && !spec->serves_bridge)
    return -1;
  _cleanup_close_ int state_fd = open(spec->state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  _cleanup_close_ int events_fd =
      state_fd < 0 ? -1
                   : openat(state_fd, NET_EGRESS_EVENTS,
                            O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (events_fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s/%s", spec->state_dir,
                            NET_EGRESS_EVENTS);
  /* Held by the daemon's copy of this open file until it exits (net_egress_events_wait). */
  if (flock(events_fd, LOCK_SH) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot lock %s/%s", spec->state_dir,
                            NET_EGRESS_EVENTS);
  _cleanup_close_ int rules_fd = memfd_create("cordon-egress-rules", MFD_CLOEXEC);
  if (rules_fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "memfd_create");
  if (net_rules_save(spec->rules, rules_fd, err) < 0)
    return -1;
  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "pipe");
  _cleanup_close_ int status_read = status_pipe[0];
  _cleanup_close_ int status_write = status_pipe[1];
  /* Built before the fork: the child allocates nothing. */
  char *argv[] = {"cordon-egress", EGRESS_DAEMON_FLAG, spec->serves_bridge ? "bridge" : "socket",
                  NULL};
  const int from[] = {ours, events_fd, rules_fd, listen_fd};
  struct daemon_exec x = {
      .argv = argv, .from = from, .count = ARRAY_SIZE(from), .exec_status = status_write};
  /* The child is cordon exec'd afresh, which detaches itself (egress_daemon_entry). From
   * libcordon.so (proc_in_executable), whose exec may run none of cordon's code, the daemon
   * is a fork's copy, detached the same way: safe with glibc's allocator, which locks around
   * fork. Every signal blocked meanwhile: no handler of the caller's may run in a child that
   * shares its memory, or in a copy of it. */
  sigset_t all, old_mask;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old_mask);
  pid_t pid;
  if (proc_in_executable((const void *)egress_daemon_entry)) {
    pid = sys_vfork_run(exec_daemon, &x); /* nothing of a threaded caller's is copied */
  } else if ((pid = fork()) == 0) {
    close(status_write);
    serve_detached(spec->serves_bridge, ours, events_fd, rules_fd, listen_fd);
  }
  int spawn_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
  if (pid < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, spawn_errno, "cannot start the egress proxy");
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  close(steal_fd(&status_write));
  int exec_errno = 0;
  ssize_t n;
  do /* EOF once the daemon's exec succeeded (the pipe is close-on-exec) or it gave up */
    n = read(status_read, &exec_errno, sizeof exec_errno);
  while (n < 0 && errno == EINTR);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "cannot start the egress proxy");
  if (n == (ssize_t)sizeof exec_errno)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, exec_errno,
                            "cannot start the egress proxy: exec of /proc/self/exe");
  *handoff = theirs;
  theirs = -1;
  return 0;
}
