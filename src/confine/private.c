/* The always-hidden set and the registry of projects (see private.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cordon/keys.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/private-dirs.h"
#include "base/strv.h"
#include "confine/policy.h"
#include "confine/private.h"
#include "confine/resolve.h"
#include "crypto/digest.h"

#define PROJECTS_DIR "projects"

static int projects_dir(char **out, struct cordon_error **err) {
  _cleanup_free_ char *home = NULL;
  if (private_state_home(&home, err) < 0)
    return -1;
  if (asprintf(out, "%s/" PROJECTS_DIR, home) < 0) {
    *out = NULL;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "registry of projects");
  }
  return 0;
}

/* The canonical path of an existing directory (following symlinks), or NULL. */
static char *canonical_dir(const char *path) {
  _cleanup_close_ int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  return fd < 0 ? NULL : confine_fd_path(fd);
}

int confine_projects_register(const char *state_dir, struct cordon_error **err) {
  _cleanup_free_ char *real = canonical_dir(state_dir);
  if (!real)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "state directory %s", state_dir);
  char name[CRYPTO_SHA256_HEX_LEN + 1];
  _cleanup_free_ char *dir = NULL;
  if (crypto_sha256_hex(real, strlen(real), name, err) < 0)
    return -1;
  if (projects_dir(&dir, err) < 0)
    return -1;
  _cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (dfd >= 0 && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
    return 0;
  if (dfd < 0) {
    if (fs_mkdir_p(dir, 0700, err) < 0)
      return cordon_error_prefix(err, "registry of projects");
    dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "registry of projects %s", dir);
  }
  /* A symlink is created whole or not at all, and reads back in one system call: the
   * registry is read by every sandbox plan. Never followed by cordon: the path is a name. */
  if (symlinkat(real, dfd, name) < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "registry of projects %s", dir);
  /* A new project is rare (once per .cordon/): the moment to drop the entries of deleted ones,
   * so that the registry every sandbox plan reads stays as long as the live projects, not as
   * long as every project ever made (test suites make hundreds). Best effort. */
  confine_projects_prune(NULL, NULL);
  _cleanup_close_ int sync_fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (sync_fd >= 0)
    fsync(sync_fd);
  return 0;
}

/* The path an entry names (absolute), or NULL when it is not a well-formed entry. */
static char *read_entry(int dfd, const char *name) {
  if (!crypto_is_sha256_hex(name))
    return NULL;
  char buf[PATH_MAX];
  ssize_t n = readlinkat(dfd, name, buf, sizeof(buf));
  if (n < 1 || n >= (ssize_t)sizeof(buf) || buf[0] != '/')
    return NULL;
  buf[n] = 0;
  return strdup(buf);
}

/* Call fn for every well-formed entry of the registry (a missing registry has none). */
static int projects_walk(int (*fn)(int dfd, const char *name, const char *path, void *data),
                         void *data, struct cordon_error **err) {
  _cleanup_free_ char *dir = NULL;
  if (projects_dir(&dir, err) < 0)
    return -1;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) {
    if (errno == ENOENT)
      return 0;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "registry of projects %s", dir);
  }
  DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "registry of projects %s", dir);
  }
  int r = 0;
  for (struct dirent *de; r == 0 && (de = readdir(d));) {
    if (de->d_name[0] == '.')
      continue;
    _cleanup_free_ char *path = read_entry(dfd, de->d_name);
    r = fn(dfd, de->d_name, path, data);
  }
  closedir(d);
  if (r < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "registry of projects");
  return 0;
}

/* Registry entries go in as written (real paths when registered): checked only when one lies
 * beneath a tree (confine_private_beneath), so a long registry costs one read per entry. */
static int collect_entry(int dfd, const char *name, const char *path, void *data) {
  (void)dfd, (void)name;
  return path ? strv_push(data, path) : 0;
}

/* ---- the index: the registry read in one file ---------------------------------------------
 *
 * Every sandbox plan reads the registry (one readlink per project: dozens on a machine that
 * runs test suites). The index holds the same list in one file beside it, with the directory's
 * inode and modification time when it was read: any entry made or removed since changes that
 * time, and the index is no longer used. It is written only when the directory had not changed
 * for a while before its time was read (index_quiet), so that a change made while it was read
 * cannot share the recorded time: the file system stamps a change with a clock that steps
 * coarsely (a kernel tick, or a whole second where it keeps no fractions). A cache, not a
 * record: written without fsync, and a file that does not parse is simply not used. */
