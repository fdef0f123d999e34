/* Canonical tar images: export (a snapshot to POSIX pax/ustar bytes that depend on nothing but
 * the snapshot) and import (a strict reader that treats the archive as hostile).
 *
 * A small writer and reader of our own rather than libarchive: the exported bytes are the
 * format's definition (docs/formats.md), so every header byte must be ours to fix, not a
 * library version's; and the reader only has to accept what a strict subset of ustar, pax and
 * GNU long names needs, refusing everything else in one place.
 *
 * Export: entries in manifest order; the root is "./", directories end in '/'; mode = the
 * snapshot's bits, uid = gid = mtime = 0, empty user and group names; a pax 'x' header only for
 * a path or link target longer than 100 bytes, a size of 8 GiB or more, or a socket
 * (CORDON.kind=socket on an empty regular file); two zero blocks end the archive, padded to a
 * multiple of 10240 bytes.
 *
 * Import: ustar/pax/GNU headers with verified checksums; regular files, directories, symlinks,
 * FIFOs and hard links to another regular file of the archive; absolute paths, "..", device
 * nodes, sparse files, entries below a symlink or a file, duplicates, oversized headers and
 * truncation are refused. File data is staged in the store and published only when the whole
 * archive was accepted. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cordon/snapshot.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "snapshot/internal.h"

#define BLOCK 512
#define RECORD 10240
#define IO_BUFFER ((size_t)256 << 10)
#define PAX_MAX ((size_t)1 << 20) /* largest pax or GNU long-name header accepted */
#define PATH_MAX_IMPORT ((size_t)1 << 20)
#define ENTRIES_MAX ((size_t)1 << 24)
#define OCTAL_SIZE_MAX 077777777777ULL /* what 11 octal digits hold */

/* ---- export ------------------------------------------------------------------------------- */

struct out_stream {
  int fd;
  unsigned char *buf;
  size_t len;
  uint64_t total;
  int err; /* errno of the first failed write */
};

static void out_flush(struct out_stream *o) {
  if (o->len && !o->err && fs_write_all(o->fd, o->buf, o->len) < 0)
    o->err = errno ? errno : EIO;
  o->len = 0;
}

static void out_write(struct out_stream *o, const void *data, size_t n) {
  const unsigned char *p = data;
  o->total += n;
  while (n > 0 && !o->err) {
    if (o->len == 0 && n >= IO_BUFFER) {
      if (fs_write_all(o->fd, p, n) < 0)
        o->err = errno ? errno : EIO;
      return;
    }
    size_t take = IO_BUFFER - o->len < n ? IO_BUFFER - o->len : n;
    memcpy(o->buf + o->len, p, take);
    o->len += take;
    p += take;
    n -= take;
    if (o->len == IO_BUFFER)
      out_flush(o);
  }
}

static void out_zeros(struct out_stream *o, size_t n) {
  static const unsigned char zeros[BLOCK];
  while (n > 0) {
    size_t take = n < BLOCK ? n : BLOCK;
    out_write(o, zeros, take);
    n -= take;
  }
}

/* width-1 zero-padded octal digits and a NUL. */
static void put_octal(unsigned char *field, size_t width, uint64_t v) {
  for (size_t i = width - 1; i-- > 0;) {
    field[i] = (unsigned char)('0' + (v & 7));
    v >>= 3;
  }
  field[width - 1] = 0;
}

static void put_checksum(unsigned char *h) {
  memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (size_t i = 0; i < BLOCK; i++)
    sum += h[i];
  put_octal(h + 148, 7, sum);
  h[155] = ' ';
}

static void put_field(unsigned char *field, size_t width, const char *s, size_t len) {
  memcpy(field, s, len < width ? len : width);
}

static void header_base(unsigned char *h, const char *name, size_t name_len, unsigned mode,
                        uint64_t size, char type) {
  memset(h, 0, BLOCK);
  put_field(h, 100, name, name_len);
  put_octal(h + 100, 8, mode & 07777);
  put_octal(h + 108, 8, 0);
  put_octal(h + 116, 8, 0);
  put_octal(h + 124, 12, size);
  put_octal(h + 136, 12, 0);
  h[156] = (unsigned char)type;
  memcpy(h + 257, "ustar", 6);
  memcpy(h + 263, "00", 2);
  put_octal(h + 329, 8, 0);
  put_octal(h + 337, 8, 0);
}

