/* The qemu monitor's VMM side (see qemu.h): where the guest and the agent are, whether the
 * built guest is intact, qemu's command line, the boot initramfs, and starting qemu confined
 * and detached. */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <grp.h>
#include <time.h>
#include <unistd.h>

#include "backends/microvm/guest-wire.h"
#include "backends/microvm/microvm-paths.h"
#include "backends/microvm/microvm.h"
#include "backends/microvm/qemu.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/syscalls.h"
#include "confine/mount.h"
#include "confine/policy.h"
#include "confine/userns.h"

const char *qemu_guest_dir(const struct microvm_config *cfg) {
  if (cfg && cfg->guest_dir && cfg->guest_dir[0])
    return cfg->guest_dir;
  const char *env = getenv(MICROVM_GUEST_DIR_ENV);
  return env && env[0] ? env : MICROVM_DEFAULT_GUEST_DIR;
}

char *qemu_agent_path(void) {
  const char *env = getenv(QEMU_GUEST_AGENT_ENV);
  const char *candidates[] = {env && env[0] ? env : NULL, CORDON_GUEST_AGENT_BUILD,
                              CORDON_GUEST_AGENT_INSTALLED};
  for (size_t i = 0; i < ARRAY_SIZE(candidates); i++)
    if (candidates[i] && access(candidates[i], R_OK) == 0)
      return strdup(candidates[i]);
  return NULL;
}

char *qemu_binary_path(void) {
  const char *path = getenv("PATH");
  if (!path || !path[0])
    path = "/usr/local/bin:/usr/bin:/bin";
  _cleanup_free_ char *copy = strdup(path);
  if (!copy)
    return NULL;
  for (char *save = NULL, *dir = strtok_r(copy, ":", &save); dir;
       dir = strtok_r(NULL, ":", &save)) {
    char *candidate = NULL;
    if (asprintf(&candidate, "%s/%s", dir, QEMU_BINARY) < 0)
      return NULL;
    if (access(candidate, X_OK) == 0)
      return candidate;
    free(candidate);
  }
  return NULL;
}

/* The digests this process has computed, by the file's identity: every preflight checks the
 * guest, and a session create runs several (Debian's kernel is 65 MB: seconds each on a loaded
 * machine). A file replaced or written since has another inode or ctime, and is hashed anew. */
struct digest_memo {
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime, ctime;
  char hex[65];
};
static struct digest_memo digest_memos[8];
static unsigned digest_memo_next;
static pthread_mutex_t digest_memo_lock = PTHREAD_MUTEX_INITIALIZER;

static bool digest_memo_same(const struct digest_memo *m, const struct stat *st) {
  return m->hex[0] && m->dev == st->st_dev && m->ino == st->st_ino && m->size == st->st_size &&
         m->mtime.tv_sec == st->st_mtim.tv_sec && m->mtime.tv_nsec == st->st_mtim.tv_nsec &&
         m->ctime.tv_sec == st->st_ctim.tv_sec && m->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

static int sha256_file(int dirfd, const char *name, char hex[65]) {
  _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return -1;
  struct stat before;
  if (fstat(fd, &before) < 0)
    return -1;
  bool found = false;
  pthread_mutex_lock(&digest_memo_lock);
  for (size_t i = 0; i < ARRAY_SIZE(digest_memos) && !found; i++)
    if (digest_memo_same(&digest_memos[i], &before)) {
      memcpy(hex, digest_memos[i].hex, 65);
      found = true;
    }
  pthread_mutex_unlock(&digest_memo_lock);
  if (found)
    return 0;
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
    EVP_MD_CTX_free(ctx);
    return -1;
  }
  unsigned char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0)
    EVP_DigestUpdate(ctx, buf, (size_t)n);
  unsigned char md[32];
  unsigned int mdlen = 0;
  int ok = n == 0 && EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 && mdlen == 32;
  EVP_MD_CTX_free(ctx);
  for (unsigned i = 0; ok && i < 32; i++)
    sprintf(hex + 2 * i, "%02x", md[i]);
  /* Remembered only when the file did not change while it was read, and its last change is
   * over a second old: timestamps are coarse (a clock tick), so a write in the same tick as
   * the one seen would leave them as they were (git's "racy" rule). */
  struct stat after;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  if (ok && fstat(fd, &after) == 0 && S_ISREG(after.st_mode) &&
      now.tv_sec - after.st_ctim.tv_sec > 1 && now.tv_sec - after.st_mtim.tv_sec > 1) {
    struct digest_memo m = {.dev = before.st_dev,
                            .ino = before.st_ino,
                            .size = before.st_size,
                            .mtime = before.st_mtim,
                            .ctime = before.st_ctim};
    memcpy(m.hex, hex, 65);
    if (digest_memo_same(&m, &after)) {
      pthread_mutex_lock(&digest_memo_lock);
      digest_memos[digest_memo_next++ % ARRAY_SIZE(digest_memos)] = m;
      pthread_mutex_unlock(&digest_memo_lock);
    }
  }
  return ok ? 0 : -1;
}

