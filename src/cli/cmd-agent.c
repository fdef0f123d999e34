/* `cordon agent [options] -- ARGV...`: run an agent CLI confined at the project's own path. This
 * file owns the verb's flags, choosing the mechanism (failing closed), the audit entries of a
 * start, and printing a mechanism's generated form (--print); the policy is built by
 * src/agent/policy.c and enforced by the mechanisms in src/agent/. It also wires in the host
 * isolation tier (src/agent/tier.c: resolved, then recorded before the agent starts) and the
 * agent CLI's adapter (src/agent/adapter.c: its variables, state directories and flags). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "agent/adapter.h"
#include "agent/gate.h"
#include "agent/mechanism.h"
#include "agent/policy.h"
#include "agent/tier.h"
#include "base/cleanup.h"
#include "base/strv.h"
#include "cli/cli.h"

extern char **environ;

static const char agent_usage[] =
    "usage: cordon agent [options] -- ARGV...\n"
    "\n"
    "Run ARGV (an agent CLI: claude, codex, aider, ...) confined, with the project at its own\n"
    "host path: the working directory and every path mean the same inside and out. The agent\n"
    "may edit the project; it never sees .cordon/ (but .cordon/agent-visible/, read-only),\n"
    "cannot write --ro paths or read --hide paths, sees only the system directories and the\n"
    "grants of the host, a private size-capped /tmp (TMPDIR, TMP, TEMP point at it), and only\n"
    "PATH, HOME, USER, LANG, LC_*, TERM, TZ, CORDON_SANDBOX* and --env-allow names of the\n"
    "environment. Enforcement is required: when the mechanism is off or unavailable, cordon\n"
    "exits 4 and never runs the agent. Exit: the agent's own code (128+N killed by signal N),\n"
    "2 usage, 3 not found, 4 no confinement, 125 cordon failed.\n"
    "\n"
    "options:\n"
    "  --project DIR         the project (default: the current directory's, as other verbs)\n"
    "  --ro PATH             project path the agent may read but not write (repeatable)\n"
    "                        (beneath a --hide directory: that part shown read-only)\n"
    "  --hide PATH           project path the agent cannot read (repeatable; must exist)\n"
    "  --policy FILE         a policy file (YAML): read_only, hidden, allow_ro, allow_rw\n"
    "                        (lists), env_allow (names), net, allow_domains, allow_cidrs,\n"
    "                        resolve (lists); joins the flags\n"
    "  --allow-ro HOSTPATH   host path outside the project granted read-only (repeatable;\n"
    "                        also CORDON_SANDBOX_ALLOW=a:b)\n"
    "  --env-allow NAME      pass the caller's variable NAME through (repeatable)\n"
    "  --mechanism M         auto (default; also CORDON_SANDBOX): ns, else bwrap when\n"
    "                        installed; ns, bwrap, landlock, gvisor, or off (0, false, no)\n"
    "  --no-require-enforcement\n"
    "                        allow --mechanism off: the agent runs UNCONFINED, said loudly on\n"
    "                        stderr and recorded in the project's audit log\n"
    "  --net CLASS           none, loopback (default: a private lo only), restricted\n"
    "                        (mechanism ns: lo, and a proxy outside the sandbox that lets\n"
    "                        through the --allow-domain names) or open\n"
    "  --allow-domain NAME --allow-cidr CIDR --resolve NAME:ADDR\n"
    "                        with --net restricted, as for `cordon run` (repeatable; the\n"
    "                        policy file's allow_domains, allow_cidrs, resolve join them)\n"
    "  --tmp-size SIZE       size of the private /tmp (K, M, G; default 1G)\n"
    "  --print bwrap|seatbelt\n"
    "                        print the generated bubblewrap argv (one shell-quoted line) or\n"
    "                        macOS profile and run nothing\n"
    "  --host-isolation TIER none, process, container or vm: the isolation the host already\n"
    "                        applies around cordon, recorded in the audit log (default: the\n"
    "                        first of CORDON_HOST_ISOLATION, .cordon/config.yaml,\n"
    "                        $XDG_CONFIG_HOME/cordon/config.yaml, /etc/cordon/config.yaml\n"
    "                        that declares host_isolation; else none)\n"
    "  --host-isolation-evidence TEXT\n"
    "                        why the host tier holds (e.g. \"one VM per run\"), recorded with\n"
    "                        it (also CORDON_HOST_ISOLATION_EVIDENCE, config evidence:)\n"
    "  --adapter NAME        the agent CLI: aider, claude, codex, gemini or generic (default):\n"
    "                        passes its auth variables, grants its state directories under\n"
    "                        HOME read-write, and turns its own sandbox and approvals off only\n"
    "                        when cordon's confinement or the host tier is container or vm\n"
    "  --protect PATH        the accuracy gate: record PATH (project-relative, repeatable)\n"
    "                        before the agent runs; if it changed, was added or removed when\n"
    "                        the agent ends, list each change, audit agent.gate_failed, exit 1\n";

enum {
  AGENT_OPT_PROJECT = 256,
  AGENT_OPT_RO,
  AGENT_OPT_HIDE,
  AGENT_OPT_POLICY,
  AGENT_OPT_ALLOW_RO,
  AGENT_OPT_ENV_ALLOW,
  AGENT_OPT_MECHANISM,
  AGENT_OPT_NO_REQUIRE,
  AGENT_OPT_PRINT,
  AGENT_OPT_NET,
  AGENT_OPT_TMP_SIZE,
  AGENT_OPT_HOST_ISOLATION,
  AGENT_OPT_HOST_EVIDENCE,
  AGENT_OPT_ADAPTER,
  AGENT_OPT_PROTECT,
  AGENT_OPT_ALLOW_DOMAIN,
  AGENT_OPT_ALLOW_CIDR,
  AGENT_OPT_RESOLVE,
};

struct agent_opts {
  const char *project, *policy_file, *mechanism, *print, *net;
  char **read_only, **hidden, **allow_ro, **env_allow;
  bool no_require;
  uint64_t tmp_bytes;
  const char *host_isolation, *host_evidence, *adapter;
  char **protect;
  char **allow_domains, **allow_cidrs, **resolve; /* net restricted */
};

