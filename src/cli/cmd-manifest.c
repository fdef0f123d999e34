/* The manifest options shared by `cordon run` and `cordon session create`: parsing them into
 * a manifest, backend selection (with the fail-closed CORDON_SANDBOX rules), the enforcement
 * check said in terms of options, and the exec output both `run` and `session exec` print. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/microvm/monitor.h"
#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "cli/cli.h"
#include "cli/cmd-manifest.h"
#include "confine/devices.h"
#include "protocol/devices.h"
#include "protocol/exec-json.h"

void manifest_opts_free(struct manifest_opts *o) {
  strv_free(o->sparse);
  strv_free(o->env);
  strv_free(o->read_only);
  strv_free(o->hidden);
  strv_free(o->allow_ro);
  strv_free(o->hidden_if_exists);
  strv_free(o->allow_domains);
  strv_free(o->allow_cidrs);
  strv_free(o->resolve);
  strv_free(o->devices);
  for (size_t i = 0; i < o->n_files; i++) {
    free((void *)o->files[i].path);
    free((void *)o->files[i].content);
  }
  free(o->files);
  for (size_t i = 0; i < o->n_volumes; i++) {
    free((void *)o->volumes[i].source);
    free((void *)o->volumes[i].target);
  }
  free(o->volumes);
}

/* --device HOST[:PATH] is checked here (a character device node, a target beneath /dev) so a
 * mistake is named before any sandbox is made; --gpu is resolved into the nodes it means. */
static int device_option(const char *verb, int c, const char *arg, struct manifest_opts *o) {
  struct cordon_error *err = NULL;
  _cleanup_free_ char *host = NULL, *target = NULL;
  int r = c == OPT_GPU ? confine_gpu_resolve(arg, &o->devices, &err)
          : confine_device_parse(arg, &host, &target, &err) < 0 ? -1
                                                                : confine_device_check(host, &err);
  if (r < 0) {
    int code = cli_usage_error(verb, "%s", err->message);
    cordon_error_free(err);
    return code;
  }
  return c == OPT_DEVICE && strv_push(&o->devices, arg) < 0 ? EXIT_FAILURE_ : 0;
}

/* -v SOURCE:TARGET[:ro]: SOURCE a volume name or an absolute host directory; the library checks
 * both (names, targets, sources) before anything is made. */
static int parse_volume(const char *verb, const char *arg, struct manifest_opts *o) {
  const char *colon = strchr(arg, ':');
  if (!colon || colon == arg || !colon[1])
    return cli_usage_error(verb, "-v expects NAME:PATH[:ro] or /HOST/DIR:PATH[:ro], got '%s'", arg);
  const char *target = colon + 1, *mode = strchr(target, ':');
  if (mode && strcmp(mode, ":ro") != 0 && strcmp(mode, ":rw") != 0)
    return cli_usage_error(verb, "-v: unknown mode '%s' in '%s' (ro or rw)", mode + 1, arg);
  struct cordon_volume *grown = realloc(o->volumes, (o->n_volumes + 1) * sizeof(*grown));
  if (!grown)
    return EXIT_FAILURE_;
  o->volumes = grown;
  struct cordon_volume *v = &o->volumes[o->n_volumes];
  *v = (struct cordon_volume){
      .source = strndup(arg, (size_t)(colon - arg)),
      .target = mode ? strndup(target, (size_t)(mode - target)) : strdup(target),
      .read_only = mode && strcmp(mode, ":ro") == 0,
  };
  o->n_volumes++;
  if (!v->source || !v->target)
    return EXIT_FAILURE_;
  if (v->source[0] != '/' && !cordon_volume_name_valid(v->source))
    return cli_usage_error(verb,
                           "invalid volume name '%s' (expected [A-Za-z0-9][A-Za-z0-9_.-]{0,63}, "
                           "or an absolute host directory)",
                           v->source);
  return 0;
}

