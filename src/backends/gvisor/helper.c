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
 * kills every descendant.
 *
 * Static, alone and without libc (-nostdlib, raw system calls; the headers give constants and
 * types only): under gVisor's ptrace platform every system call and every page fault of the
 * wrapper is a trap to the Sentry, and a static glibc is a 900 KiB image whose start makes a
 * dozen calls (TLS, brk, rseq, IRELATIVE relocations, ...) before main. This one is a few pages
 * and starts with none. No cordon headers. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <string.h> /* the prototypes of the four defined below */
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if !defined(__x86_64__)
#error "cordon-gvisor-exec is written for x86-64 (its start, clone and system calls)"
#endif

#define SANDBOX_ID 1000 /* uid and gid of the sandbox user (confine/policy.h) */
#define HELPER_TARGET "/.cordon-gvisor-exec" /* where the sandbox has it (spec.h) */
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* ---- the start, system calls and the few string helpers it needs ---------------------------- */

/* _start: the kernel's stack holds argc, argv, NULL, envp; the ABI wants %rsp 16-aligned at a
 * call. __restore_rt: the return from a signal handler (the kernel wants SA_RESTORER on x86-64).
 * helper_clone(fn, stack, flags, arg): clone on a stack of our own, fn(arg) in the child, whose
 * return value is its exit status. */
__asm__(".text\n"
        ".global _start\n"
        "_start:\n"
        "  xor %ebp, %ebp\n"
        "  mov %rsp, %rdi\n"
        "  and $-16, %rsp\n"
        "  call helper_start\n"
        "  hlt\n"
        ".type helper_restore_rt, @function\n"
        "helper_restore_rt:\n"
        "  mov $15, %eax\n" /* rt_sigreturn */
        "  syscall\n"
        "  hlt\n"
        ".type helper_clone, @function\n"
        "helper_clone:\n"
        "  and $-16, %rsi\n"
        "  sub $16, %rsi\n"
        "  mov %rdi, 0(%rsi)\n"
        "  mov %rcx, 8(%rsi)\n"
        "  mov %rdx, %rdi\n"
        "  xor %edx, %edx\n"
        "  xor %r10d, %r10d\n"
        "  xor %r8d, %r8d\n"
        "  mov $56, %eax\n" /* clone(flags, stack, NULL, NULL, 0) */
        "  syscall\n"
        "  test %rax, %rax\n"
        "  jnz 1f\n"
        "  xor %ebp, %ebp\n"
        "  pop %rax\n"
        "  pop %rdi\n"
        "  call *%rax\n"
        "  mov %eax, %edi\n"
        "  mov $60, %eax\n" /* exit */
        "  syscall\n"
        "  hlt\n"
        "1:\n"
        "  ret\n");

void helper_restore_rt(void);
long helper_clone(int (*fn)(void *), void *stack, unsigned long flags, void *arg);

/* A system call: the result, or -errno. */
static long sys6(long n, long a, long b, long c, long d, long e, long f) {
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  register long r9 __asm__("r9") = f;
  long ret;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
}
#define sys(n, a, b, c) sys6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define sys4(n, a, b, c, d) sys6((n), (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)
#define sys5(n, a, b, c, d, e) sys6((n), (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), 0)

static __attribute__((noreturn)) void sys_exit(int code) {
  for (;;)
    sys(SYS_exit_group, code, 0, 0);
}
static int sys_open(const char *path, int flags, int mode) {
  return (int)sys4(SYS_openat, AT_FDCWD, path, flags, mode);
}
static void sys_close(int fd) {
  sys(SYS_close, fd, 0, 0);
}
static long sys_write(int fd, const void *data, size_t n) {
  return sys(SYS_write, fd, data, n);
}
static long sys_read(int fd, void *data, size_t n) {
  return sys(SYS_read, fd, data, n);
}
static int sys_getpid(void) {
  return (int)sys(SYS_getpid, 0, 0, 0);
}
static int sys_wait(int pid, int *status, int options) {
  return (int)sys4(SYS_wait4, pid, status, options, 0);
}
static int sys_prctl(int option, unsigned long a, unsigned long b) {
  return (int)sys5(SYS_prctl, option, a, b, 0, 0);
}

/* The compiler may emit calls to these for copies and zeroing; they are written so that it
 * cannot turn them into calls to themselves (-fno-tree-loop-distribute-patterns). */
