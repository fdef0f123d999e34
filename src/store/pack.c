/* Packs: format, writer and the store's set of loaded packs (see pack.h); rewriting and merging
 * them is pack-merge.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "store/object.h"
#include "store/pack.h"

/* ---- the format --------------------------------------------------------------------------- */

static uint64_t get_le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static void put_le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++, v >>= 8)
    p[i] = (unsigned char)(v & 0xff);
}

static void encode_header(unsigned char *h) {
  memset(h, 0, CAS_PACK_HEADER_LEN);
  memcpy(h, CAS_PACK_MAGIC, 8);
  h[8] = CAS_PACK_VERSION; /* u32 little-endian, then 4 reserved zero bytes */
}

const char *cas_pack_check_header(const unsigned char *h) {
  if (memcmp(h, CAS_PACK_MAGIC, 8) != 0)
    return "not a cordon pack (bad magic)";
  if (get_le64(h + 8) != CAS_PACK_VERSION)
    return "unsupported pack version";
  return NULL;
}

const char *cas_pack_parse_trailer(const unsigned char *t, uint64_t file_size,
                                   uint64_t *index_offset, uint64_t *count) {
  if (file_size < CAS_PACK_HEADER_LEN + CAS_PACK_TRAILER_LEN)
    return "too short to be a pack";
  if (memcmp(t + 16, CAS_PACK_INDEX_MAGIC, 8) != 0)
    return "bad index magic (truncated or not a pack)";
  uint64_t off = get_le64(t), n = get_le64(t + 8);
  if (n > CAS_PACK_MAX_ENTRIES)
    return "index claims too many entries";
  if (off < CAS_PACK_HEADER_LEN || off > file_size - CAS_PACK_TRAILER_LEN ||
      file_size - CAS_PACK_TRAILER_LEN - off != n * CAS_PACK_ENTRY_LEN)
    return "index does not fit the file";
  *index_offset = off;
  *count = n;
  return NULL;
}

const char *cas_pack_parse_index(const unsigned char *index, uint64_t count, uint64_t index_offset,
                                 struct cas_pack_entry *out) {
  for (uint64_t i = 0; i < count; i++) {
    const unsigned char *p = index + i * CAS_PACK_ENTRY_LEN;
    struct cas_pack_entry *e = &out[i];
    memcpy(e->digest, p, CAS_DIGEST_LEN);
    e->offset = get_le64(p + 32);
    e->length = get_le64(p + 40);
    if (i > 0 && memcmp(out[i - 1].digest, e->digest, CAS_DIGEST_LEN) >= 0)
      return "index entries are not in strictly increasing digest order";
    if (e->offset < CAS_PACK_HEADER_LEN || e->offset > index_offset ||
        e->length > index_offset - e->offset)
      return "index entry points outside the pack's data";
  }
  return NULL;
}

/* By offset, then length: an empty blob may share its offset with the next one. */
static int by_offset(const void *a, const void *b) {
  const struct cas_pack_entry *x = a, *y = b;
  if (x->offset != y->offset)
    return x->offset < y->offset ? -1 : 1;
  return x->length < y->length ? -1 : x->length > y->length;
}

const char *cas_pack_check_tiling(const struct cas_pack_entry *entries, size_t count,
                                  uint64_t index_offset) {
  if (count == 0)
    return index_offset == CAS_PACK_HEADER_LEN ? NULL : "bytes before the index belong to no entry";
  struct cas_pack_entry *copy = malloc(count * sizeof(*copy));
  if (!copy)
    return "out of memory";
  memcpy(copy, entries, count * sizeof(*copy));
  qsort(copy, count, sizeof(*copy), by_offset);
  uint64_t at = CAS_PACK_HEADER_LEN;
  const char *why = NULL;
  for (size_t i = 0; i < count && !why; i++) {
    if (copy[i].offset != at)
      why = copy[i].offset > at ? "bytes between blobs belong to no entry" : "two entries overlap";
    at = copy[i].offset + copy[i].length;
  }
  if (!why && at != index_offset)
    why = "bytes before the index belong to no entry";
  free(copy);
  return why;
}

