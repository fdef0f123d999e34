/* The guest's memory watch. The guest has no swap: near the end of its RAM the kernel reclaims
 * the page cache, and with it the code pages of the running commands, which it reads back over
 * 9p, for minutes before its OOM killer fires (a memory hog once stalled a guest for 120 s).
 * While an exec runs, the agent reads MemAvailable and, below a floor, kills the process the
 * OOM killer would choose (the highest oom_score; the keepers' -1000 gives them 0, pid 1 is
 * never chosen), as earlyoom does on hosts. The command then ends by SIGKILL, as it would by
 * the OOM killer: exit 137 on the host. Parsing and choosing are pure over a /proc given. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guest/guest.h"

/* A floor of 1/25 of the RAM, at least 8 MiB: below it the code pages of what runs are the
 * only reclaimable memory left. */
#define FLOOR_DIVISOR 25
#define FLOOR_MIN_KIB 8192UL

/* The value of "NAME: <n> kB" on a line of its own in /proc/meminfo's text. */
static bool field(const char *text, const char *name, unsigned long *kib) {
  size_t n = strlen(name);
  for (const char *line = text; *line;) {
    if (strncmp(line, name, n) == 0 && line[n] == ':') {
      char *end = NULL;
      unsigned long v = strtoul(line + n + 1, &end, 10);
      if (end == line + n + 1)
        return false;
      while (*end == ' ')
        end++;
      if (strncmp(end, "kB", 2) != 0)
        return false;
      *kib = v;
      return true;
    }
    const char *next = strchr(line, '\n');
    if (!next)
      break;
    line = next + 1;
  }
  return false;
}

bool guest_meminfo_parse(const char *text, struct guest_meminfo *m) {
  return field(text, "MemTotal", &m->total_kib) && field(text, "MemAvailable", &m->available_kib) &&
         m->total_kib > 0;
}

bool guest_memory_low(const struct guest_meminfo *m) {
  unsigned long floor = m->total_kib / FLOOR_DIVISOR;
  if (floor < FLOOR_MIN_KIB)
    floor = FLOOR_MIN_KIB;
  return m->available_kib < floor;
}

/* Read a small file under dirfd into buf (NUL-terminated): its length, or -1. */
static ssize_t read_small(int dirfd, const char *path, char *buf, size_t size) {
  int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  size_t done = 0;
  while (done < size - 1) {
    ssize_t n = read(fd, buf + done, size - 1 - done);
    if (n <= 0)
      break;
    done += (size_t)n;
  }
  close(fd);
  buf[done] = '\0';
  return (ssize_t)done;
}

int guest_meminfo_read(const char *proc, struct guest_meminfo *m) {
  char buf[4096];
  int dirfd = open(proc, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0)
    return -1;
  ssize_t n = read_small(dirfd, "meminfo", buf, sizeof(buf));
  close(dirfd);
  return n > 0 && guest_meminfo_parse(buf, m) ? 0 : -1;
}

pid_t guest_oom_choose(const char *proc, long *score) {
  DIR *d = opendir(proc);
  if (!d)
    return -1;
  pid_t best = -1;
  long best_score = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    char *end = NULL;
    long pid = strtol(e->d_name, &end, 10);
    if (*e->d_name < '1' || *e->d_name > '9' || *end || pid <= 1)
      continue;
    char path[64], buf[32];
    snprintf(path, sizeof(path), "%ld/oom_score", pid);
    if (read_small(dirfd(d), path, buf, sizeof(buf)) <= 0)
      continue; /* gone meanwhile */
    long s = strtol(buf, &end, 10);
    if (end == buf || s <= best_score)
      continue;
    best = (pid_t)pid;
    best_score = s;
  }
  closedir(d);
  if (score)
    *score = best_score;
  return best;
}
