/* `cordon audit`: append to, show, verify and repair the project's HMAC-chained audit log
 * (<project>/.cordon/audit). */
#include <getopt.h>
#include <jansson.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cordon/audit.h>
#include <cordon/keys.h>

#include "cli/cli.h"
#include "pool/pool.h"

int cmd_audit(int argc, char **argv);

static const char audit_usage[] =
    "usage: cordon audit append|show|verify|repair [options]\n"
    "\n"
    "The project's append-only audit log, <project>/.cordon/audit/audit-NNNNNN.jsonl: one\n"
    "canonical JSON entry per line, each chained to the one before by an HMAC-SHA256 under\n"
    "the audit key kept with the signing key (see 'cordon key --help'). The first entry\n"
    "chains to the project's id (.cordon/project-id, made once), so a log copied from\n"
    "another project under the same key neither verifies nor grows here.\n"
    "\n"
    "  append --event E --resource-type T [--resource-id I] [--actor A] [--details JSON]\n"
    "         [--rotate-size SIZE] [--json]\n"
    "                  add one entry (durable before it returns) and print its HMAC; the\n"
    "                  actor defaults to user:NAME; details is a JSON object; a new segment\n"
    "                  starts when the current one would pass SIZE (default 64M)\n"
    "  show [--tail N] [--json]\n"
    "                  print the entries (--json: the stored JSON lines), without checking\n"
    "  verify [--json] replay the whole chain offline; on failure name the first bad line\n"
    "                  and why: bad_hmac, broken_link, malformed, missing_newline (a torn\n"
    "                  append), missing_segment, foreign_project (the chain begins from\n"
    "                  another project's id: .cordon/project-id), unbound (a log begun before\n"
    "                  logs were bound to their project)\n"
    "  repair [--actor A] [--json]\n"
    "                  drop a torn final line left by an interrupted append, and record the\n"
    "                  repair in the chain; nothing else is ever rewritten\n"
    "\n"
    "Exit codes: 0 ok (verify: the chain is intact), 1 failed (verify: the chain is broken,\n"
    "the bad line is named), 2 usage, 3 no audit key, 4 key refused (unsafe permissions).\n";

struct audit_args {
  bool json;
  const char *event, *actor, *resource_type, *resource_id, *details;
  unsigned long long rotate, tail;
  bool has_tail;
};

enum { OPT_EVENT = 256, OPT_ACTOR, OPT_TYPE, OPT_ID, OPT_DETAILS, OPT_ROTATE, OPT_TAIL };

/* Is word one of the space-separated words of list? */
static bool word_in(const char *list, const char *word) {
  size_t n = strlen(word);
  for (const char *p = list; (p = strstr(p, word)); p += n)
    if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0))
      return true;
  return false;
}

/* Returns -1 after printing help, > 0 an exit code, 0 to go on. */
static int parse_args(const char *verb, int argc, char **argv, const char *allowed,
                      struct audit_args *a) {
  static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                       {"help", no_argument, NULL, 'h'},
                                       {"event", required_argument, NULL, OPT_EVENT},
                                       {"actor", required_argument, NULL, OPT_ACTOR},
                                       {"resource-type", required_argument, NULL, OPT_TYPE},
                                       {"resource-id", required_argument, NULL, OPT_ID},
                                       {"details", required_argument, NULL, OPT_DETAILS},
                                       {"rotate-size", required_argument, NULL, OPT_ROTATE},
                                       {"tail", required_argument, NULL, OPT_TAIL},
                                       {0}};
  memset(a, 0, sizeof(*a));
  optind = 0;
  int c, index = 0;
  while ((c = cli_getopt(argc, argv, "h", opts, &index)) != -1) {
    if (c == 'h') {
      fputs(audit_usage, stdout);
      return -1;
    }
    if (c == '?' || c == ':')
      return cli_option_error(verb);
    const char *name = c == 'j' ? "json" : opts[index].name;
    if (!word_in(allowed, name))
      return cli_usage_error(verb, "--%s is not an option of '%s'", name, verb);
    switch (c) {
    case 'j': a->json = true; break;
    case OPT_EVENT: a->event = optarg; break;
    case OPT_ACTOR: a->actor = optarg; break;
    case OPT_TYPE: a->resource_type = optarg; break;
    case OPT_ID: a->resource_id = optarg; break;
    case OPT_DETAILS: a->details = optarg; break;
    case OPT_ROTATE:
      if (cli_parse_size(optarg, &a->rotate) < 0 || a->rotate < 1024)
        return cli_usage_error(verb, "--rotate-size needs a size of at least 1K, not '%s'", optarg);
      break;
    case OPT_TAIL:
      if (cli_parse_u64(optarg, &a->tail) < 0)
        return cli_usage_error(verb, "--tail needs a number, not '%s'", optarg);
      a->has_tail = true;
      break;
    }
  }
  if (optind < argc)
    return cli_usage_error(verb, "unexpected argument '%s'", argv[optind]);
  return 0;
}

