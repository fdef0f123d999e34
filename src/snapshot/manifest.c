/* The canonical manifest: encoding, strict parsing and the canonical order. Pure: no system
 * calls, so it is unit-tested and fuzzed on its own.
 *
 *   manifest := "cordon-manifest 1\n" entry*
 *   entry    := "d " MODE " " PATH NUL
 *             | "f " MODE " " SIZE " " DIGEST " " PATH NUL
 *             | "l " PATH NUL TARGET NUL
 *             | ("p" | "s") " " MODE " " PATH NUL
 *             | ("c" | "b") " " MODE " " MAJOR " " MINOR " " PATH NUL
 *
 * MODE is four octal digits, SIZE/MAJOR/MINOR decimal without leading zeros, DIGEST 64
 * lowercase hex digits. The first entry is the root directory, PATH ".". */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot/manifest.h"

int snap_buf_reserve(struct snap_buf *b, size_t extra) {
  if (b->oom)
    return -1;
  if (b->length + extra <= b->capacity)
    return 0;
  size_t cap = b->capacity ? b->capacity : 4096;
  while (cap < b->length + extra) {
    if (cap > SIZE_MAX / 2) {
      b->oom = true;
      return -1;
    }
    cap *= 2;
  }
  char *grown = realloc(b->data, cap);
  if (!grown) {
    b->oom = true;
    return -1;
  }
  b->data = grown;
  b->capacity = cap;
  return 0;
}

void snap_buf_append(struct snap_buf *b, const void *data, size_t length) {
  if (length == 0 || snap_buf_reserve(b, length) < 0)
    return;
  memcpy(b->data + b->length, data, length);
  b->length += length;
}

void snap_buf_free(struct snap_buf *b) {
  free(b->data);
  memset(b, 0, sizeof(*b));
}

int snap_path_compare(const char *a, size_t a_len, const char *b, size_t b_len) {
  size_t n = a_len < b_len ? a_len : b_len, i = 0;
  /* Skip the common prefix a word at a time (binary searches compare long shared prefixes). */
  while (i + 8 <= n) {
    uint64_t x, y;
    memcpy(&x, a + i, 8);
    memcpy(&y, b + i, 8);
    if (x != y)
      break;
    i += 8;
  }
  while (i < n && a[i] == b[i])
    i++;
  if (i == n)
    return a_len < b_len ? -1 : a_len > b_len ? 1 : 0;
  unsigned char ca = (unsigned char)a[i], cb = (unsigned char)b[i];
  /* '/' ranks below every byte a name can hold: a directory's contents come right after it,
   * before its next sibling. */
  unsigned ra = ca == '/' ? 0 : ca, rb = cb == '/' ? 0 : cb;
  return ra < rb ? -1 : 1;
}

