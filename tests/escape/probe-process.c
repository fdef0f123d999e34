/* The escape probe's attacks on processes and the kernel (probe.c lists the verbs): inject into a
 * terminal, trace, signal or see other processes (the host's, the holder's and its idle
 * workers), use inherited fds, read the holder's memory or environment, outlive the exec, make
 * the kernel calls a sandbox must not (mount, unshare, bpf, ...), exhaust processes and memory,
 * write kernel knobs, reach the network, and take over another session's control socket. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "probe.h"

int tiocsti(void) {
  char c = 'x';
  int fds[] = {0, 1, 2, open("/dev/tty", O_RDWR | O_NOCTTY)};
  for (size_t i = 0; i < 4; i++) {
    if (fds[i] < 0)
      continue;
    if (syscall(SYS_ioctl, fds[i], (unsigned long)TIOCSTI, &c) == 0)
      return verdict(ESCAPED, "tiocsti", "TIOCSTI on fd %d", fds[i]);
    int plain = errno;
    /* the kernel truncates the command to 32 bits: a filter comparing 64 bits would miss it */
    if (syscall(SYS_ioctl, fds[i], (unsigned long)TIOCSTI | 0xdead00000000ul, &c) == 0)
      return verdict(ESCAPED, "tiocsti", "high-bit TIOCSTI on fd %d", fds[i]);
    int high = errno;
    if (i == 0)
      printf("tiocsti: fd 0: plain %s, high-bit %s\n", strerror(plain), strerror(high));
  }
  /* TIOCLINUX too (console injection) */
  char sub = 6;
  if (syscall(SYS_ioctl, 0, (unsigned long)TIOCLINUX, &sub) == 0)
    return verdict(ESCAPED, "tiocsti", "TIOCLINUX");
  return verdict(BLOCKED, "tiocsti", "no injection possible (%s)", strerror(errno));
}

int do_ptrace(pid_t pid) {
  if (ptrace(PTRACE_ATTACH, pid, NULL, NULL) == 0)
    return verdict(ESCAPED, "ptrace", "attached to %d", (int)pid);
  int e = errno;
  if (ptrace(PTRACE_SEIZE, pid, NULL, NULL) == 0)
    return verdict(ESCAPED, "ptrace", "seized %d", (int)pid);
  char buf[16];
  struct iovec local = {buf, sizeof(buf)}, remote = {(void *)0x400000, sizeof(buf)};
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) >= 0)
    return verdict(ESCAPED, "ptrace", "process_vm_readv of %d", (int)pid);
  return verdict(BLOCKED, "ptrace", "attach: %s, process_vm_readv: %s", strerror(e),
                 strerror(errno));
}

int do_signal(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
  char cmd[256] = "";
  int fd = open(path, O_RDONLY);
  if (fd >= 0) {
    ssize_t n = read(fd, cmd, sizeof(cmd) - 1);
    cmd[n > 0 ? n : 0] = 0;
    close(fd);
  }
  /* A pid of ours may collide with the host pid: only a match on the marker counts. */
  if (kill(pid, SIGCONT) == 0 && strstr(cmd, "cordon-escape-marker"))
    return verdict(ESCAPED, "signal", "signalled host process %d", (int)pid);
  return verdict(BLOCKED, "signal", "pid %d: %s", (int)pid,
                 cmd[0] ? "is one of ours, not the host's" : strerror(errno));
}

int see_pid(pid_t pid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return BLOCK_ERRNO("see-pid", path);
  char cmd[256];
  ssize_t n = read(fd, cmd, sizeof(cmd) - 1);
  close(fd);
  cmd[n > 0 ? n : 0] = 0;
  for (ssize_t i = 0; i < n; i++)
    if (!cmd[i])
      cmd[i] = ' ';
  if (strstr(cmd, "cordon-escape-marker"))
    return verdict(ESCAPED, "see-pid", "sees host process %d: %s", (int)pid, cmd);
  return verdict(BLOCKED, "see-pid", "pid %d is a sandbox process (%s)", (int)pid, cmd);
}

