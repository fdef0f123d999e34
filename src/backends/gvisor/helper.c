/* cordon-gvisor-exec: the static wrapper every gvisor exec runs under, inside the sandbox
 * (`runsc exec ... /.cordon-gvisor/cordon-gvisor-exec STATUS TIMEOUT_MS CWD [--env K=V]...
 * [--nproc N] [--fsize BYTES] --
 * ARGV`). runsc's own exit code cannot tell "the command exited 127" from "runsc could not
 * load it", nor "exited 137" from "killed by SIGKILL", so the wrapper reports how the command
 * ended in a status record: STATUS, a file in the session's control directory (outside the
 * workspace, bind-mounted at /.cordon-gvisor), one line "KIND N":
 *
 *   exit N       the command exited N          signal N   killed by signal N
 *   timeout 0    TIMEOUT_MS passed; the tree was killed
 *   execfail N   execve failed: N is 127 (not found) or 126 (cannot execute)
 *   chdir E      CWD could not be entered (errno E)
 *   identity E   the wrapper could not become the sandbox user (errno E)
 *
 * It is the child subreaper of its command, so everything the command starts (daemonised
 * grandchildren too) stays its descendant; when the command ends, or the timeout fires, it
 * kills every descendant. Static and alone: no cordon headers, nothing but libc. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SANDBOX_ID 1000 /* uid and gid of the sandbox user (confine/policy.h) */
#define HELPER_TARGET "/.cordon-gvisor-exec" /* where the sandbox has it (spec.h) */
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static volatile sig_atomic_t timed_out;

static void on_child(int sig) {
  (void)sig;
}

/* Point fds 0-2 at /dev/null: what gVisor's /proc/PID/fd then shows of this process. */
static void stdio_to_null(void) {
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0)
    return;
  for (int fd = 0; fd <= 2; fd++)
    dup2(null, fd);
  if (null > 2)
    close(null);
}

static void on_alarm(int sig) {
  (void)sig;
  timed_out = 1;
}

/* The sandbox's processes, pid, parent and whether it has ended (a zombie, waiting for its
 * parent's wait), from /proc: what kill_strays walks. A sandbox holds few; past MAX_PROCS the
 * rest waits for the next pass. */
#define MAX_PROCS 4096
struct proc_link {
  pid_t pid, ppid;
  int ended;
};
static struct proc_link sandbox_procs[MAX_PROCS];

static size_t read_procs(void) {
  DIR *d = opendir("/proc");
  if (!d)
    return 0;
  size_t n = 0;
  struct dirent *e;
  while (n < MAX_PROCS && (e = readdir(d))) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 1)
      continue;
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      continue;
    ssize_t len = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (len <= 0)
      continue;
    buf[len] = 0;
    const char *paren = strrchr(buf, ')'); /* the comm may hold spaces and parentheses */
    long ppid = 0;
    char state = 0;
    if (paren && sscanf(paren + 1, " %c %ld", &state, &ppid) == 2)
      sandbox_procs[n++] =
          (struct proc_link){(pid_t)pid, (pid_t)ppid, state == 'Z' || state == 'X'};
  }
  closedir(d);
  return n;
}

/* Kill what the command left: every descendant of ours, and every orphan (a child of pid 1,
 * runsc's execs having parent 0) with its descendants. gVisor reparents an orphan to pid 1,
 * never to a child subreaper such as us, and does so when its parent exits: a scan that only
 * looked at children of ours and of pid 1 missed a process whose parent was being killed at
 * that moment, and the wait that followed then found no child of ours and stopped, leaving
 * it running. Through the parent links, such a process is still a descendant. Returns how many
 * were sent SIGKILL. */
static int kill_strays(void) {
  static unsigned char doomed[MAX_PROCS];
  size_t n = read_procs();
  pid_t self = getpid();
  memset(doomed, 0, n);
  for (size_t i = 0; i < n; i++)
    doomed[i] = sandbox_procs[i].pid != self &&
                (sandbox_procs[i].ppid == self || sandbox_procs[i].ppid == 1);
  /* The closure over parent links: at most n rounds, each adding a generation. */
  for (int grew = 1; grew;) {
    grew = 0;
    for (size_t i = 0; i < n; i++) {
      if (doomed[i] || sandbox_procs[i].pid == self)
        continue;
      for (size_t j = 0; j < n; j++)
        if (doomed[j] && sandbox_procs[j].pid == sandbox_procs[i].ppid) {
          doomed[i] = grew = 1;
          break;
        }
    }
  }
  /* A zombie is past killing (kill succeeds on it all the same): counting it would keep
   * kill_tree passing until pid 1 has reaped it. */
  int killed = 0;
  for (size_t i = 0; i < n; i++)
    if (doomed[i] && !sandbox_procs[i].ended && kill(sandbox_procs[i].pid, SIGKILL) == 0)
      killed++;
  return killed;
}