/* Each line of SHA256SUMS is "HEX  NAME"; names are plain file names in dir. */
char *qemu_guest_check(const char *dir) {
  _cleanup_close_ int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  char *why = NULL;
  if (dirfd < 0) {
    if (asprintf(&why, "no built guest in %s (run scripts/build-guest)", dir) < 0)
      return NULL;
    return why;
  }
  _cleanup_close_ int sums = openat(dirfd, QEMU_GUEST_SUMS, O_RDONLY | O_CLOEXEC);
  _cleanup_free_ unsigned char *text = NULL;
  size_t length = 0;
  if (sums < 0 || fs_read_fd(sums, 65536, &text, &length, NULL) < 0) {
    if (asprintf(&why, "no %s in %s (run scripts/build-guest)", QEMU_GUEST_SUMS, dir) < 0)
      return NULL;
    return why;
  }
  bool kernel = false, initramfs = false;
  for (char *save = NULL, *line = strtok_r((char *)text, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    char want[65], name[256];
    if (sscanf(line, "%64[0-9a-f]  %255s", want, name) != 2 || strlen(want) != 64 ||
        strchr(name, '/')) {
      if (asprintf(&why, "%s/%s is malformed", dir, QEMU_GUEST_SUMS) < 0)
        return NULL;
      return why;
    }
    char got[65] = {0};
    if (sha256_file(dirfd, name, got) < 0 || strcmp(got, want) != 0) {
      if (asprintf(&why,
                   "the built guest's %s/%s is missing or fails its checksum "
                   "(run scripts/build-guest)",
                   dir, name) < 0)
        return NULL;
      return why;
    }
    kernel |= strcmp(name, QEMU_GUEST_KERNEL) == 0;
    initramfs |= strcmp(name, QEMU_GUEST_INITRAMFS) == 0;
  }
  if (!kernel || !initramfs) {
    if (asprintf(&why, "%s/%s names no kernel or initramfs", dir, QEMU_GUEST_SUMS) < 0)
      return NULL;
    return why;
  }
  return strdup("");
}

bool qemu_guest_minimal(const char *dir) {
  _cleanup_close_ int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  _cleanup_close_ int fd =
      dirfd < 0 ? -1 : openat(dirfd, QEMU_GUEST_KERNEL_VERSION, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  char head[sizeof(QEMU_GUEST_MINIMAL)] = {0};
  return fd >= 0 && read(fd, head, sizeof(head) - 1) == (ssize_t)sizeof(head) - 1 &&
         strcmp(head, QEMU_GUEST_MINIMAL) == 0;
}

/* ---- pure: the agent's cpio and qemu's argv ------------------------------------------------ */

static size_t cpio_entry(unsigned char *out, const char *name, unsigned mode, size_t filesize,
                         unsigned ino) {
  size_t namesize = strlen(name) + 1;
  int n = sprintf((char *)out, "070701%08X%08X%08X%08X%08X%08X%08zX%08X%08X%08X%08X%08zX%08X", ino,
                  mode, 0u, 0u, 1u, 0u, filesize, 0u, 0u, 0u, 0u, namesize, 0u);
  memcpy(out + n, name, namesize);
  size_t at = (size_t)n + namesize;
  while (at % 4)
    out[at++] = 0;
  return at;
}

int qemu_cpio_single(const char *name, const unsigned char *data, size_t length,
                     unsigned char **out, size_t *out_length) {
  size_t cap = 2 * (110 + strlen(name) + 16) + length + 16 + 32;
  unsigned char *buf = calloc(1, cap);
  if (!buf)
    return -ENOMEM;
  size_t at = cpio_entry(buf, name, 0100755, length, 1);
  memcpy(buf + at, data, length);
  at += length;
  while (at % 4)
    buf[at++] = 0;
  at += cpio_entry(buf + at, "TRAILER!!!", 0, 0, 0);
  *out = buf;
  *out_length = at;
  return 0;
}

static bool argv_add(char **argv, size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool argv_add(char **argv, size_t *n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int r = vasprintf(&argv[*n], fmt, ap);
  va_end(ap);
  if (r < 0) {
    argv[*n] = NULL;
    return false;
  }
  (*n)++;
  return true;
}

void qemu_argv_free(char **argv) {
  for (size_t i = 0; argv && argv[i]; i++)
    free(argv[i]);
  free(argv);
}

/* Debian's generic kernel finds its devices through ACPI (it hangs at boot on microvm without
 * it); the minimal kernel has no ACPI at all, and boots faster without the tables to build:
 * qemu then puts the virtio-mmio devices on the kernel command line itself.
 * The machine keeps its RTC (rtc=on): without one the kernel's boot-time read of the wall clock
 * polls the absent CMOS's update flag for up to a second of port reads (6 s of a 13 s cold
 * create at load 18 under TCG, measured with printk times), and the guest's clock starts at
 * 1970. */

/* The kernel command line: quiet (the console is a serial port, slow under TCG), no probing
 * of hardware microvm does not have, tsc_early_khz (without it TCG boots sometimes hang
 * calibrating), no legacy BSD ptys (the minimal kernel's pty_init made 256 pairs of them, a
 * quarter of a second of its initcalls at load 18; the guest uses /dev/pts), and what the
 * agent reads (cordon.*). */
#define QEMU_KERNEL_CMDLINE                                                                \
  "console=ttyS0 quiet loglevel=1 panic=-1 reboot=t tsc_early_khz=2000000 no_timer_check " \
  "i8042.noaux i8042.nomux i8042.nopnp i8042.dumbkbd 8250.nr_uarts=1 cryptomgr.notests "   \
  "random.trust_cpu=on nomodeset pci=off pty.legacy_count=0"

/* Under TCG only: the guest's speculation mitigations (page table isolation above all: a CR3
 * switch on every syscall, which software emulation pays as a TLB flush) cost the emulated CPU
 * much and protect nothing, since emulated code does not speculate on the host's CPU. And no
 * address space randomisation in the guest (norandmaps): this qemu (7.2) finds translated code
 * by its virtual address, so every process that maps ld.so and libc somewhere new has them
 * translated anew; 30 runs of /usr/bin/true took 0.45 of the VMM's CPU time and 0.32 of the
 * wall time without it (measured in one VM, in turns, at load 14). The boundary cordon claims
 * is the VM's; inside it every process is the sandbox's own or its agent's (docs/security.md).
 * Under KVM the guest kernel keeps both. */
#define QEMU_KERNEL_CMDLINE_TCG " mitigations=off norandmaps"

/* Under TCG, the minimal kernel only: no local APIC timer (noapictimer). The boot calibrates it
 * against the PIT for ten ticks (LAPIC_CAL_LOOPS), busy-polling, which TCG stretched to some
 * 285 ms of each boot (the guest's program counter sampled through qemu's monitor, 4 boots at
 * load 14); the PIT, which the calibration used anyway, then gives the tick (and, with more than
 * one vCPU, broadcasts it). Debian's kernel booted with it but then answered no exec (its tick
 * stopped: printk times stood still), so it keeps its APIC timer. */
#define QEMU_KERNEL_CMDLINE_TCG_MINIMAL " noapictimer"

/* What bounds a VM beyond its RAM, written into the argv built above (kept apart from it):
 * --pids as cordon.pids= on the kernel command line (the guest agent's RLIMIT_NPROC of the
 * sandbox user), and under TCG the translation cache, which qemu sizes at 1 GiB by default and
 * fills with whatever code the guest runs: host memory --memory does not count. */
static bool argv_add_limits(char **argv, size_t n, const struct microvm_config *cfg, bool kvm) {
  for (size_t i = 1; i < n; i++) {
    char *with = NULL;
    if (cfg->pids && strcmp(argv[i - 1], "-append") == 0 &&
        asprintf(&with, "%s cordon.pids=%llu", argv[i], (unsigned long long)cfg->pids) < 0)
      return false;
    if (!kvm && strcmp(argv[i - 1], "-accel") == 0 && strcmp(argv[i], "tcg") == 0 &&
        asprintf(&with, "tcg,tb-size=%u", QEMU_TCG_CACHE_MIB) < 0)
      return false;
    if (with) {
      free(argv[i]);
      argv[i] = with;
    }
  }
  return true;
}

char **qemu_argv_build(const char *binary, const struct microvm_config *cfg, bool kvm, bool minimal,
                       const char *kernel, const char *initrd, const char *workspace) {
  char **argv = calloc(64, sizeof(*argv));
  if (!argv)
    return NULL;
  size_t n = 0;
  uint64_t mem = cfg->memory_bytes ? cfg->memory_bytes : MICROVM_DEFAULT_MEMORY_BYTES;
  unsigned vcpus = cfg->vcpus ? cfg->vcpus : MICROVM_DEFAULT_VCPUS;
  const char *root = cfg->root && cfg->root[0] == '/' ? cfg->root : MICROVM_DEFAULT_ROOT;
  const char *tcg = kvm       ? ""
                    : minimal ? QEMU_KERNEL_CMDLINE_TCG QEMU_KERNEL_CMDLINE_TCG_MINIMAL
                              : QEMU_KERNEL_CMDLINE_TCG;
  bool ok = argv_add(argv, &n, "%s", binary) && argv_add(argv, &n, "-M") &&
            argv_add(argv, &n, "%s", minimal ? "microvm,rtc=on,acpi=off" : "microvm,rtc=on") &&
            argv_add(argv, &n, "-accel") && argv_add(argv, &n, "%s", kvm ? "kvm" : "tcg") &&
            argv_add(argv, &n, "-m") &&
            argv_add(argv, &n, "%lluM", (unsigned long long)(mem >> 20)) &&
            argv_add(argv, &n, "-smp") && argv_add(argv, &n, "%u", vcpus) &&
            argv_add(argv, &n, "-nodefaults") && argv_add(argv, &n, "-no-user-config") &&
            argv_add(argv, &n, "-no-reboot") && argv_add(argv, &n, "-display") &&
            argv_add(argv, &n, "none") && argv_add(argv, &n, "-chardev") &&
            argv_add(argv, &n, "stdio,id=con,signal=off") && argv_add(argv, &n, "-serial") &&
            argv_add(argv, &n, "chardev:con") && argv_add(argv, &n, "-kernel") &&
            argv_add(argv, &n, "%s", kernel) && argv_add(argv, &n, "-initrd") &&
            argv_add(argv, &n, "%s", initrd) && argv_add(argv, &n, "-append") &&
            argv_add(argv, &n, QEMU_KERNEL_CMDLINE "%s cordon.root=%s cordon.user=%s cordon.net=%s",
                     tcg, root, cfg->user_root ? "root" : "user",
                     cfg->egress == CORDON_EGRESS_NONE ? "none" : "loopback") &&
            /* The workspace read-write; the host's /usr and /etc read-only, as on ns. */
            argv_add(argv, &n, "-fsdev") &&
            argv_add(argv, &n, "local,id=ws,path=%s,security_model=none", workspace) &&
            argv_add(argv, &n, "-device") &&
            argv_add(argv, &n, "virtio-9p-device,fsdev=ws,mount_tag=ws") &&
            argv_add(argv, &n, "-fsdev") &&
            argv_add(argv, &n, "local,id=usr,path=/usr,security_model=none,readonly=on") &&
            argv_add(argv, &n, "-device") &&
            argv_add(argv, &n, "virtio-9p-device,fsdev=usr,mount_tag=usr") &&
            argv_add(argv, &n, "-fsdev") &&
            argv_add(argv, &n, "local,id=etc,path=/etc,security_model=none,readonly=on") &&
            argv_add(argv, &n, "-device") &&
            argv_add(argv, &n, "virtio-9p-device,fsdev=etc,mount_tag=etc") &&
            argv_add(argv, &n, "-device") && argv_add(argv, &n, "virtio-serial-device") &&
            argv_add(argv, &n, "-chardev") &&
            argv_add(argv, &n, "socket,id=agent,fd=%d,server=on,wait=off", QEMU_FD_AGENT) &&
            argv_add(argv, &n, "-device") &&
            argv_add(argv, &n, "virtserialport,chardev=agent,name=" GUEST_WIRE_PORT_NAME) &&
            /* QEMU's own seccomp filter: no obsolete syscalls, no setuid, no exec, no
             * scheduler or affinity changes. */
            argv_add(argv, &n, "-sandbox") &&
            argv_add(argv, &n,
                     "on,obsolete=deny,elevateprivileges=deny,spawn=deny,"
                     "resourcecontrol=deny");
  ok = ok && argv_add_limits(argv, n, cfg, kvm);
  /* No NIC at all for any egress class: loopback lives inside the guest. */
  if (!ok) {
    qemu_argv_free(argv);
    return NULL;
  }
  return argv;
}

/* ---- starting qemu ------------------------------------------------------------------------- */

static int write_initrd(const char *control_dir, const char *base, struct cordon_error **err) {
  _cleanup_free_ char *agent = qemu_agent_path();
  if (!agent)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "qemu: no cordon-guest agent binary (build cordon, or set %s)",
                            QEMU_GUEST_AGENT_ENV);
  _cleanup_free_ unsigned char *base_data = NULL, *agent_data = NULL, *cpio = NULL;
  size_t base_length = 0, agent_length = 0, cpio_length = 0;
  if (fs_read_file(base, 256u << 20, &base_data, &base_length, err) < 0 ||
      fs_read_file(agent, 64u << 20, &agent_data, &agent_length, err) < 0)
    return -1;
  if (qemu_cpio_single("init", agent_data, agent_length, &cpio, &cpio_length) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "qemu: initrd");
  /* Linux unpacks concatenated archives in order: the agent's /init lands on the base. */
  unsigned char *all = malloc(base_length + cpio_length);
  if (!all)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "qemu: initrd");
  memcpy(all, base_data, base_length);
  memcpy(all + base_length, cpio, cpio_length);
  /* Readable by the VMM's uid, which reopens it through /proc/self/fd (an inode permission
   * check); it holds nothing secret, and the control dir keeps others from its path. */
  _cleanup_free_ char *path = NULL;
  int r = asprintf(&path, "%s/%s", control_dir, QEMU_INITRD) < 0
              ? cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "qemu: initrd")
              : fs_write_atomic(path, all, base_length + cpio_length, 0644, err);
  free(all);
  return r;
}

