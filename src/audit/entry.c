/* Audit entries as canonical JSON lines (see include/cordon/audit.h for the format). The HMAC
 * input is the previous HMAC's 64 hex characters followed by the canonical JSON of the entry
 * without its "hmac" member; the stored line is the canonical JSON of the whole entry, so a
 * line has exactly one valid spelling and any changed byte is caught. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "audit/entry.h"
#include "base/cleanup.h"

#define DETAILS_MAX (CORDON_AUDIT_MAX_LINE / 2)

static const char *const string_fields[] = {"actor", "event", "resource_type", "resource_id"};

static int check_field(const char *name, const char *value, bool may_be_empty,
                       struct cordon_error **err) {
  if (!value || (!*value && !may_be_empty))
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "audit entry: %s must not be empty", name);
  size_t n = strlen(value);
  if (n > CORDON_AUDIT_MAX_FIELD)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "audit entry: %s is longer than %u bytes",
                            name, CORDON_AUDIT_MAX_FIELD);
  json_t *probe = json_stringn(value, n);
  if (!probe)
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "audit entry: %s is not valid UTF-8", name);
  json_decref(probe);
  return 0;
}

int audit_event_check(const struct cordon_audit_event *event, json_t **details,
                      struct cordon_error **err) {
  if (check_field("event", event->event, false, err) < 0 ||
      check_field("actor", event->actor, false, err) < 0 ||
      check_field("resource type", event->resource_type, false, err) < 0 ||
      check_field("resource id", event->resource_id ? event->resource_id : "", true, err) < 0)
    return -1;
  json_t *d = NULL;
  if (!event->details_json) {
    d = json_object();
  } else {
    if (jcs_parse(event->details_json, strlen(event->details_json), DETAILS_MAX,
                  "audit entry details", &d, err) < 0) {
      if (err && *err)
        (*err)->kind = CORDON_ERR_USAGE;
      return -1;
    }
    if (!json_is_object(d)) {
      json_decref(d);
      return cordon_error_set(err, CORDON_ERR_USAGE, 0,
                              "audit entry: details must be a JSON object");
    }
  }
  if (!d)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "audit entry");
  *details = d;
  return 0;
}

static const char hmac_member_prefix[] = "\"hmac\":\"";

/* Length of the member "hmac":"<64 hex>" plus its separating comma. */
#define HMAC_MEMBER_LEN (sizeof(hmac_member_prefix) - 1 + CORDON_AUDIT_HMAC_HEX_LEN + 2)

static void put_hmac_member(char *out, const char *hmac, bool first) {
  char *o = out;
  if (!first)
    *o++ = ',';
  memcpy(o, hmac_member_prefix, sizeof(hmac_member_prefix) - 1);
  o += sizeof(hmac_member_prefix) - 1;
  memcpy(o, hmac, CORDON_AUDIT_HMAC_HEX_LEN);
  o += CORDON_AUDIT_HMAC_HEX_LEN;
  *o++ = '"';
  if (first)
    *o++ = ',';
}

static int compute_hmac(struct crypto_hmac *key, const char *prev, const char *body, size_t length,
                        char *hmac, struct cordon_error **err) {
  uint8_t raw[CRYPTO_SHA256_LEN];
  if (crypto_hmac_2(key, prev, CORDON_AUDIT_HMAC_HEX_LEN, body, length, raw, err) < 0)
    return -1;
  crypto_hex_encode(raw, sizeof(raw), hmac);
  return 0;
}

int audit_entry_build(struct crypto_hmac *key, const struct cordon_audit_event *event,
                      const json_t *details, const char *prev, struct jcs_buf *out, char *hmac,
                      struct cordon_error **err) {
  json_t *entry = json_pack("{s:s, s:O, s:s, s:s, s:s, s:s, s:s}", "actor", event->actor, "details",
                            details, "event", event->event, "hmac", AUDIT_GENESIS, "prev", prev,
                            "resource_id", event->resource_id ? event->resource_id : "",
                            "resource_type", event->resource_type);
  if (!entry)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "audit entry");
  size_t start = out->length, offset = 0;
  bool first = false;
  int r = jcs_serialize_without(entry, "hmac", out, &offset, &first, err);
  json_decref(entry);
  if (r < 0)
    return -1;
  size_t body_length = out->length - start;
  if (compute_hmac(key, prev, out->data + start, body_length, hmac, err) < 0)
    return -1;
  if (body_length + HMAC_MEMBER_LEN + 1 > CORDON_AUDIT_MAX_LINE) {
    out->length = start;
    return cordon_error_set(err, CORDON_ERR_USAGE, 0, "audit entry: longer than %u bytes as a line",
                            CORDON_AUDIT_MAX_LINE);
  }
  /* Splice the member in where canonical order puts it, then end the line. */
  if (jcs_buf_reserve(out, HMAC_MEMBER_LEN + 1) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "audit entry");
  char *at = out->data + offset;
  size_t member = HMAC_MEMBER_LEN;
  memmove(at + member, at, out->length - offset);
  put_hmac_member(at, hmac, first);
  out->length += member;
  out->data[out->length++] = '\n';
  out->data[out->length] = 0;
  return 0;
}

