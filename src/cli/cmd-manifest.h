/* The manifest options `cordon run` and `cordon session create` share (--ro, --hide, --net,
 * --memory, ...): their getopt table, their --help text, parsing them into a manifest, choosing
 * the backend (failing closed under CORDON_SANDBOX), and printing an exec result. The verbs
 * themselves are in cmd-run.c and cmd-session.c. */
#ifndef CORDON_CLI_CMD_MANIFEST_H
#define CORDON_CLI_CMD_MANIFEST_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <cordon/cordon.h>

#include "cli/cli.h"

/* The largest --file source, --stdin input or `session write` input read into memory. */
#define STDIN_MAX ((size_t)1 << 30)

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
  /* -v/--volume NAME:PATH[:ro] or /HOST/DIR:PATH[:ro] (strings owned) */
  struct cordon_volume *volumes;
  size_t n_volumes;
  bool user_root;          /* --user root */
  char **hidden_if_exists; /* --hide-if-exists: joins hidden when it exists in the workspace */
  const char *monitor;     /* --monitor NAME: the microvm backend's monitor */
  /* --net restricted: --allow-domain, --allow-cidr, --resolve (strv, owned), and the rules
   * the manifest points at (cli_build_manifest) */
  char **allow_domains;
  char **allow_cidrs;
  char **resolve;
  struct cordon_egress_rules egress_rules;
  /* --device and --gpu: manifest device entries (HOST[:TARGET]; --gpu's resolved), owned */
  char **devices;
  /* --backend auto: --require, --min-tier, --attestation, --expected-keyid,
   * --allow-unverifiable (cmd-select.c) */
  struct cli_select_request select;
  bool gpu; /* --gpu given: auto requires the gpu capability */
};

void manifest_opts_free(struct manifest_opts *o);

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
  OPT_USER,
  OPT_HIDE_IF_EXISTS,
  OPT_MONITOR,
  OPT_ALLOW_DOMAIN,
  OPT_ALLOW_CIDR,
  OPT_RESOLVE,
  OPT_DEVICE,
  OPT_GPU,
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
      {"user", required_argument, NULL, OPT_USER}, {"quiet", no_argument, NULL, OPT_QUIET},       \
      {"json", no_argument, NULL, OPT_JSON}, {"volume", required_argument, NULL, 'v'},            \
      {"hide-if-exists", required_argument, NULL, OPT_HIDE_IF_EXISTS},                            \
      {"monitor", required_argument, NULL, OPT_MONITOR},                                          \
      {"allow-domain", required_argument, NULL, OPT_ALLOW_DOMAIN},                                \
      {"allow-cidr", required_argument, NULL, OPT_ALLOW_CIDR},                                    \
      {"resolve", required_argument, NULL, OPT_RESOLVE},                                          \
      {"device", required_argument, NULL, OPT_DEVICE}, {"gpu", required_argument, NULL, OPT_GPU}, \
      CLI_SELECT_OPTIONS, {                                                                       \
    "help", no_argument, NULL, OPT_HELP                                                           \
  }