static void pax_record(struct snap_buf *b, const char *key, const char *value, size_t value_len) {
  size_t base = strlen(key) + value_len + 3; /* ' ', '=', '\n' */
  /* The length counts its own digits. */
  size_t digits = 1, pow = 10;
  while (base + digits >= pow) {
    digits++;
    pow *= 10;
  }
  char num[24];
  int n = snprintf(num, sizeof(num), "%zu ", base + digits);
  snap_buf_append(b, num, (size_t)n);
  snap_buf_append(b, key, strlen(key));
  snap_buf_append(b, "=", 1);
  snap_buf_append(b, value, value_len);
  snap_buf_append(b, "\n", 1);
}

/* Copy a file's blob into the archive, hashing as it goes: stops with an integrity error when
 * the bytes are not the manifest's (the archive is then left without its end marker). */
static int export_blob(struct out_stream *o, const struct snap_entry *e,
                       const struct cas_blob *blob, struct cas_hasher *h, unsigned char *buf,
                       struct cordon_error **err) {
  if (blob->size != e->size)
    return cordon_error_set(
        err, CORDON_ERR_INTEGRITY, 0,
        "integrity error: blob for %s does not have the %llu bytes the manifest "
        "records",
        e->path, (unsigned long long)e->size);
  if (cas_hasher_init(h) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "export");
  uint64_t got = 0;
  while (got < e->size) {
    ssize_t n = cas_blob_read(blob, buf, IO_BUFFER, got);
    if (n < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "read blob");
    if (n == 0)
      return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0, "integrity error: blob is truncated");
    cas_hasher_update(h, buf, (size_t)n);
    out_write(o, buf, (size_t)n);
    got += (uint64_t)n;
  }
  unsigned char actual[CAS_DIGEST_LEN];
  cas_hasher_final(h, actual);
  if (memcmp(actual, e->digest, CAS_DIGEST_LEN) != 0)
    return cas_integrity_error(err, e->digest, actual);
  return 0;
}

static int export_entry(struct out_stream *o, struct cordon_cas *cas, const struct snap_entry *e,
                        unsigned char *buf, struct cas_hasher *h, struct cordon_error **err) {
  /* The name: "./" for the root, a trailing '/' for directories. */
  _cleanup_free_ char *name = malloc(e->path_len + 3);
  if (!name)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "export");
  size_t name_len;
  if (e->path_len == 0) {
    memcpy(name, "./", 3);
    name_len = 2;
  } else {
    memcpy(name, e->path, e->path_len);
    name_len = e->path_len;
    if (e->kind == SNAP_DIR)
      name[name_len++] = '/';
    name[name_len] = 0;
  }
  char type;
  unsigned mode = e->mode;
  uint64_t size = 0;
  bool socket = false;
  switch (e->kind) {
  case SNAP_DIR: type = '5'; break;
  case SNAP_FILE:
    type = '0';
    size = e->size;
    break;
  case SNAP_SYMLINK:
    type = '2';
    mode = 0777;
    break;
  case SNAP_FIFO: type = '6'; break;
  case SNAP_CHAR: type = '3'; break;
  case SNAP_BLOCK: type = '4'; break;
  case SNAP_SOCKET:
    type = '0';
    socket = true;
    break;
  default: return cordon_error_set(err, CORDON_ERR_INVALID, 0, "export: unknown entry kind");
  }
  size_t target_len = e->target ? strlen(e->target) : 0;
  struct snap_buf pax = {0};
  if (socket)
    pax_record(&pax, "CORDON.kind", "socket", 6);
  if (target_len > 100)
    pax_record(&pax, "linkpath", e->target, target_len);
  if (name_len > 100)
    pax_record(&pax, "path", name, name_len);
  if (size > OCTAL_SIZE_MAX) {
    char num[24];
    int n = snprintf(num, sizeof(num), "%llu", (unsigned long long)size);
    pax_record(&pax, "size", num, (size_t)n);
  }
  if (pax.oom) {
    snap_buf_free(&pax);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "export");
  }
  unsigned char hdr[BLOCK];
  if (pax.length) {
    header_base(hdr, "././@PaxHeader", 14, 0644, pax.length, 'x');
    put_checksum(hdr);
    out_write(o, hdr, BLOCK);
    out_write(o, pax.data, pax.length);
    out_zeros(o, (BLOCK - pax.length % BLOCK) % BLOCK);
  }
  snap_buf_free(&pax);
  header_base(hdr, name, name_len, mode, size > OCTAL_SIZE_MAX ? 0 : size, type);
  if (e->target)
    put_field(hdr + 157, 100, e->target, target_len);
  if (e->kind == SNAP_CHAR || e->kind == SNAP_BLOCK) {
    put_octal(hdr + 329, 8, e->major);
    put_octal(hdr + 337, 8, e->minor);
  }
  put_checksum(hdr);
  out_write(o, hdr, BLOCK);
  if (e->kind != SNAP_FILE)
    return 0;
  struct cas_blob blob;
  if (cas_blob_open(cas, e->digest, &blob, err) < 0)
    return cordon_error_prefix(err, "export %s", e->path);
  int r = export_blob(o, e, &blob, h, buf, err);
  cas_blob_close(&blob);
  if (r < 0)
    return cordon_error_prefix(err, "export %s", e->path);
  out_zeros(o, (BLOCK - e->size % BLOCK) % BLOCK);
  return 0;
}