#define INDEX_FILE "projects.index"
#define INDEX_MAGIC "cordon projects index 1"
/* How long the directory must have been unchanged: with fractions of a second in its time, far
 * more than a tick (1-10 ms) plus the coarse clock's lag; without, two whole seconds. (Test
 * suites on a shared host change the registry every few seconds: a two-second rule for all
 * left the index stale, and every plan walking the registry, most of the time.) */
#define INDEX_QUIET_NS (100 * 1000 * 1000ull)
#define INDEX_QUIET_WHOLE_SECONDS 2
#define INDEX_MAX_BYTES (4u << 20)

struct index_stamp {
  unsigned long long ino, sec, nsec;
  struct timespec read_at; /* CLOCK_REALTIME when the directory's time was read */
};

/* Whether a directory last changed at (sec, nsec), as read at read_at, had been quiet long
 * enough for its time to stand for its contents (see INDEX_QUIET_NS). */
bool confine_projects_index_quiet(unsigned long long sec, unsigned long long nsec,
                                  const struct timespec *read_at) {
  unsigned long long now =
      (unsigned long long)read_at->tv_sec * 1000000000ull + (unsigned long long)read_at->tv_nsec;
  unsigned long long changed = sec * 1000000000ull + nsec;
  unsigned long long quiet = nsec ? INDEX_QUIET_NS : INDEX_QUIET_WHOLE_SECONDS * 1000000000ull;
  return now >= changed && now - changed >= quiet;
}

static int registry_stamp(const char *home, struct index_stamp *stamp) {
  _cleanup_free_ char *dir = NULL;
  struct stat st;
  if (asprintf(&dir, "%s/" PROJECTS_DIR, home) < 0) {
    dir = NULL;
    return -1;
  }
  struct timespec read_at;
  clock_gettime(CLOCK_REALTIME, &read_at);
  if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
    return -1;
  *stamp =
      (struct index_stamp){(unsigned long long)st.st_ino, (unsigned long long)st.st_mtim.tv_sec,
                           (unsigned long long)st.st_mtim.tv_nsec, read_at};
  return 0;
}

/* The entries the index lists when it matches stamp, pushed onto *set: 1; 0 when it does not
 * (missing, stale, malformed: *set is left as it was); -1 out of memory. */
static int index_read(const char *home, const struct index_stamp *stamp, char ***set) {
  _cleanup_free_ char *path = NULL;
  _cleanup_free_ unsigned char *data = NULL;
  size_t length = 0;
  if (asprintf(&path, "%s/" INDEX_FILE, home) < 0) {
    path = NULL;
    return -1;
  }
  struct cordon_error *ignored = NULL;
  if (fs_read_file(path, INDEX_MAX_BYTES, &data, &length, &ignored) < 0) {
    cordon_error_free(ignored);
    return 0;
  }
  char *text = (char *)data, *line_end = strchr(text, '\n');
  struct index_stamp recorded;
  unsigned long long count = 0;
  if (!line_end ||
      sscanf(text, INDEX_MAGIC " %llu %llu %llu %llu", &recorded.ino, &recorded.sec, &recorded.nsec,
             &count) != 4 ||
      recorded.ino != stamp->ino || recorded.sec != stamp->sec || recorded.nsec != stamp->nsec)
    return 0;
  _cleanup_(strv_freep) char **entries = strv_copy(NULL);
  if (!entries)
    return -1;
  unsigned long long found = 0;
  for (char *line = line_end + 1; *line; line = line_end + 1) {
    line_end = strchr(line, '\n');
    if (!line_end || line[0] != '/' || found == count)
      return 0; /* truncated or malformed: not used */
    *line_end = 0;
    if (strv_push(&entries, line) < 0)
      return -1;
    found++;
  }
  if (found != count)
    return 0;
  for (size_t i = 0; entries[i]; i++)
    if (strv_push(set, entries[i]) < 0)
      return -1;
  return 1;
}

