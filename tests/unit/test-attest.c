/* Unit tests of the attestation's pure parts (src/attest/document.c, probes.c): the partition
 * its probes imply and its refusal of overlapping or incomplete sets, the builder's sorting and
 * its refusals, the tier rule, the check of a body read back (every tampering refused), and the
 * parse of what the boundary script prints. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "attest/document.h"
#include "attest/probes.h"
#include "crypto/jcs.h"
#include "crypto/keys.h"

static json_t *facts(void) {
  return json_pack("{s:s, s:s}", "architecture", "x86_64", "kernel_release", "6.1.0");
}

static void add(struct attest_backend *b, const char *name, const char *cap,
                enum attest_verdict v) {
  assert_int_equal(attest_probe_add(b, name, cap, v, "code", "evidence of %s", name), 0);
}

static void test_partition(void **state) {
  (void)state;
  struct attest_backend b = {.name = strdup("x"),
                             .declared = CORDON_CAP_EXEC | CORDON_CAP_FILE_RW | CORDON_CAP_NETWORK |
                                         CORDON_CAP_SNAPSHOT};
  add(&b, "exec", "exec", ATTEST_OBSERVED);
  add(&b, "a", "file_rw", ATTEST_OBSERVED);
  add(&b, "b", "file_rw", ATTEST_REFUTED);
  add(&b, "c", "network", ATTEST_OBSERVED);
  add(&b, "d", "network", ATTEST_UNVERIFIABLE);
  uint32_t o, r, u;
  attest_partition(&b, &o, &r, &u);
  assert_int_equal(o, CORDON_CAP_EXEC);
  assert_int_equal(r, CORDON_CAP_FILE_RW);
  /* Unprobed (snapshot) and partly unverifiable (network) are unverifiable, never observed. */
  assert_int_equal(u, CORDON_CAP_NETWORK | CORDON_CAP_SNAPSHOT);
  assert_int_equal(attest_partition_check(b.declared, o, r, u), 0);
  /* Overlap, missing and extra capabilities are refused. */
  assert_int_equal(attest_partition_check(b.declared, o | CORDON_CAP_FILE_RW, r, u), -1);
  assert_int_equal(attest_partition_check(b.declared, o, r, CORDON_CAP_NETWORK), -1);
  assert_int_equal(attest_partition_check(b.declared, o | CORDON_CAP_GPU, r, u), -1);
  /* The builder refuses a declared capability without a probe. */
  char *body = NULL;
  struct cordon_error *err = NULL;
  json_t *f = facts();
  assert_int_equal(attest_body_build(f, &b, 1, &body, &err), -1);
  assert_non_null(strstr(err->message, "snapshot has no probe"));
  cordon_error_free(err);
  err = NULL;
  /* ... and a probe of a capability not declared. */
  add(&b, "s", "snapshot", ATTEST_OBSERVED);
  add(&b, "g", "gpu", ATTEST_OBSERVED);
  assert_int_equal(attest_body_build(f, &b, 1, &body, &err), -1);
  assert_non_null(strstr(err->message, "not of a declared capability"));
  cordon_error_free(err);
  json_decref(f);
  attest_backend_clear(&b);
}

static void boundary(struct attest_backend *b, const char *const *observed) {
  const char *all[] = {ATTEST_HOST_PROCESSES_INVISIBLE,
                       ATTEST_HOST_FILES_INVISIBLE,
                       ATTEST_NOT_ROOT_ON_HOST,
                       ATTEST_SECCOMP_IN_FORCE,
                       ATTEST_MEMORY_LIMIT,
                       ATTEST_PIDS_LIMIT,
                       ATTEST_OWN_KERNEL,
                       NULL};
  for (size_t i = 0; all[i]; i++) {
    bool seen = false;
    for (size_t k = 0; observed[k]; k++)
      seen |= !strcmp(observed[k], all[i]);
    add(b, all[i], ATTEST_BOUNDARY, seen ? ATTEST_OBSERVED : ATTEST_REFUTED);
  }
}