int cordon_snapshot_export(struct cordon_cas *cas, const char *id_hex, int fd,
                           const struct cordon_progress *progress, struct cordon_error **err) {
  unsigned char id[CAS_DIGEST_LEN];
  if (snap_parse_id(id_hex, id, err) < 0)
    return -1;
  struct snap_manifest m;
  if (snap_load_manifest(cas, id, &m, err) < 0)
    return -1;
  struct out_stream o = {.fd = fd, .buf = malloc(IO_BUFFER)};
  unsigned char *buf = malloc(IO_BUFFER);
  struct cas_hasher h = {0};
  int r = 0;
  if (!o.buf || !buf) {
    r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "export");
    goto out;
  }
  uint64_t total = 0, done = 0;
  for (size_t i = 0; i < m.count; i++)
    total += m.entries[i].size;
  double last = 0;
  for (size_t i = 0; i < m.count && r == 0; i++) {
    r = export_entry(&o, cas, &m.entries[i], buf, &h, err);
    done += m.entries[i].size;
    if (o.err)
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, o.err, "export: write");
    double now = fs_now();
    if (progress && progress->update && now - last >= 0.1) {
      last = now;
      progress->update(progress->data, "export", done, total);
    }
  }
  if (r == 0) {
    out_zeros(&o, 2 * BLOCK);
    out_zeros(&o, (RECORD - o.total % RECORD) % RECORD);
    out_flush(&o);
    if (o.err)
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, o.err, "export: write");
    if (r == 0 && progress && progress->update)
      progress->update(progress->data, "export", total, total);
  } else {
    out_flush(&o); /* what was written stays without an end marker: visibly truncated */
  }
out:
  cas_hasher_free(&h);
  free(buf);
  free(o.buf);
  snap_manifest_free(&m);
  return r;
}

/* ---- import ------------------------------------------------------------------------------- */

struct in_stream {
  int fd;
  unsigned char *buf;
  size_t pos, len;
  bool eof;
  uint64_t offset;
};

/* 0: got n bytes; 1: clean end before the first byte; -1: truncated; -2: read error (errno). */
static int in_read(struct in_stream *in, void *dst, size_t n) {
  unsigned char *p = dst;
  size_t got = 0;
  while (got < n) {
    if (in->pos == in->len) {
      if (in->eof)
        return got == 0 ? 1 : -1;
      ssize_t r = read(in->fd, in->buf, IO_BUFFER);
      if (r < 0) {
        if (errno == EINTR)
          continue;
        return -2;
      }
      if (r == 0) {
        in->eof = true;
        continue;
      }
      in->pos = 0;
      in->len = (size_t)r;
    }
    size_t take = in->len - in->pos < n - got ? in->len - in->pos : n - got;
    if (p)
      memcpy(p + got, in->buf + in->pos, take);
    in->pos += take;
    got += take;
  }
  in->offset += n;
  return 0;
}

struct imp_entry {
  char *path;
  size_t path_len;
  char kind;
  uint16_t mode;
  uint64_t size;
  unsigned char digest[CAS_DIGEST_LEN];
  char *target;  /* symlink target */
  char *link_to; /* hard link: normalised path of the file it names */
  bool implicit;
};

