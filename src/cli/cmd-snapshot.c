/* `cordon snapshot ...`: take, restore, export, import, show, list and forget snapshots of
 * plain directories in the project's store. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cordon/cas.h>
#include <cordon/session.h>
#include <cordon/snapshot.h>

#include "base/cleanup.h"
#include "base/strv.h"
#include "cli/cli.h"
#include "snapshot/progress.h"

static const char snapshot_usage[] =
    "usage: cordon snapshot SUBVERB [options]\n"
    "\n"
    "Snapshots of directory trees in the project's store. A snapshot id is the SHA-256 of the\n"
    "tree's canonical manifest: the same tree gives the same id on any host, under any user.\n"
    "\n"
    "  take DIR [--exclude PATH]... [--no-cache] [--max-snapshot-bytes SIZE] [--json]\n"
    "                         snapshot DIR, print its id; refused (exit 4) when its files\n"
    "                         hold more than SIZE (default 8G; 0 or unlimited: no limit)\n"
    "  restore ID DIR [--keep-setid] [--allow-devices] [--json]\n"
    "                         recreate the tree as DIR (new or empty), every blob verified;\n"
    "                         set-user-ID and set-group-ID bits (files and directories) are\n"
    "                         dropped unless --keep-setid\n"
    "  export ID [-o FILE]    write the canonical tar image (byte-identical on any host)\n"
    "  import [FILE] [--json] read a tar image (standard input without FILE), print its id\n"
    "  show ID [--json]       list a snapshot's entries\n"
    "  list [--json]          the snapshots this project keeps\n"
    "  forget ID...           let gc reclaim snapshots\n"
    "\n"
    "Exit codes: 0 ok, 1 failed (integrity errors and refused archives included), 2 usage,\n"
    "3 not found, 4 refused. CORDON_THREADS sets the worker threads (default: CPUs, max 8).\n";

enum {
  OPT_JSON = 256,
  OPT_NO_CACHE,
  OPT_EXCLUDE,
  OPT_KEEP_SETID,
  OPT_ALLOW_DEVICES,
  OPT_MAX_SNAPSHOT_BYTES,
  OPT_HELP,
};

struct snap_args {
  bool json, no_cache, keep_setid, allow_devices;
  uint64_t max_snapshot_bytes;
  char **exclude;
  const char *output;
  char **positional;
  char **resolved; /* the whole ids of abbreviated ones (resolve_positional) */
  int n;
};

static void args_free(struct snap_args *a) {
  strv_free(a->exclude);
  strv_free(a->resolved);
  free(a->positional);
}

static int parse_args(const char *verb, int argc, char **argv, struct snap_args *a) {
  static const struct option opts[] = {
      {"json", no_argument, NULL, OPT_JSON},
      {"no-cache", no_argument, NULL, OPT_NO_CACHE},
      {"exclude", required_argument, NULL, OPT_EXCLUDE},
      {"keep-setid", no_argument, NULL, OPT_KEEP_SETID},
      {"allow-devices", no_argument, NULL, OPT_ALLOW_DEVICES},
      {"output", required_argument, NULL, 'o'},
      {"max-snapshot-bytes", required_argument, NULL, OPT_MAX_SNAPSHOT_BYTES},
      {"help", no_argument, NULL, OPT_HELP},
      {0}};
  memset(a, 0, sizeof(*a));
  a->positional = calloc((size_t)argc + 1, sizeof(char *));
  if (!a->positional)
    return EXIT_FAILURE_;
  optind = 0;
  int c;
  while ((c = cli_getopt(argc, argv, "ho:", opts, NULL)) != -1) {
    switch (c) {
    case OPT_JSON: a->json = true; break;
    case OPT_NO_CACHE: a->no_cache = true; break;
    case OPT_KEEP_SETID: a->keep_setid = true; break;
    case OPT_ALLOW_DEVICES: a->allow_devices = true; break;
    case OPT_EXCLUDE:
      if (strv_push(&a->exclude, optarg) < 0)
        return EXIT_FAILURE_;
      break;
    case 'o': a->output = optarg; break;
    case OPT_MAX_SNAPSHOT_BYTES:
      if (cli_parse_size_limit(optarg, &a->max_snapshot_bytes) < 0)
        return cli_usage_error(verb, "--max-snapshot-bytes expects a size such as 8G, got '%s'",
                               optarg);
      break;
    case 'h':
    case OPT_HELP: fputs(snapshot_usage, stdout); return -1;
    default: return cli_option_error(verb);
    }
  }
  for (; optind < argc; optind++)
    a->positional[a->n++] = argv[optind];
  return 0;
}

static void close_store(struct cordon_context *ctx, struct cordon_cas *cas) {
  cordon_cas_close(cas);
  cordon_context_free(ctx);
}

