/* `pool verify`: everything pools claim, re-derived offline from the audit chain and the CAS.
 * One pass over the chain (cordon_audit_verify_foreach): each entry's HMAC and place in the
 * chain first (a deleted, edited or reordered line breaks it), then its replay: the
 * registry projected again, every pool body the chain names re-read (the CAS read re-hashes
 * it) and re-parsed, every placement and refusal receipt re-read, its signature and form
 * checked, its members matched against the chain entry, and its decision re-derived by the same
 * pure merge from the stored pool body and overrides. Events of the dispatch side are checked by
 * the rows of pool_dispatch_checkers (verify-dispatch.c). The first break stops the walk. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <cordon/audit.h>
#include <cordon/cas.h>
#include <cordon/keys.h>

#include "base/cleanup.h"
#include "crypto/jcs.h"
#include "pool/internal.h"
#include "pool/pool.h"

#define BROKEN (-1000)

void pool_verify_report_clear(struct pool_verify_report *r) {
  if (!r)
    return;
  free(r->reason);
  free(r->object);
  memset(r, 0, sizeof(*r));
}

struct walk {
  struct cordon_cas *cas;
  const char *kid;
  struct pool_registry reg;
  struct pool_verify_report *report;
  struct cordon_error **err;
};

static int broken(struct walk *w, const struct cordon_audit_entry *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int broken(struct walk *w, const struct cordon_audit_entry *e, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *what = NULL;
  if (vasprintf(&what, fmt, ap) < 0)
    what = NULL;
  va_end(ap);
  w->report->ok = false;
  if (asprintf(&w->report->object, "audit entry %llu", (unsigned long long)e->index) < 0)
    w->report->object = NULL;
  if (asprintf(&w->report->reason, "audit entry %llu (%s): %s", (unsigned long long)e->index,
               e->event, what ? what : "broken") < 0)
    w->report->reason = NULL;
  free(what);
  return BROKEN;
}

/* A blob named by the chain, read (and re-hashed) from the CAS. A missing or damaged blob is a
 * break, reported through *why. */
static int read_blob(struct cordon_cas *cas, const char *digest, char **text, size_t *n,
                     char **why) {
  struct cordon_error *e = NULL;
  unsigned char *data = NULL;
  if (!digest || !cordon_digest_valid(digest)) {
    *why = strdup("not a digest");
    return -1;
  }
  if (cordon_cas_get(cas, digest, CORDON_DOCUMENT_MAX, &data, n, &e) < 0) {
    *why = strdup(e && e->message ? e->message : "unreadable");
    cordon_error_free(e);
    return -1;
  }
  *text = (char *)data;
  return 0;
}

static const char *member(const json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "";
}

static int check_body(struct walk *w, const struct cordon_audit_entry *e, const char *hash,
                      struct pool_manifest *m) {
  _cleanup_free_ char *text = NULL;
  _cleanup_free_ char *why = NULL;
  size_t n = 0;
  if (read_blob(w->cas, hash, &text, &n, &why) < 0)
    return broken(w, e, "pool body %s: %s", hash, why ? why : "unreadable");
  struct cordon_error *perr = NULL;
  if (pool_manifest_parse(text, n, m, &perr) < 0) {
    int r = broken(w, e, "pool body %s: %s", hash, perr ? perr->message : "invalid");
    cordon_error_free(perr);
    return r;
  }
  if (strcmp(m->pool_hash, hash) != 0) {
    pool_manifest_clear(m);
    return broken(w, e, "pool body %s hashes to %s", hash, m->pool_hash);
  }
  w->report->bodies++;
  return 0;
}

static int check_registration(struct walk *w, const struct cordon_audit_entry *e) {
  json_auto_t *details = NULL;
  if (jcs_parse(e->details_json, strlen(e->details_json), 0, "details", &details, NULL) < 0)
    return broken(w, e, "details are not JSON");
  const char *hash = member(details, "pool_hash");
  if (strcmp(e->event, "pool.retired") != 0) {
    struct pool_manifest m = {0};
    int r = check_body(w, e, hash, &m);
    if (r < 0)
      return r;
    bool same = strcmp(m.name, member(details, "name")) == 0;
    pool_manifest_clear(&m);
    if (!same)
      return broken(w, e, "pool body %s is not pool %s's", hash, member(details, "name"));
  }
  struct cordon_error *rerr = NULL;
  if (pool_registry_apply(&w->reg, e->index, e->event, e->details_json, &rerr) < 0) {
    int r = broken(w, e, "%s", rerr ? rerr->message : "registry");
    cordon_error_free(rerr);
    return r;
  }
  return 0;
}

/* A placement or refusal: the receipt, its agreement with the entry, and the decision made
 * again. */