struct importer {
  struct cordon_cas *cas;
  struct cas_batch *batch;
  struct in_stream in;
  unsigned char *buf;
  struct cas_hasher hasher;
  struct imp_entry *entries;
  size_t count, cap;
  /* pending extended header values for the next entry */
  char *pax_path, *pax_link, *gnu_name, *gnu_link;
  bool pax_has_size, pax_socket;
  uint64_t pax_size;
  const struct cordon_progress *progress;
  double last_progress;
};

static void clear_pending(struct importer *im) {
  free(im->pax_path);
  free(im->pax_link);
  free(im->gnu_name);
  free(im->gnu_link);
  im->pax_path = im->pax_link = im->gnu_name = im->gnu_link = NULL;
  im->pax_has_size = im->pax_socket = false;
  im->pax_size = 0;
}

static int refuse(struct importer *im, struct cordon_error **err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int refuse(struct importer *im, struct cordon_error **err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = NULL;
  if (vasprintf(&msg, fmt, ap) < 0)
    msg = NULL;
  va_end(ap);
  int r = cordon_error_set(err, CORDON_ERR_INVALID, 0,
                           "import refused: %s (at byte %llu of the archive)",
                           msg ? msg : "invalid archive", (unsigned long long)im->in.offset);
  free(msg);
  return r;
}

static int read_or_refuse(struct importer *im, void *dst, size_t n, struct cordon_error **err) {
  int r = in_read(&im->in, dst, n);
  if (r == 0)
    return 0;
  if (r == -2)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "import: read");
  return refuse(im, err, "truncated archive");
}

/* Numeric header field: octal (optionally space-padded, NUL/space terminated) or GNU base-256. */
static int parse_number(const unsigned char *f, size_t width, uint64_t *out) {
  if (f[0] & 0x80) {
    if (f[0] != 0x80)
      return -1; /* negative or oversized */
    uint64_t v = 0;
    for (size_t i = 1; i < width; i++) {
      if (v >> 56)
        return -1;
      v = v << 8 | f[i];
    }
    *out = v;
    return 0;
  }
  size_t i = 0;
  while (i < width && f[i] == ' ')
    i++;
  uint64_t v = 0;
  size_t digits = 0;
  for (; i < width && f[i] >= '0' && f[i] <= '7'; i++, digits++) {
    if (v >> 60)
      return -1;
    v = v * 8 + (uint64_t)(f[i] - '0');
  }
  for (; i < width; i++)
    if (f[i] != 0 && f[i] != ' ')
      return -1;
  if (digits == 0)
    return -1;
  *out = v;
  return 0;
}

static bool checksum_ok(const unsigned char *h) {
  uint64_t stored = 0;
  if (parse_number(h + 148, 8, &stored) < 0)
    return false;
  unsigned long usum = 0;
  long ssum = 0;
  for (size_t i = 0; i < BLOCK; i++) {
    unsigned char c = (i >= 148 && i < 156) ? ' ' : h[i];
    usum += c;
    ssum += (signed char)c;
  }
  return stored == usum || (long)stored == ssum;
}

static char *field_string(const unsigned char *f, size_t width) {
  size_t n = strnlen((const char *)f, width);
  char *s = malloc(n + 1);
  if (s) {
    memcpy(s, f, n);
    s[n] = 0;
  }
  return s;
}