static int read_host_file(const char *src, struct cordon_file_spec *f, struct cordon_error **err) {
  unsigned char *data = NULL;
  size_t len = 0;
  struct stat st;
  if (stat(src, &st) < 0)
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, errno, "--file source %s", src);
  if (fs_read_file(src, STDIN_MAX, &data, &len, err) < 0)
    return -1;
  f->content = data;
  f->length = len;
  f->mode = st.st_mode & 0777;
  return 0;
}

/* Returns 0 when the option was handled, 1 when it is not a manifest option, or an exit code
 * (> 1) to stop with. */
/* --user: the sandbox user by its name or uid (the default), or root. No other user exists
 * inside. */
static int parse_user(const char *arg, struct manifest_opts *o) {
  if (!strcmp(arg, "root") || !strcmp(arg, "0")) {
    o->user_root = true;
    return 0;
  }
  if (!strcmp(arg, "cordon") || !strcmp(arg, "1000")) {
    o->user_root = false;
    return 0;
  }
  cli_error("--user %s: the sandbox has two users, cordon (1000, the default) and root", arg);
  return EXIT_USAGE;
}

int manifest_option(const char *verb, int c, const char *arg, struct manifest_opts *o) {
  unsigned long long u = 0;
  struct cordon_error *err = NULL;
  int selector = cli_select_option(verb, c, arg, &o->select);
  if (selector != 1)
    return selector;
  if (c == OPT_GPU)
    o->gpu = true;
  switch (c) {
  case OPT_BACKEND: o->backend = arg; return 0;
  case OPT_WORKSPACE: o->workspace = arg; return 0;
  case OPT_ROOT: o->root = arg; return 0;
  case OPT_IMAGE: o->image = arg; return 0;
  case OPT_REPO: o->repo = arg; return 0;
  case OPT_BRANCH: o->branch = arg; return 0;
  case OPT_SPARSE: return strv_push(&o->sparse, arg) < 0 ? EXIT_FAILURE_ : 0;
  case OPT_RO: return strv_push(&o->read_only, arg) < 0 ? EXIT_FAILURE_ : 0;
  case OPT_HIDE: return strv_push(&o->hidden, arg) < 0 ? EXIT_FAILURE_ : 0;
  case OPT_HIDE_IF_EXISTS: return strv_push(&o->hidden_if_exists, arg) < 0 ? EXIT_FAILURE_ : 0;
  case OPT_ALLOW_RO:
    if (arg[0] != '/')
      return cli_usage_error(verb, "--allow-ro needs an absolute host path, got '%s'", arg);
    return strv_push(&o->allow_ro, arg) < 0 ? EXIT_FAILURE_ : 0;
  case 'v': return parse_volume(verb, arg, o);
  case OPT_ENV:
    if (!strchr(arg, '=') || arg[0] == '=')
      return cli_usage_error(verb, "--env expects KEY=VALUE, got '%s'", arg);
    return strv_push(&o->env, arg) < 0 ? EXIT_FAILURE_ : 0;
  case OPT_FILE: {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
      return cli_usage_error(verb, "--file expects PATH=SRC, got '%s'", arg);
    struct cordon_file_spec *grown = realloc(o->files, (o->n_files + 1) * sizeof(*grown));
    if (!grown)
      return EXIT_FAILURE_;
    o->files = grown;
    struct cordon_file_spec *f = &o->files[o->n_files];
    memset(f, 0, sizeof(*f));
    f->path = strndup(arg, (size_t)(eq - arg));
    o->n_files++;
    if (read_host_file(eq + 1, f, &err) < 0)
      return cli_fail(err);
    return 0;
  }
  case OPT_NET:
    if (cordon_egress_parse(arg, &o->egress) < 0)
      return cli_usage_error(verb, "--net expects none, loopback, restricted or open, got '%s'",
                             arg);
    o->egress_set = true;
    return 0;
  case OPT_MEMORY:
    if (cli_parse_size(arg, &u) < 0 || u == 0)
      return cli_usage_error(verb, "--memory expects a size such as 512M, got '%s'", arg);
    o->limits.memory_bytes = u;
    return 0;
  case OPT_FSIZE:
    if (cli_parse_size_limit(arg, &o->limits.fsize_bytes) < 0)
      return cli_usage_error(verb, "--fsize expects a size such as 1G, or unlimited, got '%s'",
                             arg);
    return 0;
  case OPT_TMP_SIZE:
    if (cli_parse_size(arg, &u) < 0 || u < 4096)
      return cli_usage_error(
          verb, "--tmp-size expects a size of at least 4K such as 256M, got '%s'", arg);
    o->limits.tmp_bytes = u;
    return 0;
  case OPT_PIDS:
    if (cli_parse_u64(arg, &u) < 0 || u == 0)
      return cli_usage_error(verb, "--pids expects a positive number, got '%s'", arg);
    o->limits.pids = u;
    return 0;
  case OPT_NOFILE:
    if (cli_parse_u64(arg, &u) < 0 || u == 0)
      return cli_usage_error(verb, "--nofile expects a positive number, got '%s'", arg);
    o->limits.nofile = u;
    return 0;
  case OPT_CPUS:
    if (cli_parse_double(arg, 0.001, &o->limits.cpus) < 0)
      return cli_usage_error(verb, "--cpus expects a positive number, got '%s'", arg);
    return 0;
  case OPT_TIMEOUT:
    if (cli_parse_double(arg, 0, &o->timeout) < 0)
      return cli_usage_error(verb, "--timeout expects seconds, got '%s'", arg);
    return 0;
  case OPT_NO_REQUIRE: o->no_require = true; return 0;
  case OPT_USER: return parse_user(arg, o);
  case OPT_QUIET: o->quiet = true; return 0;
  case OPT_JSON: o->json = true; return 0;
  case OPT_MONITOR:
    if (!microvm_monitor_find(arg))
      return cli_usage_error(verb, "--monitor %s: no such monitor (monitors: %s)", arg,
                             microvm_monitor_names());
    o->monitor = arg;
    return 0;
  case OPT_ALLOW_DOMAIN: return strv_push(&o->allow_domains, arg) < 0 ? EXIT_FAILURE_ : 0;
  case OPT_ALLOW_CIDR: return strv_push(&o->allow_cidrs, arg) < 0 ? EXIT_FAILURE_ : 0;
  case OPT_RESOLVE: return strv_push(&o->resolve, arg) < 0 ? EXIT_FAILURE_ : 0;
  case OPT_DEVICE:
  case OPT_GPU: return device_option(verb, c, arg, o);
  }
  return 1;
}

