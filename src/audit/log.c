/* The audit log on disk: segments, the append lock, durable appends, offline verification,
 * repair of a torn tail, and walking entries. The line format and its HMAC live in entry.c.
 *
 * Layout of <dir>: audit-NNNNNN.jsonl segments (numbered from 1, no gaps), "lock" (the flock
 * target; appends hold it exclusively, readers shared). A new segment is created complete with
 * its first line (O_EXCL temp file, fsync, link into place), so a segment is never empty or
 * half-made; lines are added to the newest segment with O_APPEND writes and fdatasync, and a
 * failed write is truncated away.
 *
 * A project's log is bound to the project: its chain begins from the project's id (the first
 * entry's prev), which verify checks and every handle checks once before it first extends a
 * chain, so another project's log (same install key) is neither accepted nor continued. The log
 * knows no projects: it is given the id, or a function that reads (or makes) it when first
 * needed (audit_open_bound); cordon_audit_open_project lives with the project context in
 * src/protocol/context.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include <cordon/audit.h>
#include <cordon/keys.h>

#include "audit/entry.h"
#include "audit/log.h"
#include "base/cleanup.h"
#include "base/fs.h"

#define LOCK_NAME "lock"
#define SEGMENT_PREFIX "audit-"
#define SEGMENT_SUFFIX ".jsonl"
#define READ_CHUNK (4u * 1024u * 1024u)

struct cordon_audit_log {
  char *dir;
  char *key_dir;
  uint64_t rotate_bytes;
  struct crypto_hmac *key; /* loaded on first need */
  /* The chain's genesis: the first entry's prev. A project id, AUDIT_GENESIS when the log is
   * bound to no project; "" while a project's id is not known (asked of genesis_fn, made at
   * the first append). */
  char genesis[CORDON_AUDIT_HMAC_HEX_LEN + 1];
  audit_genesis_fn genesis_fn; /* reads the genesis lazily, with genesis_source */
  char *genesis_source;
  bool bound;         /* bound to a project: the chain's start is checked */
  bool start_checked; /* this handle saw the chain begin from the genesis */
};

static bool valid_project_id(const char *id) {
  return id && crypto_is_sha256_hex(id) && strcmp(id, AUDIT_GENESIS) != 0;
}

/* ---- open / close ------------------------------------------------------------------------- */

int cordon_audit_open(const char *dir, const struct cordon_audit_options *opts,
                      struct cordon_audit_log **out, struct cordon_error **err) {
  struct cordon_audit_log *log = calloc(1, sizeof(*log));
  if (!log || !(log->dir = strdup(dir)) ||
      (opts && opts->key_dir && !(log->key_dir = strdup(opts->key_dir)))) {
    cordon_audit_close(log);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "audit log");
  }
  log->rotate_bytes =
      opts && opts->rotate_bytes ? opts->rotate_bytes : CORDON_AUDIT_DEFAULT_ROTATE_BYTES;
  memcpy(log->genesis, AUDIT_GENESIS, sizeof(log->genesis));
  if (opts && opts->project_id) {
    if (!valid_project_id(opts->project_id)) {
      cordon_audit_close(log);
      return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                              "audit log %s: project id '%.80s' is not 64 lowercase hex digits "
                              "(not all zero)",
                              dir, opts->project_id);
    }
    memcpy(log->genesis, opts->project_id, sizeof(log->genesis));
    log->bound = true;
  }
  *out = log;
  return 0;
}

int audit_open_bound(const char *dir, const struct cordon_audit_options *opts,
                     audit_genesis_fn genesis_fn, const char *genesis_source,
                     struct cordon_audit_log **out, struct cordon_error **err) {
  if (cordon_audit_open(dir, opts, out, err) < 0)
    return -1;
  struct cordon_audit_log *log = *out;
  if (!log->bound) { /* the genesis, known once read (or made) */
    log->bound = true;
    log->genesis[0] = 0;
    log->genesis_fn = genesis_fn;
    if (!(log->genesis_source = strdup(genesis_source))) {
      cordon_audit_close(log);
      *out = NULL;
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "audit log");
    }
  }
  return 0;
}

/* Learn the genesis when it is read lazily; create: make it if there is none. */
static int resolve_genesis(struct cordon_audit_log *log, bool create, struct cordon_error **err) {
  if (log->genesis[0] || !log->genesis_fn)
    return 0;
  char id[CORDON_AUDIT_HMAC_HEX_LEN + 1];
  int r = log->genesis_fn(log->genesis_source, create, id, err);
  if (r < 0)
    return cordon_error_prefix(err, "audit log %s", log->dir);
  if (r > 0)
    memcpy(log->genesis, id, sizeof(log->genesis));
  return 0;
}

void cordon_audit_close(struct cordon_audit_log *log) {
  if (!log)
    return;
  crypto_hmac_free(log->key);
  free(log->dir);
  free(log->key_dir);
  free(log->genesis_source);
  free(log);
}

