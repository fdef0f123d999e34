#!/usr/bin/env bats
# docs/race.md's worked harness, run as the page writes it: its ```sh blocks, in order, in one
# shell, on the project the page describes (built here): a bug in a 46 KB file, the evaluator's
# tests/, and three patches (one skips the test under the protected tests/, one is the one-line
# fix, one does not apply). On ns when it declares SNAPSHOT, else on worktree.

bats_require_minimum_version 1.5.0

DOC=${SOURCE_ROOT:-$BATS_TEST_DIRNAME/../..}/docs/race.md

setup() {
  command -v jq >/dev/null || skip "jq is missing (scripts/install-deps installs it)"
  H=$(mktemp -d "${TMPDIR:-/tmp}/cordon-race-harness.XXXXXX")
  KEYS=$(mktemp -d "${TMPDIR:-/tmp}/cordon-race-harness-keys.XXXXXX")
  export CORDON_PROJECT=$H
  export CORDON_KEY_DIR=$KEYS/keys
  # The page calls `cordon`: this build's.
  mkdir "$KEYS/bin"
  ln -s "$CORDON" "$KEYS/bin/cordon"
  export PATH=$KEYS/bin:$PATH
  if declares_snapshot ns; then
    export CORDON_BACKEND=ns
  elif declares_snapshot worktree; then
    export CORDON_BACKEND=worktree
  else
    skip "neither ns nor worktree declares SNAPSHOT here"
  fi
  cd "$H"
  "$CORDON" key init >/dev/null
  KID=$("$CORDON" key show --kid)
  make_harness "$H"
}

declares_snapshot() {
  "$CORDON" backends --json |
    jq -e --arg n "$1" '.[] | select(.name == $n and .available and (.capabilities | index("snapshot")))' \
      >/dev/null
}

teardown() {
  cd /
  rm -rf "$H" "$KEYS"
}

# The page's layout in DIR: project/ (src/calc.sh with add() subtracting, build.sh, tests/)
# and attempts/{0,1,2}.diff.
make_harness() {
  local d=$1
  mkdir -p "$d/project/src" "$d/project/tests" "$d/attempts"
  {
    echo '# calc.sh: arithmetic helpers'
    echo 'add() { echo "$(( $1 - $2 ))"; }'
    echo '# the helpers below are many and long'
    for i in $(seq 1 1000); do
      printf 'helper_%04d() { echo "$(( $1 + %d ))"; }  # one of a thousand\n' "$i" "$i"
    done
  } > "$d/project/src/calc.sh"
  printf '%s\n' '. ./src/calc.sh' \
    '[ "$(add 2 3)" = 5 ] || { echo "add 2 3 gave $(add 2 3), not 5" >&2; exit 1; }' \
    > "$d/project/tests/test_add.sh"
  printf '%s\n' '# Runs every tests/test_*.sh not listed in tests/skip.' 'status=0' \
    'for t in tests/test_*.sh; do' \
    '  if [ -e tests/skip ] && grep -qx "${t#tests/}" tests/skip; then echo "skip $t"; continue; fi' \
    '  if sh "$t"; then echo "pass $t"; else echo "FAIL $t"; status=1; fi' \
    'done' 'exit $status' > "$d/project/tests/judge.sh"
  printf '%s\n' 'sh -n src/calc.sh && echo "built ${ATTEMPT:-nothing}"' > "$d/project/build.sh"
  printf '%s\n' '--- /dev/null' '+++ b/tests/skip' '@@ -0,0 +1 @@' '+test_add.sh' \
    > "$d/attempts/0.diff"
  printf '%s\n' '--- a/src/calc.sh' '+++ b/src/calc.sh' '@@ -1,3 +1,3 @@' \
    ' # calc.sh: arithmetic helpers' '-add() { echo "$(( $1 - $2 ))"; }' \
    '+add() { echo "$(( $1 + $2 ))"; }' ' # the helpers below are many and long' \
    > "$d/attempts/1.diff"
  # Made against a calc.sh whose add() multiplied.
  sed 's/^-add() { echo "$(( $1 - $2 ))"; }$/-add() { echo "$(( $1 * $2 ))"; }/' \
    "$d/attempts/1.diff" > "$d/attempts/2.diff"
}

