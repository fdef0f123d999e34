/* The firecracker monitor. Preflight names every missing requirement without side effects (no
 * process started, nothing opened for writing): the `firecracker` binary in PATH, a /dev/kvm
 * that really works (firecracker has no software emulation), the guest kernel (vmlinux) and
 * root filesystem (rootfs.ext4) in the guest directory, /dev/vhost-vsock (the guest agent's
 * channel), and the guest agent's vsock transport, which this tree does not carry yet (the
 * agent speaks virtio-serial under qemu only): so today firecracker is always refused, by name.
 *
 * Boot, for when all of that is present: firecracker is spawned with its API socket in the
 * session's control directory, and configured over its REST API (machine, kernel, root drive,
 * vsock, then InstanceStart) with libcurl over the unix socket. libcurl is dlopen'ed at boot,
 * as the docker backend does (its loader is that backend's own), so no other start pays for
 * loading it. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The type-checking macros of curl.h would shadow the table's function pointers. */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>

#include "backends/microvm/microvm.h"
#include "base/cleanup.h"

#define FIRECRACKER_KERNEL "vmlinux"
#define FIRECRACKER_ROOTFS "rootfs.ext4"
#define FIRECRACKER_API_SOCKET "firecracker.sock"
#define FIRECRACKER_VSOCK_SOCKET "vsock.sock"
#define FIRECRACKER_CONSOLE "console.log"
#define FIRECRACKER_BOOT_TIMEOUT 10.0
#define VHOST_VSOCK "/dev/vhost-vsock"

extern char **environ;

/* The libcurl functions used here, filled by curl_load. */
struct curl_api {
  __typeof__(&curl_global_init) global_init;
  __typeof__(&curl_easy_init) curl_easy_init;
  __typeof__(&curl_easy_setopt) curl_easy_setopt;
  __typeof__(&curl_easy_perform) curl_easy_perform;
  __typeof__(&curl_easy_getinfo) curl_easy_getinfo;
  __typeof__(&curl_easy_cleanup) curl_easy_cleanup;
  __typeof__(&curl_easy_strerror) curl_easy_strerror;
  __typeof__(&curl_slist_append) curl_slist_append;
  __typeof__(&curl_slist_free_all) curl_slist_free_all;
};

static struct curl_api curl;
static bool curl_loaded;
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_load(void) {
  void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return;
  void **slots[] = {(void **)&curl.global_init,        (void **)&curl.curl_easy_init,
                    (void **)&curl.curl_easy_setopt,   (void **)&curl.curl_easy_perform,
                    (void **)&curl.curl_easy_getinfo,  (void **)&curl.curl_easy_cleanup,
                    (void **)&curl.curl_easy_strerror, (void **)&curl.curl_slist_append,
                    (void **)&curl.curl_slist_free_all};
  static const char *const names[] = {
      "curl_global_init",   "curl_easy_init",    "curl_easy_setopt",
      "curl_easy_perform",  "curl_easy_getinfo", "curl_easy_cleanup",
      "curl_easy_strerror", "curl_slist_append", "curl_slist_free_all"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (!(*slots[i] = dlsym(h, names[i])))
      return;
  curl_loaded = curl.global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

static const struct curl_api *curl_api_get(struct cordon_error **err) {
  pthread_once(&curl_once, curl_load);
  if (!curl_loaded) {
    cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "firecracker: libcurl.so.4 cannot be loaded");
    return NULL;
  }
  return &curl;
}

static int firecracker_preflight(const struct microvm_config *cfg, struct microvm_preflight *out,
                                 struct cordon_error **err) {
  const char *guest = microvm_guest_dir(cfg);
  _cleanup_free_ char *binary = microvm_find_in_path("firecracker");
  _cleanup_free_ char *kernel = NULL, *rootfs = NULL;
  if (asprintf(&kernel, "%s/%s", guest, FIRECRACKER_KERNEL) < 0)
    kernel = NULL;
  if (asprintf(&rootfs, "%s/%s", guest, FIRECRACKER_ROOTFS) < 0)
    rootfs = NULL;
  if (!kernel || !rootfs)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "preflight");
  out->accel = MICROVM_ACCEL_KVM;
  int r = 0;
  r |= microvm_preflight_add(out, "binary", binary ? NULL : "no firecracker binary in PATH");
  if (cfg && cfg->accel == MICROVM_ACCEL_TCG)
    r |= microvm_preflight_add(out, "accel", "firecracker runs only on KVM, and TCG was asked");
  r |= microvm_preflight_kvm(out);
  r |= microvm_path_is(kernel, false)
           ? microvm_preflight_add(out, "kernel", NULL)
           : microvm_preflight_add(out, "kernel", "no guest kernel %s", kernel);
  r |= microvm_path_is(rootfs, false)
           ? microvm_preflight_add(out, "rootfs", NULL)
           : microvm_preflight_add(out, "rootfs", "no guest root filesystem %s", rootfs);
  r |= microvm_preflight_add(out, "vsock",
                             access(VHOST_VSOCK, F_OK) == 0 ? NULL : "no " VHOST_VSOCK " (vsock)");
  r |= microvm_preflight_add(out, "agent",
                             "the guest agent's vsock transport is not built (it speaks "
                             "virtio-serial, under qemu only)");
  return r < 0 ? cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "preflight") : 0;
}