static void agent_opts_free(struct agent_opts *o) {
  strv_free(o->read_only);
  strv_free(o->hidden);
  strv_free(o->allow_ro);
  strv_free(o->env_allow);
  strv_free(o->protect);
  strv_free(o->allow_domains);
  strv_free(o->allow_cidrs);
  strv_free(o->resolve);
}

/* 0 parsed, -1 --help printed, else an exit code. */
static int parse_options(int argc, char **argv, struct agent_opts *o) {
  static const struct option opts[] = {
      {"project", required_argument, NULL, AGENT_OPT_PROJECT},
      {"ro", required_argument, NULL, AGENT_OPT_RO},
      {"hide", required_argument, NULL, AGENT_OPT_HIDE},
      {"policy", required_argument, NULL, AGENT_OPT_POLICY},
      {"allow-ro", required_argument, NULL, AGENT_OPT_ALLOW_RO},
      {"env-allow", required_argument, NULL, AGENT_OPT_ENV_ALLOW},
      {"mechanism", required_argument, NULL, AGENT_OPT_MECHANISM},
      {"no-require-enforcement", no_argument, NULL, AGENT_OPT_NO_REQUIRE},
      {"print", required_argument, NULL, AGENT_OPT_PRINT},
      {"net", required_argument, NULL, AGENT_OPT_NET},
      {"tmp-size", required_argument, NULL, AGENT_OPT_TMP_SIZE},
      {"host-isolation", required_argument, NULL, AGENT_OPT_HOST_ISOLATION},
      {"host-isolation-evidence", required_argument, NULL, AGENT_OPT_HOST_EVIDENCE},
      {"adapter", required_argument, NULL, AGENT_OPT_ADAPTER},
      {"protect", required_argument, NULL, AGENT_OPT_PROTECT},
      {"allow-domain", required_argument, NULL, AGENT_OPT_ALLOW_DOMAIN},
      {"allow-cidr", required_argument, NULL, AGENT_OPT_ALLOW_CIDR},
      {"resolve", required_argument, NULL, AGENT_OPT_RESOLVE},
      {"help", no_argument, NULL, 'h'},
      {0}};
  int c;
  optind = 0;
  while ((c = cli_getopt(argc, argv, "+h", opts, NULL)) != -1) {
    char ***list = NULL;
    switch (c) {
    case 'h': fputs(agent_usage, stdout); return -1;
    case AGENT_OPT_PROJECT: o->project = optarg; break;
    case AGENT_OPT_POLICY: o->policy_file = optarg; break;
    case AGENT_OPT_MECHANISM: o->mechanism = optarg; break;
    case AGENT_OPT_NO_REQUIRE: o->no_require = true; break;
    case AGENT_OPT_NET: o->net = optarg; break;
    case AGENT_OPT_HOST_ISOLATION: o->host_isolation = optarg; break;
    case AGENT_OPT_HOST_EVIDENCE: o->host_evidence = optarg; break;
    case AGENT_OPT_ADAPTER: o->adapter = optarg; break;
    case AGENT_OPT_PRINT:
      if (strcmp(optarg, "bwrap") && strcmp(optarg, "seatbelt"))
        return cli_usage_error("agent", "--print takes bwrap or seatbelt, not '%s'", optarg);
      o->print = optarg;
      break;
    case AGENT_OPT_TMP_SIZE: {
      unsigned long long size = 0;
      if (cli_parse_size(optarg, &size) < 0 || size == 0)
        return cli_usage_error("agent", "--tmp-size: not a size: '%s'", optarg);
      o->tmp_bytes = size;
      break;
    }
    case AGENT_OPT_RO: list = &o->read_only; break;
    case AGENT_OPT_HIDE: list = &o->hidden; break;
    case AGENT_OPT_ALLOW_RO: list = &o->allow_ro; break;
    case AGENT_OPT_ENV_ALLOW: list = &o->env_allow; break;
    case AGENT_OPT_PROTECT: list = &o->protect; break;
    case AGENT_OPT_ALLOW_DOMAIN: list = &o->allow_domains; break;
    case AGENT_OPT_ALLOW_CIDR: list = &o->allow_cidrs; break;
    case AGENT_OPT_RESOLVE: list = &o->resolve; break;
    default: return cli_option_error("agent");
    }
    if (list && strv_push(list, optarg) < 0)
      return EXIT_CORDON;
  }
  if (optind >= argc)
    return cli_usage_error("agent", "no command given (cordon agent [options] -- ARGV...)");
  return 0;
}