/* Whether workspace-relative `path` names something in the workspace the session will start
 * with: the --workspace or --repo directory, else the --file entries of a fresh one. A path
 * that cannot be looked at for another reason than its absence counts as present, so that
 * the backend's own check of --hide (a '..', a symlink out) still refuses it. */
static bool workspace_has(const struct cordon_manifest *m, const char *path) {
  if (path[0] == '/' || !strcmp(path, "..") || !strncmp(path, "../", 3) || strstr(path, "/../") ||
      (strlen(path) >= 3 && !strcmp(path + strlen(path) - 3, "/..")))
    return true; /* not a workspace path at all: --hide says why */
  const char *dir = m->workspace ? m->workspace : m->repo ? m->repo->source : NULL;
  if (dir) {
    _cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (dfd < 0 || fstatat(dfd, path, &st, AT_SYMLINK_NOFOLLOW) == 0)
      return true;
    return errno != ENOENT && errno != ENOTDIR;
  }
  while (path[0] == '.' && path[1] == '/')
    path += 2;
  size_t n = strlen(path);
  while (n > 0 && path[n - 1] == '/')
    n--;
  for (size_t i = 0; i < m->n_files; i++) {
    const char *f = m->files[i].path;
    while (f[0] == '.' && f[1] == '/')
      f += 2;
    if (!strncmp(f, path, n) && (f[n] == 0 || f[n] == '/'))
      return true;
  }
  return false;
}

/* --hide-if-exists: the paths present join the hidden list; the others are skipped quietly. */
static int hide_existing(struct manifest_opts *o, struct cordon_manifest *m) {
  for (size_t i = 0; o->hidden_if_exists && o->hidden_if_exists[i]; i++)
    if (workspace_has(m, o->hidden_if_exists[i]) &&
        strv_push(&o->hidden, o->hidden_if_exists[i]) < 0)
      return EXIT_FAILURE_;
  m->policy.hidden = (const char *const *)o->hidden;
  return 0;
}