static int check_placement(struct walk *w, const struct cordon_audit_entry *e) {
  bool placed = strcmp(e->event, "pool.placed") == 0;
  json_auto_t *details = NULL;
  if (jcs_parse(e->details_json, strlen(e->details_json), 0, "details", &details, NULL) < 0)
    return broken(w, e, "details are not JSON");
  const char *receipt_digest = member(details, "receipt");
  _cleanup_free_ char *doc = NULL;
  _cleanup_free_ char *why = NULL;
  size_t n = 0;
  if (read_blob(w->cas, receipt_digest, &doc, &n, &why) < 0)
    return broken(w, e, "receipt %s: %s", receipt_digest, why ? why : "unreadable");
  json_auto_t *body = NULL;
  _cleanup_free_ char *reason = NULL;
  int r = pool_receipt_check(doc, n, w->kid, &body, &reason, w->err);
  if (r < 0)
    return -1;
  if (r == 1)
    return broken(w, e, "receipt %s: %s", receipt_digest, reason ? reason : "invalid");
  w->report->receipts++;
  const char *type = member(body, "type");
  if (strcmp(type, placed ? "cordon.pool.placement" : "cordon.pool.refusal") != 0)
    return broken(w, e, "receipt %s is a %s", receipt_digest, type);
  static const char *const shared[] = {"pool", "pool_hash", "overrides_hash", NULL};
  for (size_t i = 0; shared[i]; i++)
    if (strcmp(member(body, shared[i]), member(details, shared[i])) != 0)
      return broken(w, e, "receipt %s: %s differs from the chain's", receipt_digest, shared[i]);
  if (placed && (strcmp(member(body, "effective_manifest_hash"),
                        member(details, "effective_manifest_hash")) ||
                 strcmp(member(body, "chosen_backend"), member(details, "chosen_backend"))))
    return broken(w, e, "receipt %s: its placement differs from the chain's", receipt_digest);
  if (!placed && strcmp(member(body, "rule"), member(details, "rule")) != 0)
    return broken(w, e, "receipt %s: rule differs from the chain's", receipt_digest);

  /* The decision again, from the stored pool body and overrides. */
  const char *rule = member(body, "rule");
  struct pool_manifest m = {0};
  if ((r = check_body(w, e, member(body, "pool_hash"), &m)) < 0)
    return r;
  if (strcmp(m.template_hash, member(body, "template_hash")) != 0) {
    pool_manifest_clear(&m);
    return broken(w, e, "receipt %s: template_hash is not the pool's", receipt_digest);
  }
  _cleanup_free_ char *overrides_text = NULL;
  _cleanup_free_ char *owhy = NULL;
  size_t on = 0;
  struct pool_recipe recipe = {0};
  struct cordon_error *perr = NULL;
  if (read_blob(w->cas, member(body, "overrides_hash"), &overrides_text, &on, &owhy) < 0) {
    pool_manifest_clear(&m);
    return broken(w, e, "overrides %s: %s", member(body, "overrides_hash"),
                  owhy ? owhy : "unreadable");
  }
  recipe.pool = strdup(m.name);
  if (jcs_parse(overrides_text, on, 0, "overrides", &recipe.overrides, &perr) < 0)
    recipe.overrides = NULL;
  cordon_error_free(perr);
  int verdict = 0;
  if (!recipe.pool) {
    verdict = cordon_error_set(w->err, CORDON_ERR_SYSTEM, ENOMEM, "pool verify");
  } else if (!json_is_object(recipe.overrides)) {
    verdict = broken(w, e, "overrides %s are not an object", member(body, "overrides_hash"));
  } else if (strcmp(rule, "pool_retired") == 0) {
    const struct pool_entry *pe = pool_registry_find(&w->reg, m.name);
    if (!pe || pe->state != POOL_RETIRED)
      verdict = broken(w, e, "refused as retired, but pool %s was not retired then", m.name);
  } else {
    struct pool_effective eff = {0};
    struct pool_refusal refusal = {0};
    struct cordon_error *merr = NULL;
    int mr = pool_merge(&m, &recipe, &eff, &refusal, &merr);
    if (mr < 0) {
      verdict = broken(w, e, "merge: %s", merr ? merr->message : "failed");
    } else if (placed || strcmp(rule, "no_backend_available") == 0) {
      if (mr == 1)
        verdict = broken(w, e, "the merge now refuses (%s): the receipt says otherwise",
                         pool_rule_name(refusal.rule));
      else if (placed && strcmp(eff.hash, member(body, "effective_manifest_hash")) != 0)
        verdict = broken(w, e, "effective manifest re-derived as %s, the receipt says %s", eff.hash,
                         member(body, "effective_manifest_hash"));
      else if (placed) {
        /* The selection was made for this effective manifest (the receipt check re-ran it). */
        _cleanup_free_ char *mismatch = NULL;
        int sm = pool_selector_inputs_match(eff.manifest, json_object_get(body, "selector_inputs"),
                                            &mismatch, w->err);
        verdict = sm < 0    ? -1
                  : sm == 1 ? broken(w, e, "receipt %s: %s", receipt_digest,
                                     mismatch ? mismatch : "mismatch")
                            : 0;
      }
    } else if (mr == 0 || strcmp(pool_rule_name(refusal.rule), rule) != 0 ||
               strcmp(refusal.field, member(body, "field")) != 0) {
      verdict =
          broken(w, e, "the merge now decides %s, the receipt says %s on %s",
                 mr == 0 ? "placed" : pool_rule_name(refusal.rule), rule, member(body, "field"));
    }
    cordon_error_free(merr);
    pool_effective_clear(&eff);
    pool_refusal_clear(&refusal);
  }
  pool_recipe_clear(&recipe);
  pool_manifest_clear(&m);
  if (verdict < 0)
    return verdict;
  if (placed) {
    /* The recorded effective manifest is in the CAS, intact. */
    _cleanup_free_ char *eff_text = NULL;
    _cleanup_free_ char *ewhy = NULL;
    size_t en = 0;
    if (read_blob(w->cas, member(details, "effective_manifest_hash"), &eff_text, &en, &ewhy) < 0)
      return broken(w, e, "effective manifest %s: %s", member(details, "effective_manifest_hash"),
                    ewhy ? ewhy : "unreadable");
  }
  return 0;
}

