/* The process runner: runs argv with captured, bounded stdout/stderr, stdin bytes, a final
 * environment, a working directory and a timeout that kills the command's whole process tree.
 *
 * exec_run_with() owns the pipes and one poll() loop (stdin writes and both captures progress
 * together, so no pipe can fill up and deadlock us); a launcher owns process creation. The
 * default host launcher vforks into a new process group and, when it can, into a per-exec
 * cgroup v2 leaf, so that "kill the tree" also reaches daemonised grandchildren (setsid); the
 * child is born in that leaf (clone3 CLONE_INTO_CGROUP), so no exec pays a cgroup migration. It
 * changes no process-global state of the caller: no SIGCHLD handler, no subreaper, no
 * process-wide signal disposition; it is safe to run several commands from several threads. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/close_range.h>
#include <linux/magic.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/clone-run.h"
#include "base/fs.h"
#include "base/strv.h"
#include "base/syscalls.h"
#include "exec/runner.h"

#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
#define READ_CHUNK 65536
/* After the command ended and its tree was killed, how long we keep reading output: enough
 * for what is still buffered in the pipes, short enough that an escaped process that holds a
 * pipe open cannot hang us. */
#define DRAIN_GRACE 0.2
/* While waiting for a killed command to end, repeat the kill this often (kill_tree is
 * idempotent; a launcher's first attempt may have raced with a fork). */
#define KILL_REPEAT_INTERVAL 1.0
/* How often a wait looks at cordon_interrupted() (ms). */
#define INTERRUPT_CHECK_MS 200
/* How long kill_tree waits for a killed cgroup to empty. */
#define CGROUP_EMPTY_WAIT 1.0

void cordon_exec_result_clear(struct cordon_exec_result *res) {
  if (!res)
    return;
  free(res->stdout_data);
  free(res->stderr_data);
  memset(res, 0, sizeof(*res));
}

/* ---- small helpers ----------------------------------------------------------------------- */

/* poll() timeout in ms until the monotonic time `until` (rounded up, so we never spin). */
static int ms_until(double until, double now) {
  double ms = (until - now) * 1000.0;
  if (ms <= 0)
    return 0;
  if (ms >= (double)INT_MAX)
    return INT_MAX;
  return (int)ms + 1;
}

static void sleep_briefly(int ms) {
  /* poll() as a sleep: an EINTR just ends the nap early, which every caller tolerates. */
  poll(NULL, 0, ms);
}

/* Writing to a pipe whose reader is gone raises SIGPIPE, which by default kills the caller.
 * Ignoring SIGPIPE is process-global, so instead block it in this thread for the write and
 * swallow the instance the write raised (unless one was already pending: that one is not
 * ours). EPIPE is then reported as an ordinary error. */