/* What the VMM process is handed, opened by us: it runs as QEMU_VMM_UID and cannot reach the
 * control dir (0700) or a private guest dir by path. */
struct vmm_files {
  int console, log, agent, kernel, initrd;
  int workspace_tree; /* the workspace, id-mapped to QEMU_VMM_UID */
  int userns;         /* the VMM's user namespace: QEMU_VMM_INNER_UID is QEMU_VMM_UID */
};

static void vmm_files_close(struct vmm_files *f) {
  int *all[] = {&f->console,        &f->log,   &f->agent, &f->kernel, &f->initrd,
                &f->workspace_tree, &f->userns};
  for (size_t i = 0; i < ARRAY_SIZE(all); i++)
    if (*all[i] >= 0) {
      close(*all[i]);
      *all[i] = -1;
    }
}

/* The agent's listening socket, bound in the control dir (through its fd: the path may be
 * longer than sun_path). */
static int agent_listen(const char *control_dir, struct cordon_error **err) {
  _cleanup_close_ int dirfd = open(control_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dirfd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "qemu: %s", control_dir);
  unlinkat(dirfd, QEMU_AGENT_SOCKET, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dirfd, QEMU_AGENT_SOCKET);
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 4) < 0) {
    int e = errno;
    if (s >= 0)
      close(s);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "qemu: the agent's socket");
  }
  return s;
}

