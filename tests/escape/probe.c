/* The escape probe: one verb per attack, run inside a sandbox by tests/escape/escape.sh.
 *
 * Exit status: 0 the attack SUCCEEDED (an escape), 1 it was blocked, 2 the probe could not
 * even attempt it (a broken test, never a pass). Each verb prints one line saying what it did
 * and what the kernel answered. Built static, so it runs in any sandbox root.
 *
 *   probe read-file PATH          open and read one byte
 *   probe list-dir PATH           see any entry in a directory
 *   probe write-file PATH         create/append to a file
 *   probe link-out TARGET NAME    plant a hard link (and a symlink NAME.sym) to TARGET
 *   probe tiocsti                 inject a byte into a terminal (plain and high-bit ioctl)
 *   probe ptrace PID              attach to PID / read its memory (process_vm_readv)
 *   probe signal PID              signal a process by host pid (kill 0 and SIGCONT)
 *   probe see-pid PID             see /proc/PID
 *   probe proc-fds                find an fd other than 0, 1, 2 in /proc/self/fd
 *   probe fd-chdir                fchdir through any inherited fd
 *   probe write-exe PATH          open a runtime binary (or /proc/1/exe) for writing
 *   probe proc-holder             read the holder's memory, environment or fds (/proc/1); an
 *                                 environment holding only entries of our own tells nothing
 *   probe holder-environ          read an entry of pid 1's or pid 2's environment that we
 *                                 were not given
 *   probe kill-holder             signal pid 1 (SIGKILL, SIGTERM, ...: all must be ignored)
 *   probe idle-pairs              every other process of the session but pid 1 (the holder's
 *                                 idle workers and their waiting command processes, which
 *                                 share their worker's memory until they exec): attach, read
 *                                 their memory (process_vm_readv, /proc/PID/mem), then kill them
 *   probe kill-all FILE           kill(-1) (our own worker dies too, if there is one), then a
 *                                 child outlives the exec and writes FILE after 2 s (it must
 *                                 be killed first)
 *   probe mount | unshare | setns | keyctl | bpf | userfaultfd | io-uring | perf |
 *         open-by-handle | personality | chroot | raw-socket | clone-newuser | clone3
 *   probe suid                    succeed if running with an euid other than our uid
 *   probe mknod PATH              create a character device
 *   probe connect HOST PORT       TCP connect
 *   probe connect-abstract NAME   connect to an abstract unix socket
 *   probe dns SERVER              UDP DNS query (A example.com) to SERVER, wait 2 s
 *   probe loopback-self           listen on 127.0.0.1 and connect to ourselves
 *   probe forkbomb N              fork N sleeping children (success: all N started)
 *   probe memory MIB              allocate and touch MIB mebibytes
 *   probe daemon FILE SECONDS     daemonise (setsid, double fork); write FILE after SECONDS
 *   probe sysctl-write            write /proc/sys/kernel/hostname or sysrq-trigger
 *   probe replace-parent DIR FILE move DIR (a directory above a protected FILE) aside, recreate
 *                                 the path to FILE and write FILE (success: FILE written)
 *   probe exchange-parent DIR FILE build DIR.new with FILE in it, then swap it with DIR
 *                                 (renameat2 RENAME_EXCHANGE; success: the swap happened)
 *   probe setid PATH              leave a set-user-ID or set-group-ID file or directory at
 *                                 PATH.* by every way there is: chmod, fchmod, fchmodat,
 *                                 fchmodat2, chmod through the 32-bit (int 0x80) and x32
 *                                 entry points, open/openat/creat/openat2 with O_CREAT, O_TMPFILE
 *                                 then linkat, mknod/mknodat S_IFREG, and a directory's g+s;
 *                                 and file capabilities (setxattr security.capability)
 *   probe modes PATH              (a control for setid) every ordinary mode still works at
 *                                 PATH.*: create 0600, chmod 0755, mknod S_IFREG 0644, O_TMPFILE
 *                                 then linkat, a directory chmod 01777 (success: all did)
 *   probe fill-file PATH MIB      write MIB mebibytes to PATH (tmpfs pages: no resident set of
 *                                 ours to speak of, so an OOM killer weighs everyone else)
 *   probe hijack-holder DIR...    find unix sockets under each DIR (another session's control
 *                                 socket) and send each a raw ns exec request for `true`;
 *                                 success: one answered 'R' (ran a command in that session)
 *   probe plant-listener PATH OUT SECONDS
 *                                 replace PATH with our own listening socket, take one
 *                                 connection within SECONDS, save what it sent in OUT, answer a
 *                                 forged 'R' and exit 42; success: it sent an exec request
 *   probe rewrite-file PATH OLD NEW [OLD NEW]...
 *                                 replace the first OLD in PATH by NEW, for each pair found (a
 *                                 state file rewritten from inside; escape.sh judges what the
 *                                 host then does)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <linux/capability.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <unistd.h>

enum { ESCAPED = 0, BLOCKED = 1, BROKEN = 2 };

static int verdict(int code, const char *verb, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int verdict(int code, const char *verb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s: %s: ", verb, code == ESCAPED ? "ESCAPED" : code == BLOCKED ? "blocked" : "BROKEN");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
  return code;
}

#define BLOCK_ERRNO(verb, what) verdict(BLOCKED, verb, "%s: %s", what, strerror(errno))

static int read_file(const char *path) {
  int fd = open(path, O_RDONLY | O_NONBLOCK);
  if (fd < 0)
    return BLOCK_ERRNO("read-file", path);
  char c;
  ssize_t n = read(fd, &c, 1);
  if (n < 0)
    return BLOCK_ERRNO("read-file", path);
  if (n == 0)
    return verdict(BLOCKED, "read-file", "%s is empty", path);
  return verdict(ESCAPED, "read-file", "read a byte of %s", path);
}

static int list_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d)
    return BLOCK_ERRNO("list-dir", path);
  struct dirent *de;
  while ((de = readdir(d)))
    if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
      verdict(ESCAPED, "list-dir", "%s holds %s", path, de->d_name);
      closedir(d);
      return ESCAPED;
    }
  closedir(d);
  return verdict(BLOCKED, "list-dir", "%s is empty", path);
}

static int write_file(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOCTTY, 0644);
  if (fd < 0)
    return BLOCK_ERRNO("write-file", path);
  if (write(fd, "cordon-escape\n", 14) != 14)
    return BLOCK_ERRNO("write-file", path);
  close(fd);
  return verdict(ESCAPED, "write-file", "wrote %s", path);
}

static int link_out(const char *target, const char *name) {
  char sym[4096];
  snprintf(sym, sizeof(sym), "%s.sym", name);
  int made_symlink = symlink(target, sym) == 0;
  if (link(target, name) == 0)
    return verdict(ESCAPED, "link-out", "hard-linked %s to %s", name, target);
  /* The symlink is planted for the driver's later checks; making one is not an escape. */
  return verdict(BLOCKED, "link-out", "link %s: %s (symlink %s)", target, strerror(errno),
                 made_symlink ? "planted" : "refused");
}