static ssize_t write_without_sigpipe(int fd, const void *buf, size_t length) {
  sigset_t pipe_set, old_mask, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
  bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
  ssize_t n;
  do
    n = write(fd, buf, length);
  while (n < 0 && errno == EINTR);
  int saved = errno;
  if (n < 0 && saved == EPIPE && !was_pending) {
    static const struct timespec no_wait = {0, 0};
    while (sigtimedwait(&pipe_set, NULL, &no_wait) < 0 && errno == EINTR)
      ;
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
  errno = saved;
  return n;
}

/* ---- PATH lookup ------------------------------------------------------------------------- */

char *exec_find_program(const char *argv0, const char *const *envp) {
  if (!argv0 || !*argv0) {
    errno = ENOENT;
    return NULL;
  }
  if (strchr(argv0, '/')) {
    char *copy = strdup(argv0);
    if (!copy)
      errno = ENOMEM;
    return copy;
  }
  const char *path = strv_env_get(envp, "PATH");
  if (!path)
    path = DEFAULT_PATH;
  size_t name_length = strlen(argv0);
  bool denied = false;
  for (const char *entry = path;;) {
    const char *end = strchrnul(entry, ':');
    size_t dir_length = (size_t)(end - entry);
    /* Empty and relative entries would resolve against our cwd, not the command's: skip. */
    if (dir_length > 0 && entry[0] == '/') {
      char *candidate = malloc(dir_length + 1 + name_length + 1);
      if (!candidate) {
        errno = ENOMEM;
        return NULL;
      }
      memcpy(candidate, entry, dir_length);
      candidate[dir_length] = '/';
      memcpy(candidate + dir_length + 1, argv0, name_length + 1);
      struct stat st;
      if (stat(candidate, &st) == 0 && !S_ISDIR(st.st_mode)) {
        if (S_ISREG(st.st_mode) && faccessat(AT_FDCWD, candidate, X_OK, AT_EACCESS) == 0)
          return candidate;
        /* Like execvp: remember it, a later entry may still have an executable one. */
        denied = true;
      }
      free(candidate);
    }
    if (!*end)
      break;
    entry = end + 1;
  }
  errno = denied ? EACCES : ENOENT;
  return NULL;
}

/* ---- bounded capture --------------------------------------------------------------------- */

struct capture {
  int fd; /* our read end; -1 once at EOF (or abandoned after the drain grace) */
  unsigned char *data;
  size_t length, capacity, limit;
  uint64_t total;
  bool truncated;
};

/* Keep what fits under the bound, count everything: reading continues past the bound so the
 * command never blocks on a full pipe. */
static int capture_append(struct capture *c, const unsigned char *bytes, size_t n) {
  c->total += n;
  size_t room = c->limit - c->length;
  size_t keep = n < room ? n : room;
  if (keep < n)
    c->truncated = true;
  if (keep == 0)
    return 0;
  size_t needed = c->length + keep + 1; /* + the terminating NUL */
  if (needed > c->capacity) {
    size_t capacity = c->capacity ? c->capacity : 4096;
    while (capacity < needed)
      capacity = capacity > SIZE_MAX / 2 ? needed : capacity * 2;
    if (capacity > c->limit + 1)
      capacity = c->limit + 1;
    unsigned char *grown = realloc(c->data, capacity);
    if (!grown)
      return -1;
    c->data = grown;
    c->capacity = capacity;
  }
  memcpy(c->data + c->length, bytes, keep);
  c->length += keep;
  return 0;
}

/* Hand the NUL-terminated buffer over (never NULL, even when empty). */
static int capture_take(struct capture *c, unsigned char **data, size_t *length) {
  if (!c->data) {
    c->data = malloc(1);
    if (!c->data)
      return -1;
  }
  c->data[c->length] = '\0';
  *data = steal_ptr(&c->data);
  *length = c->length;
  return 0;
}

/* ---- the event loop ---------------------------------------------------------------------- */

struct run {
  const struct exec_launcher *launcher;
  int stdin_fd; /* our write end; -1 when there is nothing (more) to write */
  const unsigned char *stdin_next;
  size_t stdin_left;
  struct capture out, err;
  int exit_fd;
  struct exec_early_end *early_end; /* NULL unless honoured (exec_early_end) */
  bool ended;
  bool timed_out;
};

static void run_release(struct run *run) {
  fs_close_reset(&run->stdin_fd);
  fs_close_reset(&run->out.fd);
  fs_close_reset(&run->err.fd);
  fs_close_reset(&run->exit_fd);
  free(run->out.data);
  free(run->err.data);
}

static void write_stdin(struct run *run) {
  size_t chunk = run->stdin_left < READ_CHUNK ? run->stdin_left : READ_CHUNK;
  ssize_t n = write_without_sigpipe(run->stdin_fd, run->stdin_next, chunk);
  if (n < 0) {
    if (errno == EAGAIN)
      return;
    /* EPIPE: the command closed its stdin (or ended) without reading everything; that is its
     * choice, not our failure. Any other error likewise just ends the input. */
    fs_close_reset(&run->stdin_fd);
    return;
  }
  run->stdin_next += n;
  run->stdin_left -= (size_t)n;
  if (run->stdin_left == 0)
    fs_close_reset(&run->stdin_fd); /* EOF for the command */
}

static int read_capture(struct capture *c, struct cordon_error **err) {
  unsigned char chunk[READ_CHUNK];
  ssize_t n;
  do
    n = read(c->fd, chunk, sizeof(chunk));
  while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EAGAIN)
      return 0;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot read the command's output");
  }
  if (n == 0) {
    fs_close_reset(&c->fd);
    return 0;
  }
  if (capture_append(c, chunk, (size_t)n) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "cannot store the command's output");
  return 0;
}

/* Marks the command ended and removes whatever it left running; from now on the outputs are
 * drained until EOF or the grace period ends. */
static void run_command_ended(struct run *run) {
  run->ended = true;
  fs_close_reset(&run->exit_fd);
  fs_close_reset(&run->stdin_fd);
  run->launcher->kill_tree(run->launcher->data);
}

