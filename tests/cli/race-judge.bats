#!/usr/bin/env bats
# A protected judge (issue 17, item 5): --judge-cmd and `--judge --`, and --ro, --hide and
# --protect on race. The sandbox tests run on ns (it enforces --ro and --hide); --protect alone
# needs no sandbox and also runs on worktree. Every test runs in a fresh project and key dir.

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-race-judge.XXXXXX")
  KEYS=$(mktemp -d "${TMPDIR:-/tmp}/cordon-race-judge-keys.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  export CORDON_KEY_DIR=$KEYS/keys
  cd "$PROJECT"
  "$CORDON" key init >/dev/null
  KID=$("$CORDON" key show | sed -n 's/^kid: //p')
  # The issue's project: a bug in a large file, a test under tests/ that a conftest.py can skip,
  # an evaluator's secret under eval/.
  mkdir -p proj/tests proj/eval
  for i in $(seq 1 1000); do printf 'line %04d of a large source file, unchanged.....\n' "$i"; done > proj/lib.txt
  echo 'VALUE=bug' >> proj/lib.txt
  printf '%s\n' '# the test; a tests/conftest.py that says skip skips it' \
    '[ -e tests/conftest.py ] && grep -q skip tests/conftest.py && exit 0' \
    'grep -q "^VALUE=fixed$" lib.txt' > proj/tests/test.sh
  echo 'the evaluator secret' > proj/eval/secret
  BASE=$("$CORDON" snapshot take proj)
}

teardown() {
  cd /
  rm -rf "$PROJECT" "$KEYS"
}

ns_snapshot_or_skip() {
  if ! "$CORDON" backends --json | tr -d ' \n' | grep -q '"name":"ns"[^}]*"available":true[^}]*"snapshot"' &&
     ! "$CORDON" backends --json | tr -d ' \n' | grep -q '"name":"ns"[^}]*"snapshot"[^}]*"available":true'; then
    skip "the ns backend is unavailable or does not declare SNAPSHOT here"
  fi
}