/* One word as a POSIX shell reads it back: bare when it holds only safe characters, else in
 * single quotes. */
static void print_shell_word(const char *w, FILE *out) {
  bool bare = *w != 0;
  for (const char *p = w; *p && bare; p++)
    bare = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:,+-@%", *p);
  if (bare) {
    fputs(w, out);
    return;
  }
  fputc('\'', out);
  for (const char *p = w; *p; p++)
    fputs(*p == '\'' ? "'\\''" : (char[]){*p, 0}, out);
  fputc('\'', out);
}

static int print_form(const char *what, const struct agent_launch *launch) {
  struct cordon_error *err = NULL;
  if (!strcmp(what, "seatbelt")) {
    _cleanup_free_ char *profile = NULL;
    if (agent_seatbelt_profile(launch->policy, &profile, &err) < 0)
      return cli_fail(err);
    fputs(profile, stdout);
    return EXIT_OK;
  }
  _cleanup_(strv_freep) char **argv = NULL;
  if (agent_bwrap_argv(launch, &argv, &err) < 0)
    return cli_fail(err);
  for (size_t i = 0; argv[i]; i++) {
    if (i)
      putchar(' ');
    print_shell_word(argv[i], stdout);
  }
  putchar('\n');
  return EXIT_OK;
}

/* What the host's declared tier and the agent CLI's adapter bring to one run. */
struct agent_extras {
  struct agent_host_tier host;
  struct agent_adapter *adapter;
  char **state_dirs; /* the adapter's, canonical: granted read-write */
};

static void agent_extras_clear(struct agent_extras *x) {
  agent_host_tier_clear(&x->host);
  agent_adapter_free(x->adapter);
  strv_free(x->state_dirs);
}

/* Before the policy is built: a bad tier or adapter refuses the run (exit 2) before anything
 * starts, and the adapter's state directories must exist to be granted. */
