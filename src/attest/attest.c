/* The attestation, end to end (include/cordon/attest.h): the host facts of the fixed
 * allowlist, the host side of the boundary probes (a marker process, a marker file, a loopback
 * listener; made before the probes and removed after), the probes of each backend, the body
 * built and signed with the install key, written atomically, and the sandbox.attested event
 * appended to the project's audit chain. Also the one verdict of an attestation, for the CLI
 * and the library alike. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cordon/audit.h>
#include <cordon/session.h>

#include "attest/document.h"
#include "attest/probes.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/syscalls.h"
#include "crypto/digest.h"
#include "crypto/jcs.h"
#include "crypto/signed.h"

/* ---- host facts ------------------------------------------------------------------------- */

static const char *cgroup_layout(void) {
  if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0)
    return "v2";
  if (access("/sys/fs/cgroup/unified", F_OK) == 0)
    return "hybrid";
  return access("/sys/fs/cgroup", F_OK) == 0 ? "v1" : "none";
}

static const char *kvm_state(void) {
  int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC | O_NOCTTY);
  if (fd >= 0) {
    close(fd);
    return "usable";
  }
  return errno == ENOENT ? "absent" : "denied";
}

static const char *user_namespaces(void) {
  _cleanup_free_ unsigned char *data = NULL;
  size_t length = 0;
  struct cordon_error *err = NULL;
  if (fs_read_file("/proc/sys/user/max_user_namespaces", 64, &data, &length, &err) < 0) {
    cordon_error_free(err);
    return "unknown";
  }
  return atol((const char *)data) > 0 ? "enabled" : "disabled";
}

static json_t *measure_host_facts(const char *version) {
  struct utsname u;
  if (uname(&u) < 0)
    return NULL;
  char landlock[24];
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, 1u /* ..._VERSION */);
  if (abi > 0)
    snprintf(landlock, sizeof(landlock), "%ld", abi);
  else
    snprintf(landlock, sizeof(landlock), "unsupported");
  errno = 0;
  bool seccomp = prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 || errno != EINVAL;
  return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "architecture", u.machine,
                   "cgroup_layout", cgroup_layout(), "cordon_version",
                   version ? version : "unknown", "kernel_release", u.release, "kvm", kvm_state(),
                   "landlock_abi", landlock, "seccomp", seccomp ? "available" : "unavailable",
                   "user_namespaces", user_namespaces());
}

/* The caller's facts laid over the measured ones: allowlisted names, strings only. */
static int overlay_host_facts(json_t *facts, const char *text, struct cordon_error **err) {
  json_t *given = NULL;
  if (jcs_parse(text, strlen(text), 65536, "host facts", &given, err) < 0)
    return -1;
  int r = 0;
  const char *key;
  json_t *value;
  if (!json_is_object(given))
    r = cordon_error_set(err, CORDON_ERR_USAGE, 0, "host facts: not a JSON object");
  json_object_foreach(given, key, value) {
    if (r < 0)
      break;
    if (!attest_host_fact_allowed(key) || !json_is_string(value))
      r = cordon_error_set(err, CORDON_ERR_USAGE, 0,
                           "host facts: '%s' is not an allowed fact with a string value "
                           "(allowed: architecture, cgroup_layout, cordon_version, "
                           "kernel_release, kvm, landlock_abi, seccomp, user_namespaces)",
                           key);
    else
      json_object_set(facts, key, value);
  }
  json_decref(given);
  return r;
}

/* ---- the host side of the probes --------------------------------------------------------- */

struct host_setup {
  struct attest_host host;
  char *dir; /* private temporary directory: the marker file and the volume */
  char *marker_file, *volume_dir;
  int listener;
  pid_t marker;
};

static void host_teardown(struct host_setup *h) {
  if (h->marker > 0) {
    kill(h->marker, SIGKILL);
    waitpid(h->marker, NULL, 0);
  }
  if (h->listener >= 0)
    close(h->listener);
  if (h->dir) {
    struct cordon_error *err = NULL;
    if (fs_remove_tree(h->dir, &err) < 0)
      cordon_error_free(err);
  }
  free(h->dir);
  free(h->marker_file);
  free(h->volume_dir);
}

