/* The effects of pools: registering and retiring (a body in the CAS, an event in the audit
 * chain, under .cordon/pools/lock so two registrations of one name cannot interleave), looking
 * a pool up (the chain replayed, the body re-read and re-hashed), and placing a recipe (merge,
 * select, seal, store, chain). Placement creates no session and no sandbox. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include <cordon/audit.h>
#include <cordon/backend.h>
#include <cordon/cas.h>
#include <cordon/keys.h>
#include <cordon/session.h>

#include "base/cleanup.h"
#include "base/fs.h"
#include "crypto/jcs.h"
#include "pool/internal.h"
#include "pool/pool.h"
#include "protocol/context.h"

/* An exclusive lock on .cordon/pools/lock, held until the fd is closed. */
static int pools_lock(struct cordon_context *ctx, int *fd, struct cordon_error **err) {
  _cleanup_free_ char *dir = NULL;
  _cleanup_free_ char *path = NULL;
  if (context_ensure_dir(ctx, "pools", &dir, err) < 0)
    return -1;
  if (asprintf(&path, "%s/lock", dir) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "pools lock");
  *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (*fd < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot open %s", path);
  while (flock(*fd, LOCK_EX) < 0) {
    if (errno != EINTR) {
      int e = errno;
      close(*fd);
      *fd = -1;
      return cordon_error_set(err, CORDON_ERR_SYSTEM, e, "cannot lock %s", path);
    }
  }
  return 0;
}

/* Keep the blobs a pool event names through `cordon gc`, whose roots include every digest
 * written in a file under .cordon/receipts/: one small file per event, named by its first
 * digest, listing the others (canonical JSON). */
int pool_keep_blobs(struct cordon_context *ctx, const char *name, json_t *digests,
                    struct cordon_error **err) {
  _cleanup_free_ char *dir = NULL;
  _cleanup_free_ char *pools = NULL;
  _cleanup_free_ char *path = NULL;
  _cleanup_free_ char *text = NULL;
  size_t n = 0;
  if (context_ensure_dir(ctx, "receipts", &dir, err) < 0)
    return -1;
  if (asprintf(&pools, "%s/pools", dir) < 0 || asprintf(&path, "%s/%s.json", pools, name) < 0)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "pool records");
  if (mkdir(pools, 0700) < 0 && errno != EEXIST)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, errno, "cannot create %s", pools);
  if (jcs_dump(digests, &text, &n, err) < 0)
    return -1;
  return fs_write_atomic(path, text, n, 0600, err);
}

static const char *default_actor(const char *actor, char buf[32]) {
  if (actor && *actor)
    return actor;
  snprintf(buf, 32, "uid:%u", (unsigned)geteuid());
  return buf;
}

static int append(struct cordon_audit_log *log, const char *event, const char *actor,
                  const char *name, json_t *details, struct cordon_error **err) {
  _cleanup_free_ char *text = NULL;
  size_t n = 0;
  if (jcs_dump(details, &text, &n, err) < 0)
    return -1;
  char buf[32];
  struct cordon_audit_event ev = {event, default_actor(actor, buf), "pool", name, text};
  return cordon_audit_append(log, &ev, NULL, err);
}

static int open_both(struct cordon_context *ctx, struct cordon_audit_log **log,
                     struct cordon_cas **cas, struct cordon_error **err) {
  if (cordon_audit_open_project(ctx, NULL, log, err) < 0)
    return -1;
  if (cas && cordon_cas_open_project(ctx, cas, err) < 0)
    return -1;
  return 0;
}

/* Read a pool body from the CAS (re-hashed by the read) and parse it; its pool_hash must be
 * the digest it was found under. */