static void index_write(const char *home, const struct index_stamp *stamp, char *const *paths) {
  if (!confine_projects_index_quiet(stamp->sec, stamp->nsec, &stamp->read_at))
    return;
  size_t count = 0, bytes = 128;
  for (; paths && paths[count]; count++)
    bytes += strlen(paths[count]) + 1;
  if (bytes > INDEX_MAX_BYTES)
    return;
  _cleanup_free_ char *text = malloc(bytes);
  if (!text)
    return;
  size_t used = (size_t)snprintf(text, bytes, INDEX_MAGIC " %llu %llu %llu %zu\n", stamp->ino,
                                 stamp->sec, stamp->nsec, count);
  for (size_t i = 0; i < count; i++) {
    if (strchr(paths[i], '\n'))
      return; /* a path the index cannot hold: the registry stays the only copy */
    used += (size_t)snprintf(text + used, bytes - used, "%s\n", paths[i]);
  }
  _cleanup_close_ int dfd = open(home, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct cordon_error *ignored = NULL;
  if (dfd >= 0)
    fs_write_replace_at(dfd, INDEX_FILE, text, used, 0600, false, &ignored);
  cordon_error_free(ignored);
}

/* The registry's entries (paths as registered) pushed onto *set: from the index when it is
 * current, else by walking the registry (and refreshing the index). */
static int registry_entries(const char *home, char ***set, struct cordon_error **err) {
  struct index_stamp stamp = {0};
  bool stamped = registry_stamp(home, &stamp) == 0;
  if (stamped) {
    int r = index_read(home, &stamp, set);
    if (r != 0)
      return r < 0 ? cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hidden set") : 0;
  }
  _cleanup_(strv_freep) char **entries = strv_copy(NULL);
  if (!entries)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hidden set");
  if (projects_walk(collect_entry, &entries, err) < 0)
    return -1;
  if (stamped)
    index_write(home, &stamp, entries);
  for (size_t i = 0; entries[i]; i++)
    if (strv_push(set, entries[i]) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hidden set");
  return 0;
}

static int push_canonical(char ***set, const char *path) {
  char *real = canonical_dir(path);
  if (!real)
    return 0;
  for (size_t i = 0; *set && (*set)[i]; i++)
    if (strcmp((*set)[i], real) == 0) {
      free(real);
      return 0;
    }
  return strv_push_take(set, real);
}

static int prune_entry(int dfd, const char *name, const char *path, void *data) {
  struct stat st;
  if (path && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    return 0;
  if (unlinkat(dfd, name, 0) == 0)
    ++*(size_t *)data;
  return 0;
}

int confine_projects_prune(size_t *removed, struct cordon_error **err) {
  size_t n = 0;
  int r = projects_walk(prune_entry, &n, err);
  if (removed)
    *removed = n;
  return r;
}

int confine_private_set(const char *own_state_dir, char ***out, struct cordon_error **err) {
  _cleanup_(strv_freep) char **set = strv_copy(NULL);
  _cleanup_free_ char *keys = NULL, *home = NULL, *runtime = NULL;
  if (!set)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hidden set");
  cordon_key_dir(&keys, NULL);
  private_state_home(&home, NULL);
  private_runtime_dir(&runtime, NULL);
  const char *fixed[] = {keys, home, runtime, own_state_dir};
  for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
    if (fixed[i] && push_canonical(&set, fixed[i]) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hidden set");
  if (home && registry_entries(home, &set, err) < 0)
    return -1;
  *out = steal_ptr(&set);
  return 0;
}

/* path names an existing directory by its canonical name (no symlink on the way, no "."). */
static bool is_canonical_dir(const char *path) {
  _cleanup_free_ char *real = canonical_dir(path);
  return real && strcmp(real, path) == 0;
}

int confine_private_beneath(const char *const *set, const char *root, bool top, char ***out,
                            struct cordon_error **err) {
  _cleanup_(strv_freep) char **present = strv_copy(NULL);
  if (!present)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hidden set");
  size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
  for (size_t i = 0; set && set[i]; i++)
    if (confine_path_covers(root, set[i]) && set[i][rl] == '/' && set[i][rl + 1] &&
        is_canonical_dir(set[i]) && strv_push(&present, set[i]) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hidden set");
  if (top) {
    _cleanup_free_ char *path = NULL;
    struct stat st;
    if (asprintf(&path, "%s%s.cordon", root, rl ? "/" : "") < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hidden set");
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && strv_push(&present, path) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hidden set");
  }
  return confine_hidden_beneath((const char *const *)present, root, out, err);
}
