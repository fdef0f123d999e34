/* The probes: one backend driven through the public session API (never its operations
 * directly), each declared capability exercised and the boundary examined from inside by one
 * small POSIX sh script. What is seen inside is parsed and judged by pure functions; the rest
 * of this file only creates, runs and destroys sessions. Evidence names what was seen in words
 * that do not change from run to run (no pids, ids, times or temporary paths), so an unchanged
 * host attests to the same bytes. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cordon/session.h>

#include "attest/probes.h"
#include "base/cleanup.h"
#include "base/strv.h"
#include "confine/devices.h"

#define PROBE_TIMEOUT 30.0
#define FILE_PROBE_PATH "attest-probe/file"
#define FILE_PROBE_CONTENT "cordon attest file_rw probe\n"
#define VOLUME_TARGET "/attest-volume"
#define VOLUME_CONTENT "cordon attest volume probe"
/* A VM's memory limit is its guest RAM: enough for it to boot in. Any other sandbox gets a
 * small one: the kernel reclaims and kills at the limit in a time that grows with it (about
 * 2.5 s at 160 MiB, 0.2 s at 16 MiB for ns on a loaded host), and the probes' commands (sh,
 * uname, bash) fit in it many times over. */
#define MEMORY_LIMIT_VM (160ull << 20)
#define MEMORY_LIMIT (16ull << 20)
/* Room for the probes' own commands (sh and one more) beside the runtime's. */
#define PIDS_LIMIT 8u
/* One buffer past the memory limit, touched by the read: bounded (256 MiB) where the limit is a
 * lie, and stopped at the limit where it holds (no slow pipe into a growing string). */
#define MEMORY_PAST_LIMIT "256M"

/* Prints a line for the exec probe and the file probe's file as the command inside reads it
 * ($6, when file_rw is probed), then key=value lines: what the sandbox sees of the host, and
 * exits 3 (the exec probe's exit code). $1 the marker pid, $2 the marker file, $3 the
 * listener's port; then the limits, each where it is asked for: $4 the size of one
 * buffer past the memory limit (memory= dd's exit code: 0 where the limit did not stop it, 137
 * where the kernel killed it, nomem where dd was refused its buffer), $5 the pids limit
 * (pids=survived where a chain of twice as many processes as the limit was all alive at once:
 * see the pids part below). One exec for all of them, and only POSIX sh: the files are read by the
 * shell's own `read` (its /proc/self is the command's view: same namespaces, credentials and
 * seccomp filter), and so is the kernel release (/proc/sys/kernel/osrelease, what uname -r prints),
 * so the script starts one binary before the limits: the client that connects (bash, python3 or
 * nc); then dd for the memory limit, and only forks of the shell for the pids limit. Each exec and
 * each process costs a sandbox with a user-space kernel (gvisor) or a VM a great deal (a cold start
 * of bash in the TCG guest: about 0.5 s at load 8). The interfaces are listed in the file's order
 * and sorted by the parse. */