static int run_loop(struct run *run, double timeout, struct cordon_error **err) {
  double now = fs_now();
  double deadline = timeout > 0 ? now + timeout : 0;
  double next_kill = 0, drain_until = 0;
  for (;;) {
    if (run->ended && (run->out.fd < 0 && run->err.fd < 0))
      return 0;
    if (run->ended && now >= drain_until) {
      /* Something that escaped the kill still holds a pipe: stop waiting for it. */
      fs_close_reset(&run->out.fd);
      fs_close_reset(&run->err.fd);
      return 0;
    }

    struct pollfd pfds[5];
    int count = 0, in_at = -1, out_at = -1, err_at = -1, exit_at = -1, early_at = -1;
    if (run->stdin_fd >= 0) {
      in_at = count;
      pfds[count++] = (struct pollfd){.fd = run->stdin_fd, .events = POLLOUT};
    }
    if (run->out.fd >= 0) {
      out_at = count;
      pfds[count++] = (struct pollfd){.fd = run->out.fd, .events = POLLIN};
    }
    if (run->err.fd >= 0) {
      err_at = count;
      pfds[count++] = (struct pollfd){.fd = run->err.fd, .events = POLLIN};
    }
    if (run->exit_fd >= 0) {
      exit_at = count;
      pfds[count++] = (struct pollfd){.fd = run->exit_fd, .events = POLLIN};
    }
    if (run->early_end && !run->ended && !run->timed_out) {
      early_at = count;
      pfds[count++] = (struct pollfd){.fd = run->early_end->fd, .events = POLLIN};
    }

    int wait_ms = -1;
    if (run->ended)
      wait_ms = ms_until(drain_until, now);
    else if (run->timed_out)
      wait_ms = ms_until(next_kill, now);
    else if (deadline > 0)
      wait_ms = ms_until(deadline, now);
    /* The signal that interrupts us may go to another thread: look at the flag now and then. */
    if (wait_ms < 0 || wait_ms > INTERRUPT_CHECK_MS)
      wait_ms = INTERRUPT_CHECK_MS;

    int ready = poll(pfds, (nfds_t)count, wait_ms);
    if (ready < 0 && errno != EINTR)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "poll");
    if (!run->ended && cordon_interrupted())
      return cordon_error_set(err, CORDON_ERR_INTERRUPTED, 0, "interrupted");
    now = fs_now();
    if (ready > 0) {
      if (in_at >= 0 && pfds[in_at].revents)
        write_stdin(run);
      if (out_at >= 0 && pfds[out_at].revents && read_capture(&run->out, err) < 0)
        return -1;
      if (err_at >= 0 && pfds[err_at].revents && read_capture(&run->err, err) < 0)
        return -1;
      bool work_over =
          early_at >= 0 && pfds[early_at].revents && run->early_end->check(run->early_end->data);
      if (work_over)
        run->early_end->ended_early = true;
      if ((exit_at >= 0 && pfds[exit_at].revents) || work_over) {
        run_command_ended(run);
        now = fs_now();
        drain_until = now + DRAIN_GRACE;
        continue;
      }
    }

    if (run->ended)
      continue;
    if (!run->timed_out && deadline > 0 && now >= deadline) {
      run->timed_out = true;
      run->launcher->kill_tree(run->launcher->data);
      now = fs_now();
      next_kill = now + KILL_REPEAT_INTERVAL;
    } else if (run->timed_out && now >= next_kill) {
      run->launcher->kill_tree(run->launcher->data);
      now = fs_now();
      next_kill = now + KILL_REPEAT_INTERVAL;
    }
  }
}

/* After a failure in the loop: kill the command and wait until it has ended, so that reap
 * cannot block and nothing is left behind. */
static void run_abort(struct run *run) {
  const struct exec_launcher *launcher = run->launcher;
  launcher->kill_tree(launcher->data);
  while (run->exit_fd >= 0) {
    struct pollfd pfd = {.fd = run->exit_fd, .events = POLLIN};
    int ready = poll(&pfd, 1, (int)(KILL_REPEAT_INTERVAL * 1000));
    if (ready > 0 || (ready < 0 && errno != EINTR))
      break;
    if (ready == 0)
      launcher->kill_tree(launcher->data);
  }
  fs_close_reset(&run->exit_fd);
  launcher->kill_tree(launcher->data);
}

static int open_stdin(const struct exec_spec *spec, int *child_fd, int *parent_fd,
                      struct cordon_error **err) {
  if (!spec->stdin_data) {
    *child_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (*child_fd >= 0)
      return 0;
    /* No /dev/null (a bare chroot): an empty pipe reads as EOF just the same. */
  }
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create the stdin pipe");
  *child_fd = p[0];
  if (!spec->stdin_data || spec->stdin_length == 0) {
    close(p[1]);
    return 0;
  }
  /* Only our end is non-blocking: the command's end is a separate open file description. */
  if (fs_set_nonblocking(p[1]) < 0) {
    int e = errno;
    close(p[1]);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "cannot set up the stdin pipe");
  }
  *parent_fd = p[1];
  return 0;
}

static int open_capture(struct capture *c, int *child_fd, const char *name,
                        struct cordon_error **err) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create the %s pipe", name);
  c->fd = p[0];
  *child_fd = p[1];
  if (fs_set_nonblocking(c->fd) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot set up the %s pipe", name);
  return 0;
}

/* Streaming: the command writes to the caller's own fds (our duplicates, so that the launcher
 * may close what it is given), and nothing is captured: the loop then only waits for the end. */
static int open_caller_fds(const struct exec_spec *spec, int child_fds[3], int *stdin_parent,
                           struct cordon_error **err) {
  static const char *const names[] = {"stdin", "stdout", "stderr"};
  for (int i = 0; i < 3; i++) {
    if (i == 0 && spec->caller_fds[0] < 0) {
      if (open_stdin(spec, &child_fds[0], stdin_parent, err) < 0)
        return -1;
      continue;
    }
    child_fds[i] = fcntl(spec->caller_fds[i], F_DUPFD_CLOEXEC, 3);
    if (child_fds[i] < 0)
      return cordon_error_set(err, CORDON_ERR_USAGE, errno, "cannot use the caller's %s", names[i]);
  }
  return 0;
}