const char *cordon_audit_dir(const struct cordon_audit_log *log) {
  return log->dir;
}

static int load_key(struct cordon_audit_log *log, bool create, struct cordon_error **err) {
  if (log->key)
    return 0;
  uint8_t raw[CORDON_AUDIT_KEY_LEN];
  if (cordon_audit_key_load(log->key_dir, create, raw, err) < 0)
    return cordon_error_prefix(err, "audit key");
  int r = crypto_hmac_new(raw, sizeof(raw), &log->key, err);
  OPENSSL_cleanse(raw, sizeof(raw));
  return r;
}

const char *cordon_audit_problem_name(enum cordon_audit_problem problem) {
  switch (problem) {
  case CORDON_AUDIT_OK: return "ok";
  case CORDON_AUDIT_BAD_HMAC: return "bad_hmac";
  case CORDON_AUDIT_BROKEN_LINK: return "broken_link";
  case CORDON_AUDIT_MALFORMED: return "malformed";
  case CORDON_AUDIT_MISSING_NEWLINE: return "missing_newline";
  case CORDON_AUDIT_MISSING_SEGMENT: return "missing_segment";
  case CORDON_AUDIT_FOREIGN_PROJECT: return "foreign_project";
  case CORDON_AUDIT_UNBOUND: return "unbound";
  }
  return "unknown";
}

void cordon_audit_report_clear(struct cordon_audit_report *report) {
  if (!report)
    return;
  free(report->file);
  free(report->reason);
  memset(report, 0, sizeof(*report));
}

/* ---- segments ----------------------------------------------------------------------------- */

static void segment_name(uint64_t number, char out[64]) {
  snprintf(out, 64, SEGMENT_PREFIX "%06" PRIu64 SEGMENT_SUFFIX, number);
}

/* Only names segment_name() would produce count: no sign, no stray zeros, no other suffix. */
static bool parse_segment_name(const char *name, uint64_t *number) {
  size_t n = strlen(name), pl = strlen(SEGMENT_PREFIX), sl = strlen(SEGMENT_SUFFIX);
  if (n <= pl + sl || n > 40 || strncmp(name, SEGMENT_PREFIX, pl) ||
      strcmp(name + n - sl, SEGMENT_SUFFIX))
    return false;
  uint64_t v = 0;
  for (size_t i = pl; i < n - sl; i++) {
    if (name[i] < '0' || name[i] > '9' || v > UINT64_MAX / 10 - 1)
      return false;
    v = v * 10 + (uint64_t)(name[i] - '0');
  }
  char canonical[64];
  segment_name(v, canonical);
  if (v == 0 || strcmp(canonical, name))
    return false;
  *number = v;
  return true;
}

static int compare_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Sorted segment numbers found in dirfd. With clean (only under the exclusive lock), temp
 * files left by a segment creation that crashed are removed. */
static int list_segments(int dirfd, const char *dir, bool clean, uint64_t **out, size_t *count,
                         struct cordon_error **err) {
  int fd = dup(dirfd);
  DIR *d = fd < 0 ? NULL : fdopendir(fd);
  if (!d) {
    if (fd >= 0)
      close(fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot list %s", dir);
  }
  rewinddir(d);
  uint64_t *numbers = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    uint64_t number;
    if (clean && !strncmp(e->d_name, "." SEGMENT_PREFIX, strlen("." SEGMENT_PREFIX)) &&
        strstr(e->d_name, SEGMENT_SUFFIX ".tmp-"))
      unlinkat(dirfd, e->d_name, 0);
    if (!parse_segment_name(e->d_name, &number))
      continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      uint64_t *grown = realloc(numbers, cap * sizeof(*numbers));
      if (!grown) {
        free(numbers);
        closedir(d);
        return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", dir);
      }
      numbers = grown;
    }
    numbers[n++] = number;
  }
  closedir(d);
  if (n)
    qsort(numbers, n, sizeof(*numbers), compare_u64);
  *out = numbers;
  *count = n;
  return 0;
}

static int open_segment(int dirfd, uint64_t number, int flags, const char *dir,
                        struct cordon_error **err) {
  char name[64];
  segment_name(number, name);
  int fd = openat(dirfd, name, flags | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s/%s", dir, name);
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0, "%s/%s is not a regular file", dir, name);
  }
  return fd;
}

/* 1-based number of the line that starts at offset (counts newlines before it). */
static uint64_t line_number_at(int fd, uint64_t offset) {
  char buf[65536];
  uint64_t lines = 1, pos = 0;
  while (pos < offset) {
    size_t want = offset - pos < sizeof(buf) ? (size_t)(offset - pos) : sizeof(buf);
    ssize_t n = pread(fd, buf, want, (off_t)pos);
    if (n <= 0)
      break;
    for (ssize_t i = 0; i < n; i++)
      lines += buf[i] == '\n';
    pos += (uint64_t)n;
  }
  return lines;
}