static int open_in(const char *dir, const char *name, int flags, struct cordon_error **err) {
  _cleanup_free_ char *path = NULL;
  if (asprintf(&path, "%s/%s", dir, name) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "qemu");
  int fd = open(path, flags | O_CLOEXEC, 0600);
  return fd >= 0 ? fd : cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "qemu: %s", path);
}

static int vmm_files_open(const struct microvm_config *cfg, struct vmm_files *f,
                          struct cordon_error **err) {
  const char *gdir = qemu_guest_dir(cfg);
  *f = (struct vmm_files){-1, -1, -1, -1, -1, -1, -1};
  if ((f->console =
           open_in(cfg->control_dir, QEMU_CONSOLE_LOG, O_WRONLY | O_CREAT | O_TRUNC, err)) < 0 ||
      (f->log = open_in(cfg->control_dir, QEMU_VMM_LOG, O_WRONLY | O_CREAT | O_APPEND, err)) < 0 ||
      (f->kernel = open_in(gdir, QEMU_GUEST_KERNEL, O_RDONLY, err)) < 0 ||
      (f->initrd = open_in(cfg->control_dir, QEMU_INITRD, O_RDONLY, err)) < 0 ||
      (f->agent = agent_listen(cfg->control_dir, err)) < 0)
    goto fail;
  /* Through an id-mapped mount the workspace's owner is the VMM's uid: qemu writes it as
   * QEMU_VMM_UID and the files land on disk as the owner's. */
  struct stat st;
  if (stat(cfg->workspace, &st) < 0) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "qemu: %s", cfg->workspace);
    goto fail;
  }
  int userns = confine_userns_idmap_fd(st.st_uid, QEMU_VMM_UID, st.st_gid, QEMU_VMM_GID, err);
  if (userns < 0)
    goto fail;
  f->workspace_tree =
      confine_tree_prepare(cfg->workspace, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, userns, err);
  close(userns);
  if (f->workspace_tree < 0) {
    cordon_error_prefix(err, "qemu: the VMM runs unprivileged and needs the workspace id-mapped");
    goto fail;
  }
  /* qemu (security_model=none) tells the guest the owner it sees itself: in a namespace where
   * QEMU_VMM_UID is the sandbox's uid, the workspace's owner is the guest's uid 1000, and what
   * the guest's 1000 creates lands on disk as the owner's. */
  f->userns = confine_userns_idmap_fd(QEMU_VMM_INNER_UID, QEMU_VMM_UID, QEMU_VMM_INNER_GID,
                                      QEMU_VMM_GID, err);
  if (f->userns < 0)
    goto fail;
  return 0;