static const char boundary_script[] =
    "p=$1 f=$2 port=$3\n"
    /* The exec and file_rw probes' part: a line, then the workspace file $6 between markers
     * (split off by attest_output_split). */
    "echo " ATTEST_EXEC_LINE "\n"
    "if [ -n \"$6\" ]; then echo " ATTEST_FILE_BEGIN
    /* The shell's own read, not cat: one process fewer. Each line as read, and the last
     * one's unterminated rest as it is, so the host compares byte for byte all the same. */
    "; { while IFS= read -r l; do printf '%s\\n' \"$l\"; done; printf %s \"$l\"; } "
    "2>/dev/null <\"$6\"; echo; echo " ATTEST_FILE_END "; fi\n"
    "[ -r /proc/self/status ] && echo proc=yes || echo proc=no\n"
    "c=; { read -r c </proc/$p/comm; } 2>/dev/null; echo \"comm=$c\"\n"
    "[ -e \"$f\" ] && echo file=visible || echo file=hidden\n"
    "u= s=; { while read -r k a b r; do case $k in Uid:) u=$b;; Seccomp:) s=$a;; esac; "
    "done </proc/self/status; } 2>/dev/null\n"
    "echo \"uid=$u\"\n"
    "m=; { while read -r a b n; do m=\"$m$a $b $n \"; done </proc/self/uid_map; } 2>/dev/null\n"
    /* A kernel without user namespaces has no uid_map: every uid is its own. */
    "[ -r /proc/self/status ] && [ ! -e /proc/self/uid_map ] && m=none\n"
    "echo \"uid_map=$m\"\n"
    "echo \"seccomp=$s\"\n"
    /* The release uname -r prints, read from /proc without a process; uname where it is not
     * there. */
    "k=; { read -r k </proc/sys/kernel/osrelease; } 2>/dev/null\n"
    "[ -n \"$k\" ] || k=$(uname -r 2>/dev/null)\n"
    "echo \"kernel=$k\"\n"
    "l=0 i=; { while IFS=: read -r n r; do l=$((l+1)); [ $l -gt 2 ] && i=\"$i${n##* },\"; "
    "done </proc/net/dev; } 2>/dev/null\n"
    "echo \"interfaces=$i\"\n"
    "if command -v bash >/dev/null 2>&1; then\n"
    "  bash -c \"exec 3<>/dev/tcp/127.0.0.1/$port\" 2>/dev/null && echo connect=ok || "
    "echo connect=refused\n"
    "elif command -v python3 >/dev/null 2>&1; then\n"
    "  python3 -c \"import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), "
    "5)\" \"$port\" 2>/dev/null && echo connect=ok || echo connect=refused\n"
    "elif command -v nc >/dev/null 2>&1; then\n"
    "  nc -w 3 127.0.0.1 \"$port\" </dev/null >/dev/null 2>&1 && echo connect=ok || "
    "echo connect=refused\n"
    "else echo connect=notool; fi\n"
    /* The limits, last. pids: a chain of twice as many processes as the limit, all alive at
     * once, a margin above the processes a runtime keeps in the sandbox's count for itself
     * (ns: up to 6), so the chain's end is reached only where the limit does not hold. Each
     * link is a forked shell (a command substitution) that waits for the next one's output,
     * and only the last prints "survived": a fork that fails ends its link without it (dash
     * exits there; another shell's substitution is empty). Forks of the shell, no exec: a
     * process started from a binary costs gvisor or a TCG guest much (16 `sleep`s: 2.3 CPU-s
     * under gvisor, 0.2 in the TCG guest; a chain of 16: 0.75 and 0.05). With a memory limit
     * alone (ns, 16 MiB) it survives; with pids 8 it stops (docs/design.md). */
    "if [ -n \"$4\" ]; then e=$(dd if=/dev/zero of=/dev/null bs=$4 count=1 2>&1 >/dev/null); "
    "r=$?; case $r:$e in 1:*emory*) r=nomem;; esac; echo \"memory=$r\"; fi\n"
    "if [ -n \"$5\" ]; then\n"
    "  link() { if [ \"$1\" -gt 0 ]; then c=$(link $(($1-1))) && echo \"$c\"; "
    "else echo survived; fi; }\n"
    "  r=$( (link $(($5*2))) 2>/dev/null)\n"
    "  echo \"pids=${r:-stopped}\"\n"
    "fi\n"
    "exit 3\n";

/* ---- pure: what the script printed, and what it means ---------------------------------- */

int attest_output_split(const char *out, size_t length, const char *file_content,
                        struct attest_output *split) {
  memset(split, 0, sizeof(*split));
  static const char exec_line[] = ATTEST_EXEC_LINE "\n";
  static const char begin[] = ATTEST_FILE_BEGIN "\n";
  static const char end[] = "\n" ATTEST_FILE_END "\n";
  if (!out || length < strlen(exec_line) || memcmp(out, exec_line, strlen(exec_line)))
    return -1;
  split->exec_line = true;
  const char *at = out + strlen(exec_line), *stop = out + length;
  split->rest = at;
  if (!file_content || (size_t)(stop - at) < strlen(begin) || memcmp(at, begin, strlen(begin)))
    return 0;
  at += strlen(begin);
  const char *marker = memmem(at, (size_t)(stop - at), end, strlen(end));
  if (!marker)
    return 0;
  size_t want = strlen(file_content);
  split->file_seen = true;
  split->file_equal = (size_t)(marker - at) == want && !memcmp(at, file_content, want);
  split->rest = marker + strlen(end);
  return 0;
}

void attest_inside_clear(struct attest_inside *in) {
  char **fields[] = {&in->proc,    &in->marker_comm, &in->file,   &in->uid,
                     &in->uid_map, &in->seccomp,     &in->kernel, &in->interfaces,
                     &in->connect, &in->memory,      &in->pids};
  for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
    free(*fields[i]);
    *fields[i] = NULL;
  }
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "b,a,lo," to "a,b,lo,": the interfaces in the order of their names, each followed by a
 * comma, whatever order the sandbox's /proc/net/dev lists them in. */