static void close_child_fds(int (*fds)[3]) {
  for (int i = 0; i < 3; i++)
    fs_close_reset(&(*fds)[i]);
}

static int run_launched(const struct exec_spec *spec, const struct exec_launcher *launcher,
                        struct cordon_exec_result *res, struct cordon_error **err) {
  if (!spec || !spec->argv || !spec->argv[0])
    return cordon_error_set(err, CORDON_ERR_USAGE, EINVAL, "exec: empty argv");
  if (!launcher->start || !launcher->reap || !launcher->kill_tree)
    return cordon_error_set(err, CORDON_ERR_USAGE, EINVAL, "exec: incomplete launcher");

  size_t limit = spec->max_output ? spec->max_output : CORDON_EXEC_DEFAULT_MAX_OUTPUT;
  if (limit > SIZE_MAX - 1)
    limit = SIZE_MAX - 1; /* room for the NUL */
  _cleanup_(run_release) struct run run = {
      .launcher = launcher,
      .stdin_fd = -1,
      .stdin_next = spec->stdin_data,
      .stdin_left = spec->stdin_data ? spec->stdin_length : 0,
      .out = {.fd = -1, .limit = limit},
      .err = {.fd = -1, .limit = limit},
      .exit_fd = -1,
  };
  if (spec->early_end)
    spec->early_end->ended_early = false;
  _cleanup_(close_child_fds) int child_fds[3] = {-1, -1, -1};
  if (spec->caller_fds) {
    if (open_caller_fds(spec, child_fds, &run.stdin_fd, err) < 0)
      return -1;
  } else if (open_stdin(spec, &child_fds[0], &run.stdin_fd, err) < 0 ||
             open_capture(&run.out, &child_fds[1], "stdout", err) < 0 ||
             open_capture(&run.err, &child_fds[2], "stderr", err) < 0) {
    return -1;
  }

  double started = fs_now();
  if (launcher->start(launcher->data, spec, child_fds, &run.exit_fd, err) < 0)
    return -1;
  /* The command holds its own copies now; ours would keep EOF from ever arriving. */
  close_child_fds(&child_fds);
  if (spec->early_end && launcher->kills_whole_tree && launcher->kills_whole_tree(launcher->data))
    run.early_end = spec->early_end;

  int r;
  if (run.exit_fd < 0) {
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, EINVAL, "exec: the launcher gave no exit fd");
    launcher->kill_tree(launcher->data);
  } else {
    r = run_loop(&run, spec->timeout, err);
    if (r < 0)
      run_abort(&run);
  }

  int exit_code = 0, term_signal = 0;
  int reaped = launcher->reap(launcher->data, &exit_code, &term_signal, r < 0 ? NULL : err);
  if (r < 0 || reaped < 0)
    return r < 0 ? r : reaped;

  if (capture_take(&run.out, &res->stdout_data, &res->stdout_length) < 0 ||
      capture_take(&run.err, &res->stderr_data, &res->stderr_length) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "cannot store the command's output");
  res->exit_code = exit_code;
  res->term_signal = term_signal;
  res->timed_out = run.timed_out;
  res->stdout_total = run.out.total;
  res->stdout_truncated = run.out.truncated;
  res->stderr_total = run.err.total;
  res->stderr_truncated = run.err.truncated;
  res->duration = fs_now() - started;
  return 0;
}

int exec_run_with(const struct exec_spec *spec, const struct exec_launcher *launcher,
                  struct cordon_exec_result *res, struct cordon_error **err) {
  if (res)
    memset(res, 0, sizeof(*res));
  if (!res || !launcher)
    return cordon_error_set(err, CORDON_ERR_USAGE, EINVAL, "exec: missing result or launcher");
  int r = run_launched(spec, launcher, res, err);
  if (launcher->cleanup)
    launcher->cleanup(launcher->data);
  if (r < 0)
    cordon_exec_result_clear(res);
  return r;
}

/* ---- the default host launcher: cgroup v2 leaf ------------------------------------------- */

/* The v2 hierarchy: /sys/fs/cgroup on a unified layout, /sys/fs/cgroup/unified on a hybrid
 * one. NULL when there is none. */
