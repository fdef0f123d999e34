/* The floor under a cold `cordon run -- true`: the least a program must do on this machine to
 * run a command under the policy bench/startup gives bwrap, with nothing of cordon's (no
 * session, no state or events, no workspace of its own, no seccomp filter, no hidden set, no
 * checks beyond a failed call's exit). Linked statically, so that its own start is as cheap as
 * a program's can be; it borrows cordon's cheapest known shapes (the network namespace made by
 * a helper beside the root's mounts, pid 1 reporting the command's status and exiting without
 * making the caller wait for the namespaces' teardown). Built and run by `bench/startup
 * --floor`.
 *
 *   startup-floor WORKSPACE COMMAND [ARG...]
 *
 * Exits with the command's status, or 125 when a step fails (the step named on stderr). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Where the root is built: a tmpfs mounted on /tmp in our own mount namespace (nothing made on
 * the host), the new root itself. */
#define ROOT "/tmp"

static char **command;
static const char *workspace;
static int go[2], status_pipe[2];
static char helper_stack[64 * 1024] __attribute__((aligned(16)));
static volatile int net_fd = -1;

static _Noreturn void die(const char *what) {
  fprintf(stderr, "startup-floor: %s: %s\n", what, strerror(errno));
  _exit(125);
}

static void write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
    die(path);
  close(fd);
}

static void bind_ro(const char *source, const char *target, unsigned long more) {
  if (mount(source, target, NULL, MS_BIND | MS_REC, NULL) < 0 ||
      mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | more, NULL) < 0)
    die(target);
}

/* bwrap --dev: a tmpfs with the usual nodes bound from the host, and its links. */
static void make_dev(void) {
  static const char *const nodes[] = {"null", "zero", "full", "random", "urandom", "tty"};
  if (mount("tmpfs", ROOT "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755") < 0)
    die("/dev");
  char host[64], inside[64];
  for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
    snprintf(host, sizeof(host), "/dev/%s", nodes[i]);
    snprintf(inside, sizeof(inside), ROOT "/dev/%s", nodes[i]);
    int fd = open(inside, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
    if (fd < 0)
      die(inside);
    close(fd);
    if (mount(host, inside, NULL, MS_BIND, NULL) < 0)
      die(inside);
  }
  if (symlink("/proc/self/fd", ROOT "/dev/fd") < 0 ||
      symlink("/proc/self/fd/0", ROOT "/dev/stdin") < 0 ||
      symlink("/proc/self/fd/1", ROOT "/dev/stdout") < 0 ||
      symlink("/proc/self/fd/2", ROOT "/dev/stderr") < 0)
    die("/dev's links");
}

/* The helper: a network namespace with lo up, handed over as an fd (shared fd table). */
static int net_helper(void *arg) {
  (void)arg;
  struct ifreq ifr = {0};
  memcpy(ifr.ifr_name, "lo", 3);
  int sock;
  if (unshare(CLONE_NEWNET) < 0 || (sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0 ||
      ioctl(sock, SIOCGIFFLAGS, &ifr) < 0)
    _exit(1);
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (ioctl(sock, SIOCSIFFLAGS, &ifr) < 0)
    _exit(1);
  net_fd = ioctl(sock, 0x894C /* SIOCGSKNS */);
  _exit(net_fd < 0);
}

static _Noreturn void command_main(void) {
  if (chdir("/workspace") < 0)
    die("chdir");
  execvp(command[0], command);
  die(command[0]);
}

static _Noreturn void pid1(void) {
  char c;
  if (read(go[0], &c, 1) != 1)
    _exit(125);
  pid_t helper = clone(net_helper, helper_stack + sizeof(helper_stack),
                       CLONE_VM | CLONE_FILES | SIGCHLD, NULL);
  if (helper < 0)
    die("the network helper");
  /* Opened in our mount namespace (a bind's source must be of it), before /tmp is covered. */
  int workspace_fd = open(workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (workspace_fd < 0)
    die(workspace);
  if (mount(NULL, "/", NULL, MS_SLAVE | MS_REC, NULL) < 0 ||
      mount("tmpfs", ROOT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0)
    die("the root");
  static const char *const dirs[] = {ROOT "/usr", ROOT "/etc", ROOT "/workspace", ROOT "/proc",
                                     ROOT "/dev", ROOT "/tmp", ROOT "/opt"};
  for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
    if (mkdir(dirs[i], 0755) < 0)
      die(dirs[i]);
  if (symlink("usr/bin", ROOT "/bin") < 0 || symlink("usr/sbin", ROOT "/sbin") < 0 ||
      symlink("usr/lib", ROOT "/lib") < 0 || symlink("usr/lib64", ROOT "/lib64") < 0)
    die("the /usr links");
  bind_ro("/usr", ROOT "/usr", MS_NOSUID | MS_NODEV);
  bind_ro("/etc", ROOT "/etc", MS_NOSUID | MS_NODEV);
  if (access("/opt", F_OK) == 0)
    bind_ro("/opt", ROOT "/opt", MS_NOSUID | MS_NODEV);
  char source[64];
  snprintf(source, sizeof(source), "/proc/self/fd/%d", workspace_fd);
  if (mount(source, ROOT "/workspace", NULL, MS_BIND, NULL) < 0)
    die("the workspace");
  if (mount("proc", ROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    die("/proc");
  make_dev();
  if (mount("tmpfs", ROOT "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") < 0)
    die("/tmp");
  if (chdir(ROOT) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 ||
      chdir("/") < 0)
    die("pivot_root");
  if (waitpid(helper, NULL, 0) != helper || net_fd < 0 || setns(net_fd, CLONE_NEWNET) < 0)
    die("the network namespace");
  close(net_fd);
  pid_t child = fork();
  if (child < 0)
    die("fork");
  if (child == 0)
    command_main();
  int status;
  while (waitpid(child, &status, 0) < 0)
    if (errno != EINTR)
      die("waitpid");
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  unsigned char byte = (unsigned char)code;
  if (write(status_pipe[1], &byte, 1) != 1)
    _exit(125);
  _exit(0);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: startup-floor WORKSPACE COMMAND [ARG...]\n");
    return 2;
  }
  workspace = argv[1];
  command = argv + 2;
  if (pipe2(go, O_CLOEXEC) < 0 || pipe2(status_pipe, O_CLOEXEC) < 0)
    die("pipe");
  pid_t pid = (pid_t)syscall(SYS_clone,
                             CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
                                 CLONE_NEWUTS | CLONE_NEWCGROUP | SIGCHLD,
                             NULL, NULL, NULL, NULL);
  if (pid < 0)
    die("clone");
  if (pid == 0)
    pid1();
  char path[64], map[64];
  snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)getuid());
  snprintf(path, sizeof(path), "/proc/%d/uid_map", pid);
  write_file(path, map);
  snprintf(path, sizeof(path), "/proc/%d/setgroups", pid);
  write_file(path, "deny\n");
  snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)getgid());
  snprintf(path, sizeof(path), "/proc/%d/gid_map", pid);
  write_file(path, map);
  close(go[0]);
  close(status_pipe[1]);
  if (write(go[1], "G", 1) != 1)
    die("go");
  unsigned char code;
  if (read(status_pipe[0], &code, 1) != 1)
    return 125;
  return code; /* pid 1 ends, and the namespaces with it, without us waiting */
}