/* Parse pax records; keys we need are kept, sparse files refused, the rest ignored. */
static int parse_pax(struct importer *im, char *data, size_t len, bool global,
                     struct cordon_error **err) {
  size_t off = 0;
  while (off < len) {
    size_t rec_len = 0, i = off;
    while (i < len && data[i] >= '0' && data[i] <= '9' && i - off < 8)
      rec_len = rec_len * 10 + (size_t)(data[i++] - '0');
    if (i == off || i >= len || data[i] != ' ' || rec_len < 5 || rec_len > len - off ||
        data[off + rec_len - 1] != '\n')
      return refuse(im, err, "malformed pax record");
    char *key = data + i + 1;
    char *end = data + off + rec_len - 1;
    char *eq = memchr(key, '=', (size_t)(end - key));
    if (!eq || eq == key)
      return refuse(im, err, "malformed pax record");
    *eq = 0;
    char *value = eq + 1;
    size_t vlen = (size_t)(end - value);
    if (!strncmp(key, "GNU.sparse.", 11))
      return refuse(im, err, "sparse files are not supported");
    if (!global) {
      char **slot = !strcmp(key, "path")       ? &im->pax_path
                    : !strcmp(key, "linkpath") ? &im->pax_link
                                               : NULL;
      if (slot) {
        if (memchr(value, 0, vlen))
          return refuse(im, err, "pax %s holds a NUL byte", key);
        free(*slot);
        *slot = strndup(value, vlen);
        if (!*slot)
          return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "import");
      } else if (!strcmp(key, "size")) {
        uint64_t v = 0;
        if (vlen == 0 || vlen > 19)
          return refuse(im, err, "bad pax size");
        for (size_t k = 0; k < vlen; k++) {
          if (value[k] < '0' || value[k] > '9')
            return refuse(im, err, "bad pax size");
          v = v * 10 + (uint64_t)(value[k] - '0');
        }
        im->pax_size = v;
        im->pax_has_size = true;
      } else if (!strcmp(key, "CORDON.kind")) {
        if (vlen != 6 || memcmp(value, "socket", 6))
          return refuse(im, err, "unknown CORDON.kind");
        im->pax_socket = true;
      }
    } else if (!strcmp(key, "path") || !strcmp(key, "linkpath") || !strcmp(key, "size")) {
      return refuse(im, err, "global pax header sets %s", key);
    }
    off += rec_len;
  }
  return 0;
}

/* Read an extended header's data (pax or GNU long name) into a NUL-terminated buffer. */
static int read_extended(struct importer *im, uint64_t size, char **out,
                         struct cordon_error **err) {
  if (size > PAX_MAX)
    return refuse(im, err, "oversized extended header (%llu bytes, at most %zu)",
                  (unsigned long long)size, PAX_MAX);
  char *data = malloc((size_t)size + 1);
  if (!data)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "import");
  if (read_or_refuse(im, data, (size_t)size, err) < 0 ||
      read_or_refuse(im, NULL, (BLOCK - size % BLOCK) % BLOCK, err) < 0) {
    free(data);
    return -1;
  }
  data[size] = 0;
  *out = data;
  return 0;
}

/* Normalise an archive path: "./" prefixes, "." and empty components dropped; absolute paths
 * and ".." refused. "" is the root. */
static int normalize_member(struct importer *im, const char *raw, char **out,
                            struct cordon_error **err) {
  if (!*raw)
    return refuse(im, err, "empty path");
  if (raw[0] == '/')
    return refuse(im, err, "absolute path %s", raw);
  size_t len = strlen(raw);
  if (len > PATH_MAX_IMPORT)
    return refuse(im, err, "path longer than %zu bytes", PATH_MAX_IMPORT);
  char *res = malloc(len + 1);
  if (!res)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "import");
  size_t o = 0;
  const char *p = raw;
  while (*p) {
    const char *end = strchrnul(p, '/');
    size_t n = (size_t)(end - p);
    if (n == 2 && p[0] == '.' && p[1] == '.') {
      free(res);
      return refuse(im, err, "path %s contains \"..\"", raw);
    }
    if (n > NAME_MAX) {
      free(res);
      return refuse(im, err, "a name in %s is longer than %d bytes", raw, NAME_MAX);
    }
    if (n > 0 && !(n == 1 && p[0] == '.')) {
      if (o > 0)
        res[o++] = '/';
      memcpy(res + o, p, n);
      o += n;
    }
    p = *end ? end + 1 : end;
  }
  res[o] = 0;
  *out = res;
  return 0;
}

static struct imp_entry *new_entry(struct importer *im, struct cordon_error **err) {
  if (im->count == ENTRIES_MAX) {
    refuse(im, err, "more than %zu entries", ENTRIES_MAX);
    return NULL;
  }
  if (im->count == im->cap) {
    size_t cap = im->cap ? im->cap * 2 : 256;
    struct imp_entry *grown = realloc(im->entries, cap * sizeof(*grown));
    if (!grown) {
      cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "import");
      return NULL;
    }
    im->entries = grown;
    im->cap = cap;
  }
  struct imp_entry *e = &im->entries[im->count++];
  memset(e, 0, sizeof(*e));
  return e;
}