fail:
  vmm_files_close(f);
  return -1;
}

/* The VMM's own process (pid 1 of its pid namespace, in its own mount namespace): a root of
 * its own (vmm-root.c: the system paths, /dev, its /proc, the workspace; nothing else of the
 * host's), its files at fixed fds (the id-mapped workspace too: qemu opens it as
 * /proc/self/fd/N), then QEMU_VMM_UID with no_new_privs, then qemu. */
static _Noreturn void vmm_exec(const struct microvm_config *cfg, struct vmm_files *f, char **argv,
                               bool kvm) {
  struct cordon_error *root_err = NULL;
  if (microvm_vmm_root_enter(f->workspace_tree, kvm, &root_err) < 0) {
    dprintf(f->log, "cordon: the VMM's own root: %s\n", root_err->message);
    _exit(126);
  }
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  /* Out of the way of 0-5 first, then into place (dup2 clears CLOEXEC on the copies). */
  int from[] = {null, f->console, f->log, f->agent, f->kernel, f->initrd, f->workspace_tree};
  int high[ARRAY_SIZE(from)];
  for (size_t i = 0; i < ARRAY_SIZE(from); i++)
    if (from[i] < 0 || (high[i] = fcntl(from[i], F_DUPFD_CLOEXEC, 16)) < 0)
      _exit(126);
  for (size_t i = 0; i < ARRAY_SIZE(high); i++)
    if (dup2(high[i], (int)i) < 0)
      _exit(126);
  /* Into the VMM's user namespace last (its other namespaces stay owned by the host's, so it
   * holds no capability over them), then its one mapped id: QEMU_VMM_UID on the host. */
  if (chdir("/") < 0 || setns(f->userns, CLONE_NEWUSER) < 0 || setgroups(0, NULL) < 0 ||
      setresgid(QEMU_VMM_INNER_GID, QEMU_VMM_INNER_GID, QEMU_VMM_INNER_GID) < 0 ||
      setresuid(QEMU_VMM_INNER_UID, QEMU_VMM_INNER_UID, QEMU_VMM_INNER_UID) < 0)
    _exit(126);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
    _exit(126);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  execv(argv[0], argv);
  dprintf(2, "cordon: cannot run %s: %s\n", argv[0], strerror(errno));
  _exit(127);
}