static int load_body(struct cordon_cas *cas, const char *hash, struct pool_manifest *m,
                     struct cordon_error **err) {
  _cleanup_free_ unsigned char *data = NULL;
  size_t n = 0;
  if (cordon_cas_get(cas, hash, POOL_MANIFEST_MAX, &data, &n, err) < 0)
    return cordon_error_prefix(err, "pool body %s", hash);
  if (pool_manifest_parse((const char *)data, n, m, err) < 0)
    return cordon_error_prefix(err, "pool body %s", hash);
  if (strcmp(m->pool_hash, hash) != 0) {
    pool_manifest_clear(m);
    return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0, "pool body %s hashes to %s", hash,
                            m->pool_hash);
  }
  return 0;
}

int pool_register(struct cordon_context *ctx, const struct pool_manifest *m, const char *actor,
                  enum pool_register_outcome *outcome, struct cordon_error **err) {
  _cleanup_close_ int lock = -1;
  _cleanup_(audit_closep) struct cordon_audit_log *log = NULL;
  _cleanup_(cas_closep) struct cordon_cas *cas = NULL;
  if (pools_lock(ctx, &lock, err) < 0 || open_both(ctx, &log, &cas, err) < 0)
    return -1;
  struct pool_registry reg = {0};
  if (pool_registry_load(log, &reg, err) < 0)
    return -1;
  const struct pool_entry *e = pool_registry_find(&reg, m->name);
  const char *event = "pool.registered";
  *outcome = POOL_REGISTERED;
  if (e && e->state == POOL_ACTIVE) {
    if (strcmp(e->pool_hash, m->pool_hash) == 0)
      *outcome = POOL_UNCHANGED;
    event = "pool.updated";
    if (*outcome != POOL_UNCHANGED)
      *outcome = POOL_UPDATED;
  }
  pool_registry_clear(&reg);
  if (*outcome == POOL_UNCHANGED)
    return 0;
  char digest[CORDON_DIGEST_HEX_SIZE];
  if (cordon_cas_put(cas, m->canonical, m->canonical_length, "application/json", NULL, digest,
                     err) < 0)
    return -1;
  if (strcmp(digest, m->pool_hash) != 0)
    return cordon_error_set(err, CORDON_ERR_INTEGRITY, 0, "pool %s: stored as %s, not %s", m->name,
                            digest, m->pool_hash);
  json_auto_t *details = json_pack("{s:s,s:s}", "name", m->name, "pool_hash", m->pool_hash);
  if (!details)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "pool %s", m->name);
  if (pool_keep_blobs(ctx, m->pool_hash, details, err) < 0)
    return -1;
  return append(log, event, actor, m->name, details, err);
}

int pool_retire(struct cordon_context *ctx, const char *name, const char *actor,
                struct cordon_error **err) {
  _cleanup_close_ int lock = -1;
  _cleanup_(audit_closep) struct cordon_audit_log *log = NULL;
  if (pools_lock(ctx, &lock, err) < 0 || open_both(ctx, &log, NULL, err) < 0)
    return -1;
  struct pool_registry reg = {0};
  if (pool_registry_load(log, &reg, err) < 0)
    return -1;
  const struct pool_entry *e = pool_registry_find(&reg, name);
  if (!e || e->state != POOL_ACTIVE) {
    bool retired = e != NULL;
    pool_registry_clear(&reg);
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0,
                            retired ? "pool %s is already retired" : "no pool %s", name);
  }
  json_auto_t *details = json_pack("{s:s,s:s}", "name", name, "pool_hash", e->pool_hash);
  pool_registry_clear(&reg);
  if (!details)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "pool %s", name);
  return append(log, "pool.retired", actor, name, details, err);
}

/* The pool's current body and whether it is retired. */
static int lookup(struct cordon_audit_log *log, struct cordon_cas *cas, const char *name,
                  struct pool_manifest *out, bool *retired, struct cordon_error **err) {
  struct pool_registry reg = {0};
  if (pool_registry_load(log, &reg, err) < 0)
    return -1;
  const struct pool_entry *e = pool_registry_find(&reg, name);
  if (!e) {
    pool_registry_clear(&reg);
    return cordon_error_set(err, CORDON_ERR_NOT_FOUND, 0, "no pool %s", name);
  }
  *retired = e->state == POOL_RETIRED;
  char hash[65];
  memcpy(hash, e->pool_hash, sizeof(hash));
  pool_registry_clear(&reg);
  return load_body(cas, hash, out, err);
}