/* --allow-domain, --allow-cidr and --resolve shape the class restricted and nothing else: with
 * another class (or none named) they would be silently ignored, so they are refused. Their
 * entries themselves are checked by the backend (net_rules_parse), which names a bad one. */
static int egress_rules(struct manifest_opts *o, struct cordon_manifest *m) {
  const char *given = o->allow_domains ? "--allow-domain"
                      : o->allow_cidrs ? "--allow-cidr"
                      : o->resolve     ? "--resolve"
                                       : NULL;
  if (!given)
    return 0;
  if (!o->egress_set || o->egress != CORDON_EGRESS_RESTRICTED) {
    cli_error("%s needs --net restricted (it shapes what that class lets through)", given);
    return EXIT_USAGE;
  }
  o->egress_rules = (struct cordon_egress_rules){
      .allow_domains = (const char *const *)o->allow_domains,
      .allow_cidrs = (const char *const *)o->allow_cidrs,
      .resolve = (const char *const *)o->resolve,
  };
  m->egress_rules = &o->egress_rules;
  return 0;
}

/* Build the manifest; the vectors stay owned by o. */
int cli_build_manifest(struct manifest_opts *o, struct cordon_manifest *m,
                       struct cordon_repo_spec *repo) {
  const char *allow = getenv("CORDON_SANDBOX_ALLOW");
  if (allow && *allow) {
    _cleanup_free_ char *copy = strdup(allow);
    char *save = NULL;
    for (char *p = copy ? strtok_r(copy, ":", &save) : NULL; p; p = strtok_r(NULL, ":", &save)) {
      if (p[0] != '/') {
        cli_error("CORDON_SANDBOX_ALLOW entry '%s' is not an absolute path", p);
        return EXIT_USAGE;
      }
      if (strv_push(&o->allow_ro, p) < 0)
        return EXIT_FAILURE_;
    }
  }
  memset(m, 0, sizeof(*m));
  m->root = o->root;
  m->workspace = o->workspace;
  m->image = o->image;
  if (o->branch && !o->repo) {
    cli_error("--branch needs --repo");
    return EXIT_USAGE;
  }
  if (o->repo) {
    repo->source = o->repo;
    repo->branch = o->branch;
    repo->sparse_paths = (const char *const *)o->sparse;
    m->repo = repo;
  }
  m->files = o->files;
  m->n_files = o->n_files;
  m->env = (const char *const *)o->env;
  m->default_timeout = o->timeout;
  m->policy.read_only = (const char *const *)o->read_only;
  m->policy.hidden = (const char *const *)o->hidden;
  m->policy.allow_ro = (const char *const *)o->allow_ro;
  m->policy.egress = o->egress;
  m->policy.limits = o->limits;
  m->policy.require_enforcement = !o->no_require;
  m->volumes = o->volumes;
  m->n_volumes = o->n_volumes;
  m->user_root = o->user_root;
  m->monitor = o->monitor;
  m->devices = (const char *const *)o->devices;
  if (egress_rules(o, m) != 0)
    return EXIT_USAGE;
  return hide_existing(o, m);
}

/* Backend selection, failing closed. An explicitly named backend is the operator's choice.
 * Otherwise CORDON_SANDBOX decides: ns (must be available), auto (the default backend, and
 * only when enforcement is not required a loud fallback to worktree), off (unconfined, only
 * when enforcement is not required). */
