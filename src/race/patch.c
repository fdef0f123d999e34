/* A strict unified-diff applier (see patch.h). Pure: bytes in, bytes out, no file system.
 *
 * Written here rather than borrowed: libgit2 parses diffs (git_diff_from_buffer) but applies
 * them only to a repository, index or tree, and a race's candidates are sessions whose files
 * are reached through the session API on every backend; running `patch` in the sandbox would
 * need the binary in every image. Strictness is the point: a candidate's input either applies
 * exactly as its author wrote it or fails that candidate, so a receipt never binds a patch
 * that was applied somewhere else than where it says. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "race/patch.h"

struct cursor {
  const char *p, *end;
};

/* The next line, its newline excluded; false at the end. */
static bool next_line(struct cursor *c, const char **line, size_t *length, bool *newline) {
  if (c->p >= c->end)
    return false;
  const char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
  *line = c->p;
  *length = nl ? (size_t)(nl - c->p) : (size_t)(c->end - c->p);
  *newline = nl != NULL;
  c->p = nl ? nl + 1 : c->end;
  return true;
}

static bool starts(const char *line, size_t length, const char *prefix) {
  size_t n = strlen(prefix);
  return length >= n && !memcmp(line, prefix, n);
}

/* The path of a ---/+++ line: up to a tab (diff -u puts a date there), a/ or b/ removed.
 * NULL for /dev/null; *bad for a path the workspace cannot take. */
static char *header_path(const char *line, size_t length, bool *dev_null, bool *bad) {
  const char *p = line + 4, *end = line + length;
  const char *tab = memchr(p, '\t', (size_t)(end - p));
  if (tab)
    end = tab;
  while (end > p && end[-1] == ' ')
    end--;
  size_t n = (size_t)(end - p);
  *dev_null = n == 9 && !memcmp(p, "/dev/null", 9);
  if (*dev_null)
    return NULL;
  if (n > 2 && (p[0] == 'a' || p[0] == 'b') && p[1] == '/') {
    p += 2;
    n -= 2;
  }
  if (n == 0 || p[0] == '/' || memchr(p, 0, n)) {
    *bad = true;
    return NULL;
  }
  return strndup(p, n);
}

void race_patch_clear(struct race_patch *p) {
  for (size_t i = 0; p && i < p->n_files; i++)
    free(p->files[i].path);
  if (p) {
    free(p->files);
    p->files = NULL;
    p->n_files = 0;
  }
}

static int add_file(struct race_patch *out, char *path, bool creates, const char *body,
                    const char **why) {
  if (out->n_files >= RACE_PATCH_MAX_FILES) {
    free(path);
    *why = "the patch touches too many files";
    return -1;
  }
  struct race_patch_file *grown = realloc(out->files, (out->n_files + 1) * sizeof(*grown));
  if (!grown) {
    free(path);
    *why = "out of memory";
    return -1;
  }
  out->files = grown;
  out->files[out->n_files++] = (struct race_patch_file){path, creates, body, 0};
  return 0;
}

int race_patch_parse(const char *text, size_t length, struct race_patch *out, const char **why) {
  memset(out, 0, sizeof(*out));
  if (length > RACE_PATCH_MAX_BYTES) {
    *why = "the patch is larger than 16M";
    return -1;
  }
  struct cursor c = {text, text + length};
  const char *line, *prev = NULL;
  size_t n, prev_n = 0;
  bool nl;
  while (next_line(&c, &line, &n, &nl)) {
    if (prev && starts(prev, prev_n, "--- ") && starts(line, n, "+++ ")) {
      bool old_null = false, new_null = false, bad = false;
      char *old_path = header_path(prev, prev_n, &old_null, &bad);
      char *new_path = header_path(line, n, &new_null, &bad);
      free(old_path);
      if (bad || (!new_path && !new_null)) {
        free(new_path);
        *why = "a file header of the patch names no usable path";
        goto fail;
      }
      if (new_null) {
        *why = "the patch deletes a file, which a race cannot apply";
        goto fail;
      }
      if (out->n_files) {
        struct race_patch_file *f = &out->files[out->n_files - 1];
        f->body_length = (size_t)(prev - f->body);
      }
      if (add_file(out, new_path, old_null, c.p, why) < 0)
        goto fail;
      prev = NULL;
      continue;
    }
    prev = line;
    prev_n = n;
  }
  if (out->n_files == 0) {
    *why = "the patch holds no file (no ---/+++ header)";
    return -1;
  }
  struct race_patch_file *last = &out->files[out->n_files - 1];
  last->body_length = (size_t)(text + length - last->body);
  return 0;
fail:
  race_patch_clear(out);
  return -1;
}

