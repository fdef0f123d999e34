/* `cordon run` and `cordon session ...`: the manifest options they share, backend selection
 * (with the fail-closed CORDON_SANDBOX rules), and the session verbs. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cordon/cas.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "cli/cli.h"

#define STDIN_MAX ((size_t)1 << 30)

/* ---- options shared by `run` and `session create` ---------------------------------------- */

struct manifest_opts {
  const char *backend;
  const char *workspace;
  const char *root;
  const char *image;
  const char *repo;
  const char *branch;
  char **sparse;
  char **env;
  char **read_only;
  char **hidden;
  char **allow_ro;
  struct cordon_file_spec *files;
  size_t n_files;
  enum cordon_egress egress;
  bool egress_set; /* --net given; otherwise the backend's default class */
  struct cordon_limits limits;
  double timeout;
  bool no_require;
  bool quiet; /* --quiet or CORDON_QUIET=1: no notice that a backend isolates nothing */
  /* select_backend fell back to running unconfined (CORDON_SANDBOX=off or auto) and said so */
  bool warned_unconfined;
  /* exec options (run only) */
  const char *cwd;
  const char *stdin_file;
  bool json;
};

static void manifest_opts_free(struct manifest_opts *o) {
  strv_free(o->sparse);
  strv_free(o->env);
  strv_free(o->read_only);
  strv_free(o->hidden);
  strv_free(o->allow_ro);
  for (size_t i = 0; i < o->n_files; i++) {
    free((void *)o->files[i].path);
    free((void *)o->files[i].content);
  }
  free(o->files);
}

enum {
  OPT_BACKEND = 256,
  OPT_WORKSPACE,
  OPT_ROOT,
  OPT_IMAGE,
  OPT_REPO,
  OPT_BRANCH,
  OPT_SPARSE,
  OPT_FILE,
  OPT_ENV,
  OPT_RO,
  OPT_HIDE,
  OPT_ALLOW_RO,
  OPT_NET,
  OPT_MEMORY,
  OPT_PIDS,
  OPT_CPUS,
  OPT_NOFILE,
  OPT_FSIZE,
  OPT_TMP_SIZE,
  OPT_TIMEOUT,
  OPT_NO_REQUIRE,
  OPT_QUIET,
  OPT_CWD,
  OPT_STDIN,
  OPT_JSON,
  OPT_MODE,
  OPT_MAX_SNAPSHOT_BYTES,
  OPT_CLEAR_ENV,
  OPT_HELP,
  OPT_FROM,
  OPT_COUNT,
};

#define MANIFEST_OPTIONS                                                                          \
  {"backend", required_argument, NULL, OPT_BACKEND},                                              \
      {"workspace", required_argument, NULL, OPT_WORKSPACE},                                      \
      {"root", required_argument, NULL, OPT_ROOT}, {"image", required_argument, NULL, OPT_IMAGE}, \
      {"repo", required_argument, NULL, OPT_REPO},                                                \
      {"branch", required_argument, NULL, OPT_BRANCH},                                            \
      {"sparse", required_argument, NULL, OPT_SPARSE},                                            \
      {"file", required_argument, NULL, OPT_FILE}, {"env", required_argument, NULL, OPT_ENV},     \
      {"ro", required_argument, NULL, OPT_RO}, {"hide", required_argument, NULL, OPT_HIDE},       \
      {"allow-ro", required_argument, NULL, OPT_ALLOW_RO},                                        \
      {"net", required_argument, NULL, OPT_NET}, {"memory", required_argument, NULL, OPT_MEMORY}, \
      {"pids", required_argument, NULL, OPT_PIDS}, {"cpus", required_argument, NULL, OPT_CPUS},   \
      {"nofile", required_argument, NULL, OPT_NOFILE},                                            \
      {"fsize", required_argument, NULL, OPT_FSIZE},                                              \
      {"tmp-size", required_argument, NULL, OPT_TMP_SIZE},                                        \
      {"timeout", required_argument, NULL, OPT_TIMEOUT},                                          \
      {"no-require-enforcement", no_argument, NULL, OPT_NO_REQUIRE},                              \
      {"quiet", no_argument, NULL, OPT_QUIET}, {"json", no_argument, NULL, OPT_JSON}, {           \
    "help", no_argument, NULL, OPT_HELP                                                           \
  }

