/* Terminal progress bar: "\r" redraws of one line, erased at the end. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "base/fs.h"
#include "snapshot/progress.h"

static void human(char *buf, size_t size, uint64_t v, bool bytes) {
  if (!bytes) {
    snprintf(buf, size, "%llu", (unsigned long long)v);
    return;
  }
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double d = (double)v;
  size_t u = 0;
  while (d >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
    d /= 1024;
    u++;
  }
  snprintf(buf, size, u ? "%.1f %s" : "%.0f %s", d, units[u]);
}

static void update(void *data, const char *phase, uint64_t done, uint64_t total) {
  struct tty_progress *p = data;
  if (!p->active)
    return;
  char a[32], b[32], bar[33];
  human(a, sizeof(a), done, p->bytes);
  if (total > 0) {
    human(b, sizeof(b), total, p->bytes);
    size_t width = 30,
           filled = done >= total ? width : (size_t)((double)done / (double)total * width);
    memset(bar, '#', filled);
    memset(bar + filled, '.', width - filled);
    bar[width] = 0;
    fprintf(p->out, "\r\033[K%-8s [%s] %s / %s", phase, bar, a, b);
  } else {
    fprintf(p->out, "\r\033[K%-8s %s", phase, a);
  }
  fflush(p->out);
  p->drawn = true;
}

const struct cordon_progress *tty_progress_init(struct tty_progress *p, FILE *out, bool bytes) {
  memset(p, 0, sizeof(*p));
  p->out = out;
  p->bytes = bytes;
  p->active = isatty(fileno(out)) == 1;
  p->start = fs_now();
  p->progress.update = update;
  p->progress.data = p;
  return p->active ? &p->progress : NULL;
}

void tty_progress_done(struct tty_progress *p) {
  if (p->active && p->drawn) {
    fputs("\r\033[K", p->out);
    fflush(p->out);
  }
  p->drawn = false;
}
