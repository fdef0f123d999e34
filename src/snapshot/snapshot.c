/* Snapshots: taking one (walk, manifest, store, ref, stat cache), listing and forgetting them,
 * materialising shared overlay bases and terminal snapshots of overlay upper layers. Restore
 * lives in restore.c, images in tar.c, gc in gc.c; loading and storing manifests by id in
 * stored.c. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cordon/snapshot.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/id-prefix.h"
#include "base/strv.h"
#include "snapshot/internal.h"
#include "snapshot/statcache.h"
#include "snapshot/walk.h"

/* ---- taking a snapshot -------------------------------------------------------------------- */

struct take_setup {
  char **roots;
  char **exclude;
  struct walk_skip skip[2];
  size_t n_skip;
  char cache_name[CAS_HEX_LEN / 2 + 1];
  char resolved[PATH_MAX];
};

static void take_setup_free(struct take_setup *s) {
  strv_free(s->roots);
  strv_free(s->exclude);
}

static int add_root(struct take_setup *s, const char *path) {
  char *norm = snap_normalize_absolute(path);
  if (!norm)
    return -1;
  for (size_t i = 0; s->roots && s->roots[i]; i++) {
    if (!strcmp(s->roots[i], norm)) {
      free(norm);
      return 0;
    }
  }
  return strv_push_take(&s->roots, norm);
}