static int check_id(const char *verb, const char *id) {
  size_t hex = strspn(id, "0123456789abcdef");
  if (id[hex] || hex < 8 || hex > 64)
    return cli_usage_error(
        verb,
        "'%s' is not a snapshot id (64 lowercase hex digits, or a unique prefix of 8 or more)", id);
  return 0;
}

/* Replace a.positional[i] by the whole snapshot id it names (a unique prefix is enough). */
static int resolve_positional(struct cordon_cas *cas, struct snap_args *a, int i,
                              struct cordon_error **err) {
  char *full = NULL;
  if (cordon_snapshot_resolve_id(cas, a->positional[i], &full, err) < 0)
    return -1;
  if (strv_push_take(&a->resolved, full) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "snapshot %s", a->positional[i]);
  a->positional[i] = full;
  return 0;
}

static int snapshot_take(int argc, char **argv) {
  struct snap_args a;
  int r = parse_args("snapshot take", argc, argv, &a);
  if (r) {
    args_free(&a);
    return r < 0 ? EXIT_OK : r;
  }
  if (a.n != 1) {
    args_free(&a);
    return cli_operands_error("snapshot take", "DIR", a.n);
  }
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_cas *cas = NULL;
  struct tty_progress bar;
  struct cordon_snapshot_options o = {
      .exclude = (const char *const *)a.exclude,
      .no_stat_cache = a.no_cache,
      .progress = tty_progress_init(&bar, stderr, false),
      .max_bytes = a.max_snapshot_bytes,
  };
  struct cordon_snapshot_stats stats;
  char id[CORDON_DIGEST_HEX_SIZE];
  int code = EXIT_OK;
  if (cli_open_store(&ctx, &cas, &err) < 0 ||
      cordon_snapshot_take(cas, a.positional[0], &o, id, &stats, &err) < 0) {
    tty_progress_done(&bar);
    code = cli_fail(err);
  } else {
    tty_progress_done(&bar);
    if (a.json)
      cli_print_json(json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:f}", "id", id, "entries",
                               (json_int_t)stats.entries, "files", (json_int_t)stats.files, "bytes",
                               (json_int_t)stats.bytes, "hashed_files",
                               (json_int_t)stats.hashed_files, "hashed_bytes",
                               (json_int_t)stats.hashed_bytes, "new_blobs",
                               (json_int_t)stats.new_blobs, "duration_seconds", stats.seconds));
    else
      printf("%s\n", id);
  }
  close_store(ctx, cas);
  args_free(&a);
  return code;
}

static int snapshot_restore(int argc, char **argv) {
  struct snap_args a;
  int r = parse_args("snapshot restore", argc, argv, &a);
  if (r) {
    args_free(&a);
    return r < 0 ? EXIT_OK : r;
  }
  if (a.n != 2 || check_id("snapshot restore", a.positional[0])) {
    int code = a.n != 2 ? cli_operands_error("snapshot restore", "ID DIR", a.n) : EXIT_USAGE;
    args_free(&a);
    return code;
  }
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_cas *cas = NULL;
  struct tty_progress bar;
  struct cordon_restore_options o = {
      .keep_setid = a.keep_setid,
      .allow_devices = a.allow_devices,
      .progress = tty_progress_init(&bar, stderr, true),
  };
  int code = EXIT_OK;
  if (cli_open_store(&ctx, &cas, &err) < 0 || resolve_positional(cas, &a, 0, &err) < 0 ||
      cordon_snapshot_restore(cas, a.positional[0], a.positional[1], &o, &err) < 0) {
    tty_progress_done(&bar);
    code = cli_fail(err);
  } else {
    tty_progress_done(&bar);
    if (a.json)
      cli_print_json(json_pack("{s:s, s:s}", "id", a.positional[0], "directory", a.positional[1]));
  }
  close_store(ctx, cas);
  args_free(&a);
  return code;
}

