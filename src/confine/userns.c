/* User namespaces (see userns.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/syscalls.h"
#include "confine/policy.h"
#include "confine/userns.h"

static int write_proc_file(pid_t pid, const char *name, const char *data, size_t len,
                           struct cordon_error **err) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
  _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s", path);
  ssize_t n = write(fd, data, len);
  if (n != (ssize_t)len)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, n < 0 ? errno : EIO, "cannot write %s", path);
  return 0;
}

int confine_userns_write_maps(pid_t pid, uid_t inner_uid, uid_t outer_uid, gid_t inner_gid,
                              gid_t outer_gid, bool deny_setgroups, struct cordon_error **err) {
  char line[64];
  int n = confine_format_id_map(inner_uid, outer_uid, line, sizeof(line));
  if (n < 0 || write_proc_file(pid, "uid_map", line, (size_t)n, err) < 0)
    return cordon_error_prefix(err, "user namespace uid map");
  if (deny_setgroups && write_proc_file(pid, "setgroups", "deny", 4, err) < 0)
    return -1;
  n = confine_format_id_map(inner_gid, outer_gid, line, sizeof(line));
  if (n < 0 || write_proc_file(pid, "gid_map", line, (size_t)n, err) < 0)
    return cordon_error_prefix(err, "user namespace gid map");
  return 0;
}

/* The child only has to exist until its namespace is opened; then it is killed. It shares our
 * memory (CLONE_VM), so it makes raw system calls only. It waits for nothing we could fail to
 * deliver: an end-of-file on a pipe would never come while another thread's helper, cloned at
 * the same moment, held a copy of the write end (each would wait for the other). */
__attribute__((no_sanitize("address", "undefined"))) static int idmap_child(void *arg) {
  (void)arg;
  for (;;)
    sys_pause();
  return 0;
}

/* The helper of the last namespace made: killed, but reaped only when the next one is made.
 * Waiting for a killed process means waiting for the scheduler to run it once more, which on
 * a loaded machine costs milliseconds of a session's start for nothing: the namespace lives on
 * through its fd. Its stack stays allocated until it is reaped, since a killed process may
 * still be on its way into the kernel. Protected by idmap_cache.mu (its only caller). */
static struct {
  pid_t pid;
  char *stack;
} idmap_helper;

static void idmap_helper_reap(void) {
  if (idmap_helper.pid > 0)
    while (waitpid(idmap_helper.pid, NULL, __WALL) < 0 && errno == EINTR)
      ;
  idmap_helper.pid = 0;
  free(idmap_helper.stack);
  idmap_helper.stack = NULL;
}

static int idmap_create(uid_t from_uid, uid_t to_uid, gid_t from_gid, gid_t to_gid,
                        struct cordon_error **err) {
  const size_t stack_size = 16384;
  idmap_helper_reap();
  char *stack = malloc(stack_size);
  if (!stack)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "id-map namespace");
  /* CLONE_VM: no page tables to copy, so this costs a few microseconds. No exit signal: the
   * helper is reaped later, by pid (__WALL), and no SIGCHLD or wait of the caller's sees it. */
  pid_t pid = clone(idmap_child, stack + stack_size, CLONE_NEWUSER | CLONE_VM, NULL);
  if (pid < 0) {
    free(stack);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno,
                            "cannot create a user namespace for the id-mapped workspace");
  }
  char line[64];
  int r = 0;
  int n = confine_format_id_map(from_uid, to_uid, line, sizeof(line));
  if (n < 0 || write_proc_file(pid, "uid_map", line, (size_t)n, err) < 0)
    r = -1;
  n = confine_format_id_map(from_gid, to_gid, line, sizeof(line));
  if (r == 0 && (n < 0 || write_proc_file(pid, "gid_map", line, (size_t)n, err) < 0))
    r = -1;
  int fd = -1;
  if (r == 0) {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s", path);
  }
  kill(pid, SIGKILL);
  idmap_helper.pid = pid;
  idmap_helper.stack = stack;
  return r < 0 ? -1 : fd;
}

/* The last mapping made, kept for the life of the process: a batch of sessions (and a server)
 * id-maps every workspace the same way, and a namespace with no process in it serves any
 * number of mounts. */
static struct {
  pthread_mutex_t mu;
  int fd;
  uid_t from_uid, to_uid;
  gid_t from_gid, to_gid;
} idmap_cache = {.mu = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

int confine_userns_idmap_fd(uid_t from_uid, uid_t to_uid, gid_t from_gid, gid_t to_gid,
                            struct cordon_error **err) {
  pthread_mutex_lock(&idmap_cache.mu);
  int fd = -1;
  if (idmap_cache.fd >= 0 && idmap_cache.from_uid == from_uid && idmap_cache.to_uid == to_uid &&
      idmap_cache.from_gid == from_gid && idmap_cache.to_gid == to_gid) {
    fd = fcntl(idmap_cache.fd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
      cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "id-map namespace");
  } else {
    fd = idmap_create(from_uid, to_uid, from_gid, to_gid, err);
    int keep = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 3) : -1;
    if (keep >= 0) {
      if (idmap_cache.fd >= 0)
        close(idmap_cache.fd);
      idmap_cache.fd = keep;
      idmap_cache.from_uid = from_uid;
      idmap_cache.to_uid = to_uid;
      idmap_cache.from_gid = from_gid;
      idmap_cache.to_gid = to_gid;
    }
  }
  pthread_mutex_unlock(&idmap_cache.mu);
  return fd;
}