#define MANIFEST_HELP                                                                         \
  "  --backend NAME        backend (default: $CORDON_BACKEND, else ns; see CORDON_SANDBOX)\n" \
  "  --workspace DIR       use DIR as the workspace (default: a fresh directory)\n"           \
  "  --repo DIR [--branch B] [--sparse PATH]...\n"                                            \
  "                        workspace is a git worktree of DIR on a new branch\n"              \
  "  --root PATH           where the workspace appears in the sandbox (default /workspace)\n" \
  "  --file PATH=SRC       copy host file SRC into the workspace at PATH (repeatable)\n"      \
  "  --env KEY=VALUE       environment for every command (repeatable; kept 0600 in the\n"     \
  "                        runtime directory, not in .cordon/)\n"                             \
  "  --ro PATH             workspace path mounted read-only (repeatable)\n"                   \
  "  --hide PATH           workspace path hidden from the command (repeatable)\n"             \
  "                        (a protected file with other names, hard links, is refused; the\n" \
  "                        directories above a protected path cannot be moved inside)\n"      \
  "  --allow-ro HOSTPATH   grant a host path read-only (also CORDON_SANDBOX_ALLOW=a:b)\n"     \
  "                        (each .cordon/, cordon's keys and state stay hidden in\n"          \
  "                        grants and workspace; a workspace or grant inside: refused)\n"     \
  "  --net CLASS           egress: none, loopback, restricted, open (default: the\n"          \
  "                        strictest class the backend enforces; worktree: open)\n"           \
  "  --memory SIZE --pids N --cpus X --nofile N --fsize SIZE\n"                               \
  "                        resource limits (SIZE takes K, M, G); refused if unenforceable;\n" \
  "                        --fsize (largest file a command may write) defaults to 4G on ns\n" \
  "                        and docker (0 or unlimited: none)\n"                               \
  "  --tmp-size SIZE       size of /tmp and /dev/shm, each (default: the --memory limit,\n"   \
  "                        else 1G); their pages count against --memory\n"                    \
  "  --timeout SECONDS     exec timeout\n"                                                    \
  "  --image IMAGE         image for container and VM backends\n"                             \
  "  --no-require-enforcement\n"                                                              \
  "                        run even if the backend does not enforce what is asked\n"          \
  "                        (--ro, --memory, --net none...: a WARNING line each, and\n"        \
  "                        an enforcement.waived entry in the audit log), or run\n"           \
  "                        unconfined (CORDON_SANDBOX=off, or no backend)\n"                  \
  "  --quiet               no notice that a backend isolates nothing (CORDON_QUIET=1)\n"      \
  "  --json                machine-readable output\n"

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
static int manifest_option(const char *verb, int c, const char *arg, struct manifest_opts *o) {
  unsigned long long u = 0;
  struct cordon_error *err = NULL;
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
  case OPT_ALLOW_RO:
    if (arg[0] != '/')
      return cli_usage_error(verb, "--allow-ro needs an absolute host path, got '%s'", arg);
    return strv_push(&o->allow_ro, arg) < 0 ? EXIT_FAILURE_ : 0;
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
  case OPT_QUIET: o->quiet = true; return 0;
  case OPT_JSON: o->json = true; return 0;
  }
  return 1;
}

/* Build the manifest; the vectors stay owned by o. */
static int build_manifest(struct manifest_opts *o, struct cordon_manifest *m,
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
  return 0;
}

/* Backend selection, failing closed. An explicitly named backend is the operator's choice.
 * Otherwise CORDON_SANDBOX decides: ns (must be available), auto (the default backend, and
 * only when enforcement is not required a loud fallback to worktree), off (unconfined, only
 * when enforcement is not required). */
