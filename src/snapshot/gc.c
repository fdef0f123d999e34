/* Garbage collection of the store: mark what is referenced, sweep the rest.
 *
 * Roots are the snapshot refs (<store>/refs), and, conservatively, every 64-hex-digit token in
 * the project's session state files and receipts (a session resumed from a snapshot, a receipt
 * naming an output): scanning text for digests can only keep too much, never too little. A
 * root that is a snapshot manifest keeps every blob it names. gc holds the store's writer lock
 * exclusively, so no snapshot is half-written while it runs; an unreadable manifest among the
 * roots stops it before anything is removed.
 *
 * gc knows a project only as its state directory: the public cordon_cas_gc, which takes the
 * project's context, is a wrapper in the protocol layer (src/protocol/context.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cordon/snapshot.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "snapshot/gc.h"
#include "snapshot/internal.h"

#define SCAN_FILE_MAX ((size_t)16 << 20)
#define SCAN_DEPTH_MAX 16

struct digest_set {
  unsigned char (*d)[CAS_DIGEST_LEN];
  size_t n, cap;
  bool oom;
};

static void set_add(struct digest_set *s, const unsigned char d[CAS_DIGEST_LEN]) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 1024;
    void *grown = realloc(s->d, cap * CAS_DIGEST_LEN);
    if (!grown) {
      s->oom = true;
      return;
    }
    s->d = grown;
    s->cap = cap;
  }
  memcpy(s->d[s->n++], d, CAS_DIGEST_LEN);
}

static int digest_cmp(const void *a, const void *b) {
  return memcmp(a, b, CAS_DIGEST_LEN);
}

static void set_seal(struct digest_set *s) {
  if (s->n)
    qsort(s->d, s->n, CAS_DIGEST_LEN, digest_cmp);
  size_t o = 0;
  for (size_t i = 0; i < s->n; i++)
    if (o == 0 || memcmp(s->d[o - 1], s->d[i], CAS_DIGEST_LEN) != 0)
      memcpy(s->d[o++], s->d[i], CAS_DIGEST_LEN);
  s->n = o;
}

static bool set_has(const struct digest_set *s, const unsigned char d[CAS_DIGEST_LEN]) {
  return s->n && bsearch(d, s->d, s->n, CAS_DIGEST_LEN, digest_cmp) != NULL;
}

static bool is_hex(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* Every run of exactly 64 lowercase hex digits. */
static void scan_tokens(const unsigned char *p, size_t n, struct digest_set *roots) {
  size_t run = 0;
  for (size_t i = 0; i <= n; i++) {
    if (i < n && is_hex(p[i])) {
      run++;
      continue;
    }
    if (run == CAS_HEX_LEN) {
      unsigned char d[CAS_DIGEST_LEN];
      if (cas_unhex_n((const char *)p + i - run, d) == 0)
        set_add(roots, d);
    }
    run = 0;
  }
}

static void scan_tree(int dirfd, int depth, struct digest_set *roots) {
  if (depth > SCAN_DEPTH_MAX)
    return;
  int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0)
      close(fd);
    return;
  }
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
      continue;
    struct stat st;
    if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
      continue;
    if (S_ISDIR(st.st_mode)) {
      /* Session workspaces live in their state directories: never scan file contents there. */
      if (!strcmp(de->d_name, "workspace"))
        continue;
      _cleanup_close_ int sub =
          openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0)
        scan_tree(sub, depth + 1, roots);
    } else if (S_ISREG(st.st_mode) && (size_t)st.st_size <= SCAN_FILE_MAX) {
      _cleanup_close_ int f =
          openat(dirfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
      unsigned char *data = NULL;
      size_t len = 0;
      struct cordon_error *ignored = NULL;
      if (f >= 0 && fs_read_fd(f, SCAN_FILE_MAX, &data, &len, &ignored) == 0)
        scan_tokens(data, len, roots);
      cordon_error_free(ignored);
      free(data);
    }
  }
  closedir(d);
}

static void scan_project(const char *state_dir, const char *sub, struct digest_set *roots) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "%s/%s", state_dir, sub) < 0)
    return;
  _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0)
    scan_tree(fd, 0, roots);
}

/* Mark a root and, when it is a snapshot manifest, everything it names. */
static int mark(struct cordon_cas *cas, const unsigned char d[CAS_DIGEST_LEN],
                struct digest_set *live, struct cordon_error **err) {
  set_add(live, d);
  struct cas_blob blob;
  struct cordon_error *open_err = NULL;
  if (cas_blob_open(cas, d, &blob, &open_err) < 0) {
    bool absent = open_err->kind == CORDON_ERR_NOT_FOUND;
    if (!absent && err && !*err)
      *err = open_err;
    else
      cordon_error_free(open_err);
    return absent ? 0 : -1;
  }
  char head[sizeof(SNAP_MANIFEST_MAGIC)];
  size_t magic = strlen(SNAP_MANIFEST_MAGIC);
  ssize_t n = cas_blob_read(&blob, head, magic, 0);
  cas_blob_close(&blob);
  if (n != (ssize_t)magic || memcmp(head, SNAP_MANIFEST_MAGIC, magic) != 0)
    return 0;
  struct snap_manifest m;
  if (snap_load_manifest(cas, d, &m, err) < 0)
    return -1;
  for (size_t i = 0; i < m.count; i++)
    if (m.entries[i].kind == SNAP_FILE)
      set_add(live, m.entries[i].digest);
  snap_manifest_free(&m);
  return 0;
}

static void wipe_statcache(struct cordon_cas *cas) {
  struct cordon_error *ignored = NULL;
  /* Cached digests may name blobs that are gone now. */
  if (fs_remove_tree_at(cas->rootfd, CAS_STATCACHE_DIR, &ignored) == 0)
    mkdirat(cas->rootfd, CAS_STATCACHE_DIR, 0700);
  cordon_error_free(ignored);
}