bool snap_name_valid(const char *name, size_t len) {
  if (len == 0 || (len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.'))
    return false;
  return memchr(name, '/', len) == NULL && memchr(name, 0, len) == NULL;
}

static void put_u64(struct snap_buf *b, uint64_t v) {
  char tmp[24];
  size_t i = sizeof(tmp);
  do {
    tmp[--i] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  snap_buf_append(b, tmp + i, sizeof(tmp) - i);
}

static void put_mode(struct snap_buf *b, unsigned mode) {
  char tmp[4] = {(char)('0' + (mode >> 9 & 7)), (char)('0' + (mode >> 6 & 7)),
                 (char)('0' + (mode >> 3 & 7)), (char)('0' + (mode & 7))};
  snap_buf_append(b, tmp, 4);
}

static void put_path(struct snap_buf *b, const struct snap_entry *e) {
  if (e->path_len == 0)
    snap_buf_append(b, ".", 1);
  else
    snap_buf_append(b, e->path, e->path_len);
  snap_buf_append(b, "", 1);
}

void snap_entry_encode(struct snap_buf *b, const struct snap_entry *e) {
  char head[2] = {e->kind, ' '};
  snap_buf_append(b, head, 2);
  switch (e->kind) {
  case SNAP_SYMLINK:
    put_path(b, e);
    snap_buf_append(b, e->target, strlen(e->target) + 1);
    return;
  case SNAP_FILE: {
    put_mode(b, e->mode);
    snap_buf_append(b, " ", 1);
    put_u64(b, e->size);
    char hex[CAS_HEX_LEN + 2];
    hex[0] = ' ';
    cas_hex(e->digest, hex + 1);
    snap_buf_append(b, hex, CAS_HEX_LEN + 1);
    snap_buf_append(b, " ", 1);
    put_path(b, e);
    return;
  }
  case SNAP_CHAR:
  case SNAP_BLOCK:
    put_mode(b, e->mode);
    snap_buf_append(b, " ", 1);
    put_u64(b, e->major);
    snap_buf_append(b, " ", 1);
    put_u64(b, e->minor);
    snap_buf_append(b, " ", 1);
    put_path(b, e);
    return;
  default: /* d, p, s */
    put_mode(b, e->mode);
    snap_buf_append(b, " ", 1);
    put_path(b, e);
    return;
  }
}

/* The parent of path: its length (0 for a top-level entry). */
static size_t parent_length(const char *path, size_t len) {
  const char *slash = memrchr(path, '/', len);
  return slash ? (size_t)(slash - path) : 0;
}

static bool path_valid(const char *path, size_t len) {
  if (len == 0)
    return true; /* the root */
  size_t start = 0;
  for (size_t i = 0; i <= len; i++) {
    if (i == len || path[i] == '/') {
      if (!snap_name_valid(path + start, i - start))
        return false;
      start = i + 1;
    }
  }
  return true;
}

static bool kind_known(char k) {
  return k == SNAP_DIR || k == SNAP_FILE || k == SNAP_SYMLINK || k == SNAP_FIFO ||
         k == SNAP_SOCKET || k == SNAP_CHAR || k == SNAP_BLOCK;
}

/* Structure shared by encode and parse: the root first, order strictly increasing, every parent
 * a directory on the current ancestor chain. stack holds indexes of open directories. */
struct structure_check {
  size_t *stack;
  size_t depth, capacity;
};

static int structure_next(struct structure_check *c, const struct snap_entry *entries, size_t i,
                          const char **why) {
  const struct snap_entry *e = &entries[i];
  if (!kind_known(e->kind)) {
    *why = "unknown entry kind";
    return -1;
  }
  if (i == 0) {
    if (e->path_len != 0 || e->kind != SNAP_DIR) {
      *why = "the first entry is not the root directory";
      return -1;
    }
  } else {
    if (e->path_len == 0) {
      *why = "the root appears twice";
      return -1;
    }
    if (!path_valid(e->path, e->path_len)) {
      *why = "invalid path (empty, \".\" or \"..\" component)";
      return -1;
    }
    const struct snap_entry *prev = &entries[i - 1];
    if (snap_path_compare(prev->path, prev->path_len, e->path, e->path_len) >= 0) {
      *why = "paths out of canonical order or duplicated";
      return -1;
    }
    size_t plen = parent_length(e->path, e->path_len);
    while (c->depth > 0) {
      const struct snap_entry *top = &entries[c->stack[c->depth - 1]];
      if (top->path_len == plen && memcmp(top->path, e->path, plen) == 0)
        break;
      c->depth--;
    }
    if (c->depth == 0) {
      *why = "an entry's parent is not a directory listed before it";
      return -1;
    }
  }
  if (e->kind == SNAP_SYMLINK && (!e->target || !e->target[0])) {
    *why = "symlink with an empty target";
    return -1;
  }
  if (e->kind == SNAP_DIR) {
    if (c->depth == c->capacity) {
      size_t cap = c->capacity ? c->capacity * 2 : 64;
      size_t *grown = realloc(c->stack, cap * sizeof(*grown));
      if (!grown) {
        *why = "out of memory";
        return -1;
      }
      c->stack = grown;
      c->capacity = cap;
    }
    c->stack[c->depth++] = i;
  }
  return 0;
}

int snap_manifest_encode(const struct snap_entry *entries, size_t count, struct snap_buf *out,
                         struct cordon_error **err) {
  struct structure_check c = {0};
  const char *why = NULL;
  if (count == 0)
    why = "no root entry";
  for (size_t i = 0; !why && i < count; i++)
    if (structure_next(&c, entries, i, &why) < 0)
      break;
  free(c.stack);
  if (why)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0, "manifest: %s", why);
  snap_buf_append(out, SNAP_MANIFEST_MAGIC, strlen(SNAP_MANIFEST_MAGIC));
  for (size_t i = 0; i < count; i++)
    snap_entry_encode(out, &entries[i]);
  if (out->oom)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "manifest");
  return 0;
}

/* ---- parsing ------------------------------------------------------------------------------ */

struct cursor {
  char *p, *end;
};

static int expect_char(struct cursor *c, char ch) {
  if (c->p >= c->end || *c->p != ch)
    return -1;
  c->p++;
  return 0;
}

static int read_mode(struct cursor *c, uint16_t *out) {
  if (c->end - c->p < 4)
    return -1;
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char ch = c->p[i];
    if (ch < '0' || ch > '7')
      return -1;
    v = v * 8 + (unsigned)(ch - '0');
  }
  c->p += 4;
  *out = (uint16_t)v;
  return 0;
}