static const char *cgroup2_mount(void) {
  static const char *const candidates[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
  for (size_t i = 0; i < ARRAY_SIZE(candidates); i++) {
    struct statfs sfs;
    if (statfs(candidates[i], &sfs) == 0 && sfs.f_type == CGROUP2_SUPER_MAGIC)
      return candidates[i];
  }
  return NULL;
}

/* Our own v2 cgroup: the "0::" line of /proc/self/cgroup (read each time: we may be moved). */
static char *own_cgroup2(void) {
  _cleanup_free_ unsigned char *text = NULL;
  size_t length = 0;
  if (fs_read_file("/proc/self/cgroup", 1 << 16, &text, &length, NULL) < 0)
    return NULL;
  for (char *line = (char *)text; line && *line;) {
    char *next = strchr(line, '\n');
    if (next)
      *next++ = '\0';
    if (strncmp(line, "0::/", 4) == 0)
      return strdup(line + 3);
    line = next;
  }
  return NULL;
}

static bool path_exists_at(const char *dir, const char *name) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "%s/%s", dir, name) < 0)
    return false;
  return access(path, F_OK) == 0;
}

/* Make a fresh leaf "cordon-exec-<random>" under our own cgroup. Best effort: NULL when it
 * cannot be made (no v2 hierarchy, not permitted, read-only, no cgroup.kill), in which case
 * the process group alone bounds the tree (documented). */
static char *cgroup_leaf_create(void) {
  const char *mount = cgroup2_mount();
  if (!mount)
    return NULL;
  _cleanup_free_ char *own = own_cgroup2();
  _cleanup_free_ char *suffix = NULL;
  if (!own || fs_random_hex(8, &suffix, NULL) < 0)
    return NULL;
  char *leaf = NULL;
  if (asprintf(&leaf, "%s%s%scordon-exec-%s", mount, own, own[strlen(own) - 1] == '/' ? "" : "/",
               suffix) < 0)
    return NULL;
  if (mkdir(leaf, 0755) < 0) {
    free(leaf);
    return NULL;
  }
  /* Without cgroup.kill (kernels before 5.14) the leaf could not kill anything. */
  if (!path_exists_at(leaf, "cgroup.kill")) {
    rmdir(leaf);
    free(leaf);
    return NULL;
  }
  return leaf;
}

static int open_at_path(const char *dir, const char *name, int flags) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "%s/%s", dir, name) < 0) {
    errno = ENOMEM;
    return -1;
  }
  return open(path, flags | O_CLOEXEC);
}

static bool cgroup_is_empty(int events_fd) {
  char buf[256];
  ssize_t n;
  do
    n = pread(events_fd, buf, sizeof(buf) - 1, 0);
  while (n < 0 && errno == EINTR);
  if (n <= 0)
    return true; /* the leaf is gone: nothing can be left in it */
  buf[n] = '\0';
  const char *populated = strstr(buf, "populated ");
  return !populated || populated[strlen("populated ")] == '0';
}

/* Kill everything in the leaf at once (no wait). */
static void cgroup_leaf_kill_send(const char *leaf) {
  _cleanup_close_ int kill_fd = open_at_path(leaf, "cgroup.kill", O_WRONLY);
  if (kill_fd >= 0) {
    ssize_t n;
    do
      n = write(kill_fd, "1", 1);
    while (n < 0 && errno == EINTR);
  }
}

/* Wait (bounded) until the kernel says the leaf is empty. */
static void cgroup_leaf_wait_empty(const char *leaf) {
  _cleanup_close_ int events_fd = open_at_path(leaf, "cgroup.events", O_RDONLY);
  if (events_fd < 0)
    return;
  double until = fs_now() + CGROUP_EMPTY_WAIT;
  while (!cgroup_is_empty(events_fd)) {
    double now = fs_now();
    if (now >= until)
      return;
    /* cgroup.events signals a change with POLLPRI; the short cap covers a missed one. */
    int wait_ms = ms_until(until, now);
    struct pollfd pfd = {.fd = events_fd, .events = POLLPRI};
    poll(&pfd, 1, wait_ms < 20 ? wait_ms : 20);
  }
}

/* Kill everything in the leaf and wait (bounded) until the kernel says it is empty. */
static void cgroup_leaf_kill(const char *leaf) {
  cgroup_leaf_kill_send(leaf);
  cgroup_leaf_wait_empty(leaf);
}

static void cgroup_leaf_remove(const char *leaf) {
  /* Exiting processes may keep the leaf busy for a moment after it reads as empty. */
  for (int attempt = 0; attempt < 50; attempt++) {
    if (rmdir(leaf) == 0 || errno == ENOENT)
      return;
    if (errno != EBUSY)
      return;
    cgroup_leaf_kill(leaf);
    sleep_briefly(10);
  }
}

/* ---- the default host launcher: process ---------------------------------------------------- */

struct host_launcher {
  pid_t pid; /* 0 before start */
  int pidfd;
  bool reaped;
  char *cgroup_leaf; /* NULL: process group only */
  int exec_failure;  /* 126/127 when the child reported that its execve failed */
};

/* What the child reports through the CLOEXEC pipe when it fails before or at execve (EOF
 * alone means execve succeeded). */
enum child_stage { CHILD_STAGE_STDIO = 1, CHILD_STAGE_CHDIR, CHILD_STAGE_EXEC };
struct child_report {
  int stage;
  int errnum;
};