#define MANIFEST_HELP                                                                         \
  "  --backend NAME        backend (default: $CORDON_BACKEND, else ns; see CORDON_SANDBOX)\n" \
  "  --backend auto        the cheapest backend that fits, as 'cordon select' chooses it:\n"  \
  "                        exec, the --net class, -v's persistent_volumes, --gpu's gpu and\n" \
  "                        the limits asked, plus --require CAP[,CAP...], --min-tier TIER;\n" \
  "                        evidence from --attestation FILE [--expected-keyid KID]; claims\n" \
  "                        no probe observed only with --allow-unverifiable; nothing fits:\n" \
  "                        exit 4 (125 for run) with one reason per backend\n"                \
  "  --workspace DIR       use DIR as the workspace (default: a fresh directory)\n"           \
  "  --repo DIR [--branch B] [--sparse PATH]...\n"                                            \
  "                        workspace is a git worktree of DIR on a new branch\n"              \
  "  --root PATH           where the workspace appears in the sandbox (default /workspace)\n" \
  "  --file PATH=SRC       copy host file SRC into the workspace at PATH (repeatable)\n"      \
  "  --env KEY=VALUE       environment for every command (repeatable; kept 0600 in the\n"     \
  "                        runtime directory, not in .cordon/)\n"                             \
  "  --ro PATH             workspace path mounted read-only (repeatable; .: all)\n"           \
  "                        (beneath a --hide directory: that part shown read-only)\n"         \
  "  --hide PATH           workspace path hidden from the command (repeatable)\n"             \
  "                        (a protected file with other names, hard links, is refused; the\n" \
  "                        directories above a protected path cannot be moved inside)\n"      \
  "  --hide-if-exists PATH --hide PATH when it exists in the workspace, else nothing\n"       \
  "                        (repeatable: one list of secrets for every project; a missing\n"   \
  "                        --hide PATH stays an error)\n"                                     \
  "  --allow-ro HOSTPATH   grant a host path read-only (also CORDON_SANDBOX_ALLOW=a:b)\n"     \
  "                        (each .cordon/, cordon's keys and state stay hidden in\n"          \
  "                        grants and workspace; a workspace or grant inside: refused)\n"     \
  "  --net CLASS           egress: none, loopback, restricted, open (default: loopback,\n"    \
  "                        a private lo only, on ns and docker; worktree: open)\n"            \
  "                        (none: no interface at all, lo down; ns only)\n"                   \
  "                        (restricted: only lo, and a proxy outside the sandbox at\n"        \
  "                        127.0.0.1:3128 that lets through the --allow-domain names;\n"      \
  "                        HTTP_PROXY, HTTPS_PROXY, ALL_PROXY are set; ns only)\n"            \
  "  --allow-domain NAME   with --net restricted: NAME may be reached (repeatable;\n"         \
  "                        *.NAME: its subdomains, never NAME itself)\n"                      \
  "  --allow-cidr CIDR     with --net restricted: open a range the proxy always blocks\n"     \
  "                        (loopback, private, link-local...) (repeatable)\n"                 \
  "  --resolve NAME:ADDR   with --net restricted: the proxy resolves NAME to ADDR\n"          \
  "                        (repeatable, like curl's; [ADDR] for IPv6)\n"                      \
  "  --memory SIZE --pids N --cpus X --nofile N --fsize SIZE\n"                               \
  "                        resource limits (SIZE takes K, M, G); refused if unenforceable;\n" \
  "                        --fsize (largest file a command may write) defaults to 4G on ns\n" \
  "                        and docker (0 or unlimited: none); --cpus N, N whole, is also\n"   \
  "                        the CPUs the command sees (nproc); rootless, limits need a\n"      \
  "                        delegated cgroup v2 subtree (CORDON_CGROUP_ROOT, else own)\n"      \
  "  --tmp-size SIZE       size of /tmp and /dev/shm, each (default: the --memory limit,\n"   \
  "                        else 1G); their pages count against --memory\n"                    \
  "  --timeout SECONDS     exec timeout\n"                                                    \
  "  --image IMAGE         image for container and VM backends\n"                             \
  "  --no-require-enforcement\n"                                                              \
  "                        run even if the backend does not enforce what is asked\n"          \
  "                        (--ro, --memory, --net none...: a WARNING line each, and\n"        \
  "                        an enforcement.waived entry in the audit log), or run\n"           \
  "                        unconfined (CORDON_SANDBOX=off, or no backend)\n"                  \
  "  --user USER           cordon (default: uid/gid 1000 on ns and docker) or root (uid 0\n"  \
  "                        of the sandbox's user namespace, no capabilities: ns only)\n"      \
  "  --quiet               no notice that a backend isolates nothing (CORDON_QUIET=1)\n"      \
  "  -v, --volume NAME:PATH[:ro]\n"                                                           \
  "                        mount the project's persistent volume NAME (.cordon/volumes/,\n"   \
  "                        made on first use, kept after the session, never snapshotted)\n"   \
  "                        at PATH; :ro read-only (repeatable; ns and docker only)\n"         \
  "  -v /HOST/DIR:PATH[:ro]\n"                                                                \
  "                        bind an existing host directory at PATH (one that is, holds or\n"  \
  "                        lies in a .cordon/, the key dir or state home: refused); PATH\n"   \
  "                        is absolute, outside the workspace root, /proc, /sys, /dev,\n"     \
  "                        /tmp, /run, /boot, /etc, /usr, /bin, /sbin, /lib*, /opt\n"         \
  "  --json                machine-readable output\n"                                         \
  "  --monitor NAME        microvm: qemu, firecracker, libkrun or fake (default:\n"           \
  "                        $CORDON_MICROVM_MONITOR, else qemu); one that cannot run\n"        \
  "                        is refused naming what it lacks, never replaced (fake:\n"          \
  "                        commands on the host, unconfined, for tests)\n"                    \
  "  --device HOST[:PATH]  pass the character device node HOST into the sandbox, read-\n"     \
  "                        write, at PATH beneath /dev (default: HOST when under /dev,\n"     \
  "                        else /dev/BASENAME) (repeatable; ns and docker only)\n"            \
  "  --gpu all|N[,N...]    pass GPUs in: /dev/nvidiaN with the NVIDIA control nodes,\n"       \
  "                        /dev/dri/cardN and renderD(128+N); all: every one found; an\n"     \
  "                        index not found, or no GPU at all, is refused by name\n"

/* Returns 0 when the option was handled, 1 when it is not a manifest option, or an exit code
 * (> 1) to stop with. */
int manifest_option(const char *verb, int c, const char *arg, struct manifest_opts *o);
/* Build the manifest; the vectors stay owned by o. */
int cli_build_manifest(struct manifest_opts *o, struct cordon_manifest *m,
                       struct cordon_repo_spec *repo);
int select_backend(const struct cordon_registry *reg, struct manifest_opts *o,
                   const struct cordon_manifest *m, const struct cordon_backend **out,
                   struct cordon_error **err);
int apply_backend(const struct cordon_backend *b, const struct manifest_opts *o,
                  struct cordon_manifest *m, struct cordon_error **err);

/* ---- exec output (run and session exec) ---- */

/* Bytes as a JSON string, or null when they are not UTF-8. */
json_t *bytes_json(const unsigned char *data, size_t len);
/* Print the result the way a user expects and return the exit code of the verb. */
int emit_result(const struct cordon_exec_result *r, bool json, double timeout);
/* The memory limit the next emit_result names when the command was killed by it (0: unknown). */
void emit_result_memory_limit(uint64_t bytes);
/* cordon itself failed to start or run the command: the message on stderr and, with json, an
 * object with "error" {message, kind} and exit_code CODE on stdout. Frees err; returns CODE
 * (EXIT_CORDON, or EXIT_NOT_FOUND for a session that does not exist). */
int emit_failure(struct cordon_error *err, bool json, int code);
/* FILE's bytes, or cordon's stdin for "-"; nothing for NULL. */
int load_stdin(const char *file, unsigned char **data, size_t *len, struct cordon_error **err);

/* A --ro or --hide path not found in a workspace that defaulted to an empty directory: say
 * that in err's message, naming --workspace. */
void manifest_workspace_hint(const struct manifest_opts *o, struct cordon_error *err);

#endif
