/* cordon-guest's start as pid 1 of the microvm: the kernel file systems, the 9p module chain
 * the base initramfs carries (Debian's generic kernel has 9p and virtio-console as modules, and
 * the guest has no modprobe), the host's system trees read-only and the workspace read-write
 * (9p), loopback when asked, and the agent's virtio-serial port. What the host asks for comes
 * on the kernel command line (cordon.root=, cordon.user=, cordon.net=), which the qemu monitor
 * writes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guest/guest.h"

void guest_log(const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n > sizeof(line) - 2)
    n = (int)sizeof(line) - 2;
  line[n++] = '\n';
  /* fd 2 is /dev/console (ttyS0): the host logs it to a file, apart from command output. */
  ssize_t w = write(STDERR_FILENO, line, (size_t)n);
  (void)w;
}

static int mkdir_p(const char *path, mode_t mode) {
  char buf[4096];
  if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
    return -1;
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
      return -1;
    *p = '/';
  }
  return mkdir(buf, mode) < 0 && errno != EEXIST ? -1 : 0;
}

static void mount_or_log(const char *src, const char *target, const char *type, unsigned long flags,
                         const char *data) {
  if (mkdir_p(target, 0755) < 0 || mount(src, target, type, flags, data) < 0)
    guest_log("cordon-guest: mount %s on %s: %s", type, target, strerror(errno));
}

/* Load /modules/NAME.ko in the order /modules/order gives (dependencies first). A module the
 * kernel already has (built in, or loaded) is fine. */
static void load_modules(void) {
  FILE *order = fopen("/modules/order", "re");
  if (!order)
    return;
  char name[128];
  while (fgets(name, sizeof(name), order)) {
    name[strcspn(name, "\n")] = '\0';
    if (!name[0])
      continue;
    char path[256];
    snprintf(path, sizeof(path), "/modules/%s.ko", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      guest_log("cordon-guest: %s: %s", path, strerror(errno));
      continue;
    }
    if (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST)
      guest_log("cordon-guest: load %s: %s", name, strerror(errno));
    close(fd);
  }
  fclose(order);
}

/* cordon.KEY=VALUE words of the kernel command line. */
static void read_cmdline(struct guest_config *cfg) {
  static char line[4096];
  int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  ssize_t n = read(fd, line, sizeof(line) - 1);
  close(fd);
  if (n <= 0)
    return;
  line[n] = '\0';
  for (char *save = NULL, *w = strtok_r(line, " \n", &save); w; w = strtok_r(NULL, " \n", &save)) {
    if (strncmp(w, "cordon.root=", 12) == 0 && w[12] == '/')
      cfg->root = w + 12;
    else if (strcmp(w, "cordon.user=root") == 0)
      cfg->uid = 0;
    else if (strcmp(w, "cordon.net=loopback") == 0)
      cfg->loopback = true;
    else if (strncmp(w, "cordon.pids=", 12) == 0)
      cfg->pids = strtoul(w + 12, NULL, 10);
  }
}

static void loopback_up(void) {
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    return;
  struct ifreq ifr = {0};
  snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
  if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
      guest_log("cordon-guest: lo up: %s", strerror(errno));
  }
  close(s);
}

/* 9p over virtio-mmio. The host's trees are read-only on both sides (qemu's fsdev readonly=on
 * too) and cached; the workspace is not cached, so what the host writes into it (the backend's
 * write and read go through the host side) is what the guest sees next. */
/* The sandbox's own identities, as the ns backend gives them: root, cordon (the sandbox user,
 * 1000) and the overflow id, never the host's names for those ids (the host's /etc is mounted
 * above). Written on a root-owned tmpfs and bound read-only over the host's files. */
static void write_file_or_log(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  size_t len = strlen(text);
  if (fd < 0 || write(fd, text, len) != (ssize_t)len)
    guest_log("cordon-guest: %s: %s", path, strerror(errno));
  if (fd >= 0)
    close(fd);
}

static void bind_read_only(const char *src, const char *target) {
  if (mount(src, target, NULL, MS_BIND, NULL) < 0 ||
      mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
    guest_log("cordon-guest: bind %s on %s: %s", src, target, strerror(errno));
}

static void identity_files(void) {
  mount_or_log("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=1m");
  mkdir_p("/run/cordon", 0755);
  write_file_or_log("/run/cordon/passwd",
                    "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                    "cordon:x:1000:1000:cordon sandbox:/home/user:/bin/sh\n"
                    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
  write_file_or_log("/run/cordon/group", "root:x:0:\ncordon:x:1000:\nnogroup:x:65534:\n");
  bind_read_only("/run/cordon/passwd", "/etc/passwd");
  bind_read_only("/run/cordon/group", "/etc/group");
}

#define NINEP_CACHED "trans=virtio,version=9p2000.L,msize=262144,cache=loose"
#define NINEP_SHARED "trans=virtio,version=9p2000.L,msize=262144,cache=mmap,access=any"

void guest_boot(struct guest_config *cfg) {
  cfg->root = "/workspace";
  cfg->uid = 1000;
  mount_or_log("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
  mount_or_log("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
  mount_or_log("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
  mount_or_log("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  mount_or_log("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
  mount_or_log("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "mode=0620,ptmxmode=0666");
  read_cmdline(cfg);
  load_modules();
  mount_or_log("usr", "/usr", "9p", MS_RDONLY | MS_NODEV, NINEP_CACHED);
  mount_or_log("etc", "/etc", "9p", MS_RDONLY | MS_NODEV, NINEP_CACHED);
  identity_files();
  /* Debian's merged /usr: the same view of the host the ns backend gives. */
  static const char *const links[][2] = {
      {"usr/bin", "/bin"}, {"usr/sbin", "/sbin"}, {"usr/lib", "/lib"}, {"usr/lib64", "/lib64"}};
  for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++)
    if (symlink(links[i][0], links[i][1]) < 0 && errno != EEXIST)
      guest_log("cordon-guest: %s: %s", links[i][1], strerror(errno));
  mount_or_log("ws", cfg->root, "9p", MS_NODEV, NINEP_SHARED);
  mkdir_p("/home/user", 0755);
  if (chown("/home/user", cfg->uid, cfg->uid) < 0)
    guest_log("cordon-guest: /home/user: %s", strerror(errno));
  if (cfg->loopback)
    loopback_up();
}

/* /dev/vportNpM whose /sys/class/virtio-ports/vportNpM/name is the agent's port (there is no
 * udev to make the /dev/virtio-ports/NAME link). Waits a little: the device may be probed
 * after we start. */
int guest_open_port(void) {
  for (int attempt = 0; attempt < 200; attempt++) {
    DIR *d = opendir("/sys/class/virtio-ports");
    struct dirent *e;
    while (d && (e = readdir(d))) {
      if (e->d_name[0] == '.')
        continue;
      char path[300], name[64] = {0};
      snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name", e->d_name);
      int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0)
        continue;
      ssize_t n = read(fd, name, sizeof(name) - 1);
      close(fd);
      if (n <= 0 || strncmp(name, GUEST_WIRE_PORT_NAME, strlen(GUEST_WIRE_PORT_NAME)) != 0)
        continue;
      snprintf(path, sizeof(path), "/dev/%s", e->d_name);
      closedir(d);
      int port = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
      if (port < 0)
        guest_log("cordon-guest: %s: %s", path, strerror(errno));
      return port;
    }
    if (d)
      closedir(d);
    usleep(10000);
  }
  guest_log("cordon-guest: no virtio-serial port named " GUEST_WIRE_PORT_NAME);
  return -1;
}