static int select_backend(const struct cordon_registry *reg, struct manifest_opts *o,
                          const struct cordon_backend **out, struct cordon_error **err) {
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
static int apply_backend(const struct cordon_backend *b, const struct manifest_opts *o,
                         struct cordon_manifest *m, struct cordon_error **err) {
  /* An unconfined fallback keeps the class a confining backend would have applied (none), so
   * giving it up is said and audited like any other waiver (the operator's explicit choice). */
  if (!o->egress_set)
    m->policy.egress = o->warned_unconfined ? CORDON_EGRESS_NONE : cordon_backend_default_egress(b);
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

static json_t *bytes_json(const unsigned char *data, size_t len) {
  json_t *s = json_stringn((const char *)(data ? data : (const unsigned char *)""), len);
  return s ? s : json_null(); /* not UTF-8: the JSON form carries text only */
}

/* Print the result the way a user expects and return the exit code of the verb. */
static int emit_result(const struct cordon_exec_result *r, bool json, double timeout) {
  if (json) {
    json_t *o = json_pack("{s:i, s:i, s:b, s:o, s:o, s:I, s:I, s:b, s:b, s:f}", "exit_code",
                          r->exit_code, "signal", r->term_signal, "timed_out", r->timed_out,
                          "stdout", bytes_json(r->stdout_data, r->stdout_length), "stderr",
                          bytes_json(r->stderr_data, r->stderr_length), "stdout_bytes",
                          (json_int_t)r->stdout_total, "stderr_bytes", (json_int_t)r->stderr_total,
                          "stdout_truncated", r->stdout_truncated, "stderr_truncated",
                          r->stderr_truncated, "duration", r->duration);
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
  }
  if (r->timed_out) {
    if (!json)
      cli_error("command timed out after %g s; its processes were killed", timeout);
    return EXIT_TIMED_OUT;
  }
  return r->exit_code;
}

static int load_stdin(const char *file, unsigned char **data, size_t *len,
                      struct cordon_error **err) {
  if (!file)
    return 0;
  if (!strcmp(file, "-"))
    return fs_read_fd(STDIN_FILENO, STDIN_MAX, data, len, err) < 0
               ? cordon_error_prefix(err, "standard input")
               : 0;
  return fs_read_file(file, STDIN_MAX, data, len, err);
}

/* ---- cordon run --------------------------------------------------------------------------- */

static const char run_usage[] =
    "usage: cordon run [options] -- ARGV...\n"
    "\n"
    "Create a session, run ARGV in it (never through a shell), destroy the session, and exit\n"
    "with the command's exit code: 124 timed out, 125 cordon failed, 126 cannot execute,\n"
    "127 not found, 128+N killed by signal N. Enforcement is required by default: if the\n"
    "backend cannot confine the command, cordon refuses to run it.\n"
    "\n"
    "options:\n" MANIFEST_HELP
    "  --cwd DIR             working directory (relative to the workspace)\n"
    "  --stdin FILE          feed FILE (or - for cordon's stdin) to the command\n";

int cmd_run(int argc, char **argv) {
  static const struct option opts[] = {MANIFEST_OPTIONS,
                                       {"cwd", required_argument, NULL, OPT_CWD},
                                       {"stdin", required_argument, NULL, OPT_STDIN},
                                       {0}};
  struct manifest_opts o = {0};
  int c, code = EXIT_CORDON;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
    if (c == 'h' || c == OPT_HELP) {
      fputs(run_usage, stdout);
      manifest_opts_free(&o);
      return EXIT_OK;
    }
    if (c == OPT_CWD) {
      o.cwd = optarg;
      continue;
    }
    if (c == OPT_STDIN) {
      o.stdin_file = optarg;
      continue;
    }
    int r = c == '?'
                ? cli_usage_error("run", "unknown option or missing value '%s'", argv[optind - 1])
                : manifest_option("run", c, optarg, &o);
    if (r != 0) {
      manifest_opts_free(&o);
      return r == EXIT_USAGE ? EXIT_CORDON : EXIT_CORDON;
    }
  }
  if (optind >= argc) {
    cli_usage_error("run", "no command given");
    manifest_opts_free(&o);
    return EXIT_CORDON;
  }
  struct cordon_manifest m;
  struct cordon_repo_spec repo = {0};
  if (build_manifest(&o, &m, &repo) != 0) {
    manifest_opts_free(&o);
    return EXIT_CORDON;
  }
  m.ephemeral = true; /* destroyed below, by this process */
  m.one_shot = true;  /* one command: the backend may build the sandbox with it */
  struct cordon_error *err = NULL;
  struct cordon_registry *reg = NULL;
  struct cordon_context *ctx = NULL;
  const struct cordon_backend *b = NULL;
  struct cordon_session *s = NULL;
  _cleanup_free_ unsigned char *stdin_data = NULL;
  size_t stdin_len = 0;
  if (load_stdin(o.stdin_file, &stdin_data, &stdin_len, &err) < 0 ||
      cordon_registry_load(&reg, &err) < 0 || select_backend(reg, &o, &b, &err) < 0 ||
      apply_backend(b, &o, &m, &err) < 0 || cordon_context_open(NULL, &ctx, &err) < 0 ||
      cordon_session_create(ctx, b, &m, &s, &err) < 0) {
    cli_fail(err);
    goto out;
  }
  struct cordon_exec_request req = {
      .argv = (const char *const *)(argv + optind),
      .cwd = o.cwd,
      .stdin_data = stdin_data ? stdin_data : (o.stdin_file ? (const void *)"" : NULL),
      .stdin_length = stdin_len,
  };
  struct cordon_exec_result res;
  if (cordon_session_exec(s, &req, &res, &err) < 0) {
    cli_fail(err);
  } else {
    code = emit_result(&res, o.json, o.timeout);
    cordon_exec_result_clear(&res);
  }
  err = NULL;
  if (cordon_session_destroy(s, &err) < 0) {
    cli_fail(err);
    code = EXIT_CORDON;
  }
out:
  cordon_context_free(ctx);
  cordon_registry_free(reg);
  manifest_opts_free(&o);
  return code;
}

/* ---- cordon session ... ------------------------------------------------------------------- */

static const char session_usage[] =
    "usage: cordon session SUBVERB [options]\n"
    "\n"
    "  create [options]                 create a session, print its id\n"
    "  create --from SNAPSHOT [options] resume: a new session whose workspace is the snapshot\n"
    "  create --from SNAPSHOT --count K fork K sessions at once, print their ids\n"
    "  exec ID [--cwd D] [--env K=V]... [--timeout S] [--stdin FILE] [--clear-env] [--json]\n"
    "       -- ARGV...                  run ARGV in the session (exit code as `cordon run`)\n"
    "  read ID PATH                     write the file's bytes to stdout\n"
    "  write ID PATH [--mode MODE]      replace PATH with stdin (atomically)\n"
    "  ls ID [PATH] [--json]            list a directory, sorted\n"
    "  list [--json]                    list this project's sessions\n"
    "  shutdown ID                      stop the session's processes, keep its files\n"
    "  snapshot ID [--max-snapshot-bytes SIZE] [--json]\n"
    "                                   snapshot the session's workspace, print the snapshot id;\n"
    "                                   refused (exit 4) when its files hold more than SIZE\n"
    "                                   (default 8G; 0 or unlimited: no limit)\n"
    "  destroy ID...                    destroy sessions (an unknown id is not an error)\n"
    "\n"
    "`cordon session create --help` lists the create options.\n";

static const char create_usage[] =
    "usage: cordon session create [options]\n"
    "\n"
    "Create a session and print its id.\n"
    "\n"
    "options:\n" MANIFEST_HELP "  --from SNAPSHOT       start from a snapshot (its workspace is\n"
    "                        the snapshot, restored and verified)\n"
    "  --count K             with --from: create K sessions (1 to 256) at once, on every\n"
    "                        core; print their ids one per line (--json: one array). All or\n"
    "                        none: if one cannot be created, the others are destroyed and\n"
    "                        the error is reported (exit 1, or 3/4 by its kind). When the ids\n"
    "                        are printed, every session is ready and its state is durable.\n"
    "\n"
    "Exit codes: 0 ok, 1 failed, 2 usage (--count not a number from 1 to 256, or without\n"
    "--from), 3 not found, 4 unavailable or refused.\n";

struct session_handle {
  struct cordon_registry *reg;
  struct cordon_context *ctx;
  struct cordon_session *s;
};

static void handle_close(struct session_handle *h) {
  cordon_session_close(h->s);
  cordon_context_free(h->ctx);
  cordon_registry_free(h->reg);
}

static int handle_open(const char *id, struct session_handle *h, struct cordon_error **err) {
  memset(h, 0, sizeof(*h));
  if (cordon_registry_load(&h->reg, err) < 0 || cordon_context_open(NULL, &h->ctx, err) < 0 ||
      cordon_session_open(h->ctx, h->reg, id, &h->s, err) < 0) {
    handle_close(h);
    return -1;
  }
  return 0;
}

static json_t *session_json(const struct cordon_session *s) {
  return json_pack("{s:s, s:s, s:s, s:s}", "id", s->id, "backend", s->backend->name, "workspace",
                   s->workspace, "root", s->root);
}

/* --count K: K sessions from one snapshot, all or none; the ids are printed only once every
 * session is ready and durable. */
static int create_batch(struct cordon_context *ctx, const struct cordon_backend *b,
                        const struct cordon_manifest *m, const char *from, size_t count,
                        bool json) {
  _cleanup_free_ struct cordon_session **sessions = calloc(count, sizeof(*sessions));
  struct cordon_error *err = NULL;
  if (!sessions) {
    cordon_error_set(&err, CORDON_ERR_SYSTEM, ENOMEM, "sessions");
    return cli_fail(err);
  }
  struct cordon_session_batch batch = {.count = count};
  if (cordon_session_resume_many(ctx, b, m, from, &batch, sessions, &err) < 0) {
    if (batch.failed_index != SIZE_MAX)
      cordon_error_prefix(&err, "session %zu of %zu (none was kept)", batch.failed_index + 1,
                          count);
    else if (err && err->kind == CORDON_ERR_INTERRUPTED)
      cordon_error_prefix(&err, "%zu sessions (none was kept)", count);
    return cli_fail(err);
  }
  json_t *list = json ? json_array() : NULL;
  for (size_t i = 0; i < count; i++) {
    if (list)
      json_array_append_new(list, session_json(sessions[i]));
    else
      printf("%s\n", sessions[i]->id);
    cordon_session_close(sessions[i]);
  }
  if (list) {
    json_dumpf(list, stdout, JSON_INDENT(2));
    putchar('\n');
    json_decref(list);
  }
  return EXIT_OK;
}

static int session_create(int argc, char **argv) {
  static const struct option opts[] = {MANIFEST_OPTIONS,
                                       {"from", required_argument, NULL, OPT_FROM},
                                       {"count", required_argument, NULL, OPT_COUNT},
                                       {0}};
  struct manifest_opts o = {0};
  const char *from = NULL;
  unsigned long long count = 0; /* 0: no --count, one session */
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
    if (c == 'h' || c == OPT_HELP) {
      fputs(create_usage, stdout);
      manifest_opts_free(&o);
      return EXIT_OK;
    }
    if (c == OPT_FROM) {
      from = optarg;
      continue;
    }
    if (c == OPT_COUNT) {
      if (cli_parse_u64(optarg, &count) < 0 || count < 1 || count > CORDON_SESSION_BATCH_MAX) {
        manifest_opts_free(&o);
        return cli_usage_error("session create", "--count needs a number from 1 to %u, not '%s'",
                               CORDON_SESSION_BATCH_MAX, optarg);
      }
      continue;
    }
    int r = c == '?' ? cli_usage_error("session create", "unknown option or missing value '%s'",
                                       argv[optind - 1])
                     : manifest_option("session create", c, optarg, &o);
    if (r != 0) {
      manifest_opts_free(&o);
      return r;
    }
  }
  if (optind < argc) {
    manifest_opts_free(&o);
    return cli_usage_error("session create", "unexpected argument '%s'", argv[optind]);
  }
  if (from && !cordon_digest_valid(from)) {
    manifest_opts_free(&o);
    return cli_usage_error(
        "session create", "--from expects a snapshot id (64 lowercase hex digits), got '%s'", from);
  }
  if (count && !from) {
    manifest_opts_free(&o);
    return cli_usage_error("session create", "--count needs --from SNAPSHOT");
  }
  struct cordon_manifest m;
  struct cordon_repo_spec repo = {0};
  int code = build_manifest(&o, &m, &repo);
  if (code != 0) {
    manifest_opts_free(&o);
    return code;
  }
  struct cordon_error *err = NULL;
  struct cordon_registry *reg = NULL;
  struct cordon_context *ctx = NULL;
  const struct cordon_backend *b = NULL;
  struct cordon_session *s = NULL;
  if (count) {
    if (cordon_registry_load(&reg, &err) < 0 || select_backend(reg, &o, &b, &err) < 0 ||
        apply_backend(b, &o, &m, &err) < 0 || cordon_context_open(NULL, &ctx, &err) < 0)
      code = cli_fail(err);
    else
      code = create_batch(ctx, b, &m, from, (size_t)count, o.json);
  } else if (cordon_registry_load(&reg, &err) < 0 || select_backend(reg, &o, &b, &err) < 0 ||
             apply_backend(b, &o, &m, &err) < 0 || cordon_context_open(NULL, &ctx, &err) < 0 ||
             (from ? cordon_session_resume(ctx, b, &m, from, &s, &err)
                   : cordon_session_create(ctx, b, &m, &s, &err)) < 0) {
    code = cli_fail(err);
  } else {
    if (o.json) {
      json_t *j = json_pack("{s:s, s:s, s:s, s:s}", "id", s->id, "backend", b->name, "workspace",
                            s->workspace, "root", s->root);
      json_dumpf(j, stdout, JSON_INDENT(2));
      putchar('\n');
      json_decref(j);
    } else {
      printf("%s\n", s->id);
    }
    cordon_session_close(s);
  }
  cordon_context_free(ctx);
  cordon_registry_free(reg);
  manifest_opts_free(&o);
  return code;
}