void cas_pack_encode_index(const struct cas_pack_entry *entries, size_t count,
                           uint64_t index_offset, unsigned char *out) {
  for (size_t i = 0; i < count; i++) {
    unsigned char *p = out + i * CAS_PACK_ENTRY_LEN;
    memcpy(p, entries[i].digest, CAS_DIGEST_LEN);
    put_le64(p + 32, entries[i].offset);
    put_le64(p + 40, entries[i].length);
  }
  unsigned char *t = out + count * CAS_PACK_ENTRY_LEN;
  put_le64(t, index_offset);
  put_le64(t + 8, count);
  memcpy(t + 16, CAS_PACK_INDEX_MAGIC, 8);
}

static int by_digest(const void *a, const void *b) {
  return memcmp(a, b, CAS_DIGEST_LEN); /* digest is the first member */
}

/* ---- writing ------------------------------------------------------------------------------ */

void cas_pack_writer_init(struct cas_pack_writer *w) {
  memset(w, 0, sizeof(*w));
  pthread_mutex_init(&w->mu, NULL);
  w->fd = -1;
}

/* Small blobs are gathered and written together; bigger ones go straight to the file. */
#define PACK_WRITE_BUFFER ((size_t)256 << 10)

/* Write what is buffered, creating the temp file (and its header) first when there is none:
 * a writer whose blobs all fit its buffer never creates one unless it is finished as a pack. */
static int flush(struct cordon_cas *cas, struct cas_pack_writer *w, struct cordon_error **err) {
  if (w->fd < 0) {
    snprintf(w->name, sizeof(w->name), "pack-%s-%llu.tmp", cas->tmp_prefix,
             (unsigned long long)__atomic_add_fetch(&cas->tmp_counter, 1, __ATOMIC_RELAXED));
    w->fd = openat(cas->tmpfd, w->name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (w->fd < 0) {
      w->name[0] = 0;
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: pack temp file", cas->dir);
    }
    unsigned char header[CAS_PACK_HEADER_LEN];
    encode_header(header);
    if (fs_write_all(w->fd, header, sizeof(header)) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: pack temp file", cas->dir);
  }
  if (w->buffered && fs_write_all(w->fd, w->buf, w->buffered) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: pack temp file", cas->dir);
  w->buffered = 0;
  return 0;
}

/* Writeback of a pack starts as it grows, in steps of this much: by the commit's sync most of it
 * is on the device already, and only this writer's pages are pushed (not the filesystem's). */
#define PACK_KICK_STEP ((uint64_t)4 << 20)

/* Start (not wait for) the writeback of what the temp file holds beyond the last step. Whole
 * pages only: a page under writeback that the next append fills would make it wait. Errors are
 * the commit's sync's to report. */
static void kick_writeback(struct cas_pack_writer *w) {
  uint64_t written = w->size - w->buffered, end = written & ~(uint64_t)4095;
  if (w->fd < 0 || end < w->kicked + PACK_KICK_STEP)
    return;
  sync_file_range(w->fd, (off_t)w->kicked, (off_t)(end - w->kicked), SYNC_FILE_RANGE_WRITE);
  w->kicked = end;
}

int cas_pack_writer_append(struct cordon_cas *cas, struct cas_pack_writer *w, const void *data,
                           size_t length, const unsigned char digest[CAS_DIGEST_LEN],
                           struct cordon_error **err) {
  if (w->size == 0)
    w->size = CAS_PACK_HEADER_LEN; /* where the first blob will be */
  if (w->n == w->cap) {
    size_t cap = w->cap ? w->cap * 2 : 1024;
    struct cas_pack_entry *grown = realloc(w->entries, cap * sizeof(*grown));
    if (!grown)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "store batch");
    w->entries = grown;
    w->cap = cap;
  }
  bool direct = length >= PACK_WRITE_BUFFER / 4;
  /* What is buffered goes first: offsets follow the order of appends. */
  if ((direct || w->buffered + length > PACK_WRITE_BUFFER) && flush(cas, w, err) < 0)
    return -1;
  if (direct) {
    if (fs_write_all(w->fd, data, length) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: pack temp file", cas->dir);
  } else {
    if (!w->buf && !(w->buf = malloc(PACK_WRITE_BUFFER)))
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "store batch");
    memcpy(w->buf + w->buffered, data, length);
    w->buffered += length;
  }
  struct cas_pack_entry *e = &w->entries[w->n++];
  memcpy(e->digest, digest, CAS_DIGEST_LEN);
  e->offset = w->size;
  e->length = length;
  w->size += length;
  kick_writeback(w);
  return 0;
}

int cas_pack_writer_finish(struct cordon_cas *cas, struct cas_pack_writer *w,
                           struct cas_pack_done *done, struct cordon_error **err) {
  memset(done, 0, sizeof(*done));
  done->fd = -1;
  if (w->n == 0)
    return 0;
  if (flush(cas, w, err) < 0)
    return -1;
  qsort(w->entries, w->n, sizeof(*w->entries), by_digest);
  size_t tail_len = w->n * CAS_PACK_ENTRY_LEN + CAS_PACK_TRAILER_LEN;
  _cleanup_free_ unsigned char *tail = malloc(tail_len);
  if (!tail)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "store batch");
  cas_pack_encode_index(w->entries, w->n, w->size, tail);
  if (fs_write_all(w->fd, tail, tail_len) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: pack temp file", cas->dir);
  if (cas_sha256(tail, tail_len, done->id) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "store batch");
  memcpy(done->name, w->name, sizeof(done->name));
  done->fd = w->fd;
  done->size = w->size + tail_len;
  done->entries = w->entries;
  done->count = w->n;
  w->fd = -1;
  w->name[0] = 0;
  w->entries = NULL;
  w->n = w->cap = 0;
  w->size = w->kicked = 0;
  return 0; /* the buffer stays for the writer's next pack */
}

void cas_pack_writer_reset(struct cas_pack_writer *w) {
  free(w->entries);
  w->entries = NULL;
  w->n = w->cap = 0;
  w->size = w->kicked = 0;
  w->buffered = 0;
}

void cas_pack_writer_discard(struct cordon_cas *cas, struct cas_pack_writer *w) {
  if (w->fd >= 0)
    close(w->fd);
  if (w->name[0])
    unlinkat(cas->tmpfd, w->name, 0);
  free(w->entries);
  free(w->buf);
  pthread_mutex_destroy(&w->mu);
  memset(w, 0, sizeof(*w));
  w->fd = -1;
}

void cas_pack_done_discard(struct cordon_cas *cas, struct cas_pack_done *done) {
  if (done->fd >= 0)
    close(done->fd);
  if (done->name[0])
    unlinkat(cas->tmpfd, done->name, 0);
  free(done->entries);
  memset(done, 0, sizeof(*done));
  done->fd = -1;
}

static void pack_name(const unsigned char id[CAS_DIGEST_LEN], char out[CAS_HEX_LEN + 8]) {
  cas_hex(id, out);
  strcpy(out + CAS_HEX_LEN, CAS_PACK_SUFFIX);
}

/* Add a loaded pack to the set (with the write lock held). Takes p. */
static int set_add(struct cas_pack_set *s, struct cas_pack *p) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 16;
    struct cas_pack **grown = realloc(s->packs, cap * sizeof(*grown));
    if (!grown)
      return -1;
    s->packs = grown;
    s->cap = cap;
  }
  s->packs[s->n++] = p;
  return 0;
}