/* "@@ -A[,B] +C[,D] @@"; a missing count is 1. */
static bool hunk_header(const char *line, size_t length, unsigned long *a, unsigned long *b,
                        unsigned long *c, unsigned long *d) {
  char buf[128];
  if (length >= sizeof(buf) || !starts(line, length, "@@ -"))
    return false;
  memcpy(buf, line, length);
  buf[length] = 0;
  char *p = buf + 4, *e;
  *a = strtoul(p, &e, 10);
  if (e == p)
    return false;
  *b = 1;
  if (*e == ',') {
    p = e + 1;
    *b = strtoul(p, &e, 10);
    if (e == p)
      return false;
  }
  if (strncmp(e, " +", 2))
    return false;
  p = e + 2;
  *c = strtoul(p, &e, 10);
  if (e == p)
    return false;
  *d = 1;
  if (*e == ',') {
    p = e + 1;
    *d = strtoul(p, &e, 10);
    if (e == p)
      return false;
  }
  return !strncmp(e, " @@", 3);
}

struct buffer {
  char *data;
  size_t length, capacity;
};

static bool emit(struct buffer *b, const char *data, size_t n, bool newline) {
  size_t need = b->length + n + 1;
  if (need > b->capacity) {
    size_t cap = b->capacity ? b->capacity : 4096;
    while (cap < need)
      cap *= 2;
    char *grown = realloc(b->data, cap);
    if (!grown)
      return false;
    b->data = grown;
    b->capacity = cap;
  }
  memcpy(b->data + b->length, data, n);
  b->length += n;
  if (newline)
    b->data[b->length++] = '\n';
  return true;
}

/* One hunk line, the "\ No newline" marker after it folded in. */
struct hunk_line {
  char kind; /* ' ', '-', '+' */
  const char *text;
  size_t length;
  bool newline;
};

static bool read_hunk_line(struct cursor *c, struct hunk_line *h) {
  const char *line;
  size_t n;
  bool nl;
  if (!next_line(c, &line, &n, &nl))
    return false;
  /* An empty line is an empty context line whose leading space an editor removed. */
  h->kind = n ? line[0] : ' ';
  h->text = n ? line + 1 : line;
  h->length = n ? n - 1 : 0;
  h->newline = true;
  struct cursor peek = *c;
  const char *marker;
  size_t mn;
  if (next_line(&peek, &marker, &mn, &nl) && mn > 0 && marker[0] == '\\') {
    h->newline = false;
    *c = peek;
  }
  return true;
}

int race_patch_apply(const struct race_patch_file *f, const char *old, size_t old_length,
                     char **out, size_t *out_length, const char **why) {
  struct cursor body = {f->body, f->body + f->body_length};
  struct cursor src = {old ? old : "", (old ? old : "") + old_length};
  struct buffer b = {0};
  unsigned long at = 0; /* lines of old consumed */
  const char *line, *ol;
  size_t n, on;
  bool nl, onl;
  bool any = false;
  while (next_line(&body, &line, &n, &nl)) {
    unsigned long a, bcount, c, d;
    if (!hunk_header(line, n, &a, &bcount, &c, &d))
      continue; /* text between hunks (git's index lines, comments) */
    any = true;
    unsigned long start = bcount == 0 ? a : a - 1;
    if (a == 0 && bcount != 0) {
      *why = "a hunk starts at line 0";
      goto fail;
    }
    if (start < at) {
      *why = "the hunks overlap or are out of order";
      goto fail;
    }
    for (; at < start; at++) {
      if (!next_line(&src, &ol, &on, &onl)) {
        *why = "a hunk starts past the end of the file";
        goto fail;
      }
      if (!emit(&b, ol, on, onl))
        goto oom;
    }
    unsigned long seen_old = 0, seen_new = 0;
    while (seen_old < bcount || seen_new < d) {
      struct hunk_line h;
      if (!read_hunk_line(&body, &h)) {
        *why = "a hunk is shorter than its header says";
        goto fail;
      }
      if (h.kind != ' ' && h.kind != '-' && h.kind != '+') {
        *why = "a hunk holds a line that is not context, removal or addition";
        goto fail;
      }
      if (h.kind != '+') {
        if (++seen_old > bcount || !next_line(&src, &ol, &on, &onl) || on != h.length ||
            memcmp(ol, h.text, on) || onl != h.newline) {
          *why = "the patch does not apply: its context or removed lines differ from the file";
          goto fail;
        }
        at++;
      }
      if (h.kind != '-') {
        if (++seen_new > d) {
          *why = "a hunk is longer than its header says";
          goto fail;
        }
        if (!emit(&b, h.text, h.length, h.newline))
          goto oom;
      }
    }
  }
  if (!any) {
    *why = "a file of the patch has no hunk";
    goto fail;
  }
  while (next_line(&src, &ol, &on, &onl))
    if (!emit(&b, ol, on, onl))
      goto oom;
  if (!emit(&b, "", 0, false)) /* room for a NUL: callers may treat text as a string */
    goto oom;
  b.data[b.length] = 0;
  *out = b.data;
  *out_length = b.length;
  return 0;
oom:
  *why = "out of memory";
fail:
  free(b.data);
  return -1;
}