static int sort_name_list(char *list) {
  size_t n = 0, length = strlen(list);
  for (const char *c = list; *c; c++)
    n += *c == ',';
  if (n < 2 || list[length - 1] != ',')
    return 0;
  _cleanup_free_ char *copy = strdup(list);
  _cleanup_free_ char **names = calloc(n + 1, sizeof(*names));
  if (!copy || !names)
    return -1;
  size_t k = 0;
  for (char *save = NULL, *t = strtok_r(copy, ",", &save); t && k <= n;
       t = strtok_r(NULL, ",", &save))
    names[k++] = t;
  qsort(names, k, sizeof(*names), compare_names);
  size_t at = 0;
  for (size_t i = 0; i < k; i++)
    at += (size_t)snprintf(list + at, length + 1 - at, "%s,", names[i]);
  list[at] = '\0';
  return 0;
}

int attest_inside_parse(const char *text, struct attest_inside *out) {
  memset(out, 0, sizeof(*out));
  static const char *const keys[] = {"proc",    "comm",    "file",   "uid",
                                     "uid_map", "seccomp", "kernel", "interfaces",
                                     "connect", "memory",  "pids"};
  char **fields[] = {&out->proc,    &out->marker_comm, &out->file,   &out->uid,
                     &out->uid_map, &out->seccomp,     &out->kernel, &out->interfaces,
                     &out->connect, &out->memory,      &out->pids};
  for (const char *line = text; line && *line;) {
    const char *end = strchr(line, '\n');
    size_t length = end ? (size_t)(end - line) : strlen(line);
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
      size_t kl = strlen(keys[k]);
      if (length > kl && !strncmp(line, keys[k], kl) && line[kl] == '=' && !*fields[k]) {
        *fields[k] = strndup(line + kl + 1, length - kl - 1);
        if (!*fields[k])
          return -1;
      }
    }
    line = end ? end + 1 : NULL;
  }
  for (size_t k = 0; k < sizeof(fields) / sizeof(fields[0]); k++)
    if (!*fields[k] && !(*fields[k] = strdup("")))
      return -1;
  return sort_name_list(out->interfaces);
}

long long attest_host_uid(const char *uid_map, long long uid) {
  long long inside, outside, count;
  int used = 0;
  for (const char *s = uid_map;
       s && sscanf(s, "%lld %lld %lld%n", &inside, &outside, &count, &used) == 3; s += used)
    if (uid >= inside && uid - inside < count)
      return outside + (uid - inside);
  return -1;
}

static int host_uid_probe(struct attest_backend *b, const struct attest_inside *in) {
  char *end = NULL;
  long long uid = strtoll(in->uid, &end, 10);
  /* No uid_map where /proc is there (a kernel without user namespaces, as a minimal guest's):
   * every process is in the initial namespace, the identity map. */
  const char *map = strcmp(in->uid_map, "none") ? in->uid_map : "0 0 4294967295";
  long long host = (*in->uid && end && !*end) ? attest_host_uid(map, uid) : -1;
  if (host < 0)
    return attest_probe_add(b, ATTEST_NOT_ROOT_ON_HOST, ATTEST_BOUNDARY, ATTEST_UNVERIFIABLE,
                            "uid_map_unreadable",
                            "the uid inside or its map to the host could not be read");
  if (host == 0)
    return attest_probe_add(b, ATTEST_NOT_ROOT_ON_HOST, ATTEST_BOUNDARY, ATTEST_REFUTED,
                            "host_root", "commands run as uid 0 of the host (uid %lld inside)",
                            uid);
  return attest_probe_add(b, ATTEST_NOT_ROOT_ON_HOST, ATTEST_BOUNDARY, ATTEST_OBSERVED,
                          "host_uid_unprivileged",
                          "uid %lld inside maps to a host uid other than 0", uid);
}

