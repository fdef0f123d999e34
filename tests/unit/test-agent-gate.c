/* Unit tests of the pure parts of the accuracy gate and the candidate build
 * (src/agent/gate-format.c, src/agent/build-record.c): a baseline and a build record encode to
 * canonical JSON and read back the same; anything but that exact form is refused; a baseline's
 * place is beneath the project's .cordon/; build ids are checked before they name a file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/build.h"
#include "agent/gate.h"

#define HEX_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HEX_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static const char sample[] =
    "{\"format\":\"cordon-gate-baseline/1\",\"paths\":["
    "{\"kind\":\"file\",\"mode\":\"0644\",\"path\":\"a.txt\",\"sha256\":\"" HEX_A "\"},"
    "{\"kind\":\"absent\",\"path\":\"gone\"},"
    "{\"kind\":\"symlink\",\"path\":\"link\",\"target\":\"x\"},"
    "{\"kind\":\"special\",\"path\":\"p\",\"type\":\"fifo\"},"
    "{\"kind\":\"directory\",\"path\":\"tests\",\"snapshot\":\"" HEX_B "\"},"
    "{\"kind\":\"file\",\"mode\":\"0755\",\"path\":\"tests-run\",\"sha256\":\"" HEX_A "\"}]}";

static void baseline_round_trip(void **state) {
  (void)state;
  struct agent_gate_baseline *b = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(agent_gate_decode(sample, strlen(sample), &b, &err), 0);
  assert_int_equal(b->count, 6);
  assert_int_equal(b->paths[0].kind, AGENT_GATE_FILE);
  assert_int_equal(b->paths[0].mode, 0644);
  assert_int_equal(b->paths[1].kind, AGENT_GATE_ABSENT);
  assert_string_equal(b->paths[2].target, "x");
  assert_int_equal(b->paths[3].special, 'p');
  assert_string_equal(b->paths[4].id, HEX_B);
  char *text = NULL;
  size_t length = 0;
  assert_int_equal(agent_gate_encode(b, &text, &length, &err), 0);
  assert_int_equal(length, strlen(sample));
  assert_memory_equal(text, sample, length);
  free(text);
  agent_gate_baseline_free(b);
}

/* Replace the first occurrence of from with to in sample, decode, expect INVALID. */
static void refused(const char *from, const char *to) {
  char text[2048];
  const char *at = strstr(sample, from);
  assert_non_null(at);
  snprintf(text, sizeof(text), "%.*s%s%s", (int)(at - sample), sample, to, at + strlen(from));
  struct agent_gate_baseline *b = NULL;
  struct cordon_error *err = NULL;
  if (agent_gate_decode(text, strlen(text), &b, &err) == 0)
    fail_msg("accepted: %s", text);
  assert_null(b);
  assert_non_null(err);
  assert_int_equal(err->kind, CORDON_ERR_INVALID);
  assert_null(strchr(err->message, '\n'));
  cordon_error_free(err);
}

static void baseline_refusals(void **state) {
  (void)state;
  refused("{\"format\"", "{ \"format\"");                      /* not canonical */
  refused("cordon-gate-baseline/1", "cordon-gate-baseline/2"); /* another format */
  refused("\"path\":\"gone\"", "\"path\":\"../gone\"");        /* escapes */
  refused("\"path\":\"gone\"", "\"path\":\"/gone\"");          /* absolute */
  refused("\"path\":\"gone\"", "\"path\":\"a/./b\"");          /* not normalised */
  refused("\"path\":\"gone\"", "\"path\":\"a.txt\"");          /* repeated */
  refused("\"path\":\"tests-run\"", "\"path\":\"tes\"");       /* out of order */
  refused("\"kind\":\"absent\"", "\"kind\":\"missing\"");      /* unknown kind */
  refused("\"mode\":\"0644\"", "\"mode\":\"644\"");            /* mode form */
  refused("\"mode\":\"0644\"", "\"mode\":\"0648\"");
  refused("\"snapshot\":\"b", "\"snapshot\":\"B"); /* not lowercase hex */
  refused("\"type\":\"fifo\"", "\"type\":\"door\"");
  refused("{\"kind\":\"absent\",", "{\"extra\":1,\"kind\":\"absent\","); /* a member too many */
}

