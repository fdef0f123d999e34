/* The pool slot table (slots.h): which slots are held, decided purely from what was observed
 * (pool_slot_classify), and the thin layer of flocks and files around it. */
#include "pool/slots.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "crypto/jcs.h"
#include "pool/pool.h"
#include "protocol/session-id.h"

#define SLOT_RECORD_MAX 4096u

/* ---- pure ---- */

int pool_slot_record_parse(const char *text, size_t length, struct pool_slot_record *out,
                           struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  json_error_t jerr;
  json_t *doc =
      length > SLOT_RECORD_MAX ? NULL : json_loadb(text, length, JSON_REJECT_DUPLICATES, &jerr);
  if (!doc || !json_is_object(doc)) {
    json_decref(doc);
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "slot record is not a JSON object");
  }
  json_t *pid = json_object_get(doc, "pid"), *session = json_object_get(doc, "session");
  int r = 0;
  if (json_object_size(doc) != 2 || !json_is_integer(pid) || json_integer_value(pid) < 0 ||
      !(json_is_null(session) ||
        (json_is_string(session) && cordon_session_id_valid(json_string_value(session)))))
    r = cordon_error_set(err, CORDON_ERR_INVALID, 0,
                         "slot record wants exactly pid (integer) and session (id or null)");
  else {
    out->pid = json_integer_value(pid);
    if (json_is_string(session))
      snprintf(out->session, sizeof(out->session), "%s", json_string_value(session));
  }
  json_decref(doc);
  return r;
}

int pool_slot_record_format(const struct pool_slot_record *record, char **out,
                            struct cordon_error **err) {
  json_t *doc = json_pack("{s:I,s:o}", "pid", (json_int_t)record->pid, "session",
                          record->session[0] ? json_string(record->session) : json_null());
  if (!doc)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "slot record");
  size_t length;
  int r = jcs_dump(doc, out, &length, err);
  json_decref(doc);
  return r;
}

enum pool_slot_state pool_slot_classify(bool lock_busy, bool damaged,
                                        const struct pool_slot_record *record,
                                        bool session_exists) {
  if (lock_busy)
    return POOL_SLOT_PROCESS;
  if (damaged)
    return POOL_SLOT_DAMAGED;
  if (record && record->session[0] && session_exists)
    return POOL_SLOT_SESSION;
  return POOL_SLOT_FREE;
}

/* ---- effects ---- */

struct pool_slot {
  int dirfd;
  int lockfd; /* flock held */
  unsigned index;
  bool bound;
};

static int open_table(const char *state_dir, const char *pool_name, bool create, int *out,
                      struct cordon_error **err) {
  *out = -1;
  if (!pool_name_valid(pool_name))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "'%s' is not a pool name", pool_name);
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "%s/pools/slots/%s", state_dir, pool_name) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "slot table");
  if (create && fs_mkdir_p(path, 0700, err) < 0)
    return -1;
  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT && !create)
      return 0;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s", path);
  }
  *out = fd;
  return 1;
}

static bool session_exists(const char *state_dir, const char *id) {
  _cleanup_free_ char *path = NULL;
  if (!cordon_session_id_valid(id) || asprintf(&path, "%s/sessions/%s", state_dir, id) < 0)
    return false;
  struct stat st;
  return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Observe slot index: its state, and when it is free, its lock (held) in *lockfd. */
static int observe_slot(const char *state_dir, int dirfd, unsigned index,
                        enum pool_slot_state *state, int *lockfd, struct cordon_error **err) {
  char name[32];
  *lockfd = -1;
  snprintf(name, sizeof(name), "%u.lock", index);
  _cleanup_close_ int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open slot lock %s", name);
  bool busy = false;
  if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
    if (errno != EWOULDBLOCK)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot lock slot %s", name);
    busy = true;
  }
  struct pool_slot_record record;
  bool have_record = false, damaged = false;
  if (!busy) {
    snprintf(name, sizeof(name), "%u.json", index);
    _cleanup_close_ int rfd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (rfd >= 0) {
      _cleanup_free_ unsigned char *data = NULL;
      size_t length = 0;
      struct cordon_error *ignored = NULL;
      if (fs_read_fd(rfd, SLOT_RECORD_MAX, &data, &length, &ignored) < 0 ||
          pool_slot_record_parse((const char *)data, length, &record, &ignored) < 0)
        damaged = true;
      else
        have_record = true;
      cordon_error_free(ignored);
    } else if (errno != ENOENT) {
      damaged = true;
    }
  }
  *state = pool_slot_classify(busy, damaged, have_record ? &record : NULL,
                              have_record && session_exists(state_dir, record.session));
  if (*state == POOL_SLOT_FREE)
    *lockfd = steal_fd(&fd);
  return 0;
}

/* The highest slot index present in the table plus one (slots past a shrunk ceiling count). */
static unsigned table_extent(int dirfd) {
  unsigned extent = 0;
  int fd = dup(dirfd);
  DIR *dir = fd < 0 ? NULL : fdopendir(fd);
  if (!dir) {
    if (fd >= 0)
      close(fd);
    return 0;
  }
  struct dirent *de;
  while ((de = readdir(dir))) {
    char *end;
    errno = 0;
    unsigned long i = strtoul(de->d_name, &end, 10);
    if (end != de->d_name && !strcmp(end, ".lock") && !errno && i < POOL_SLOTS_MAX &&
        i + 1 > extent)
      extent = (unsigned)i + 1;
  }
  closedir(dir);
  return extent;
}