static int check_entry(const struct cordon_audit_entry *e, void *userdata) {
  struct walk *w = userdata;
  w->report->entries++;
  if (strcmp(e->event, "pool.registered") == 0 || strcmp(e->event, "pool.updated") == 0 ||
      strcmp(e->event, "pool.retired") == 0)
    return check_registration(w, e);
  if (strcmp(e->event, "pool.placed") == 0 || strcmp(e->event, "pool.override_refused") == 0)
    return check_placement(w, e);
  for (size_t i = 0; pool_dispatch_checkers[i].event; i++) {
    if (strcmp(e->event, pool_dispatch_checkers[i].event) != 0)
      continue;
    char *reason = NULL;
    int r = pool_dispatch_checkers[i].check(w->cas, e, w->kid, w->report, &reason, w->err);
    if (r < 0)
      return -1;
    if (r == 1) {
      int b = broken(w, e, "%s", reason ? reason : "broken");
      free(reason);
      return b;
    }
  }
  return 0;
}

int pool_verify(struct cordon_context *ctx, const char *expected_kid,
                struct pool_verify_report *report, struct cordon_error **err) {
  memset(report, 0, sizeof(*report));
  report->ok = true;
  struct cordon_audit_log *log = NULL;
  struct cordon_cas *cas = NULL;
  struct cordon_signing_key *key = NULL;
  int r = -1;
  if (!expected_kid) {
    if (cordon_signing_key_load(NULL, &key, err) < 0)
      goto out;
    expected_kid = cordon_signing_key_id(key);
  }
  if (cordon_audit_open_project(ctx, NULL, &log, err) < 0 ||
      cordon_cas_open_project(ctx, &cas, err) < 0)
    goto out;
  /* One pass: each entry is checked here only after the audit layer verified its HMAC and its
   * place in the chain (prev = the HMAC of the entry before it), under the same read lock, so
   * the walk never reads a line the chain does not vouch for. The first break, of the chain or
   * of a pool record, stops it. */
  struct cordon_audit_report chain = {0};
  struct walk w = {.cas = cas, .kid = expected_kid, .report = report, .err = err};
  int wr = cordon_audit_verify_foreach(log, &chain, check_entry, &w, err);
  pool_registry_clear(&w.reg);
  if (wr < 0 && report->ok) {
    cordon_audit_report_clear(&chain);
    goto out;
  }
  if (wr < 0 && err && *err) {
    /* A break stops the walk; it is a verdict, not an error. */
    cordon_error_free(*err);
    *err = NULL;
  }
  if (report->ok && chain.problem != CORDON_AUDIT_OK) {
    report->ok = false;
    report->object = strdup("audit chain");
    if (asprintf(&report->reason, "audit chain: entry %llu (%s line %llu): %s: %s",
                 (unsigned long long)chain.entry, chain.file ? chain.file : "?",
                 (unsigned long long)chain.line, cordon_audit_problem_name(chain.problem),
                 chain.reason ? chain.reason : "broken") < 0)
      report->reason = NULL;
  }
  cordon_audit_report_clear(&chain);
  r = 0;
out:
  if (key)
    cordon_signing_key_free(key);
  if (cas)
    cordon_cas_close(cas);
  if (log)
    cordon_audit_close(log);
  return r;
}