int attest_boundary_probes(struct attest_backend *b, const struct attest_inside *in,
                           const struct attest_host *host, bool net_none) {
  int r = 0;
  if (strcmp(in->proc, "yes"))
    r |= attest_probe_add(b, ATTEST_HOST_PROCESSES_INVISIBLE, ATTEST_BOUNDARY, ATTEST_UNVERIFIABLE,
                          "no_proc", "/proc is not readable inside");
  else if (!strcmp(in->marker_comm, ATTEST_MARKER_COMM))
    r |= attest_probe_add(b, ATTEST_HOST_PROCESSES_INVISIBLE, ATTEST_BOUNDARY, ATTEST_REFUTED,
                          "host_process_visible", "a host process is visible in /proc inside");
  else
    r |= attest_probe_add(b, ATTEST_HOST_PROCESSES_INVISIBLE, ATTEST_BOUNDARY, ATTEST_OBSERVED,
                          "host_process_hidden", "a host process is not visible in /proc inside");
  if (!strcmp(in->file, "visible"))
    r |= attest_probe_add(b, ATTEST_HOST_FILES_INVISIBLE, ATTEST_BOUNDARY, ATTEST_REFUTED,
                          "host_file_visible", "a host file outside the grant is visible inside");
  else
    r |= attest_probe_add(b, ATTEST_HOST_FILES_INVISIBLE, ATTEST_BOUNDARY, ATTEST_OBSERVED,
                          "host_file_hidden", "a host file outside the grant is not visible");
  r |= host_uid_probe(b, in);
  if (!strcmp(in->seccomp, "2"))
    r |= attest_probe_add(b, ATTEST_SECCOMP_IN_FORCE, ATTEST_BOUNDARY, ATTEST_OBSERVED,
                          "seccomp_filter", "the kernel reports a seccomp filter (mode 2)");
  else if (*in->seccomp)
    r |= attest_probe_add(b, ATTEST_SECCOMP_IN_FORCE, ATTEST_BOUNDARY, ATTEST_REFUTED,
                          "seccomp_mode", "the kernel reports seccomp mode %s", in->seccomp);
  else
    r |= attest_probe_add(b, ATTEST_SECCOMP_IN_FORCE, ATTEST_BOUNDARY, ATTEST_UNVERIFIABLE,
                          "seccomp_unreported", "/proc/self/status has no Seccomp line");
  if (!*in->kernel)
    r |= attest_probe_add(b, ATTEST_OWN_KERNEL, ATTEST_BOUNDARY, ATTEST_UNVERIFIABLE, "no_uname",
                          "no kernel release could be read inside");
  else if (!strcmp(in->kernel, host->kernel_release))
    r |= attest_probe_add(b, ATTEST_OWN_KERNEL, ATTEST_BOUNDARY, ATTEST_REFUTED, "host_kernel",
                          "the kernel release inside is the host's");
  else
    r |= attest_probe_add(b, ATTEST_OWN_KERNEL, ATTEST_BOUNDARY, ATTEST_OBSERVED, "own_kernel",
                          "the kernel release inside is %s, not the host's", in->kernel);
  if (!net_none)
    r |= attest_probe_add(b, ATTEST_NO_ROUTE_OFF, ATTEST_BOUNDARY, ATTEST_REFUTED,
                          "net_none_not_enforced", "the backend does not enforce egress none");
  else if (!*in->interfaces)
    r |= attest_probe_add(b, ATTEST_NO_ROUTE_OFF, ATTEST_BOUNDARY, ATTEST_UNVERIFIABLE,
                          "no_interface_list", "/proc/net/dev is not readable inside");
  else if (!strcmp(in->interfaces, "lo,") && strcmp(in->connect, "ok"))
    r |= attest_probe_add(b, ATTEST_NO_ROUTE_OFF, ATTEST_BOUNDARY, ATTEST_OBSERVED, "lo_only",
                          "with egress none only lo is up inside");
  else
    r |= attest_probe_add(b, ATTEST_NO_ROUTE_OFF, ATTEST_BOUNDARY, ATTEST_REFUTED, "route_off",
                          "with egress none: interfaces %s host loopback %s", in->interfaces,
                          strcmp(in->connect, "ok") ? "unreachable" : "reached");
  return r ? -1 : 0;
}

/* ---- effects: sessions ------------------------------------------------------------------ */

static int run_sh(struct cordon_session *s, const char *script, const char *const *args,
                  struct cordon_exec_result *res) {
  const char *argv[12] = {"sh", "-c", script, "attest"};
  for (size_t i = 0; args && args[i] && i < 7; i++)
    argv[4 + i] = args[i];
  struct cordon_exec_request req = {.argv = argv, .timeout = PROBE_TIMEOUT, .max_output = 65536};
  struct cordon_error *err = NULL;
  memset(res, 0, sizeof(*res));
  int r = cordon_session_exec(s, &req, res, &err);
  cordon_error_free(err);
  return r;
}

static int file_probe(struct attest_backend *b, struct cordon_session *s) {
  struct cordon_error *err = NULL;
  _cleanup_free_ unsigned char *data = NULL;
  size_t length = 0;
  const size_t want = strlen(FILE_PROBE_CONTENT);
  if (cordon_session_write(s, FILE_PROBE_PATH, FILE_PROBE_CONTENT, want, 0644, &err) < 0 ||
      cordon_session_read(s, FILE_PROBE_PATH, &data, &length, &err) < 0) {
    cordon_error_free(err);
    return attest_probe_add(b, "write_read_back", "file_rw", ATTEST_REFUTED, "io_error",
                            "writing or reading the file failed");
  }
  if (length != want || memcmp(data, FILE_PROBE_CONTENT, want))
    return attest_probe_add(b, "write_read_back", "file_rw", ATTEST_REFUTED, "content_differs",
                            "the file read back is not what was written");
  return attest_probe_add(b, "write_read_back", "file_rw", ATTEST_OBSERVED, "content_equal",
                          "a file written was read back byte for byte");
}