/* A pack that left the directory: its fd goes once nobody holds it (under the set's write
 * lock). `gone` and `holds` are sequentially consistent so that a release racing the removal
 * sees one or the other and the fd is always closed. */
static void mark_gone_locked(struct cas_pack *p) {
  __atomic_store_n(&p->gone, true, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&p->holds, __ATOMIC_SEQ_CST) == 0 && p->fd >= 0) {
    close(p->fd);
    p->fd = -1;
  }
}

static void hold(struct cas_pack *p) {
  __atomic_add_fetch(&p->holds, 1, __ATOMIC_SEQ_CST);
}

void cas_pack_release(struct cordon_cas *cas, struct cas_pack *p) {
  if (!p || __atomic_sub_fetch(&p->holds, 1, __ATOMIC_SEQ_CST) != 0 ||
      !__atomic_load_n(&p->gone, __ATOMIC_SEQ_CST))
    return;
  pthread_rwlock_wrlock(&cas->packs.lock);
  if (__atomic_load_n(&p->holds, __ATOMIC_SEQ_CST) == 0 && p->fd >= 0) {
    close(p->fd);
    p->fd = -1;
  }
  pthread_rwlock_unlock(&cas->packs.lock);
}

static void pack_free(struct cas_pack *p) {
  if (!p)
    return;
  if (p->fd >= 0)
    close(p->fd);
  free(p->entries);
  free(p);
}

