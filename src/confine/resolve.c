/* Path policy, file-system half (see resolve.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/anchor.h"
#include "base/cleanup.h"
#include "base/strv.h"
#include "confine/policy.h"
#include "confine/resolve.h"

void confine_path_clear(struct confine_path *p) {
  if (!p)
    return;
  free(p->path);
  free(p->source);
  free(p->link);
  p->path = p->source = p->link = NULL;
}

void confine_paths_free(struct confine_path *paths, size_t count) {
  for (size_t i = 0; paths && i < count; i++)
    confine_path_clear(&paths[i]);
  free(paths);
}

char *confine_fd_path(int fd) {
  char link[64];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  char buf[PATH_MAX];
  ssize_t n = readlink(link, buf, sizeof(buf) - 1);
  if (n < 0)
    return NULL;
  buf[n] = 0;
  return strdup(buf);
}

static enum confine_kind kind_of(mode_t mode, bool *ok) {
  *ok = S_ISDIR(mode) || S_ISREG(mode);
  return S_ISDIR(mode) ? CONFINE_KIND_DIR : CONFINE_KIND_FILE;
}

int confine_resolve_workspace_path(int ws_fd, const char *ws_real, const char *path,
                                   const char *what, struct confine_path *out,
                                   struct cordon_error **err) {
  _cleanup_close_ int fd = anchor_open_beneath(ws_fd, path, O_PATH, 0);
  if (fd < 0) {
    int e = errno;
    if (e == EXDEV || e == ELOOP)
      return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                              "%s %s resolves outside the workspace (symlink)", what, path);
    return cordon_error_set(err, e == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_SYSTEM, e, "%s %s",
                            what, path);
  }
  struct stat st;
  if (fstat(fd, &st) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s %s", what, path);
  bool ok;
  enum confine_kind kind = kind_of(st.st_mode, &ok);
  if (!ok)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "%s %s is neither a regular file nor a directory", what, path);
  _cleanup_free_ char *real = confine_fd_path(fd);
  if (!real)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s %s", what, path);
  size_t wl = strlen(ws_real);
  if (strncmp(real, ws_real, wl) != 0 || real[wl] != '/' || !real[wl + 1])
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "%s %s resolves to the workspace root or outside it", what, path);
  out->path = strdup(real + wl + 1);
  if (!out->path)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", what);
  out->kind = kind;
  return 0;
}

int confine_resolve_host_path(const char *path, bool system, bool optional, const char *what,
                              struct confine_path *out, bool *present, struct cordon_error **err) {
  if (present)
    *present = true;
  struct stat st;
  if (lstat(path, &st) < 0) {
    if (errno == ENOENT && optional) {
      if (present)
        *present = false;
      return 0;
    }
    return cordon_error_set(err, errno == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_SYSTEM, errno,
                            "%s %s", what, path);
  }
  if (system && S_ISLNK(st.st_mode)) {
    char buf[PATH_MAX];
    ssize_t n = readlink(path, buf, sizeof(buf) - 1);
    if (n < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s %s", what, path);
    buf[n] = 0;
    out->path = strdup(path);
    out->link = strdup(buf);
    out->kind = CONFINE_KIND_SYMLINK;
    if (!out->path || !out->link)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", what);
    return 0;
  }
  char real[PATH_MAX];
  if (!realpath(path, real) || stat(real, &st) < 0) {
    if (errno == ENOENT && optional) {
      if (present)
        *present = false;
      return 0;
    }
    return cordon_error_set(err, errno == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_SYSTEM, errno,
                            "%s %s", what, path);
  }
  bool ok;
  out->kind = kind_of(st.st_mode, &ok);
  if (!ok)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "%s %s is neither a regular file nor a directory", what, path);
  out->path = strdup(path);
  out->source = strdup(real);
  if (!out->path || !out->source)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", what);
  return 0;
}

/* ---- other names of protected files --------------------------------------------------------- */

/* One name of a file with more than one link, as the walk of the protected paths finds it. */
struct link_record {
  dev_t dev;
  ino_t ino;
  nlink_t nlink;
  char *name; /* workspace-relative */
};

/* All the names found of one file. */
struct linked_inode {
  dev_t dev;
  ino_t ino;
  nlink_t nlink;
  char **names; /* NULL-terminated */
  bool search;  /* names are missing: look for them in the workspace */
};

