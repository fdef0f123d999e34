/* Unit tests of the pool module's pure parts (src/pool/): manifest validation (each refusal
 * names its field), pool_hash stability, every override refusal rule, the purity of the merge,
 * the selector's choice, receipts (byte-identical when sealed twice, every flipped byte
 * refused), the registry projection, and the session inputs (credentials by name). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "crypto/jcs.h"
#include "crypto/keys.h"
#include "pool/pool.h"

#define MANIFEST                                                                         \
  "{\"name\":\"ci\",\"backend_allowlist\":[\"ns\",\"docker\"],"                          \
  "\"template\":{\"env\":{\"LANG\":\"C\"},\"timeout_seconds\":60,\"net\":\"loopback\","  \
  "\"memory\":268435456,\"hidden\":[\"secrets\"],\"capabilities\":[\"exec\"]},"          \
  "\"exposed_fields\":[\"env\",\"net\",\"credential_env\",\"capabilities\",\"backend\"," \
  "\"hidden\"],"                                                                         \
  "\"max_concurrency\":2,\"capability_ceiling\":[\"exec\",\"file_rw\",\"network\"],"     \
  "\"network_egress_class\":\"restricted\",\"credential_env_allowlist\":[\"GITHUB_TOKEN\"]}"

static void parse_ok(const char *text, struct pool_manifest *m) {
  struct cordon_error *err = NULL;
  int r = pool_manifest_parse(text, strlen(text), m, &err);
  if (r < 0)
    fail_msg("%s", err->message);
}

/* The manifest with one member replaced (key: "template.X" for a template member); value NULL
 * deletes it. */
static char *with(const char *key, const char *value_json) {
  json_t *doc = json_loads(MANIFEST, 0, NULL);
  json_t *target = doc;
  const char *name = key;
  if (strncmp(key, "template.", 9) == 0) {
    target = json_object_get(doc, "template");
    name = key + 9;
  }
  if (value_json)
    json_object_set_new(target, name, json_loads(value_json, JSON_DECODE_ANY, NULL));
  else
    json_object_del(target, name);
  char *text = json_dumps(doc, 0);
  json_decref(doc);
  return text;
}