static int session_exec(int argc, char **argv) {
  static const struct option opts[] = {{"cwd", required_argument, NULL, OPT_CWD},
                                       {"env", required_argument, NULL, OPT_ENV},
                                       {"timeout", required_argument, NULL, OPT_TIMEOUT},
                                       {"stdin", required_argument, NULL, OPT_STDIN},
                                       {"clear-env", no_argument, NULL, OPT_CLEAR_ENV},
                                       {"json", no_argument, NULL, OPT_JSON},
                                       {"help", no_argument, NULL, OPT_HELP},
                                       {0}};
  const char *cwd = NULL, *stdin_file = NULL;
  char **env = NULL;
  double timeout = 0;
  bool json = false, clear_env = false;
  int c;
  /* The ID may come first (`exec ID --env K=V -- ARGV`) or after the options. */
  const char *id = NULL;
  if (argc > 1 && argv[1][0] != '-') {
    id = argv[1];
    argv[1] = argv[0];
    argc--;
    argv++;
  }
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
    switch (c) {
    case OPT_CWD: cwd = optarg; break;
    case OPT_STDIN: stdin_file = optarg; break;
    case OPT_JSON: json = true; break;
    case OPT_CLEAR_ENV: clear_env = true; break;
    case OPT_ENV:
      if (!strchr(optarg, '=') || optarg[0] == '=') {
        strv_free(env);
        cli_usage_error("session exec", "--env expects KEY=VALUE, got '%s'", optarg);
        return EXIT_CORDON;
      }
      strv_push(&env, optarg);
      break;
    case OPT_TIMEOUT:
      if (cli_parse_double(optarg, 0, &timeout) < 0) {
        strv_free(env);
        cli_usage_error("session exec", "--timeout expects seconds, got '%s'", optarg);
        return EXIT_CORDON;
      }
      break;
    case 'h':
    case OPT_HELP:
      strv_free(env);
      fputs(session_usage, stdout);
      return EXIT_OK;
    default:
      strv_free(env);
      cli_usage_error("session exec", "unknown option or missing value '%s'", argv[optind - 1]);
      return EXIT_CORDON;
    }
  }
  /* ID comes first, then (after an optional --) the command. */
  if (!id && optind < argc && strcmp(argv[optind], "--") != 0)
    id = argv[optind++];
  if (!id) {
    strv_free(env);
    cli_usage_error("session exec", "missing session ID");
    return EXIT_CORDON;
  }
  if (optind < argc && !strcmp(argv[optind], "--"))
    optind++;
  if (optind >= argc) {
    strv_free(env);
    cli_usage_error("session exec", "no command given");
    return EXIT_CORDON;
  }
  struct cordon_error *err = NULL;
  struct session_handle h;
  _cleanup_free_ unsigned char *stdin_data = NULL;
  size_t stdin_len = 0;
  int code = EXIT_CORDON;
  if (load_stdin(stdin_file, &stdin_data, &stdin_len, &err) < 0 || handle_open(id, &h, &err) < 0) {
    cli_fail(err);
    strv_free(env);
    return EXIT_CORDON;
  }
  struct cordon_exec_request req = {
      .argv = (const char *const *)(argv + optind),
      .cwd = cwd,
      .env = (const char *const *)env,
      .clear_env = clear_env,
      .timeout = timeout,
      .stdin_data = stdin_data ? stdin_data : (stdin_file ? (const void *)"" : NULL),
      .stdin_length = stdin_len,
  };
  struct cordon_exec_result res;
  if (cordon_session_exec(h.s, &req, &res, &err) < 0) {
    cli_fail(err);
  } else {
    code = emit_result(&res, json, timeout ? timeout : h.s->default_timeout);
    cordon_exec_result_clear(&res);
  }
  handle_close(&h);
  strv_free(env);
  return code;
}