/* --backend auto: the selector, with the manifest's needs added to what --require names. */
static int auto_backend(const struct cordon_registry *reg, struct manifest_opts *o,
                        const struct cordon_manifest *m, const struct cordon_backend **out,
                        struct cordon_error **err) {
  struct cli_select_request req = o->select;
  struct cordon_select_requirements *r = &req.requirements;
  r->capabilities |= CORDON_CAP_EXEC | (o->n_volumes ? CORDON_CAP_PERSISTENT_VOLUMES : 0) |
                     (o->gpu ? CORDON_CAP_GPU : 0);
  /* Without --net, each backend gets its own default class: no class is a requirement. */
  r->features = cordon_policy_features(&m->policy) &
                ~(o->egress_set ? 0u
                                : (CORDON_FEATURE_NET_NONE | CORDON_FEATURE_NET_LOOPBACK |
                                   CORDON_FEATURE_NET_RESTRICTED));
  r->net_set = o->egress_set;
  r->net = o->egress;
  struct cordon_select_result result = {0};
  if (cli_select(reg, &req, &result, err) < 0)
    return -1;
  int rc = 0;
  if (!result.chosen) {
    cli_select_print_rejections(&result);
    rc = cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                          "--backend auto: no backend fits (selector_inputs %s; reasons above)",
                          result.inputs_digest);
  } else {
    if (!o->quiet)
      cli_error("--backend auto: %s (selector_inputs %s)", result.chosen, result.inputs_digest);
    rc = cordon_registry_find(reg, result.chosen, out, err);
  }
  cordon_select_result_clear(&result);
  return rc;
}

int select_backend(const struct cordon_registry *reg, struct manifest_opts *o,
                   const struct cordon_manifest *m, const struct cordon_backend **out,
                   struct cordon_error **err) {
  bool selector_options = o->select.require_set || o->select.min_tier_set ||
                          o->select.attestation || o->select.expected_kid ||
                          o->select.requirements.allow_unverifiable;
  bool automatic = o->backend && !strcmp(o->backend, "auto");
  if (selector_options && !automatic)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "--require, --min-tier, --attestation, --expected-keyid and "
                            "--allow-unverifiable go with --backend auto (--attestation and "
                            "--expected-keyid also with --pool)");
  if (automatic)
    return auto_backend(reg, o, m, out, err);
  if (o->backend)
    return cordon_registry_find(reg, o->backend, out, err);
  const char *mode = getenv("CORDON_SANDBOX");
  if (!mode || !*mode)
    mode = "auto";
  bool required = !o->no_require;
  if (!strcmp(mode, "off")) {
    if (required)
      return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                              "CORDON_SANDBOX=off asks to run unconfined, but enforcement is "
                              "required (pass --no-require-enforcement to allow it)");
    cli_error("WARNING: CORDON_SANDBOX=off: running UNCONFINED on the host (worktree backend)");
    o->warned_unconfined = true;
    return cordon_registry_find(reg, "worktree", out, err);
  }
  if (strcmp(mode, "auto") && strcmp(mode, "ns"))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "CORDON_SANDBOX must be auto, ns or off, not '%s'", mode);
  const char *name = strcmp(mode, "ns") ? cordon_registry_default_name() : "ns";
  const struct cordon_backend *b = NULL;
  struct cordon_error *find_err = NULL;
  char *reason = NULL;
  if (cordon_registry_find(reg, name, &b, &find_err) == 0 && b->available(b, &reason) == 1) {
    *out = b;
    return 0;
  }
  _cleanup_free_ char *why = NULL;
  if (asprintf(&why, "%s", find_err ? find_err->message : reason ? reason : "unavailable") < 0)
    why = NULL;
  cordon_error_free(find_err);
  free(reason);
  if (required || !strcmp(mode, "ns"))
    return cordon_error_set(err, CORDON_ERR_UNAVAILABLE, 0,
                            "cannot confine: backend %s is unavailable: %s", name,
                            why ? why : "unavailable");
  cli_error("WARNING: backend %s is unavailable (%s): running UNCONFINED on the host "
            "(worktree backend) because enforcement is not required",
            name, why ? why : "unavailable");
  o->warned_unconfined = true;
  return cordon_registry_find(reg, "worktree", out, err);
}