int pool_lookup(struct cordon_context *ctx, const char *name, struct pool_manifest *out,
                struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  _cleanup_(audit_closep) struct cordon_audit_log *log = NULL;
  _cleanup_(cas_closep) struct cordon_cas *cas = NULL;
  if (open_both(ctx, &log, &cas, err) < 0)
    return -1;
  bool retired = false;
  if (lookup(log, cas, name, out, &retired, err) < 0)
    return -1;
  if (retired) {
    pool_manifest_clear(out);
    return cordon_error_set(err, CORDON_ERR_DENIED, 0, "pool %s is retired", name);
  }
  return 0;
}

int pool_lookup_any(struct cordon_context *ctx, const char *name, struct pool_manifest *out,
                    enum pool_state *state, struct cordon_error **err) {
  memset(out, 0, sizeof(*out));
  _cleanup_(audit_closep) struct cordon_audit_log *log = NULL;
  _cleanup_(cas_closep) struct cordon_cas *cas = NULL;
  if (open_both(ctx, &log, &cas, err) < 0)
    return -1;
  bool retired = false;
  if (lookup(log, cas, name, out, &retired, err) < 0)
    return -1;
  *state = retired ? POOL_RETIRED : POOL_ACTIVE;
  return 0;
}

void pool_placement_clear(struct pool_placement *p) {
  if (!p)
    return;
  pool_refusal_clear(&p->refusal);
  pool_effective_clear(&p->effective);
  free(p->chosen_backend);
  json_decref(p->selector_inputs);
  free(p->receipt);
  memset(p, 0, sizeof(*p));
}

static int put_text(struct cordon_cas *cas, const char *text, size_t n, char digest[65],
                    struct cordon_error **err) {
  char d[CORDON_DIGEST_HEX_SIZE];
  if (cordon_cas_put(cas, text, n, "application/json", NULL, d, err) < 0)
    return -1;
  if (digest)
    memcpy(digest, d, 65);
  return 0;
}

/* Each allowed backend's availability and capabilities on this host, from the registry (only
 * the allowlist's backends are asked: availability may probe an engine). */
static int host_status(const json_t *effective, struct cordon_registry **reg,
                       struct pool_backend_status **out, size_t *n, struct cordon_error **err) {
  const json_t *allow = json_object_get(effective, "backend_allowlist");
  if (cordon_registry_load(reg, err) < 0)
    return -1;
  *out = calloc(json_array_size(allow) + 1, sizeof(**out));
  if (!*out)
    return cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "backend status");
  size_t i;
  json_t *name;
  *n = 0;
  json_array_foreach(allow, i, name) {
    const struct cordon_backend *b = NULL;
    struct cordon_error *ferr = NULL;
    struct pool_backend_status *st = &(*out)[(*n)++];
    st->name = json_string_value(name);
    if (cordon_registry_find(*reg, st->name, &b, &ferr) < 0 || !b) {
      cordon_error_free(ferr);
      continue;
    }
    char *reason = NULL;
    st->available = !b->available || b->available(b, &reason) == 1;
    free(reason);
    st->capabilities = cordon_backend_capabilities(b);
    st->enforces = b->enforces;
    st->tier = b->tier;
    st->egress = cordon_backend_egress_offered(b);
  }
  return 0;
}

