#!/usr/bin/env bats
# bench/agent (issue 18, Measure): `cordon agent --mechanism ns -- true` against bubblewrap run
# directly with the argv `cordon agent --print bwrap` generates for the same policy, and
# `--mechanism bwrap` against that same bwrap. The benchmark must run every contestant
# successfully and report medians and ratios. No bound on the figures here: speed is judged by
# running the benchmark on a quiet machine, not by a timed test. $CORDON is
# the binary under test, $CORDON_SOURCE_ROOT and $CORDON_BUILD_ROOT locate the benchmark.

bats_require_minimum_version 1.5.0

setup() {
  if [ -z "${CORDON_SOURCE_ROOT:-}" ] || [ -z "${CORDON_BUILD_ROOT:-}" ]; then
    skip "CORDON_SOURCE_ROOT and CORDON_BUILD_ROOT are not set (run through meson test)"
  fi
  command -v bwrap >/dev/null || skip "bwrap is not installed (scripts/install-deps)"
  command -v cc >/dev/null || skip "no C compiler to build bench/agent.c"
  bwrap --unshare-all --ro-bind / / -- true 2>/dev/null ||
    skip "bwrap cannot make namespaces here"
  KEYS=$(mktemp -d "${TMPDIR:-/tmp}/cordon-agent-bench-keys.XXXXXX")
  export CORDON_KEY_DIR=$KEYS/keys
  unset CORDON_PROJECT CORDON_SANDBOX CORDON_SANDBOX_ALLOW
  mkdir "$BATS_TEST_TMPDIR/probe"
  "$CORDON" agent --mechanism ns --project "$BATS_TEST_TMPDIR/probe" -- true 2>/dev/null ||
    skip "the ns mechanism cannot run here"
}

teardown() {
  rm -rf "${KEYS:-}"
}

@test "bench/agent runs cordon agent (ns, bwrap) and the same bwrap interleaved, and reports ratios" {
  run "$CORDON_SOURCE_ROOT/bench/agent" "$CORDON_BUILD_ROOT" 9
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" != *FAILED* ]]
  [[ "$output" == *"9 interleaved rounds"* ]]
  for who in "cordon agent --mechanism ns -- true" "bwrap (the printed argv) true" \
    "cordon agent --mechanism bwrap -- true" "cordon run -- true (reference)"; do
    line=$(grep -F "$who" <<<"$output")
    [[ "$line" == *" ms  (quartiles "*", 9 runs)" ]]
  done
  grep -E '^  ratio agent bwrap / bwrap \(wrapper\): +[0-9]+\.[0-9]{2}  \(per round: median' <<<"$output"
  ratio=$(sed -n 's/^  ratio agent ns \/ bwrap: *\([0-9.]*\) .*/\1/p' <<<"$output")
  [ -n "$ratio" ]
  awk -v r="$ratio" 'BEGIN { exit !(r > 0) }'
}

@test "bench/agent's bwrap contestant is the argv cordon prints for the same policy" {
  # The benchmark runs what --print bwrap shows, policy flags included: the masks of the hidden
  # paths and the read-only re-binds are in it.
  mkdir -p "$BATS_TEST_TMPDIR/p/docs" "$BATS_TEST_TMPDIR/p/secrets"
  echo x >"$BATS_TEST_TMPDIR/p/.env"
  run "$CORDON" agent --project "$BATS_TEST_TMPDIR/p" --ro docs --hide secrets --hide .env \
    --print bwrap -- true
  [ "$status" -eq 0 ]
  [[ "$output" == *"--ro-bind $BATS_TEST_TMPDIR/p/docs $BATS_TEST_TMPDIR/p/docs"* ]]
  [[ "$output" == *"--tmpfs $BATS_TEST_TMPDIR/p/secrets"* ]]
  [[ "$output" == *"--ro-bind /dev/null $BATS_TEST_TMPDIR/p/.env"* ]]
  grep -q -- '--ro docs --ro src/main.c --hide secrets --hide .env' "$CORDON_SOURCE_ROOT/bench/agent"
}