/* Also scan every visible process for the host marker. */
int see_host(void) {
  DIR *d = opendir("/proc");
  if (!d)
    return verdict(BROKEN, "see-host", "no /proc: %s", strerror(errno));
  struct dirent *de;
  int seen = 0;
  while ((de = readdir(d))) {
    if (de->d_name[0] < '0' || de->d_name[0] > '9')
      continue;
    seen++;
    char path[300], cmd[512];
    snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
      continue;
    ssize_t n = read(fd, cmd, sizeof(cmd) - 1);
    close(fd);
    for (ssize_t i = 0; i < n; i++)
      if (!cmd[i])
        cmd[i] = ' ';
    cmd[n > 0 ? n : 0] = 0;
    if (strstr(cmd, "cordon-escape-marker")) {
      closedir(d);
      return verdict(ESCAPED, "see-host", "host process %s visible", de->d_name);
    }
  }
  closedir(d);
  return verdict(BLOCKED, "see-host", "%d processes visible, none from the host", seen);
}

int proc_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d)
    return verdict(BROKEN, "proc-fds", "opendir: %s", strerror(errno));
  int own = dirfd(d);
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.')
      continue;
    int fd = atoi(de->d_name);
    if (fd > 2 && fd != own) {
      char path[64], target[256] = "";
      snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
      ssize_t n = readlink(path, target, sizeof(target) - 1);
      target[n > 0 ? n : 0] = 0;
      closedir(d);
      return verdict(ESCAPED, "proc-fds", "fd %d is open (%s)", fd, target);
    }
  }
  closedir(d);
  return verdict(BLOCKED, "proc-fds", "only 0, 1, 2");
}

int fd_chdir(void) {
  for (int fd = 3; fd < 4096; fd++)
    if (fchdir(fd) == 0) {
      char cwd[4096];
      return verdict(ESCAPED, "fd-chdir", "fchdir(%d) reached %s", fd,
                     getcwd(cwd, sizeof(cwd)) ? cwd : "?");
    }
  return verdict(BLOCKED, "fd-chdir", "no inherited directory fd");
}

extern char **environ;

/* Whether every NUL-separated entry of an environment block is one of our own: what the block
 * holds, this process was given already (gVisor shows pid 1's environment to every process; the
 * backend gives it nothing but the commands' defaults, so it tells nothing). */
static bool environment_is_ours(const char *block, size_t length) {
  for (size_t at = 0; at < length;) {
    const char *entry = block + at;
    size_t n = strnlen(entry, length - at);
    bool found = n == 0;
    for (char **e = environ; !found && e && *e; e++)
      found = strlen(*e) == n && memcmp(*e, entry, n) == 0;
    if (!found)
      return false;
    at += n + 1;
  }
  return true;
}

/* Read all of path (bounded); -1 when it cannot be read. */
static ssize_t read_all(const char *path, char *buf, size_t size) {
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return -1;
  size_t have = 0;
  ssize_t n;
  while (have < size && (n = read(fd, buf + have, size - have)) > 0)
    have += (size_t)n;
  close(fd);
  return (ssize_t)have;
}

/* The environments of pid 1 and pid 2 (the holder and its worker on ns; on gvisor the
 * session's pause process or the one-shot wrapper, and an exec's wrapper) hold nothing this
 * process was not given. */
int holder_environ(void) {
  static const char *const paths[] = {"/proc/1/environ", "/proc/2/environ"};
  char self[32];
  snprintf(self, sizeof(self), "/proc/%d/", (int)getpid());
  for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
    static char block[65536];
    if (strncmp(paths[i], self, strlen(self)) == 0)
      continue;
    ssize_t n = read_all(paths[i], block, sizeof(block));
    if (n > 0 && !environment_is_ours(block, (size_t)n))
      return verdict(ESCAPED, "holder-environ", "read %s: an entry not in our own environment",
                     paths[i]);
  }
  return verdict(BLOCKED, "holder-environ",
                 "the holder's environment is unreadable or holds only our own entries");
}