/* ---- locking ------------------------------------------------------------------------------ */

static int lock_fd(int fd, int op, const char *dir, struct cordon_error **err) {
  while (flock(fd, op) < 0) {
    if (errno != EINTR)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot lock %s/" LOCK_NAME, dir);
  }
  return 0;
}

/* ---- the tail ----------------------------------------------------------------------------- */

struct tail {
  bool empty;       /* no entries at all */
  uint64_t segment; /* newest segment number (0: none) */
  uint64_t size;    /* its size */
  char hmac[CORDON_AUDIT_HMAC_HEX_LEN + 1];
};

/* Find the newest entry and check it: a complete line, well formed, HMAC valid. Segments that
 * are empty (only possible when truncated by hand) are skipped back over. */
static int read_tail(struct cordon_audit_log *log, int dirfd, const uint64_t *segments,
                     size_t count, struct tail *t, struct cordon_error **err) {
  memset(t, 0, sizeof(*t));
  t->empty = true;
  memcpy(t->hmac, AUDIT_GENESIS, sizeof(t->hmac));
  if (count == 0)
    return 0;
  t->segment = segments[count - 1];
  for (size_t i = count; i-- > 0;) {
    _cleanup_close_ int fd = open_segment(dirfd, segments[i], O_RDONLY, log->dir, err);
    if (fd < 0)
      return -1;
    struct stat st;
    if (fstat(fd, &st) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s", log->dir);
    uint64_t size = (uint64_t)st.st_size;
    if (i == count - 1)
      t->size = size;
    if (size == 0)
      continue;
    char name[64];
    segment_name(segments[i], name);
    size_t want = size < CORDON_AUDIT_MAX_LINE + 2 ? (size_t)size : CORDON_AUDIT_MAX_LINE + 2;
    uint64_t start = size - want;
    _cleanup_free_ char *buf = malloc(want + 1);
    if (!buf)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", name);
    if (fs_pread_all(fd, buf, want, start) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno ? errno : EIO, "cannot read %s/%s",
                              log->dir, name);
    if (buf[want - 1] != '\n') {
      char *nl = memrchr(buf, '\n', want);
      uint64_t line_start = nl ? start + (uint64_t)(nl - buf) + 1 : start;
      return cordon_error_set(
          err, CORDON_ERR_INTEGRITY, 0,
          "audit log %s/%s: line %" PRIu64 " (byte %" PRIu64 ") is torn: %" PRIu64
          " bytes without a final newline, left by an interrupted append; "
          "'cordon audit repair' drops it",
          log->dir, name, line_number_at(fd, line_start), line_start, size - line_start);
    }
    char *nl = want > 1 ? memrchr(buf, '\n', want - 1) : NULL;
    if (!nl && start > 0)
      return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                              "audit log %s/%s: the last line is longer than the bound", log->dir,
                              name);
    size_t line_offset = nl ? (size_t)(nl - buf) + 1 : 0;
    if (load_key(log, false, err) < 0)
      return cordon_error_prefix(err,
                                 "the audit log %s has entries made with a key that is "
                                 "needed to go on",
                                 log->dir);
    char prev[CORDON_AUDIT_HMAC_HEX_LEN + 1], reason[AUDIT_REASON_MAX];
    enum cordon_audit_problem p = audit_line_check(log->key, buf + line_offset,
                                                   want - 1 - line_offset, prev, t->hmac, reason);
    if (p != CORDON_AUDIT_OK)
      return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                              "audit log %s/%s: refusing to extend the chain: line %" PRIu64
                              " is bad (%s: %s); run 'cordon audit verify'",
                              log->dir, name, line_number_at(fd, start + line_offset),
                              cordon_audit_problem_name(p), reason);
    t->empty = false;
    return 0;
  }
  return 0;
}

/* ---- the chain's start ------------------------------------------------------------------- */

/* Before a handle first extends a non-empty chain bound to a project: the first line of the
 * first segment must be a valid entry whose prev is the project's id. Read in growing chunks:
 * a first line is usually short. torn_ok: a first segment without one whole line (a torn first
 * append, which repair is about to drop) passes unchecked. */