/* Root aliases, exclusions and the directories of the store itself (never snapshotted). */
static int prepare(struct cordon_cas *cas, const char *dir, int rootfd,
                   const struct cordon_snapshot_options *o, struct take_setup *s,
                   struct cordon_error **err) {
  memset(s, 0, sizeof(*s));
  s->roots = calloc(1, sizeof(char *));
  s->exclude = calloc(1, sizeof(char *));
  if (!s->roots || !s->exclude)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot");
  char link[64];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", rootfd);
  if (!realpath(dir, s->resolved)) {
    ssize_t n = readlink(link, s->resolved, sizeof(s->resolved) - 1);
    if (n < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "snapshot: %s", dir);
    s->resolved[n] = 0;
  }
  if (add_root(s, s->resolved) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot");
  if (dir[0] == '/') {
    if (add_root(s, dir) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot");
  } else {
    char cwd[PATH_MAX];
    _cleanup_free_ char *abs = NULL;
    if (getcwd(cwd, sizeof(cwd)) && asprintf(&abs, "%s/%s", cwd, dir) >= 0 && add_root(s, abs) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot");
  }
  for (size_t i = 0; o->root_aliases && o->root_aliases[i]; i++) {
    if (o->root_aliases[i][0] != '/')
      return cordon_error_set(err, CORDON_ERR_USAGE, 0, "root alias %s is not absolute",
                              o->root_aliases[i]);
    if (add_root(s, o->root_aliases[i]) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot");
  }
  for (size_t i = 0; o->exclude && o->exclude[i]; i++) {
    char *norm = NULL;
    if (fs_normalize_relative(o->exclude[i], &norm, err) < 0)
      return -1;
    if (!*norm) {
      free(norm);
      return cordon_error_set(err, CORDON_ERR_USAGE, 0, "cannot exclude the root itself");
    }
    if (strv_push_take(&s->exclude, norm) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot");
  }
  struct stat st;
  if (fstat(cas->rootfd, &st) == 0)
    s->skip[s->n_skip++] = (struct walk_skip){st.st_dev, st.st_ino};
  char store_real[PATH_MAX];
  if (realpath(cas->dir, store_real)) {
    char *slash = strrchr(store_real, '/');
    if (slash && slash != store_real) {
      *slash = 0;
      const char *base = strrchr(store_real, '/');
      if (base && !strcmp(base + 1, ".cordon") && stat(store_real, &st) == 0)
        s->skip[s->n_skip++] = (struct walk_skip){st.st_dev, st.st_ino};
    }
  }
  unsigned char key[CAS_DIGEST_LEN];
  char hex[CAS_HEX_LEN + 1];
  if (cas_sha256(s->resolved, strlen(s->resolved), key) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot");
  cas_hex(key, hex);
  memcpy(s->cache_name, hex, CAS_HEX_LEN / 2);
  s->cache_name[CAS_HEX_LEN / 2] = 0;
  return 0;
}

static uint64_t limit_of(const struct cordon_snapshot_options *o) {
  return o->max_bytes ? o->max_bytes : CORDON_SNAPSHOT_DEFAULT_MAX_BYTES;
}

static int open_statcache_dir(struct cordon_cas *cas) {
  return openat(cas->rootfd, CAS_STATCACHE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* Entries of a walk, in canonical order (views into the nodes). */
static int walk_entries(struct walk_tree *t, struct walk_node ***nodes, struct snap_entry **entries,
                        size_t *count, struct cordon_error **err) {
  if (walk_flatten(t, nodes, count) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot");
  *entries = malloc(*count * sizeof(**entries));
  if (!*entries) {
    free(*nodes);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot");
  }
  for (size_t i = 0; i < *count; i++)
    walk_node_entry((*nodes)[i], &(*entries)[i]);
  return 0;
}

/* True when the snapshot has exactly the cache's file names: its records can then be updated
 * in place (update_statcache) instead of the whole cache being rewritten. */
static bool statcache_names_match(const struct statcache *cache, struct walk_node **nodes,
                                  size_t count) {
  if (!cache->storage || cache->fd < 0)
    return false;
  size_t files = 0;
  for (size_t i = 0; i < count; i++) {
    if (nodes[i]->kind != SNAP_FILE)
      continue;
    if (nodes[i]->cache_index < 0)
      return false;
    files++;
  }
  return files == cache->n_files;
}

/* Update the records in place: a few pwrites instead of rewriting the whole cache. Returns
 * false when a rewrite is needed. */
static bool update_statcache(struct statcache *cache, struct walk_node **nodes, size_t count) {
  if (!statcache_names_match(cache, nodes, count))
    return false;
  size_t *changed = NULL, n_changed = 0, cap = 0;
  for (size_t i = 0; i < count; i++) {
    const struct walk_node *n = nodes[i];
    if (n->kind != SNAP_FILE ||
        !statcache_set(cache, (size_t)n->cache_index, &n->st, n->digest, n->cacheable))
      continue;
    if (n_changed == cap) {
      cap = cap ? cap * 2 : 16;
      size_t *grown = realloc(changed, cap * sizeof(*grown));
      if (!grown) {
        free(changed);
        return false;
      }
      changed = grown;
    }
    changed[n_changed++] = (size_t)n->cache_index;
  }
  bool ok = statcache_write_back(cache, changed, n_changed) == 0;
  free(changed);
  return ok;
}

/* A rewrite of the stat cache: built and written to a temp file while the batch commits (whose
 * syncs wait for the device, on a loaded machine 0.1-0.5 s), renamed into place only once the
 * snapshot is stored, since its records vouch for blobs the commit makes durable. */
struct cache_rewrite {
  struct cordon_cas *cas;
  const struct take_setup *s;
  struct walk_node **nodes;
  size_t count;
  const struct stat *root_st;
  struct fs_temp tmp; /* the staged temp file; its dirfd (the stat cache directory, -1 when
                         nothing is staged) is ours to close */
  pthread_t thread;
  bool started;
};

static void *stage_statcache(void *arg) {
  struct cache_rewrite *c = arg;
  struct statcache_writer w = {0};
  for (size_t i = 0; i < c->count; i++) {
    const struct walk_node *d = c->nodes[i];
    if (d->kind != SNAP_DIR)
      continue;
    bool opened = false;
    for (uint32_t k = 0; k < d->n_children; k++) {
      const struct walk_node *n = d->children[k];
      if (n->kind != SNAP_FILE || n->vanished)
        continue;
      if (!opened)
        statcache_writer_dir(&w, d->path, d->path_len);
      opened = true;
      statcache_writer_file(&w, n->name, n->path_len - (size_t)(n->name - n->path), &n->st,
                            n->digest, n->cacheable);
    }
  }
  struct snap_buf bytes = {0};
  if (statcache_writer_finish(&w, (uint64_t)c->root_st->st_dev, (uint64_t)c->root_st->st_ino,
                              &bytes) < 0)
    return NULL;
  int dir = open_statcache_dir(c->cas);
  struct cordon_error *ignored = NULL;
  if (dir >= 0 && statcache_stage(dir, c->s->cache_name, &bytes, &c->tmp, &ignored) < 0) {
    close(dir);
    c->tmp.dirfd = -1;
  }
  cordon_error_free(ignored); /* only an optimisation */
  snap_buf_free(&bytes);
  return NULL;
}

static void cache_rewrite_start(struct cache_rewrite *c) {
  c->started = pthread_create(&c->thread, NULL, stage_statcache, c) == 0;
  if (!c->started)
    stage_statcache(c);
}

/* Wait for the staged cache; rename it into place when publish, else drop it. */
static void cache_rewrite_end(struct cache_rewrite *c, bool publish) {
  if (c->started)
    pthread_join(c->thread, NULL);
  c->started = false;
  if (c->tmp.dirfd < 0)
    return;
  struct cordon_error *ignored = NULL;
  if (publish)
    statcache_publish(&c->tmp, c->s->cache_name, &ignored);
  fs_temp_discard(&c->tmp);
  cordon_error_free(ignored);
  close(c->tmp.dirfd);
  c->tmp.dirfd = -1;
}

int cordon_snapshot_take(struct cordon_cas *cas, const char *dir,
                         const struct cordon_snapshot_options *options,
                         char id_hex[CORDON_DIGEST_HEX_SIZE], struct cordon_snapshot_stats *stats,
                         struct cordon_error **err) {
  static const struct cordon_snapshot_options defaults;
  const struct cordon_snapshot_options *o = options ? options : &defaults;
  double start = fs_now();
  _cleanup_close_ int rootfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0)
    return cordon_error_set(err, errno == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_SYSTEM, errno,
                            "snapshot: directory %s", dir);
  struct stat root_st;
  if (fstat(rootfd, &root_st) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "snapshot: directory %s", dir);
  struct take_setup s;
  struct statcache cache = {.fd = -1};
  struct cas_batch *batch = NULL;
  struct walk_tree *tree = NULL;
  struct walk_node **nodes = NULL;
  struct snap_buf manifest = {0};
  struct cache_rewrite rewrite = {.tmp = FS_TEMP_INIT};
  bool in_place = false;
  size_t count = 0;
  int r = -1;
  /* The writer lock first: gc, which drops stat caches with the blobs they name, must not run
   * between loading the cache and storing the manifest that trusts it. */
  if (prepare(cas, dir, rootfd, o, &s, err) < 0 || cas_batch_new(cas, &batch, err) < 0)
    goto out;
  if (!o->no_stat_cache) {
    _cleanup_close_ int cdir = open_statcache_dir(cas);
    if (cdir >= 0)
      statcache_load(cdir, s.cache_name, &cache);
    if (cache.root_dev != (uint64_t)root_st.st_dev || cache.root_ino != (uint64_t)root_st.st_ino)
      statcache_free(&cache); /* a different directory now lives at that path */
  }
  struct walk_options wo = {
      .roots = (const char *const *)s.roots,
      .exclude = (const char *const *)s.exclude,
      .threads = o->threads,
      .cache = o->no_stat_cache ? NULL : &cache,
      .threshold = statcache_threshold(),
      .skip = s.skip,
      .n_skip = s.n_skip,
      .progress = o->progress,
      .limit_bytes = limit_of(o),
  };
  if (walk_run(cas, batch, rootfd, &wo, &tree, err) < 0) {
    if (!err || !*err || (*err)->kind != CORDON_ERR_INTERRUPTED)
      cordon_error_prefix(err, "snapshot of %s", dir);
    goto out;
  }
  /* The walk built the tree in canonical order: encode it directly. */
  if (walk_flatten(tree, &nodes, &count) < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot");
    goto out;
  }
  in_place = !o->no_stat_cache && statcache_names_match(&cache, nodes, count);
  if (!o->no_stat_cache && !in_place) {
    rewrite = (struct cache_rewrite){cas, &s, nodes, count, &root_st, FS_TEMP_INIT};
    cache_rewrite_start(&rewrite);
  }
  snap_buf_reserve(&manifest, count * 112 + 64); /* a typical entry is 80-110 bytes */
  snap_buf_append(&manifest, SNAP_MANIFEST_MAGIC, strlen(SNAP_MANIFEST_MAGIC));
  for (size_t i = 0; i < count; i++) {
    struct snap_entry e;
    walk_node_entry(nodes[i], &e);
    snap_entry_encode(&manifest, &e);
  }
  if (manifest.oom) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot");
    goto out;
  }
  uint64_t staged = cas_batch_staged(batch);
  unsigned char id[CAS_DIGEST_LEN];
  if (snap_commit_manifest(batch, &manifest, id, err) < 0)
    goto out;
  struct walk_counts wc;
  walk_get_counts(tree, &wc);
  if (in_place && !update_statcache(&cache, nodes, count)) {
    rewrite = (struct cache_rewrite){cas, &s, nodes, count, &root_st, FS_TEMP_INIT};
    cache_rewrite_start(&rewrite);
  }
  cache_rewrite_end(&rewrite, true);
  cas_hex(id, id_hex);
  if (stats) {
    stats->entries = count;
    stats->files = wc.files;
    stats->bytes = wc.bytes;
    stats->hashed_files = wc.hashed_files;
    stats->hashed_bytes = wc.hashed_bytes;
    stats->new_blobs = staged;
    stats->seconds = fs_now() - start;
  }
  r = 0;
out:
  cache_rewrite_end(&rewrite, false); /* after a failure: nothing it vouches for is stored */
  snap_buf_free(&manifest);
  free(nodes);
  walk_free(tree);
  cas_batch_free(batch);
  statcache_free(&cache);
  take_setup_free(&s);
  return r;
}

/* ---- listing ------------------------------------------------------------------------------ */

int cordon_snapshot_entries(struct cordon_cas *cas, const char *id_hex,
                            struct cordon_snapshot_entry **out, size_t *count,
                            struct cordon_error **err) {
  unsigned char id[CAS_DIGEST_LEN];
  if (snap_parse_id(id_hex, id, err) < 0)
    return -1;
  struct snap_manifest m;
  if (snap_load_manifest(cas, id, &m, err) < 0)
    return -1;
  struct cordon_snapshot_entry *list = calloc(m.count ? m.count : 1, sizeof(*list));
  if (!list) {
    snap_manifest_free(&m);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot entries");
  }
  for (size_t i = 0; i < m.count; i++) {
    const struct snap_entry *e = &m.entries[i];
    struct cordon_snapshot_entry *x = &list[i];
    x->path = malloc(e->path_len + 1);
    if (x->path) {
      memcpy(x->path, e->path, e->path_len);
      x->path[e->path_len] = 0;
    }
    x->path_length = e->path_len;
    x->kind = (enum cordon_snapshot_kind)e->kind;
    x->mode = e->mode;
    x->size = e->size;
    if (e->kind == SNAP_FILE)
      cas_hex(e->digest, x->digest);
    if (e->target)
      x->target = strdup(e->target);
    x->major = e->major;
    x->minor = e->minor;
    if (!x->path || (e->target && !x->target)) {
      cordon_snapshot_entries_free(list, i + 1);
      snap_manifest_free(&m);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot entries");
    }
  }
  *out = list;
  *count = m.count;
  snap_manifest_free(&m);
  return 0;
}

void cordon_snapshot_entries_free(struct cordon_snapshot_entry *entries, size_t count) {
  for (size_t i = 0; entries && i < count; i++) {
    free(entries[i].path);
    free(entries[i].target);
  }
  free(entries);
}

int cordon_snapshot_list(struct cordon_cas *cas, char ***ids, struct cordon_error **err) {
  return cas_ref_list(cas, ids, err);
}

int cordon_snapshot_resolve_id(struct cordon_cas *cas, const char *given, char **id,
                               struct cordon_error **err) {
  *id = NULL;
  /* A whole id is taken as it is: a forgotten snapshot whose objects remain is still named. */
  if (cordon_digest_valid(given)) {
    *id = strdup(given);
    return *id ? 0 : cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot %s", given);
  }
  if (!id_prefix_usable(given))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "expected a snapshot id (64 lowercase hex digits, or a unique prefix "
                            "of at least %d), got '%s'",
                            ID_PREFIX_MIN, given);
  _cleanup_(strv_freep) char **ids = NULL;
  if (cordon_snapshot_list(cas, &ids, err) < 0)
    return -1;
  return id_prefix_resolve("snapshot", given, (const char *const *)ids, id, err);
}

int cordon_snapshot_forget(struct cordon_cas *cas, const char *id_hex, struct cordon_error **err) {
  unsigned char id[CAS_DIGEST_LEN];
  if (snap_parse_id(id_hex, id, err) < 0)
    return -1;
  return cas_ref_remove(cas, id, err);
}

/* ---- overlay bases and terminal snapshots ------------------------------------------------- */

/* The base id was noted as derived from (cordon_snapshot_note_parent), when that base exists:
 * its path (malloc'd), its id in parent. NULL otherwise. */
static char *parent_base(const char *bases_dir, const char *id_hex,
                         char parent[CORDON_DIGEST_HEX_SIZE]) {
  _cleanup_free_ char *note = NULL;
  if (asprintf(&note, "%s/.parent-%s", bases_dir, id_hex) < 0)
    return NULL;
  _cleanup_close_ int fd = open(note, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || read(fd, parent, CORDON_DIGEST_HEX_SIZE - 1) != CORDON_DIGEST_HEX_SIZE - 1)
    return NULL;
  parent[CORDON_DIGEST_HEX_SIZE - 1] = 0;
  char *path = NULL;
  struct stat st;
  if (!cordon_digest_valid(parent) || asprintf(&path, "%s/%s", bases_dir, parent) < 0)
    return NULL;
  if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
    free(path);
    return NULL;
  }
  return path;
}

int cordon_snapshot_materialize_base(struct cordon_cas *cas, const char *id_hex,
                                     const char *bases_dir, char **path_out,
                                     struct cordon_error **err) {
  unsigned char id[CAS_DIGEST_LEN];
  if (snap_parse_id(id_hex, id, err) < 0)
    return -1;
  if (fs_mkdir_p(bases_dir, 0700, err) < 0)
    return -1;
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "%s/%s", bases_dir, id_hex) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "base %s", id_hex);
  /* A base appears only by the atomic rename at the end of a verified restore, so one that
   * exists is complete. */
  struct stat st;
  if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
    goto done;
  /* A terminal snapshot of an overlay over another base: link what it shares with that base. */
  struct cordon_restore_options ro = {0};
  char parent[CORDON_DIGEST_HEX_SIZE] = "";
  char *parent_path = parent_base(bases_dir, id_hex, parent);
  if (parent_path) {
    ro.link_from_dir = parent_path;
    ro.link_from_id = parent;
  }
  struct cordon_error *restore_err = NULL;
  int restored = cordon_snapshot_restore(cas, id_hex, path, &ro, &restore_err);
  free(parent_path);
  if (restored < 0) {
    /* Another process may have won the race; its base is as good as ours. */
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
      cordon_error_free(restore_err);
      goto done;
    }
    if (err && !*err)
      *err = restore_err;
    else
      cordon_error_free(restore_err);
    return -1;
  }
done:
  if (path_out)
    *path_out = steal_ptr(&path);
  return 0;
}

int cordon_snapshot_note_parent(const char *bases_dir, const char *id, const char *parent_id,
                                struct cordon_error **err) {
  if (!cordon_digest_valid(id) || !cordon_digest_valid(parent_id))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "note parent: not snapshot ids");
  if (!strcmp(id, parent_id))
    return 0;
  if (fs_mkdir_p(bases_dir, 0700, err) < 0)
    return -1;
  _cleanup_free_ char *note = NULL;
  if (asprintf(&note, "%s/.parent-%s", bases_dir, id) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "note parent");
  return fs_write_atomic(note, parent_id, strlen(parent_id), 0600, err);
}

static bool in_subtree(const struct snap_entry *e, const char *prefix, size_t prefix_len) {
  if (prefix_len == 0)
    return e->path_len > 0; /* everything below the root */
  return e->path_len > prefix_len && e->path[prefix_len] == '/' &&
         memcmp(e->path, prefix, prefix_len) == 0;
}

/* Merge the base manifest with the upper layer (both canonical). */
static int overlay_merge(const struct snap_manifest *base, struct walk_node **upper, size_t n_upper,
                         struct snap_entry **out, size_t *count, struct cordon_error **err) {
  size_t cap = base->count + n_upper, n = 0;
  struct snap_entry *res = malloc((cap ? cap : 1) * sizeof(*res));
  if (!res)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "overlay snapshot");
  size_t i = 0, j = 0;
  const char *hide = NULL; /* a base subtree that the upper layer replaced or deleted */
  size_t hide_len = 0;
  while (i < base->count || j < n_upper) {
    if (i < base->count && hide) {
      if (in_subtree(&base->entries[i], hide, hide_len)) {
        i++;
        continue;
      }
      hide = NULL;
    }
    int cmp;
    if (i >= base->count)
      cmp = 1;
    else if (j >= n_upper)
      cmp = -1;
    else
      cmp = snap_path_compare(base->entries[i].path, base->entries[i].path_len, upper[j]->path,
                              upper[j]->path_len);
    if (cmp < 0) {
      res[n++] = base->entries[i++];
      continue;
    }
    const struct walk_node *u = upper[j++];
    if (cmp == 0) {
      const struct snap_entry *b = &base->entries[i++];
      bool merge_dirs = b->kind == SNAP_DIR && u->kind == SNAP_DIR && !u->opaque && !u->whiteout;
      if (b->kind == SNAP_DIR && !merge_dirs) {
        hide = b->path;
        hide_len = b->path_len;
      }
    }
    if (u->whiteout)
      continue;
    walk_node_entry(u, &res[n++]);
  }
  *out = res;
  *count = n;
  return 0;
}