static int import_data(struct importer *im, struct imp_entry *e, uint64_t size,
                       struct cordon_error **err) {
  if (size < IO_BUFFER) {
    if (read_or_refuse(im, im->buf, (size_t)size, err) < 0)
      return -1;
    if (cas_batch_add_buffer(im->batch, im->buf, (size_t)size, e->digest, err) < 0)
      return -1;
  } else {
    struct cas_stage st;
    if (cas_stage_open(im->batch, &im->hasher, &st, err) < 0)
      return -1;
    uint64_t left = size;
    while (left > 0) {
      size_t take = left < IO_BUFFER ? (size_t)left : IO_BUFFER;
      if (read_or_refuse(im, im->buf, take, err) < 0 ||
          cas_stage_write(&st, im->buf, take, err) < 0) {
        cas_stage_abort(&st);
        return -1;
      }
      left -= take;
    }
    if (cas_stage_close(&st, e->digest, err) < 0)
      return -1;
  }
  e->size = size;
  return read_or_refuse(im, NULL, (BLOCK - size % BLOCK) % BLOCK, err);
}

static int read_member(struct importer *im, const unsigned char *h, struct cordon_error **err) {
  bool posix = !memcmp(h + 257,
                       "ustar\0"
                       "00",
                       8);
  bool gnu = !memcmp(h + 257, "ustar  \0", 8);
  if (!posix && !gnu)
    return refuse(im, err, "not a ustar, pax or GNU tar header");
  if (!checksum_ok(h))
    return refuse(im, err, "header checksum mismatch");
  char type = (char)h[156];
  uint64_t size = 0, mode = 0;
  if (parse_number(h + 124, 12, &size) < 0)
    return refuse(im, err, "bad size field");
  if (type == 'x' || type == 'g') {
    char *data = NULL;
    if (read_extended(im, size, &data, err) < 0)
      return -1;
    int r = parse_pax(im, data, (size_t)size, type == 'g', err);
    free(data);
    return r;
  }
  if (type == 'L' || type == 'K') {
    char *data = NULL;
    if (read_extended(im, size, &data, err) < 0)
      return -1;
    char **slot = type == 'L' ? &im->gnu_name : &im->gnu_link;
    free(*slot);
    *slot = data;
    return 0;
  }
  if (parse_number(h + 100, 8, &mode) < 0)
    return refuse(im, err, "bad mode field");
  if (im->pax_has_size)
    size = im->pax_size;
  /* The member's name. */
  _cleanup_free_ char *raw = NULL;
  if (im->pax_path) {
    raw = steal_ptr(&im->pax_path);
  } else if (im->gnu_name) {
    raw = steal_ptr(&im->gnu_name);
  } else {
    _cleanup_free_ char *name = field_string(h, 100);
    _cleanup_free_ char *prefix = posix ? field_string(h + 345, 155) : strdup("");
    if (!name || !prefix || asprintf(&raw, "%s%s%s", prefix, *prefix ? "/" : "", name) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "import");
  }
  _cleanup_free_ char *link = NULL;
  if (im->pax_link)
    link = steal_ptr(&im->pax_link);
  else if (im->gnu_link)
    link = steal_ptr(&im->gnu_link);
  else
    link = field_string(h + 157, 100);
  bool socket = im->pax_socket;
  clear_pending(im);
  if (!link)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "import");
  _cleanup_free_ char *path = NULL;
  if (normalize_member(im, raw, &path, err) < 0)
    return -1;
  struct imp_entry *e = NULL;
  switch (type) {
  case '0':
  case '\0':
  case '7':
    if (!*path)
      return refuse(im, err, "the root is not a file");
    if (!(e = new_entry(im, err)))
      return -1;
    e->kind = socket ? SNAP_SOCKET : SNAP_FILE;
    if (socket && size != 0)
      return refuse(im, err, "socket %s carries data", path);
    if (!socket && import_data(im, e, size, err) < 0)
      return -1;
    break;
  case '5':
    if (!(e = new_entry(im, err)))
      return -1;
    e->kind = SNAP_DIR;
    break;
  case '2':
    if (!*path)
      return refuse(im, err, "the root is not a symlink");
    if (!*link)
      return refuse(im, err, "symlink %s has an empty target", path);
    if (!(e = new_entry(im, err)))
      return -1;
    e->kind = SNAP_SYMLINK;
    e->target = steal_ptr(&link);
    mode = 0777;
    break;
  case '1': {
    if (!*path)
      return refuse(im, err, "the root is not a hard link");
    char *to = NULL;
    if (!*link || link[0] == '/')
      return refuse(im, err, "hard link %s points out of the archive (%s)", path, link);
    if (normalize_member(im, link, &to, err) < 0)
      return cordon_error_prefix(err, "hard link %s points out of the archive", path);
    if (!(e = new_entry(im, err))) {
      free(to);
      return -1;
    }
    e->kind = SNAP_FILE;
    e->link_to = to;
    break;
  }
  case '6':
    if (!*path)
      return refuse(im, err, "the root is not a FIFO");
    if (!(e = new_entry(im, err)))
      return -1;
    e->kind = SNAP_FIFO;
    break;
  case '3':
  case '4': return refuse(im, err, "device node %s", path);
  case 'S': return refuse(im, err, "sparse file %s", path);
  default:
    return refuse(im, err, "unsupported entry type '%c' for %s",
                  type >= 32 && type < 127 ? type : '?', path);
  }
  if (type != '0' && type != '\0' && type != '7' && size != 0)
    return refuse(im, err, "%s carries data but is not a regular file", path);
  e->mode = (uint16_t)(mode & 07777);
  e->path_len = strlen(path);
  e->path = steal_ptr(&path);
  double now = fs_now();
  if (im->progress && im->progress->update && now - im->last_progress >= 0.1) {
    im->last_progress = now;
    im->progress->update(im->progress->data, "import", im->in.offset, 0);
  }
  return 0;
}