struct link_walk {
  struct link_record *records; /* the protected paths' walk */
  size_t n_records, records_cap;
  struct linked_inode *files; /* records grouped, sorted by (dev, ino) */
  size_t n_files;
  size_t entries;
  bool known_only; /* the workspace walk: more names of the files to search only */
  bool incomplete; /* the workspace walk stopped at a bound or an unreadable directory */
};

static void link_walk_clear(struct link_walk *w) {
  for (size_t i = 0; i < w->n_records; i++)
    free(w->records[i].name);
  free(w->records);
  for (size_t i = 0; i < w->n_files; i++)
    strv_free(w->files[i].names);
  free(w->files);
}

static int compare_inode(dev_t dev_a, ino_t ino_a, dev_t dev_b, ino_t ino_b) {
  if (dev_a != dev_b)
    return dev_a < dev_b ? -1 : 1;
  if (ino_a != ino_b)
    return ino_a < ino_b ? -1 : 1;
  return 0;
}

static int compare_records(const void *a, const void *b) {
  const struct link_record *x = a, *y = b;
  int c = compare_inode(x->dev, x->ino, y->dev, y->ino);
  return c ? c : strcmp(x->name, y->name);
}

static int compare_file_key(const void *key, const void *element) {
  const struct stat *st = key;
  const struct linked_inode *f = element;
  return compare_inode(st->st_dev, st->st_ino, f->dev, f->ino);
}

static int link_walk_add(struct link_walk *w, const char *rel, const struct stat *st,
                         struct cordon_error **err) {
  if (w->known_only) {
    struct linked_inode *f = bsearch(st, w->files, w->n_files, sizeof(*f), compare_file_key);
    if (!f || !f->search)
      return 0;
    for (size_t i = 0; f->names[i]; i++)
      if (strcmp(f->names[i], rel) == 0)
        return 0; /* found by the walk of the protected paths already */
    return strv_push(&f->names, rel) < 0
               ? cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hard link check")
               : 0;
  }
  if (w->n_records == w->records_cap) {
    size_t cap = w->records_cap ? w->records_cap * 2 : 16;
    struct link_record *grown = realloc(w->records, cap * sizeof(*grown));
    if (!grown)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hard link check");
    w->records = grown;
    w->records_cap = cap;
  }
  char *name = strdup(rel);
  if (!name)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hard link check");
  w->records[w->n_records++] = (struct link_record){
      .dev = st->st_dev, .ino = st->st_ino, .nlink = st->st_nlink, .name = name};
  return 0;
}

/* Sort the records and group them by file, each name once (a hidden path under a read-only one
 * is walked twice). */
static int link_walk_group(struct link_walk *w, struct cordon_error **err) {
  if (w->n_records == 0)
    return 0;
  qsort(w->records, w->n_records, sizeof(*w->records), compare_records);
  w->files = calloc(w->n_records, sizeof(*w->files));
  if (!w->files)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hard link check");
  for (size_t i = 0; i < w->n_records; i++) {
    const struct link_record *r = &w->records[i];
    struct linked_inode *f = w->n_files ? &w->files[w->n_files - 1] : NULL;
    if (!f || compare_inode(f->dev, f->ino, r->dev, r->ino) != 0) {
      f = &w->files[w->n_files++];
      *f = (struct linked_inode){.dev = r->dev, .ino = r->ino, .nlink = r->nlink};
    } else if (strcmp(w->records[i - 1].name, r->name) == 0) {
      continue;
    }
    if (strv_push(&f->names, r->name) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hard link check");
  }
  return 0;
}

static char *join_relative(const char *dir, const char *name) {
  char *out = NULL;
  if (asprintf(&out, "%s%s%s", dir, *dir ? "/" : "", name) < 0)
    return NULL;
  return out;
}

/* Walk the directory dfd (taken over; workspace-relative name rel) and everything under it,
 * recording every file with more than one link. A protected directory that cannot be walked
 * whole is refused (`what` names it); the workspace walk (known_only) just stops, incomplete. */
static int link_walk_dir(int dfd, const char *rel, unsigned depth, struct link_walk *w,
                         const char *what, struct cordon_error **err) {
  DIR *d = fdopendir(dfd);
  if (!d) {
    int e = errno;
    close(dfd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "%s: cannot read %s", what, rel);
  }
  int r = 0;
  struct dirent *e = NULL;
  while (r == 0 && (errno = 0, e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    if (++w->entries > CONFINE_LINK_WALK_MAX_ENTRIES) {
      if (w->known_only) {
        w->incomplete = true;
        break;
      }
      r = cordon_error_set(err, CORDON_ERR_DENIED, E2BIG,
                           "%s holds more than %u entries: too many to check that none has "
                           "another name (a hard link) the sandbox could reach",
                           what, CONFINE_LINK_WALK_MAX_ENTRIES);
      break;
    }
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
      if (errno == ENOENT)
        continue; /* gone since readdir */
      if (w->known_only) {
        w->incomplete = true;
        continue;
      }
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s: cannot inspect %s/%s", what, rel,
                           e->d_name);
      break;
    }
    if (!S_ISDIR(st.st_mode) && st.st_nlink <= 1)
      continue;
    _cleanup_free_ char *child = join_relative(rel, e->d_name);
    if (!child) {
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hard link check");
      break;
    }
    if (!S_ISDIR(st.st_mode)) {
      r = link_walk_add(w, child, &st, err);
      continue;
    }
    int cfd = depth < CONFINE_LINK_WALK_MAX_DEPTH
                  ? openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                  : -1;
    if (cfd < 0 && w->known_only) {
      w->incomplete = true; /* the names not found are reported as not found */
      continue;
    }
    if (cfd < 0 && depth >= CONFINE_LINK_WALK_MAX_DEPTH)
      r = cordon_error_set(err, CORDON_ERR_DENIED, ELOOP,
                           "%s is more than %u directories deep: too deep to check that nothing "
                           "in it has another name (a hard link)",
                           what, CONFINE_LINK_WALK_MAX_DEPTH);
    else if (cfd < 0)
      r = cordon_error_set(err, CORDON_ERR_DENIED, errno,
                           "%s: cannot read %s to check that nothing in it has another name (a "
                           "hard link)",
                           what, child);
    else
      r = link_walk_dir(cfd, child, depth + 1, w, what, err);
  }
  if (r == 0 && !e && errno && w->known_only)
    w->incomplete = true;
  else if (r == 0 && !e && errno)
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s: cannot read %s", what, rel);
  closedir(d);
  return r;
}