int cordon_snapshot_take_overlay(struct cordon_cas *cas, const char *base_hex,
                                 const char *upper_dir,
                                 const struct cordon_snapshot_options *options,
                                 char id_hex[CORDON_DIGEST_HEX_SIZE],
                                 struct cordon_snapshot_stats *stats, struct cordon_error **err) {
  static const struct cordon_snapshot_options defaults;
  const struct cordon_snapshot_options *o = options ? options : &defaults;
  double start = fs_now();
  unsigned char base_id[CAS_DIGEST_LEN];
  if (snap_parse_id(base_hex, base_id, err) < 0)
    return -1;
  _cleanup_close_ int rootfd = open(upper_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0)
    return cordon_error_set(err, errno == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_SYSTEM, errno,
                            "overlay snapshot: upper directory %s", upper_dir);
  struct snap_manifest base = {0};
  struct take_setup s;
  struct cas_batch *batch = NULL;
  struct walk_tree *tree = NULL;
  struct walk_node **nodes = NULL;
  struct snap_entry *upper_entries = NULL, *merged = NULL;
  size_t n_nodes = 0, n_merged = 0;
  int r = -1;
  if (prepare(cas, upper_dir, rootfd, o, &s, err) < 0 ||
      snap_load_manifest(cas, base_id, &base, err) < 0)
    goto out;
  struct walk_options wo = {
      .roots = (const char *const *)s.roots,
      .exclude = (const char *const *)s.exclude,
      .threads = o->threads,
      .overlay = true,
      .marker_prefix = o->overlay_xattrs == CORDON_OVERLAY_XATTRS_TRUSTED ? "trusted.overlay."
                       : o->overlay_xattrs == CORDON_OVERLAY_XATTRS_USER  ? "user.overlay."
                                                                          : NULL,
      .threshold = statcache_threshold(),
      .skip = s.skip,
      .n_skip = s.n_skip,
      .progress = o->progress,
      .limit_bytes = limit_of(o),
  };
  if (cas_batch_new(cas, &batch, err) < 0)
    goto out;
  if (walk_run(cas, batch, rootfd, &wo, &tree, err) < 0) {
    if (!err || !*err || (*err)->kind != CORDON_ERR_INTERRUPTED)
      cordon_error_prefix(err, "overlay snapshot of %s", upper_dir);
    goto out;
  }
  if (walk_entries(tree, &nodes, &upper_entries, &n_nodes, err) < 0 ||
      overlay_merge(&base, nodes, n_nodes, &merged, &n_merged, err) < 0)
    goto out;
  /* The walk counted the upper layer; the limit is on the whole tree, base included. */
  uint64_t total = 0;
  for (size_t i = 0; i < n_merged; i++)
    if (merged[i].kind == SNAP_FILE)
      total += merged[i].size;
  if (total > limit_of(o)) {
    cordon_error_set(err, CORDON_ERR_DENIED, 0,
                     "overlay snapshot of %s: the tree's files hold %llu bytes, over the snapshot "
                     "limit of %llu bytes",
                     upper_dir, (unsigned long long)total, (unsigned long long)limit_of(o));
    goto out;
  }
  uint64_t staged = cas_batch_staged(batch);
  if (cas_batch_commit(batch, err) < 0)
    goto out;
  unsigned char id[CAS_DIGEST_LEN];
  if (snap_store_manifest(cas, merged, n_merged, id, err) < 0)
    goto out;
  cas_hex(id, id_hex);
  if (stats) {
    struct walk_counts wc;
    walk_get_counts(tree, &wc);
    memset(stats, 0, sizeof(*stats));
    stats->entries = n_merged;
    for (size_t i = 0; i < n_merged; i++) {
      if (merged[i].kind == SNAP_FILE) {
        stats->files++;
        stats->bytes += merged[i].size;
      }
    }
    stats->hashed_files = wc.hashed_files;
    stats->hashed_bytes = wc.hashed_bytes;
    stats->new_blobs = staged;
    stats->seconds = fs_now() - start;
  }
  r = 0;
out:
  free(merged);
  free(upper_entries);
  free(nodes);
  walk_free(tree);
  cas_batch_free(batch);
  snap_manifest_free(&base);
  take_setup_free(&s);
  return r;
}