/* The exec probe and the file probe's inside read, from the one exec's result (pure). */
int attest_exec_file_probes(struct attest_backend *b, bool ran, int exit_code, size_t length,
                            const struct attest_output *split, bool file_probed) {
  int r = 0;
  if (!ran)
    r |= attest_probe_add(b, "exec", "exec", ATTEST_REFUTED, "exec_error", "the exec call failed");
  else if (exit_code == 3 && split->exec_line)
    r |= attest_probe_add(b, "exec", "exec", ATTEST_OBSERVED, "exit_and_output",
                          "sh -c printed what it was asked to and exited 3");
  else
    r |= attest_probe_add(b, "exec", "exec", ATTEST_REFUTED, "wrong_result",
                          "exit code %d, %zu bytes of output", exit_code, length);
  if (file_probed)
    r |= split->file_equal
             ? attest_probe_add(b, "visible_inside", "file_rw", ATTEST_OBSERVED, "content_equal",
                                "the command inside reads the file as written")
             : attest_probe_add(b, "visible_inside", "file_rw", ATTEST_REFUTED, "content_differs",
                                "the command inside does not see the file");
  return r ? -1 : 0;
}

/* Egress none (or loopback): the host's listener must be unreachable; open: reachable. */
static int network_probe(struct attest_backend *b, const struct attest_inside *in,
                         enum cordon_egress egress) {
  const char *class = cordon_egress_name(egress);
  if (!(b->declared & CORDON_CAP_EXEC) || !strcmp(in->connect, "notool") || !*in->connect)
    return attest_probe_add(b, "egress_class", "network", ATTEST_UNVERIFIABLE, "no_client",
                            "no way to open a connection inside (class %s)", class);
  bool reached = !strcmp(in->connect, "ok");
  if (egress == CORDON_EGRESS_RESTRICTED)
    return attest_probe_add(b, "egress_class", "network", ATTEST_UNVERIFIABLE, "restricted",
                            "class restricted is not probed");
  bool want = egress == CORDON_EGRESS_OPEN;
  return attest_probe_add(b, "egress_class", "network",
                          reached == want ? ATTEST_OBSERVED : ATTEST_REFUTED,
                          reached == want ? "class_holds" : "class_broken",
                          "class %s: a listener on the host's loopback was %s", class,
                          reached ? "reached" : "unreachable");
}

static int gpu_probe(struct attest_backend *b, struct cordon_session *s) {
  struct cordon_exec_result res;
  int rc = run_sh(s,
                  "for d in /dev/nvidia[0-9]* /dev/dri/renderD* /dev/dri/card*; do "
                  "[ -c \"$d\" ] && head -c 0 <\"$d\" 2>/dev/null && { echo usable; exit 0; }; "
                  "done; echo none",
                  NULL, &res);
  bool usable = rc == 0 && res.stdout_length >= 6 && !memcmp(res.stdout_data, "usable", 6);
  cordon_exec_result_clear(&res);
  return usable ? attest_probe_add(b, "device_node", "gpu", ATTEST_OBSERVED, "device_opens",
                                   "a GPU device node is visible and opens inside")
                : attest_probe_add(b, "device_node", "gpu", ATTEST_REFUTED, "no_device",
                                   "no GPU device node opens inside");
}

/* One limit's verdict from what the script printed (pure). */
static int limit_verdict(struct attest_backend *b, const char *name, bool enforced,
                         const char *seen, const char *what) {
  if (!enforced)
    return attest_probe_add(b, name, ATTEST_BOUNDARY, ATTEST_REFUTED, "not_enforced",
                            "the backend does not enforce a %s limit", what);
  if (!strcmp(seen, "survived") || !strcmp(seen, "0"))
    return attest_probe_add(b, name, ATTEST_BOUNDARY, ATTEST_REFUTED, "limit_exceeded",
                            "going past the %s limit was not stopped", what);
  /* pids: fewer children started than were tried; memory: the kernel killed the command
   * (137), or dd said it could not get its buffer (nomem). Anything else (no dd, 127; another
   * failure of dd, 1; no line at all: the script did not get this far) shows no limit at
   * work. */
  if (!strcmp(seen, "stopped") || !strcmp(seen, "137") || !strcmp(seen, "nomem"))
    return attest_probe_add(b, name, ATTEST_BOUNDARY, ATTEST_OBSERVED, "limit_stopped",
                            "going past the %s limit was stopped", what);
  return attest_probe_add(b, name, ATTEST_BOUNDARY, ATTEST_UNVERIFIABLE, "probe_failed",
                          "the %s probe could not run", what);
}