/* The option that asks for each policy feature, for messages. */
static const char *feature_option(uint32_t feature) {
  switch (feature) {
  case CORDON_FEATURE_READ_ONLY_PATHS: return "--ro";
  case CORDON_FEATURE_HIDDEN_PATHS: return "--hide";
  case CORDON_FEATURE_HOST_GRANTS: return "--allow-ro or CORDON_SANDBOX_ALLOW";
  case CORDON_FEATURE_MEMORY: return "--memory";
  case CORDON_FEATURE_PIDS: return "--pids";
  case CORDON_FEATURE_CPU: return "--cpus";
  case CORDON_FEATURE_NOFILE: return "--nofile";
  case CORDON_FEATURE_FSIZE: return "--fsize";
  case CORDON_FEATURE_TMP_SIZE: return "--tmp-size";
  case CORDON_FEATURE_NET_NONE: return "--net none";
  case CORDON_FEATURE_NET_LOOPBACK: return "--net loopback";
  case CORDON_FEATURE_NET_RESTRICTED: return "--net restricted";
  }
  return "?";
}

/* With the backend chosen: its default egress class when --net was not given, then the
 * enforcement check (the library makes it too, and audits a waiver; here it is said in terms of
 * options), one WARNING line per waived feature, and the notice that a backend of tier none
 * isolates nothing. */
int apply_backend(const struct cordon_backend *b, const struct manifest_opts *o,
                  struct cordon_manifest *m, struct cordon_error **err) {
  /* An unconfined fallback keeps the class a confining backend would have applied (none), so
   * giving it up is said and audited like any other waiver (the operator's explicit choice). */
  if (!o->egress_set)
    m->policy.egress = o->warned_unconfined ? CORDON_EGRESS_NONE : cordon_backend_default_egress(b);
  if (o->monitor && strcmp(b->name, "microvm") != 0)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                            "--monitor %s: only the microvm backend has a monitor, not %s",
                            o->monitor, b->name);
  /* Devices neither: a grant a backend cannot make is refused by name (the library's check). */
  if (o->devices && protocol_refuse_devices(b, m, err) < 0)
    return -1;
  /* Volumes cannot be waived: a backend that cannot mount them is refused them by name. */
  if (o->n_volumes && !(b->capabilities & CORDON_CAP_PERSISTENT_VOLUMES))
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "backend %s does not support persistent_volumes: refusing -v/--volume",
                            b->name);
  uint32_t missing = cordon_backend_unenforced(b, &m->policy);
  if (missing && !o->no_require) {
    char list[512] = "";
    for (unsigned i = 0; i < CORDON_FEATURE_COUNT; i++)
      if (missing & (1u << i)) {
        size_t n = strlen(list);
        snprintf(list + n, sizeof(list) - n, "%s%s (%s)", n ? ", " : "",
                 cordon_feature_name(1u << i), feature_option(1u << i));
      }
    return cordon_error_set(err, CORDON_ERR_DENIED, 0,
                            "backend %s does not enforce %s: refusing to run without %s "
                            "(--no-require-enforcement runs anyway and records it in the audit "
                            "log)",
                            b->name, list, missing & (missing - 1) ? "them" : "it");
  }
  for (unsigned i = 0; i < CORDON_FEATURE_COUNT; i++)
    if (missing & (1u << i))
      cli_error("WARNING: backend %s does NOT enforce %s (%s): running without it, as "
                "--no-require-enforcement allows; recorded in the audit log",
                b->name, cordon_feature_name(1u << i), feature_option(1u << i));
  const char *quiet_env = getenv("CORDON_QUIET");
  bool quiet = o->quiet || (quiet_env && *quiet_env && strcmp(quiet_env, "0") != 0);
  if (b->tier == CORDON_TIER_NONE && !quiet && !o->warned_unconfined)
    cli_error("notice: backend %s isolates nothing: commands run as you, on the host, with your "
              "files and network (--quiet hides this)",
              b->name);
  return 0;
}

/* ---- exec output -------------------------------------------------------------------------- */

json_t *bytes_json(const unsigned char *data, size_t len) {
  json_t *s = json_stringn((const char *)(data ? data : (const unsigned char *)""), len);
  return s ? s : json_null(); /* not UTF-8: the JSON form carries text only */
}

