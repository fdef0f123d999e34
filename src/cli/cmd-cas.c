/* `cordon cas ...`: the project's content-addressed store (put, get, info, verify, prune). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cordon/cas.h>
#include <cordon/session.h>

#include "base/cleanup.h"
#include "cli/cli.h"
#include "snapshot/progress.h"

static const char cas_usage[] =
    "usage: cordon cas SUBVERB [options]\n"
    "\n"
    "The project's content-addressed store (.cordon/cas): blobs named by their SHA-256.\n"
    "\n"
    "  put [FILE] [--type TYPE] [--meta JSON] [--json]\n"
    "                         store FILE (standard input without it), print its digest\n"
    "  get DIGEST [-o FILE]   write the blob, verified before the first byte, to stdout\n"
    "  info DIGEST [--json]   size, where it is stored (its own file, or a pack and offset),\n"
    "                         content type and metadata (not re-hashed)\n"
    "  verify [--json]        re-hash every blob and check every sidecar; exit 1 on problems\n"
    "  prune [--dry-run] [--json]\n"
    "                         remove blobs no snapshot, session or receipt references\n"
    "                         (alias: gc; `cordon gc` is another thing: what killed cordon\n"
    "                         processes left behind)\n"
    "\n"
    "Blobs a snapshot stores are packed (.cordon/cas/packs) when smaller than 1 MiB; others,\n"
    "and every `put`, get a file of their own (.cordon/cas/<2 hex>/<64 hex>).\n"
    "\n"
    "Exit codes: 0 ok, 1 failed (integrity errors included), 2 usage, 3 not found.\n";

enum { OPT_JSON = 256, OPT_TYPE, OPT_META, OPT_DRY_RUN, OPT_HELP };

struct cas_args {
  bool json;
  bool dry_run;
  const char *type;
  const char *meta;
  const char *output;
  const char *positional[2];
  int n;
};

/* Returns 0 to go on, -1 after printing help, or an exit code. */
static int parse_args(const char *verb, int argc, char **argv, struct cas_args *a) {
  static const struct option opts[] = {{"json", no_argument, NULL, OPT_JSON},
                                       {"type", required_argument, NULL, OPT_TYPE},
                                       {"meta", required_argument, NULL, OPT_META},
                                       {"dry-run", no_argument, NULL, OPT_DRY_RUN},
                                       {"output", required_argument, NULL, 'o'},
                                       {"help", no_argument, NULL, OPT_HELP},
                                       {0}};
  memset(a, 0, sizeof(*a));
  optind = 0;
  int c;
  while ((c = cli_getopt(argc, argv, "ho:", opts, NULL)) != -1) {
    switch (c) {
    case OPT_JSON: a->json = true; break;
    case OPT_TYPE: a->type = optarg; break;
    case OPT_META: a->meta = optarg; break;
    case OPT_DRY_RUN: a->dry_run = true; break;
    case 'o': a->output = optarg; break;
    case 'h':
    case OPT_HELP: fputs(cas_usage, stdout); return -1;
    default: return cli_option_error(verb);
    }
  }
  for (; optind < argc; optind++) {
    if (a->n == 2)
      return cli_usage_error(verb, "unexpected argument '%s'", argv[optind]);
    a->positional[a->n++] = argv[optind];
  }
  return 0;
}

static int cas_put(int argc, char **argv) {
  struct cas_args a;
  int r = parse_args("cas put", argc, argv, &a);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (a.n > 1)
    return cli_operands_error("cas put", "at most one FILE", a.n);
  struct cordon_error *err = NULL;
  int fd = STDIN_FILENO;
  const char *src = a.n == 1 && strcmp(a.positional[0], "-") ? a.positional[0] : NULL;
  if (src) {
    fd = open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
      cordon_error_set(&err, errno == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_SYSTEM, errno,
                       "%s", src);
      return cli_fail(err);
    }
  }
  struct cordon_context *ctx = NULL;
  struct cordon_cas *cas = NULL;
  char digest[CORDON_DIGEST_HEX_SIZE];
  int code = EXIT_OK;
  if (cli_open_store(&ctx, &cas, &err) < 0 ||
      cordon_cas_put_fd(cas, fd, a.type, a.meta, digest, &err) < 0) {
    code = cli_fail(err);
  } else if (a.json) {
    cli_print_json(json_pack("{s:s}", "digest", digest));
  } else {
    printf("%s\n", digest);
  }
  if (src)
    close(fd);
  cordon_cas_close(cas);
  cordon_context_free(ctx);
  return code;
}

