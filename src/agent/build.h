/* The candidate build (`cordon build`): a revision or snapshot checked out fresh outside every
 * project, a command run there under agent confinement (never as a trusted command), and the
 * declared outputs verified by path, type and digest, copied out and recorded.
 *
 * A build's id is 128 random bits in hex: two builds of the same source and command are two
 * events (the command need not be deterministic), and the record names its source. The record
 * (.cordon/builds/<id>.json, canonical JSON, docs/formats.md "Build records") and its copied
 * outputs (.cordon/builds/<id>/outputs/) live in the invoking project's .cordon/, which no
 * confined command sees; a `build.recorded` audit event carries the record's digest. */
#ifndef CORDON_AGENT_BUILD_H
#define CORDON_AGENT_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include <cordon/cas.h>
#include <cordon/error.h>
#include <cordon/session.h>

#include "agent/gate.h"
#include "agent/mechanism.h"

#define AGENT_BUILD_FORMAT "cordon-build/1"
#define AGENT_BUILD_DIR ".cordon/builds"
#define AGENT_BUILD_ID_HEX 32
/* Where checkouts are made: not /tmp, which every mechanism replaces with a private one (and
 * Landlock refuses projects under), and not inside a project, whose .cordon/ would be the
 * build's ancestor. */
#define AGENT_BUILD_WORK_ROOT "/var/tmp"
#define AGENT_BUILD_TMP_BYTES ((uint64_t)64 << 20)

enum agent_build_source { AGENT_BUILD_FROM_REV, AGENT_BUILD_FROM_SNAPSHOT };

struct agent_build_request {
  enum agent_build_source source;
  const char *given;              /* the git revision, or the whole snapshot id */
  const char *const *argv;        /* the command, never a shell */
  const char *const *outputs;     /* checkout-relative, NULL-terminated */
  const char *const *protect;     /* checkout-relative, NULL-terminated; may be NULL */
  enum agent_mechanism_kind kind; /* AUTO: ns, else bwrap */
};

struct agent_build_output {
  char *path;
  uint64_t size;
  char sha256[65];
};

struct agent_build_record {
  char *id;
  enum agent_build_source source;
  char *given;
  char *source_id; /* the commit id, or the snapshot id */
  char **argv;
  char **protect;
  char *mechanism;
  struct agent_build_output *outputs;
  size_t count;
};

void agent_build_record_free(struct agent_build_record *record);

/* Run a build. On success *out is the record, already written and audited. A build that ran
 * but failed returns -1 with CORDON_ERR_INVALID (the command's non-zero exit, a missing,
 * non-regular or escaping output, named) or, when a protected path changed, -1 with *gate
 * listing the changes; no confinement: CORDON_ERR_UNAVAILABLE naming what is missing. The
 * checkout is removed in every case. */
int agent_build_run(struct cordon_context *ctx, struct cordon_cas *cas,
                    const struct agent_build_request *request, struct agent_build_record **out,
                    struct agent_gate_report **gate, struct cordon_error **err);

/* build-record.c: the record's canonical JSON and its strict reading (pure), and its file. */
int agent_build_record_encode(const struct agent_build_record *record, char **out, size_t *length,
                              struct cordon_error **err);
int agent_build_record_decode(const char *text, size_t length, struct agent_build_record **out,
                              struct cordon_error **err);
/* 32 lowercase hex digits; anything else is CORDON_ERR_USAGE (the id names a file). */
int agent_build_id_check(const char *id, struct cordon_error **err);
int agent_build_record_save(struct cordon_context *ctx, const struct agent_build_record *record,
                            struct cordon_error **err);
int agent_build_record_load(struct cordon_context *ctx, const char *id,
                            struct agent_build_record **out, struct cordon_error **err);

#endif