static int write_record(struct pool_slot *slot, const char *session_id, bool durable,
                        struct cordon_error **err) {
  struct pool_slot_record record = {.pid = getpid()};
  if (session_id)
    snprintf(record.session, sizeof(record.session), "%s", session_id);
  _cleanup_free_ char *text = NULL;
  char name[32];
  snprintf(name, sizeof(name), "%u.json", slot->index);
  if (pool_slot_record_format(&record, &text, err) < 0)
    return -1;
  return fs_write_replace_at(slot->dirfd, name, text, strlen(text), 0600, durable, err);
}

/* One pass under the table lock: 1 with *out when a slot was taken, 0 when all are held. */
static int try_acquire(const char *state_dir, int dirfd, unsigned max, struct pool_slot **out,
                       unsigned *held, struct cordon_error **err) {
  _cleanup_close_ int table =
      openat(dirfd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (table < 0 || flock(table, LOCK_EX) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot lock the slot table");
  unsigned extent = table_extent(dirfd);
  if (extent < max)
    extent = max;
  int chosen_fd = -1;
  unsigned chosen = 0;
  *held = 0;
  for (unsigned i = 0; i < extent; i++) {
    enum pool_slot_state state;
    int lockfd;
    if (observe_slot(state_dir, dirfd, i, &state, &lockfd, err) < 0) {
      if (chosen_fd >= 0)
        close(chosen_fd);
      return -1;
    }
    if (state != POOL_SLOT_FREE)
      (*held)++;
    else if (chosen_fd < 0 && i < max) {
      chosen_fd = lockfd;
      chosen = i;
    } else
      close(lockfd);
  }
  if (chosen_fd < 0 || *held >= max) {
    if (chosen_fd >= 0)
      close(chosen_fd);
    return 0;
  }
  struct pool_slot *slot = calloc(1, sizeof(*slot));
  if (!slot || (slot->dirfd = dup(dirfd)) < 0) {
    free(slot);
    close(chosen_fd);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "slot");
  }
  slot->lockfd = chosen_fd;
  slot->index = chosen;
  if (write_record(slot, NULL, false, err) < 0) {
    pool_slot_release(slot);
    return -1;
  }
  *out = slot;
  return 1;
}

int pool_slot_acquire(const char *state_dir, const char *pool_name, unsigned max_concurrency,
                      const struct pool_slot_options *opts, struct pool_slot **out,
                      struct cordon_error **err) {
  *out = NULL;
  if (max_concurrency == 0 || max_concurrency > POOL_SLOTS_MAX)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "pool %s: max_concurrency %u is outside 1..%u", pool_name,
                            max_concurrency, POOL_SLOTS_MAX);
  _cleanup_close_ int dirfd = -1;
  if (open_table(state_dir, pool_name, true, &dirfd, err) < 0)
    return -1;
  double wait = opts ? opts->wait_seconds : 0;
  double poll = opts && opts->poll_seconds > 0 ? opts->poll_seconds : 0.05;
  double deadline = fs_now() + wait;
  for (;;) {
    unsigned held = 0;
    int r = try_acquire(state_dir, dirfd, max_concurrency, out, &held, err);
    if (r != 0)
      return r < 0 ? -1 : 0;
    if (cordon_interrupted())
      return cordon_error_set(err, CORDON_ERR_INTERRUPTED, 0,
                              "pool %s: interrupted while waiting for a slot", pool_name);
    double now = fs_now();
    if (now >= deadline)
      return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                              "pool %s is at its concurrency ceiling (%u of %u slots held)%s",
                              pool_name, held, max_concurrency,
                              wait > 0 ? " after waiting" : "; --wait SECONDS waits for one");
    double nap = deadline - now < poll ? deadline - now : poll;
    struct timespec ts = {.tv_sec = (time_t)nap, .tv_nsec = (long)((nap - (time_t)nap) * 1e9)};
    nanosleep(&ts, NULL);
  }
}

int pool_slot_bind_session(struct pool_slot *slot, const char *session_id,
                           struct cordon_error **err) {
  if (!cordon_session_id_valid(session_id))
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "'%s' is not a session id", session_id);
  if (write_record(slot, session_id, true, err) < 0)
    return -1;
  slot->bound = true;
  return 0;
}

unsigned pool_slot_index(const struct pool_slot *slot) {
  return slot->index;
}

int pool_slot_lock_fd(const struct pool_slot *slot) {
  return slot->lockfd;
}

void pool_slot_release(struct pool_slot *slot) {
  if (!slot)
    return;
  if (!slot->bound) {
    char name[32];
    snprintf(name, sizeof(name), "%u.json", slot->index);
    unlinkat(slot->dirfd, name, 0);
  }
  close(slot->lockfd); /* drops the flock */
  close(slot->dirfd);
  free(slot);
}

int pool_slot_usage(const char *state_dir, const char *pool_name, struct pool_slot_usage *out,
                    struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  _cleanup_close_ int dirfd = -1;
  int r = open_table(state_dir, pool_name, false, &dirfd, err);
  if (r <= 0)
    return r;
  /* Under the table lock: an acquirer never sees our brief flocks as holders. */
  _cleanup_close_ int table =
      openat(dirfd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (table < 0 || flock(table, LOCK_EX) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot lock the slot table");
  unsigned extent = table_extent(dirfd);
  for (unsigned i = 0; i < extent; i++) {
    enum pool_slot_state state;
    int lockfd;
    if (observe_slot(state_dir, dirfd, i, &state, &lockfd, err) < 0)
      return -1;
    if (lockfd >= 0)
      close(lockfd);
    if (state != POOL_SLOT_FREE)
      out->held++;
    if (state == POOL_SLOT_SESSION)
      out->sessions++;
  }
  return 0;
}