static int host_setup(struct host_setup *h, const char *kernel, struct cordon_error **err) {
  memset(h, 0, sizeof(*h));
  h->listener = -1;
  const char *tmp = getenv("TMPDIR");
  if (asprintf(&h->dir, "%s/cordon-attest-XXXXXX", tmp && *tmp == '/' ? tmp : "/tmp") < 0 ||
      !mkdtemp(h->dir)) {
    free(h->dir);
    h->dir = NULL;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "attest: temporary directory");
  }
  if (asprintf(&h->marker_file, "%s/host-only", h->dir) < 0 ||
      asprintf(&h->volume_dir, "%s/volume", h->dir) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "attest");
  /* Readable by everyone (the sandbox user included): only a boundary may hide it. */
  chmod(h->dir, 0755);
  if (fs_write_atomic(h->marker_file, "host only\n", 10, 0644, err) < 0 ||
      mkdir(h->volume_dir, 0777) < 0 || chmod(h->volume_dir, 0777) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "attest: %s", h->dir);
  h->listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t alen = sizeof(a);
  if (h->listener < 0 || bind(h->listener, (struct sockaddr *)&a, sizeof(a)) < 0 ||
      listen(h->listener, 64) < 0 || getsockname(h->listener, (struct sockaddr *)&a, &alen) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "attest: loopback listener");
  /* A host process the sandbox must not see, under a name nothing else uses. */
  h->marker = fork();
  if (h->marker < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "attest: marker process");
  if (h->marker == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    sys_prctl_set_name(ATTEST_MARKER_COMM);
    for (;;)
      pause();
  }
  h->host = (struct attest_host){.marker_pid = h->marker,
                                 .marker_file = h->marker_file,
                                 .volume_dir = h->volume_dir,
                                 .listener_port = ntohs(a.sin_port),
                                 .kernel_release = kernel};
  return 0;
}

/* ---- the run ------------------------------------------------------------------------------ */

static bool wanted(const struct cordon_attest_options *o, const char *name) {
  if (!o->backends)
    return true;
  for (size_t i = 0; o->backends[i]; i++)
    if (!strcmp(o->backends[i], name))
      return true;
  return false;
}

static int record_event(struct cordon_context *ctx, const struct cordon_attest_options *o,
                        const struct cordon_attest_result *res, struct cordon_error **err) {
  json_t *details = json_pack("{s:s, s:s}", "attestation_sha256", res->digest, "kid", res->kid);
  _cleanup_free_ char *text = NULL;
  if (!details || jcs_dump(details, &text, NULL, err) < 0) {
    json_decref(details);
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "audit entry");
  }
  json_decref(details);
  char actor[32];
  snprintf(actor, sizeof(actor), "uid:%u", (unsigned)geteuid());
  struct cordon_audit_event ev = {"sandbox.attested", actor, "attestation", res->digest, text};
  struct cordon_audit_options ao = {.key_dir = o->key_dir};
  struct cordon_audit_log *log = NULL;
  int r = cordon_audit_open_project(ctx, &ao, &log, err);
  if (r == 0)
    r = cordon_audit_append(log, &ev, NULL, err);
  cordon_audit_close(log);
  return r < 0 ? cordon_error_prefix(err, "audit") : 0;
}

/* One backend's probes in a thread of its own: backends are independent (each has its own
 * sessions), so they are probed side by side and the attestation takes as long as the
 * slowest, not the sum. */
struct probe_job {
  struct cordon_context *ctx;
  const struct cordon_backend *backend;
  bool plugin;
  const struct attest_host *host;
  struct attest_backend *out;
  struct cordon_error *err;
  int r;
  pthread_t thread;
  bool running;
};

static void *probe_thread(void *arg) {
  struct probe_job *job = arg;
  job->r =
      attest_probe_backend(job->ctx, job->backend, job->plugin, job->host, job->out, &job->err);
  return NULL;
}

/* Probe each backend asked for (every one when none is named); a name the registry does not
 * hold is an error, a plugin that failed to load too. */