static int check_chain_start(struct cordon_audit_log *log, int dirfd, const uint64_t *segments,
                             size_t count, bool torn_ok, struct cordon_error **err) {
  char name[64];
  segment_name(1, name);
  if (count == 0 || segments[0] != 1)
    return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                            "audit log %s: refusing to extend the chain: its first segment %s is "
                            "missing; run 'cordon audit verify'",
                            log->dir, name);
  _cleanup_close_ int fd = open_segment(dirfd, 1, O_RDONLY, log->dir, err);
  if (fd < 0)
    return -1;
  size_t have = 0, cap = 4096;
  _cleanup_free_ char *buf = NULL;
  char *nl = NULL;
  while (!nl) {
    char *grown = realloc(buf, cap);
    if (!grown)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", name);
    buf = grown;
    ssize_t n = pread(fd, buf + have, cap - have, (off_t)have);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot read %s/%s", log->dir, name);
    nl = memchr(buf + have, '\n', (size_t)n);
    have += (size_t)n;
    if (!nl && n == 0 && torn_ok && count == 1)
      return 0;
    if (!nl && (n == 0 || have > CORDON_AUDIT_MAX_LINE))
      return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                              "audit log %s/%s: refusing to extend the chain: its first line is "
                              "not a whole entry; run 'cordon audit verify'",
                              log->dir, name);
    if (have == cap)
      cap *= 2;
  }
  char prev[CORDON_AUDIT_HMAC_HEX_LEN + 1], hmac[CORDON_AUDIT_HMAC_HEX_LEN + 1];
  char reason[AUDIT_REASON_MAX + 2 * CORDON_AUDIT_HMAC_HEX_LEN];
  enum cordon_audit_problem p =
      audit_line_check(log->key, buf, (size_t)(nl - buf), prev, hmac, reason);
  if (p == CORDON_AUDIT_OK)
    p = audit_genesis_check(prev, log->genesis, reason, sizeof(reason));
  if (p != CORDON_AUDIT_OK)
    return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                            "audit log %s: refusing to extend the chain: %s: %s", log->dir,
                            cordon_audit_problem_name(p), reason);
  log->start_checked = true;
  return 0;
}

/* ---- appending ---------------------------------------------------------------------------- */

/* A run of lines bound for one segment. */
struct chunk {
  uint64_t segment;
  bool create; /* a new segment, made whole with these lines */
  size_t start, end;
};

static int create_segment(int dirfd, const char *dir, uint64_t number, const char *data,
                          size_t length, struct cordon_error **err) {
  char name[64];
  segment_name(number, name);
  /* No replace: a segment of that number already there means another writer broke the lock. */
  _cleanup_fs_temp_ struct fs_temp t = FS_TEMP_INIT;
  if (fs_temp_create(dirfd, name, 0600, &t, err) < 0)
    return -1;
  if (fs_write_all(t.fd, data, length) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s/%s", dir, name);
  int r = fs_temp_commit(&t, name, FS_COMMIT_NO_REPLACE, err);
  if (r == 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, EEXIST, "cannot create %s/%s", dir, name);
  return r < 0 ? -1 : 0;
}

static int append_to_segment(int dirfd, const char *dir, uint64_t number, const char *data,
                             size_t length, struct cordon_error **err) {
  _cleanup_close_ int fd = open_segment(dirfd, number, O_WRONLY | O_APPEND, dir, err);
  if (fd < 0)
    return -1;
  struct stat st;
  if (fstat(fd, &st) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s", dir);
  if (fs_write_all(fd, data, length) < 0 || fdatasync(fd) < 0) {
    int saved = errno;
    /* Leave no partial line behind: the chain must end on a whole entry. */
    if (ftruncate(fd, st.st_size) == 0)
      fdatasync(fd);
    char name[64];
    segment_name(number, name);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, saved, "cannot append to %s/%s", dir, name);
  }
  return 0;
}

/* Append with the exclusive lock held. */
static int append_locked(struct cordon_audit_log *log, int dirfd,
                         const struct cordon_audit_event *events, size_t count, char *last_hmac,
                         struct cordon_error **err) {
  _cleanup_free_ uint64_t *segments = NULL;
  size_t n_segments = 0;
  if (list_segments(dirfd, log->dir, true, &segments, &n_segments, err) < 0)
    return -1;
  struct tail t;
  if (read_tail(log, dirfd, segments, n_segments, &t, err) < 0)
    return -1;
  if (load_key(log, t.empty, err) < 0 || resolve_genesis(log, true, err) < 0)
    return -1;
  if (t.empty)
    memcpy(t.hmac, log->genesis, sizeof(t.hmac)); /* the chain begins from it */
  else if (log->bound && !log->start_checked &&
           check_chain_start(log, dirfd, segments, n_segments, false, err) < 0)
    return -1;

  struct jcs_buf lines = {0};
  struct chunk *chunks = calloc(count + 1, sizeof(*chunks));
  int r = -1;
  if (!chunks) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "audit append");
    goto out;
  }
  size_t n_chunks = 0;
  uint64_t segment = t.segment ? t.segment : 1, size = t.segment ? t.size : 0;
  bool create = t.segment == 0;
  char prev[CORDON_AUDIT_HMAC_HEX_LEN + 1];
  memcpy(prev, t.hmac, sizeof(prev));
  for (size_t i = 0; i < count; i++) {
    json_t *details = NULL;
    if (audit_event_check(&events[i], &details, err) < 0)
      goto out;
    size_t before = lines.length;
    char hmac[CORDON_AUDIT_HMAC_HEX_LEN + 1];
    int b = audit_entry_build(log->key, &events[i], details, prev, &lines, hmac, err);
    json_decref(details);
    if (b < 0)
      goto out;
    size_t line_length = lines.length - before;
    /* Rotate before a line that would take a non-empty segment past the bound. */
    if (size > 0 && size + line_length > log->rotate_bytes) {
      segment++;
      size = 0;
      create = true;
    }
    if (n_chunks == 0 || chunks[n_chunks - 1].segment != segment)
      chunks[n_chunks++] = (struct chunk){segment, create, before, before};
    chunks[n_chunks - 1].end = lines.length;
    size += line_length;
    create = false;
    memcpy(prev, hmac, sizeof(prev));
  }
  for (size_t i = 0; i < n_chunks; i++) {
    const struct chunk *c = &chunks[i];
    int w = c->create ? create_segment(dirfd, log->dir, c->segment, lines.data + c->start,
                                       c->end - c->start, err)
                      : append_to_segment(dirfd, log->dir, c->segment, lines.data + c->start,
                                          c->end - c->start, err);
    if (w < 0)
      goto out;
  }
  if (last_hmac)
    memcpy(last_hmac, prev, sizeof(prev));
  r = 0;