static int snapshot_export(int argc, char **argv) {
  struct snap_args a;
  int r = parse_args("snapshot export", argc, argv, &a);
  if (r) {
    args_free(&a);
    return r < 0 ? EXIT_OK : r;
  }
  if (a.n != 1 || check_id("snapshot export", a.positional[0])) {
    int code = a.n != 1 ? cli_operands_error("snapshot export", "ID", a.n) : EXIT_USAGE;
    args_free(&a);
    return code;
  }
  if (!a.output && isatty(STDOUT_FILENO)) {
    args_free(&a);
    return cli_usage_error("snapshot export",
                           "refusing to write a tar image to a terminal; redirect standard "
                           "output or pass -o FILE");
  }
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_cas *cas = NULL;
  struct tty_progress bar;
  const struct cordon_progress *progress = tty_progress_init(&bar, stderr, true);
  int fd = STDOUT_FILENO, code = EXIT_OK;
  if (cli_open_store(&ctx, &cas, &err) < 0 || resolve_positional(cas, &a, 0, &err) < 0) {
    code = cli_fail(err);
  } else {
    if (a.output) {
      fd = open(a.output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0)
        cordon_error_set(&err, CORDON_ERR_SYSTEM, errno, "%s", a.output);
    }
    if (fd < 0 || cordon_snapshot_export(cas, a.positional[0], fd, progress, &err) < 0) {
      tty_progress_done(&bar);
      code = cli_fail(err);
      if (a.output && fd >= 0)
        unlink(a.output);
    }
    tty_progress_done(&bar);
    if (a.output && fd >= 0 && close(fd) < 0 && code == EXIT_OK) {
      cli_error("%s: %s", a.output, strerror(errno));
      code = EXIT_FAILURE_;
    }
  }
  close_store(ctx, cas);
  args_free(&a);
  return code;
}

static int snapshot_import(int argc, char **argv) {
  struct snap_args a;
  int r = parse_args("snapshot import", argc, argv, &a);
  if (r) {
    args_free(&a);
    return r < 0 ? EXIT_OK : r;
  }
  if (a.n > 1) {
    args_free(&a);
    return cli_operands_error("snapshot import", "at most one FILE", a.n);
  }
  struct cordon_error *err = NULL;
  const char *src = a.n == 1 && strcmp(a.positional[0], "-") ? a.positional[0] : NULL;
  int fd = STDIN_FILENO;
  if (src) {
    fd = open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
      cordon_error_set(&err, errno == ENOENT ? CORDON_ERR_NOT_FOUND : CORDON_ERR_SYSTEM, errno,
                       "%s", src);
      args_free(&a);
      return cli_fail(err);
    }
  } else if (isatty(STDIN_FILENO)) {
    args_free(&a);
    return cli_usage_error("snapshot import", "give a FILE or pipe a tar image to standard input");
  }
  struct cordon_context *ctx = NULL;
  struct cordon_cas *cas = NULL;
  struct tty_progress bar;
  const struct cordon_progress *progress = tty_progress_init(&bar, stderr, true);
  char id[CORDON_DIGEST_HEX_SIZE];
  int code = EXIT_OK;
  if (cli_open_store(&ctx, &cas, &err) < 0 ||
      cordon_snapshot_import(cas, fd, progress, id, &err) < 0) {
    tty_progress_done(&bar);
    code = cli_fail(err);
  } else {
    tty_progress_done(&bar);
    if (a.json)
      cli_print_json(json_pack("{s:s}", "id", id));
    else
      printf("%s\n", id);
  }
  if (src)
    close(fd);
  close_store(ctx, cas);
  args_free(&a);
  return code;
}

/* Paths and targets hold any byte but NUL: escape what a terminal would interpret. */
static void print_escaped(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '\\')
      fputs("\\\\", stdout);
    else if (c < 0x20 || c == 0x7f)
      printf("\\x%02x", c);
    else
      putchar(c);
  }
}

static json_t *bytes_json(const char *s, size_t n) {
  return json_stringn(s, n); /* NULL when not UTF-8 */
}

static json_t *hex_json(const char *s, size_t n) {
  char *hex = malloc(2 * n + 1);
  if (!hex)
    return NULL;
  for (size_t i = 0; i < n; i++)
    snprintf(hex + 2 * i, 3, "%02x", (unsigned char)s[i]);
  json_t *j = json_string(hex);
  free(hex);
  return j;
}