# The page's ```sh blocks FIRST..LAST (1-based), concatenated.
doc_blocks() {
  awk -v first="$1" -v last="$2" '
    /^```sh$/ { n++; inside = 1; next }
    /^```$/ { inside = 0; next }
    inside && n >= first && n <= last' "$DOC"
}

@test "docs/race.md has its four sh blocks: base, race, logs, verify and restore" {
  [ "$(grep -c '^```sh$' "$DOC")" -eq 4 ]
  doc_blocks 1 1 | grep -q 'cordon snapshot take project'
  doc_blocks 2 2 | grep -q -- '--protect tests'
  doc_blocks 4 4 | grep -q 'cordon snapshot restore'
}

@test "the harness as docs/race.md runs it: the fix wins; the skip and the stale patch fail alone" {
  # The page says 63 KB (the issue's file had 46 KB).
  [ "$(wc -c < project/src/calc.sh)" -eq 62994 ]
  run bash -e -c "$(doc_blocks 1 4)"
  echo "$output"
  [ "$status" -eq 0 ]
  # The winner: the one-line fix, costing 2 in the 63 KB file.
  [ "$(jq -r '.winner.task_id' outcome.json)" = candidate-1 ]
  [ "$(jq -r '.body.winner.task_id' receipt.json)" = candidate-1 ]
  [ "$(jq -r '.body.candidates[0].scores.cost' receipt.json)" -eq 2 ]
  [ "$(jq -r '.body.candidates[0].backend' receipt.json)" = "$CORDON_BACKEND" ]
  # The skip under the protected tests/ fails; the stale patch fails its candidate, not the race.
  [ "$(jq -r '.body.failed[] | "\(.task_id): \(.reason)"' receipt.json)" = \
    "$(printf '%s\n' 'candidate-0: a protected path was changed' \
      "candidate-2: the candidate's patch does not apply")" ]
  [ "$(jq -r '.candidates[0].failure_detail' outcome.json)" = \
    "candidate-0: changed the protected path tests/skip" ]
  [[ "$(jq -r '.candidates[2].failure_detail' outcome.json)" == *"src/calc.sh"* ]]
  [ "$(jq -c '.body.protected_paths.protect' receipt.json)" = '["tests"]' ]
  # Every candidate's and judge's output is in the logs; logs.json's digests are the files'.
  [ "$(cat logs/candidate-0.stdout)" = "built skip-test" ]
  [ "$(cat logs/candidate-1.stdout)" = "built fix-add" ]
  [ "$(cat logs/candidate-1.judge.stdout)" = "pass tests/test_add.sh" ]
  [ ! -e logs/candidate-2.stdout ]
  for f in logs/candidate-*; do
    [ "$(jq -r --arg f "${f#logs/}" '.[].logs[] | select(.file == $f) | .sha256' logs/logs.json)" = \
      "$(sha256sum < "$f" | cut -c1-64)" ]
  done
  # The receipt binds the scored candidate's four logs (the page's sha256sum -c checked them).
  [[ "$output" == *"logs/candidate-1.judge.stdout: OK"* ]]
  [ "$(grep -c ': OK$' <<<"$output")" -eq 4 ]
  # The receipt verifies; the restored winner holds the fix and no tests/skip.
  run -0 "$CORDON" receipt verify receipt.json --expected-keyid "$KID"
  grep -qxF 'add() { echo "$(( $1 + $2 ))"; }' winner/src/calc.sh
  [ ! -e winner/tests/skip ]
  cmp winner/tests/judge.sh project/tests/judge.sh
  # Each candidate's ATTEMPT is in its receipt inputs, by digest only.
  [ "$(jq -r '.body.inputs["candidate-1"].env.ATTEMPT' receipt.json)" = \
    "$(printf fix-add | sha256sum | cut -c1-64)" ]
  ! grep -q fix-add receipt.json
}

@test "the harness: a candidate's environment reaches that candidate only, not its judge" {
  # The judge prints its ATTEMPT; candidate 1's command shows its own value and no other's.
  sed -i 's/^exit \$status$/echo "judge saw ${ATTEMPT:-nothing}"; exit $status/' project/tests/judge.sh
  run bash -e -c "$(doc_blocks 1 2)"
  [ "$status" -eq 0 ]
  [ "$(cat logs/candidate-0.stdout)" = "built skip-test" ]
  [ "$(cat logs/candidate-1.stdout)" = "built fix-add" ]
  [ "$(tail -n 1 logs/candidate-1.judge.stdout)" = "judge saw nothing" ]
  [ "$(jq -r '.candidates[1].logs.stdout.tail' outcome.json)" = "built fix-add" ]
}

@test "the harness twice: byte-identical receipts" {
  run bash -e -c "$(doc_blocks 1 2)"
  [ "$status" -eq 0 ]
  mkdir again
  make_harness again
  cd again
  run bash -e -c "$(doc_blocks 1 2)"
  [ "$status" -eq 0 ]
  cmp ../receipt.json receipt.json
  cmp ../logs/logs.json logs/logs.json
}

@test "the harness with no passing candidate: exit 1, \"winner\": null, the receipt still verifies" {
  # Candidate 1's patch is now as stale as candidate 2's.
  cp attempts/2.diff attempts/1.diff
  run bash -e -c "$(doc_blocks 1 2)"
  [ "$status" -eq 1 ]
  [ "$(jq -c '.body.winner' receipt.json)" = null ]
  [ "$(jq -r '.body.outcome' receipt.json)" = no_pass ]
  [ "$(jq -r '.winner' outcome.json)" = null ]
  [ "$(jq -r '.body.failed | length' receipt.json)" -eq 3 ]
  run -0 "$CORDON" receipt verify receipt.json --expected-keyid "$KID"
  [[ "$output" == *"no_pass"* ]]
}

@test "race --help's example runs as printed on the same project" {
  "$CORDON" race --help | sed -n '/^Example: .*docs\/race\.md/,$p' > example.txt
  [ "$(wc -l < example.txt)" -ge 5 ] && [ "$(wc -l < example.txt)" -le 8 ]
  run bash -e -c "$(tail -n +2 example.txt)"
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(jq -r '.body.winner.task_id' receipt.json)" = candidate-1 ]
  grep -qxF 'add() { echo "$(( $1 + $2 ))"; }' winner/src/calc.sh
}

@test "the harness's backend: a candidate's own file reaches it alone, before its command" {
  printf 'notes of attempt 1\n' > attempts/1.md
  run "$CORDON" race --base "$("$CORDON" snapshot take project)" --k 2 --out r.json --json \
    --candidate 1:NOTES.md=attempts/1.md \
    -- sh -c 'if [ "$CORDON_CANDIDATE_INDEX" = 1 ]; then grep -qx "notes of attempt 1" NOTES.md; else [ ! -e NOTES.md ]; fi'
  [ "$status" -eq 0 ]
  [ "$(jq '[.candidates[] | select(.passed)] | length' <<<"$output")" -eq 2 ]
  [ "$(jq -r '.candidates[0].snapshot' <<<"$output")" != "$(jq -r '.candidates[1].snapshot' <<<"$output")" ]
}

@test "cordon-race(1)'s harness example runs as rendered on the same project" {
  command -v groff >/dev/null || skip "groff is missing (scripts/install-deps installs groff-base)"
  groff -man -Tascii -P-cbu "$(dirname "$DOC")/man/cordon-race.1" 2>/dev/null |
    sed -n '/^ *base=\$(cordon snapshot take project)/,/^ *$/p' | sed 's/^       //' > example.sh
  [ "$(grep -c '^cordon ' example.sh)" -eq 3 ]
  run bash -e example.sh
  echo "$output"
  [ "$status" -eq 0 ]
  [ "$(grep -c ': OK$' <<<"$output")" -eq 4 ]
  [ "$(jq -r '.winner.task_id' outcome.json)" = candidate-1 ]
  grep -qxF 'add() { echo "$(( $1 + $2 ))"; }' winner/src/calc.sh
}