static int prepare_extras(const struct agent_opts *o, const char *project, struct agent_extras *x,
                          struct cordon_error **err) {
  if (agent_tier_resolve_env(project, o->host_isolation, o->host_evidence, &x->host, err) < 0 ||
      agent_adapter_load(o->adapter ? o->adapter : "generic", &x->adapter, err) < 0)
    return -1;
  /* Only an adapter with state directories needs HOME (generic runs without one). */
  if (strv_length((const char *const *)x->adapter->state_dirs) == 0)
    return 0;
  return agent_adapter_prepare_state_dirs(x->adapter, getenv("HOME"), &x->state_dirs, err);
}

/* The argv that runs: the adapter's flags go in only when the mechanism that runs (kind, auto
 * resolved) or the host's declared tier is container or vm. *dropped says whether they did. */
static int adapter_argv(const struct agent_extras *x, enum agent_mechanism_kind kind,
                        const char *const *argv, char ***out, bool *dropped,
                        struct cordon_error **err) {
  *dropped = agent_adapter_drops_sandbox(x->adapter, agent_mechanism_tier(kind), x->host.tier);
  return agent_adapter_argv(x->adapter, argv, *dropped, out, err);
}

/* The host tier's audit entry, before the agent starts: no record, no agent. */
static int record_declaration(const struct agent_opts *o, const struct agent_extras *x,
                              const struct agent_policy *p, bool dropped,
                              struct cordon_error **err) {
  struct cordon_context *ctx = NULL;
  int r = cordon_context_open(p->project, &ctx, err);
  if (r == 0)
    r = agent_tier_record(ctx, &x->host, dropped, o->adapter, err);
  cordon_context_free(ctx);
  return r;
}

static json_t *json_list(char *const *v) {
  json_t *a = json_array();
  for (size_t i = 0; v && v[i]; i++)
    json_array_append_new(a, json_string(v[i]));
  return a;
}

/* The audit entry of a start: what the agent could touch, under which mechanism, and what that
 * mechanism does not enforce. No entry, no agent. */
static int audit_start(const char *event, const char *mechanism, const struct agent_policy *p,
                       char *const *argv, char *const *unenforced, struct cordon_error **err) {
  json_t *d =
      json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:s?, s:o, s:s}", "mechanism",
                mechanism, "project", p->project, "net", p->net, "read_only",
                json_list(p->read_only), "hidden_dirs", json_list(p->hidden_dirs), "hidden_files",
                json_list(p->hidden_files), "allow_ro", json_list(p->allow_ro), "allow_rw",
                json_list(p->allow_rw), "unenforced", json_list(unenforced), "agent_visible",
                p->agent_visible, "env_names", json_array(), "argv0", argv[0]);
  if (!d)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "audit entry");
  json_t *names = json_object_get(d, "env_names");
  for (size_t i = 0; p->env && p->env[i]; i++)
    json_array_append_new(names, json_stringn(p->env[i], strcspn(p->env[i], "=")));
  _cleanup_free_ char *details = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(d);
  char actor[32];
  snprintf(actor, sizeof(actor), "uid:%u", (unsigned)geteuid());
  struct cordon_audit_event ev = {event, actor, "agent", p->project, details};
  struct cordon_context *ctx = NULL;
  struct cordon_audit_log *log = NULL;
  int r = cordon_context_open(p->project, &ctx, err);
  if (r == 0)
    r = cordon_audit_open_project(ctx, NULL, &log, err);
  if (r == 0)
    r = cordon_audit_append(log, &ev, NULL, err);
  cordon_audit_close(log);
  cordon_context_free(ctx);
  return r;
}

/* --mechanism off with --no-require-enforcement: the agent runs on the host as it is, with the
 * filtered environment only. */
static int run_unconfined(const struct agent_launch *launch, int *exit_code,
                          struct cordon_error **err) {
  pid_t pid = fork();
  if (pid < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "fork");
  if (pid == 0) {
    if (chdir(launch->policy->cwd) < 0)
      _exit(125);
    environ = launch->policy->env;
    execvp(launch->argv[0], (char *const *)launch->argv);
    _exit(errno == ENOENT ? 127 : 126);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "waitpid");
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return 0;
}

