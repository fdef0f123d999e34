/* /proc/PID/stat parsing (see proc.h). The command name (field 2) may hold spaces and
 * parentheses, so the fields after it are counted from its last ')'. */
#include "base/proc.h"

#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int proc_stat_read(pid_t pid, struct proc_stat *out) {
  char path[64], buf[1024];
  if (pid == 0)
    snprintf(path, sizeof(path), "/proc/self/stat");
  else
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return -1;
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ' || !p[2])
    return -1;
  memset(out, 0, sizeof(*out));
  out->state = p[2];
  /* p points at the space before field `field + 1`. */
  for (int field = 2; field < 49; field++) {
    p = strchr(p + 1, ' ');
    if (!p)
      return field >= 22 ? 0 : -1; /* a kernel too old for the argv fields */
    const char *value = p + 1;
    switch (field + 1) {
    case 4: out->parent = (pid_t)strtol(value, NULL, 10); break;
    case 20: out->threads = strtol(value, NULL, 10); break;
    case 22: out->start_time = strtoull(value, NULL, 10); break;
    case 48: out->arg_start = strtoul(value, NULL, 10); break;
    case 49: out->arg_end = strtoul(value, NULL, 10); break;
    default: break;
    }
  }
  return 0;
}

unsigned long long proc_start_time(pid_t pid) {
  struct proc_stat st;
  if (proc_stat_read(pid, &st) < 0 || st.state == 'Z' || st.state == 'X' || st.state == 'x')
    return 0;
  return st.start_time;
}

static bool exit_pending;

void proc_exit_pending_set(void) {
  exit_pending = true;
}

bool proc_exit_pending(void) {
  return exit_pending;
}

struct address_search {
  uintptr_t address;
  bool found;
};

static int search_executable(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  struct address_search *search = data;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && search->address >= start && search->address < start + ph->p_memsz)
      search->found = true;
  }
  return 1; /* the executable comes first: stop after it */
}

bool proc_in_executable(const void *address) {
  struct address_search search = {.address = (uintptr_t)address};
  dl_iterate_phdr(search_executable, &search);
  return search.found;
}