/* Kill the whole tree and reap it: repeat until we have no child left and a scan finds nothing
 * more to kill. */
static void kill_tree(pid_t group) {
  kill(-group, SIGKILL);
  for (int pass = 0; pass < 1000; pass++) {
    /* In a one-shot sandbox the wrapper is pid 1, the ancestor of every process there (orphans
     * come to it): once it has no child left, no process is left, and /proc need not be read. */
    if (getpid() == 1) {
      while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
      if (waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD)
        return;
    }
    int killed = kill_strays();
    while (waitpid(-1, NULL, WNOHANG) > 0)
      ;
    if (killed == 0 && waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD)
      return;
    struct timespec nap = {0, 2000000};
    nanosleep(&nap, NULL);
  }
}

/* One write of one short line to a new file: the host reads it only once the wrapper has exited
 * (runsc run or exec returned), so no rename is needed for it to be whole, and a record cut short
 * (the wrapper killed mid-way, or before it wrote: an empty file) does not parse, which the host
 * reports as no record. Each file operation is a round trip to gVisor's gofer: the file is made
 * while the command runs (open_record), so that only the write is left once it has ended. */
static int record_fd = -1;

static void open_record(const char *status_path) {
  record_fd = open(status_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
}

/* "KIND N\n" into line (64 bytes): formatted by hand, as stdio's formatter is pages of code the
 * wrapper would otherwise fault in, under gVisor's ptrace platform a trap to the Sentry each. */
static int format_record(char line[64], const char *kind, int value) {
  int n = 0;
  for (; kind[n] && n < 40; n++)
    line[n] = kind[n];
  line[n++] = ' ';
  unsigned magnitude = value < 0 ? 0u - (unsigned)value : (unsigned)value;
  char digits[12];
  int d = 0;
  do
    digits[d++] = (char)('0' + magnitude % 10);
  while ((magnitude /= 10) && d < (int)sizeof(digits));
  if (value < 0)
    line[n++] = '-';
  while (d)
    line[n++] = digits[--d];
  line[n++] = '\n';
  return n;
}

static void report(const char *status_path, const char *kind, int value) {
  char line[64];
  int n = format_record(line, kind, value);
  if (record_fd < 0)
    open_record(status_path);
  if (record_fd < 0)
    return;
  if (write(record_fd, line, (size_t)n) != n)
    (void)ftruncate(record_fd, 0);
  close(record_fd);
  record_fd = -1;
}

/* No set-id mode bit may reach a file: gVisor's gofer applies modes to the host's files (the
 * workspace), so a set-uid file made inside would be one on the host. A seccomp filter (which
 * gVisor runs for its own tasks) refuses with EPERM every call whose mode argument holds
 * S_ISUID or S_ISGID, openat2 (its mode sits behind a pointer: ENOSYS, so libc falls back to
 * openat), and every call not of the x86-64 ABI (the 32-bit and x32 entry points). */
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#define ARG_LOW(n) (offsetof(struct seccomp_data, args) + 8 * (n))
#define MODE_CHECK(call, arg)                                        \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (call), 0, 3),                 \
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LOW(arg)),              \
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, S_ISUID | S_ISGID, 0, 1), \
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),          \
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))

static int deny_setid_modes(void) {
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1), /* x32 */
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      MODE_CHECK(SYS_chmod, 1),
      MODE_CHECK(SYS_fchmod, 1),
      MODE_CHECK(SYS_fchmodat, 2),
      MODE_CHECK(SYS_fchmodat2, 2),
      MODE_CHECK(SYS_open, 2),
      MODE_CHECK(SYS_openat, 3),
      MODE_CHECK(SYS_creat, 1),
      MODE_CHECK(SYS_mknod, 1),
      MODE_CHECK(SYS_mknodat, 2),
      MODE_CHECK(SYS_mkdir, 1),
      MODE_CHECK(SYS_mkdirat, 2),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof(filter) / sizeof(filter[0])), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    return -1;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