/* --protect: the accuracy gate around the agent's run. The baseline is taken before the agent
 * starts and kept in memory (and its directories' snapshots in the project's store, out of the
 * agent's reach); after the agent ends, every change is listed and audited, and the run fails. */
static int gate_open(const struct agent_policy *p, struct cordon_context **ctx,
                     struct cordon_cas **cas, struct cordon_error **err) {
  if (cordon_context_open(p->project, ctx, err) < 0)
    return -1;
  return cordon_cas_open_project(*ctx, cas, err);
}

static int gate_before(const struct agent_policy *p, char *const *paths,
                       struct agent_gate_baseline **before, struct cordon_error **err) {
  struct cordon_context *ctx = NULL;
  struct cordon_cas *cas = NULL;
  int r = gate_open(p, &ctx, &cas, err);
  if (r == 0)
    r = agent_gate_record(cas, p->project, (const char *const *)paths, before, err);
  cordon_cas_close(cas);
  cordon_context_free(ctx);
  return r;
}

/* The agent's exit code when nothing protected changed, else 1 (or EXIT_CORDON when the
 * check itself failed). */
static int gate_after(const struct agent_policy *p, const struct agent_gate_baseline *before,
                      int agent_code) {
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_cas *cas = NULL;
  struct agent_gate_report *report = NULL;
  int code = agent_code;
  if (gate_open(p, &ctx, &cas, &err) < 0 ||
      agent_gate_compare(cas, p->project, before, &report, &err) < 0) {
    cli_fail(err);
    code = EXIT_CORDON;
  } else if (report->count) {
    for (size_t i = 0; i < report->count; i++)
      fprintf(stderr, "%s: %s\n", agent_gate_change_kind_name(report->changes[i].kind),
              report->changes[i].path);
    cli_error("the agent changed %zu protected path%s (--protect): gate failed", report->count,
              report->count == 1 ? "" : "s");
    code = EXIT_FAILURE_;
    if (agent_gate_audit(ctx, "agent.gate_failed", report, &err) < 0) {
      cli_fail(err);
      code = EXIT_CORDON;
    }
  }
  agent_gate_report_free(report);
  cordon_cas_close(cas);
  cordon_context_free(ctx);
  return code;
}

/* Fail closed first (off without --no-require-enforcement, or no mechanism: exit 4), then the
 * adapter's argv for the mechanism that runs and the host tier's record, then the start's own
 * entry and the agent. */
static int launch_agent(const struct agent_opts *o, enum agent_mechanism_kind kind,
                        struct agent_launch *launch, const struct agent_extras *x) {
  struct cordon_error *err = NULL;
  const struct agent_policy *p = launch->policy;
  int code = EXIT_CORDON;
  const struct agent_mechanism *mech = NULL;
  if (kind == AGENT_MECHANISM_OFF && !o->no_require) {
    cli_error("agent mechanism off would run the agent unconfined, but enforcement is "
              "required (pass --no-require-enforcement to allow it); the agent was not run");
    return EXIT_UNAVAILABLE;
  }
  if (kind != AGENT_MECHANISM_OFF && agent_mechanism_choose(&kind, p, &mech, &err) < 0) {
    cli_fail(err);
    cli_error("the agent was not run: no confinement");
    return EXIT_UNAVAILABLE;
  }
  _cleanup_(strv_freep) char **argv = NULL;
  bool dropped = false;
  if (adapter_argv(x, kind, launch->argv, &argv, &dropped, &err) < 0 ||
      record_declaration(o, x, p, dropped, &err) < 0)
    return cli_fail(err) == EXIT_UNAVAILABLE ? EXIT_UNAVAILABLE : EXIT_CORDON;
  launch->argv = (const char *const *)argv;
  _cleanup_(strv_freep) char **unenforced = NULL;
  if (kind != AGENT_MECHANISM_OFF && mech->unenforced && mech->unenforced(p, &unenforced, &err) < 0)
    return cli_fail(err) == EXIT_UNAVAILABLE ? EXIT_UNAVAILABLE : EXIT_CORDON;
  struct agent_gate_baseline *before = NULL;
  if (o->protect && gate_before(p, o->protect, &before, &err) < 0)
    return cli_fail(err);
  int r;
  if (kind == AGENT_MECHANISM_OFF) {
    cli_error("WARNING: agent mechanism off: running the agent UNCONFINED on the host "
              "(--no-require-enforcement); recorded in the audit log");
    r = audit_start("agent.unconfined", "off", p, argv, NULL, &err);
    if (r == 0)
      r = run_unconfined(launch, &code, &err);
  } else {
    for (size_t i = 0; unenforced && unenforced[i]; i++)
      cli_error("WARNING: %s", unenforced[i]);
    r = audit_start("agent.start", mech->name, p, argv, unenforced, &err);
    if (r == 0)
      r = mech->run(launch, &code, &err);
  }
  if (r < 0)
    code = cli_fail(err) == EXIT_UNAVAILABLE ? EXIT_UNAVAILABLE : EXIT_CORDON;
  else if (before)
    code = gate_after(p, before, code);
  agent_gate_baseline_free(before);
  return code;
}

