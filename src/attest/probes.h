/* The probes (probes.c): one backend driven through the public session API, each declared
 * capability exercised and the boundary examined from inside. The host side of the boundary
 * probes (a marker process, a marker file, a loopback listener) is set up once by the caller
 * (attest.c) and handed in. */
#ifndef CORDON_ATTEST_PROBES_H
#define CORDON_ATTEST_PROBES_H

#include <stdbool.h>

#include <cordon/session.h>

#include "attest/document.h"

struct attest_host {
  int marker_pid;          /* a host process named ATTEST_MARKER_COMM */
  const char *marker_file; /* a host file outside every workspace */
  const char *volume_dir;  /* a host directory for the persistent-volume probe */
  int listener_port;       /* a TCP listener on the host's 127.0.0.1 */
  const char *kernel_release;
};

#define ATTEST_MARKER_COMM "cordon-attest"

/* What the boundary script printed, one value per key (pure parse; strings malloc'd). */
struct attest_inside {
  char *proc, *marker_comm, *file, *uid, *uid_map, *seccomp, *kernel, *interfaces, *connect;
  char *memory, *pids; /* dd's exit code; "survived" or "stopped"; "" when not tried */
};
int attest_inside_parse(const char *text, struct attest_inside *out);
void attest_inside_clear(struct attest_inside *in);
/* The one exec's output begins with ATTEST_EXEC_LINE and, when the file probe asks, the
 * workspace file between the two markers; the boundary's lines follow. */
#define ATTEST_EXEC_LINE "attest-exec"
#define ATTEST_FILE_BEGIN "attest-file-begin"
#define ATTEST_FILE_END "attest-file-end"
struct attest_output {
  bool exec_line;   /* the output began with ATTEST_EXEC_LINE */
  bool file_seen;   /* the file's markers were found */
  bool file_equal;  /* what was between them is the file's content, byte for byte */
  const char *rest; /* the boundary's lines (into the output) */
};
/* Split the output (pure): -1 when it does not begin with the exec line. file_content NULL:
 * no file was asked for. */
int attest_output_split(const char *out, size_t length, const char *file_content,
                        struct attest_output *split);
/* The exec probe's verdict (ran: the exec call succeeded; exit code 3 and the exec line) and,
 * when file_probed, the file probe's inside read (pure). */
int attest_exec_file_probes(struct attest_backend *b, bool ran, int exit_code, size_t length,
                            const struct attest_output *split, bool file_probed);
/* The boundary verdicts from what was seen inside (pure). net_none: the session had egress
 * none. */
int attest_boundary_probes(struct attest_backend *b, const struct attest_inside *in,
                           const struct attest_host *host, bool net_none);
/* The memory and pids limits' verdicts from what was seen inside (pure); a limit the backend
 * does not enforce is refuted without a look. */
int attest_limit_probes(struct attest_backend *b, const struct attest_inside *in,
                        bool memory_enforced, bool pids_enforced);
/* The host uid that uid maps to through uid_map's triples; -1 when unmapped. */
long long attest_host_uid(const char *uid_map, long long uid);

/* Probe one backend; a backend that is unavailable or cannot start a session is recorded
 * with every declared capability unverifiable. plugin: its boundary is not observable. */
int attest_probe_backend(struct cordon_context *ctx, const struct cordon_backend *backend,
                         bool plugin, const struct attest_host *host, struct attest_backend *out,
                         struct cordon_error **err);

#endif
