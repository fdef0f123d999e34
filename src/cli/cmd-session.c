/* `cordon session ...`: create (one session, or a batch forked from a snapshot), exec, read,
 * write, files (alias ls), list, shutdown, snapshot and destroy. The manifest options of `create`
 * are in cmd-manifest.c. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "base/strv.h"
#include "cli/cli.h"
#include "cli/cmd-manifest.h"
#include "cli/cmd-pool-dispatch.h"
#include "cli/cmd-pool.h"
#include "cli/stream.h"
#include "protocol/session-json.h"

static const char session_usage[] =
    "usage: cordon session SUBVERB [options]\n"
    "\n"
    "  create [options]                 create a session, print its id\n"
    "  create --from SNAPSHOT [options] resume: a new session whose workspace is the snapshot\n"
    "  create --from SNAPSHOT --count K fork K sessions at once, print their ids\n"
    "  exec ID [--cwd D] [--env K=V]... [--timeout S] [--stdin FILE] [--clear-env] [--json]\n"
    "       [-i] [-t] -- ARGV...        run ARGV in the session (exit code as `cordon "
    "run`)\n" STREAM_HELP "  read ID PATH                     write the file's bytes to stdout\n"
    "  write ID PATH [--mode MODE]      replace PATH with stdin (atomically)\n"
    "  files ID [PATH] [--json]         list a directory of the session's files, sorted\n"
    "                                   (alias: ls)\n"
    "  list [-l] [--json]               list this project's sessions, an id a line; -l (--long):\n"
    "                                   a table of backend, state (active, shut down),\n"
    "                                   creation time, workspace; --json: each as\n"
    "                                   `session create --json` gives it\n"
    "  inspect ID [--json]              what the session is and may touch: backend, state,\n"
    "                                   workspace, net, read-only, hidden and host paths,\n"
    "                                   devices, limits, user, waivers (as recorded at create)\n"
    "  shutdown ID                      stop the session's processes, keep its files\n"
    "  snapshot ID [--max-snapshot-bytes SIZE] [--json]\n"
    "                                   snapshot the session's workspace, print the snapshot id;\n"
    "                                   refused (exit 4) when its files hold more than SIZE\n"
    "                                   (default 8G; 0 or unlimited: no limit)\n"
    "  destroy ID...                    destroy sessions (an unknown id: exit 3)\n"
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
    "  --pool NAME           place into the named pool first (`cordon pool`): the session's\n"
    "                        shape comes from the pool's template and the recipe's\n"
    "                        overrides, never from the options above (but --attestation\n"
    "                        and --expected-keyid, which its selector reads, and\n"
    "                        --workspace DIR: the pool's read_only and hidden paths name\n"
    "                        paths in DIR); a refused recipe exits 4 (receipt chained, no\n"
    "                        session created)\n"
    "  --recipe FILE         with --pool: {\"pool\": NAME, \"overrides\": {...}}\n"
    "  --wait SECONDS        with --pool: wait up to SECONDS for one of the pool's\n"
    "                        max_concurrency slots (default: refused at once, exit 4); the\n"
    "                        slot stays with the session until `session destroy`\n"
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

/* id may be a unique prefix (cordon_session_resolve_id); an unknown one is NOT_FOUND. */
static int handle_open(const char *id, struct session_handle *h, struct cordon_error **err) {
  memset(h, 0, sizeof(*h));
  _cleanup_free_ char *full = NULL;
  if (cordon_registry_load(&h->reg, err) < 0 || cordon_context_open(NULL, &h->ctx, err) < 0 ||
      cordon_session_resolve_id(h->ctx, id, &full, err) < 0 ||
      cordon_session_open(h->ctx, h->reg, full, &h->s, err) < 0) {
    handle_close(h);
    return -1;
  }
  return 0;
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

/* Options of `session create` alone, numbered above cmd-manifest.h's. */
enum { OPT_POOL = 1000, OPT_RECIPE, OPT_WAIT_SLOT };

/* `session create --pool`: place, then create from the effective manifest. */
static int create_pooled(const char *pool, const char *recipe, double wait, bool json,
                         const char *attestation, const char *expected_kid, const char *workspace) {
  struct cordon_error *err = NULL;
  struct cli_attestation att = {0};
  struct cordon_registry *reg = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_session *s = NULL;
  struct pool_dispatch_placed d = {0};
  struct pool_lease lease = {0};
  int code;
  if ((attestation && cli_attestation_load(attestation, expected_kid, &att, &err) < 0) ||
      cordon_registry_load(&reg, &err) < 0 || cordon_context_open(NULL, &ctx, &err) < 0) {
    code = cli_fail(err);
  } else if ((code = pool_dispatch_place("session create", ctx, reg, pool, recipe, NULL,
                                         attestation ? &att : NULL, json, &d)) != EXIT_OK ||
             (code = pool_lease_begin("session create", ctx, reg, &d, wait, false, json, &lease)) !=
                 EXIT_OK) {
    /* reported; a refusal or a held ceiling (4) created nothing */
  } else if ((d.inputs.manifest.workspace = workspace,
              cordon_session_create(ctx, d.backend, &d.inputs.manifest, &s, &err) < 0)) {
    pool_dispatch_workspace_hint(&d, err);
    code = cli_fail(err);
  } else if (pool_lease_bind(&lease, s->id, &err) < 0) {
    /* The slot must outlive us with the session, or the ceiling would not hold. */
    code = cli_fail(err);
    cordon_session_destroy(s, NULL);
  } else {
    if (json) {
      json_t *j = session_json(s);
      json_object_set_new(j, "pool", json_string(pool));
      json_dumpf(j, stdout, JSON_INDENT(2));
      putchar('\n');
      json_decref(j);
    } else {
      printf("%s\n", s->id);
    }
    cordon_session_close(s);
  }
  pool_lease_end(&lease);
  pool_dispatch_placed_clear(&d);
  cli_attestation_clear(&att);
  cordon_context_free(ctx);
  cordon_registry_free(reg);
  return code;
}

static int session_create(int argc, char **argv) {
  static const struct option opts[] = {MANIFEST_OPTIONS,
                                       {"from", required_argument, NULL, OPT_FROM},
                                       {"count", required_argument, NULL, OPT_COUNT},
                                       {"pool", required_argument, NULL, OPT_POOL},
                                       {"recipe", required_argument, NULL, OPT_RECIPE},
                                       {"wait", required_argument, NULL, OPT_WAIT_SLOT},
                                       {0}};
  const char *pool = NULL, *recipe = NULL;
  double wait = -1;
  bool manifest_given = false; /* an option that shapes the manifest (not --json, --quiet) */
  struct manifest_opts o = {0};
  const char *from = NULL;
  unsigned long long count = 0; /* 0: no --count, one session */
  int c;
  optind = 0;
  while ((c = cli_getopt(argc, argv, "hv:", opts, NULL)) != -1) {
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
    if (c == OPT_POOL || c == OPT_RECIPE) {
      *(c == OPT_POOL ? &pool : &recipe) = optarg;
      continue;
    }
    if (c == OPT_WAIT_SLOT) {
      if (cli_parse_double(optarg, 0, &wait) < 0) {
        manifest_opts_free(&o);
        return cli_usage_error("session create", "--wait wants seconds, not '%s'", optarg);
      }
      continue;
    }
    /* --attestation and --expected-keyid shape no manifest: with --pool they feed its selector. */
    /* --workspace names the caller's directory, not the session's shape: with --pool, the
     * pool's read_only and hidden paths apply to it. */
    if (c != OPT_JSON && c != OPT_QUIET && c != '?' && c != CLI_OPT_ATTESTATION &&
        c != CLI_OPT_EXPECTED_KEYID && c != OPT_WORKSPACE)
      manifest_given = true;
    int r = c == '?' ? cli_option_error("session create")
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

  if (count && !from) {
    manifest_opts_free(&o);
    return cli_usage_error("session create", "--count needs --from SNAPSHOT");
  }
  if ((recipe || wait >= 0) && !pool) {
    manifest_opts_free(&o);
    return cli_usage_error("session create", "%s needs --pool NAME",
                           recipe ? "--recipe" : "--wait");
  }
  if (pool) {
    bool json = o.json;
    const char *attestation = o.select.attestation, *expected_kid = o.select.expected_kid;
    const char *workspace = o.workspace; /* argv's, not o's */
    manifest_opts_free(&o);
    if (expected_kid && !attestation)
      return cli_usage_error("session create", "--expected-keyid needs --attestation FILE");
    if (manifest_given || from)
      return cli_usage_error("session create",
                             "with --pool, the session's shape comes from the pool and its "
                             "recipe, not from manifest options or --from");
    return create_pooled(pool, recipe, wait < 0 ? 0 : wait, json, attestation, expected_kid,
                         workspace);
  }
  struct cordon_manifest m;
  struct cordon_repo_spec repo = {0};
  int code = cli_build_manifest(&o, &m, &repo);
  if (code != 0) {
    manifest_opts_free(&o);
    return code;
  }
  struct cordon_error *err = NULL;
  struct cordon_registry *reg = NULL;
  struct cordon_context *ctx = NULL;
  const struct cordon_backend *b = NULL;
  struct cordon_session *s = NULL;
  _cleanup_free_ char *from_id = NULL; /* --from's whole id: a unique prefix is enough */
  if (from && (cordon_context_open(NULL, &ctx, &err) < 0 ||
               cli_resolve_snapshot(ctx, from, &from_id, &err) < 0)) {
    cordon_context_free(ctx);
    manifest_opts_free(&o);
    return cli_fail(err);
  }
  cordon_context_free(ctx);
  ctx = NULL;
  from = from_id;
  if (count) {
    if (cordon_registry_load(&reg, &err) < 0 || select_backend(reg, &o, &m, &b, &err) < 0 ||
        apply_backend(b, &o, &m, &err) < 0 || cordon_context_open(NULL, &ctx, &err) < 0)
      code = cli_fail(err);
    else
      code = create_batch(ctx, b, &m, from, (size_t)count, o.json);
  } else if (cordon_registry_load(&reg, &err) < 0 || select_backend(reg, &o, &m, &b, &err) < 0 ||
             apply_backend(b, &o, &m, &err) < 0 || cordon_context_open(NULL, &ctx, &err) < 0 ||
             (from ? cordon_session_resume(ctx, b, &m, from, &s, &err)
                   : cordon_session_create(ctx, b, &m, &s, &err)) < 0) {
    if (!from) /* resumed, the workspace is the snapshot's */
      manifest_workspace_hint(&o, err);
    code = cli_fail(err);
  } else {
    if (o.json) {
      json_t *j = session_json(s);
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
                                       STREAM_OPTIONS,
                                       {0}};
  struct cli_stream st = {0};
  const char *cwd = NULL, *stdin_file = NULL;
  char **env = NULL;
  double timeout = 0;
  bool json = false, clear_env = false;
  int c;
  /* With `--`, the words before it are the verb's (its options and the ID, in any order) and
   * the command is what follows. Without one, as before: the ID first or after the options,
   * and the command from the next word on, its options its own. */
  int end = cli_args_end(argc, argv);
  bool dashdash = end < argc;
  const char *id = NULL;
  if (!dashdash && argc > 1 && argv[1][0] != '-') {
    id = argv[1];
    argv[1] = argv[0];
    argc--;
    argv++;
    end--;
  }
  optind = 0;
  while ((c = cli_getopt(end, argv, dashdash ? "h" STREAM_SHORT_OPTIONS : "+h" STREAM_SHORT_OPTIONS,
                         opts, NULL)) != -1) {
    switch (c) {
    case OPT_CWD: cwd = optarg; break;
    case OPT_STDIN: stdin_file = optarg; break;
    case OPT_JSON: json = true; break;
    case OPT_CLEAR_ENV: clear_env = true; break;
    case 'i': st.interactive = true; break;
    case 't': st.tty = true; break;
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
      cli_option_error("session exec");
      return EXIT_CORDON;
    }
  }
  if (!id && optind < end)
    id = argv[optind++];
  if (!id) {
    strv_free(env);
    cli_usage_error("session exec", "missing session ID");
    return EXIT_CORDON;
  }
  if (dashdash && optind < end) {
    strv_free(env);
    cli_usage_error("session exec", "unexpected argument '%s' (the command goes after --)",
                    argv[optind]);
    return EXIT_CORDON;
  }
  if (dashdash)
    optind = end + 1;
  st.json = json;
  if (optind >= argc || cli_stream_check(&st, "session exec", &stdin_file) < 0) {
    strv_free(env);
    if (optind >= argc)
      cli_usage_error("session exec", "no command given");
    return EXIT_CORDON;
  }
  struct cordon_error *err = NULL;
  struct session_handle h;
  _cleanup_free_ unsigned char *stdin_data = NULL;
  size_t stdin_len = 0;
  int code = EXIT_CORDON;
  if (load_stdin(stdin_file, &stdin_data, &stdin_len, &err) < 0 || handle_open(id, &h, &err) < 0) {
    /* "no such session" is 3 on every session verb, this one included (--json tells it from
     * a command's own exit 3 by its "error" object); any other failure of cordon is 125. */
    int failed = err && err->kind == CORDON_ERR_NOT_FOUND ? EXIT_NOT_FOUND : EXIT_CORDON;
    strv_free(env);
    return emit_failure(err, json, failed);
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
  if (cli_stream_prepare(&st, req.env, &req, &err) < 0 || cli_stream_start(&st, &err) < 0 ||
      cordon_session_exec(h.s, &req, &res, &err) < 0) {
    cli_stream_end(&st);
    emit_failure(err, json, EXIT_CORDON);
  } else {
    cli_stream_end(&st);
    emit_result_memory_limit(h.s->memory_limit);
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
  bool long_listing; /* session list -l */
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
      {"long", no_argument, NULL, 'l'},
      {"help", no_argument, NULL, OPT_HELP},
      {0}};
  memset(a, 0, sizeof(*a));
  int c;
  optind = 0;
  while ((c = cli_getopt(argc, argv, "hl", opts, NULL)) != -1) {
    if (c == OPT_JSON)
      a->json = true;
    else if (c == 'l' && !strcmp(verb, "session list"))
      a->long_listing = true;
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
      return cli_option_error(verb);
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
    return cli_operands_error("session read", "ID PATH", a.n);
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
    return cli_operands_error("session write", "ID PATH", a.n);
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
  int r = parse_small("session files", argc, argv, false, &a);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (a.n < 1 || a.n > 2)
    return cli_operands_error("session files", "ID [PATH]", a.n);
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
          list, json_pack("{s:o, s:s, s:o, s:I}", "name",
                          bytes_json((const unsigned char *)e[i].name, strlen(e[i].name)), "kind",
                          cordon_file_kind_name(e[i].kind), "mode", cli_json_mode(e[i].mode),
                          "size", (json_int_t)e[i].size));
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

/* One line of `session list -l` (under a header): ID, BACKEND, STATE, CREATED and WORKSPACE,
 * aligned for ids of 16 hex digits and the built-in backends' names; CREATED to the second, "-"
 * when not recorded; "-" for a workspace with no host path (session-json.h); the reason for a
 * session that cannot be read. */
static void print_session_line(const json_t *j) {
  const char *id = json_string_value(json_object_get(j, "id"));
  const char *error = json_string_value(json_object_get(j, "error"));
  if (error) {
    printf("%-16s  %-8s  %-9s  %-20s  %s\n", id, "-", "unreadable", "-", error);
    return;
  }
  const char *workspace = json_string_value(json_object_get(j, "workspace"));
  const char *created = json_string_value(json_object_get(j, "created"));
  char second[21] = "-";
  if (created && strlen(created) > 19) /* 2026-12-03T23:15:02.120Z: the milliseconds dropped */
    snprintf(second, sizeof(second), "%.19sZ", created);
  printf("%-16s  %-8s  %-9s  %-20s  %s\n", id, json_string_value(json_object_get(j, "backend")),
         json_is_true(json_object_get(j, "shut_down")) ? "shut down" : "active", second,
         workspace ? workspace : "-");
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
  struct cordon_registry *reg = NULL;
  char **ids = NULL;
  if (cordon_context_open(NULL, &ctx, &err) < 0 || cordon_session_list(ctx, &ids, &err) < 0 ||
      ((a.json || a.long_listing) && cordon_registry_load(&reg, &err) < 0)) {
    cordon_strv_free(ids);
    cordon_context_free(ctx);
    return cli_fail(err);
  }
  if (!a.json && !a.long_listing) {
    for (size_t i = 0; ids[i]; i++)
      printf("%s\n", ids[i]);
  } else {
    /* Each session as `cordon serve` lists it; one that cannot be opened with the reason. */
    json_t *list = json_array();
    if (a.long_listing && !a.json)
      printf("%-16s  %-8s  %-9s  %-20s  %s\n", "ID", "BACKEND", "STATE", "CREATED", "WORKSPACE");
    for (size_t i = 0; ids[i]; i++) {
      struct cordon_session *s = NULL;
      struct cordon_error *open_err = NULL;
      json_t *j = cordon_session_open(ctx, reg, ids[i], &s, &open_err) == 0
                      ? session_json(s)
                      : session_json_unreadable(ids[i], open_err);
      cordon_session_close(s);
      cordon_error_free(open_err);
      if (a.long_listing && !a.json && j)
        print_session_line(j);
      json_array_append_new(list, j);
    }
    if (a.json) {
      json_dumpf(list, stdout, JSON_INDENT(2));
      putchar('\n');
    }
    json_decref(list);
  }
  cordon_registry_free(reg);
  cordon_strv_free(ids);
  cordon_context_free(ctx);
  return EXIT_OK;
}

/* A byte count as the user would have typed it: 268435456 is 256M. */
static void print_bytes(const char *label, json_int_t n, const char **sep) {
  static const char *const units[] = {" bytes", "K", "M", "G", "T"};
  size_t u = 0;
  while (u + 1 < sizeof(units) / sizeof(units[0]) && n >= 1024 && n % 1024 == 0)
    n /= 1024, u++;
  printf("%s%s %lld%s", *sep, label, (long long)n, units[u]);
  *sep = ", ";
}

/* A list of strings on one line, "-" when empty. */
static void print_list(const char *label, const json_t *list) {
  printf("%-12s ", label);
  size_t i;
  json_t *v;
  if (json_array_size(list) == 0)
    fputs("-", stdout);
  json_array_foreach(list, i, v) printf("%s%s", i ? ", " : "", json_string_value(v));
  putchar('\n');
}

/* `session inspect` without --json: what the session is and what it may touch. */
static void print_inspection(const struct cordon_session *s, const json_t *j) {
  const char *workspace = json_string_value(json_object_get(j, "workspace"));
  printf("%-12s %s\n", "id", s->id);
  printf("%-12s %s (tier %s)\n", "backend", s->backend->name, cordon_tier_name(s->backend->tier));
  printf("%-12s %s\n", "state", s->shut_down ? "shut down" : "active");
  const char *created = json_string_value(json_object_get(j, "created"));
  printf("%-12s %s\n", "created", created ? created : "not recorded");
  printf("%-12s %s, at %s inside\n", "workspace",
         workspace ? workspace : "no host path (an overlay)", s->root);
  const json_t *p = json_object_get(j, "policy");
  if (!json_is_object(p)) {
    printf("%-12s not recorded (the session was made by an older cordon)\n", "policy");
    return;
  }
  printf("%-12s %s\n", "net", json_string_value(json_object_get(p, "net")));
  const json_t *egress = json_object_get(p, "egress");
  if (egress) {
    print_list("  domains", json_object_get(egress, "allow_domains"));
    print_list("  cidrs", json_object_get(egress, "allow_cidrs"));
    print_list("  resolve", json_object_get(egress, "resolve"));
  }
  print_list("read-only", json_object_get(p, "read_only"));
  print_list("hidden", json_object_get(p, "hidden"));
  print_list("host ro", json_object_get(p, "allow_ro"));
  print_list("devices", json_object_get(p, "devices"));
  const json_t *l = json_object_get(p, "limits");
  const char *sep = "";
  printf("%-12s ", "limits");
  if (json_integer_value(json_object_get(l, "memory_bytes")))
    print_bytes("memory", json_integer_value(json_object_get(l, "memory_bytes")), &sep);
  if (json_integer_value(json_object_get(l, "pids")))
    printf("%spids %lld", sep, (long long)json_integer_value(json_object_get(l, "pids"))),
        sep = ", ";
  if (json_real_value(json_object_get(l, "cpus")) > 0)
    printf("%scpus %g", sep, json_real_value(json_object_get(l, "cpus"))), sep = ", ";
  if (json_integer_value(json_object_get(l, "nofile")))
    printf("%snofile %lld", sep, (long long)json_integer_value(json_object_get(l, "nofile"))),
        sep = ", ";
  const json_t *fsize = json_object_get(l, "fsize_bytes");
  if (json_is_string(fsize))
    printf("%sfsize %s", sep, json_string_value(fsize)), sep = ", ";
  else if (json_integer_value(fsize))
    print_bytes("fsize", json_integer_value(fsize), &sep);
  if (json_integer_value(json_object_get(l, "tmp_bytes")))
    print_bytes("tmp", json_integer_value(json_object_get(l, "tmp_bytes")), &sep);
  printf("%s\n", *sep ? "" : "the backend's defaults");
  printf("%-12s %s\n", "user",
         s->backend->tier == CORDON_TIER_NONE ? "you, on the host (this backend isolates nothing)"
         : !strcmp(json_string_value(json_object_get(p, "user")), "root")
             ? "root of the sandbox (uid 0, no capabilities)"
             : "the sandbox user (uid 1000)");
  const json_t *waived = json_object_get(p, "waived");
  if (json_array_size(waived))
    print_list("WAIVED", waived);
  else
    printf("%-12s %s\n", "enforcement",
           json_is_true(json_object_get(p, "require_enforcement")) ? "required" : "not required");
  const char *image = json_string_value(json_object_get(p, "image"));
  const char *monitor = json_string_value(json_object_get(p, "monitor"));
  if (image)
    printf("%-12s %s\n", "image", image);
  if (monitor)
    printf("%-12s %s\n", "monitor", monitor);
}

static int session_inspect(int argc, char **argv) {
  struct small_args a;
  int r = parse_small("session inspect", argc, argv, false, &a);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (a.n != 1)
    return cli_operands_error("session inspect", "ID", a.n);
  struct cordon_error *err = NULL;
  struct session_handle h;
  if (handle_open(a.positional[0], &h, &err) < 0)
    return cli_fail(err);
  json_t *j = session_json_detail(h.s);
  if (!j) {
    handle_close(&h);
    cordon_error_set(&err, CORDON_ERR_SYSTEM, ENOMEM, "session %s", a.positional[0]);
    return cli_fail(err);
  }
  if (a.json) {
    json_dumpf(j, stdout, JSON_INDENT(2));
    putchar('\n');
  } else {
    print_inspection(h.s, j);
  }
  json_decref(j);
  handle_close(&h);
  return EXIT_OK;
}

static int session_shutdown(int argc, char **argv) {
  struct small_args a;
  int r = parse_small("session shutdown", argc, argv, false, &a);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (a.n != 1)
    return cli_operands_error("session shutdown", "ID", a.n);
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
    return cli_operands_error("session snapshot", "ID", a.n);
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
    json_t *j = json_pack("{s:s, s:s}", "session", h.s->id, "snapshot", id);
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
  optind = 0;
  while ((c = cli_getopt(argc, argv, "h", opts, NULL)) != -1) {
    if (c == 'h' || c == OPT_HELP) {
      fputs(session_usage, stdout);
      return EXIT_OK;
    }
    return cli_option_error("session destroy");
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
    /* An unknown id is "no such session" (exit 3), as on every session verb. */
    char *full = NULL;
    if (cordon_session_resolve_id(ctx, argv[optind], &full, &err) < 0 ||
        cordon_session_destroy_id(ctx, reg, full, &err) < 0) {
      code = cli_fail(err);
      err = NULL;
    }
    free(full);
  }
  cordon_context_free(ctx);
  cordon_registry_free(reg);
  return code;
}

int cmd_session(int argc, char **argv) {
  static const struct cli_subverb subs[] = {
      {"create", session_create},     {"exec", session_exec},       {"read", session_read},
      {"write", session_write},       {"ls", session_ls},           {"list", session_list},
      {"shutdown", session_shutdown}, {"destroy", session_destroy}, {"snapshot", session_snapshot},
      {"files", session_ls},          {"inspect", session_inspect}};
  return CLI_DISPATCH("session", session_usage, subs, argc, argv);
}