static int probe_all(struct cordon_context *ctx, const struct cordon_registry *reg,
                     const struct cordon_attest_options *o, const struct attest_host *host,
                     struct attest_backend **out, size_t *n, struct cordon_error **err) {
  for (size_t i = 0; o->backends && o->backends[i]; i++) {
    const struct cordon_backend *b = NULL;
    if (cordon_registry_find(reg, o->backends[i], &b, err) < 0)
      return -1;
  }
  size_t count = cordon_registry_count(reg);
  *out = calloc(count ? count : 1, sizeof(**out));
  _cleanup_free_ struct probe_job *jobs = calloc(count ? count : 1, sizeof(*jobs));
  if (!*out || !jobs)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "attestation");
  /* The slowest first, so the tail is short: the reverse of the selector's cost order (the
   * declared tier, highest first; later registry entries first within a tier: microvm, gvisor,
   * docker, ns, worktree for the builtins). On two cores the VM's boot and gVisor's sandbox
   * set the time; the cheap ones fit in beside them. */
  size_t k = 0;
  for (size_t at = 0; at < count * (CORDON_TIER_VM + 1); at++) {
    unsigned tier = CORDON_TIER_VM - (unsigned)(at / count);
    const struct cordon_registry_entry *e = cordon_registry_entry(reg, count - 1 - at % count);
    /* A plugin's tier out of range counts as the highest: it is probed all the same. */
    if (!e->backend ||
        ((unsigned)e->backend->tier > CORDON_TIER_VM ? CORDON_TIER_VM
                                                     : (unsigned)e->backend->tier) != tier ||
        !wanted(o, e->backend->name))
      continue;
    struct probe_job *job = &jobs[k];
    *job = (struct probe_job){.ctx = ctx,
                              .backend = e->backend,
                              .plugin = strcmp(e->origin, "builtin") != 0,
                              .host = host,
                              .out = &(*out)[k]};
    job->running = pthread_create(&job->thread, NULL, probe_thread, job) == 0;
    if (!job->running)
      probe_thread(job);
    k++;
  }
  int r = 0;
  for (size_t i = 0; i < k; i++) {
    if (jobs[i].running)
      pthread_join(jobs[i].thread, NULL);
    if (jobs[i].r < 0 && r == 0) {
      *err = steal_ptr(&jobs[i].err);
      r = -1;
    }
    cordon_error_free(jobs[i].err);
  }
  /* Every record is kept (cleared by the caller), failed ones included. */
  *n = k;
  return r;
}

int cordon_attest_run(struct cordon_context *ctx, const struct cordon_registry *reg,
                      const struct cordon_attest_options *o, struct cordon_attest_result *res,
                      struct cordon_error **err) {
  memset(res, 0, sizeof(*res));
  json_t *facts = measure_host_facts(o->cordon_version);
  if (!facts)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno ? errno : ENOMEM, "host facts");
  int r = -1;
  struct host_setup h;
  struct attest_backend *backends = NULL;
  size_t n = 0;
  _cleanup_free_ char *body = NULL;
  struct cordon_signing_key *key = NULL;
  if (o->host_facts_json && overlay_host_facts(facts, o->host_facts_json, err) < 0) {
    json_decref(facts);
    return -1;
  }
  if (host_setup(&h, json_string_value(json_object_get(facts, "kernel_release")), err) < 0 ||
      probe_all(ctx, reg, o, &h.host, &backends, &n, err) < 0 ||
      attest_body_build(facts, backends, n, &body, err) < 0 ||
      cordon_signing_key_load(o->key_dir, &key, err) < 0 ||
      cordon_document_sign(key, body, strlen(body), &res->document, &res->length, err) < 0 ||
      crypto_sha256_hex(res->document, res->length, res->digest, err) < 0)
    goto out;
  snprintf(res->kid, sizeof(res->kid), "%s", cordon_signing_key_id(key));
  if (o->out_path && fs_write_atomic(o->out_path, res->document, res->length, 0644, err) < 0)
    goto out;
  if (!o->no_audit && record_event(ctx, o, res, err) < 0)
    goto out;
  r = 0;
out:
  host_teardown(&h);
  for (size_t i = 0; i < n; i++)
    attest_backend_clear(&backends[i]);
  free(backends);
  cordon_signing_key_free(key);
  json_decref(facts);
  if (r < 0)
    cordon_attest_result_clear(res);
  return r;
}

void cordon_attest_result_clear(struct cordon_attest_result *res) {
  if (!res)
    return;
  free(res->document);
  memset(res, 0, sizeof(*res));
}

/* ---- the verdict -------------------------------------------------------------------------- */

void cordon_attest_report_clear(struct cordon_attest_report *report) {
  if (!report)
    return;
  free(report->reason);
  memset(report, 0, sizeof(*report));
}

static int report_set(struct cordon_attest_report *r, enum cordon_verdict verdict, const char *fmt,
                      ...) __attribute__((format(printf, 3, 4)));
