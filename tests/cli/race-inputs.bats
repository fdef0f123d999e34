#!/usr/bin/env bats
# `cordon race` inputs: run's manifest options for every candidate, and each candidate's own
# files (--candidate), environment (--candidate-env) and patch (--patch), bound in the receipt
# by digest. Per-candidate inputs run on the worktree backend (fast); the manifest's limits and
# network need ns.

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-race-inputs.XXXXXX")
  KEYS=$(mktemp -d "${TMPDIR:-/tmp}/cordon-race-inputs-keys.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  export CORDON_KEY_DIR=$KEYS/keys
  cd "$PROJECT"
  mkdir -p tree
  printf 'one\ntwo\nalpha\nthree\n' > tree/a
  "$CORDON" key init >/dev/null
  KID=$("$CORDON" key show | sed -n 's/^kid: //p')
  BASE=$("$CORDON" snapshot take tree)
  printf 'the secret of candidate 0\n' > secret0
  cat > good.patch <<'PATCH'
--- a/a
+++ b/a
@@ -2,3 +2,3 @@
 two
-alpha
+ALPHA
 three
PATCH
  cat > bad.patch <<'PATCH'
--- a/a
+++ b/a
@@ -2,3 +2,3 @@
 two
-zulu
+ZULU
 three
PATCH
}

teardown() {
  cd /
  rm -rf "$PROJECT" "$KEYS"
}

race() { "$CORDON" race --backend worktree --base "$BASE" "$@"; }

passed_of() { # FILE TASK: true/false
  tr -d ' \n' < "$1" | grep -o "\"passed\":[a-z]*,\"reversibility\":[0-9.e+-]*,\"snapshot\":\"[0-9a-f]*\",\"task_id\":\"$2\"" |
    sed 's/"passed":\([a-z]*\),.*/\1/'
}

ns_or_skip() {
  $CORDON backends --json | tr -d ' \n' | grep -q '"name":"ns"[^}]*"snapshot"' ||
    skip "the ns backend does not declare SNAPSHOT"
  [ "$(id -u)" -eq 0 ] || skip "ns candidates are overlay forks only as root"
}

# Candidate 0 must see its file and its variable; candidate 1 must see neither.
SEE=(sh -c 'if [ "$CORDON_CANDIDATE_INDEX" = 0 ]; then grep -q "secret of candidate 0" mine && [ "$SECRET" = zero ]; else [ ! -e mine ] && [ -z "${SECRET+x}" ]; fi')

@test "race inputs: a candidate's file and env reach only that candidate" {
  run -0 race --k 2 --out r.json --json --candidate 0:mine=secret0 --candidate-env 0:SECRET=zero \
    -- "${SEE[@]}"
  [ "$(passed_of <(echo "$output") candidate-0)" = true ]
  [ "$(passed_of <(echo "$output") candidate-1)" = true ]
  # Swapped: candidate 1 is given them and fails its own check (it must not see any).
  run -1 race --k 2 --out r2.json --json --candidate 1:mine=secret0 \
    --candidate-env 1:SECRET=zero -- "${SEE[@]}"
  [ "$(passed_of <(echo "$output") candidate-1)" = false ]
  [ "$(passed_of <(echo "$output") candidate-0)" = false ]
  # The receipt binds them by digest: no value, no host path.
  run -0 "$CORDON" receipt verify --expected-keyid "$KID" r.json
  ! grep -q zero r.json
  ! grep -q "$PROJECT" r.json
  ! grep -q secret0 r.json
  tr -d ' \n' < r.json | grep -q "\"inputs\":{\"candidate-0\":{\"env\":{\"SECRET\":\"$(printf zero | sha256sum | cut -c1-64)\"},\"files\":{\"mine\":\"$(sha256sum < secret0 | cut -c1-64)\"}}}"
}

