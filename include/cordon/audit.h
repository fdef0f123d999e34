/* cordon — the HMAC-chained audit log.
 *
 * An append-only log of JSON lines in <project>/.cordon/audit/, split into segments
 * audit-000001.jsonl, audit-000002.jsonl, ... (a new segment starts when the current one would
 * grow past the rotation size). Each line is the canonical JSON (RFC 8785) of one entry:
 *
 *   {"actor":A,"details":{...},"event":E,"hmac":H,"prev":P,"resource_id":I,"resource_type":T}
 *
 * where P is the previous entry's H and H = hex(HMAC-SHA256(key, P || canonical JSON of the
 * entry without "hmac")). The first entry of the whole chain (across segments) has for P its
 * genesis: the project's id (cordon_context_project_id) for a project's log, so a log copied
 * from another project signed by the same key does not verify as this one's; 64 '0' for a log
 * bound to no project (opened by directory without a project id).
 * P taken as its 64 hex characters. The key is the 32-byte audit key kept with the signing key
 * (include/cordon/keys.h).
 *
 * Appends from any number of processes are serialised by an exclusive flock on
 * <dir>/lock and are durable (fdatasync) before they return; a failed write is rolled back so
 * no partial line is left behind. An append first checks the current last line (complete, well
 * formed, its HMAC valid) so the chain never forks and is never extended past damage.
 * Verification replays every segment offline and names the first bad line and why. */
#ifndef CORDON_AUDIT_H
#define CORDON_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cordon/error.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cordon_context;

#define CORDON_AUDIT_HMAC_HEX_LEN 64
#define CORDON_AUDIT_DEFAULT_ROTATE_BYTES (64ull * 1024 * 1024)
#define CORDON_AUDIT_MAX_LINE (1024u * 1024u)
#define CORDON_AUDIT_MAX_FIELD 4096u

struct cordon_audit_event {
  const char *event;         /* what happened, e.g. "race.select"; non-empty */
  const char *actor;         /* who did it, e.g. "user:alice"; non-empty */
  const char *resource_type; /* e.g. "snapshot"; non-empty */
  const char *resource_id;   /* may be empty */
  const char *details_json;  /* a JSON object as text; NULL: {} */
};

struct cordon_audit_options {
  const char *key_dir;   /* NULL: cordon_key_dir() */
  uint64_t rotate_bytes; /* 0: CORDON_AUDIT_DEFAULT_ROTATE_BYTES */
  /* 64 lowercase hex digits, not all zero: the chain is bound to this project (it is the first
   * entry's prev). NULL: cordon_audit_open_project binds the project's own id; a log opened by
   * directory is bound to none (genesis 64 '0'). */
  const char *project_id;
};

/* A handle is for one thread at a time; processes and threads with their own handles are
 * serialised by the lock. */
struct cordon_audit_log;

/* Open the log in dir (nothing is created until the first append). opts may be NULL. */
CORDON_API int cordon_audit_open(const char *dir, const struct cordon_audit_options *opts,
                                 struct cordon_audit_log **out, struct cordon_error **err);
/* The project's log: <project>/.cordon/audit, bound to the project's id (made at the first
 * append when the project has none). Appending to or verifying a chain that does not begin
 * from that id (another project's log, or one begun before logs were bound) is refused. */
CORDON_API int cordon_audit_open_project(struct cordon_context *ctx,
                                         const struct cordon_audit_options *opts,
                                         struct cordon_audit_log **out, struct cordon_error **err);
CORDON_API void cordon_audit_close(struct cordon_audit_log *log);
CORDON_API const char *cordon_audit_dir(const struct cordon_audit_log *log);

/* Append one entry; hmac (CORDON_AUDIT_HMAC_HEX_LEN + 1 bytes, may be NULL) receives its
 * HMAC. The audit key is created on the first append of an empty log; a log that already has
 * entries refuses to go on without its key. */
CORDON_API int cordon_audit_append(struct cordon_audit_log *log,
                                   const struct cordon_audit_event *event, char *hmac,
                                   struct cordon_error **err);
/* Append count entries under one lock and one fsync (the fast path for bulk writers). */
CORDON_API int cordon_audit_append_many(struct cordon_audit_log *log,
                                        const struct cordon_audit_event *events, size_t count,
                                        char *last_hmac, struct cordon_error **err);