/* The packs' part of gc: a big pack whose blobs all live stays; every other pack (one with
 * dead blobs, or a small one) joins one rewrite that keeps the live blobs in a single new pack.
 * So the store's packs stay few however many small snapshots came and went. */
static int collect_packs(struct cordon_cas *cas, const struct digest_set *live, bool dry_run,
                         struct cordon_cas_gc_report *report, struct cordon_error **err) {
  struct cas_pack **packs = NULL;
  size_t n = 0;
  if (cas_packs_list(cas, &packs, &n, err) < 0)
    return -1;
  bool **keep = calloc(n + 1, sizeof(*keep));
  struct cas_pack **group = calloc(n + 1, sizeof(*group));
  bool **group_keep = calloc(n + 1, sizeof(*group_keep));
  size_t n_group = 0;
  bool any_dead = false;
  int r = 0;
  if (!keep || !group || !group_keep)
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gc");
  for (size_t i = 0; i < n && r == 0; i++) {
    struct cas_pack *p = packs[i];
    if (!(keep[i] = calloc(p->count + 1, sizeof(bool)))) {
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gc");
      break;
    }
    bool dead = false;
    for (size_t j = 0; j < p->count && r == 0; j++) {
      keep[i][j] = set_has(live, p->entries[j].digest);
      if (keep[i][j]) {
        report->kept++;
        continue;
      }
      dead = true;
      char hex[CAS_HEX_LEN + 1];
      cas_hex(p->entries[j].digest, hex);
      report->removed++;
      report->removed_bytes += p->entries[j].length;
      if (strv_push(&report->removed_digests, hex) < 0)
        r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gc");
    }
    if (dead || p->size < CAS_PACK_SMALL) {
      group[n_group] = p;
      group_keep[n_group++] = keep[i];
      any_dead = any_dead || dead;
    }
  }
  /* One small pack with nothing dead is left alone: rewriting it would change nothing. */
  if (r == 0 && !dry_run && (any_dead || n_group > 1) &&
      cas_pack_rewrite(cas, group, n_group, group_keep, err) < 0)
    r = cordon_error_prefix(err, "gc: packs");
  for (size_t i = 0; keep && i < n; i++)
    free(keep[i]);
  free(keep);
  free(group);
  free(group_keep);
  cas_packs_list_free(cas, packs, n);
  return r;
}

int snap_gc(struct cordon_cas *cas, const char *state_dir, bool dry_run,
            struct cordon_cas_gc_report *report, struct cordon_error **err) {
  memset(report, 0, sizeof(*report));
  int lockfd = cas_lock_exclusive(cas, err);
  if (lockfd < 0)
    return -1;
  struct digest_set roots = {0}, live = {0};
  struct cas_blob_list blobs = {0};
  char **refs = NULL;
  int r = -1;
  if (cas_ref_list(cas, &refs, err) < 0)
    goto out;
  for (size_t i = 0; refs[i]; i++) {
    unsigned char d[CAS_DIGEST_LEN];
    if (cas_unhex(refs[i], d) == 0)
      set_add(&roots, d);
  }
  if (state_dir) {
    scan_project(state_dir, "sessions", &roots);
    scan_project(state_dir, "receipts", &roots);
  }
  set_seal(&roots);
  report->roots = roots.n;
  for (size_t i = 0; i < roots.n; i++) {
    if (mark(cas, roots.d[i], &live, err) < 0) {
      char hex[CAS_HEX_LEN + 1];
      cas_hex(roots.d[i], hex);
      cordon_error_prefix(err, "gc stopped before removing anything: root %s", hex);
      goto out;
    }
  }
  set_seal(&live);
  if (roots.oom || live.oom) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gc");
    goto out;
  }
  if (cas_list_blobs(cas, &blobs, err) < 0)
    goto out;
  report->removed_digests = calloc(1, sizeof(char *));
  if (!report->removed_digests) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gc");
    goto out;
  }
  for (size_t i = 0; i < blobs.count; i++) {
    if (set_has(&live, blobs.digests[i])) {
      report->kept++;
      continue;
    }
    char hex[CAS_HEX_LEN + 1];
    cas_hex(blobs.digests[i], hex);
    uint64_t freed = 0;
    if (dry_run) {
      struct stat st;
      int shard = cas_shard_fd(cas, blobs.digests[i][0], false, NULL);
      if (shard >= 0 && fstatat(shard, hex, &st, AT_SYMLINK_NOFOLLOW) == 0)
        freed = (uint64_t)st.st_size;
    } else if (cas_remove_blob(cas, blobs.digests[i], &freed, err) < 0) {
      goto out;
    }
    report->removed++;
    report->removed_bytes += freed;
    if (strv_push(&report->removed_digests, hex) < 0) {
      cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gc");
      goto out;
    }
  }
  if (collect_packs(cas, &live, dry_run, report, err) < 0)
    goto out;
  if (!dry_run) {
    if (cas_clean_tmp(cas, NULL, err) < 0)
      goto out;
    if (report->removed > 0)
      wipe_statcache(cas);
    syncfs(cas->rootfd);
  }
  r = 0;
out:
  if (r < 0)
    cordon_cas_gc_report_clear(report);
  strv_free(refs);
  cas_blob_list_free(&blobs);
  free(roots.d);
  free(live.d);
  close(lockfd);
  return r;
}

void cordon_cas_gc_report_clear(struct cordon_cas_gc_report *report) {
  strv_free(report->removed_digests);
  memset(report, 0, sizeof(*report));
}