out:
  free(chunks);
  jcs_buf_free(&lines);
  return r;
}

static int open_dir_locked(struct cordon_audit_log *log, bool exclusive, int *dirfd_out,
                           int *lockfd_out, struct cordon_error **err) {
  *dirfd_out = *lockfd_out = -1;
  if (exclusive && fs_mkdir_p(log->dir, 0700, err) < 0)
    return cordon_error_prefix(err, "audit log");
  int dirfd = open(log->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0) {
    if (!exclusive && errno == ENOENT)
      return 0; /* no log yet */
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open audit log %s", log->dir);
  }
  int lockfd = exclusive ? openat(dirfd, LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)
                         : openat(dirfd, LOCK_NAME, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (lockfd < 0 && (exclusive || errno != ENOENT)) {
    int saved = errno;
    close(dirfd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, saved, "cannot open %s/" LOCK_NAME, log->dir);
  }
  /* A copied log without its lock file is read unlocked: nobody appends to it. */
  if (lockfd >= 0 && lock_fd(lockfd, exclusive ? LOCK_EX : LOCK_SH, log->dir, err) < 0) {
    close(lockfd);
    close(dirfd);
    return -1;
  }
  *dirfd_out = dirfd;
  *lockfd_out = lockfd;
  return 0;
}

int cordon_audit_append_many(struct cordon_audit_log *log, const struct cordon_audit_event *events,
                             size_t count, char *last_hmac, struct cordon_error **err) {
  if (count == 0)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "audit append: no entries");
  _cleanup_close_ int dirfd = -1, lockfd = -1;
  if (open_dir_locked(log, true, &dirfd, &lockfd, err) < 0)
    return -1;
  return append_locked(log, dirfd, events, count, last_hmac, err);
}

int cordon_audit_append(struct cordon_audit_log *log, const struct cordon_audit_event *event,
                        char *hmac, struct cordon_error **err) {
  return cordon_audit_append_many(log, event, 1, hmac, err);
}

/* ---- reading every line ------------------------------------------------------------------- */

/* A line handed to a walker: where it is and its bytes (without the newline). */
struct line_ref {
  const char *file;
  uint64_t segment_index; /* 0-based position in the segment list */
  uint64_t line;
  uint64_t offset;
  const char *data;
  size_t length;
  bool torn; /* no final newline */
};

/* Returns < 0 to stop with an error, 1 to stop quietly, 0 to go on. */
typedef int (*line_fn)(const struct line_ref *ref, void *userdata, struct cordon_error **err);

/* Call fn for every line of one segment. */
static int walk_segment(int fd, const char *path, uint64_t segment_index, line_fn fn,
                        void *userdata, struct cordon_error **err) {
  size_t cap = READ_CHUNK + CORDON_AUDIT_MAX_LINE + 2;
  _cleanup_free_ char *buf = malloc(cap);
  if (!buf)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", path);
  size_t have = 0;
  uint64_t file_offset = 0, line = 1; /* offset of buf[0] in the file */
  bool eof = false;
  for (;;) {
    if (!eof) {
      while (have < cap) {
        ssize_t n = read(fd, buf + have, cap - have);
        if (n < 0 && errno == EINTR)
          continue;
        if (n < 0)
          return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot read %s", path);
        if (n == 0) {
          eof = true;
          break;
        }
        have += (size_t)n;
        if (have >= READ_CHUNK)
          break;
      }
    }
    size_t pos = 0;
    for (;;) {
      char *nl = memchr(buf + pos, '\n', have - pos);
      if (!nl)
        break;
      size_t length = (size_t)(nl - (buf + pos));
      struct line_ref ref = {path,      segment_index, line, file_offset + pos,
                             buf + pos, length,        false};
      int r = fn(&ref, userdata, err);
      if (r != 0)
        return r;
      pos += length + 1;
      line++;
    }
    memmove(buf, buf + pos, have - pos);
    have -= pos;
    file_offset += pos;
    if (eof) {
      if (have == 0)
        return 0;
      struct line_ref ref = {path, segment_index, line, file_offset, buf, have, true};
      return fn(&ref, userdata, err);
    }
    if (have > CORDON_AUDIT_MAX_LINE) {
      /* Hand over the bound's worth: the checker reports it as too long. */
      struct line_ref ref = {path, segment_index, line, file_offset, buf, have, false};
      int r = fn(&ref, userdata, err);
      return r ? r : 1;
    }
  }
}