static void baseline_location(void **state) {
  (void)state;
  char project[] = "/tmp/cordon-gate-unit.XXXXXX";
  assert_non_null(mkdtemp(project));
  char state_dir[256], sub[300], expect[300];
  snprintf(state_dir, sizeof(state_dir), "%s/.cordon", project);
  snprintf(sub, sizeof(sub), "%s/.cordon/mine", project);
  assert_int_equal(mkdir(state_dir, 0700), 0);
  assert_int_equal(mkdir(sub, 0700), 0);
  char *out = NULL;
  struct cordon_error *err = NULL;
  assert_int_equal(agent_gate_location(project, "before", &out, &err), 0);
  snprintf(expect, sizeof(expect), "%s/.cordon/gates/before", project);
  assert_string_equal(out, expect);
  free(out);
  snprintf(expect, sizeof(expect), "%s/.cordon/mine/b.json", project);
  assert_int_equal(agent_gate_location(project, expect, &out, &err), 0);
  assert_string_equal(out, expect);
  free(out);
  snprintf(expect, sizeof(expect), "%s/b.json", project);
  assert_true(agent_gate_location(project, expect, &out, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_DENIED);
  cordon_error_free(err);
  err = NULL;
  snprintf(expect, sizeof(expect), "%s/.cordon/mine/../../b.json", project);
  assert_true(agent_gate_location(project, expect, &out, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_DENIED);
  cordon_error_free(err);
  err = NULL;
  assert_true(agent_gate_location(project, "..", &out, &err) < 0);
  cordon_error_free(err);
  rmdir(sub);
  rmdir(state_dir);
  rmdir(project);
}

static void build_record_round_trip(void **state) {
  (void)state;
  char *argv[] = {"make", "all", NULL}, *protect[] = {"tests", NULL};
  struct agent_build_output outputs[] = {{"dist/app", 12, HEX_A}};
  struct agent_build_record r = {.id = "0123456789abcdef0123456789abcdef",
                                 .source = AGENT_BUILD_FROM_REV,
                                 .given = "HEAD",
                                 .source_id = "c0ffee",
                                 .argv = argv,
                                 .protect = protect,
                                 .mechanism = "ns",
                                 .outputs = outputs,
                                 .count = 1};
  char *text = NULL;
  size_t length = 0;
  struct cordon_error *err = NULL;
  assert_int_equal(agent_build_record_encode(&r, &text, &length, &err), 0);
  assert_string_equal(
      text, "{\"argv\":[\"make\",\"all\"],\"format\":\"cordon-build/1\",\"id\":"
            "\"0123456789abcdef0123456789abcdef\",\"mechanism\":\"ns\",\"outputs\":[{\"path\":"
            "\"dist/app\",\"sha256\":\"" HEX_A "\",\"size\":12}],\"protected\":[\"tests\"],"
            "\"source\":{\"given\":\"HEAD\",\"id\":\"c0ffee\",\"kind\":\"rev\"}}");
  struct agent_build_record *back = NULL;
  assert_int_equal(agent_build_record_decode(text, length, &back, &err), 0);
  assert_string_equal(back->id, r.id);
  assert_int_equal(back->count, 1);
  assert_int_equal(back->outputs[0].size, 12);
  assert_string_equal(back->outputs[0].sha256, HEX_A);
  assert_string_equal(back->argv[1], "all");
  assert_string_equal(back->protect[0], "tests");
  agent_build_record_free(back);
  text[1] = ' ';
  assert_true(agent_build_record_decode(text, length, &back, &err) < 0);
  assert_int_equal(err->kind, CORDON_ERR_INVALID);
  cordon_error_free(err);
  free(text);
}

static void build_ids(void **state) {
  (void)state;
  struct cordon_error *err = NULL;
  assert_int_equal(agent_build_id_check("0123456789abcdef0123456789abcdef", &err), 0);
  const char *bad[] = {"", "0123", "0123456789ABCDEF0123456789abcdef",
                       "../../../../etc/passwd000000000000", "0123456789abcdef0123456789abcdef0"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_true(agent_build_id_check(bad[i], &err) < 0);
    assert_int_equal(err->kind, CORDON_ERR_USAGE);
    cordon_error_free(err);
    err = NULL;
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(baseline_round_trip), cmocka_unit_test(baseline_refusals),
      cmocka_unit_test(baseline_location),   cmocka_unit_test(build_record_round_trip),
      cmocka_unit_test(build_ids),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