enum cordon_audit_problem {
  CORDON_AUDIT_OK = 0,
  CORDON_AUDIT_BAD_HMAC,        /* the line's HMAC does not match its content */
  CORDON_AUDIT_BROKEN_LINK,     /* the line's prev is not the previous entry's HMAC */
  CORDON_AUDIT_MALFORMED,       /* not one canonical JSON entry of the right shape */
  CORDON_AUDIT_MISSING_NEWLINE, /* the last line has no final newline (a torn append) */
  CORDON_AUDIT_MISSING_SEGMENT, /* a segment number is missing from the sequence */
  CORDON_AUDIT_FOREIGN_PROJECT, /* the chain begins from another project's id (or none here) */
  CORDON_AUDIT_UNBOUND,         /* a project's chain begins from 64 '0': bound to no project */
};

CORDON_API const char *cordon_audit_problem_name(enum cordon_audit_problem problem);

struct cordon_audit_report {
  enum cordon_audit_problem problem;
  uint64_t entries;                         /* entries that verified before the first problem */
  size_t segments;                          /* segment files seen */
  char head[CORDON_AUDIT_HMAC_HEX_LEN + 1]; /* HMAC of the last verified entry (genesis: 0s) */
  char *file;                               /* the file holding the first problem, NULL when ok */
  uint64_t line;                            /* its 1-based line number in that file */
  uint64_t offset;                          /* byte offset of that line in the file */
  uint64_t entry;                           /* 1-based position in the whole chain */
  char *reason;                             /* one line, NULL when ok */
  /* The project id the chain begins from ("" when it begins from 64 '0', or is empty). */
  char project_id[CORDON_AUDIT_HMAC_HEX_LEN + 1];
};

CORDON_API void cordon_audit_report_clear(struct cordon_audit_report *report);

/* Replay the whole chain. Returns 0 when the replay ran (report->problem says whether the chain
 * is intact), < 0 when it could not (no key, unreadable files). */
CORDON_API int cordon_audit_verify(struct cordon_audit_log *log, struct cordon_audit_report *report,
                                   struct cordon_error **err);

/* Drop a torn final line (one with no final newline, left by an interrupted append) and record
 * the repair as an "audit.repair" entry. *dropped is the number of bytes removed (0: nothing
 * to repair). Nothing else is ever rewritten. */
CORDON_API int cordon_audit_repair(struct cordon_audit_log *log, const char *actor,
                                   uint64_t *dropped, struct cordon_error **err);

struct cordon_audit_entry {
  uint64_t index;   /* 1-based position in the chain */
  const char *file; /* segment path */
  uint64_t line;    /* 1-based line in the segment */
  const char *event;
  const char *actor;
  const char *resource_type;
  const char *resource_id;
  const char *details_json; /* canonical JSON */
  const char *prev;
  const char *hmac;
  const char *raw; /* the line as stored, without its newline */
  size_t raw_length;
};

/* Call fn for every entry in order (no HMAC check; `verify` does that). A line that cannot be
 * read as an entry stops the walk with a CORDON_ERR_INVALID error naming it. fn returning < 0
 * stops the walk and is returned. */
CORDON_API int cordon_audit_foreach(struct cordon_audit_log *log,
                                    int (*fn)(const struct cordon_audit_entry *entry,
                                              void *userdata),
                                    void *userdata, struct cordon_error **err);

/* cordon_audit_foreach for the entries whose event starts with event_prefix (NULL: all), e.g.
 * "pool.". A canonical entry spells its event "event":"NAME"; a line without those bytes for
 * the prefix is skipped unparsed (entry indexes still count it), so a walk for a few events
 * costs a scan of the bytes rather than a parse of every entry. What is wrong with a skipped
 * line, if anything, is for cordon_audit_verify to say. */
CORDON_API int cordon_audit_foreach_event(struct cordon_audit_log *log, const char *event_prefix,
                                          int (*fn)(const struct cordon_audit_entry *entry,
                                                    void *userdata),
                                          void *userdata, struct cordon_error **err);

/* verify and foreach in one pass under one lock: fn sees an entry only after its HMAC and its
 * place in the chain (prev is the HMAC of the entry before it; the first is bound to the
 * project) verified, so what fn reads is exactly what the chain vouches for. A chain problem
 * stops the walk and is reported as by cordon_audit_verify (fn has then seen the entries
 * before it); fn returning < 0 stops the walk and is returned. */
CORDON_API int
cordon_audit_verify_foreach(struct cordon_audit_log *log, struct cordon_audit_report *report,
                            int (*fn)(const struct cordon_audit_entry *entry, void *userdata),
                            void *userdata, struct cordon_error **err);

#ifdef __cplusplus
}
#endif
#endif