/* execve with PATH search in the command's own environment; returns the errno. */
static int exec_command(char **argv, char **envp) {
  if (strchr(argv[0], '/')) {
    execve(argv[0], argv, envp);
    return errno;
  }
  const char *path = DEFAULT_PATH;
  for (char **e = envp; *e; e++)
    if (!strncmp(*e, "PATH=", 5))
      path = *e + 5;
  int saw_eacces = 0;
  char candidate[4096];
  for (const char *p = path; *p;) {
    const char *colon = strchr(p, ':');
    size_t len = colon ? (size_t)(colon - p) : strlen(p);
    if (len > 0 && p[0] == '/' &&
        snprintf(candidate, sizeof(candidate), "%.*s/%s", (int)len, p, argv[0]) <
            (int)sizeof(candidate)) {
      execve(candidate, argv, envp);
      if (errno == EACCES || errno == ENOEXEC || errno == EPERM)
        saw_eacces = 1;
    }
    p += len + (colon ? 1 : 0);
  }
  return saw_eacces ? EACCES : ENOENT;
}

/* What the command's process needs before it becomes the command. */
struct command_start {
  char **command, **envp;
  const char *cwd;
  long nproc;
  long long fsize;
  int report;
};

/* The stack of the command's process until its execve: in the wrapper's own bss, not mapped and
 * unmapped per exec (each an address-space change the ptrace platform makes in its stub process
 * on the host). What start_command and exec_command use is under 8 KiB. */
static char command_stack[64 * 1024] __attribute__((aligned(64)));

/* The command's process (clone with CLONE_VM: nothing here may touch the wrapper's memory but
 * its own stack, and it ends in execve or _exit). */
static int start_command(void *arg) {
  const struct command_start *st = arg;
  setsid();
  int stage[2] = {0, 0};
  /* The wrapper is uid 0 of the sandbox (owner of the control directory) with CAP_SETUID,
   * CAP_SETGID and CAP_KILL only; the command is the sandbox user, with nothing: it cannot
   * write the control directory, signal the wrapper or trace it. */
  /* --pids: the Sentry counts the sandbox user's processes against it; soft = hard, so the
   * command cannot raise it. */
  struct rlimit procs = {(rlim_t)st->nproc, (rlim_t)st->nproc},
                files = {(rlim_t)st->fsize, (rlim_t)st->fsize};
  if ((st->nproc > 0 && setrlimit(RLIMIT_NPROC, &procs) < 0) ||
      (st->fsize > 0 && setrlimit(RLIMIT_FSIZE, &files) < 0) ||
      syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setgid, SANDBOX_ID) < 0 ||
      syscall(SYS_setuid, SANDBOX_ID) < 0 || deny_setid_modes() < 0) {
    stage[0] = 'u', stage[1] = errno;
    if (write(st->report, stage, sizeof(stage)) < 0)
      _exit(125);
    _exit(125);
  }
  if (chdir(st->cwd) < 0) {
    stage[0] = 'c', stage[1] = errno;
  } else {
    stage[0] = 'x', stage[1] = exec_command(st->command, st->envp);
    char message[512];
    int n =
        snprintf(message, sizeof(message), "cordon: %s: %s\n", st->command[0], strerror(stage[1]));
    if (n > 0 && write(STDERR_FILENO, message, (size_t)n) < 0)
      _exit(125);
  }
  if (write(st->report, stage, sizeof(stage)) < 0)
    _exit(125);
  _exit(stage[0] == 'x' && stage[1] == ENOENT ? 127 : 126);
}

/* Whether this process is where it belongs: pid 1 of a sandbox (a one-shot run's wrapper or a
 * session's holder), or an exec beside a holder that is this program (pid 1's argv[0] is the path
 * the spec gives it). Anywhere else, on the host above all, the wrapper must do nothing: its tree
 * kill takes every child of pid 1 for the command's orphan, and the host's init has many. */