/* One PUT to firecracker's API; a status other than 2xx is an error naming the path. */
static int api_put(const struct curl_api *c, const char *socket, const char *path, const char *body,
                   struct cordon_error **err) {
  CURL *h = c->curl_easy_init();
  if (!h)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "firecracker API");
  char url[256];
  snprintf(url, sizeof(url), "http://localhost%s", path);
  struct curl_slist *headers = c->curl_slist_append(NULL, "Content-Type: application/json");
  c->curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, socket);
  c->curl_easy_setopt(h, CURLOPT_URL, url);
  c->curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
  c->curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
  c->curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
  c->curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
  CURLcode rc = c->curl_easy_perform(h);
  long status = 0;
  c->curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  c->curl_slist_free_all(headers);
  c->curl_easy_cleanup(h);
  if (rc != CURLE_OK)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "firecracker API PUT %s: %s", path,
                            c->curl_easy_strerror(rc));
  if (status < 200 || status > 299)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "firecracker API PUT %s: HTTP %ld", path,
                            status);
  return 0;
}

/* Wait (bounded) for the API socket firecracker creates once it listens. */
static int wait_for_socket(const char *socket, pid_t pid, double timeout,
                           struct cordon_error **err) {
  struct timespec step = {0, 20 * 1000 * 1000};
  for (double waited = 0; waited < timeout; waited += 0.02) {
    if (access(socket, F_OK) == 0)
      return 0;
    if (waitpid(pid, NULL, WNOHANG) == pid)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, 0, "firecracker exited before listening");
    nanosleep(&step, NULL);
  }
  return cordon_error_set(err, CORDON_ERR_SYSTEM, ETIMEDOUT,
                          "firecracker did not open its API socket within %.0fs", timeout);
}