int proc_holder(void) {
  static const char *const paths[] = {"/proc/1/mem",
                                      "/proc/1/environ",
                                      "/proc/1/exe",
                                      "/proc/1/cwd/.",
                                      "/proc/1/root/proc/1/environ",
                                      "/proc/2/mem",
                                      "/proc/2/environ"};
  char self[32];
  snprintf(self, sizeof(self), "/proc/%d/", (int)getpid());
  for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
    if (strncmp(paths[i], self, strlen(self)) == 0)
      continue; /* pid 2 is the probe itself when no worker stands between it and pid 1 */
    if (strstr(paths[i], "environ")) {
      static char block[65536];
      ssize_t n = read_all(paths[i], block, sizeof(block));
      if (n > 0 && !environment_is_ours(block, (size_t)n))
        return verdict(ESCAPED, "proc-holder", "read %s: an entry not in our own environment",
                       paths[i]);
      continue;
    }
    int fd = open(paths[i], O_RDONLY);
    if (fd >= 0) {
      char c;
      ssize_t n = read(fd, &c, 1);
      close(fd);
      if (n > 0 || strstr(paths[i], "cwd"))
        return verdict(ESCAPED, "proc-holder", "read %s", paths[i]);
    }
  }
  if (opendir("/proc/1/fd"))
    return verdict(ESCAPED, "proc-holder", "listed /proc/1/fd");
  return verdict(BLOCKED, "proc-holder", "holder's memory, environment and fds unreadable");
}

int kill_holder(void) {
  static const int sigs[] = {SIGKILL, SIGTERM, SIGINT, SIGHUP, SIGSEGV, SIGCHLD, SIGSTOP};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
    kill(1, sigs[i]);
  usleep(100000);
  /* EPERM is an alive pid 1 of another uid (gvisor's wrapper); only ESRCH says it is gone. */
  if (kill(1, 0) < 0 && errno == ESRCH)
    return verdict(ESCAPED, "kill-holder", "pid 1 is gone");
  return verdict(BLOCKED, "kill-holder", "pid 1 ignored every signal");
}

static bool memory_readable(pid_t pid) {
  char buf[16], path[64];
  struct iovec local = {buf, sizeof(buf)}, remote = {(void *)0x400000, sizeof(buf)};
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) >= 0)
    return true;
  snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return false;
  bool read_any = pread(fd, buf, sizeof(buf), 0x400000) > 0;
  close(fd);
  return read_any;
}

int idle_pairs(void) {
  pid_t self = getpid(), parent = getppid(), found[64];
  size_t n = 0;
  /* By pid, not through /proc: hidepid hides them there. Up to 2 s for the holder to make one. */
  for (int tries = 0; tries < 40 && n == 0; tries++) {
    if (tries)
      usleep(50000);
    for (pid_t pid = 2; pid < 4096 && n < sizeof(found) / sizeof(found[0]); pid++)
      if (pid != self && pid != parent && kill(pid, 0) == 0)
        found[n++] = pid;
  }
  if (n == 0)
    return verdict(BROKEN, "idle-pairs", "no other process in the session to attack");
  for (size_t i = 0; i < n; i++) {
    if (ptrace(PTRACE_ATTACH, found[i], NULL, NULL) == 0 ||
        ptrace(PTRACE_SEIZE, found[i], NULL, NULL) == 0)
      return verdict(ESCAPED, "idle-pairs", "attached to %d", (int)found[i]);
    if (memory_readable(found[i]))
      return verdict(ESCAPED, "idle-pairs", "read the memory of %d", (int)found[i]);
  }
  for (size_t i = 0; i < n; i++)
    kill(found[i], SIGKILL);
  return verdict(BLOCKED, "idle-pairs",
                 "%zu idle pair processes: no attach, memory unreadable; killed them", n);
}