static void expect_invalid(const char *text, const char *field) {
  struct pool_manifest m;
  struct cordon_error *err = NULL;
  assert_true(pool_manifest_parse(text, strlen(text), &m, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_INVALID);
  char prefix[128];
  snprintf(prefix, sizeof(prefix), "pool manifest: %s:", field);
  if (strncmp(err->message, prefix, strlen(prefix)) != 0)
    fail_msg("expected the error to name %s, got: %s", field, err->message);
  cordon_error_free(err);
}

static void test_manifest_valid(void **state) {
  (void)state;
  struct pool_manifest m;
  parse_ok(MANIFEST, &m);
  assert_string_equal(m.name, "ci");
  assert_string_equal(m.backend_allowlist[0], "ns");
  assert_string_equal(m.backend_allowlist[1], "docker");
  assert_null(m.backend_allowlist[2]);
  assert_int_equal(m.max_concurrency, 2);
  assert_int_equal(m.network_egress_class, CORDON_EGRESS_RESTRICTED);
  assert_int_equal(m.capability_ceiling, CORDON_CAP_EXEC | CORDON_CAP_FILE_RW | CORDON_CAP_NETWORK);
  assert_int_equal(m.template_.net, CORDON_EGRESS_LOOPBACK);
  assert_int_equal(m.template_.memory, 268435456);
  assert_string_equal(m.template_.env[0], "LANG=C");
  assert_int_equal(strlen(m.pool_hash), 64);
  pool_manifest_clear(&m);
}

/* The hash is of the canonical form: whitespace and member order do not count; any value does;
 * a pool_hash member is accepted only when it is the hash. */
static void test_hash_stability(void **state) {
  (void)state;
  struct pool_manifest a, b, c;
  parse_ok(MANIFEST, &a);
  json_t *doc = json_loads(MANIFEST, 0, NULL);
  char *pretty = json_dumps(doc, JSON_INDENT(3) | JSON_SORT_KEYS);
  parse_ok(pretty, &b);
  assert_string_equal(a.pool_hash, b.pool_hash);
  assert_string_equal(a.template_hash, b.template_hash);
  assert_memory_equal(a.canonical, b.canonical, a.canonical_length);
  char *other = with("max_concurrency", "3");
  parse_ok(other, &c);
  assert_string_not_equal(a.pool_hash, c.pool_hash);
  assert_string_equal(a.template_hash, c.template_hash);
  pool_manifest_clear(&c);
  /* With its own hash: accepted; with another: refused naming pool_hash. */
  json_object_set_new(doc, "pool_hash", json_string(a.pool_hash));
  char *hashed = json_dumps(doc, 0);
  parse_ok(hashed, &c);
  assert_string_equal(c.pool_hash, a.pool_hash);
  pool_manifest_clear(&c);
  json_object_set_new(doc, "pool_hash", json_string(b.template_hash));
  char *wrong = json_dumps(doc, 0);
  expect_invalid(wrong, "pool_hash");
  /* The same text always gives the same hash (twice in a row). */
  parse_ok(MANIFEST, &c);
  assert_string_equal(c.pool_hash, a.pool_hash);
  pool_manifest_clear(&c);
  free(pretty);
  free(other);
  free(hashed);
  free(wrong);
  json_decref(doc);
  pool_manifest_clear(&a);
  pool_manifest_clear(&b);
}

static void test_manifest_refusals(void **state) {
  (void)state;
  static const struct {
    const char *key, *value, *field;
  } cases[] = {
      {"colour", "\"blue\"", "colour"},                 /* unknown field */
      {"template.colour", "1", "template"},             /* unknown template field */
      {"name", "5", "name"},                            /* wrong type */
      {"name", "\"-bad\"", "name"},                     /* bad name */
      {"name", NULL, "name"},                           /* missing */
      {"backend_allowlist", "[]", "backend_allowlist"}, /* empty */
      {"backend_allowlist", "[\"ns\",\"ns\"]", "backend_allowlist"},
      {"backend_allowlist", "\"ns\"", "backend_allowlist"},
      {"max_concurrency", "\"2\"", "max_concurrency"},
      {"max_concurrency", "0", "max_concurrency"},
      {"max_concurrency", "1.5", "max_concurrency"},
      {"exposed_fields", "[\"root\"]", "exposed_fields"}, /* not an override key */
      {"capability_ceiling", "[\"teleport\"]", "capability_ceiling"},
      {"network_egress_class", "\"wide\"", "network_egress_class"},
      {"credential_env_allowlist", "[\"BAD-NAME\"]", "credential_env_allowlist"},
      {"template.net", "\"open\"", "template.net"},                    /* wider than the ceiling */
      {"template.capabilities", "[\"gpu\"]", "template.capabilities"}, /* above ceiling */
      {"template.credential_env", "[\"HOME\"]", "template.credential_env"},
      {"template.memory", "-1", "template.memory"},
      {"template.timeout_seconds", "\"60\"", "template.timeout_seconds"},
      {"template.root", "\"relative\"", "template.root"},
      {"template.hidden", "[\"../up\"]", "template.hidden"},
      {"template.env", "{\"A B\":\"x\"}", "template.env"},
      {"template.env", "{\"A\":1}", "template.env"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char *text = with(cases[i].key, cases[i].value);
    expect_invalid(text, cases[i].field);
    free(text);
  }
  struct pool_manifest m;
  struct cordon_error *err = NULL;
  assert_true(pool_manifest_parse("[]", 2, &m, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  assert_true(pool_manifest_parse("{", 1, &m, &err) < 0);
  cordon_error_free(err);
}

static void recipe(const char *overrides, struct pool_recipe *r) {
  char *text = NULL;
  assert_true(asprintf(&text, "{\"pool\":\"ci\",\"overrides\":%s}", overrides) > 0);
  struct cordon_error *err = NULL;
  if (pool_recipe_parse(text, strlen(text), r, &err) < 0)
    fail_msg("%s", err->message);
  free(text);
}

static void expect_refused(const char *overrides, enum pool_rule rule, const char *field) {
  struct pool_manifest m;
  parse_ok(MANIFEST, &m);
  struct pool_recipe r;
  recipe(overrides, &r);
  struct pool_effective e;
  struct pool_refusal refusal;
  struct cordon_error *err = NULL;
  int got = pool_merge(&m, &r, &e, &refusal, &err);
  if (got != 1)
    fail_msg("%s: expected %s, got %d", overrides, pool_rule_name(rule), got);
  assert_string_equal(pool_rule_name(refusal.rule), pool_rule_name(rule));
  assert_string_equal(refusal.field, field);
  assert_non_null(refusal.message);
  assert_null(e.manifest);
  pool_refusal_clear(&refusal);
  pool_recipe_clear(&r);
  pool_manifest_clear(&m);
}

static void test_refusal_rules(void **state) {
  (void)state;
  expect_refused("{\"timeout_seconds\":5}", POOL_RULE_FIELD_NOT_EXPOSED, "timeout_seconds");
  expect_refused("{\"image\":\"x\"}", POOL_RULE_FIELD_NOT_EXPOSED, "image");
  expect_refused("{\"capabilities\":[\"gpu\"]}", POOL_RULE_CAPABILITY_ABOVE_CEILING,
                 "capabilities");
  expect_refused("{\"net\":\"open\"}", POOL_RULE_EGRESS_ABOVE_CEILING, "net");
  expect_refused("{\"credential_env\":[\"AWS_SECRET_ACCESS_KEY\"]}",
                 POOL_RULE_CREDENTIAL_NOT_ALLOWED, "credential_env");
  expect_refused("{\"backend\":\"worktree\"}", POOL_RULE_BACKEND_NOT_ALLOWED, "backend");
  expect_refused("{\"sudo\":true}", POOL_RULE_INVALID_OVERRIDE, "sudo");
  expect_refused("{\"net\":7}", POOL_RULE_INVALID_OVERRIDE, "net");
  expect_refused("{\"hidden\":[\"/etc\"]}", POOL_RULE_INVALID_OVERRIDE, "hidden");
  expect_refused("{\"env\":{\"A\":1}}", POOL_RULE_INVALID_OVERRIDE, "env");
  /* The first broken rule in key order: capabilities before net. */
  expect_refused("{\"net\":\"open\",\"capabilities\":[\"gpu\"]}",
                 POOL_RULE_CAPABILITY_ABOVE_CEILING, "capabilities");
  /* A recipe for another pool. */
  struct pool_manifest m;
  parse_ok(MANIFEST, &m);
  struct pool_recipe r;
  struct cordon_error *err = NULL;
  const char *text = "{\"pool\":\"other\"}";
  assert_int_equal(pool_recipe_parse(text, strlen(text), &r, &err), 0);
  struct pool_effective e;
  struct pool_refusal refusal;
  assert_int_equal(pool_merge(&m, &r, &e, &refusal, &err), 1);
  assert_int_equal(refusal.rule, POOL_RULE_POOL_MISMATCH);
  pool_refusal_clear(&refusal);
  pool_recipe_clear(&r);
  /* Malformed recipes are errors, not refusals. */
  text = "{\"pool\":\"ci\",\"extra\":1}";
  assert_true(pool_recipe_parse(text, strlen(text), &r, &err) < 0);
  cordon_error_free(err);
  err = NULL;
  text = "{\"overrides\":{}}";
  assert_true(pool_recipe_parse(text, strlen(text), &r, &err) < 0);
  cordon_error_free(err);
  pool_manifest_clear(&m);
}

/* The merge is a pure function: the same inputs give the same bytes, the inputs are untouched,
 * and a recipe can only add to the template's protections. */
static void test_merge_purity(void **state) {
  (void)state;
  struct pool_manifest m;
  parse_ok(MANIFEST, &m);
  char *before = strdup(m.canonical);
  struct pool_recipe r;
  recipe("{\"env\":{\"A\":\"1\",\"LANG\":\"en\"},\"net\":\"none\",\"hidden\":[\"other\"],"
         "\"credential_env\":[\"GITHUB_TOKEN\"],\"capabilities\":[\"network\"]}",
         &r);
  char *overrides_before = json_dumps(r.overrides, JSON_SORT_KEYS);
  struct pool_effective e1, e2;
  struct pool_refusal refusal;
  struct cordon_error *err = NULL;
  assert_int_equal(pool_merge(&m, &r, &e1, &refusal, &err), 0);
  assert_int_equal(pool_merge(&m, &r, &e2, &refusal, &err), 0);
  assert_int_equal(e1.canonical_length, e2.canonical_length);
  assert_memory_equal(e1.canonical, e2.canonical, e1.canonical_length);
  assert_string_equal(e1.hash, e2.hash);
  assert_string_equal(m.canonical, before);
  char *overrides_after = json_dumps(r.overrides, JSON_SORT_KEYS);
  assert_string_equal(overrides_before, overrides_after);
  const json_t *em = e1.manifest;
  assert_string_equal(json_string_value(json_object_get(json_object_get(em, "env"), "LANG")), "en");
  assert_string_equal(json_string_value(json_object_get(json_object_get(em, "env"), "A")), "1");
  assert_string_equal(json_string_value(json_object_get(em, "net")), "none");
  /* hidden: the template's stays, the recipe's joins (sorted) */
  const json_t *hidden = json_object_get(em, "hidden");
  assert_int_equal(json_array_size(hidden), 2);
  assert_string_equal(json_string_value(json_array_get(hidden, 0)), "other");
  assert_string_equal(json_string_value(json_array_get(hidden, 1)), "secrets");
  assert_int_equal(json_array_size(json_object_get(em, "capabilities")), 2);
  assert_string_equal(json_string_value(json_object_get(em, "pool_hash")), m.pool_hash);
  /* An empty recipe gives the template, with a different hash. */
  struct pool_recipe empty;
  assert_int_equal(pool_recipe_empty("ci", &empty, &err), 0);
  struct pool_effective e3;
  assert_int_equal(pool_merge(&m, &empty, &e3, &refusal, &err), 0);
  assert_string_not_equal(e3.hash, e1.hash);
  assert_string_equal(json_string_value(json_object_get(e3.manifest, "net")), "loopback");
  assert_true(json_is_null(json_object_get(e3.manifest, "image")));
  pool_effective_clear(&e1);
  pool_effective_clear(&e2);
  pool_effective_clear(&e3);
  pool_recipe_clear(&r);
  pool_recipe_clear(&empty);
  free(before);
  free(overrides_before);
  free(overrides_after);
  pool_manifest_clear(&m);
}

/* A status row: every feature enforced, every class offered, tier process. */
#define ST(name, available, caps) \
  { name, available, caps, CORDON_FEATURE_ALL, CORDON_TIER_PROCESS, 0xfu }

static void test_selector(void **state) {
  (void)state;
  struct pool_manifest m;
  parse_ok(MANIFEST, &m);
  struct pool_recipe r;
  recipe("{}", &r);
  struct pool_effective e;
  struct pool_refusal refusal;
  struct cordon_error *err = NULL;
  assert_int_equal(pool_merge(&m, &r, &e, &refusal, &err), 0);
  uint32_t caps = CORDON_CAP_EXEC | CORDON_CAP_FILE_RW | CORDON_CAP_NETWORK;
  struct pool_backend_status s1[] = {ST("ns", false, caps), ST("docker", true, caps)};
  json_t *inputs = NULL;
  const char *chosen = NULL;
  char *reasons = NULL;
  assert_int_equal(pool_selector_inputs(e.manifest, s1, 2, NULL, &inputs, &chosen, &reasons, &err),
                   0);
  assert_string_equal(chosen, "docker");
  assert_null(reasons);
  /* The recorded inputs replay to the same choice; without an attestation they say so. */
  char *replayed = NULL;
  assert_int_equal(pool_selection_replay(inputs, &replayed, &err), 0);
  assert_string_equal(replayed, "docker");
  free(replayed);
  assert_true(json_is_null(json_object_get(inputs, "attestation")));
  assert_true(
      json_is_true(json_object_get(json_object_get(inputs, "requirements"), "allow_unverifiable")));
  /* A flipped availability in the record no longer replays to the same bytes' choice. */
  json_object_set_new(json_array_get(json_object_get(inputs, "candidates"), 0), "available",
                      json_true());
  assert_int_equal(pool_selection_replay(inputs, &replayed, &err), 0);
  assert_string_equal(replayed, "ns");
  free(replayed);
  /* Not a selector inputs object: 1. */
  json_object_set_new(inputs, "type", json_string("other"));
  assert_int_equal(pool_selection_replay(inputs, &replayed, &err), 1);
  json_decref(inputs);
  struct pool_backend_status s2[] = {ST("ns", true, caps), ST("docker", true, caps)};
  assert_int_equal(pool_selector_inputs(e.manifest, s2, 2, NULL, &inputs, &chosen, &reasons, &err),
                   0);
  assert_string_equal(chosen, "ns");
  json_decref(inputs);
  /* An attestation refuting ns's network (the work's net class needs it) passes ns over. */
  struct cordon_select_attested rows[] = {
      {.name = "ns", .refuted = CORDON_CAP_NETWORK, .observed = CORDON_CAP_EXEC}};
  struct pool_attestation att = {.sha256 = "00", .kid = "kid", .rows = rows, .n_rows = 1};
  assert_int_equal(pool_selector_inputs(e.manifest, s2, 2, &att, &inputs, &chosen, &reasons, &err),
                   0);
  assert_string_equal(chosen, "docker");
  assert_string_equal(
      json_string_value(json_object_get(json_object_get(inputs, "attestation"), "sha256")), "00");
  json_decref(inputs);
  /* A backend without a required capability (exec) is passed over; none left: NULL, with a
   * reason per backend. */
  struct pool_backend_status s3[] = {ST("ns", true, CORDON_CAP_FILE_RW), ST("docker", false, caps)};
  assert_int_equal(pool_selector_inputs(e.manifest, s3, 2, NULL, &inputs, &chosen, &reasons, &err),
                   0);
  assert_null(chosen);
  assert_non_null(strstr(reasons, "ns: does not declare exec"));
  assert_non_null(strstr(reasons, "docker: unavailable on this host"));
  free(reasons);
  json_decref(inputs);
  pool_effective_clear(&e);
  pool_recipe_clear(&r);
  pool_manifest_clear(&m);
}

static void test_receipts(void **state) {
  (void)state;
  uint8_t seed[32];
  memset(seed, 9, sizeof(seed));
  struct cordon_signing_key *key = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(keys_signing_key_from_seed(seed, &key, &err), 0);
  struct pool_manifest m;
  parse_ok(MANIFEST, &m);
  struct pool_recipe r;
  recipe("{\"net\":\"none\"}", &r);
  struct pool_effective e;
  struct pool_refusal refusal;
  assert_int_equal(pool_merge(&m, &r, &e, &refusal, &err), 0);
  uint32_t caps = CORDON_CAP_EXEC | CORDON_CAP_FILE_RW | CORDON_CAP_NETWORK;
  struct pool_backend_status st[] = {ST("ns", true, caps), ST("docker", true, caps)};
  json_t *inputs = NULL;
  const char *chosen = NULL;
  char *reasons = NULL;
  assert_int_equal(pool_selector_inputs(e.manifest, st, 2, NULL, &inputs, &chosen, &reasons, &err),
                   0);
  char *d1 = NULL, *d2 = NULL;
  size_t n1 = 0, n2 = 0;
  assert_int_equal(pool_seal_placement(key, &m, &r, &e, inputs, chosen, &d1, &n1, &err), 0);
  assert_int_equal(pool_seal_placement(key, &m, &r, &e, inputs, chosen, &d2, &n2, &err), 0);
  assert_int_equal(n1, n2);
  assert_memory_equal(d1, d2, n1);
  json_t *body = NULL;
  char *reason = NULL;
  assert_int_equal(pool_receipt_check(d1, n1, cordon_signing_key_id(key), &body, &reason, &err), 0);
  assert_string_equal(json_string_value(json_object_get(body, "effective_manifest_hash")), e.hash);
  assert_string_equal(json_string_value(json_object_get(body, "chosen_backend")), "ns");
  json_decref(body);
  /* Every byte flipped (but the final newline) is refused. */
  for (size_t i = 0; i + 1 < n1; i++) {
    char *copy = malloc(n1);
    memcpy(copy, d1, n1);
    copy[i] ^= 0x01;
    body = NULL;
    reason = NULL;
    int got = pool_receipt_check(copy, n1, cordon_signing_key_id(key), &body, &reason, &err);
    if (got != 1)
      fail_msg("byte %zu flipped: accepted", i);
    free(reason);
    free(copy);
  }
  /* A refusal receipt: sealed the same twice, and checked. */
  struct pool_recipe bad;
  recipe("{\"net\":\"open\"}", &bad);
  struct pool_effective none;
  assert_int_equal(pool_merge(&m, &bad, &none, &refusal, &err), 1);
  char *f1 = NULL, *f2 = NULL;
  assert_int_equal(pool_seal_refusal(key, "ci", &m, &bad, &refusal, &f1, &n1, &err), 0);
  assert_int_equal(pool_seal_refusal(key, "ci", &m, &bad, &refusal, &f2, &n2, &err), 0);
  assert_memory_equal(f1, f2, n1);
  assert_int_equal(pool_receipt_check(f1, n1, NULL, &body, &reason, &err), 0);
  assert_string_equal(json_string_value(json_object_get(body, "rule")), "egress_above_ceiling");
  json_decref(body);
  /* Signed by another key than the expected one: refused. */
  memset(seed, 10, sizeof(seed));
  struct cordon_signing_key *other = NULL;
  assert_int_equal(keys_signing_key_from_seed(seed, &other, &err), 0);
  assert_int_equal(pool_receipt_check(f1, n1, cordon_signing_key_id(other), &body, &reason, &err),
                   1);
  free(reason);
  cordon_signing_key_free(other);
  pool_refusal_clear(&refusal);
  free(d1);
  free(d2);
  free(f1);
  free(f2);
  json_decref(inputs);
  pool_effective_clear(&e);
  pool_recipe_clear(&r);
  pool_recipe_clear(&bad);
  pool_manifest_clear(&m);
  cordon_signing_key_free(key);
}

#define H1 "1111111111111111111111111111111111111111111111111111111111111111"
#define H2 "2222222222222222222222222222222222222222222222222222222222222222"

static void test_registry(void **state) {
  (void)state;
  struct pool_registry reg = {0};
  struct cordon_error *err = NULL;
  assert_int_equal(pool_registry_apply(&reg, 1, "session.create", "{}", &err), 0);
  assert_int_equal(pool_registry_apply(&reg, 2, "pool.registered",
                                       "{\"name\":\"b\",\"pool_hash\":\"" H1 "\"}", &err),
                   0);
  assert_int_equal(pool_registry_apply(&reg, 3, "pool.registered",
                                       "{\"name\":\"a\",\"pool_hash\":\"" H1 "\"}", &err),
                   0);
  assert_int_equal(pool_registry_apply(&reg, 4, "pool.updated",
                                       "{\"name\":\"b\",\"pool_hash\":\"" H2 "\"}", &err),
                   0);
  assert_int_equal(reg.n_entries, 2);
  assert_string_equal(reg.entries[0].name, "a"); /* sorted */
  const struct pool_entry *b = pool_registry_find(&reg, "b");
  assert_non_null(b);
  assert_string_equal(b->pool_hash, H2);
  assert_int_equal(b->version, 2);
  /* Retire with a stale hash: refused; with the current one: retired. */
  assert_true(pool_registry_apply(&reg, 5, "pool.retired",
                                  "{\"name\":\"b\",\"pool_hash\":\"" H1 "\"}", &err) < 0);
  cordon_error_free(err);
  err = NULL;
  assert_int_equal(pool_registry_apply(&reg, 6, "pool.retired",
                                       "{\"name\":\"b\",\"pool_hash\":\"" H2 "\"}", &err),
                   0);
  assert_int_equal(pool_registry_find(&reg, "b")->state, POOL_RETIRED);
  /* Update of a retired or unknown pool, malformed details: integrity errors. */
  static const char *const bad[][2] = {
      {"pool.updated", "{\"name\":\"b\",\"pool_hash\":\"" H1 "\"}"},
      {"pool.updated", "{\"name\":\"zz\",\"pool_hash\":\"" H1 "\"}"},
      {"pool.registered", "{\"name\":\"a\",\"pool_hash\":\"" H1 "\"}"},
      {"pool.registered", "{\"name\":\"c\"}"},
      {"pool.registered", "not json"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_true(pool_registry_apply(&reg, 7, bad[i][0], bad[i][1], &err) < 0);
    assert_int_equal(err->kind, CORDON_ERR_INTEGRITY);
    cordon_error_free(err);
    err = NULL;
  }
  /* Registered again after retirement: active, a new version. */
  assert_int_equal(pool_registry_apply(&reg, 8, "pool.registered",
                                       "{\"name\":\"b\",\"pool_hash\":\"" H1 "\"}", &err),
                   0);
  assert_int_equal(pool_registry_find(&reg, "b")->state, POOL_ACTIVE);
  assert_int_equal(pool_registry_find(&reg, "b")->version, 3);
  assert_null(pool_registry_find(&reg, "c"));
  pool_registry_clear(&reg);
}

static void test_session_inputs(void **state) {
  (void)state;
  struct pool_manifest m;
  parse_ok(MANIFEST, &m);
  struct pool_recipe r;
  recipe("{\"credential_env\":[\"GITHUB_TOKEN\"],\"env\":{\"A\":\"1\"}}", &r);
  struct pool_effective e;
  struct pool_refusal refusal;
  struct cordon_error *err = NULL;
  assert_int_equal(pool_merge(&m, &r, &e, &refusal, &err), 0);
  char *envp[] = {"HOME=/root", "GITHUB_TOKEN=s3cret", NULL};
  struct pool_session_inputs in;
  assert_int_equal(pool_session_inputs_build(e.manifest, "ns", envp, &in, &err), 0);
  assert_string_equal(in.backend, "ns");
  assert_string_equal(in.manifest.root, "/workspace");
  assert_string_equal(in.manifest.env[0], "A=1");
  assert_string_equal(in.manifest.env[1], "GITHUB_TOKEN=s3cret");
  assert_string_equal(in.manifest.env[2], "LANG=C");
  assert_null(in.manifest.env[3]);
  assert_int_equal(in.manifest.policy.egress, CORDON_EGRESS_LOOPBACK);
  assert_int_equal(in.manifest.policy.limits.memory_bytes, 268435456);
  assert_true(in.manifest.policy.require_enforcement);
  assert_string_equal(in.manifest.policy.hidden[0], "secrets");
  assert_true(in.manifest.default_timeout == 60.0);
  /* The secret's value is in no hashed form. */
  assert_null(strstr(e.canonical, "s3cret"));
  pool_session_inputs_clear(&in);
  /* A credential the caller does not have: refused by name, never dropped. */
  char *bare[] = {"HOME=/root", NULL};
  assert_true(pool_session_inputs_build(e.manifest, "ns", bare, &in, &err) < 0);
  assert_non_null(strstr(err->message, "GITHUB_TOKEN"));
  cordon_error_free(err);
  pool_effective_clear(&e);
  pool_recipe_clear(&r);
  pool_manifest_clear(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_manifest_valid),    cmocka_unit_test(test_hash_stability),
      cmocka_unit_test(test_manifest_refusals), cmocka_unit_test(test_refusal_rules),
      cmocka_unit_test(test_merge_purity),      cmocka_unit_test(test_selector),
      cmocka_unit_test(test_receipts),          cmocka_unit_test(test_registry),
      cmocka_unit_test(test_session_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
