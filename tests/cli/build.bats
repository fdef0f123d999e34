#!/usr/bin/env bats
# `cordon build`: the candidate build (issue 18, item 9). A revision or snapshot is checked out
# fresh, the command runs under agent confinement (never unconfined), and every declared
# output is verified (no symlink or .. on the way, a regular file) and recorded with its size
# and SHA-256. The tests that run a build need an agent mechanism (`cordon agent`); without
# one they skip, saying so. $CORDON is the binary under test.

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-build.XXXXXX")
  export CORDON_PROJECT=$PROJECT CORDON_KEY_DIR=$PROJECT-keys
  unset CORDON_SANDBOX
  cd "$PROJECT"
  git init -q .
  mkdir -p src tests
  printf 'int main(void) { return 0; }\n' > src/main.c
  printf 'def test_a(): pass\n' > tests/test_a.py
  git add src tests
  git -c user.name=t -c user.email=t@example.invalid commit -qm initial
}

teardown() {
  cd /
  rm -rf "$PROJECT" "$PROJECT-keys"
}

# The builds that run need a mechanism that confines them; this branch's may be placeholders.
need_mechanism() {
  "$CORDON" agent --help >/dev/null 2>&1 || skip "cordon agent is not built here (no agent mechanism)"
  "$CORDON" build --rev HEAD --output src/main.c -- true >/dev/null 2>&1 ||
    skip "no agent mechanism can run on this host: $("$CORDON" build --rev HEAD --output src/main.c -- true 2>&1)"
}

@test "build --help names every option and build show" {
  run "$CORDON" build --help
  [ "$status" -eq 0 ]
  for opt in --rev --from --output --protect --mechanism --json; do
    [[ "$output" == *"$opt"* ]]
  done
  [[ "$output" == *"build show ID"* ]]
}

@test "usage errors: no source, two sources, no output, no command, a bogus mechanism" {
  run "$CORDON" build --output a -- true
  [ "$status" -eq 2 ]
  run "$CORDON" build --rev HEAD --from 0123456789abcdef --output a -- true
  [ "$status" -eq 2 ]
  run "$CORDON" build --rev HEAD -- true
  [ "$status" -eq 2 ]
  [[ "$output" == *"--output"* ]]
  run "$CORDON" build --rev HEAD --output a
  [ "$status" -eq 2 ]
  run "$CORDON" build --rev HEAD --output a --mechanism bogus -- true
  [ "$status" -eq 2 ]
  [[ "$output" == *"bogus"* && "$output" == *"bwrap"* ]]
  run env CORDON_SANDBOX=bogus "$CORDON" build --rev HEAD --output a -- true
  [ "$status" -eq 2 ]
}

@test "a build never runs unconfined: off exits 4 naming it, and nothing runs" {
  run env CORDON_SANDBOX=off "$CORDON" build --rev HEAD --output ran -- touch "$PROJECT/ran"
  [ "$status" -eq 4 ]
  [[ "$output" == *"unconfined"* && "$output" == *"off"* ]]
  [ ! -e "$PROJECT/ran" ]
  run "$CORDON" build --mechanism no --rev HEAD --output ran -- touch "$PROJECT/ran"
  [ "$status" -eq 4 ]
  [ ! -e "$PROJECT/ran" ]
  [ ! -d .cordon/builds ] || [ -z "$(ls .cordon/builds)" ]
}

@test "without a working mechanism the build exits 4 naming what is missing" {
  if "$CORDON" build --rev HEAD --output src/main.c -- true >/dev/null 2>&1; then
    skip "a mechanism works here (the refusal is covered by the off test)"
  fi
  before=$(ls -d /var/tmp/cordon-build-* 2>/dev/null | wc -l)
  run "$CORDON" build --rev HEAD --output ran -- touch "$PROJECT/ran"
  [ "$status" -eq 4 ]
  [[ "$output" == *"ns"* && "$output" == *"bwrap"* ]]
  [ ! -e "$PROJECT/ran" ]
  # The checkout was removed again (other builds may run at the same time: not more than before).
  [ "$(ls -d /var/tmp/cordon-build-* 2>/dev/null | wc -l)" -le "$before" ]
}

@test "build show: a malformed id is a usage error, an unknown one not found" {
  run "$CORDON" build show ../../etc/passwd
  [ "$status" -eq 2 ]
  run "$CORDON" build show 0123456789abcdef0123456789abcdef
  [ "$status" -eq 3 ]
}

@test "an unknown revision is not found" {
  run env CORDON_SANDBOX=auto "$CORDON" build --rev no-such-rev --output a -- true
  [[ "$status" -eq 3 || "$status" -eq 4 ]]
}