/* Print the result the way a user expects and return the exit code of the verb. */
/* The memory limit of the command whose result is printed next, for the message of an OOM
 * kill (a session exec: the limit kept in its state); 0 when none is known. */
static uint64_t result_memory_limit;

void emit_result_memory_limit(uint64_t bytes) {
  result_memory_limit = bytes;
}

/* "256M": the limit in the largest binary unit that divides it, as --memory takes it. */
static void format_size(uint64_t bytes, char *buf, size_t size) {
  static const char units[] = "KMGT";
  int unit = -1;
  while (unit < 3 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    unit++;
  }
  if (unit < 0)
    snprintf(buf, size, "%llu bytes", (unsigned long long)bytes);
  else
    snprintf(buf, size, "%llu%c", (unsigned long long)bytes, units[unit]);
}

static void report_oom(void) {
  if (!result_memory_limit) {
    cli_error("killed by the memory limit");
    return;
  }
  char limit[32];
  format_size(result_memory_limit, limit, sizeof(limit));
  cli_error("killed by the memory limit (%s)", limit);
}

/* The kinds of cordon_error as --json names them. */
int emit_failure(struct cordon_error *err, bool json, int code) {
  if (json) {
    /* On stdout like a result, so that a reader of the JSON tells cordon's own failure (an
     * "error" object) from a command that exited 125 by itself (none). */
    const char *message = err && err->message ? err->message : "failed";
    json_t *o = json_pack("{s:i, s:{s:s, s:s}}", "exit_code", code, "error", "message", message,
                          "kind", cli_error_kind_name(err));
    if (o) {
      json_dumpf(o, stdout, JSON_INDENT(2));
      putchar('\n');
      fflush(stdout);
      json_decref(o);
    }
  }
  cli_fail(err);
  return code;
}

int emit_result(const struct cordon_exec_result *r, bool json, double timeout) {
  if (json) {
    json_t *o = exec_result_json(r, false); /* the shape the HTTP API gives too */
    if (!o)
      return EXIT_CORDON;
    json_dumpf(o, stdout, JSON_INDENT(2));
    putchar('\n');
    json_decref(o);
  } else {
    fs_write_all(STDOUT_FILENO, r->stdout_data, r->stdout_length);
    fs_write_all(STDERR_FILENO, r->stderr_data, r->stderr_length);
    if (r->stdout_truncated)
      cli_error("stdout truncated: kept %zu of %llu bytes", r->stdout_length,
                (unsigned long long)r->stdout_total);
    if (r->stderr_truncated)
      cli_error("stderr truncated: kept %zu of %llu bytes", r->stderr_length,
                (unsigned long long)r->stderr_total);
    if (r->oom_killed)
      report_oom();
  }
  if (r->timed_out) {
    if (!json)
      cli_error("command timed out after %g s; its processes were killed", timeout);
    return EXIT_TIMED_OUT;
  }
  return r->exit_code;
}

int load_stdin(const char *file, unsigned char **data, size_t *len, struct cordon_error **err) {
  if (!file)
    return 0;
  if (!strcmp(file, "-"))
    return fs_read_fd(STDIN_FILENO, STDIN_MAX, data, len, err) < 0
               ? cordon_error_prefix(err, "standard input")
               : 0;
  return fs_read_file(file, STDIN_MAX, data, len, err);
}

/* ---- the hint that --ro and --hide name paths in the workspace ---- */

void manifest_workspace_hint(const struct manifest_opts *o, struct cordon_error *err) {
  if (!err || !err->message || o->workspace || o->repo || (!o->read_only && !o->hidden))
    return;
  if (!strstr(err->message, "read-only path") && !strstr(err->message, "hidden path"))
    return;
  /* Without --workspace the workspace is a fresh empty directory: a --ro or --hide path
   * cannot be in it (unless a --file put it there), and the user most likely meant theirs. */
  char *longer = NULL;
  if (asprintf(&longer,
               "%s: --ro and --hide name paths in the workspace, an empty directory unless "
               "--workspace DIR (the current directory: --workspace .)",
               err->message) < 0)
    return;
  free(err->message);
  err->message = longer;
}
