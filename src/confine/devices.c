/* Devices in a sandbox: manifest entries, GPU discovery and the clone of a granted node
 * (devices.h says what each means). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/strv.h"
#include "base/syscalls.h"
#include "confine/devices.h"

/* What the sandbox's /dev is built with (mount.c): a grant may not stand in for any of it. */
static const char *const reserved[] = {"null",  "zero",   "full",   "random", "urandom", "fd",
                                       "stdin", "stdout", "stderr", "shm",    "pts"};

/* NVIDIA's control nodes: every GPU needs them, so any NVIDIA GPU grant takes those found. */
static const char *const nvidia_control[] = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools",
                                             "nvidia-modeset", NULL};

const char *confine_devices_root(void) {
  const char *root = getenv("CORDON_DEV_ROOT");
  return root && root[0] == '/' ? root : "/dev";
}

/* A target beneath /dev: "/dev/" then components that are neither empty, "." nor "..". */
static bool target_valid(const char *target) {
  if (strncmp(target, "/dev/", 5) != 0 || !target[5])
    return false;
  const char *p = target + 5;
  while (*p) {
    const char *end = strchrnul(p, '/');
    size_t n = (size_t)(end - p);
    if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
      return false;
    p = *end ? end + 1 : end;
    if (*end && !*p)
      return false; /* a trailing slash */
  }
  return true;
}

static bool target_reserved(const char *target) {
  const char *first = target + 5;
  size_t n = strcspn(first, "/");
  for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
    if (strlen(reserved[i]) == n && strncmp(first, reserved[i], n) == 0)
      return true;
  return false;
}

int confine_device_parse(const char *entry, char **host, char **target, struct cordon_error **err) {
  *host = *target = NULL;
  const char *colon = strchr(entry, ':');
  _cleanup_free_ char *h = colon ? strndup(entry, (size_t)(colon - entry)) : strdup(entry);
  if (!h)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "device");
  if (h[0] != '/' || !h[1])
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "device %s: the host node must be an absolute path", entry);
  _cleanup_free_ char *t = NULL;
  if (colon)
    t = strdup(colon + 1);
  else if (strncmp(h, "/dev/", 5) == 0)
    t = strdup(h);
  else if (asprintf(&t, "/dev/%s", strrchr(h, '/') + 1) < 0)
    t = NULL;
  if (!t)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "device");
  if (!target_valid(t))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "device %s: it can appear only beneath /dev inside (not at %s)", entry,
                            t);
  if (target_reserved(t))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "device %s: %s is one of the sandbox's own nodes", entry, t);
  *host = h;
  *target = t;
  h = t = NULL;
  return 0;
}

/* "PREFIXdigits": the number, or -1. */
static long numbered(const char *name, const char *prefix) {
  size_t n = strlen(prefix);
  if (strncmp(name, prefix, n) != 0 || !isdigit((unsigned char)name[n]))
    return -1;
  char *end;
  errno = 0;
  long v = strtol(name + n, &end, 10);
  return *end || errno || v > 65535 ? -1 : v;
}

static bool has_name(const char *const *names, const char *name) {
  for (size_t i = 0; names && names[i]; i++)
    if (strcmp(names[i], name) == 0)
      return true;
  return false;
}

static int push_entry(char ***out, const char *dev_root, const char *name) {
  char *e;
  if (asprintf(&e, "%s/%s:/dev/%s", dev_root, name, name) < 0)
    return -1;
  for (size_t i = 0; *out && (*out)[i]; i++)
    if (strcmp((*out)[i], e) == 0) {
      free(e);
      return 0;
    }
  return strv_push_take(out, e);
}

/* The nodes of GPU `index`; 0 when none exists. */
static int select_index(const char *const *names, long index, const char *dev_root, char ***out,
                        bool *found) {
  char name[64];
  snprintf(name, sizeof(name), "nvidia%ld", index);
  if (has_name(names, name)) {
    *found = true;
    if (push_entry(out, dev_root, name) < 0)
      return -1;
    for (size_t i = 0; nvidia_control[i]; i++)
      if (has_name(names, nvidia_control[i]) && push_entry(out, dev_root, nvidia_control[i]) < 0)
        return -1;
  }
  snprintf(name, sizeof(name), "dri/card%ld", index);
  if (has_name(names, name)) {
    *found = true;
    if (push_entry(out, dev_root, name) < 0)
      return -1;
    snprintf(name, sizeof(name), "dri/renderD%ld", 128 + index);
    if (has_name(names, name) && push_entry(out, dev_root, name) < 0)
      return -1;
  }
  return 0;
}

static bool is_gpu_node(const char *name) {
  return numbered(name, "nvidia") >= 0 || numbered(name, "dri/card") >= 0 ||
         numbered(name, "dri/renderD") >= 0;
}