/* Parse "[--json] [--mode M] ID [PATH]" style arguments of the small verbs. */
struct small_args {
  bool json;
  const char *mode;
  uint64_t max_snapshot_bytes; /* session snapshot only; 0: the default */
  const char *positional[3];
  int n;
};

static int parse_small(const char *verb, int argc, char **argv, bool allow_mode,
                       struct small_args *a) {
  static const struct option opts[] = {
      {"json", no_argument, NULL, OPT_JSON},
      {"mode", required_argument, NULL, OPT_MODE},
      {"max-snapshot-bytes", required_argument, NULL, OPT_MAX_SNAPSHOT_BYTES},
      {"help", no_argument, NULL, OPT_HELP},
      {0}};
  memset(a, 0, sizeof(*a));
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    if (c == OPT_JSON)
      a->json = true;
    else if (c == OPT_MODE && allow_mode)
      a->mode = optarg;
    else if (c == OPT_MAX_SNAPSHOT_BYTES && !strcmp(verb, "session snapshot")) {
      if (cli_parse_size_limit(optarg, &a->max_snapshot_bytes) < 0)
        return cli_usage_error(verb, "--max-snapshot-bytes expects a size such as 8G, got '%s'",
                               optarg);
    } else if (c == 'h' || c == OPT_HELP) {
      fputs(session_usage, stdout);
      return -1;
    } else
      return cli_usage_error(verb, "unknown option or missing value '%s'", argv[optind - 1]);
  }
  for (; optind < argc; optind++) {
    if (a->n == 3)
      return cli_usage_error(verb, "too many arguments");
    a->positional[a->n++] = argv[optind];
  }
  return 0;
}