void *memset(void *dest, int c, size_t n) {
  unsigned char *d = dest;
  while (n--)
    *d++ = (unsigned char)c;
  return dest;
}
void *memcpy(void *dest, const void *src, size_t n) {
  unsigned char *d = dest;
  const unsigned char *s = src;
  while (n--)
    *d++ = *s++;
  return dest;
}
void *memmove(void *dest, const void *src, size_t n) {
  unsigned char *d = dest;
  const unsigned char *s = src;
  if (d < s)
    while (n--)
      *d++ = *s++;
  else
    while (n--)
      d[n] = s[n];
  return dest;
}
int memcmp(const void *a, const void *b, size_t n) {
  const unsigned char *x = a, *y = b;
  for (; n; n--, x++, y++)
    if (*x != *y)
      return *x - *y;
  return 0;
}

static size_t length_of(const char *s) {
  size_t n = 0;
  while (s[n])
    n++;
  return n;
}
static int same(const char *a, const char *b) {
  while (*a && *a == *b)
    a++, b++;
  return *a == *b;
}
static int has_slash(const char *s) {
  for (; *s; s++)
    if (*s == '/')
      return 1;
  return 0;
}

/* A decimal integer (an optional '-', then digits; what follows is ignored), as strtoll. */
static long long parse_number(const char *s) {
  int negative = *s == '-';
  s += negative;
  unsigned long long v = 0;
  for (; *s >= '0' && *s <= '9'; s++)
    v = v * 10 + (unsigned)(*s - '0');
  return negative ? -(long long)v : (long long)v;
}

/* value in decimal at out (room for 21 bytes); returns its length. */
static int format_number(char *out, long long value) {
  unsigned long long magnitude =
      value < 0 ? 0ull - (unsigned long long)value : (unsigned long long)value;
  char digits[21];
  int d = 0, n = 0;
  do
    digits[d++] = (char)('0' + magnitude % 10);
  while ((magnitude /= 10) && d < (int)sizeof(digits));
  if (value < 0)
    out[n++] = '-';
  while (d)
    out[n++] = digits[--d];
  return n;
}

/* A line of parts to fd 2 (bounded; a part that does not fit is cut). */
static void say(const char *const *parts) {
  char line[512];
  size_t n = 0;
  for (; *parts; parts++)
    for (const char *p = *parts; *p && n < sizeof(line); p++)
      line[n++] = *p;
  if (sys_write(STDERR_FILENO, line, n) < 0)
    return;
}

/* The messages glibc's strerror gives for what execve, chdir and setuid fail with here. */
static const char *error_text(int e, char number[24]) {
  switch (e) {
  case ENOENT: return "No such file or directory";
  case EACCES: return "Permission denied";
  case EPERM: return "Operation not permitted";
  case ENOEXEC: return "Exec format error";
  case ENOTDIR: return "Not a directory";
  case ELOOP: return "Too many levels of symbolic links";
  case ENAMETOOLONG: return "File name too long";
  case E2BIG: return "Argument list too long";
  case ENOMEM: return "Cannot allocate memory";
  case ETXTBSY: return "Text file busy";
  case EISDIR: return "Is a directory";
  case EIO: return "Input/output error";
  case EAGAIN: return "Resource temporarily unavailable";
  case EINVAL: return "Invalid argument";
  default: {
    const char prefix[] = "Unknown error ";
    memcpy(number, prefix, sizeof(prefix) - 1);
    number[sizeof(prefix) - 1 + format_number(number + sizeof(prefix) - 1, e)] = 0;
    return number;
  }
  }
}

/* The kernel's struct sigaction (not libc's). */
struct kernel_sigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)(void);
  unsigned long mask;
};
#define KERNEL_SA_RESTORER 0x04000000ul

static void catch_signal(int sig, void (*handler)(int)) {
  struct kernel_sigaction sa = {handler, KERNEL_SA_RESTORER, helper_restore_rt, 0};
  sys4(SYS_rt_sigaction, sig, &sa, 0, sizeof(sa.mask));
}

/* ---- the wrapper ------------------------------------------------------------------------------
 */

static volatile sig_atomic_t timed_out;

static void on_child(int sig) {
  (void)sig;
}

/* Point fds 0-2 at /dev/null: what gVisor's /proc/PID/fd then shows of this process. */
static void stdio_to_null(void) {
  int null = sys_open("/dev/null", O_RDWR | O_CLOEXEC, 0);
  if (null < 0)
    return;
  for (int fd = 0; fd <= 2; fd++)
    sys(SYS_dup2, null, fd, 0);
  if (null > 2)
    sys_close(null);
}