static int snapshot_show(int argc, char **argv) {
  struct snap_args a;
  int r = parse_args("snapshot show", argc, argv, &a);
  if (r) {
    args_free(&a);
    return r < 0 ? EXIT_OK : r;
  }
  if (a.n != 1 || check_id("snapshot show", a.positional[0])) {
    int code = a.n != 1 ? cli_operands_error("snapshot show", "ID", a.n) : EXIT_USAGE;
    args_free(&a);
    return code;
  }
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_cas *cas = NULL;
  struct cordon_snapshot_entry *e = NULL;
  size_t n = 0;
  int code = EXIT_OK;
  if (cli_open_store(&ctx, &cas, &err) < 0 || resolve_positional(cas, &a, 0, &err) < 0 ||
      cordon_snapshot_entries(cas, a.positional[0], &e, &n, &err) < 0) {
    code = cli_fail(err);
  } else if (a.json) {
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) {
      char kind[2] = {(char)e[i].kind, 0};
      json_t *o = json_pack("{s:s, s:o}", "kind", kind, "mode", cli_json_mode(e[i].mode));
      const char *path = e[i].path_length ? e[i].path : ".";
      size_t plen = e[i].path_length ? e[i].path_length : 1;
      json_t *p = bytes_json(path, plen);
      json_object_set_new(o, p ? "path" : "path_hex", p ? p : hex_json(path, plen));
      if (e[i].kind == CORDON_SNAPSHOT_FILE) {
        json_object_set_new(o, "size", json_integer((json_int_t)e[i].size));
        json_object_set_new(o, "digest", json_string(e[i].digest));
      }
      if (e[i].target) {
        size_t tl = strlen(e[i].target);
        json_t *t = bytes_json(e[i].target, tl);
        json_object_set_new(o, t ? "target" : "target_hex", t ? t : hex_json(e[i].target, tl));
      }
      if (e[i].kind == CORDON_SNAPSHOT_CHAR || e[i].kind == CORDON_SNAPSHOT_BLOCK) {
        json_object_set_new(o, "major", json_integer(e[i].major));
        json_object_set_new(o, "minor", json_integer(e[i].minor));
      }
      json_array_append_new(list, o);
    }
    cli_print_json(json_pack("{s:s, s:o}", "id", a.positional[0], "entries", list));
  } else {
    for (size_t i = 0; i < n; i++) {
      printf("%c %04o ", (char)e[i].kind, e[i].mode);
      if (e[i].kind == CORDON_SNAPSHOT_FILE)
        printf("%12llu %s ", (unsigned long long)e[i].size, e[i].digest);
      else if (e[i].kind == CORDON_SNAPSHOT_CHAR || e[i].kind == CORDON_SNAPSHOT_BLOCK)
        printf("%5u,%-6u %64s ", e[i].major, e[i].minor, "");
      else
        printf("%12s %64s ", "-", "");
      if (e[i].path_length)
        print_escaped(e[i].path, e[i].path_length);
      else
        putchar('.');
      if (e[i].target) {
        fputs(" -> ", stdout);
        print_escaped(e[i].target, strlen(e[i].target));
      }
      putchar('\n');
    }
  }
  cordon_snapshot_entries_free(e, n);
  close_store(ctx, cas);
  args_free(&a);
  return code;
}

static int snapshot_list(int argc, char **argv) {
  struct snap_args a;
  int r = parse_args("snapshot list", argc, argv, &a);
  if (r) {
    args_free(&a);
    return r < 0 ? EXIT_OK : r;
  }
  if (a.n != 0) {
    int code = cli_usage_error("snapshot list", "unexpected argument '%s'", a.positional[0]);
    args_free(&a);
    return code;
  }
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_cas *cas = NULL;
  char **ids = NULL;
  int code = EXIT_OK;
  if (cli_open_store(&ctx, &cas, &err) < 0 || cordon_snapshot_list(cas, &ids, &err) < 0) {
    code = cli_fail(err);
  } else if (a.json) {
    json_t *list = json_array();
    for (size_t i = 0; ids[i]; i++)
      json_array_append_new(list, json_string(ids[i]));
    cli_print_json(list);
  } else {
    for (size_t i = 0; ids[i]; i++)
      printf("%s\n", ids[i]);
  }
  cordon_strv_free(ids);
  close_store(ctx, cas);
  args_free(&a);
  return code;
}

static int snapshot_forget(int argc, char **argv) {
  struct snap_args a;
  int r = parse_args("snapshot forget", argc, argv, &a);
  if (r) {
    args_free(&a);
    return r < 0 ? EXIT_OK : r;
  }
  if (a.n < 1) {
    args_free(&a);
    return cli_operands_error("snapshot forget", "at least one ID", a.n);
  }
  for (int i = 0; i < a.n; i++) {
    if (check_id("snapshot forget", a.positional[i])) {
      args_free(&a);
      return EXIT_USAGE;
    }
  }
  struct cordon_error *err = NULL;
  struct cordon_context *ctx = NULL;
  struct cordon_cas *cas = NULL;
  int code = EXIT_OK;
  if (cli_open_store(&ctx, &cas, &err) < 0) {
    code = cli_fail(err);
  } else {
    for (int i = 0; i < a.n; i++) {
      if (resolve_positional(cas, &a, i, &err) < 0 ||
          cordon_snapshot_forget(cas, a.positional[i], &err) < 0) {
        code = cli_fail(err);
        err = NULL;
      }
    }
  }
  close_store(ctx, cas);
  args_free(&a);
  return code;
}

int cmd_snapshot(int argc, char **argv) {
  static const struct cli_subverb subs[] = {
      {"take", snapshot_take},     {"restore", snapshot_restore}, {"export", snapshot_export},
      {"import", snapshot_import}, {"show", snapshot_show},       {"list", snapshot_list},
      {"forget", snapshot_forget}};
  return CLI_DISPATCH("snapshot", snapshot_usage, subs, argc, argv);
}