static int report_set(struct cordon_attest_report *r, enum cordon_verdict verdict, const char *fmt,
                      ...) {
  r->verdict = verdict;
  free(r->reason);
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(&r->reason, fmt, ap) < 0)
    r->reason = NULL;
  va_end(ap);
  return 0;
}

int cordon_attest_verify(const char *document, size_t length, const char *expected_kid,
                         struct cordon_attest_report *report, struct cordon_error **err) {
  memset(report, 0, sizeof(*report));
  struct cordon_document_check check;
  /* The body as the check parsed it: parsing its canonical bytes again would cost a verify
   * a third of its time. */
  json_t *body = NULL;
  if (crypto_document_verify_tree(document, length, expected_kid, &check, &body, err) < 0)
    return -1;
  memcpy(report->kid, check.kid, sizeof(report->kid));
  report->verdict = check.verdict;
  if (check.verdict == CORDON_VERDICT_FAILED || !body) {
    report_set(report, CORDON_VERDICT_FAILED, "%s", check.reason ? check.reason : "failed");
    json_decref(body);
    cordon_document_check_clear(&check);
    return 0;
  }
  char *reason = NULL;
  if (attest_body_check(body, report->host_facts_digest, &report->n_backends, &reason) < 0) {
    report_set(report, CORDON_VERDICT_FAILED, "%s", reason ? reason : "malformed attestation");
    report->host_facts_digest[0] = '\0';
  } else if (check.verdict == CORDON_VERDICT_UNANCHORED) {
    report_set(report, CORDON_VERDICT_UNANCHORED,
               "no expected key id was given: the signer %s is not anchored", check.kid);
  }
  free(reason);
  json_decref(body);
  cordon_document_check_clear(&check);
  return 0;
}

/* Read an attestation file for a verdict: *data set when it could be read, else the report
 * says why. */
static int attest_read_file(const char *path, struct cordon_attest_report *report,
                            unsigned char **data, size_t *length) {
  memset(report, 0, sizeof(*report));
  *data = NULL;
  /* Non-blocking, so a FIFO in the attestation's place cannot hang the check. */
  _cleanup_close_ int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    return report_set(report, e == ENOENT ? CORDON_VERDICT_INCOMPLETE : CORDON_VERDICT_UNREADABLE,
                      "attestation %s: %s", path, strerror(e));
  }
  struct stat st;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
    return report_set(report, CORDON_VERDICT_UNREADABLE, "attestation %s is not a regular file",
                      path);
  if ((uint64_t)st.st_size > CORDON_DOCUMENT_MAX)
    return report_set(report, CORDON_VERDICT_FAILED,
                      "attestation %s is larger than a signed document can be", path);
  struct cordon_error *read_err = NULL;
  if (fs_read_fd(fd, CORDON_DOCUMENT_MAX, data, length, &read_err) < 0) {
    cordon_error_free(read_err);
    *data = NULL;
    return report_set(report, CORDON_VERDICT_UNREADABLE, "attestation %s cannot be read", path);
  }
  return 0;
}

int cordon_attest_verify_file(const char *path, const char *expected_kid,
                              struct cordon_attest_report *report, struct cordon_error **err) {
  _cleanup_free_ unsigned char *data = NULL;
  size_t length = 0;
  attest_read_file(path, report, &data, &length);
  if (!data)
    return 0;
  return cordon_attest_verify((const char *)data, length, expected_kid, report, err);
}

int cordon_attest_select_rows(const char *path, const char *expected_kid,
                              struct cordon_attest_report *report, char sha256[65],
                              struct cordon_select_attested **rows, size_t *n,
                              struct cordon_error **err) {
  *rows = NULL;
  *n = 0;
  sha256[0] = '\0';
  _cleanup_free_ unsigned char *data = NULL;
  size_t length = 0;
  attest_read_file(path, report, &data, &length);
  if (!data)
    return 0;
  if (cordon_attest_verify((const char *)data, length, expected_kid, report, err) < 0)
    return -1;
  if (report->verdict != CORDON_VERDICT_VERIFIED)
    return 0;
  json_t *document = NULL;
  if (crypto_sha256_hex(data, length, sha256, err) < 0 ||
      jcs_parse(data, length, CORDON_DOCUMENT_MAX, "attestation", &document, err) < 0)
    return -1;
  int r = attest_body_rows(json_object_get(document, "body"), rows, n);
  json_decref(document);
  if (r < 0) {
    cordon_select_attested_free(*rows, *n);
    *rows = NULL;
    *n = 0;
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "attestation %s", path);
  }
  return 0;
}