/* Everything the child needs, prepared before vfork: between vfork and execve the child may
 * only make async-signal-safe calls (no malloc: the caller may be multithreaded) and must not
 * write to memory it shares with the caller (only its own stack frames). */
struct child_plan {
  const char *program; /* NULL: the PATH lookup failed with lookup_errno */
  int lookup_errno;
  char *const *argv;
  char *const *envp;
  const char *cwd;
  int stdio_fds[3];
  int report_fd;
  int procs_fd; /* the leaf's cgroup.procs to join, or -1 (none, or born in the leaf) */
  int max_fd;   /* for the close loop when close_range is missing */
  bool tty;     /* setsid and take fd 0 as the controlling terminal */
};

/* The child's code runs on a stack of its own (spawn_child) and is not instrumented by ASan:
 * it would take the child's _exit for a jump off an unknown stack and warn on the command's
 * stderr. */
#define CHILD_CODE __attribute__((no_sanitize_address))

CHILD_CODE static _Noreturn void child_fail(int report_fd, int stage, int errnum, int exit_code) {
  struct child_report report = {.stage = stage, .errnum = errnum};
  ssize_t n;
  do
    n = write(report_fd, &report, sizeof(report));
  while (n < 0 && errno == EINTR);
  _exit(exit_code);
}

CHILD_CODE static int exec_failure_code(int errnum) {
  return errnum == ENOENT ? 127 : 126;
}

CHILD_CODE static _Noreturn void child_run(const struct child_plan *plan) {
  /* Born in the leaf (clone3 CLONE_INTO_CGROUP), or else join it first, so that everything the
   * command starts is in it. A failure leaves us with the process group alone, as when no leaf
   * could be made. */
  if (plan->procs_fd >= 0) {
    ssize_t n;
    do
      n = write(plan->procs_fd, "0", 1);
    while (n < 0 && errno == EINTR);
  }
  /* A command on a terminal leads a session of its own, so that the terminal can become its
   * controlling one (below); its process group is then its pid, as with setpgid. */
  if (plan->tty)
    setsid();
  else
    setpgid(0, 0);
  /* Commands start with umask 022 whatever the caller's, as in every sandbox: the same command
   * makes the same tree (and snapshot ids) under any caller. vfork shares no fs_struct, so the
   * caller's own umask is untouched. */
  umask(022);

  /* Dispositions: handlers are reset by execve anyway, but SIG_IGN would be inherited. The
   * mask stays full (set by the parent) until just before execve, so no signal runs a
   * handler of the caller in the child, which shares the caller's memory. */
  for (int sig = 1; sig < NSIG; sig++) {
    struct sigaction sa = {.sa_handler = SIG_DFL};
    sigaction(sig, &sa, NULL); /* SIGKILL, SIGSTOP and libc-internal ones refuse: fine */
  }

  /* Move every fd we still need above 2 first: one of them may sit on 0..2 when the caller
   * runs with closed stdio, and the dup2s below would clobber it. */
  int report_fd = fcntl(plan->report_fd, F_DUPFD_CLOEXEC, 3);
  if (report_fd < 0)
    _exit(126);
  int moved[3];
  for (int i = 0; i < 3; i++) {
    moved[i] = fcntl(plan->stdio_fds[i], F_DUPFD_CLOEXEC, 3);
    if (moved[i] < 0)
      child_fail(report_fd, CHILD_STAGE_STDIO, errno, 126);
  }
  for (int i = 0; i < 3; i++)
    if (dup2(moved[i], i) < 0) /* dup2 clears FD_CLOEXEC on the target */
      child_fail(report_fd, CHILD_STAGE_STDIO, errno, 126);
  if (plan->tty && ioctl(0, TIOCSCTTY, 0) < 0)
    child_fail(report_fd, CHILD_STAGE_STDIO, errno, 126);
  /* Everything else closes at execve; the report pipe must stay open until then. */
  if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
    for (int fd = 3; fd < plan->max_fd; fd++)
      if (fd != report_fd)
        close(fd);

  if (plan->cwd && chdir(plan->cwd) < 0)
    child_fail(report_fd, CHILD_STAGE_CHDIR, errno, 126);
  if (!plan->program)
    child_fail(report_fd, CHILD_STAGE_EXEC, plan->lookup_errno,
               exec_failure_code(plan->lookup_errno));

  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, NULL);
  execve(plan->program, plan->argv, plan->envp);
  int e = errno;
  child_fail(report_fd, CHILD_STAGE_EXEC, e, exec_failure_code(e));
}

CHILD_CODE static int child_entry(void *plan) {
  child_run(plan);
}

/* The child's own stack when it is cloned into the leaf: its frames (child_run, libc's
 * sigaction, dup2, execve) take a few KiB. */
#define CHILD_STACK_SIZE (32 * 1024)