static int cas_get(int argc, char **argv) {
  struct cas_args a;
  int r = parse_args("cas get", argc, argv, &a);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (a.n != 1)
    return cli_operands_error("cas get", "DIGEST", a.n);
  if (!cordon_digest_valid(a.positional[0]))
    return cli_usage_error("cas get", "'%s' is not a digest (64 lowercase hex digits)",
                           a.positional[0]);
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_cas *cas = NULL;
  if (cli_open_store(&ctx, &cas, &err) < 0)
    return cli_fail(err);
  int fd = STDOUT_FILENO, code = EXIT_OK;
  if (a.output) {
    fd = open(a.output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
      cordon_error_set(&err, CORDON_ERR_SYSTEM, errno, "%s", a.output);
  }
  if (fd < 0 || cordon_cas_get_to_fd(cas, a.positional[0], fd, &err) < 0) {
    code = cli_fail(err);
    if (a.output && fd >= 0)
      unlink(a.output); /* nothing unverified stays behind */
  }
  if (a.output && fd >= 0)
    close(fd);
  cordon_cas_close(cas);
  cordon_context_free(ctx);
  return code;
}

static int cas_info(int argc, char **argv) {
  struct cas_args a;
  int r = parse_args("cas info", argc, argv, &a);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (a.n != 1)
    return cli_operands_error("cas info", "DIGEST", a.n);
  if (!cordon_digest_valid(a.positional[0]))
    return cli_usage_error("cas info", "'%s' is not a digest (64 lowercase hex digits)",
                           a.positional[0]);
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_cas *cas = NULL;
  struct cordon_blob_info info = {0};
  int code = EXIT_OK;
  if (cli_open_store(&ctx, &cas, &err) < 0 ||
      cordon_cas_info(cas, a.positional[0], &info, &err) < 0) {
    code = cli_fail(err);
  } else if (a.json) {
    json_t *doc =
        json_pack("{s:s, s:I, s:s, s:I}", "digest", a.positional[0], "size", (json_int_t)info.size,
                  "location", info.location, "offset", (json_int_t)info.offset);
    if (doc && info.content_type)
      json_object_set_new(doc, "content_type", json_string(info.content_type));
    if (doc && info.metadata)
      json_object_set_new(doc, "metadata", json_loads(info.metadata, 0, NULL));
    cli_print_json(doc);
  } else {
    printf("size: %llu\nlocation: %s\noffset: %llu\n", (unsigned long long)info.size, info.location,
           (unsigned long long)info.offset);
    if (info.content_type)
      printf("content type: %s\n", info.content_type);
    if (info.metadata)
      printf("metadata: %s\n", info.metadata);
  }
  cordon_blob_info_clear(&info);
  cordon_cas_close(cas);
  cordon_context_free(ctx);
  return code;
}

static int cas_verify(int argc, char **argv) {
  struct cas_args a;
  int r = parse_args("cas verify", argc, argv, &a);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (a.n != 0)
    return cli_usage_error("cas verify", "unexpected argument '%s'", a.positional[0]);
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_cas *cas = NULL;
  if (cli_open_store(&ctx, &cas, &err) < 0)
    return cli_fail(err);
  struct tty_progress bar;
  const struct cordon_progress *progress = tty_progress_init(&bar, stderr, true);
  struct cordon_cas_verify_report rep;
  int code = EXIT_OK;
  if (cordon_cas_verify(cas, progress, &rep, &err) < 0) {
    tty_progress_done(&bar);
    code = cli_fail(err);
  } else {
    tty_progress_done(&bar);
    if (a.json) {
      json_t *problems = json_array();
      for (size_t i = 0; i < rep.n_problems; i++)
        json_array_append_new(problems,
                              json_pack("{s:s, s:s, s:s}", "object", rep.problems[i].object,
                                        "verdict", "failed", "message", rep.problems[i].message));
      cli_print_json(json_pack("{s:b, s:s, s:i, s:I, s:I, s:I, s:I, s:I, s:o}", "ok",
                               rep.n_problems == 0, "verdict",
                               rep.n_problems ? "failed" : "verified", "exit_code",
                               rep.n_problems ? EXIT_FAILURE_ : EXIT_OK, "blobs",
                               (json_int_t)rep.blobs, "packs", (json_int_t)rep.packs, "bytes",
                               (json_int_t)rep.bytes, "sidecars", (json_int_t)rep.sidecars,
                               "temporaries", (json_int_t)rep.temporaries, "problems", problems));
    } else {
      for (size_t i = 0; i < rep.n_problems; i++)
        printf("%s: %s\n", rep.problems[i].object, rep.problems[i].message);
      printf("%llu blobs (%llu bytes, %llu packs), %llu sidecars: %s\n",
             (unsigned long long)rep.blobs, (unsigned long long)rep.bytes,
             (unsigned long long)rep.packs, (unsigned long long)rep.sidecars,
             rep.n_problems ? "PROBLEMS FOUND" : "ok");
    }
    if (rep.n_problems)
      code = EXIT_FAILURE_;
    cordon_cas_verify_report_clear(&rep);
  }
  cordon_cas_close(cas);
  cordon_context_free(ctx);
  return code;
}

static int cas_gc(int argc, char **argv) {
  struct cas_args a;
  int r = parse_args("cas prune", argc, argv, &a);
  if (r)
    return r < 0 ? EXIT_OK : r;
  if (a.n != 0)
    return cli_usage_error("cas prune", "unexpected argument '%s'", a.positional[0]);
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_cas *cas = NULL;
  if (cli_open_store(&ctx, &cas, &err) < 0)
    return cli_fail(err);
  struct cordon_cas_gc_report rep;
  int code = EXIT_OK;
  if (cordon_cas_gc(ctx, cas, a.dry_run, &rep, &err) < 0) {
    code = cli_fail(err);
  } else {
    if (a.json) {
      json_t *removed = json_array();
      for (size_t i = 0; rep.removed_digests[i]; i++)
        json_array_append_new(removed, json_string(rep.removed_digests[i]));
      cli_print_json(json_pack(
          "{s:b, s:I, s:I, s:I, s:I, s:o}", "dry_run", a.dry_run, "roots", (json_int_t)rep.roots,
          "kept", (json_int_t)rep.kept, "removed", (json_int_t)rep.removed, "removed_bytes",
          (json_int_t)rep.removed_bytes, a.dry_run ? "would_remove" : "removed_digests", removed));
    } else {
      if (a.dry_run)
        for (size_t i = 0; rep.removed_digests[i]; i++)
          printf("%s\n", rep.removed_digests[i]);
      printf("%s %llu blobs (%llu bytes); %s %llu\n", a.dry_run ? "would remove" : "removed",
             (unsigned long long)rep.removed, (unsigned long long)rep.removed_bytes,
             a.dry_run ? "would keep" : "kept", (unsigned long long)rep.kept);
    }
    cordon_cas_gc_report_clear(&rep);
  }
  cordon_cas_close(cas);
  cordon_context_free(ctx);
  return code;
}

int cmd_cas(int argc, char **argv) {
  static const struct cli_subverb subs[] = {{"put", cas_put},   {"get", cas_get},
                                            {"info", cas_info}, {"verify", cas_verify},
                                            {"gc", cas_gc},     {"prune", cas_gc}};
  return CLI_DISPATCH("cas", cas_usage, subs, argc, argv);
}
