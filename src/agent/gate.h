/* The accuracy gate (`cordon gate`, `cordon agent --protect`, `cordon build --protect`): what a
 * set of protected project paths held before an agent ran, and what changed since.
 *
 * A baseline records, per protected path, what is there: a directory by its snapshot id (the
 * tree taken into the project's store, so a later check names the files that changed inside
 * it by diffing the two manifests), a regular file by its SHA-256 and mode, a symlink by its
 * target, anything else by its type, a missing path as absent. The file form is canonical JSON
 * (docs/formats.md, "Gate baselines"), kept under the project's .cordon/, out of the agent's
 * reach.
 *
 * Wiring it around a run is a few lines:
 *   agent_gate_record(cas, project, paths, &before, err);      // before the agent starts
 *   ... the agent runs ...
 *   agent_gate_compare(cas, project, before, &report, err);    // after it ended
 *   if (report->count) agent_gate_audit(ctx, "agent.gate_failed", report, err), exit 1. */
#ifndef CORDON_AGENT_GATE_H
#define CORDON_AGENT_GATE_H

#include <stddef.h>

#include <cordon/cas.h>
#include <cordon/error.h>
#include <cordon/session.h>

#define AGENT_GATE_FORMAT "cordon-gate-baseline/1"
#define AGENT_GATE_DIR ".cordon/gates"
/* A baseline file larger than this is refused unread (a few hundred thousand paths). */
#define AGENT_GATE_MAX_FILE ((size_t)64 << 20)

enum agent_gate_kind {
  AGENT_GATE_ABSENT = 0,
  AGENT_GATE_DIRECTORY, /* id: snapshot id */
  AGENT_GATE_FILE,      /* id: SHA-256 of the content; mode counts */
  AGENT_GATE_SYMLINK,   /* target */
  AGENT_GATE_SPECIAL,   /* fifo, socket or device: its type letter in special */
};

struct agent_gate_path {
  char *path; /* project-relative, normalised; "" is the project root */
  enum agent_gate_kind kind;
  char id[65];
  unsigned mode;
  char *target;
  char special; /* 'p', 's', 'c', 'b' */
};

struct agent_gate_baseline {
  struct agent_gate_path *paths; /* sorted by path, unique */
  size_t count;
};

enum agent_gate_change_kind {
  AGENT_GATE_CHANGED,
  AGENT_GATE_ADDED,
  AGENT_GATE_REMOVED,
};

struct agent_gate_change {
  enum agent_gate_change_kind kind;
  char *path; /* project-relative; a file inside a protected directory is named itself */
};

struct agent_gate_report {
  struct agent_gate_change *changes; /* in path order */
  size_t count;
};

/* Record what the protected paths (project-relative, NULL-terminated) of project_dir hold.
 * Directories are snapshotted into cas (kept by a ref, so a later check can diff them). A path
 * that passes through a symlink is refused (CORDON_ERR_DENIED): it could point anywhere. */
int agent_gate_record(struct cordon_cas *cas, const char *project_dir, const char *const *paths,
                      struct agent_gate_baseline **out, struct cordon_error **err);
/* Compare the paths of baseline with what project_dir holds now; *out lists every change (none:
 * count 0). Snapshots taken only for the comparison are forgotten again. */
int agent_gate_compare(struct cordon_cas *cas, const char *project_dir,
                       const struct agent_gate_baseline *baseline, struct agent_gate_report **out,
                       struct cordon_error **err);
void agent_gate_baseline_free(struct agent_gate_baseline *baseline);
void agent_gate_report_free(struct agent_gate_report *report);

/* "changed", "added", "removed". */
const char *agent_gate_change_kind_name(enum agent_gate_change_kind kind);

/* The canonical JSON of a baseline, and its strict reading (pure): anything but the exact
 * canonical form of a valid baseline is CORDON_ERR_INVALID, one line naming what is wrong. */
int agent_gate_encode(const struct agent_gate_baseline *baseline, char **out, size_t *length,
                      struct cordon_error **err);
int agent_gate_decode(const char *text, size_t length, struct agent_gate_baseline **out,
                      struct cordon_error **err);

/* Where a baseline named `given` lives: a bare name (no '/') is <project>/.cordon/gates/NAME;
 * any other path must lie beneath <project>/.cordon/ (after resolving its directory), else
 * CORDON_ERR_DENIED: a baseline the agent can reach proves nothing. *out is malloc'd. */
int agent_gate_location(const char *project_dir, const char *given, char **out,
                        struct cordon_error **err);
/* Write a baseline atomically at location (its directory created, mode 0700 for gates/). */
int agent_gate_save(const struct agent_gate_baseline *baseline, const char *location,
                    struct cordon_error **err);
/* Read a baseline strictly; every directory's snapshot must be in cas and verify (a baseline
 * naming one that is not was tampered with or belongs to another project). */
int agent_gate_load(struct cordon_cas *cas, const char *location, struct agent_gate_baseline **out,
                    struct cordon_error **err);

/* Append an audit event (e.g. "agent.gate_failed") whose details list the changes. */
int agent_gate_audit(struct cordon_context *ctx, const char *event,
                     const struct agent_gate_report *report, struct cordon_error **err);

#endif