/* A vfork, born in the cgroup leaf_fd names: clone3 with CLONE_VM|CLONE_VFORK|CLONE_INTO_CGROUP
 * onto a stack of its own (a raw clone3 child cannot run on ours as vfork's does: it would
 * return through the caller's frames). Moving a task between cgroups (a write to cgroup.procs)
 * takes the kernel's cgroup_threadgroup_rwsem for writing, which waits for an RCU grace period
 * unless another migration just did: about half a millisecond per exec at the median here, a
 * few at the 90th percentile under load; a child born in the leaf takes the read side only.
 *
 * The stack is a buffer in this frame, which stays put while the child uses it (CLONE_VFORK
 * suspends us until its execve or exit): no mapping to make, fault in and unmap per exec (an
 * munmap in a threaded caller such as the server shoots down the other CPUs' TLBs). Not
 * instrumented by ASan, so the buffer is on the thread's real stack, not in a fake frame.
 * -1 with errno when the kernel or the leaf refuses it (no clone3: ENOSYS; no
 * CLONE_INTO_CGROUP: E2BIG or EINVAL; a leaf we may not enter), and no child was made. */
CHILD_CODE __attribute__((noinline)) static pid_t clone_into_leaf(const struct child_plan *plan,
                                                                  int leaf_fd) {
  _Alignas(16) unsigned char stack[CHILD_STACK_SIZE];
  return sys_clone3_run(CLONE_VM | CLONE_VFORK, leaf_fd, stack, sizeof(stack), child_entry,
                        (void *)plan);
}

/* vfork rather than fork: no page tables to copy and no copy-on-write faults, which took
 * about a third of the cost of running `true` (3.6 ms -> 2.4 ms here). The child shares our
 * memory until execve, hence the rules of child_plan; every signal stays blocked in this
 * thread meanwhile (restored right after), so none runs a handler of the caller in the child.
 * This thread is suspended until the child has called execve or exited. With leaf_fd >= 0 the
 * child is born in that cgroup (clone_into_leaf); when that is refused, a plain vfork whose
 * child joins the leaf through procs_fd (opened here, then: a rare path), which is how every
 * exec started before clone3 could do it. A function of its own so that no caller's local can be
 * clobbered across vfork. Returns the pid, or -1 with errno. */
static pid_t spawn_child(struct child_plan *plan, int leaf_fd, const char *leaf) {
  sigset_t all, old_mask;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old_mask);
  pid_t pid = leaf_fd >= 0 ? clone_into_leaf(plan, leaf_fd) : -1;
  int procs_fd = -1;
  if (pid < 0) {
    if (leaf_fd >= 0)
      procs_fd = open_at_path(leaf, "cgroup.procs", O_WRONLY);
    plan->procs_fd = procs_fd;
    pid = vfork();
    if (pid == 0)
      child_run(plan);
  }
  int saved = errno;
  if (procs_fd >= 0)
    close(procs_fd);
  plan->procs_fd = -1;
  pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
  errno = saved;
  return pid;
}

static int host_wait(struct host_launcher *h, siginfo_t *info) {
  memset(info, 0, sizeof(*info));
  int r;
  do
    r = waitid(P_PIDFD, (id_t)h->pidfd, info, WEXITED);
  while (r < 0 && errno == EINTR);
  if (r == 0)
    h->reaped = true;
  return r;
}

static void host_kill_tree(void *data) {
  struct host_launcher *h = data;
  if (h->pid <= 0)
    return;
  /* The leaf first, which also holds what left the process group (setsid daemons): one write
   * kills every process at once. Signalled first, a large tree (a gVisor sandbox: its Sentry
   * and a stub process per task) wakes up to die and takes both CPUs of a small host from us
   * for milliseconds before the write. */
  if (h->cgroup_leaf)
    cgroup_leaf_kill_send(h->cgroup_leaf);
  /* The leader is not reaped before this runs, so neither its pid nor its process group id
   * can have been reused: signalling them cannot hit a stranger. */
  if (!h->reaped) {
    if (h->pidfd >= 0)
      sys_pidfd_send_signal(h->pidfd, SIGKILL);
    kill(-h->pid, SIGKILL);
  }
  if (h->cgroup_leaf)
    cgroup_leaf_wait_empty(h->cgroup_leaf);
}

