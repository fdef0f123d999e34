/* The content cost of one file's change (pure, linediff.h): no I/O, no clock, so the same two
 * byte strings give the same cost on every host.
 *
 * Text is compared by lines with Myers' O(ND) search for the shortest edit script, of which
 * only the length D (lines removed + lines added) is needed, so one diagonal vector suffices.
 * The common head and tail are cut first, at line boundaries, by comparing bytes: a one-line
 * change in a large file costs a linear scan and a search of D = 2. What is left is bounded
 * (lines, D, steps); past a bound the cost is every line left on both sides, an upper bound of
 * the minimal diff, so a huge rewrite cannot make the race slow, only honestly expensive. */
#include "race/linediff.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

bool linediff_is_binary(const unsigned char *data, size_t length) {
  size_t n = length < LINEDIFF_BINARY_PROBE ? length : LINEDIFF_BINARY_PROBE;
  return n && memchr(data, 0, n) != NULL;
}

uint64_t linediff_count_lines(const unsigned char *data, size_t length) {
  uint64_t lines = 0;
  const unsigned char *p = data, *end = data + length;
  while (p < end && (p = memchr(p, '\n', (size_t)(end - p)))) {
    lines++;
    p++;
  }
  return lines + (length && data[length - 1] != '\n');
}

uint64_t linediff_bytes(const unsigned char *a, size_t na, const unsigned char *b, size_t nb) {
  size_t common = na < nb ? na : nb;
  uint64_t differ = na > nb ? na - nb : nb - na;
  for (size_t i = 0; i < common; i++)
    differ += a[i] != b[i];
  return differ;
}

struct line {
  size_t start, length;
  uint64_t hash;
};

/* FNV-1a: only a fast filter; equal hashes are confirmed by the bytes. */
static uint64_t hash_bytes(const unsigned char *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static struct line *split_lines(const unsigned char *data, size_t length, size_t count) {
  struct line *lines = calloc(count ? count : 1, sizeof(*lines));
  if (!lines)
    return NULL;
  size_t at = 0;
  for (size_t i = 0; i < count; i++) {
    const unsigned char *nl = memchr(data + at, '\n', length - at);
    size_t end = nl ? (size_t)(nl - data) + 1 : length;
    lines[i] = (struct line){at, end - at, hash_bytes(data + at, end - at)};
    at = end;
  }
  return lines;
}

static bool same_line(const unsigned char *a, const struct line *x, const unsigned char *b,
                      const struct line *y) {
  return x->hash == y->hash && x->length == y->length &&
         !memcmp(a + x->start, b + y->start, x->length);
}

/* Myers' greedy forward search for D; -2 when a bound is reached. */
static int64_t myers_distance(const unsigned char *a, const struct line *la, int64_t n,
                              const unsigned char *b, const struct line *lb, int64_t m,
                              const struct linediff_bounds *bounds, int64_t *v) {
  int64_t max_d = n + m < (int64_t)bounds->max_d ? n + m : (int64_t)bounds->max_d;
  int64_t off = max_d + 1;
  uint64_t steps = 0;
  v[off + 1] = 0;
  for (int64_t d = 0; d <= max_d; d++) {
    for (int64_t k = -d; k <= d; k += 2) {
      int64_t x = (k == -d || (k != d && v[off + k - 1] < v[off + k + 1])) ? v[off + k + 1]
                                                                           : v[off + k - 1] + 1;
      int64_t y = x - k;
      while (x < n && y < m && same_line(a, &la[x], b, &lb[y])) {
        x++;
        y++;
        steps++;
      }
      v[off + k] = x;
      if (x >= n && y >= m)
        return d;
      if (++steps > bounds->max_steps)
        return -2;
    }
  }
  return -2;
}

int linediff_lines(const unsigned char *a, size_t na, const unsigned char *b, size_t nb,
                   const struct linediff_bounds *bounds, uint64_t *changed, bool *exact) {
  static const struct linediff_bounds defaults = {LINEDIFF_MAX_LINES, LINEDIFF_MAX_D,
                                                  LINEDIFF_MAX_STEPS};
  if (!bounds)
    bounds = &defaults;
  *exact = true;
  /* The common head, back to the start of its last (possibly partial) line. */
  size_t head = 0, common = na < nb ? na : nb;
  while (head < common && a[head] == b[head])
    head++;
  if (head == na && head == nb) {
    *changed = 0;
    return 0;
  }
  while (head > 0 && a[head - 1] != '\n')
    head--;
  /* The common tail, starting at a line start on both sides. */
  size_t tail = 0, room = common - head;
  while (tail < room && a[na - 1 - tail] == b[nb - 1 - tail])
    tail++;
  while (tail > 0 && !((na - tail == head || a[na - tail - 1] == '\n') &&
                       (nb - tail == head || b[nb - tail - 1] == '\n')))
    tail--;
  const unsigned char *ma = a + head, *mb = b + head;
  size_t nma = na - head - tail, nmb = nb - head - tail;
  uint64_t n = linediff_count_lines(ma, nma), m = linediff_count_lines(mb, nmb);
  if (n == 0 || m == 0) {
    *changed = n + m;
    return 0;
  }
  if (n + m > bounds->max_lines) {
    *changed = n + m;
    *exact = false;
    return 0;
  }
  struct line *la = split_lines(ma, nma, n), *lb = split_lines(mb, nmb, m);
  uint64_t max_d = n + m < bounds->max_d ? n + m : bounds->max_d;
  int64_t *v = calloc(2 * max_d + 4, sizeof(*v));
  int rc = 0;
  if (!la || !lb || !v) {
    errno = ENOMEM;
    rc = -1;
  } else {
    int64_t d = myers_distance(ma, la, (int64_t)n, mb, lb, (int64_t)m, bounds, v);
    *exact = d >= 0;
    *changed = d >= 0 ? (uint64_t)d : n + m;
  }
  free(la);
  free(lb);
  free(v);
  return rc;
}

int linediff_cost(const unsigned char *old, size_t n_old, const unsigned char *new_, size_t n_new,
                  uint64_t *cost, bool *binary) {
  *binary = linediff_is_binary(old, n_old) || linediff_is_binary(new_, n_new);
  if (*binary) {
    *cost = linediff_bytes(old, n_old, new_, n_new);
    return 0;
  }
  bool exact;
  return linediff_lines(old, n_old, new_, n_new, NULL, cost, &exact);
}