int attest_limit_probes(struct attest_backend *b, const struct attest_inside *in,
                        bool memory_enforced, bool pids_enforced) {
  int r = limit_verdict(b, ATTEST_MEMORY_LIMIT, memory_enforced, in->memory, "memory");
  r |= limit_verdict(b, ATTEST_PIDS_LIMIT, pids_enforced, in->pids, "pids");
  return r ? -1 : 0;
}

/* Every declared capability unverifiable, for one reason, and the boundary too. */
static int all_unverifiable(struct attest_backend *b, const char *reason, const char *evidence) {
  static const uint32_t caps[] = {CORDON_CAP_EXEC,     CORDON_CAP_FILE_RW,
                                  CORDON_CAP_GPU,      CORDON_CAP_NETWORK,
                                  CORDON_CAP_SNAPSHOT, CORDON_CAP_PERSISTENT_VOLUMES};
  for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++)
    if ((b->declared & caps[i]) &&
        attest_probe_add(b, cordon_capability_name(caps[i]), cordon_capability_name(caps[i]),
                         ATTEST_UNVERIFIABLE, reason, "%s", evidence) < 0)
      return -1;
  return attest_probe_add(b, "boundary", ATTEST_BOUNDARY, ATTEST_UNVERIFIABLE, reason, "%s",
                          evidence);
}

static const char *declared_tier_reason(enum cordon_isolation_tier tier) {
  static const char *const reasons[] = {"tier_none", "tier_process", "tier_container", "tier_vm"};
  return (unsigned)tier < 4 ? reasons[tier] : "tier_none";
}

/* The second session: the snapshot resumed (its file and a new snapshot's id compared) and
 * the volume's data read back. Without a volume it runs no command, so it is made one-shot: a
 * backend that can builds its sandbox with the one command, which never comes (gvisor then
 * boots no sandbox at all); the file and the snapshot, on the host side, are the same either
 * way. With a volume it stays an ordinary session: its command reads the volume, and on ns a
 * resumed one-shot session's file and snapshot do not match before that command has run. */
static int second_session(struct cordon_context *ctx, const struct cordon_backend *backend,
                          const struct cordon_manifest *first, const char *snapshot_id,
                          struct attest_backend *b) {
  struct cordon_session *s = NULL;
  struct cordon_error *err = NULL;
  struct cordon_manifest second = *first;
  second.one_shot = !(b->declared & CORDON_CAP_PERSISTENT_VOLUMES);
  const struct cordon_manifest *m = &second;
  int rc = snapshot_id ? cordon_session_resume(ctx, backend, m, snapshot_id, &s, &err)
                       : cordon_session_create(ctx, backend, m, &s, &err);
  cordon_error_free(err);
  err = NULL;
  int r = 0;
  if (snapshot_id) {
    _cleanup_free_ unsigned char *data = NULL;
    _cleanup_free_ char *again = NULL;
    size_t length = 0;
    bool same = rc == 0 && cordon_session_read(s, FILE_PROBE_PATH, &data, &length, &err) == 0 &&
                length == strlen(FILE_PROBE_CONTENT) && !memcmp(data, FILE_PROBE_CONTENT, length) &&
                cordon_session_snapshot(s, &again, &err) == 0 && !strcmp(again, snapshot_id);
    cordon_error_free(err);
    err = NULL;
    r |= same ? attest_probe_add(b, "take_resume_compare", "snapshot", ATTEST_OBSERVED, "same_id",
                                 "a resumed snapshot holds the file and snapshots to "
                                 "the same id")
              : attest_probe_add(b, "take_resume_compare", "snapshot", ATTEST_REFUTED, "differs",
                                 "the resumed snapshot differs or could not be made");
  }
  if (b->declared & CORDON_CAP_PERSISTENT_VOLUMES) {
    struct cordon_exec_result res = {0};
    const char *args[] = {VOLUME_TARGET "/v", NULL};
    bool kept = rc == 0 && run_sh(s, "cat \"$1\"", args, &res) == 0 && res.exit_code == 0 &&
                res.stdout_length == strlen(VOLUME_CONTENT) &&
                !memcmp(res.stdout_data, VOLUME_CONTENT, res.stdout_length);
    cordon_exec_result_clear(&res);
    r |= kept ? attest_probe_add(b, "survives_session", "persistent_volumes", ATTEST_OBSERVED,
                                 "data_kept", "data written in one session is read in the next")
              : attest_probe_add(b, "survives_session", "persistent_volumes", ATTEST_REFUTED,
                                 "data_lost", "data written in one session is not in the next");
  }
  if (s && cordon_session_destroy(s, &err) < 0)
    cordon_error_free(err);
  return r ? -1 : 0;
}

/* The second session runs beside the rest of the first: it needs only the snapshot and the
 * volume's data, both made early. Its probes go to a backend record of its own (a record is
 * not shared between threads) and are moved over when it is joined. */