@test "race inputs: a patch applies to its candidate only; one that does not apply fails only it" {
  # Candidate 0 (good patch) must see ALPHA; 1 (bad patch) fails; 2 (none) must see alpha.
  chmod 0755 tree/a
  BASE=$("$CORDON" snapshot take tree)
  # A patched file keeps its mode (a script stays executable).
  cmd=(sh -c 'case $CORDON_CANDIDATE_INDEX in 0) grep -qx ALPHA a && [ -x a ];; *) grep -qx alpha a;; esac')
  run -0 race --k 3 --out r.json --json --patch 0:good.patch --patch 1:bad.patch -- "${cmd[@]}"
  [ "$(passed_of <(echo "$output") candidate-0)" = true ]
  [ "$(passed_of <(echo "$output") candidate-2)" = true ]
  [[ "$output" == *'"failure": "the candidate'"'"'s patch does not apply"'* ]]
  tr -d ' \n' < r.json | grep -q "\"failed\":\[{\"reason\":\"thecandidate'spatchdoesnotapply\",\"task_id\":\"candidate-1\"}\]"
  tr -d ' \n' < r.json | grep -q "\"candidate-0\":{\"patch\":\"$(sha256sum < good.patch | cut -c1-64)\"}"
  run -0 "$CORDON" receipt verify --expected-keyid "$KID" r.json
  # The text output names the failing candidate with its one-line reason.
  run race --k 2 --out r2.json --patch 1:bad.patch -- true
  [ "$status" -eq 0 ]
  [[ "$output" == *"candidate-1"*"failed: the candidate's patch does not apply"* ]]
  [[ "$output" == *"a: the patch does not apply"* ]]
}

@test "race inputs: identical races give identical receipts; a different input, different bytes" {
  args=(--k 2 --candidate 0:mine=secret0 --candidate-env 1:X=1 --patch 0:good.patch --env Y=2)
  run -0 race "${args[@]}" --out r1.json -- true
  run -0 race "${args[@]}" --out r2.json -- true
  cmp r1.json r2.json
  run -0 race "${args[@]/X=1/X=2}" --out r3.json -- true
  ! cmp -s r1.json r3.json
  run -0 race --k 2 --candidate 0:mine=secret0 --candidate-env 1:X=1 --patch 0:good.patch \
    --env Y=3 --out r4.json -- true
  ! cmp -s r1.json r4.json
  tr -d ' \n' < r4.json | grep -q "\"manifest\":{\"env\":{\"Y\":\"$(printf 3 | sha256sum | cut -c1-64)\"}"
  run -0 "$CORDON" receipt verify --expected-keyid "$KID" r4.json
}

@test "race inputs: bad syntax, bad index and a missing source are usage errors, one line" {
  for bad in "--candidate 2:x=secret0" "--candidate 0:x" "--candidate x=secret0" \
    "--candidate 0:x=missing-file" "--candidate-env 0:NOEQ" "--candidate-env -1:A=b" \
    "--patch 0:missing.patch" "--patch 9:good.patch" "--env NOEQ" "--net nowhere" \
    "--memory lots"; do
    # shellcheck disable=SC2086
    run race --k 2 --out r.json $bad -- true
    echo "$bad: $status $output"
    [ "$status" -eq 2 ]
    [ "${#lines[@]}" -eq 1 ]
  done
  [ ! -e r.json ]
  [ ! -d "$PROJECT/.cordon/sessions" ] || [ -z "$(ls "$PROJECT/.cordon/sessions")" ]
}

@test "race inputs: run's --env, --memory and --net none apply to every candidate (ns)" {
  ns_or_skip
  # --memory 64M: a 200M buffer is killed; --net none: lo is down (no ",UP" flag).
  cmd=(sh -c '[ "$SHARED" = yes ] && ! (dd if=/dev/zero of=/dev/null bs=200M count=1) 2>/dev/null && ip -o link show >links && ! grep -q ",UP" links')
  run -0 "$CORDON" race --backend ns --base "$BASE" --k 2 --out r.json --json --env SHARED=yes \
    --memory 64M --net none -- "${cmd[@]}"
  [ "$(passed_of <(echo "$output") candidate-0)" = true ]
  [ "$(passed_of <(echo "$output") candidate-1)" = true ]
  tr -d ' \n' < r.json | grep -q '"memory_bytes":67108864'
  tr -d ' \n' < r.json | grep -q '"net":"none"'
  run -0 "$CORDON" receipt verify --expected-keyid "$KID" r.json
  # Without --env, the same command fails in every candidate: the variable came from --env.
  run -1 "$CORDON" race --backend ns --base "$BASE" --k 1 --out r2.json --memory 64M \
    --net none -- "${cmd[@]}"
  tr -d ' \n' < r2.json | grep -q '"net":"none"'
}