#define set_reason(...) snprintf(reason, AUDIT_REASON_MAX, __VA_ARGS__)

static bool plain_string(const json_t *v, bool may_be_empty) {
  if (!json_is_string(v))
    return false;
  size_t n = json_string_length(v);
  return (n || may_be_empty) && n <= CORDON_AUDIT_MAX_FIELD && strlen(json_string_value(v)) == n;
}

json_t *audit_line_parse(const char *line, size_t length, char reason[AUDIT_REASON_MAX]) {
  if (length == 0) {
    set_reason("empty line");
    return NULL;
  }
  if (length > CORDON_AUDIT_MAX_LINE) {
    set_reason("line longer than the 1 MiB bound");
    return NULL;
  }
  json_t *v = NULL;
  struct cordon_error *perr = NULL;
  if (jcs_parse(line, length, CORDON_AUDIT_MAX_LINE, "line", &v, &perr) < 0) {
    set_reason("%s", perr ? perr->message : "not JSON");
    cordon_error_free(perr);
    return NULL;
  }
  if (!json_is_object(v)) {
    set_reason("not a JSON object");
    goto bad;
  }
  if (json_object_size(v) != 7) {
    set_reason("not exactly the members actor, details, event, hmac, prev, "
               "resource_id, resource_type");
    goto bad;
  }
  for (size_t i = 0; i < ARRAY_SIZE(string_fields); i++)
    if (!plain_string(json_object_get(v, string_fields[i]),
                      !strcmp(string_fields[i], "resource_id"))) {
      set_reason("\"%s\" is missing, empty, too long or not a string", string_fields[i]);
      goto bad;
    }
  if (!json_is_object(json_object_get(v, "details"))) {
    set_reason("\"details\" is missing or not an object");
    goto bad;
  }
  static const char *const digests[] = {"hmac", "prev"};
  for (size_t i = 0; i < ARRAY_SIZE(digests); i++) {
    json_t *d = json_object_get(v, digests[i]);
    if (!json_is_string(d) || !crypto_is_sha256_hex(json_string_value(d))) {
      set_reason("\"%s\" is not 64 lowercase hex digits", digests[i]);
      goto bad;
    }
  }
  return v;
bad:
  json_decref(v);
  return NULL;
}

/* The members of an entry, in canonical order. */
enum { M_ACTOR, M_DETAILS, M_EVENT, M_HMAC, M_PREV, M_ID, M_TYPE, M_COUNT };
static const char *const entry_members[M_COUNT] = {"actor", "details",     "event",        "hmac",
                                                   "prev",  "resource_id", "resource_type"};

/* Decoded length of a canonical string's raw bytes; *has_nul when it holds U+0000. */
static size_t decoded_length(const char *raw, size_t length, bool *has_nul) {
  size_t n = 0;
  *has_nul = false;
  for (size_t i = 0; i < length; n++) {
    if (raw[i] != '\\') {
      i++;
    } else if (raw[i + 1] == 'u') {
      *has_nul = *has_nul || !memcmp(raw + i, "\\u0000", 6);
      i += 6;
    } else {
      i += 2;
    }
  }
  return n;
}