struct walk_state {
  uint64_t *segments;
  size_t count;
  uint64_t missing; /* first missing segment number, 0: none */
};

/* Open the log for reading (shared lock) and list its segments. A missing directory is an
 * empty log. */
static int open_for_reading(struct cordon_audit_log *log, int *dirfd, int *lockfd,
                            struct walk_state *w, struct cordon_error **err) {
  memset(w, 0, sizeof(*w));
  if (open_dir_locked(log, false, dirfd, lockfd, err) < 0)
    return -1;
  if (*dirfd < 0)
    return 0;
  if (list_segments(*dirfd, log->dir, false, &w->segments, &w->count, err) < 0)
    return -1;
  for (size_t i = 0; i < w->count; i++)
    if (w->segments[i] != i + 1) {
      w->missing = i + 1;
      break;
    }
  return 0;
}

static int walk_lines(struct cordon_audit_log *log, int dirfd, const struct walk_state *w,
                      size_t segment_count, line_fn fn, void *userdata, struct cordon_error **err) {
  for (size_t i = 0; i < segment_count; i++) {
    char name[64];
    segment_name(w->segments[i], name);
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s/%s", log->dir, name) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "%s", name);
    _cleanup_close_ int fd = open_segment(dirfd, w->segments[i], O_RDONLY, log->dir, err);
    if (fd < 0)
      return -1;
    int r = walk_segment(fd, path, i, fn, userdata, err);
    if (r != 0)
      return r;
  }
  return 0;
}

/* ---- verify ------------------------------------------------------------------------------- */

struct verify_state {
  struct cordon_audit_log *log;
  struct cordon_audit_report *report;
  char expected_prev[CORDON_AUDIT_HMAC_HEX_LEN + 1];
};

static int report_problem(struct cordon_audit_report *report, enum cordon_audit_problem problem,
                          const char *file, uint64_t line, uint64_t offset, const char *reason) {
  report->problem = problem;
  report->file = file ? strdup(file) : NULL;
  report->line = line;
  report->offset = offset;
  report->entry = report->entries + 1;
  report->reason = strdup(reason);
  return 1;
}

static int verify_line(const struct line_ref *ref, void *userdata, struct cordon_error **err) {
  struct verify_state *s = userdata;
  char prev[CORDON_AUDIT_HMAC_HEX_LEN + 1], hmac[CORDON_AUDIT_HMAC_HEX_LEN + 1];
  char reason[AUDIT_REASON_MAX];
  if (ref->torn) {
    snprintf(reason, sizeof(reason), "no final newline: %zu bytes of a torn append", ref->length);
    return report_problem(s->report, CORDON_AUDIT_MISSING_NEWLINE, ref->file, ref->line,
                          ref->offset, reason);
  }
  enum cordon_audit_problem p =
      audit_line_check(s->log->key, ref->data, ref->length, prev, hmac, reason);
  if (p != CORDON_AUDIT_OK)
    return report_problem(s->report, p, ref->file, ref->line, ref->offset, reason);
  if (s->report->entries == 0) {
    if (strcmp(prev, AUDIT_GENESIS))
      memcpy(s->report->project_id, prev, sizeof(prev));
    char why[AUDIT_REASON_MAX + 2 * CORDON_AUDIT_HMAC_HEX_LEN];
    if (s->log->bound && (p = audit_genesis_check(prev, s->expected_prev, why, sizeof(why))))
      return report_problem(s->report, p, ref->file, ref->line, ref->offset, why);
  }
  if (strcmp(prev, s->expected_prev)) {
    snprintf(reason, sizeof(reason),
             "prev %.12s... is not the HMAC of the entry before it (%.12s...): an entry was "
             "removed, reordered or inserted",
             prev, s->expected_prev);
    return report_problem(s->report, CORDON_AUDIT_BROKEN_LINK, ref->file, ref->line, ref->offset,
                          reason);
  }
  memcpy(s->expected_prev, hmac, sizeof(hmac));
  memcpy(s->report->head, hmac, sizeof(hmac));
  s->report->entries++;
  (void)err;
  return 0;
}