static int open_log(uint64_t rotate, struct cordon_context **ctx, struct cordon_audit_log **log,
                    struct cordon_error **err) {
  struct cordon_audit_options opts = {.rotate_bytes = rotate};
  if (cordon_context_open(NULL, ctx, err) < 0)
    return -1;
  return cordon_audit_open_project(*ctx, &opts, log, err);
}

static void close_log(struct cordon_context *ctx, struct cordon_audit_log *log) {
  cordon_audit_close(log);
  cordon_context_free(ctx);
}

static char *default_actor(void) {
  struct passwd *pw = getpwuid(geteuid());
  char *actor = NULL;
  if (pw && pw->pw_name && *pw->pw_name) {
    if (asprintf(&actor, "user:%s", pw->pw_name) < 0)
      actor = NULL;
  } else if (asprintf(&actor, "uid:%u", (unsigned)geteuid()) < 0) {
    actor = NULL;
  }
  return actor;
}

static int audit_append(int argc, char **argv) {
  struct audit_args a;
  int r = parse_args("audit append", argc, argv,
                     "json event actor resource-type resource-id details rotate-size", &a);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (!a.event || !a.resource_type)
    return cli_usage_error("audit append", "--event and --resource-type are required");
  char *actor = a.actor ? NULL : default_actor();
  struct cordon_audit_event ev = {a.event,
                                  a.actor ? a.actor
                                  : actor ? actor
                                          : "unknown",
                                  a.resource_type, a.resource_id ? a.resource_id : "", a.details};
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_audit_log *log = NULL;
  char hmac[CORDON_AUDIT_HMAC_HEX_LEN + 1];
  int code = EXIT_OK;
  if (open_log(a.rotate, &ctx, &log, &err) < 0 || cordon_audit_append(log, &ev, hmac, &err) < 0)
    code = cli_fail(err);
  else if (a.json)
    cli_print_json(json_pack("{s:s, s:s}", "hmac", hmac, "dir", cordon_audit_dir(log)));
  else
    printf("%s\n", hmac);
  free(actor);
  close_log(ctx, log);
  return code;
}

struct show_state {
  bool json;
  unsigned long long tail; /* 0: all */
  char **ring;             /* with --tail: the last `tail` formatted lines */
  unsigned long long seen;
};

static char *format_entry(const struct cordon_audit_entry *e, bool json) {
  char *s = NULL;
  int n = json ? asprintf(&s, "%.*s", (int)e->raw_length, e->raw)
               : asprintf(&s, "%6llu  %s  %s  %s%s%s  %s", (unsigned long long)e->index, e->event,
                          e->actor, e->resource_type, *e->resource_id ? ":" : "", e->resource_id,
                          e->details_json);
  return n < 0 ? NULL : s;
}