struct second {
  struct cordon_context *ctx;
  const struct cordon_backend *backend;
  const struct cordon_manifest *m;
  const char *snapshot_id;
  struct attest_backend b;
  int r;
  pthread_t thread;
  bool running, started;
};

static void *second_thread(void *arg) {
  struct second *sec = arg;
  sec->r = second_session(sec->ctx, sec->backend, sec->m, sec->snapshot_id, &sec->b);
  return NULL;
}

/* Start it in a thread, or run it here when no thread can be made. */
static void second_start(struct second *sec, const struct attest_backend *b) {
  sec->b.declared = b->declared;
  sec->started = true;
  sec->running = pthread_create(&sec->thread, NULL, second_thread, sec) == 0;
  if (!sec->running)
    second_thread(sec);
}

static int second_join(struct second *sec, struct attest_backend *b) {
  if (sec->running)
    pthread_join(sec->thread, NULL);
  sec->running = false;
  int r = sec->r;
  for (size_t i = 0; i < sec->b.n_probes; i++) {
    const struct attest_probe *p = &sec->b.probes[i];
    r |= attest_probe_add(b, p->name, p->capability, p->verdict, p->reason, "%s", p->evidence);
  }
  attest_backend_clear(&sec->b);
  return r;
}

/* The first session's probes: exec, file_rw, the volume's write and the snapshot first (so
 * the second session can start beside the rest), then gpu, and network, the boundary and the
 * limits from one exec. */
static int first_session(struct cordon_session *s, const struct cordon_backend *backend,
                         bool plugin, const struct attest_host *host, enum cordon_egress egress,
                         struct attest_backend *b, char **snapshot_id, struct second *sec) {
  bool can_exec = b->declared & CORDON_CAP_EXEC;
  int r = 0;
  /* The file probe's host side now; its inside read is part of the one exec below. */
  bool file_written = false;
  if (b->declared & CORDON_CAP_FILE_RW) {
    size_t before = b->n_probes;
    r |= file_probe(b, s);
    file_written = b->n_probes > before && b->probes[before].verdict == ATTEST_OBSERVED;
  }
  struct cordon_exec_result res = {0};
  if (b->declared & CORDON_CAP_PERSISTENT_VOLUMES) {
    const char *vargs[] = {VOLUME_TARGET "/v", NULL};
    if (!can_exec || run_sh(s, "printf %s '" VOLUME_CONTENT "' >\"$1\"", vargs, &res) < 0)
      r |= attest_probe_add(b, "write_in_session", "persistent_volumes", ATTEST_UNVERIFIABLE,
                            "needs_exec", "no command could write the volume");
    cordon_exec_result_clear(&res);
  }
  struct cordon_error *err = NULL;
  if ((b->declared & CORDON_CAP_SNAPSHOT) && cordon_session_snapshot(s, snapshot_id, &err) < 0) {
    cordon_error_free(err);
    r |= attest_probe_add(b, "take_resume_compare", "snapshot", ATTEST_REFUTED, "take_failed",
                          "taking a snapshot failed");
  }
  if (r == 0 && (*snapshot_id || (b->declared & CORDON_CAP_PERSISTENT_VOLUMES))) {
    sec->snapshot_id = *snapshot_id;
    second_start(sec, b);
  }
  /* gpu in an exec of its own, before the one that goes past the limits. */
  if (b->declared & CORDON_CAP_GPU)
    r |= can_exec ? gpu_probe(b, s)
                  : attest_probe_add(b, "device_node", "gpu", ATTEST_UNVERIFIABLE, "needs_exec",
                                     "no command could run inside");
  /* The limits are tried only where they are enforced, and never for a plugin (no limit is
   * asked of it). */
  bool memory = !plugin && (backend->enforces & CORDON_FEATURE_MEMORY);
  bool pids = !plugin && (backend->enforces & CORDON_FEATURE_PIDS);
  struct attest_inside in = {0};
  char pid[16], port[16], limit[16];
  snprintf(pid, sizeof(pid), "%d", host->marker_pid);
  snprintf(port, sizeof(port), "%d", host->listener_port);
  snprintf(limit, sizeof(limit), "%u", PIDS_LIMIT);
  bool file_probed = can_exec && file_written;
  const char *args[] = {pid,
                        host->marker_file,
                        port,
                        memory ? MEMORY_PAST_LIMIT : "",
                        pids ? limit : "",
                        file_probed ? FILE_PROBE_PATH : "",
                        NULL};
  /* One exec for the exec probe, the file probe's inside read, the boundary and the limits:
   * each exec costs gvisor or a VM much. */
  bool ran = can_exec && run_sh(s, boundary_script, args, &res) == 0;
  struct attest_output split = {0};
  bool seen = ran &&
              attest_output_split((const char *)res.stdout_data, res.stdout_length,
                                  FILE_PROBE_CONTENT, &split) == 0 &&
              res.exit_code == 3 && attest_inside_parse(split.rest, &in) == 0;
  if (can_exec)
    r |= attest_exec_file_probes(b, ran, res.exit_code, res.stdout_length, &split, file_probed);
  cordon_exec_result_clear(&res);
  if (b->declared & CORDON_CAP_NETWORK)
    r |= seen ? network_probe(b, &in, egress)
              : attest_probe_add(b, "egress_class", "network", ATTEST_UNVERIFIABLE, "needs_exec",
                                 "no command could run inside to connect");
  if (plugin)
    /* A plugin may run its commands anywhere, another machine included: what it shows of a
     * boundary cannot be told from a remote host's, so none is taken as observed. */
    r |= attest_probe_add(b, "boundary", ATTEST_BOUNDARY, ATTEST_UNVERIFIABLE,
                          "plugin_boundary_unobservable",
                          "a plugin's commands may run off this host");
  else if (seen)
    r |= attest_boundary_probes(b, &in, host, egress == CORDON_EGRESS_NONE) |
         attest_limit_probes(b, &in, memory, pids) |
         attest_probe_add(b, ATTEST_DECLARED_TIER, ATTEST_BOUNDARY, ATTEST_UNVERIFIABLE,
                          declared_tier_reason(backend->tier),
                          "declared %s: the measured tier is never above it",
                          cordon_tier_name(backend->tier));
  else
    r |= attest_probe_add(b, "boundary", ATTEST_BOUNDARY, ATTEST_UNVERIFIABLE, "needs_exec",
                          "no command could run inside");
  attest_inside_clear(&in);
  return r ? -1 : 0;
}