int qemu_vmm_spawn(const struct microvm_config *cfg, bool kvm, pid_t *pid,
                   struct cordon_error **err) {
  const char *gdir = qemu_guest_dir(cfg);
  _cleanup_free_ char *base = NULL, *binary = qemu_binary_path();
  if (!binary)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "qemu: no %s in PATH", QEMU_BINARY);
  if (geteuid() != 0)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "qemu: the VMM is started confined (namespaces of its own, an "
                            "unprivileged uid), which needs root");
  if (asprintf(&base, "%s/%s", gdir, QEMU_GUEST_INITRAMFS) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "qemu");
  if (write_initrd(cfg->control_dir, base, err) < 0)
    return -1;
  struct vmm_files files;
  if (vmm_files_open(cfg, &files, err) < 0)
    return -1;
  char kernel[32], initrd[32], workspace[32];
  snprintf(kernel, sizeof(kernel), "/proc/self/fd/%d", QEMU_FD_KERNEL);
  snprintf(initrd, sizeof(initrd), "/proc/self/fd/%d", QEMU_FD_INITRD);
  snprintf(workspace, sizeof(workspace), "/proc/self/fd/%d", QEMU_FD_WORKSPACE);
  char **argv =
      qemu_argv_build(binary, cfg, kvm, qemu_guest_minimal(gdir), kernel, initrd, workspace);
  if (!argv) {
    vmm_files_close(&files);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "qemu: command line");
  }
  int report[2];
  if (pipe2(report, O_CLOEXEC) < 0) {
    vmm_files_close(&files);
    qemu_argv_free(argv);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "qemu: pipe");
  }
  pid_t middle = fork();
  if (middle == 0) {
    close(report[0]);
    /* Detached: its own session, so the creating CLI's terminal and process group never
     * reach it; namespaces of its own (no network at all: a NIC-less guest needs none). */
    setsid();
    int e = 0;
    if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET | CLONE_NEWPID) < 0 ||
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
      e = errno;
    pid_t vmm = e ? -1 : fork();
    if (vmm == 0)
      vmm_exec(cfg, &files, argv, kvm);
    int32_t msg[2] = {vmm, vmm < 0 ? (e ? e : errno) : 0};
    ssize_t w = write(report[1], msg, sizeof(msg));
    _exit(w == sizeof(msg) ? 0 : 1);
  }
  int fork_errno = errno;
  close(report[1]);
  vmm_files_close(&files);
  qemu_argv_free(argv);
  if (middle < 0) {
    close(report[0]);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, fork_errno, "qemu: fork");
  }
  int32_t msg[2] = {-1, EIO};
  ssize_t n = read(report[0], msg, sizeof(msg));
  close(report[0]);
  while (waitpid(middle, NULL, 0) < 0 && errno == EINTR)
    ;
  if (n != sizeof(msg) || msg[0] <= 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, msg[1] > 0 ? msg[1] : EIO,
                            "qemu: cannot start the VMM in namespaces of its own");
  *pid = msg[0];
  return 0;
}

char *qemu_log_tail(const char *control_dir, const char *name, int lines) {
  _cleanup_free_ char *path = NULL;
  _cleanup_free_ unsigned char *data = NULL;
  size_t length = 0;
  if (asprintf(&path, "%s/%s", control_dir, name) < 0)
    return NULL;
  _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return strdup("");
  /* The tail only: a console log may be long. */
  off_t size = lseek(fd, 0, SEEK_END);
  off_t from = size > 8192 ? size - 8192 : 0;
  if (lseek(fd, from, SEEK_SET) < 0 || fs_read_fd(fd, 8192, &data, &length, NULL) < 0)
    return strdup("");
  size_t start = length;
  int seen = 0;
  while (start > 0) {
    if (data[start - 1] == '\n' && start != length && ++seen >= lines)
      break;
    start--;
  }
  char *out = malloc(length - start + 1);
  if (!out)
    return NULL;
  for (size_t i = start; i < length; i++)
    out[i - start] = data[i] == '\n'   ? '|'
                     : data[i] == '\r' ? ' '
                                       : (data[i] < 32 || data[i] == 127 ? '?' : (char)data[i]);
  out[length - start] = '\0';
  return out;
}