static int session_read(int argc, char **argv) {
  struct small_args a;
  int r = parse_small("session read", argc, argv, false, &a);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (a.n != 2)
    return cli_usage_error("session read", "expected ID PATH");
  struct cordon_error *err = NULL;
  struct session_handle h;
  if (handle_open(a.positional[0], &h, &err) < 0)
    return cli_fail(err);
  unsigned char *data = NULL;
  size_t len = 0;
  int code = EXIT_OK;
  if (cordon_session_read(h.s, a.positional[1], &data, &len, &err) < 0)
    code = cli_fail(err);
  else
    fs_write_all(STDOUT_FILENO, data, len);
  free(data);
  handle_close(&h);
  return code;
}

static int session_write(int argc, char **argv) {
  struct small_args a;
  int r = parse_small("session write", argc, argv, true, &a);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (a.n != 2)
    return cli_usage_error("session write", "expected ID PATH");
  unsigned mode = 0644;
  if (a.mode) {
    char *end = NULL;
    unsigned long v = strtoul(a.mode, &end, 8);
    if (!*a.mode || *end || v > 07777)
      return cli_usage_error("session write", "--mode expects octal bits such as 0644, got '%s'",
                             a.mode);
    mode = (unsigned)v;
  }
  struct cordon_error *err = NULL;
  _cleanup_free_ unsigned char *data = NULL;
  size_t len = 0;
  if (fs_read_fd(STDIN_FILENO, STDIN_MAX, &data, &len, &err) < 0) {
    cordon_error_prefix(&err, "standard input");
    return cli_fail(err);
  }
  struct session_handle h;
  if (handle_open(a.positional[0], &h, &err) < 0)
    return cli_fail(err);
  int code = EXIT_OK;
  if (cordon_session_write(h.s, a.positional[1], data, len, mode, &err) < 0)
    code = cli_fail(err);
  handle_close(&h);
  return code;
}