static int read_decimal(struct cursor *c, uint64_t max, uint64_t *out) {
  char *start = c->p;
  uint64_t v = 0;
  while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
    unsigned d = (unsigned)(*c->p - '0');
    if (v > (max - d) / 10)
      return -1;
    v = v * 10 + d;
    c->p++;
  }
  size_t n = (size_t)(c->p - start);
  if (n == 0 || (n > 1 && start[0] == '0'))
    return -1; /* empty or a leading zero: not canonical */
  *out = v;
  return 0;
}

/* A NUL-terminated string in place; returns its start. */
static char *read_cstring(struct cursor *c, size_t *len) {
  char *nul = memchr(c->p, 0, (size_t)(c->end - c->p));
  if (!nul)
    return NULL;
  char *s = c->p;
  *len = (size_t)(nul - s);
  c->p = nul + 1;
  return s;
}

static int parse_entry(struct cursor *c, struct snap_entry *e) {
  memset(e, 0, sizeof(*e));
  if (c->end - c->p < 2)
    return -1;
  e->kind = *c->p++;
  if (expect_char(c, ' ') < 0)
    return -1;
  uint64_t v = 0;
  switch (e->kind) {
  case SNAP_SYMLINK:
    e->mode = 0777; /* not on the wire: Linux symlinks have no permission bits of their own */
    break;
  case SNAP_FILE:
    if (read_mode(c, &e->mode) < 0 || expect_char(c, ' ') < 0 ||
        read_decimal(c, UINT64_MAX, &e->size) < 0 || expect_char(c, ' ') < 0 ||
        c->end - c->p < CAS_HEX_LEN || cas_unhex_n(c->p, e->digest) < 0)
      return -1;
    c->p += CAS_HEX_LEN;
    if (expect_char(c, ' ') < 0)
      return -1;
    break;
  case SNAP_CHAR:
  case SNAP_BLOCK:
    if (read_mode(c, &e->mode) < 0 || expect_char(c, ' ') < 0 ||
        read_decimal(c, UINT32_MAX, &v) < 0)
      return -1;
    e->major = (uint32_t)v;
    if (expect_char(c, ' ') < 0 || read_decimal(c, UINT32_MAX, &v) < 0 || expect_char(c, ' ') < 0)
      return -1;
    e->minor = (uint32_t)v;
    break;
  case SNAP_DIR:
  case SNAP_FIFO:
  case SNAP_SOCKET:
    if (read_mode(c, &e->mode) < 0 || expect_char(c, ' ') < 0)
      return -1;
    break;
  default: return -1;
  }
  size_t len = 0;
  char *path = read_cstring(c, &len);
  if (!path)
    return -1;
  if (len == 1 && path[0] == '.') {
    path[0] = 0; /* the root */
    len = 0;
  } else if (len == 0) {
    return -1;
  }
  e->path = path;
  e->path_len = len;
  if (e->kind == SNAP_SYMLINK) {
    size_t tlen = 0;
    e->target = read_cstring(c, &tlen);
    if (!e->target || tlen == 0)
      return -1;
  }
  return 0;
}