/* --print: the form the named mechanism would run, the adapter's flags as it would add them;
 * nothing is recorded, nothing runs. */
static int print_adapted(const char *what, struct agent_launch *launch,
                         const struct agent_extras *x) {
  struct cordon_error *err = NULL;
  _cleanup_(strv_freep) char **argv = NULL;
  bool dropped = false;
  enum agent_mechanism_kind kind =
      strcmp(what, "seatbelt") ? AGENT_MECHANISM_BWRAP : AGENT_MECHANISM_SEATBELT;
  if (adapter_argv(x, kind, launch->argv, &argv, &dropped, &err) < 0)
    return cli_fail(err);
  launch->argv = (const char *const *)argv;
  return print_form(what, launch);
}

int cmd_agent(int argc, char **argv) {
  struct agent_opts o = {0};
  int code = parse_options(argc, argv, &o);
  if (code != 0) {
    agent_opts_free(&o);
    return code < 0 ? EXIT_OK : code;
  }
  const char *mechanism = o.mechanism ? o.mechanism : getenv("CORDON_SANDBOX");
  enum agent_mechanism_kind kind = AGENT_MECHANISM_AUTO;
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct agent_policy *policy = NULL;
  struct agent_extras extras = {0};
  _cleanup_free_ char *cwd = getcwd(NULL, 0);
  if (mechanism && *mechanism && agent_mechanism_parse(mechanism, &kind, &err) < 0) {
    code = cli_fail(err);
    goto out;
  }
  if (!o.project && cordon_context_open(NULL, &ctx, &err) < 0) {
    code = cli_fail(err);
    goto out;
  }
  const char *project = o.project ? o.project : cordon_context_project_dir(ctx);
  if (prepare_extras(&o, project, &extras, &err) < 0) {
    code = cli_fail(err);
    goto out;
  }
  struct agent_policy_input in = {
      .project = project,
      .cwd = cwd,
      .read_only = (const char *const *)o.read_only,
      .hidden = (const char *const *)o.hidden,
      .allow_ro = (const char *const *)o.allow_ro,
      .sandbox_allow = getenv("CORDON_SANDBOX_ALLOW"),
      .env_allow = (const char *const *)o.env_allow,
      .extra_env = (const char *const *)extras.adapter->env,
      .policy_file = o.policy_file,
      .net = o.net,
      .tmp_bytes = o.tmp_bytes,
      .environ = (const char *const *)environ,
      .extra_allow_rw = (const char *const *)extras.state_dirs,
      .allow_domains = (const char *const *)o.allow_domains,
      .allow_cidrs = (const char *const *)o.allow_cidrs,
      .resolve = (const char *const *)o.resolve,
  };
  if (agent_policy_build(&in, &policy, &err) < 0) {
    code = cli_fail(err);
    goto out;
  }
  struct agent_launch launch = {
      .policy = policy,
      .argv = (const char *const *)(argv + optind),
      .tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO),
  };
  code =
      o.print ? print_adapted(o.print, &launch, &extras) : launch_agent(&o, kind, &launch, &extras);
out:
  agent_policy_free(policy);
  agent_extras_clear(&extras);
  cordon_context_free(ctx);
  agent_opts_free(&o);
  return code;
}