int confine_gpu_select(const char *const *names, const char *spec, const char *dev_root,
                       char ***out, struct cordon_error **err) {
  bool any = false;
  for (size_t i = 0; names && names[i]; i++)
    any = any || is_gpu_node(names[i]);
  if (!any)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "--gpu %s: this host has no GPU (no nvidiaN, dri/cardN or "
                            "dri/renderDN node in %s)",
                            spec, dev_root);
  if (strcmp(spec, "all") == 0) {
    for (size_t i = 0; names[i]; i++)
      if ((is_gpu_node(names[i]) || has_name(nvidia_control, names[i])) &&
          push_entry(out, dev_root, names[i]) < 0)
        return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gpu");
    return 0;
  }
  const char *p = spec;
  while (true) {
    char *end;
    errno = 0;
    long index = isdigit((unsigned char)*p) ? strtol(p, &end, 10) : -1;
    if (index < 0 || errno || index > 65535 || (*end && *end != ','))
      return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                              "--gpu %s: expected all or GPU indices (0 or 0,1)", spec);
    bool found = false;
    if (select_index(names, index, dev_root, out, &found) < 0)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "gpu");
    if (!found)
      return cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0,
                              "--gpu %s: no GPU %ld on this host (no %s/nvidia%ld or "
                              "%s/dri/card%ld)",
                              spec, index, dev_root, index, dev_root, index);
    if (!*end)
      return 0;
    p = end + 1;
  }
}

/* Append the names in dev_root/sub that are GPU nodes, as "sub/name" (or "name"). */
static int scan_dir(const char *dev_root, const char *sub, char ***names) {
  char path[4096];
  snprintf(path, sizeof(path), "%s%s%s", dev_root, sub ? "/" : "", sub ? sub : "");
  DIR *d = opendir(path);
  if (!d)
    return errno == ENOENT || errno == ENOTDIR || errno == EACCES ? 0 : -1;
  struct dirent *de;
  int r = 0;
  while (r == 0 && (de = readdir(d))) {
    char name[512];
    snprintf(name, sizeof(name), "%s%s%s", sub ? sub : "", sub ? "/" : "", de->d_name);
    if (is_gpu_node(name) || (!sub && has_name(nvidia_control, name)))
      r = strv_push(names, name);
  }
  int e = errno;
  closedir(d);
  errno = e;
  return r;
}

int confine_gpu_scan(const char *dev_root, char ***names, struct cordon_error **err) {
  _cleanup_(strv_freep) char **found = strv_copy(NULL);
  if (!found || scan_dir(dev_root, NULL, &found) < 0 || scan_dir(dev_root, "dri", &found) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno ? errno : ENOMEM,
                            "cannot list the devices in %s", dev_root);
  strv_sort(found);
  *names = found;
  found = NULL;
  return 0;
}

bool confine_gpu_present(void) {
  _cleanup_(strv_freep) char **names = NULL;
  struct cordon_error *ignored = NULL;
  if (confine_gpu_scan(confine_devices_root(), &names, &ignored) < 0) {
    cordon_error_free(ignored);
    return false;
  }
  for (size_t i = 0; names[i]; i++)
    if (is_gpu_node(names[i]))
      return true;
  return false;
}

int confine_gpu_resolve(const char *spec, char ***out, struct cordon_error **err) {
  _cleanup_(strv_freep) char **names = NULL;
  const char *root = confine_devices_root();
  if (confine_gpu_scan(root, &names, err) < 0)
    return -1;
  return confine_gpu_select((const char *const *)names, spec, root, out, err);
}

static int check_node(int fd, const char *host, struct cordon_error **err) {
  struct stat st;
  if (fstat(fd, &st) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "device %s", host);
  if (!S_ISCHR(st.st_mode))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "device %s is not a character device node",
                            host);
  return 0;
}

static int open_node(const char *host, struct cordon_error **err) {
  int fd = open(host, O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return cordon_error_set(err, errno == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_SYSTEM, errno,
                            "device %s", host);
  return fd;
}

int confine_device_check(const char *host, struct cordon_error **err) {
  _cleanup_close_ int fd = open_node(host, err);
  return fd < 0 ? -1 : check_node(fd, host, err);
}

int confine_device_prepare(const char *host, struct cordon_error **err) {
  _cleanup_close_ int fd = open_node(host, err);
  if (fd < 0 || check_node(fd, host, err) < 0)
    return -1;
  int tree = sys_open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
  if (tree < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot clone device %s", host);
  struct confine_mount_attr attr = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
                                    .attr_clr = MOUNT_ATTR_NODEV};
  /* A node on a nodev mount would be unusable: say so rather than bind a dead node. */
  if (sys_mount_setattr(tree, "", AT_EMPTY_PATH, &attr) < 0) {
    int e = errno;
    close(tree);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, e,
                            "cannot bind device %s (is it on a nodev mount?)", host);
  }
  return tree;
}
