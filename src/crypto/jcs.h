/* Canonical JSON, RFC 8785 (JCS), on top of jansson.
 *
 * Serialisation: object members sorted by the UTF-16 code units of their names, no
 * insignificant whitespace, strings escaped as ECMAScript's JSON.stringify does (only '"', '\\'
 * and control characters; \b \f \n \r \t by name, the rest as \u00xx), numbers formatted as
 * ECMAScript's Number.prototype.toString (shortest round-trip digits; -0 is 0). NaN and the
 * infinities are refused. jansson integers are written as they are within ±2^53 and refused
 * beyond, since a reader holding doubles could not represent them exactly.
 *
 * Parsing (jcs_parse) is the one place untrusted JSON text enters a hashed or signed path: it is
 * bounded in size, refuses duplicate names, and reads every number as a double, as JCS does. */
#ifndef CORDON_CRYPTO_JCS_H
#define CORDON_CRYPTO_JCS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include <cordon/error.h>

/* A growable byte buffer. Zero-initialise; free with jcs_buf_free. */
struct jcs_buf {
  char *data;
  size_t length;
  size_t capacity;
};

int jcs_buf_reserve(struct jcs_buf *b, size_t extra);
int jcs_buf_append(struct jcs_buf *b, const void *data, size_t length);
void jcs_buf_free(struct jcs_buf *b);
/* Hand over the bytes (NUL-terminated; the length is b->length before the call). */
char *jcs_buf_steal(struct jcs_buf *b);

/* Append the canonical form of value to out. */
int jcs_serialize(const json_t *value, struct jcs_buf *out, struct cordon_error **err);

/* Append the canonical form of a top-level object without its member named skip_key (which
 * must be present), and report in *skip_offset where in out that member would have started:
 * the canonical form of the full object is out[..offset] + ',' + member + out[offset..] (or,
 * when skip_key sorts first, out[..offset] + member + ',' + out[offset..]). */
int jcs_serialize_without(const json_t *object, const char *skip_key, struct jcs_buf *out,
                          size_t *skip_offset, bool *skip_first, struct cordon_error **err);

/* malloc'd canonical bytes (NUL-terminated) of value. */
int jcs_dump(const json_t *value, char **out, size_t *length, struct cordon_error **err);

/* ECMAScript Number::toString of a finite double into out (at least 32 bytes). Returns the
 * length, or -1 for NaN and the infinities. */
int jcs_format_double(double value, char *out, size_t size);

/* Compare two UTF-8 strings by their UTF-16 code units (RFC 8785 §3.2.3). */
int jcs_compare_keys(const char *a, size_t a_length, const char *b, size_t b_length);

/* ---- checking canonical bytes without building a tree -------------------------------------- */

struct jcs_span {
  size_t key_start;   /* offset of the member name's opening quote */
  size_t key_length;  /* raw bytes of the name, between its quotes */
  size_t value_start; /* the value's bytes: [value_start, value_end) */
  size_t value_end;
  char type; /* 'o' object, 'a' array, 's' string, 'n' number, 't' true, 'f' false, 'z' null */
};

struct jcs_check {
  char type;           /* of the top-level value */
  size_t n_members;    /* members of a top-level object (all of them, even past max_members) */
  size_t error_offset; /* where the text stops being canonical */
  const char *reason;  /* why (a static string) */
};

/* Is text, byte for byte, the canonical form of a JSON value, i.e. exactly what jcs_parse then
 * jcs_serialize would give back? Checks the grammar, the absence of whitespace, string escapes
 * and UTF-8, the ECMAScript spelling of every number, member order by UTF-16 code units
 * without duplicates, and nesting depth as jansson bounds it. No allocation, no tree: this is
 * the hot path of `audit verify`. When the top level is an object, up to max_members of its
 * members are described in members. Returns 0, or -1 with check->error_offset and reason. */
int jcs_check_canonical(const char *text, size_t length, struct jcs_span *members,
                        size_t max_members, struct jcs_check *check);

/* Decode the raw bytes of a string from canonical text (between its quotes) into out, which
 * holds at least raw_length bytes. Returns the decoded length. */
size_t jcs_decode_string(const char *raw, size_t raw_length, char *out);

#define JCS_DEFAULT_MAX_INPUT (16u * 1024u * 1024u)

/* Parse untrusted JSON text: at most max_length bytes (0: JCS_DEFAULT_MAX_INPUT), duplicate
 * names refused, NUL allowed in strings, every number a double. label names the source. */
int jcs_parse(const void *text, size_t length, size_t max_length, const char *label, json_t **out,
              struct cordon_error **err);

/* Parse then serialise: text → canonical bytes. */
int jcs_canonicalize(const void *text, size_t length, size_t max_length, const char *label,
                     char **out, size_t *out_length, struct cordon_error **err);

#endif