/* Defined with foreach, below: an entry handed to a caller's function. */
struct foreach_state;
static int foreach_line(const struct line_ref *ref, void *userdata, struct cordon_error **err);

struct verified_walk {
  struct verify_state verify;
  struct foreach_state *each; /* NULL: verify only */
};

/* A line is handed on only after it verified: its HMAC, and its place in the chain. */
static int verify_then_each(const struct line_ref *ref, void *userdata, struct cordon_error **err) {
  struct verified_walk *v = userdata;
  int r = verify_line(ref, &v->verify, err);
  if (r != 0 || !v->each)
    return r;
  return foreach_line(ref, v->each, err);
}

static int verify_walk(struct cordon_audit_log *log, struct cordon_audit_report *report,
                       struct foreach_state *each, struct cordon_error **err) {
  memset(report, 0, sizeof(*report));
  memcpy(report->head, AUDIT_GENESIS, sizeof(report->head));
  _cleanup_close_ int dirfd = -1, lockfd = -1;
  struct walk_state w;
  if (open_for_reading(log, &dirfd, &lockfd, &w, err) < 0)
    return -1;
  report->segments = w.count;
  if (w.count == 0) {
    free(w.segments);
    return 0;
  }
  if (load_key(log, false, err) < 0 || resolve_genesis(log, false, err) < 0) {
    free(w.segments);
    return -1;
  }
  struct verified_walk s = {.verify = {.log = log, .report = report}, .each = each};
  memcpy(s.verify.expected_prev, log->genesis, sizeof(s.verify.expected_prev));
  size_t walk_count = w.missing ? w.missing - 1 : w.count;
  int r = walk_lines(log, dirfd, &w, walk_count, verify_then_each, &s, err);
  if (r == 0 && w.missing) {
    char name[64], reason[AUDIT_REASON_MAX + 64];
    segment_name(w.missing, name);
    snprintf(reason, sizeof(reason), "segment %s is missing (the newest is number %" PRIu64 ")",
             name, w.segments[w.count - 1]);
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s/%s", log->dir, name) >= 0)
      report_problem(report, CORDON_AUDIT_MISSING_SEGMENT, path, 0, 0, reason);
  }
  free(w.segments);
  if (r < 0)
    return -1;
  if (report->problem != CORDON_AUDIT_OK && !report->reason)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "audit verify");
  return 0;
}

int cordon_audit_verify(struct cordon_audit_log *log, struct cordon_audit_report *report,
                        struct cordon_error **err) {
  return verify_walk(log, report, NULL, err);
}

/* ---- foreach ------------------------------------------------------------------------------ */

struct foreach_state {
  int (*fn)(const struct cordon_audit_entry *entry, void *userdata);
  void *userdata;
  uint64_t index;
  const char *event_prefix; /* NULL: every entry */
  char *event_needle;       /* "event":"PREFIX */
  size_t needle_length;
};

static int foreach_line(const struct line_ref *ref, void *userdata, struct cordon_error **err) {
  struct foreach_state *s = userdata;
  char reason[AUDIT_REASON_MAX];
  if (ref->torn)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "%s: line %" PRIu64 " is torn (no final newline)", ref->file,
                            ref->line);
  /* A canonical entry spells its event "event":"NAME": a line without those bytes for the
   * prefix is another event's (or no entry at all, which verify reports) and is not parsed. */
  if (s->event_prefix && !memmem(ref->data, ref->length, s->event_needle, s->needle_length)) {
    s->index++;
    return 0;
  }
  json_t *entry = audit_line_parse(ref->data, ref->length, reason);
  if (!entry)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "%s: line %" PRIu64 ": %s", ref->file,
                            ref->line, reason);
  const char *event = json_string_value(json_object_get(entry, "event"));
  if (s->event_prefix && strncmp(event, s->event_prefix, strlen(s->event_prefix))) {
    json_decref(entry); /* the bytes were in its details */
    s->index++;
    return 0;
  }
  char *details = NULL;
  if (jcs_dump(json_object_get(entry, "details"), &details, NULL, err) < 0) {
    json_decref(entry);
    return cordon_error_prefix(err, "%s: line %" PRIu64, ref->file, ref->line);
  }
  struct cordon_audit_entry e = {
      .index = ++s->index,
      .file = ref->file,
      .line = ref->line,
      .event = event,
      .actor = json_string_value(json_object_get(entry, "actor")),
      .resource_type = json_string_value(json_object_get(entry, "resource_type")),
      .resource_id = json_string_value(json_object_get(entry, "resource_id")),
      .details_json = details,
      .prev = json_string_value(json_object_get(entry, "prev")),
      .hmac = json_string_value(json_object_get(entry, "hmac")),
      .raw = ref->data,
      .raw_length = ref->length,
  };
  int r = s->fn(&e, s->userdata);
  free(details);
  json_decref(entry);
  if (r < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "audit walk stopped");
  return 0;
}