int snap_manifest_parse(const void *data, size_t length, struct snap_manifest *out,
                        struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  size_t magic = strlen(SNAP_MANIFEST_MAGIC);
  if (length < magic || memcmp(data, SNAP_MANIFEST_MAGIC, magic) != 0)
    return cordon_error_set(err, CORDON_ERR_INVALID, 0,
                            "not a snapshot manifest (bad or missing header)");
  char *copy = malloc(length + 1);
  if (!copy)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "manifest");
  memcpy(copy, data, length);
  copy[length] = 0;
  struct cursor c = {copy + magic, copy + length};
  struct snap_entry *entries = NULL;
  size_t count = 0, cap = 0;
  struct structure_check check = {0};
  const char *why = NULL;
  while (c.p < c.end) {
    if (count == cap) {
      cap = cap ? cap * 2 : 256;
      struct snap_entry *grown = realloc(entries, cap * sizeof(*grown));
      if (!grown) {
        why = "out of memory";
        break;
      }
      entries = grown;
    }
    if (parse_entry(&c, &entries[count]) < 0) {
      why = "malformed entry";
      break;
    }
    if (structure_next(&check, entries, count, &why) < 0)
      break;
    count++;
  }
  if (!why && count == 0)
    why = "no root entry";
  free(check.stack);
  if (why) {
    size_t at = count;
    free(entries);
    free(copy);
    return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0, "manifest is invalid at entry %zu: %s",
                            at, why);
  }
  out->entries = entries;
  out->count = count;
  out->storage = copy;
  return 0;
}

void snap_manifest_free(struct snap_manifest *m) {
  free(m->entries);
  free(m->storage);
  memset(m, 0, sizeof(*m));
}

/* ---- symlink targets ---------------------------------------------------------------------- */

char *snap_normalize_absolute(const char *path) {
  size_t len = strlen(path);
  char *out = malloc(len + 2);
  if (!out)
    return NULL;
  size_t o = 0;
  const char *p = path;
  while (*p) {
    while (*p == '/')
      p++;
    if (!*p)
      break;
    const char *end = strchrnul(p, '/');
    size_t n = (size_t)(end - p);
    if (n == 1 && p[0] == '.') {
      /* nothing */
    } else if (n == 2 && p[0] == '.' && p[1] == '.') {
      while (o > 0 && out[o - 1] != '/')
        o--;
      if (o > 0)
        o--; /* drop the slash too */
    } else {
      out[o++] = '/';
      memcpy(out + o, p, n);
      o += n;
    }
    p = end;
  }
  if (o == 0)
    out[o++] = '/';
  out[o] = 0;
  return out;
}

int snap_symlink_canonical(const char *target, const char *link_path, const char *const *roots,
                           char **out) {
  *out = NULL;
  if (target[0] == '/' && roots) {
    char *norm = snap_normalize_absolute(target);
    if (!norm)
      return -1;
    for (size_t i = 0; roots[i]; i++) {
      char *root = snap_normalize_absolute(roots[i]);
      if (!root) {
        free(norm);
        return -1;
      }
      size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
      const char *rest = NULL;
      if (strncmp(norm, root, rl) == 0 && (norm[rl] == '/' || norm[rl] == 0))
        rest = norm[rl] == '/' ? norm + rl + 1 : norm + rl;
      free(root);
      if (!rest)
        continue;
      /* One ".." per directory between the link and the root. */
      size_t depth = 0;
      for (const char *s = link_path; *s; s++)
        depth += *s == '/';
      size_t rest_len = strlen(rest);
      char *res = malloc(depth * 3 + rest_len + 2);
      if (!res) {
        free(norm);
        return -1;
      }
      size_t o = 0;
      for (size_t d = 0; d < depth; d++) {
        memcpy(res + o, "../", 3);
        o += 3;
      }
      if (rest_len) {
        memcpy(res + o, rest, rest_len);
        o += rest_len;
      } else if (o > 0) {
        o--; /* "../.." rather than "../../" */
      } else {
        res[o++] = '.';
      }
      res[o] = 0;
      free(norm);
      *out = res;
      return 0;
    }
    free(norm);
  }
  *out = strdup(target);
  return *out ? 0 : -1;
}