static int tiocsti(void) {
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

static int do_ptrace(pid_t pid) {
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

static int do_signal(pid_t pid) {
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

static int see_pid(pid_t pid) {
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
static int see_host(void) {
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

static int proc_fds(void) {
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

static int fd_chdir(void) {
  for (int fd = 3; fd < 4096; fd++)
    if (fchdir(fd) == 0) {
      char cwd[4096];
      return verdict(ESCAPED, "fd-chdir", "fchdir(%d) reached %s", fd,
                     getcwd(cwd, sizeof(cwd)) ? cwd : "?");
    }
  return verdict(BLOCKED, "fd-chdir", "no inherited directory fd");
}

static int write_exe(const char *path) {
  int fd = open(path, O_WRONLY);
  if (fd < 0)
    return BLOCK_ERRNO("write-exe", path);
  close(fd);
  return verdict(ESCAPED, "write-exe", "opened %s for writing", path);
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
static int holder_environ(void) {
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

static int proc_holder(void) {
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

static int kill_holder(void) {
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

static int idle_pairs(void) {
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
static int kill_all(const char *file) {
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

static int syscalls(const char *verb) {
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

static int suid(void) {
  if (geteuid() != getuid() || getegid() != getgid())
    return verdict(ESCAPED, "suid", "euid %d (uid %d)", (int)geteuid(), (int)getuid());
  return verdict(BLOCKED, "suid", "euid %d = uid", (int)geteuid());
}

static int do_mknod(const char *path) {
  if (mknod(path, S_IFCHR | 0666, makedev(1, 3)) == 0) {
    int fd = open(path, O_RDWR);
    unlink(path);
    return verdict(ESCAPED, "mknod", "made a device node%s", fd >= 0 ? " and opened it" : "");
  }
  return BLOCK_ERRNO("mknod", path);
}

static int tcp_connect(const char *host, const char *port) {
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

static int connect_abstract(const char *name) {
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

static int dns(const char *server) {
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

static int loopback_self(void) {
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

static int forkbomb(int n) {
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

static int memory(long mib) {
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

static int daemonise(const char *file, int seconds) {
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

static int sysctl_write(void) {
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

/* mkdir -p for the directories of `file` (not the file itself). */
static void make_parents(const char *file) {
  char buf[4096];
  snprintf(buf, sizeof(buf), "%s", file);
  for (char *p = buf + 1; (p = strchr(p, '/')); p++) {
    *p = 0;
    mkdir(buf, 0755);
    *p = '/';
  }
}

static int plant(const char *file) {
  int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);
  if (fd < 0)
    return -1;
  ssize_t n = write(fd, "pwned\n", 6);
  close(fd);
  return n == 6 ? 0 : -1;
}

static int replace_parent(const char *dir, const char *file) {
  char aside[4096];
  snprintf(aside, sizeof(aside), "%s.aside", dir);
  if (rename(dir, aside) < 0)
    return BLOCK_ERRNO("replace-parent", dir);
  make_parents(file);
  if (plant(file) < 0)
    return verdict(BLOCKED, "replace-parent", "moved %s aside, but cannot write %s: %s", dir, file,
                   strerror(errno));
  return verdict(ESCAPED, "replace-parent", "moved %s aside and wrote %s in its place", dir, file);
}

static int exchange_parent(const char *dir, const char *file) {
  /* FILE lies under DIR: the same path under DIR.new */
  char fresh[4096], planted[4096];
  size_t n = strlen(dir);
  if (strncmp(file, dir, n) != 0 || file[n] != '/')
    return verdict(BROKEN, "exchange-parent", "%s is not under %s", file, dir);
  snprintf(fresh, sizeof(fresh), "%s.new", dir);
  snprintf(planted, sizeof(planted), "%s%s", fresh, file + n);
  mkdir(fresh, 0755);
  make_parents(planted);
  if (plant(planted) < 0)
    return verdict(BROKEN, "exchange-parent", "cannot write %s: %s", planted, strerror(errno));
  if (syscall(SYS_renameat2, AT_FDCWD, fresh, AT_FDCWD, dir, 2 /* RENAME_EXCHANGE */) < 0)
    return BLOCK_ERRNO("exchange-parent", dir);
  return verdict(ESCAPED, "exchange-parent", "swapped %s with %s", dir, fresh);
}

/* ---- setid: no set-id bit may survive on anything we make ----------------------------------- */

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#define X32_SYSCALL_BIT 0x40000000L

/* The set-id bits PATH has now (0 when it is gone or cannot be seen). */
static unsigned setid_bits(const char *path) {
  struct stat st;
  return lstat(path, &st) == 0 ? (unsigned)(st.st_mode & (S_ISUID | S_ISGID)) : 0;
}

struct setid_try {
  char what[64];
  char path[PATH_MAX];
  int result; /* what the call returned */
  int errnum;
};

/* A plain file at PATH (our own, 0755), to change the mode of. */
static int setid_fresh(const char *path) {
  unlink(path);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  if (fd < 0)
    return -1;
  (void)!write(fd, "#!/bin/sh\n", 10);
  return fd;
}

/* chmod(path, mode) through the i386 entry point (int 0x80): the path must sit below 4 GiB, so
 * it is copied into our (non-PIE, static) data segment first. Made in a child, whose exit code
 * carries the answer: without ia32 emulation (ia32_emulation=0) int 0x80 is a SIGSEGV, and
 * gVisor (runsc 20221219 on Linux 6.18) answers a getpid that way but kills a chmod with
 * SIGSEGV. A child killed by a signal means no 32-bit entry point: -1 with ENOSYS. */
static long chmod_int80(const char *path, unsigned mode) {
#if defined(__x86_64__)
  static char low[PATH_MAX];
  snprintf(low, sizeof(low), "%s", path);
  if ((uintptr_t)low > 0xffffffffu) {
    errno = ENOSYS;
    return -1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    long r;
    __asm__ volatile("int $0x80"
                     : "=a"(r)
                     : "a"(15L /* i386 chmod */), "b"((long)(uintptr_t)low), "c"((long)mode)
                     : "memory");
    _exit(r < 0 ? (int)(-r & 0xff) : 0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) {
    errno = ENOSYS;
    return -1;
  }
  if (WEXITSTATUS(status)) {
    errno = WEXITSTATUS(status);
    return -1;
  }
  return 0;
#else
  (void)path;
  (void)mode;
  errno = ENOSYS;
  return -1;
#endif
}

static int setid(const char *base) {
  struct setid_try tries[48];
  size_t n = 0;
  static const unsigned modes[] = {04755, 02755};
  for (size_t m = 0; m < 2; m++) {
    unsigned mode = modes[m];
    const char *tag = m ? "g" : "u";
#define TRY(name, call)                                              \
  do {                                                               \
    struct setid_try *t = &tries[n++];                               \
    snprintf(t->what, sizeof(t->what), "%s %04o", name, mode);       \
    snprintf(t->path, sizeof(t->path), "%s.%s-%s", base, name, tag); \
    errno = 0;                                                       \
    t->result = (int)(call);                                         \
    if (t->result >= 0)                                              \
      errno = 0;                                                     \
    t->errnum = errno;                                               \
  } while (0)
    int fd;
    /* change the mode of a file we just wrote */
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s.chmod-%s", base, tag);
    if ((fd = setid_fresh(path)) < 0)
      return verdict(BROKEN, "setid", "cannot create %s: %s", path, strerror(errno));
    close(fd);
    TRY("chmod", chmod(path, mode));
    snprintf(path, sizeof(path), "%s.fchmod-%s", base, tag);
    if ((fd = setid_fresh(path)) < 0)
      return verdict(BROKEN, "setid", "cannot create %s: %s", path, strerror(errno));
    TRY("fchmod", fchmod(fd, mode));
    close(fd);
    snprintf(path, sizeof(path), "%s.fchmodat-%s", base, tag);
    close(setid_fresh(path));
    TRY("fchmodat", fchmodat(AT_FDCWD, path, mode, 0));
    snprintf(path, sizeof(path), "%s.fchmodat2-%s", base, tag);
    close(setid_fresh(path));
    TRY("fchmodat2", syscall(SYS_fchmodat2, AT_FDCWD, path, mode, AT_SYMLINK_NOFOLLOW));
    snprintf(path, sizeof(path), "%s.int80-%s", base, tag);
    close(setid_fresh(path));
    TRY("int80", chmod_int80(path, mode));
    snprintf(path, sizeof(path), "%s.x32-%s", base, tag);
    close(setid_fresh(path));
    TRY("x32", syscall(SYS_chmod | X32_SYSCALL_BIT, path, mode));
    /* the mode given when creating */
    TRY("open", syscall(SYS_open, t->path, O_WRONLY | O_CREAT | O_CLOEXEC, mode));
    TRY("openat", syscall(SYS_openat, AT_FDCWD, t->path, O_WRONLY | O_CREAT | O_CLOEXEC, mode));
    TRY("openat-excl", openat(AT_FDCWD, t->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
    TRY("creat", syscall(SYS_creat, t->path, mode));
    struct open_how how = {.flags = O_WRONLY | O_CREAT | O_CLOEXEC, .mode = mode};
    TRY("openat2", syscall(SYS_openat2, AT_FDCWD, t->path, &how, sizeof(how)));
    TRY("mknod", mknod(t->path, S_IFREG | mode, 0));
    TRY("mknodat", mknodat(AT_FDCWD, t->path, S_IFREG | mode, 0));
    /* an unnamed file, made with the mode, then given a name */
    {
      char dir[PATH_MAX];
      snprintf(dir, sizeof(dir), "%s", base);
      char *slash = strrchr(dir, '/');
      if (slash && slash != dir)
        *slash = 0;
      else
        snprintf(dir, sizeof(dir), "%s", slash ? "/" : ".");
      int tmp = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
      int open_errno = errno;
      char proc[64];
      snprintf(proc, sizeof(proc), "/proc/self/fd/%d", tmp);
      TRY("tmpfile", tmp < 0 ? (errno = open_errno, -1)
                             : linkat(AT_FDCWD, proc, AT_FDCWD, t->path, AT_SYMLINK_FOLLOW));
      if (tmp >= 0)
        close(tmp);
    }
    /* a directory: chmod g+s (u+s) on it, by path and by fd */
    snprintf(path, sizeof(path), "%s.dir-chmod-%s", base, tag);
    rmdir(path);
    if (mkdir(path, 0755) < 0)
      return verdict(BROKEN, "setid", "cannot create %s: %s", path, strerror(errno));
    TRY("dir-chmod", chmod(path, mode));
    snprintf(path, sizeof(path), "%s.dir-fchmod-%s", base, tag);
    rmdir(path);
    mkdir(path, 0755);
    fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    TRY("dir-fchmod", fchmod(fd, mode));
    if (fd >= 0)
      close(fd);
#undef TRY
  }
  /* File capabilities are the other way to make a file that raises privileges: CAP_SETUID in
   * the permitted set of a file we wrote (security.capability, VFS_CAP_REVISION_2). */
  {
    struct vfs_cap_data caps = {.magic_etc = VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE};
    caps.data[0].permitted = 1u << CAP_SETUID;
    struct setid_try *t = &tries[n++];
    snprintf(t->what, sizeof(t->what), "setxattr security.capability");
    snprintf(t->path, sizeof(t->path), "%s.fcaps", base);
    close(setid_fresh(t->path));
    errno = 0;
    t->result = setxattr(t->path, "security.capability", &caps, sizeof(caps), 0);
    t->errnum = t->result < 0 ? errno : 0;
    if (t->result == 0 || getxattr(t->path, "security.capability", NULL, 0) > 0)
      return verdict(ESCAPED, "setid", "set file capabilities on %s", t->path);
  }
  /* How they were refused: each distinct answer once, with its count. */
  char summary[512] = "";
  size_t used = 0;
  int seen[48];
  size_t n_seen = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned bits = setid_bits(tries[i].path);
    if (bits)
      return verdict(ESCAPED, "setid", "%s left %s with mode bits %04o (call returned %d)",
                     tries[i].what, tries[i].path, bits, tries[i].result);
    int e = tries[i].result < 0 ? tries[i].errnum : 0;
    bool known = false;
    for (size_t k = 0; k < n_seen; k++)
      known |= seen[k] == e;
    if (known)
      continue;
    seen[n_seen++] = e;
    size_t count = 0;
    for (size_t j = i; j < n; j++)
      count += (tries[j].result < 0 ? tries[j].errnum : 0) == e;
    if (used < sizeof(summary))
      used += (size_t)snprintf(summary + used, sizeof(summary) - used, "%s%zu %s", used ? ", " : "",
                               count, e ? strerror(e) : "bits dropped");
  }
  return verdict(BLOCKED, "setid", "no set-id bit after %zu tries (%s)", n, summary);
}

static int modes(const char *base) {
  char path[PATH_MAX + 16], dir[PATH_MAX];
  snprintf(path, sizeof(path), "%s.modes-file", base);
  unlink(path);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return verdict(BLOCKED, "modes", "create %s 0600: %s", path, strerror(errno));
  if (fchmod(fd, 0700) < 0 || chmod(path, 0755) < 0)
    return verdict(BLOCKED, "modes", "chmod %s 0755: %s", path, strerror(errno));
  close(fd);
  snprintf(path, sizeof(path), "%s.modes-mknod", base);
  unlink(path);
  if (mknod(path, S_IFREG | 0644, 0) < 0)
    return verdict(BLOCKED, "modes", "mknod %s: %s", path, strerror(errno));
  snprintf(dir, sizeof(dir), "%s.modes-dir", base);
  rmdir(dir);
  if (mkdir(dir, 0755) < 0 || chmod(dir, 01777) < 0)
    return verdict(BLOCKED, "modes", "chmod %s 01777: %s", dir, strerror(errno));
  fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  char proc[64];
  snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
  snprintf(path, sizeof(path), "%s/tmpfile", dir);
  if (fd < 0 || linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0)
    return verdict(BLOCKED, "modes", "O_TMPFILE then linkat %s: %s", path, strerror(errno));
  close(fd);
  struct stat st;
  if (stat(dir, &st) < 0 || (st.st_mode & 07777) != 01777)
    return verdict(BLOCKED, "modes", "%s is not 01777", dir);
  return verdict(ESCAPED, "modes", "ordinary modes work (0600, 0755, 0644, 01777, O_TMPFILE)");
}

/* Make PATH a sparse file of GIB GiB (one byte written at its end, then a truncate to the
 * size): the default RLIMIT_FSIZE must refuse both with EFBIG (SIGXFSZ ignored here, so the
 * verdict is printed rather than the probe killed). The file is removed either way. */
static int big_file(const char *path, long gib) {
  signal(SIGXFSZ, SIG_IGN);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY, 0644);
  if (fd < 0)
    return verdict(BROKEN, "big-file", "open %s: %s", path, strerror(errno));
  off_t size = (off_t)gib << 30;
  bool wrote = pwrite(fd, "x", 1, size - 1) == 1;
  int write_errno = errno;
  bool truncated = ftruncate(fd, size) == 0;
  int truncate_errno = errno;
  close(fd);
  unlink(path);
  if (wrote || truncated)
    return verdict(ESCAPED, "big-file", "made %s %ld GiB (%s)", path, gib,
                   wrote ? "pwrite" : "ftruncate");
  return verdict(BLOCKED, "big-file", "%ld GiB: pwrite: %s, ftruncate: %s", gib,
                 strerror(write_errno), strerror(truncate_errno));
}

static int fill_file(const char *path, long mib) {
  static char block[64 * 1024];
  memset(block, 'x', sizeof(block));
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOCTTY | O_CLOEXEC, 0600);
  if (fd < 0)
    return BLOCK_ERRNO("fill-file", path);
  long long want = (long long)mib << 20, done = 0;
  while (done < want) {
    ssize_t n = write(fd, block, sizeof(block));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int e = n < 0 ? errno : ENOSPC;
      close(fd);
      return verdict(BLOCKED, "fill-file", "%s: stopped after %lld MiB: %s", path, done >> 20,
                     strerror(e));
    }
    done += n;
  }
  close(fd);
  return verdict(ESCAPED, "fill-file", "wrote %ld MiB to %s", mib, path);
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

static int hijack_holder(int n, char **dirs) {
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

static int plant_listener(const char *path, const char *out, int seconds) {
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

static int rewrite_file(const char *path, int n_pairs, char **pairs) {
  static char buf[1 << 20], next[1 << 20];
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return BLOCK_ERRNO("rewrite-file", path);
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n < 0)
    return BLOCK_ERRNO("rewrite-file", path);
  buf[n] = 0;
  int replaced = 0;
  for (int i = 0; i + 1 < n_pairs; i += 2) {
    char *at = strstr(buf, pairs[i]);
    if (!at)
      continue; /* a field this state does not have */
    snprintf(next, sizeof(next), "%.*s%s%s", (int)(at - buf), buf, pairs[i + 1],
             at + strlen(pairs[i]));
    memcpy(buf, next, strlen(next) + 1);
    replaced++;
  }
  if (!replaced)
    return verdict(BROKEN, "rewrite-file", "%s holds none of the strings to replace", path);
  fd = open(path, O_WRONLY | O_TRUNC);
  if (fd < 0)
    return BLOCK_ERRNO("rewrite-file", path);
  if (write(fd, buf, strlen(buf)) != (ssize_t)strlen(buf))
    return BLOCK_ERRNO("rewrite-file", path);
  close(fd);
  return verdict(ESCAPED, "rewrite-file", "rewrote %d fields of %s", replaced, path);
}

/* Set an extended attribute on PATH (not following a symlink): a tool for attacks on what is
 * read from a sandbox's tree afterwards (a forged overlay marker, finding 10). "ESCAPED" (0)
 * when the xattr was set. */
static int set_xattr(const char *path, const char *name, const char *value) {
  if (lsetxattr(path, name, value, strlen(value), 0) == 0)
    return verdict(ESCAPED, "set-xattr", "%s on %s", name, path);
  return BLOCK_ERRNO("set-xattr", name);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2)
    return verdict(BROKEN, "probe", "usage: probe VERB [ARGS]");
  const char *v = argv[1];
  const char *a = argc > 2 ? argv[2] : NULL, *b = argc > 3 ? argv[3] : NULL;
  if (!strcmp(v, "read-file") && a)
    return read_file(a);
  if (!strcmp(v, "list-dir") && a)
    return list_dir(a);
  if (!strcmp(v, "write-file") && a)
    return write_file(a);
  if (!strcmp(v, "link-out") && a && b)
    return link_out(a, b);
  if (!strcmp(v, "tiocsti"))
    return tiocsti();
  if (!strcmp(v, "ptrace") && a)
    return do_ptrace((pid_t)atoi(a));
  if (!strcmp(v, "signal") && a)
    return do_signal((pid_t)atoi(a));
  if (!strcmp(v, "see-pid") && a)
    return see_pid((pid_t)atoi(a));
  if (!strcmp(v, "see-host"))
    return see_host();
  if (!strcmp(v, "proc-fds"))
    return proc_fds();
  if (!strcmp(v, "fd-chdir"))
    return fd_chdir();
  if (!strcmp(v, "write-exe") && a)
    return write_exe(a);
  if (!strcmp(v, "holder-environ"))
    return holder_environ();
  if (!strcmp(v, "proc-holder"))
    return proc_holder();
  if (!strcmp(v, "kill-holder"))
    return kill_holder();
  if (!strcmp(v, "idle-pairs"))
    return idle_pairs();
  if (!strcmp(v, "kill-all") && a)
    return kill_all(a);
  if (!strcmp(v, "suid"))
    return suid();
  if (!strcmp(v, "mknod") && a)
    return do_mknod(a);
  if (!strcmp(v, "connect") && a && b)
    return tcp_connect(a, b);
  if (!strcmp(v, "connect-abstract") && a)
    return connect_abstract(a);
  if (!strcmp(v, "dns") && a)
    return dns(a);
  if (!strcmp(v, "loopback-self"))
    return loopback_self();
  if (!strcmp(v, "forkbomb") && a)
    return forkbomb(atoi(a));
  if (!strcmp(v, "memory") && a)
    return memory(atol(a));
  if (!strcmp(v, "daemon") && a && b)
    return daemonise(a, atoi(b));
  if (!strcmp(v, "sysctl-write"))
    return sysctl_write();
  if (!strcmp(v, "replace-parent") && a && b)
    return replace_parent(a, b);
  if (!strcmp(v, "exchange-parent") && a && b)
    return exchange_parent(a, b);
  if (!strcmp(v, "setid") && a)
    return setid(a);
  if (!strcmp(v, "modes") && a)
    return modes(a);
  if (!strcmp(v, "big-file") && a && b)
    return big_file(a, atol(b));
  if (!strcmp(v, "fill-file") && a && b)
    return fill_file(a, atol(b));
  if (!strcmp(v, "hijack-holder") && a)
    return hijack_holder(argc - 2, argv + 2);
  if (!strcmp(v, "plant-listener") && a && b && argc > 4)
    return plant_listener(a, b, atoi(argv[4]));
  if (!strcmp(v, "rewrite-file") && a && b && argc > 4)
    return rewrite_file(a, argc - 3, argv + 3);
  if (!strcmp(v, "set-xattr") && a && b && argc > 4)
    return set_xattr(a, b, argv[4]);
  int r = syscalls(v);
  if (r != BROKEN)
    return r;
  return verdict(BROKEN, v, "unknown verb or missing arguments");
}