static int show_entry(const struct cordon_audit_entry *e, void *userdata) {
  struct show_state *s = userdata;
  char *line = format_entry(e, s->json);
  if (!line)
    return -1;
  if (!s->tail) {
    puts(line);
    free(line);
    return 0;
  }
  size_t slot = (size_t)(s->seen++ % s->tail);
  free(s->ring[slot]);
  s->ring[slot] = line;
  return 0;
}

static int audit_show(int argc, char **argv) {
  struct audit_args a;
  int r = parse_args("audit show", argc, argv, "json tail", &a);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (a.has_tail && (a.tail == 0 || a.tail > 1000000))
    return cli_usage_error("audit show", "--tail needs a number from 1 to 1000000");
  struct show_state s = {.json = a.json, .tail = a.tail};
  if (s.tail && !(s.ring = calloc((size_t)s.tail, sizeof(*s.ring)))) {
    cli_error("out of memory");
    return EXIT_FAILURE_;
  }
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_audit_log *log = NULL;
  int code = EXIT_OK;
  if (open_log(0, &ctx, &log, &err) < 0 || cordon_audit_foreach(log, show_entry, &s, &err) < 0)
    code = cli_fail(err);
  if (s.tail) {
    unsigned long long count = s.seen < s.tail ? s.seen : s.tail;
    for (unsigned long long i = 0; i < count; i++) {
      size_t slot = (size_t)((s.seen - count + i) % s.tail);
      if (code == EXIT_OK)
        puts(s.ring[slot]);
    }
    for (unsigned long long i = 0; i < s.tail; i++)
      free(s.ring[i]);
    free(s.ring);
  }
  close_log(ctx, log);
  return code;
}

/* Whether the chain records pools' or workers' events: then `audit verify` re-checks their
 * receipts too (pool_verify), so one offline verify proves which enrolled key ran each
 * dispatch. */
static int count_pool_event(const struct cordon_audit_entry *e, void *userdata) {
  if (e->event && (!strncmp(e->event, "pool.", 5) || !strncmp(e->event, "worker.", 7)))
    ++*(uint64_t *)userdata;
  return 0;
}