int cas_pack_publish(struct cordon_cas *cas, struct cas_pack_done *done,
                     struct cordon_error **err) {
  struct cas_pack_set *s = &cas->packs;
  char name[CAS_HEX_LEN + 8];
  pack_name(done->id, name);
  /* The same name means the same index, hence the same blobs: replacing it is harmless. */
  if (renameat(cas->tmpfd, done->name, s->dirfd, name) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: cannot publish pack %s",
                            cas->dir, name);
  done->name[0] = 0;
  struct cas_pack *p = calloc(1, sizeof(*p));
  if (!p)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "store batch");
  memcpy(p->id, done->id, CAS_DIGEST_LEN);
  p->fd = done->fd;
  p->size = done->size;
  p->entries = done->entries;
  p->count = done->count;
  p->index_offset = done->size - done->count * CAS_PACK_ENTRY_LEN - CAS_PACK_TRAILER_LEN;
  done->fd = -1;
  done->entries = NULL;
  pthread_rwlock_wrlock(&s->lock);
  int r = 0;
  /* Only once the set was scanned: a later scan would load it a second time otherwise. */
  if (s->scanned) {
    for (size_t i = 0; i < s->n; i++)
      if (!s->packs[i]->gone && !memcmp(s->packs[i]->id, p->id, CAS_DIGEST_LEN)) {
        mark_gone_locked(s->packs[i]); /* replaced by the file just renamed over it */
        break;
      }
    r = set_add(s, p);
  } else {
    pack_free(p);
    p = NULL;
  }
  pthread_rwlock_unlock(&s->lock);
  if (r < 0) {
    pack_free(p);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "store batch");
  }
  return 0;
}

/* ---- reading ------------------------------------------------------------------------------ */

int cas_packs_open(struct cordon_cas *cas, struct cordon_error **err) {
  struct cas_pack_set *s = &cas->packs;
  pthread_rwlock_init(&s->lock, NULL);
  s->dirfd = -1;
  if (mkdirat(cas->rootfd, CAS_PACK_DIR, 0700) < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s/%s", cas->dir,
                            CAS_PACK_DIR);
  s->dirfd = openat(cas->rootfd, CAS_PACK_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (s->dirfd < 0)
    return cordon_error_set(
        err, errno == ELOOP || errno == ENOTDIR ? CORDON_ERR_INTEGRITY : CORDON_ERR_SYSTEM, errno,
        "store %s: %s is unreadable", cas->dir, CAS_PACK_DIR);
  return 0;
}

void cas_packs_close(struct cordon_cas *cas) {
  struct cas_pack_set *s = &cas->packs;
  for (size_t i = 0; i < s->n; i++)
    pack_free(s->packs[i]);
  free(s->packs);
  strv_free(s->problems);
  if (s->dirfd >= 0)
    close(s->dirfd);
  pthread_rwlock_destroy(&s->lock);
  memset(s, 0, sizeof(*s));
  s->dirfd = -1;
}

static bool pack_file_name(const char *name, unsigned char id[CAS_DIGEST_LEN]) {
  return strlen(name) == CAS_HEX_LEN + strlen(CAS_PACK_SUFFIX) &&
         !strcmp(name + CAS_HEX_LEN, CAS_PACK_SUFFIX) && cas_unhex_n(name, id) == 0;
}

/* Load one pack by name. NULL with *why set when it cannot be used. */
static struct cas_pack *pack_load(int dirfd, const char *name, const unsigned char id[32],
                                  const char **why) {
  int fd = cas_openat_noatime(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    *why = errno == ELOOP ? "it is a symlink, not a regular file" : strerror(errno);
    return NULL;
  }
  struct stat st = {0};
  unsigned char header[CAS_PACK_HEADER_LEN], trailer[CAS_PACK_TRAILER_LEN];
  uint64_t index_offset = 0, count = 0;
  struct cas_pack *p = NULL;
  unsigned char *index = NULL;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    *why = S_ISFIFO(st.st_mode) ? "it is a FIFO, not a regular file" : "not a regular file";
    goto fail;
  }
  uint64_t size = (uint64_t)st.st_size;
  *why = "too short to be a pack";
  if (size < CAS_PACK_HEADER_LEN + CAS_PACK_TRAILER_LEN ||
      fs_pread_all(fd, header, sizeof(header), 0) < 0 ||
      fs_pread_all(fd, trailer, sizeof(trailer), size - CAS_PACK_TRAILER_LEN) < 0)
    goto fail;
  if ((*why = cas_pack_check_header(header)) ||
      (*why = cas_pack_parse_trailer(trailer, size, &index_offset, &count)))
    goto fail;
  p = calloc(1, sizeof(*p));
  index = malloc(count * CAS_PACK_ENTRY_LEN + 1);
  if (p)
    p->entries = malloc((count ? count : 1) * sizeof(*p->entries));
  if (!p || !index || !p->entries) {
    *why = "out of memory";
    goto fail;
  }
  if (fs_pread_all(fd, index, count * CAS_PACK_ENTRY_LEN, index_offset) < 0) {
    *why = "cannot read the index";
    goto fail;
  }
  if ((*why = cas_pack_parse_index(index, count, index_offset, p->entries)))
    goto fail;
  free(index);
  memcpy(p->id, id, CAS_DIGEST_LEN);
  p->fd = fd;
  p->size = size;
  p->index_offset = index_offset;
  p->count = count;
  p->dev = st.st_dev;
  p->ino = st.st_ino;
  return p;
fail:
  free(index);
  if (p) {
    p->fd = -1;
    pack_free(p);
  }
  close(fd);
  return NULL;
}