static int session_ls(int argc, char **argv) {
  struct small_args a;
  int r = parse_small("session ls", argc, argv, false, &a);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (a.n < 1 || a.n > 2)
    return cli_usage_error("session ls", "expected ID [PATH]");
  struct cordon_error *err = NULL;
  struct session_handle h;
  if (handle_open(a.positional[0], &h, &err) < 0)
    return cli_fail(err);
  struct cordon_dirent *e = NULL;
  size_t n = 0;
  int code = EXIT_OK;
  if (cordon_session_ls(h.s, a.n == 2 ? a.positional[1] : "", &e, &n, &err) < 0) {
    code = cli_fail(err);
  } else if (a.json) {
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++)
      /* A name that is not UTF-8 cannot be a JSON string: it is given as null. */
      json_array_append_new(
          list, json_pack("{s:o, s:s, s:i, s:I}", "name",
                          bytes_json((const unsigned char *)e[i].name, strlen(e[i].name)), "kind",
                          cordon_file_kind_name(e[i].kind), "mode", (int)e[i].mode, "size",
                          (json_int_t)e[i].size));
    json_dumpf(list, stdout, JSON_INDENT(2));
    putchar('\n');
    json_decref(list);
  } else {
    for (size_t i = 0; i < n; i++)
      printf("%s%s\n", e[i].name, e[i].kind == CORDON_KIND_DIRECTORY ? "/" : "");
  }
  cordon_dirents_free(e, n);
  handle_close(&h);
  return code;
}