/* Kill everything we may signal (our own supervisor included, it runs as our uid), then try
 * to outlive the exec: the holder must reap and kill us as an orphan. */
int kill_all(const char *file) {
  kill(-1, SIGKILL);
  /* Whatever that took down (a worker, or nothing when pid 1 is our parent), the exec ends when
   * we do: a child that outlives it must not get to write FILE. */
  pid_t pid = fork();
  if (pid == 0) {
    setsid();
    sleep(2);
    int fd = open(file, O_WRONLY | O_CREAT, 0644);
    if (fd >= 0)
      (void)!write(fd, "survived\n", 9);
    _exit(0);
  }
  return verdict(BLOCKED, "kill-all", "still alive after killing everything");
}

int syscalls(const char *verb) {
  long r = -1;
  if (!strcmp(verb, "mount")) {
    r = mount("tmpfs", "/tmp", "tmpfs", 0, NULL);
    if (r < 0)
      r = mount("/", "/tmp", NULL, MS_BIND, NULL);
  } else if (!strcmp(verb, "unshare")) {
    r = unshare(CLONE_NEWUSER);
    if (r < 0)
      r = unshare(CLONE_NEWNS);
    if (r < 0)
      r = unshare(CLONE_NEWNET);
  } else if (!strcmp(verb, "setns")) {
    int fd = open("/proc/1/ns/mnt", O_RDONLY);
    if (fd < 0)
      fd = open("/proc/self/ns/user", O_RDONLY);
    r = fd < 0 ? -1 : setns(fd, 0);
  } else if (!strcmp(verb, "keyctl")) {
    r = syscall(SYS_keyctl, 1 /* KEYCTL_JOIN_SESSION_KEYRING */, NULL);
    if (r < 0)
      r = syscall(SYS_add_key, "user", "cordon", "x", 1, -3 /* session */);
  } else if (!strcmp(verb, "bpf")) {
    union bpf_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.map_type = BPF_MAP_TYPE_ARRAY;
    attr.key_size = 4;
    attr.value_size = 4;
    attr.max_entries = 1;
    r = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr));
  } else if (!strcmp(verb, "userfaultfd")) {
    r = syscall(SYS_userfaultfd, O_CLOEXEC | 1 /* UFFD_USER_MODE_ONLY */);
    if (r < 0)
      r = syscall(SYS_userfaultfd, O_CLOEXEC);
  } else if (!strcmp(verb, "io-uring")) {
    char params[120];
    memset(params, 0, sizeof(params));
    r = syscall(SYS_io_uring_setup, 4, params);
  } else if (!strcmp(verb, "perf")) {
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_CPU_CLOCK;
    attr.exclude_kernel = 1;
    r = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
  } else if (!strcmp(verb, "open-by-handle")) {
    /* "shocker": open a file by handle, bypassing path permissions */
    struct {
      unsigned int bytes;
      int type;
      unsigned char f_handle[8];
    } h = {8, 1, {2, 0, 0, 0, 0, 0, 0, 0}};
    r = syscall(SYS_open_by_handle_at, AT_FDCWD, &h, O_RDONLY);
    if (r < 0) {
      int mount_id;
      struct {
        unsigned int bytes;
        int type;
        unsigned char f_handle[128];
      } nh = {128, 0, {0}};
      r = syscall(SYS_name_to_handle_at, AT_FDCWD, "/", &nh, &mount_id, 0);
    }
  } else if (!strcmp(verb, "personality")) {
    r = personality(ADDR_NO_RANDOMIZE);
    if (r >= 0 && (personality(0xffffffff) & ADDR_NO_RANDOMIZE) == 0)
      r = -1; /* accepted but not applied */
  } else if (!strcmp(verb, "chroot")) {
    r = chroot("/tmp");
  } else if (!strcmp(verb, "raw-socket")) {
    r = socket(AF_PACKET, SOCK_RAW, htons(3 /* ETH_P_ALL */));
    if (r < 0)
      r = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
  } else if (!strcmp(verb, "clone-newuser")) {
    pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);
    if (pid == 0)
      _exit(0);
    if (pid > 0)
      waitpid(pid, NULL, 0);
    r = pid;
  } else if (!strcmp(verb, "clone3")) {
    struct {
      uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
    } args = {.flags = CLONE_NEWUSER | CLONE_NEWNS, .exit_signal = SIGCHLD};
    pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
    if (pid == 0)
      _exit(0);
    if (pid > 0)
      waitpid(pid, NULL, 0);
    r = pid;
  } else {
    return BROKEN;
  }
  if (r >= 0)
    return verdict(ESCAPED, verb, "the call succeeded");
  return BLOCK_ERRNO(verb, "refused");
}