static int audit_verify(int argc, char **argv) {
  struct audit_args a;
  int r = parse_args("audit verify", argc, argv, "json", &a);
  if (r)
    return r < 0 ? EXIT_OK : r;
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_audit_log *log = NULL;
  struct cordon_audit_report rep = {0};
  if (open_log(0, &ctx, &log, &err) < 0 || cordon_audit_verify(log, &rep, &err) < 0) {
    close_log(ctx, log);
    return cli_fail(err);
  }
  bool ok = rep.problem == CORDON_AUDIT_OK;
  uint64_t pool_events = 0;
  struct pool_verify_report pools = {.ok = true};
  if (ok && (cordon_audit_foreach(log, count_pool_event, &pool_events, &err) < 0 ||
             (pool_events && pool_verify(ctx, NULL, &pools, &err) < 0))) {
    cordon_audit_report_clear(&rep);
    close_log(ctx, log);
    return cli_fail(err);
  }
  /* The chain's HMACs may hold while a pool body or a receipt it names does not. */
  bool pools_ok = pools.ok;
  const char *pools_reason = pools.reason ? pools.reason : "a pool record is broken";
  if (a.json) {
    /* The verify dialect (docs/formats.md, CLI JSON): ok, verdict, exit_code, problems. */
    json_t *problems = json_array();
    if (!ok)
      json_array_append_new(problems,
                            json_pack("{s:s, s:s, s:s}", "object", rep.file ? rep.file : "",
                                      "verdict", cordon_audit_problem_name(rep.problem), "message",
                                      rep.reason ? rep.reason : ""));
    if (!pools_ok)
      json_array_append_new(problems, json_pack("{s:s, s:s, s:s}", "object",
                                                pools.object ? pools.object : "pool", "verdict",
                                                "pool_record", "message", pools_reason));
    bool all_ok = ok && pools_ok;
    json_t *o = json_pack(
        "{s:b, s:s, s:i, s:o, s:I, s:I, s:s, s:s, s:I}", "ok", all_ok, "verdict",
        all_ok ? "verified" : "failed", "exit_code", all_ok ? EXIT_OK : EXIT_FAILURE_, "problems",
        problems, "entries", (json_int_t)rep.entries, "segments", (json_int_t)rep.segments, "head",
        rep.head, "problem", pools_ok ? cordon_audit_problem_name(rep.problem) : "pool_record",
        "pool_receipts", (json_int_t)pools.receipts);
    json_object_set_new(o, "project",
                        rep.project_id[0] ? json_string(rep.project_id) : json_null());
    if (!ok) {
      json_object_set_new(o, "file", json_string(rep.file ? rep.file : ""));
      json_object_set_new(o, "line", json_integer((json_int_t)rep.line));
      json_object_set_new(o, "offset", json_integer((json_int_t)rep.offset));
      json_object_set_new(o, "entry", json_integer((json_int_t)rep.entry));
      json_object_set_new(o, "reason", json_string(rep.reason ? rep.reason : ""));
    }
    cli_print_json(o);
  } else if (ok && !pools_ok) {
    cli_error("audit chain intact (%llu entries), but a pool record it names is broken: %s",
              (unsigned long long)rep.entries, pools_reason);
  } else if (ok) {
    printf("audit chain intact: %llu entries in %zu segment%s, head %s%s%s\n",
           (unsigned long long)rep.entries, rep.segments, rep.segments == 1 ? "" : "s", rep.head,
           rep.project_id[0] ? ", project " : "", rep.project_id);
    if (pool_events)
      printf("pool records verified: %llu pool bodies, %llu receipts (enrolments, placements, "
             "refusals, claims)\n",
             (unsigned long long)pools.bodies, (unsigned long long)pools.receipts);
  } else if (rep.problem == CORDON_AUDIT_MISSING_SEGMENT) {
    cli_error("audit chain broken: %s: %s: %s (%llu entries verified before it)", rep.file,
              cordon_audit_problem_name(rep.problem), rep.reason, (unsigned long long)rep.entries);
  } else {
    cli_error("audit chain broken at %s:%llu (entry %llu, byte %llu): %s: %s", rep.file,
              (unsigned long long)rep.line, (unsigned long long)rep.entry,
              (unsigned long long)rep.offset, cordon_audit_problem_name(rep.problem), rep.reason);
  }
  cordon_audit_report_clear(&rep);
  pool_verify_report_clear(&pools);
  close_log(ctx, log);
  return ok && pools_ok ? EXIT_OK : EXIT_FAILURE_;
}

static int audit_repair(int argc, char **argv) {
  struct audit_args a;
  int r = parse_args("audit repair", argc, argv, "json actor", &a);
  if (r)
    return r < 0 ? EXIT_OK : r;
  char *actor = a.actor ? NULL : default_actor();
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_audit_log *log = NULL;
  uint64_t dropped = 0;
  int code = EXIT_OK;
  if (open_log(0, &ctx, &log, &err) < 0 ||
      cordon_audit_repair(log, a.actor ? a.actor : actor, &dropped, &err) < 0)
    code = cli_fail(err);
  else if (a.json)
    cli_print_json(
        json_pack("{s:b, s:I}", "repaired", dropped > 0, "dropped_bytes", (json_int_t)dropped));
  else if (dropped)
    printf("dropped a torn final line of %llu bytes; the repair is recorded in the chain\n",
           (unsigned long long)dropped);
  else
    printf("nothing to repair: the log ends on a whole line\n");
  free(actor);
  close_log(ctx, log);
  return code;
}

int cmd_audit(int argc, char **argv) {
  static const struct cli_subverb subs[] = {{"append", audit_append},
                                            {"show", audit_show},
                                            {"verify", audit_verify},
                                            {"repair", audit_repair}};
  return CLI_DISPATCH("audit", audit_usage, subs, argc, argv);
}