int confine_check_hard_links(int ws_fd, const char *const *read_only, const char *const *hidden,
                             struct cordon_error **err) {
  struct link_walk w = {0};
  const char *const *lists[] = {read_only, hidden};
  const char *whats[] = {"read-only path", "hidden path"};
  int r = 0;
  for (size_t l = 0; l < ARRAY_SIZE(lists) && r == 0; l++)
    for (size_t i = 0; lists[l] && lists[l][i] && r == 0; i++) {
      const char *path = lists[l][i];
      _cleanup_free_ char *what = NULL;
      if (asprintf(&what, "%s %s", whats[l], path) < 0) {
        what = NULL;
        r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "hard link check");
        break;
      }
      _cleanup_close_ int fd = anchor_open(ws_fd, path, O_PATH, 0);
      struct stat st;
      if (fd < 0 || fstat(fd, &st) < 0) {
        r = cordon_error_set(err, errno == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_SYSTEM, errno,
                             "%s", what);
        break;
      }
      if (!S_ISDIR(st.st_mode)) {
        if (st.st_nlink > 1)
          r = link_walk_add(&w, path, &st, err);
        continue;
      }
      w.entries = 0;
      int dfd = anchor_open(ws_fd, path, O_RDONLY | O_DIRECTORY, 0);
      r = dfd < 0 ? cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s", what)
                  : link_walk_dir(dfd, path, 1, &w, what, err);
    }
  /* Decide each linked file on what the protected paths hold; walk the workspace only if some
   * names are elsewhere, then decide again on every name found. */
  if (r == 0)
    r = link_walk_group(&w, err);
  bool search = false;
  for (size_t pass = 0; pass < 2 && r == 0; pass++) {
    if (pass == 1) {
      if (!search)
        break;
      w.known_only = true;
      w.entries = 0;
      int dfd = openat(ws_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      r = dfd < 0 ? cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "workspace")
                  : link_walk_dir(dfd, "", 1, &w, "the workspace", err);
    }
    for (size_t i = 0; i < w.n_files && r == 0; i++) {
      struct linked_inode *file = &w.files[i];
      if (pass == 1 && !file->search)
        continue;
      struct confine_linked_file f = {
          .nlink = (unsigned long)file->nlink,
          .names = (const char *const *)file->names,
          .searched = pass == 1,
          .complete = pass == 1 && !w.incomplete,
      };
      int d = confine_check_linked_file(&f, read_only, hidden, err);
      if (d < 0)
        r = -1;
      else if (d == 1)
        search = file->search = true;
    }
  }
  link_walk_clear(&w);
  return r;
}