int suid(void) {
  if (geteuid() != getuid() || getegid() != getgid())
    return verdict(ESCAPED, "suid", "euid %d (uid %d)", (int)geteuid(), (int)getuid());
  return verdict(BLOCKED, "suid", "euid %d = uid", (int)geteuid());
}

int tcp_connect(const char *host, const char *port) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    return verdict(BROKEN, "connect", "socket: %s", strerror(errno));
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
    return verdict(BROKEN, "connect", "bad address %s", host);
  if (connect(s, (struct sockaddr *)&a, sizeof(a)) == 0)
    return verdict(ESCAPED, "connect", "connected to %s:%s", host, port);
  return BLOCK_ERRNO("connect", host);
}

int connect_abstract(const char *name) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  size_t n = strlen(name);
  if (s < 0 || n + 1 > sizeof(a.sun_path))
    return verdict(BROKEN, "connect-abstract", "socket");
  memcpy(a.sun_path + 1, name, n);
  if (connect(s, (struct sockaddr *)&a,
              (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) == 0)
    return verdict(ESCAPED, "connect-abstract", "connected to @%s", name);
  return BLOCK_ERRNO("connect-abstract", name);
}

int dns(const char *server) {
  static const unsigned char query[] = {
      0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* header */
      7,    'e',  'x',  'a',  'm',  'p',  'l',  'e',  3,    'c',  'o',  'm',
      0,    0x00, 0x01, 0x00, 0x01, /* A, IN */
  };
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    return verdict(BROKEN, "dns", "socket: %s", strerror(errno));
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(53)};
  if (inet_pton(AF_INET, server, &a.sin_addr) != 1)
    return verdict(BROKEN, "dns", "bad address %s", server);
  if (sendto(s, query, sizeof(query), 0, (struct sockaddr *)&a, sizeof(a)) < 0)
    return BLOCK_ERRNO("dns", "sendto");
  struct pollfd p = {.fd = s, .events = POLLIN};
  if (poll(&p, 1, 2000) == 1) {
    unsigned char reply[512];
    if (recv(s, reply, sizeof(reply), 0) > 12 && reply[0] == 0x12 && reply[1] == 0x34)
      return verdict(ESCAPED, "dns", "%s answered", server);
  }
  return verdict(BLOCKED, "dns", "no answer from %s", server);
}

int loopback_self(void) {
  int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
      getsockname(l, (struct sockaddr *)&a, &len) < 0)
    return BLOCK_ERRNO("loopback-self", "listen on 127.0.0.1");
  int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect(c, (struct sockaddr *)&a, sizeof(a)) < 0)
    return BLOCK_ERRNO("loopback-self", "connect to ourselves");
  return verdict(ESCAPED, "loopback-self", "talked to ourselves on 127.0.0.1:%d",
                 ntohs(a.sin_port));
}