/* With the write lock held. */
static int refresh_locked(struct cordon_cas *cas, struct cordon_error **err) {
  struct cas_pack_set *s = &cas->packs;
  int fd = openat(s->dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0)
      close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: %s", cas->dir, CAS_PACK_DIR);
  }
  bool *seen = calloc(s->n + 1, sizeof(bool));
  if (!seen) {
    closedir(d);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "store %s", cas->dir);
  }
  strv_free(s->problems);
  s->problems = NULL;
  size_t known = s->n;
  struct dirent *de;
  int r = 0;
  while ((errno = 0, de = readdir(d))) {
    unsigned char id[CAS_DIGEST_LEN];
    if (!pack_file_name(de->d_name, id))
      continue; /* verify reports strangers; lookups ignore them */
    size_t i = 0;
    while (i < known && (s->packs[i]->gone || memcmp(s->packs[i]->id, id, CAS_DIGEST_LEN)))
      i++;
    struct stat st;
    /* The same file as the one loaded: nothing to do. Another file under the same name (put
     * there by someone else) is loaded afresh, so what is read is what is on disk now. */
    if (i < known && fstatat(s->dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        st.st_dev == s->packs[i]->dev && st.st_ino == s->packs[i]->ino) {
      seen[i] = true;
      continue;
    }
    const char *why = NULL;
    struct cas_pack *p = pack_load(s->dirfd, de->d_name, id, &why);
    if (!p) {
      char *msg = NULL;
      if (asprintf(&msg, "%s/%s is unreadable: %s", CAS_PACK_DIR, de->d_name, why) < 0 ||
          strv_push_take(&s->problems, msg) < 0)
        r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "store %s", cas->dir);
      if (r < 0)
        break;
      continue;
    }
    if (set_add(s, p) < 0) {
      pack_free(p);
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "store %s", cas->dir);
      break;
    }
  }
  if (r == 0 && errno)
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: %s", cas->dir, CAS_PACK_DIR);
  closedir(d);
  if (r == 0) {
    for (size_t i = 0; i < known; i++)
      if (!seen[i])
        mark_gone_locked(s->packs[i]); /* closed once no reader holds it */
    __atomic_store_n(&s->scanned, true, __ATOMIC_RELEASE);
  }
  free(seen);
  return r;
}

int cas_packs_refresh(struct cordon_cas *cas, struct cordon_error **err) {
  pthread_rwlock_wrlock(&cas->packs.lock);
  int r = refresh_locked(cas, err);
  pthread_rwlock_unlock(&cas->packs.lock);
  return r;
}