static int session_list(int argc, char **argv) {
  struct small_args a;
  int r = parse_small("session list", argc, argv, false, &a);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (a.n != 0)
    return cli_usage_error("session list", "unexpected argument '%s'", a.positional[0]);
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  char **ids = NULL;
  if (cordon_context_open(NULL, &ctx, &err) < 0 || cordon_session_list(ctx, &ids, &err) < 0) {
    cordon_context_free(ctx);
    return cli_fail(err);
  }
  json_t *list = json_array();
  for (size_t i = 0; ids[i]; i++) {
    if (a.json)
      json_array_append_new(list, json_string(ids[i]));
    else
      printf("%s\n", ids[i]);
  }
  if (a.json) {
    json_dumpf(list, stdout, JSON_INDENT(2));
    putchar('\n');
  }
  json_decref(list);
  cordon_strv_free(ids);
  cordon_context_free(ctx);
  return EXIT_OK;
}

static int session_shutdown(int argc, char **argv) {
  struct small_args a;
  int r = parse_small("session shutdown", argc, argv, false, &a);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (a.n != 1)
    return cli_usage_error("session shutdown", "expected ID");
  struct cordon_error *err = NULL;
  struct session_handle h;
  if (handle_open(a.positional[0], &h, &err) < 0)
    return cli_fail(err);
  int code = cordon_session_shutdown(h.s, &err) < 0 ? cli_fail(err) : EXIT_OK;
  handle_close(&h);
  return code;
}

static int session_snapshot(int argc, char **argv) {
  struct small_args a;
  int r = parse_small("session snapshot", argc, argv, false, &a);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (a.n != 1)
    return cli_usage_error("session snapshot", "expected ID");
  struct cordon_error *err = NULL;
  struct session_handle h;
  if (handle_open(a.positional[0], &h, &err) < 0)
    return cli_fail(err);
  char *id = NULL;
  int code = EXIT_OK;
  h.s->max_snapshot_bytes = a.max_snapshot_bytes;
  if (cordon_session_snapshot(h.s, &id, &err) < 0) {
    code = cli_fail(err);
  } else if (a.json) {
    json_t *j = json_pack("{s:s, s:s}", "session", a.positional[0], "snapshot", id);
    json_dumpf(j, stdout, JSON_INDENT(2));
    putchar('\n');
    json_decref(j);
  } else {
    printf("%s\n", id);
  }
  free(id);
  handle_close(&h);
  return code;
}

static int session_destroy(int argc, char **argv) {
  static const struct option opts[] = {{"help", no_argument, NULL, OPT_HELP}, {0}};
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    if (c == 'h' || c == OPT_HELP) {
      fputs(session_usage, stdout);
      return EXIT_OK;
    }
    return cli_usage_error("session destroy", "unknown option '%s'", argv[optind - 1]);
  }
  if (optind >= argc)
    return cli_usage_error("session destroy", "expected at least one session ID");
  struct cordon_error *err = NULL;
  struct cordon_registry *reg = NULL;
  struct cordon_context *ctx = NULL;
  if (cordon_registry_load(&reg, &err) < 0 || cordon_context_open(NULL, &ctx, &err) < 0) {
    cordon_registry_free(reg);
    return cli_fail(err);
  }
  int code = EXIT_OK;
  for (; optind < argc; optind++) {
    if (cordon_session_destroy_id(ctx, reg, argv[optind], &err) < 0) {
      code = cli_fail(err);
      err = NULL;
    }
  }
  cordon_context_free(ctx);
  cordon_registry_free(reg);
  return code;
}

int cmd_session(int argc, char **argv) {
  static const struct cli_subverb subs[] = {
      {"create", session_create},     {"exec", session_exec},       {"read", session_read},
      {"write", session_write},       {"ls", session_ls},           {"list", session_list},
      {"shutdown", session_shutdown}, {"destroy", session_destroy}, {"snapshot", session_snapshot}};
  return CLI_DISPATCH("session", session_usage, subs, argc, argv);
}