static int imp_compare(const void *a, const void *b) {
  const struct imp_entry *x = a, *y = b;
  return snap_path_compare(x->path, x->path_len, y->path, y->path_len);
}

static struct imp_entry *find_entry(struct imp_entry *entries, size_t n, const char *path,
                                    size_t len) {
  struct imp_entry key = {.path = (char *)path, .path_len = len};
  return n ? bsearch(&key, entries, n, sizeof(*entries), imp_compare) : NULL;
}

/* Sort, refuse duplicates and entries below non-directories, resolve hard links, add the
 * directories an archive may leave implicit. */
static int finish_entries(struct importer *im, struct cordon_error **err) {
  if (im->count)
    qsort(im->entries, im->count, sizeof(*im->entries), imp_compare);
  for (size_t i = 1; i < im->count; i++)
    if (imp_compare(&im->entries[i - 1], &im->entries[i]) == 0)
      return refuse(im, err, "%s appears twice",
                    im->entries[i].path_len ? im->entries[i].path : ".");
  size_t n = im->count;
  for (size_t i = 0; i < n; i++) {
    struct imp_entry *e = &im->entries[i];
    if (e->path_len == 0 && e->kind != SNAP_DIR)
      return refuse(im, err, "the root is not a directory");
    if (e->link_to) {
      struct imp_entry *t = find_entry(im->entries, n, e->link_to, strlen(e->link_to));
      if (!t || t->kind != SNAP_FILE || t->link_to)
        return refuse(im, err, "hard link %s points out of the archive or at a non-file (%s)",
                      e->path, e->link_to);
      memcpy(e->digest, t->digest, CAS_DIGEST_LEN);
      e->size = t->size;
    }
    /* Every ancestor must be a directory of the archive, or is added as one. */
    for (size_t k = e->path_len; k-- > 0;) {
      if (e->path[k] != '/')
        continue;
      struct imp_entry *a = find_entry(im->entries, n, e->path, k);
      if (a) {
        if (a->kind != SNAP_DIR)
          return refuse(im, err, "%s lies below %s, which is a %s, not a directory", e->path,
                        a->path, a->kind == SNAP_SYMLINK ? "symlink" : "non-directory");
        continue;
      }
      struct imp_entry *d = new_entry(im, err);
      if (!d)
        return -1;
      e = &im->entries[i]; /* new_entry may have moved the array */
      d->path = strndup(e->path, k);
      if (!d->path)
        return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "import");
      d->path_len = k;
      d->kind = SNAP_DIR;
      d->mode = 0755;
      d->implicit = true;
    }
  }
  if (!find_entry(im->entries, n, "", 0)) {
    struct imp_entry *root = new_entry(im, err);
    if (!root)
      return -1;
    root->path = strdup("");
    if (!root->path)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "import");
    root->kind = SNAP_DIR;
    root->mode = 0755;
    root->implicit = true;
  }
  if (im->count > n) {
    /* Implicit directories may repeat (several children share one); keep one of each. */
    qsort(im->entries, im->count, sizeof(*im->entries), imp_compare);
    size_t o = 0;
    for (size_t i = 0; i < im->count; i++) {
      if (o > 0 && imp_compare(&im->entries[o - 1], &im->entries[i]) == 0) {
        free(im->entries[i].path);
        continue;
      }
      im->entries[o++] = im->entries[i];
    }
    im->count = o;
  }
  return 0;
}