static void on_alarm(int sig) {
  (void)sig;
  timed_out = 1;
}

/* The kernel's directory entry (getdents64). */
struct dirent64_record {
  unsigned long long ino;
  long long off;
  unsigned short reclen;
  unsigned char type;
  char name[];
};

/* Kill the process of /proc/NAME if its parent is self or 1 (its stat read); 1 if killed. */
static int kill_if_child(const char *name, int self) {
  long long pid = 0;
  const char *c = name;
  for (; *c >= '0' && *c <= '9'; c++)
    pid = pid * 10 + (*c - '0');
  if (*c || c == name || pid <= 1 || pid == self || c - name > 10)
    return 0;
  char path[32] = "/proc/", buf[512];
  size_t at = 6;
  for (c = name; *c; c++)
    path[at++] = *c;
  memcpy(path + at, "/stat", 6);
  int fd = sys_open(path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0)
    return 0;
  long n = sys_read(fd, buf, sizeof(buf) - 1);
  sys_close(fd);
  if (n <= 0)
    return 0;
  buf[n] = 0;
  const char *paren = NULL; /* the comm may hold spaces and parentheses: the last ')' */
  for (long i = 0; i < n; i++)
    if (buf[i] == ')')
      paren = buf + i;
  /* ") S PPID ..." */
  if (!paren || paren[1] != ' ' || !paren[2] || paren[3] != ' ')
    return 0;
  const char *p = paren + 4;
  if (*p < '0' || *p > '9')
    return 0;
  long long ppid = parse_number(p);
  /* Children of pid 1 are orphans (runsc's execs have parent 0): what a command daemonised out
   * of its tree when gVisor did not reparent it to us. */
  if (ppid != self && ppid != 1)
    return 0;
  sys(SYS_kill, pid, SIGKILL, 0);
  return 1;
}

/* Kill every process whose parent is us (orphans of the tree reparent to us, the subreaper). */
static int kill_children(void) {
  int dir = sys_open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (dir < 0)
    return 0;
  int killed = 0, self = sys_getpid();
  static char entries[8192] __attribute__((aligned(8)));
  long n;
  while ((n = sys(SYS_getdents64, dir, entries, sizeof(entries))) > 0)
    for (long at = 0; at < n;) {
      struct dirent64_record *e = (struct dirent64_record *)(entries + at);
      killed += kill_if_child(e->name, self);
      at += e->reclen;
    }
  sys_close(dir);
  return killed;
}

static void reap_all(void) {
  while (sys_wait(-1, NULL, WNOHANG) > 0)
    ;
}

/* Kill the whole tree and reap it: repeat until we have no child left. */
static void kill_tree(int group) {
  sys(SYS_kill, -group, SIGKILL, 0);
  for (int pass = 0; pass < 1000; pass++) {
    /* In a one-shot sandbox the wrapper is pid 1, the ancestor of every process there: once it
     * has no child left, no process is left, and /proc need not be read. */
    if (sys_getpid() == 1) {
      reap_all();
      if (sys_wait(-1, NULL, WNOHANG) == -ECHILD)
        return;
    }
    kill_children();
    reap_all();
    if (sys_wait(-1, NULL, WNOHANG) == -ECHILD)
      return;
    struct timespec nap = {0, 2000000};
    sys(SYS_nanosleep, &nap, 0, 0);
  }
}

/* One write of one short line to a new file: the host reads it only once the wrapper has exited
 * (runsc run or exec returned), so no rename is needed for it to be whole, and a record cut short
 * (the wrapper killed mid-way, or before it wrote: an empty file) does not parse, which the host
 * reports as no record. Each file operation is a round trip to gVisor's gofer: the file is made
 * while the command runs (open_record), so that only the write is left once it has ended. */
static int record_fd = -1;

static void open_record(const char *status_path) {
  record_fd = sys_open(status_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
}

/* "KIND N\n" into line (64 bytes). */
static int format_record(char line[64], const char *kind, int value) {
  int n = 0;
  for (; kind[n] && n < 40; n++)
    line[n] = kind[n];
  line[n++] = ' ';
  n += format_number(line + n, value);
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
  if (sys_write(record_fd, line, (size_t)n) != n)
    sys(SYS_ftruncate, record_fd, 0, 0);
  sys_close(record_fd);
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

/* 0, or -errno. */
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
  int r = sys_prctl(PR_SET_NO_NEW_PRIVS, 1, 0);
  return r < 0 ? r : sys_prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, (unsigned long)&prog);
}