static int configure(const struct curl_api *c, const char *socket, const struct microvm_config *cfg,
                     struct cordon_error **err) {
  const char *guest = microvm_guest_dir(cfg);
  char body[1024];
  unsigned long long mib =
      (cfg->memory_bytes ? cfg->memory_bytes : MICROVM_DEFAULT_MEMORY_BYTES) >> 20;
  snprintf(body, sizeof(body), "{\"vcpu_count\":%u,\"mem_size_mib\":%llu}",
           cfg->vcpus ? cfg->vcpus : MICROVM_DEFAULT_VCPUS, mib);
  if (api_put(c, socket, "/machine-config", body, err) < 0)
    return -1;
  snprintf(body, sizeof(body),
           "{\"kernel_image_path\":\"%s/" FIRECRACKER_KERNEL "\",\"boot_args\":\"console=ttyS0 "
           "reboot=k panic=1 quiet\"}",
           guest);
  if (api_put(c, socket, "/boot-source", body, err) < 0)
    return -1;
  snprintf(body, sizeof(body),
           "{\"drive_id\":\"rootfs\",\"path_on_host\":\"%s/" FIRECRACKER_ROOTFS
           "\",\"is_root_device\":true,\"is_read_only\":true}",
           guest);
  if (api_put(c, socket, "/drives/rootfs", body, err) < 0)
    return -1;
  snprintf(body, sizeof(body), "{\"guest_cid\":3,\"uds_path\":\"%s/" FIRECRACKER_VSOCK_SOCKET "\"}",
           cfg->control_dir);
  if (api_put(c, socket, "/vsock", body, err) < 0)
    return -1;
  return api_put(c, socket, "/actions", "{\"action_type\":\"InstanceStart\"}", err);
}

static int firecracker_boot(const struct microvm_config *cfg, struct microvm_vm *vm,
                            struct cordon_error **err) {
  /* The guest agent learns --pids from qemu's kernel command line only: refused, not ignored. */
  if (cfg->pids)
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "pids: monitor firecracker does not pass a process limit to the guest");
  const struct curl_api *c = curl_api_get(err);
  if (!c)
    return -1;
  _cleanup_free_ char *binary = microvm_find_in_path("firecracker");
  _cleanup_free_ char *socket = NULL, *console = NULL;
  if (!binary)
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0, "no firecracker binary in PATH");
  if (asprintf(&socket, "%s/" FIRECRACKER_API_SOCKET, cfg->control_dir) < 0 ||
      asprintf(&console, "%s/" FIRECRACKER_CONSOLE, cfg->control_dir) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "firecracker");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, console, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  char *const argv[] = {binary, "--api-sock", socket, NULL};
  pid_t pid = 0;
  int rc = posix_spawn(&pid, binary, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, rc, "cannot start %s", binary);
  double timeout = cfg->boot_timeout > 0 ? cfg->boot_timeout : FIRECRACKER_BOOT_TIMEOUT;
  if (wait_for_socket(socket, pid, timeout, err) < 0 || configure(c, socket, cfg, err) < 0) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
  }
  vm->vmm_pid = pid;
  vm->vmm_start = microvm_process_start(pid);
  if (asprintf(&vm->state, "{\"pid\":%d,\"start\":%llu}", (int)pid, vm->vmm_start) < 0) {
    vm->state = NULL;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "firecracker");
  }
  return 0;
}

static int firecracker_attach(const struct microvm_config *cfg, const char *state,
                              struct microvm_vm *vm, struct cordon_error **err) {
  (void)cfg;
  return microvm_vmm_attach("firecracker", state, vm, err);
}

static int firecracker_exec(struct microvm_vm *vm, const struct microvm_config *cfg,
                            const struct cordon_exec_request *req, struct cordon_exec_result *res,
                            struct cordon_error **err) {
  (void)vm;
  (void)cfg;
  (void)req;
  (void)res;
  return cordon_error_set(err, CORDON_ERR_UNSUPPORTED, 0,
                          "firecracker: the guest agent's vsock transport is not built");
}

static int firecracker_shutdown(struct microvm_vm *vm, struct cordon_error **err) {
  (void)err;
  microvm_vmm_stop(vm);
  return 0;
}

const struct microvm_monitor microvm_monitor_firecracker = {
    .name = "firecracker",
    .summary = "firecracker over its API socket (KVM only)",
    .preflight = firecracker_preflight,
    .boot = firecracker_boot,
    .attach = firecracker_attach,
    .exec = firecracker_exec,
    .shutdown = firecracker_shutdown,
};