static void importer_free(struct importer *im) {
  for (size_t i = 0; i < im->count; i++) {
    free(im->entries[i].path);
    free(im->entries[i].target);
    free(im->entries[i].link_to);
  }
  free(im->entries);
  clear_pending(im);
  free(im->buf);
  free(im->in.buf);
  cas_hasher_free(&im->hasher);
  cas_batch_free(im->batch);
}

static bool all_zero(const unsigned char *b) {
  for (size_t i = 0; i < BLOCK; i++)
    if (b[i])
      return false;
  return true;
}

int cordon_snapshot_import(struct cordon_cas *cas, int fd, const struct cordon_progress *progress,
                           char id_hex[CORDON_DIGEST_HEX_SIZE], struct cordon_error **err) {
  struct importer im = {.cas = cas, .progress = progress};
  im.in.fd = fd;
  im.in.buf = malloc(IO_BUFFER);
  im.buf = malloc(IO_BUFFER);
  int r = -1;
  if (!im.in.buf || !im.buf) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "import");
    goto out;
  }
  if (cas_batch_new(cas, &im.batch, err) < 0)
    goto out;
  unsigned char h[BLOCK];
  for (;;) {
    int got = in_read(&im.in, h, BLOCK);
    if ((got == 1 || got == -1) && im.in.offset == 0) {
      refuse(&im, err, "not a snapshot image: %s",
             got == 1 ? "empty" : "shorter than one tar header");
      goto out;
    }
    if (got == 1 || got == -1) {
      refuse(&im, err, "truncated archive (no end-of-archive marker)");
      goto out;
    }
    if (got == -2) {
      cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "import: read");
      goto out;
    }
    if (all_zero(h)) {
      if (read_or_refuse(&im, h, BLOCK, err) < 0)
        goto out;
      if (!all_zero(h)) {
        refuse(&im, err, "a lone zero block inside the archive");
        goto out;
      }
      break;
    }
    if (read_member(&im, h, err) < 0)
      goto out;
  }
  if (im.pax_path || im.pax_link || im.gnu_name || im.gnu_link || im.pax_has_size) {
    refuse(&im, err, "an extended header without its entry");
    goto out;
  }
  if (finish_entries(&im, err) < 0)
    goto out;
  struct snap_entry *entries = calloc(im.count ? im.count : 1, sizeof(*entries));
  if (!entries) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "import");
    goto out;
  }
  for (size_t i = 0; i < im.count; i++) {
    struct imp_entry *e = &im.entries[i];
    entries[i] = (struct snap_entry){.path = e->path,
                                     .path_len = e->path_len,
                                     .kind = e->kind,
                                     .mode = e->kind == SNAP_SYMLINK ? 0777 : e->mode,
                                     .size = e->size,
                                     .target = e->target};
    memcpy(entries[i].digest, e->digest, CAS_DIGEST_LEN);
  }
  unsigned char id[CAS_DIGEST_LEN];
  /* Encoding re-checks the structure; only then does anything become visible. */
  struct snap_buf check = {0};
  int ok = snap_manifest_encode(entries, im.count, &check, err);
  snap_buf_free(&check);
  if (ok < 0 || cas_batch_commit(im.batch, err) < 0 ||
      snap_store_manifest(cas, entries, im.count, id, err) < 0) {
    free(entries);
    goto out;
  }
  free(entries);
  cas_hex(id, id_hex);
  r = 0;
out:
  importer_free(&im);
  return r;
}