/* execve with PATH search in the command's own environment; returns the errno. */
static int exec_command(char **argv, char **envp) {
  if (has_slash(argv[0]))
    return (int)-sys(SYS_execve, argv[0], argv, envp);
  const char *path = DEFAULT_PATH;
  for (char **e = envp; *e; e++)
    if (!memcmp(*e, "PATH=", 5))
      path = *e + 5;
  int saw_eacces = 0;
  size_t name_length = length_of(argv[0]);
  char candidate[4096];
  for (const char *p = path; *p;) {
    size_t len = 0;
    while (p[len] && p[len] != ':')
      len++;
    if (len > 0 && p[0] == '/' && len + 1 + name_length < sizeof(candidate)) {
      memcpy(candidate, p, len);
      candidate[len] = '/';
      memcpy(candidate + len + 1, argv[0], name_length + 1);
      long e = -sys(SYS_execve, candidate, argv, envp);
      if (e == EACCES || e == ENOEXEC || e == EPERM)
        saw_eacces = 1;
    }
    p += len + (p[len] == ':' ? 1 : 0);
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
 * its own stack, and it ends in execve or exit). */
static int start_command(void *arg) {
  const struct command_start *st = arg;
  sys(SYS_setsid, 0, 0, 0);
  int stage[2] = {0, 0};
  /* The wrapper is uid 0 of the sandbox (owner of the control directory) with CAP_SETUID,
   * CAP_SETGID and CAP_KILL only; the command is the sandbox user, with nothing: it cannot
   * write the control directory, signal the wrapper or trace it. */
  /* --pids: the Sentry counts the sandbox user's processes against it; soft = hard, so the
   * command cannot raise it. */
  struct rlimit procs = {(rlim_t)st->nproc, (rlim_t)st->nproc},
                files = {(rlim_t)st->fsize, (rlim_t)st->fsize};
  long r = 0;
  if (st->nproc > 0)
    r = sys(SYS_setrlimit, RLIMIT_NPROC, &procs, 0);
  if (r >= 0 && st->fsize > 0)
    r = sys(SYS_setrlimit, RLIMIT_FSIZE, &files, 0);
  if (r >= 0)
    r = sys(SYS_setgroups, 0, 0, 0);
  if (r >= 0)
    r = sys(SYS_setgid, SANDBOX_ID, 0, 0);
  if (r >= 0)
    r = sys(SYS_setuid, SANDBOX_ID, 0, 0);
  if (r >= 0)
    r = deny_setid_modes();
  if (r < 0) {
    stage[0] = 'u', stage[1] = (int)-r;
    sys_write(st->report, stage, sizeof(stage));
    return 125;
  }
  if ((r = sys(SYS_chdir, st->cwd, 0, 0)) < 0) {
    stage[0] = 'c', stage[1] = (int)-r;
  } else {
    stage[0] = 'x', stage[1] = exec_command(st->command, st->envp);
    char number[24];
    const char *parts[] = {"cordon: ", st->command[0], ": ", error_text(stage[1], number), "\n",
                           NULL};
    say(parts);
  }
  sys_write(st->report, stage, sizeof(stage));
  return stage[0] == 'x' && stage[1] == ENOENT ? 127 : 126;
}

/* Whether this process is where it belongs: pid 1 of a sandbox (a one-shot run's wrapper or a
 * session's holder), or an exec beside a holder that is this program (pid 1's argv[0] is the path
 * the spec gives it). Anywhere else, on the host above all, the wrapper must do nothing: its tree
 * kill takes every child of pid 1 for the command's orphan, and the host's init has many. */
static int inside_sandbox(void) {
  if (sys_getpid() == 1)
    return 1;
  char cmdline[sizeof(HELPER_TARGET)] = {0};
  int fd = sys_open("/proc/1/cmdline", O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0)
    return 0;
  long n = sys_read(fd, cmdline, sizeof(cmdline));
  sys_close(fd);
  return n == (long)sizeof(cmdline) && !memcmp(cmdline, HELPER_TARGET, sizeof(cmdline));
}

static int run(int argc, char **argv) {
  if (!inside_sandbox() || (argc == 2 && same(argv[1], "pause") && sys_getpid() != 1)) {
    const char *parts[] = {"cordon-gvisor-exec: runs only inside a cordon gvisor sandbox\n", NULL};
    say(parts);
    return 125;
  }
  if (argc == 2 && same(argv[1], "pause")) {
    /* pid 1 of the sandbox: reap what is orphaned to it. SIGCHLD must be caught (not ignored,
     * pid 1's default) for pause to return when one arrives. */
    catch_signal(SIGCHLD, on_child);
    /* It writes nothing: no host file of runsc's (its log is the detached sandbox's stderr) stays
     * open for /proc/1/fd to show. */
    stdio_to_null();
    for (;;)
      if (sys_wait(-1, NULL, WNOHANG) <= 0)
        sys(SYS_pause, 0, 0, 0);
  }
  if (argc < 6) {
    const char *parts[] = {
        "cordon-gvisor-exec: usage: STATUS TIMEOUT_MS CWD [--env K=V]... -- ARGV\n", NULL};
    say(parts);
    return 125;
  }
  const char *status_path = argv[1], *cwd = argv[3];
  long long timeout_ms = parse_number(argv[2]);
  /* The environment is gathered in place, over the argv slots already read (the k-th --env
   * value goes to argv[4 + k], at or before the option being read). */
  char **envp = argv + 4;
  size_t n_env = 0;
  int i = 4;
  long nproc = 0;
  long long fsize = 0;
  for (; i < argc && !same(argv[i], "--"); i += 2)
    if (same(argv[i], "--env") && i + 1 < argc)
      envp[n_env++] = argv[i + 1];
    else if (same(argv[i], "--nproc") && i + 1 < argc)
      nproc = (long)parse_number(argv[i + 1]);
    else if (same(argv[i], "--fsize") && i + 1 < argc)
      fsize = parse_number(argv[i + 1]);
  envp[n_env] = NULL;
  if (i + 1 >= argc)
    return 125;
  char **command = argv + i + 1;

  sys_prctl(PR_SET_CHILD_SUBREAPER, 1, 0);
  int report_pipe[2];
  if (sys(SYS_pipe2, report_pipe, O_CLOEXEC, 0) < 0)
    return 125;
  /* CLONE_VM | CLONE_VFORK, as posix_spawn: gVisor's ptrace platform builds a host address
   * space for every fork (a stub process), and the command's execve builds another; sharing ours
   * until the execve saves the first. We wait, suspended, until the child has exec'd or exited. */
  struct command_start start = {command, envp, cwd, nproc, fsize, report_pipe[1]};
  long child = helper_clone(start_command, command_stack + sizeof(command_stack),
                            CLONE_VM | CLONE_VFORK | SIGCHLD, &start);
  if (child < 0)
    return 125;
  sys_close(report_pipe[1]);
  int stage[2] = {0, 0};
  long got = sys_read(report_pipe[0], stage, sizeof(stage));
  sys_close(report_pipe[0]);
  /* The command runs (its execve closed the pipe): from here on the wrapper writes nothing but
   * the record, so it keeps no copy of the exec's stdio. gVisor lets every process of the
   * sandbox list /proc/PID/fd of every other and reopen what is there; the wrapper's fds are then
   * /dev/null alone, as pid 1's: its stdio pipes stay with the command, which holds them. */
  if (got == 0) {
    stdio_to_null();
    open_record(status_path);
  }

  catch_signal(SIGALRM, on_alarm); /* no SA_RESTART: wait4 returns EINTR */
  if (timeout_ms > 0) {
    struct itimerval it = {{0, 0},
                           {(time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000}};
    sys(SYS_setitimer, ITIMER_REAL, &it, 0);
  }
  int status = 0;
  int r;
  while ((r = sys_wait((int)child, &status, 0)) == -EINTR && !timed_out)
    ;
  if (timed_out) {
    kill_tree((int)child);
    report(status_path, "timeout", 0);
    return 137;
  }
  kill_tree((int)child); /* what it left running goes with it */
  if (got == (long)sizeof(stage) && stage[0] == 'u') {
    char number[24];
    const char *parts[] = {"cordon-gvisor-exec: cannot become the sandbox user: ",
                           error_text(stage[1], number), "\n", NULL};
    say(parts);
    report(status_path, "identity", stage[1]);
    return 125;
  }
  if (got == (long)sizeof(stage) && stage[0] == 'c') {
    report(status_path, "chdir", stage[1]);
    return 125;
  }
  if (got == (long)sizeof(stage) && stage[0] == 'x') {
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

/* Called by _start with the kernel's initial stack: argc, then argv. */
__attribute__((used, noreturn)) void helper_start(long *stack);
__attribute__((used, noreturn)) void helper_start(long *stack) {
  int argc = (int)stack[0];
  sys_exit(run(argc, (char **)(stack + 1)));
}