@test "a good build records sizes and digests that match sha256sum; build show reads it" {
  need_mechanism
  run "$CORDON" build --rev HEAD --output out/app --output src/main.c -- \
    sh -c 'mkdir -p out && printf "built\n" > out/app'
  [ "$status" -eq 0 ]
  id=$output
  [[ "$id" =~ ^[0-9a-f]{32}$ ]]
  [ -f ".cordon/builds/$id.json" ]
  kept=.cordon/builds/$id/outputs/out/app
  [ "$(cat "$kept")" = built ]
  digest=$(printf 'built\n' | sha256sum | cut -d' ' -f1)
  main_digest=$(sha256sum src/main.c | cut -d' ' -f1)
  run cat ".cordon/builds/$id.json"
  [[ "$output" == '{"argv":['* ]]
  [[ "$output" == *"{\"path\":\"out/app\",\"sha256\":\"$digest\",\"size\":6}"* ]]
  [[ "$output" == *"\"sha256\":\"$main_digest\""* ]]
  run "$CORDON" build show "$id"
  [ "$status" -eq 0 ]
  [[ "$output" == *"output: out/app 6 $digest"* ]]
  run "$CORDON" build show --json "$id"
  [ "$status" -eq 0 ]
  [[ "$output" == *"\"sha256\": \"$digest\""* ]]
  run "$CORDON" audit show
  [[ "$output" == *"build.recorded"*"$id"* ]]
}

@test "the build runs on the committed revision, not the working tree" {
  need_mechanism
  printf 'uncommitted\n' > src/main.c
  run "$CORDON" build --rev HEAD --output src/main.c -- true
  [ "$status" -eq 0 ]
  [ "$(cat ".cordon/builds/$output/outputs/src/main.c")" = 'int main(void) { return 0; }' ]
}

@test "a build from a snapshot" {
  need_mechanism
  snap=$("$CORDON" snapshot take src)
  run "$CORDON" build --from "${snap:0:12}" --output main.c -- true
  [ "$status" -eq 0 ]
  run cat ".cordon/builds/$output.json"
  [[ "$output" == *"\"kind\":\"snapshot\""* && "$output" == *"$snap"* ]]
}

@test "a symlinked output fails, naming it" {
  need_mechanism
  run "$CORDON" build --rev HEAD --output out/app -- sh -c 'mkdir out && ln -s /etc/passwd out/app'
  [ "$status" -eq 1 ]
  [[ "$output" == *"out/app"*"symlink"* ]]
  run "$CORDON" build --rev HEAD --output out/app -- sh -c 'ln -s /etc out'
  [ "$status" -eq 1 ]
  [[ "$output" == *"out/app"*"symlink"* ]]
  run "$CORDON" build --rev HEAD --output out/app -- sh -c 'mkdir real && echo x > real/app && ln -s real out'
  echo "$output" # shown if an assertion below fails
  [ "$status" -eq 1 ]
  [[ "$output" == *"symlink"* ]]
}

@test "a missing output fails, naming it" {
  need_mechanism
  run "$CORDON" build --rev HEAD --output out/app -- true
  [ "$status" -eq 1 ]
  [[ "$output" == *"out/app is missing"* ]]
}

@test "a non-regular output fails, naming it" {
  need_mechanism
  run "$CORDON" build --rev HEAD --output out -- mkdir out
  [ "$status" -eq 1 ]
  [[ "$output" == *"out is not a regular file"* ]]
  run "$CORDON" build --rev HEAD --output pipe -- mkfifo pipe
  [ "$status" -eq 1 ]
  [[ "$output" == *"pipe is not a regular file"* ]]
}

@test "an escaping output fails, naming it" {
  need_mechanism
  run "$CORDON" build --rev HEAD --output ../escape -- true
  [ "$status" -eq 1 ]
  [[ "$output" == *"../escape"*"escapes"* ]]
  run "$CORDON" build --rev HEAD --output /etc/passwd -- true
  [ "$status" -eq 1 ]
}

@test "a failing build command fails the build and records nothing" {
  need_mechanism
  before=$(ls .cordon/builds 2>/dev/null | grep -c json || true)
  run "$CORDON" build --rev HEAD --output src/main.c -- false
  [ "$status" -eq 1 ]
  [[ "$output" == *"exited 1"* ]]
  [ "$(ls .cordon/builds 2>/dev/null | grep -c json || true)" -eq "$before" ]
}

@test "a build that changes a protected path fails, naming it" {
  need_mechanism
  run "$CORDON" build --rev HEAD --output src/main.c --protect tests -- \
    sh -c 'echo "def test_a(): assert True" > tests/test_a.py'
  [ "$status" -eq 1 ]
  [[ "$output" == *"changed: tests/test_a.py"* ]]
  run "$CORDON" build --rev HEAD --output src/main.c --protect tests -- true
  [ "$status" -eq 0 ]
}

@test "the build cannot reach the invoking project's .cordon/" {
  need_mechanism
  mkdir -p .cordon && printf 'secret\n' > .cordon/secret
  run "$CORDON" build --rev HEAD --output leak -- sh -c "cat '$PROJECT/.cordon/secret' > leak"
  [ "$status" -eq 1 ]
  run "$CORDON" build --rev HEAD --output ok -- sh -c 'ls .cordon; [ -z "$(ls -A .cordon)" ] && touch ok'
  [ "$status" -eq 0 ]
}

@test "the man page names every option build --help prints" {
  [ -n "${SOURCE_ROOT-}" ] || skip "SOURCE_ROOT not set (run through meson test)"
  page=$(sed 's/\\-/-/g' "$SOURCE_ROOT/docs/man/cordon-build.1")
  for opt in $("$CORDON" build --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
    grep -qE -- "$opt([^a-z0-9-]|\$)" <<<"$page" || { echo "cordon-build.1 lacks $opt"; false; }
  done
}