static void test_tier(void **state) {
  (void)state;
  struct {
    const char *observed[8];
    enum cordon_isolation_tier tier;
  } cases[] = {
      {{NULL}, CORDON_TIER_NONE},
      {{ATTEST_HOST_FILES_INVISIBLE, NULL}, CORDON_TIER_NONE},
      {{ATTEST_HOST_FILES_INVISIBLE, ATTEST_NOT_ROOT_ON_HOST, NULL}, CORDON_TIER_PROCESS},
      {{ATTEST_HOST_FILES_INVISIBLE, ATTEST_NOT_ROOT_ON_HOST, ATTEST_HOST_PROCESSES_INVISIBLE,
        NULL},
       CORDON_TIER_PROCESS},
      /* Limits do not count towards the tier; seccomp does. */
      {{ATTEST_HOST_FILES_INVISIBLE, ATTEST_NOT_ROOT_ON_HOST, ATTEST_HOST_PROCESSES_INVISIBLE,
        ATTEST_SECCOMP_IN_FORCE, NULL},
       CORDON_TIER_CONTAINER},
      {{ATTEST_HOST_FILES_INVISIBLE, ATTEST_NOT_ROOT_ON_HOST, ATTEST_HOST_PROCESSES_INVISIBLE,
        ATTEST_SECCOMP_IN_FORCE, ATTEST_MEMORY_LIMIT, ATTEST_PIDS_LIMIT, NULL},
       CORDON_TIER_CONTAINER},
      /* Its own kernel on the host's side of nothing is no VM: the fake monitor's case. */
      {{ATTEST_OWN_KERNEL, NULL}, CORDON_TIER_NONE},
      {{ATTEST_OWN_KERNEL, ATTEST_HOST_FILES_INVISIBLE, ATTEST_NOT_ROOT_ON_HOST, NULL},
       CORDON_TIER_PROCESS},
      {{ATTEST_OWN_KERNEL, ATTEST_HOST_FILES_INVISIBLE, ATTEST_NOT_ROOT_ON_HOST,
        ATTEST_HOST_PROCESSES_INVISIBLE, NULL},
       CORDON_TIER_VM},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct attest_backend b = {0};
    boundary(&b, cases[i].observed);
    assert_int_equal(attest_tier(b.probes, b.n_probes), cases[i].tier);
    /* The declared tier caps what the probes show, never raises it. */
    add(&b, ATTEST_DECLARED_TIER, ATTEST_BOUNDARY, ATTEST_UNVERIFIABLE);
    free(b.probes[b.n_probes - 1].reason);
    b.probes[b.n_probes - 1].reason = strdup("tier_process");
    enum cordon_isolation_tier capped = attest_tier(b.probes, b.n_probes);
    assert_int_equal(capped,
                     cases[i].tier < CORDON_TIER_PROCESS ? cases[i].tier : CORDON_TIER_PROCESS);
    attest_backend_clear(&b);
  }
}

/* Two backends given out of order, probes out of order: the body comes out sorted, and checks. */
static char *build_two(void) {
  struct attest_backend b[2] = {
      {.name = strdup("zeta"), .declared = CORDON_CAP_EXEC},
      {.name = strdup("alpha"), .declared = CORDON_CAP_EXEC | CORDON_CAP_FILE_RW},
  };
  add(&b[0], "exec", "exec", ATTEST_OBSERVED);
  add(&b[1], "z", "file_rw", ATTEST_OBSERVED);
  add(&b[1], "exec", "exec", ATTEST_REFUTED);
  add(&b[1], "a", "file_rw", ATTEST_OBSERVED);
  boundary(&b[1],
           (const char *const[]){ATTEST_HOST_FILES_INVISIBLE, ATTEST_NOT_ROOT_ON_HOST, NULL});
  char *body = NULL;
  struct cordon_error *err = NULL;
  json_t *f = facts();
  assert_int_equal(attest_body_build(f, b, 2, &body, &err), 0);
  json_decref(f);
  attest_backend_clear(&b[0]);
  attest_backend_clear(&b[1]);
  return body;
}

static void test_build_sorted(void **state) {
  (void)state;
  char *body = build_two();
  const char *alpha = strstr(body, "\"alpha\""), *zeta = strstr(body, "\"zeta\"");
  assert_non_null(alpha);
  assert_true(alpha < zeta);
  /* file_rw's probes a before z; the boundary probes before exec (by capability, then name). */
  assert_true(strstr(body, "\"name\":\"a\"") < strstr(body, "\"name\":\"z\""));
  assert_true(strstr(body, "\"capability\":\"boundary\"") < strstr(body, "\"name\":\"exec\""));
  assert_non_null(strstr(body, "\"observed\":[\"file_rw\"],\"probes\""));
  assert_non_null(strstr(body, "\"refuted\":[\"exec\"],\"tier\":\"process\""));
  /* Byte-identical when built again. */
  char *again = build_two();
  assert_string_equal(body, again);
  free(again);
  free(body);
}

/* The check of a body read back: the built one passes (signer added), edits fail. */
static void check_edit(const char *body, const char *from, const char *to, bool ok) {
  char *edited = NULL;
  const char *at = strstr(body, from);
  assert_non_null(at);
  assert_true(asprintf(&edited, "%.*s%s%s", (int)(at - body), body, to, at + strlen(from)) > 0);
  json_t *o = json_loads(edited, 0, NULL);
  assert_non_null(o);
  json_object_set_new(o, "signer", json_object());
  char digest[65], *reason = NULL;
  size_t n = 0;
  int r = attest_body_check(o, digest, &n, &reason);
  if (ok != (r == 0))
    fail_msg("%s -> %s: %s", from, to, reason ? reason : "accepted");
  free(reason);
  json_decref(o);
  free(edited);
}