# Candidate 0 skips the test with a new tests/conftest.py; candidate 1 fixes the one line.
FIXES=(sh -c 'if [ "$CORDON_CANDIDATE_INDEX" -eq 0 ]; then echo "skip = True" > tests/conftest.py;
  else sed -i "s/^VALUE=bug$/VALUE=fixed/" lib.txt; fi')

task_of_failed() { jq -r '.body.failed[]?.task_id' "$1"; }

@test "--protect tests: the conftest.py that skips the test fails and cannot win; the one-line fix wins" {
  [ "$(wc -c < proj/lib.txt)" -gt 46000 ]
  for backend in worktree ns; do
    if [ $backend = ns ] && ! "$CORDON" backends --json | tr -d ' \n' | grep -q '"name":"ns"[^}]*"snapshot"'; then
      continue
    fi
    run "$CORDON" race --backend $backend --base "$BASE" --k 2 --out r.json --json --protect tests \
      --judge-cmd '["sh", "tests/test.sh"]' -- "${FIXES[@]}"
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" > out.json
    [ "$(jq -r '.winner.task_id' out.json)" = candidate-1 ]
    [ "$(jq -r '.candidates[0].failure' out.json)" = "a protected path was changed" ]
    [[ "$(jq -r '.candidates[0].failure_detail' out.json)" == *"tests/conftest.py"* ]]
    [ "$(task_of_failed r.json)" = candidate-0 ]
    [ "$(jq -r '.body.failed[0].reason' r.json)" = "a protected path was changed" ]
    [ "$(jq -c '.body.protected_paths' r.json)" = '{"hidden":[],"protect":["tests"],"read_only":[]}' ]
    [ "$(jq -c '.body.judge' r.json)" = '["sh","tests/test.sh"]' ]
    [ "$(jq '.body.candidates[0].outcome.judge_exit_code' r.json)" -eq 0 ]
    [ "$(jq '.body.candidates[0].scores.cost' r.json)" -eq 2 ]
    run "$CORDON" receipt verify r.json --expected-keyid "$KID"
    [ "$status" -eq 0 ]
  done
  # Without the protection the skip passes the same judge (what the protection prevents).
  run "$CORDON" race --backend worktree --base "$BASE" --k 2 --out r2.json --json \
    --judge-cmd '["sh", "tests/test.sh"]' -- "${FIXES[@]}"
  [ "$status" -eq 0 ]
  [ "$(jq '.body.candidates[0].outcome.judge_exit_code' r2.json)" -eq 0 ]
  [ "$(jq '.body.failed' r2.json)" = null ]
}

@test "--protect: a path given as ./tests/ is recorded normalised; .. and the root are refused" {
  run "$CORDON" race --backend worktree --base "$BASE" --k 1 --out r.json --protect ./tests/ \
    --protect eval -- true
  [ "$status" -eq 0 ]
  [ "$(jq -c '.body.protected_paths.protect' r.json)" = '["eval","tests"]' ]
  run "$CORDON" race --backend worktree --base "$BASE" --k 1 --out r.json --protect ../x -- true
  [ "$status" -ne 0 ]
  [ "${#lines[@]}" -eq 1 ]
  run "$CORDON" race --backend worktree --base "$BASE" --k 1 --out r.json --protect . -- true
  [ "$status" -eq 2 ]
}

@test "--hide: the evaluator file is unreadable from the candidate, present for the judge" {
  ns_snapshot_or_skip
  # Each candidate tries to read the secret and records what it got; the judge passes only
  # when it can read the secret itself.
  run "$CORDON" race --backend ns --base "$BASE" --k 2 --out r.json --json --hide eval \
    -- sh -c 'cat eval/secret > got 2>/dev/null; ls -A eval > listing; true' \
    --judge -- sh -c 'grep -q "evaluator secret" eval/secret && ! grep -q secret got listing'
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" > out.json
  [ "$(jq '[.candidates[].judge_exit_code] | add' out.json)" -eq 0 ]
  [ "$(jq -c '.body.protected_paths.hidden' r.json)" = '["eval"]' ]
  # The winner's own tree: what the candidate read is empty, the secret is the base's.
  mkdir w && "$CORDON" snapshot restore "$(jq -r '.winner.snapshot' out.json)" w
  [ ! -s w/got ]
  [ "$(cat w/eval/secret)" = "the evaluator secret" ]
  run "$CORDON" receipt verify r.json --expected-keyid "$KID"
  [ "$status" -eq 0 ]
}

@test "--ro: the candidate cannot add, change, remove or rename under the path" {
  ns_snapshot_or_skip
  run "$CORDON" race --backend ns --base "$BASE" --k 1 --out r.json --json --ro tests \
    -- sh -c 'echo "skip" > tests/conftest.py && exit 9; echo x >> tests/test.sh && exit 8;
              rm -f tests/test.sh && exit 7; mv tests t2 && exit 6; exit 0'
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" > out.json
  [ "$(jq '.candidates[0].exit_code' out.json)" -eq 0 ]
  [ "$(jq -c '.body.protected_paths.read_only' r.json)" = '["tests"]' ]
}

@test "a new file outside the protected paths stays the candidate's; the judge sees it" {
  run "$CORDON" race --backend worktree --base "$BASE" --k 1 --out r.json --json --protect tests \
    -- sh -c 'echo mine > helper.txt; mkdir -p lib && echo more > lib/extra' \
    --judge -- sh -c 'grep -q mine helper.txt && [ -e lib/extra ]'
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" > out.json
  [ "$(jq '.candidates[0].judge_exit_code' out.json)" -eq 0 ]
  mkdir w && "$CORDON" snapshot restore "$(jq -r '.winner.snapshot' out.json)" w
  [ "$(cat w/helper.txt)" = mine ]
  [ "$(cat w/lib/extra)" = more ]
}

@test "--judge-cmd: malformed is a one-line usage error; two forms at once are refused" {
  for bad in '' 'sh' '[]' '{"a":1}' '["sh", 1]' '[""]' '["sh",' '"sh"' '["a\u0000b"]'; do
    run "$CORDON" race --backend worktree --base "$BASE" --k 1 --out r.json --judge-cmd "$bad" -- true
    [ "$status" -eq 2 ]
    [ "${#lines[@]}" -eq 1 ]
    [[ "$output" == *"--judge-cmd"* ]]
  done
  [ ! -e r.json ]
  run "$CORDON" race --backend worktree --base "$BASE" --k 1 --out r.json --judge-cmd '["true"]' \
    -- true --judge -- true
  [ "$status" -eq 2 ]
  [ "${#lines[@]}" -eq 1 ]
  run "$CORDON" race --backend worktree --base "$BASE" --k 1 --out r.json --judge true \
    --judge-cmd '["true"]' -- true
  [ "$status" -eq 2 ]
  run "$CORDON" race --backend worktree --base "$BASE" --k 1 --out r.json -- true --judge --
  [ "$status" -eq 2 ]
  run "$CORDON" race --backend worktree --base "$BASE" --k 1 --out r.json -- --judge -- true
  [ "$status" -eq 2 ]
  [ ! -e r.json ]
}

@test "'--judge --' after the command, --judge-cmd and --judge WORD give the same receipt" {
  run "$CORDON" race --backend worktree --base "$BASE" --k 2 --out a.json \
    -- sh -c 'echo $CORDON_CANDIDATE_INDEX > n' --judge -- sh -c 'test "$(cat n)" = 1'
  [ "$status" -eq 0 ]
  [ "$(jq -c '.body.judge' a.json)" = '["sh","-c","test \"$(cat n)\" = 1"]' ]
  [ "$(jq -c '.body.command' a.json)" = '["sh","-c","echo $CORDON_CANDIDATE_INDEX > n"]' ]
  [ "$(jq '.body.candidates[1].outcome.judge_exit_code' a.json)" -eq 0 ]
  [ "$(jq '.body.candidates[0].outcome.judge_exit_code' a.json)" -ne 0 ]
  [ "$(jq -r '.body.winner.task_id' a.json)" = candidate-1 ]
  run "$CORDON" race --backend worktree --base "$BASE" --k 2 --out b.json \
    --judge-cmd '["sh", "-c", "test \"$(cat n)\" = 1"]' -- sh -c 'echo $CORDON_CANDIDATE_INDEX > n'
  [ "$status" -eq 0 ]
  run "$CORDON" race --backend worktree --base "$BASE" --k 2 --out c.json --judge sh --judge -c \
    --judge 'test "$(cat n)" = 1' -- sh -c 'echo $CORDON_CANDIDATE_INDEX > n'
  [ "$status" -eq 0 ]
  cmp a.json b.json
  cmp a.json c.json
  run "$CORDON" receipt verify a.json --expected-keyid "$KID"
  [ "$status" -eq 0 ]
}

@test "race --help documents --judge-cmd, '--judge --', --ro, --hide and --protect" {
  run "$CORDON" race --help
  [ "$status" -eq 0 ]
  for w in --judge-cmd "--judge -- JUDGE" "--ro PATH" "--hide PATH" "--protect PATH" "a protected"; do
    [[ "$output" == *"$w"* ]]
  done
}