int attest_probe_backend(struct cordon_context *ctx, const struct cordon_backend *backend,
                         bool plugin, const struct attest_host *host, struct attest_backend *out,
                         struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  /* What the backend has on this host: `gpu` only where it takes devices and GPU nodes exist. */
  out->declared = cordon_backend_capabilities(backend) & CORDON_ATTEST_CAPABILITIES;
  if (!(out->name = strdup(backend->name)))
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "attestation");
  _cleanup_free_ char *why = NULL;
  if (backend->available && backend->available(backend, &why) != 1)
    return all_unverifiable(out, "backend_unavailable", why ? why : "unavailable") < 0
               ? cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "attestation")
               : 0;
  enum cordon_egress egress = (backend->enforces & CORDON_FEATURE_NET_NONE)
                                  ? CORDON_EGRESS_NONE
                                  : cordon_backend_default_egress(backend);
  struct cordon_volume volume = {.source = host->volume_dir, .target = VOLUME_TARGET};
  bool volumes = out->declared & CORDON_CAP_PERSISTENT_VOLUMES;
  struct cordon_manifest m = {
      .ephemeral = true,
      .default_timeout = PROBE_TIMEOUT,
      .volumes = volumes ? &volume : NULL,
      .n_volumes = volumes ? 1 : 0,
      .policy = {.egress = egress, .require_enforcement = true},
  };
  /* The gpu probe needs the nodes granted: every GPU found, as `--gpu all` would. */
  _cleanup_(strv_freep) char **gpus = NULL;
  if ((out->declared & CORDON_CAP_GPU) && confine_gpu_resolve("all", &gpus, NULL) == 0)
    m.devices = (const char *const *)gpus;
  if (!plugin && (backend->enforces & CORDON_FEATURE_MEMORY))
    m.policy.limits.memory_bytes = backend->tier == CORDON_TIER_VM ? MEMORY_LIMIT_VM : MEMORY_LIMIT;
  if (!plugin && (backend->enforces & CORDON_FEATURE_PIDS))
    m.policy.limits.pids = PIDS_LIMIT;
  struct cordon_session *s = NULL;
  struct cordon_error *create_err = NULL;
  if (cordon_session_create(ctx, backend, &m, &s, &create_err) < 0) {
    cordon_error_free(create_err);
    return all_unverifiable(out, "session_failed", "a session could not be created") < 0
               ? cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "attestation")
               : 0;
  }
  _cleanup_free_ char *snapshot_id = NULL;
  struct second sec = {.ctx = ctx, .backend = backend, .m = &m};
  int r = first_session(s, backend, plugin, host, egress, out, &snapshot_id, &sec);
  struct cordon_error *destroy_err = NULL;
  if (cordon_session_destroy(s, &destroy_err) < 0)
    cordon_error_free(destroy_err);
  if (sec.started)
    r |= second_join(&sec, out);
  return r < 0 ? cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "attestation") : 0;
}