int cordon_audit_verify_foreach(struct cordon_audit_log *log, struct cordon_audit_report *report,
                                int (*fn)(const struct cordon_audit_entry *entry, void *userdata),
                                void *userdata, struct cordon_error **err) {
  struct foreach_state s = {fn, userdata, 0, NULL, NULL, 0};
  return verify_walk(log, report, &s, err);
}

int cordon_audit_foreach(struct cordon_audit_log *log,
                         int (*fn)(const struct cordon_audit_entry *entry, void *userdata),
                         void *userdata, struct cordon_error **err) {
  return cordon_audit_foreach_event(log, NULL, fn, userdata, err);
}

int cordon_audit_foreach_event(struct cordon_audit_log *log, const char *event_prefix,
                               int (*fn)(const struct cordon_audit_entry *entry, void *userdata),
                               void *userdata, struct cordon_error **err) {
  _cleanup_close_ int dirfd = -1, lockfd = -1;
  struct walk_state w;
  if (open_for_reading(log, &dirfd, &lockfd, &w, err) < 0)
    return -1;
  struct foreach_state s = {fn, userdata, 0, event_prefix, NULL, 0};
  _cleanup_free_ char *needle = NULL;
  if (event_prefix) {
    int n = asprintf(&needle, "\"event\":\"%s", event_prefix);
    if (n < 0) {
      free(w.segments);
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "audit log %s", log->dir);
    }
    s.event_needle = needle;
    s.needle_length = (size_t)n;
  }
  int r = w.count ? walk_lines(log, dirfd, &w, w.count, foreach_line, &s, err) : 0;
  free(w.segments);
  if (r > 0)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "audit log %s: a line is too long",
                            log->dir);
  return r < 0 ? -1 : 0;
}

/* ---- repair ------------------------------------------------------------------------------- */

int cordon_audit_repair(struct cordon_audit_log *log, const char *actor, uint64_t *dropped,
                        struct cordon_error **err) {
  *dropped = 0;
  _cleanup_close_ int dirfd = -1, lockfd = -1;
  if (open_dir_locked(log, true, &dirfd, &lockfd, err) < 0)
    return -1;
  _cleanup_free_ uint64_t *segments = NULL;
  size_t count = 0;
  if (list_segments(dirfd, log->dir, true, &segments, &count, err) < 0)
    return -1;
  if (count == 0)
    return 0;
  /* Nothing is cut from a chain this handle may not extend (another project's log). */
  if (log->bound && !log->start_checked &&
      (load_key(log, false, err) < 0 || resolve_genesis(log, true, err) < 0 ||
       check_chain_start(log, dirfd, segments, count, true, err) < 0))
    return -1;
  uint64_t number = segments[count - 1];
  _cleanup_close_ int fd = open_segment(dirfd, number, O_RDWR, log->dir, err);
  if (fd < 0)
    return -1;
  struct stat st;
  if (fstat(fd, &st) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "%s", log->dir);
  uint64_t size = (uint64_t)st.st_size;
  char last = '\n';
  if (size > 0 && fs_pread_all(fd, &last, 1, size - 1) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno ? errno : EIO, "cannot read %s",
                            log->dir);
  if (last == '\n')
    return 0;
  /* Find where the torn line starts: just after the last newline. */
  uint64_t keep = 0;
  char buf[65536];
  for (uint64_t end = size; end > 0 && !keep;) {
    size_t want = end < sizeof(buf) ? (size_t)end : sizeof(buf);
    if (size - end > CORDON_AUDIT_MAX_LINE + 1)
      return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0,
                              "audit log %s: the torn tail is longer than a line; not repaired",
                              log->dir);
    if (fs_pread_all(fd, buf, want, end - want) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno ? errno : EIO, "cannot read %s",
                              log->dir);
    char *nl = memrchr(buf, '\n', want);
    if (nl)
      keep = end - want + (uint64_t)(nl - buf) + 1;
    end -= want;
  }
  uint64_t line = line_number_at(fd, keep);
  if (ftruncate(fd, (off_t)keep) < 0 || fsync(fd) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot truncate %s", log->dir);
  *dropped = size - keep;
  char name[64], details[256];
  segment_name(number, name);
  snprintf(details, sizeof(details),
           "{\"dropped_bytes\":%" PRIu64 ",\"file\":\"%s\",\"line\":%" PRIu64 "}", *dropped, name,
           line);
  struct cordon_audit_event ev = {.event = "audit.repair",
                                  .actor = actor && *actor ? actor : "cordon",
                                  .resource_type = "audit-log",
                                  .resource_id = name,
                                  .details_json = details};
  return append_locked(log, dirfd, &ev, 1, NULL, err);
}