static const struct cas_pack_entry *pack_lookup(const struct cas_pack *p,
                                                const unsigned char digest[CAS_DIGEST_LEN]) {
  size_t lo = 0, hi = p->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = memcmp(p->entries[mid].digest, digest, CAS_DIGEST_LEN);
    if (c == 0)
      return &p->entries[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

int cas_packs_find(struct cordon_cas *cas, const unsigned char digest[CAS_DIGEST_LEN],
                   uint64_t *offset, uint64_t *length, struct cas_pack **held) {
  struct cas_pack_set *s = &cas->packs;
  if (!__atomic_load_n(&s->scanned, __ATOMIC_ACQUIRE)) {
    struct cordon_error *ignored = NULL;
    pthread_rwlock_wrlock(&s->lock);
    if (!s->scanned)
      refresh_locked(cas, &ignored); /* a failed scan finds nothing; readers fall back */
    pthread_rwlock_unlock(&s->lock);
    cordon_error_free(ignored);
  }
  int found = 0;
  pthread_rwlock_rdlock(&s->lock);
  for (size_t i = s->n; i-- > 0 && !found;) { /* newest first */
    struct cas_pack *p = s->packs[i];
    if (p->gone)
      continue;
    const struct cas_pack_entry *e = pack_lookup(p, digest);
    if (e) {
      *offset = e->offset;
      *length = e->length;
      if (held) {
        hold(p); /* under the read lock: it cannot become gone before this */
        *held = p;
      }
      found = 1;
    }
  }
  pthread_rwlock_unlock(&s->lock);
  return found;
}

char *cas_packs_problem(struct cordon_cas *cas) {
  pthread_rwlock_rdlock(&cas->packs.lock);
  char *p = cas->packs.problems && cas->packs.problems[0] ? strdup(cas->packs.problems[0]) : NULL;
  pthread_rwlock_unlock(&cas->packs.lock);
  return p;
}

char **cas_packs_problems(struct cordon_cas *cas) {
  pthread_rwlock_rdlock(&cas->packs.lock);
  char **copy = strv_copy((const char *const *)cas->packs.problems);
  pthread_rwlock_unlock(&cas->packs.lock);
  return copy;
}

const char *cas_pack_check_structure(const struct cas_pack *p) {
  size_t tail_len = p->size - p->index_offset;
  unsigned char *tail = malloc(tail_len);
  if (!tail)
    return "out of memory";
  unsigned char id[CAS_DIGEST_LEN];
  const char *why = NULL;
  if (fs_pread_all(p->fd, tail, tail_len, p->index_offset) < 0)
    why = "cannot read the index";
  else if (cas_sha256(tail, tail_len, id) < 0)
    why = "out of memory";
  else if (memcmp(id, p->id, CAS_DIGEST_LEN) != 0)
    why = "its index does not hash to its name";
  free(tail);
  return why ? why : cas_pack_check_tiling(p->entries, p->count, p->index_offset);
}

int cas_packs_list(struct cordon_cas *cas, struct cas_pack ***out, size_t *n,
                   struct cordon_error **err) {
  struct cas_pack_set *s = &cas->packs;
  pthread_rwlock_wrlock(&s->lock);
  int r = refresh_locked(cas, err);
  struct cas_pack **list = NULL;
  size_t count = 0;
  if (r == 0) {
    list = calloc(s->n + 1, sizeof(*list));
    if (!list)
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "store %s", cas->dir);
    for (size_t i = 0; list && i < s->n; i++)
      if (!s->packs[i]->gone) {
        hold(s->packs[i]);
        list[count++] = s->packs[i];
      }
  }
  pthread_rwlock_unlock(&s->lock);
  *out = list;
  *n = count;
  return r;
}

void cas_packs_list_free(struct cordon_cas *cas, struct cas_pack **list, size_t n) {
  for (size_t i = 0; list && i < n; i++)
    cas_pack_release(cas, list[i]);
  free(list);
}

int cas_packs_remove(struct cordon_cas *cas, struct cas_pack *p, struct cordon_error **err) {
  char name[CAS_HEX_LEN + 8];
  pack_name(p->id, name);
  if (unlinkat(cas->packs.dirfd, name, 0) < 0 && errno != ENOENT)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "store %s: cannot remove pack %s",
                            cas->dir, name);
  pthread_rwlock_wrlock(&cas->packs.lock);
  mark_gone_locked(p);
  pthread_rwlock_unlock(&cas->packs.lock);
  return 0;
}