static int inside_sandbox(void) {
  if (getpid() == 1)
    return 1;
  char cmdline[sizeof(HELPER_TARGET)] = {0};
  int fd = open("/proc/1/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  ssize_t n = read(fd, cmdline, sizeof(cmdline));
  close(fd);
  return n == (ssize_t)sizeof(cmdline) && !memcmp(cmdline, HELPER_TARGET, sizeof(cmdline));
}

int main(int argc, char **argv) {
  if (!inside_sandbox() || (argc == 2 && !strcmp(argv[1], "pause") && getpid() != 1)) {
    fprintf(stderr, "cordon-gvisor-exec: runs only inside a cordon gvisor sandbox\n");
    return 125;
  }
  if (argc == 2 && !strcmp(argv[1], "pause")) {
    /* pid 1 of the sandbox: reap what is orphaned to it. SIGCHLD must be caught (not ignored,
     * pid 1's default) for sigsuspend to return when one arrives, and blocked outside it: a
     * SIGCHLD that came between a waitpid finding nothing and a pause() was spent on the
     * handler, and the last orphan of a burst stayed a zombie until some other child ended (a
     * `sleep` that `ps` still listed after its exec's timeout had killed it). */
    struct sigaction chld;
    memset(&chld, 0, sizeof(chld));
    chld.sa_handler = on_child;
    sigaction(SIGCHLD, &chld, NULL);
    sigset_t blocked, during_wait;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGCHLD);
    sigprocmask(SIG_BLOCK, &blocked, &during_wait);
    sigdelset(&during_wait, SIGCHLD);
    /* It writes nothing: no host file of runsc's (its log is the detached sandbox's stderr) stays
     * open for /proc/1/fd to show. */
    stdio_to_null();
    for (;;) {
      while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
      sigsuspend(&during_wait);
    }
  }
  if (argc < 6) {
    fprintf(stderr, "cordon-gvisor-exec: usage: STATUS TIMEOUT_MS CWD [--env K=V]... -- ARGV\n");
    return 125;
  }
  const char *status_path = argv[1], *cwd = argv[3];
  long timeout_ms = strtol(argv[2], NULL, 10);
  char **envp = calloc((size_t)argc, sizeof(char *));
  size_t n_env = 0;
  int i = 4;
  long nproc = 0;
  long long fsize = 0;
  for (; i < argc && strcmp(argv[i], "--"); i += 2)
    if (!strcmp(argv[i], "--env") && i + 1 < argc)
      envp[n_env++] = argv[i + 1];
    else if (!strcmp(argv[i], "--nproc") && i + 1 < argc)
      nproc = strtol(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--fsize") && i + 1 < argc)
      fsize = strtoll(argv[i + 1], NULL, 10);
  if (!envp || i + 1 >= argc)
    return 125;
  char **command = argv + i + 1;

  prctl(PR_SET_CHILD_SUBREAPER, 1);
  int report_pipe[2];
  if (pipe2(report_pipe, O_CLOEXEC) < 0)
    return 125;
  /* CLONE_VM | CLONE_VFORK, as posix_spawn: gVisor's ptrace platform builds a host address
   * space for every fork (a stub process), and the command's execve builds another; sharing ours
   * until the execve saves the first. We wait, suspended, until the child has exec'd or exited. */
  struct command_start start = {command, envp, cwd, nproc, fsize, report_pipe[1]};
  pid_t child = clone(start_command, command_stack + sizeof(command_stack),
                      CLONE_VM | CLONE_VFORK | SIGCHLD, &start);
  if (child < 0)
    return 125;
  close(report_pipe[1]);
  int stage[2] = {0, 0};
  ssize_t got = read(report_pipe[0], stage, sizeof(stage));
  close(report_pipe[0]);
  /* The command runs (its execve closed the pipe): from here on the wrapper writes nothing but
   * the record, so it keeps no copy of the exec's stdio. gVisor lets every process of the
   * sandbox list /proc/PID/fd of every other and reopen what is there; the wrapper's fds are then
   * /dev/null alone, as pid 1's: its stdio pipes stay with the command, which holds them. */
  if (got == 0) {
    stdio_to_null();
    open_record(status_path);
  }

  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_alarm; /* no SA_RESTART: waitpid returns EINTR */
  sigaction(SIGALRM, &sa, NULL);
  if (timeout_ms > 0) {
    struct itimerval it;
    memset(&it, 0, sizeof(it));
    it.it_value.tv_sec = timeout_ms / 1000;
    it.it_value.tv_usec = (timeout_ms % 1000) * 1000;
    setitimer(ITIMER_REAL, &it, NULL);
  }
  int status = 0;
  pid_t r;
  while ((r = waitpid(child, &status, 0)) < 0 && errno == EINTR && !timed_out)
    ;
  if (timed_out) {
    kill_tree(child);
    report(status_path, "timeout", 0);
    return 137;
  }
  kill_tree(child); /* what it left running goes with it */
  if (got == (ssize_t)sizeof(stage) && stage[0] == 'u') {
    fprintf(stderr, "cordon-gvisor-exec: cannot become the sandbox user: %s\n", strerror(stage[1]));
    report(status_path, "identity", stage[1]);
    return 125;
  }
  if (got == (ssize_t)sizeof(stage) && stage[0] == 'c') {
    report(status_path, "chdir", stage[1]);
    return 125;
  }
  if (got == (ssize_t)sizeof(stage) && stage[0] == 'x') {
    int code = stage[1] == ENOENT ? 127 : 126;
    report(status_path, "execfail", code);
    return code;
  }
  if (r == child && WIFSIGNALED(status)) {
    report(status_path, "signal", WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  int code = r == child && WIFEXITED(status) ? WEXITSTATUS(status) : 125;
  report(status_path, "exit", code);
  return code;
}