static int host_start(void *data, const struct exec_spec *spec, const int stdio_fds[3],
                      int *exit_fd, struct cordon_error **err) {
  struct host_launcher *h = data;
  const char *argv0 = spec->argv[0];

  /* Resolve before vfork (the child must not malloc). A missing or non-executable program is
   * not a start failure: the child reports it as 127/126, like a shell. */
  errno = 0;
  _cleanup_free_ char *program = exec_find_program(argv0, spec->envp);
  int lookup_errno = program ? 0 : errno;
  if (!program && lookup_errno != ENOENT && lookup_errno != EACCES)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, lookup_errno, "cannot look up %s", argv0);

  static char *const empty_env[] = {NULL};
  long open_max = sysconf(_SC_OPEN_MAX);
  h->cgroup_leaf = cgroup_leaf_create();
  /* A directory fd of the leaf, for the child to be born in. */
  _cleanup_close_ int leaf_fd =
      h->cgroup_leaf ? open(h->cgroup_leaf, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;

  int report[2];
  if (pipe2(report, O_CLOEXEC) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot start %s", argv0);
  _cleanup_close_ int report_read = report[0];
  _cleanup_close_ int report_write = report[1];

  struct child_plan plan = {
      .program = program,
      .lookup_errno = lookup_errno,
      .argv = (char *const *)spec->argv,
      .envp = spec->envp ? (char *const *)spec->envp : empty_env,
      .cwd = spec->cwd,
      .stdio_fds = {stdio_fds[0], stdio_fds[1], stdio_fds[2]},
      .report_fd = report_write,
      .procs_fd = -1,
      .max_fd = open_max > 0 && open_max < INT_MAX ? (int)open_max : 65536,
      .tty = spec->tty,
  };

  pid_t pid = spawn_child(&plan, leaf_fd, h->cgroup_leaf);
  if (pid < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot start %s", argv0);
  h->pid = pid;
  fs_close_reset(&report_write);

  /* The child is ours and unreaped, so the pid still names it. */
  h->pidfd = sys_pidfd_open(pid, 0);
  if (h->pidfd < 0) {
    int e = errno;
    /* ESRCH: already reaped behind our back (SIGCHLD ignored): the pid may name a stranger. */
    if (e != ESRCH)
      kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
      ;
    h->reaped = true;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "cannot watch %s (pidfd_open)", argv0);
  }

  /* EOF: execve succeeded; otherwise a report of why it did not happen. */
  struct child_report report_msg;
  ssize_t n;
  do
    n = read(report_read, &report_msg, sizeof(report_msg));
  while (n < 0 && errno == EINTR);
  if (n == (ssize_t)sizeof(report_msg)) {
    if (report_msg.stage == CHILD_STAGE_EXEC) {
      h->exec_failure = exec_failure_code(report_msg.errnum);
      /* Written here rather than in the child (strerror is not async-signal-safe); it lands
       * in the captured stderr before EOF since we still hold that pipe. */
      _cleanup_free_ char *line = NULL;
      int length = asprintf(&line, "cordon: %s: %s\n", argv0, strerror(report_msg.errnum));
      if (length > 0)
        write_without_sigpipe(stdio_fds[2], line, (size_t)length);
    } else {
      siginfo_t info;
      host_wait(h, &info);
      if (report_msg.stage == CHILD_STAGE_CHDIR)
        return cordon_error_set(err, CORDON_ERR_SYSTEM, report_msg.errnum, "cannot run %s in %s",
                                argv0, spec->cwd);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, report_msg.errnum,
                              "cannot set up the standard streams of %s", argv0);
    }
  }

  /* The runner closes exit_fd; we keep our pidfd for reap and kill. */
  *exit_fd = fcntl(h->pidfd, F_DUPFD_CLOEXEC, 3);
  if (*exit_fd < 0) {
    int e = errno;
    host_kill_tree(h);
    siginfo_t info;
    host_wait(h, &info);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "cannot watch %s", argv0);
  }
  return 0;
}

static bool host_kills_whole_tree(void *data) {
  const struct host_launcher *h = data;
  return h->cgroup_leaf != NULL;
}

static int host_reap(void *data, int *exit_code, int *term_signal, struct cordon_error **err) {
  struct host_launcher *h = data;
  siginfo_t info;
  if (host_wait(h, &info) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot collect process %d",
                            (int)h->pid);
  if (info.si_code == CLD_EXITED) {
    *exit_code = info.si_status & 0xff;
    *term_signal = 0;
  } else {
    *exit_code = 128 + info.si_status;
    *term_signal = info.si_status;
  }
  return 0;
}

static void host_cleanup(void *data) {
  struct host_launcher *h = data;
  if (h->pid > 0 && !h->reaped && h->pidfd >= 0) {
    /* Only on error paths: nothing may outlive the run, and no zombie either. */
    host_kill_tree(h);
    siginfo_t info;
    host_wait(h, &info);
  }
  fs_close_reset(&h->pidfd);
  if (h->cgroup_leaf) {
    cgroup_leaf_remove(h->cgroup_leaf);
    free(h->cgroup_leaf);
    h->cgroup_leaf = NULL;
  }
}

int exec_run(const struct exec_spec *spec, struct cordon_exec_result *res,
             struct cordon_error **err) {
  struct host_launcher host = {.pid = 0, .pidfd = -1};
  const struct exec_launcher launcher = {
      .data = &host,
      .start = host_start,
      .reap = host_reap,
      .kill_tree = host_kill_tree,
      .kills_whole_tree = host_kills_whole_tree,
      .cleanup = host_cleanup,
  };
  int r = exec_run_with(spec, &launcher, res, err);
  if (r == 0)
    res->exec_failure = host.exec_failure;
  return r;
}