enum cordon_audit_problem audit_line_check(struct crypto_hmac *key, const char *line, size_t length,
                                           char *prev, char *hmac, char reason[AUDIT_REASON_MAX]) {
  if (length == 0) {
    set_reason("empty line");
    return CORDON_AUDIT_MALFORMED;
  }
  if (length > CORDON_AUDIT_MAX_LINE) {
    set_reason("line longer than the 1 MiB bound");
    return CORDON_AUDIT_MALFORMED;
  }
  /* One pass over the bytes proves the line is the one canonical spelling of its entry, so
   * the canonical form without "hmac" (the HMAC input) is the line with that member cut out. */
  struct jcs_span m[M_COUNT];
  struct jcs_check check;
  if (jcs_check_canonical(line, length, m, M_COUNT, &check) < 0) {
    set_reason("not canonical JSON (RFC 8785) at byte %zu: %s", check.error_offset, check.reason);
    return CORDON_AUDIT_MALFORMED;
  }
  if (check.type != 'o' || check.n_members != M_COUNT) {
    set_reason("not an object of exactly the members actor, details, event, hmac, prev, "
               "resource_id, resource_type");
    return CORDON_AUDIT_MALFORMED;
  }
  for (size_t i = 0; i < M_COUNT; i++) {
    const char *name = entry_members[i];
    if (m[i].key_length != strlen(name) ||
        memcmp(line + m[i].key_start + 1, name, m[i].key_length)) {
      set_reason("not an object of exactly the members actor, details, event, hmac, prev, "
                 "resource_id, resource_type");
      return CORDON_AUDIT_MALFORMED;
    }
    size_t raw_length = m[i].value_end - m[i].value_start - 2;
    const char *raw = line + m[i].value_start + 1;
    if (i == M_DETAILS) {
      if (m[i].type != 'o') {
        set_reason("\"details\" is not an object");
        return CORDON_AUDIT_MALFORMED;
      }
    } else if (i == M_HMAC || i == M_PREV) {
      if (m[i].type != 's' || raw_length != CORDON_AUDIT_HMAC_HEX_LEN) {
        set_reason("\"%s\" is not 64 lowercase hex digits", name);
        return CORDON_AUDIT_MALFORMED;
      }
      char *out = i == M_HMAC ? hmac : prev;
      memcpy(out, raw, CORDON_AUDIT_HMAC_HEX_LEN);
      out[CORDON_AUDIT_HMAC_HEX_LEN] = 0;
      if (!crypto_is_sha256_hex(out)) {
        set_reason("\"%s\" is not 64 lowercase hex digits", name);
        return CORDON_AUDIT_MALFORMED;
      }
    } else {
      bool has_nul = false;
      size_t n = m[i].type == 's' ? decoded_length(raw, raw_length, &has_nul) : 0;
      if (m[i].type != 's' || has_nul || n > CORDON_AUDIT_MAX_FIELD || (n == 0 && i != M_ID)) {
        set_reason("\"%s\" is missing, empty, too long or not a string", name);
        return CORDON_AUDIT_MALFORMED;
      }
    }
  }
  if (!key)
    return CORDON_AUDIT_OK;
  /* "hmac" is never the first member, so a comma precedes it. */
  size_t cut_start = m[M_HMAC].key_start - 1, cut_end = m[M_HMAC].value_end;
  const struct crypto_part parts[] = {
      {prev, CORDON_AUDIT_HMAC_HEX_LEN}, {line, cut_start}, {line + cut_end, length - cut_end}};
  uint8_t raw[CRYPTO_SHA256_LEN];
  char expected[CORDON_AUDIT_HMAC_HEX_LEN + 1];
  if (crypto_hmac_parts(key, parts, ARRAY_SIZE(parts), raw, NULL) < 0) {
    set_reason("HMAC computation failed");
    return CORDON_AUDIT_BAD_HMAC;
  }
  crypto_hex_encode(raw, sizeof(raw), expected);
  if (!crypto_equal(expected, hmac, CORDON_AUDIT_HMAC_HEX_LEN)) {
    set_reason("HMAC does not match the entry (altered, or another key)");
    return CORDON_AUDIT_BAD_HMAC;
  }
  return CORDON_AUDIT_OK;
}

enum cordon_audit_problem audit_genesis_check(const char *first_prev, const char *genesis,
                                              char *reason, size_t reason_size) {
  if (!strcmp(first_prev, genesis))
    return CORDON_AUDIT_OK;
  if (!strcmp(genesis, AUDIT_GENESIS)) {
    snprintf(reason, reason_size,
             "prev %.12s... of the first entry is not the genesis of a log bound to no project "
             "(64 '0'): its first entry was removed, or it is a project's log",
             first_prev);
    return CORDON_AUDIT_BROKEN_LINK;
  }
  if (!strcmp(first_prev, AUDIT_GENESIS)) {
    snprintf(reason, reason_size,
             "the chain begins bound to no project (64 '0'), not to this project %s: a log begun "
             "before cordon bound logs to their project, or copied from one opened without it",
             *genesis ? genesis : "(none yet)");
    return CORDON_AUDIT_UNBOUND;
  }
  snprintf(reason, reason_size,
           "the chain begins from project %s, not from this project %s: another project's log "
           "(or its first entry was removed)",
           first_prev, *genesis ? genesis : "(none: no .cordon/project-id)");
  return CORDON_AUDIT_FOREIGN_PROJECT;
}