int forkbomb(int n) {
  setpgid(0, 0);
  int started = 0;
  for (; started < n; started++) {
    pid_t pid = fork();
    if (pid == 0) {
      pause();
      _exit(0);
    }
    if (pid < 0)
      break;
  }
  int e = errno;
  signal(SIGTERM, SIG_IGN);
  kill(0, SIGTERM);
  while (wait(NULL) > 0)
    ;
  if (started >= n)
    return verdict(ESCAPED, "forkbomb", "started all %d processes", n);
  return verdict(BLOCKED, "forkbomb", "stopped after %d processes: %s", started, strerror(e));
}

int memory(long mib) {
  long done = 0;
  for (; done < mib; done += 16) {
    char *p = mmap(NULL, 16 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      break;
    memset(p, 1, 16 << 20);
  }
  if (done >= mib)
    return verdict(ESCAPED, "memory", "touched %ld MiB", done);
  return verdict(BLOCKED, "memory", "stopped at %ld MiB", done);
}

int daemonise(const char *file, int seconds) {
  pid_t pid = fork();
  if (pid < 0)
    return verdict(BROKEN, "daemon", "fork: %s", strerror(errno));
  if (pid > 0) {
    waitpid(pid, NULL, 0);
    return verdict(ESCAPED, "daemon", "daemon started; the driver checks it is gone");
  }
  setsid();
  if (fork() != 0)
    _exit(0);
  signal(SIGHUP, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
  int null_fd = open("/dev/null", O_RDWR);
  dup2(null_fd, 0);
  dup2(null_fd, 1);
  dup2(null_fd, 2);
  sleep((unsigned)seconds);
  int fd = open(file, O_WRONLY | O_CREAT, 0644);
  if (fd >= 0)
    (void)!write(fd, "survived\n", 9);
  _exit(0);
}

int sysctl_write(void) {
  static const char *const paths[] = {"/proc/sys/kernel/hostname", "/proc/sysrq-trigger",
                                      "/proc/sys/vm/drop_caches",
                                      "/proc/sys/user/max_user_namespaces"};
  for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
    int fd = open(paths[i], O_WRONLY);
    if (fd >= 0) {
      ssize_t n = write(fd, "h", 1);
      close(fd);
      if (n == 1)
        return verdict(ESCAPED, "sysctl-write", "wrote %s", paths[i]);
    }
  }
  return verdict(BLOCKED, "sysctl-write", "kernel knobs are read-only");
}

/* ---- control sockets of other sessions (attacks.d/10-control-socket.sh) ---------------------- */

/* The ns holder's request ("CDN1") as sent before there was a handshake, and its reply. */
#define NS_REQUEST_MAGIC 0x314e4443u
#define NS_REPLY_MAGIC 0x314e5243u

static int send_with_stdio(int fd, const void *buf, size_t len) {
  int fds[3] = {0, 1, 2};
  union {
    char buf[CMSG_SPACE(sizeof(fds))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof(control));
  struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
  struct msghdr msg = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = control.buf,
                       .msg_controllen = sizeof(control.buf)};
  struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(fds));
  memcpy(CMSG_DATA(cm), fds, sizeof(fds));
  return sendmsg(fd, &msg, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/* Send a raw exec request for `true` on a connected socket: 1 when the peer answered 'R'. */
static int raw_exec(int fd) {
  static const char payload[] = "/\0true";
  uint32_t h[5] = {NS_REQUEST_MAGIC, sizeof(payload), 1, 0, 0};
  unsigned char buf[sizeof(h) + sizeof(payload)];
  memcpy(buf, h, sizeof(h));
  memcpy(buf + sizeof(h), payload, sizeof(payload));
  if (send_with_stdio(fd, buf, sizeof(buf)) < 0)
    return 0;
  struct pollfd pfd = {.fd = fd, .events = POLLIN};
  uint32_t reply[4];
  size_t got = 0;
  while (got < sizeof(reply) && poll(&pfd, 1, 5000) == 1) {
    ssize_t n = read(fd, (char *)reply + got, sizeof(reply) - got);
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  return got == sizeof(reply) && reply[0] == NS_REPLY_MAGIC && reply[1] == 'R';
}

static void find_sockets(const char *dir, int depth, int *found, int *connected, int *ran,
                         char *ran_path, size_t ran_size) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *de;
  while ((de = readdir(d)) && !*ran) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
      continue;
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
    struct stat st;
    if (lstat(path, &st) < 0)
      continue;
    if (S_ISDIR(st.st_mode) && depth > 0) {
      find_sockets(path, depth - 1, found, connected, ran, ran_path, ran_size);
    } else if (S_ISSOCK(st.st_mode)) {
      (*found)++;
      /* Through an O_PATH fd of the socket: paths may exceed sun_path. */
      struct sockaddr_un addr = {.sun_family = AF_UNIX};
      int node = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
      int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d", node);
      if (node >= 0 && fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0) {
        (*connected)++;
        if (raw_exec(fd)) {
          *ran = 1;
          snprintf(ran_path, ran_size, "%s", path);
        }
      }
      if (fd >= 0)
        close(fd);
      if (node >= 0)
        close(node);
    }
  }
  closedir(d);
}

int hijack_holder(int n, char **dirs) {
  int found = 0, connected = 0, ran = 0;
  char ran_path[4096] = "";
  for (int i = 0; i < n && !ran; i++)
    find_sockets(dirs[i], 8, &found, &connected, &ran, ran_path, sizeof(ran_path));
  if (ran)
    return verdict(ESCAPED, "hijack-holder", "ran a command in another session through %s",
                   ran_path);
  return verdict(BLOCKED, "hijack-holder", "%d sockets found, %d connected, none ran a command",
                 found, connected);
}

int plant_listener(const char *path, const char *out, int seconds) {
  char dir[4096];
  snprintf(dir, sizeof(dir), "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash)
    return verdict(BROKEN, "plant-listener", "%s is not a path", path);
  *slash = 0;
  int dfd = open(dir, O_PATH | O_DIRECTORY);
  if (dfd < 0)
    return BLOCK_ERRNO("plant-listener", dir);
  unlinkat(dfd, slash + 1, 0);
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d/%s", dfd, slash + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 || listen(fd, 4) < 0)
    return BLOCK_ERRNO("plant-listener", path);
  struct pollfd pfd = {.fd = fd, .events = POLLIN};
  if (poll(&pfd, 1, seconds * 1000) != 1)
    return verdict(BLOCKED, "plant-listener", "nobody connected to %s", path);
  int conn = accept(fd, NULL, NULL);
  if (conn < 0)
    return BLOCK_ERRNO("plant-listener", "accept");
  static unsigned char got[65536];
  size_t n = 0;
  struct pollfd cp = {.fd = conn, .events = POLLIN};
  while (n < sizeof(got) && poll(&cp, 1, 1000) == 1) {
    ssize_t r = read(conn, got + n, sizeof(got) - n);
    if (r <= 0)
      break;
    n += (size_t)r;
  }
  int ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (ofd >= 0) {
    (void)!write(ofd, got, n);
    close(ofd);
  }
  uint32_t magic;
  if (n >= 4)
    memcpy(&magic, got, 4);
  if (n >= 20 && magic == NS_REQUEST_MAGIC) {
    uint32_t running[4] = {NS_REPLY_MAGIC, 'R', 0, 0}, exited[4] = {NS_REPLY_MAGIC, 'X', 42, 0};
    (void)!write(conn, running, sizeof(running));
    (void)!write(conn, exited, sizeof(exited));
    return verdict(ESCAPED, "plant-listener",
                   "the host sent its exec request (%zu bytes) to our "
                   "socket at %s",
                   n, path);
  }
  return verdict(BLOCKED, "plant-listener", "%zu bytes reached %s, no exec request", n, path);
}