static void test_body_check(void **state) {
  (void)state;
  char *body = build_two();
  check_edit(body, "\"type\"", "\"type\"", true);
  check_edit(body, "\"refuted\":[\"exec\"]", "\"refuted\":[]", false);
  check_edit(body, "\"observed\":[\"file_rw\"]", "\"observed\":[\"exec\",\"file_rw\"]", false);
  check_edit(body, "\"tier\":\"process\"", "\"tier\":\"vm\"", false);
  check_edit(body, "\"name\":\"exec\",\"reason\":\"code\",\"verdict\":\"refuted\"",
             "\"name\":\"exec\",\"reason\":\"code\",\"verdict\":\"observed\"", false);
  check_edit(body, "x86_64", "aarch64", false); /* the digest no longer matches */
  check_edit(body, "\"architecture\"", "\"hostname\"", false);
  check_edit(body, "\"zeta\"", "\"aaa\"", false); /* unsorted */
  check_edit(body, "\"cordon.isolation-attestation.v1\"", "\"x\"", false);
  free(body);
}

static void test_inside_parse(void **state) {
  (void)state;
  struct attest_inside in;
  assert_int_equal(attest_inside_parse("proc=yes\ncomm=\nfile=hidden\nuid=1000\n"
                                       "uid_map=0 100000 65536 \nseccomp=2\nkernel=6.1\n"
                                       "interfaces=lo,\nconnect=refused\n",
                                       &in),
                   0);
  assert_string_equal(in.uid, "1000");
  assert_string_equal(in.marker_comm, "");
  assert_int_equal(attest_host_uid(in.uid_map, 1000), 101000);
  assert_int_equal(attest_host_uid("0 0 4294967295", 0), 0);
  assert_int_equal(attest_host_uid("1000 0 1", 1000), 0);
  assert_int_equal(attest_host_uid("1000 0 1", 5), -1);
  struct attest_host host = {.kernel_release = "6.1"};
  struct attest_backend b = {.name = strdup("x")};
  assert_int_equal(attest_boundary_probes(&b, &in, &host, true), 0);
  for (size_t i = 0; i < b.n_probes; i++) {
    bool refuted = !strcmp(b.probes[i].name, ATTEST_OWN_KERNEL);
    if ((b.probes[i].verdict == ATTEST_REFUTED) != refuted)
      fail_msg("%s: %s", b.probes[i].name, attest_verdict_name(b.probes[i].verdict));
  }
  attest_backend_clear(&b);
  attest_inside_clear(&in);
}

/* A signed attestation verifies (anchored and not); every single byte flipped fails. */
static void test_every_byte_flip(void **state) {
  (void)state;
  uint8_t seed[32];
  memset(seed, 7, sizeof(seed));
  struct cordon_signing_key *key = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(keys_signing_key_from_seed(seed, &key, &err), 0);
  char *body = build_two(), *doc = NULL;
  size_t length = 0;
  assert_int_equal(cordon_document_sign(key, body, strlen(body), &doc, &length, &err), 0);
  const char *kid = cordon_signing_key_id(key);
  struct cordon_attest_report report;
  assert_int_equal(cordon_attest_verify(doc, length, kid, &report, &err), 0);
  assert_int_equal(report.verdict, CORDON_VERDICT_VERIFIED);
  assert_int_equal(report.n_backends, 2);
  cordon_attest_report_clear(&report);
  assert_int_equal(cordon_attest_verify(doc, length, NULL, &report, &err), 0);
  assert_int_equal(report.verdict, CORDON_VERDICT_UNANCHORED);
  cordon_attest_report_clear(&report);
  for (size_t i = 0; i < length; i++) {
    doc[i] ^= 0x01;
    assert_int_equal(cordon_attest_verify(doc, length, kid, &report, &err), 0);
    if (report.verdict != CORDON_VERDICT_FAILED)
      fail_msg("byte %zu flipped: %s", i, cordon_verdict_name(report.verdict));
    cordon_attest_report_clear(&report);
    doc[i] ^= 0x01;
  }
  free(doc);
  free(body);
  cordon_signing_key_free(key);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_partition),    cmocka_unit_test(test_tier),
      cmocka_unit_test(test_build_sorted), cmocka_unit_test(test_body_check),
      cmocka_unit_test(test_inside_parse), cmocka_unit_test(test_every_byte_flip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