int pool_place(struct cordon_context *ctx, const struct pool_recipe *recipe,
               const struct pool_backend_status *status, size_t n_status,
               const struct pool_attestation *attestation, const char *actor,
               struct pool_placement *p, struct cordon_error **err) {
  memset(p, 0, sizeof(*p));
  _cleanup_(audit_closep) struct cordon_audit_log *log = NULL;
  _cleanup_(cas_closep) struct cordon_cas *cas = NULL;
  _cleanup_(cordon_signing_key_freep) struct cordon_signing_key *key = NULL;
  if (open_both(ctx, &log, &cas, err) < 0)
    return -1;
  if (cordon_signing_key_load(NULL, &key, err) < 0)
    return -1;
  struct pool_manifest m = {0};
  bool retired = false;
  if (lookup(log, cas, recipe->pool, &m, &retired, err) < 0)
    return -1;
  memcpy(p->pool_hash, m.pool_hash, 65);
  p->max_concurrency = m.max_concurrency;
  json_auto_t *details = NULL;
  _cleanup_free_ char *overrides = NULL;
  int r;
  if (retired)
    r = pool_refusal_set(&p->refusal, POOL_RULE_POOL_RETIRED, "pool", "pool %s is retired", m.name);
  else
    r = pool_merge(&m, recipe, &p->effective, &p->refusal, err);
  if (r == 0) {
    const char *chosen = NULL;
    _cleanup_free_ char *reasons = NULL;
    struct cordon_registry *reg = NULL;
    _cleanup_free_ struct pool_backend_status *own = NULL;
    if (!status) {
      r = host_status(p->effective.manifest, &reg, &own, &n_status, err);
      status = own;
    }
    if (r == 0)
      r = pool_selector_inputs(p->effective.manifest, status, n_status, attestation,
                               &p->selector_inputs, &chosen, &reasons, err);
    if (r == 0 && !chosen)
      r = pool_refusal_set(&p->refusal, POOL_RULE_NO_BACKEND_AVAILABLE, "backend",
                           "no backend of pool %s's allowlist fits the work (%s)", m.name,
                           reasons ? reasons : "the allowlist is empty");
    else if (r == 0 && !(p->chosen_backend = strdup(chosen)))
      r = cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "placement");
    if (reg)
      cordon_registry_free(reg);
  }
  if (r < 0) {
    if (err && !*err)
      cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "placement");
    pool_manifest_clear(&m);
    pool_placement_clear(p);
    return -1;
  }
  /* The overrides are kept so `pool verify` can re-derive the decision from the chain. */
  size_t n_overrides = 0;
  if (jcs_dump(recipe->overrides, &overrides, &n_overrides, err) < 0 ||
      put_text(cas, overrides, n_overrides, NULL, err) < 0)
    goto fail;
  const char *event;
  if (r == 1) {
    p->refused = true;
    if (pool_seal_refusal(key, recipe->pool, &m, recipe, &p->refusal, &p->receipt,
                          &p->receipt_length, err) < 0 ||
        put_text(cas, p->receipt, p->receipt_length, p->receipt_digest, err) < 0)
      goto fail;
    event = "pool.override_refused";
    details = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "field", p->refusal.field, "overrides_hash",
                        recipe->overrides_hash, "pool", m.name, "pool_hash", m.pool_hash, "receipt",
                        p->receipt_digest, "rule", pool_rule_name(p->refusal.rule));
  } else {
    if (pool_seal_placement(key, &m, recipe, &p->effective, p->selector_inputs, p->chosen_backend,
                            &p->receipt, &p->receipt_length, err) < 0 ||
        put_text(cas, p->effective.canonical, p->effective.canonical_length, NULL, err) < 0 ||
        put_text(cas, p->receipt, p->receipt_length, p->receipt_digest, err) < 0)
      goto fail;
    event = "pool.placed";
    details = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "chosen_backend", p->chosen_backend,
                        "effective_manifest_hash", p->effective.hash, "overrides_hash",
                        recipe->overrides_hash, "pool", m.name, "pool_hash", m.pool_hash, "receipt",
                        p->receipt_digest);
  }
  if (!details) {
    cordon_error_set(err, CORDON_ERR_SYSTEM, ENOMEM, "placement");
    goto fail;
  }
  if (pool_keep_blobs(ctx, p->receipt_digest, details, err) < 0 ||
      append(log, event, actor, m.name, details, err) < 0)
    goto fail;
  pool_manifest_clear(&m);
  return 0;
fail:
  pool_manifest_clear(&m);
  pool_placement_clear(p);
  return -1;
}
