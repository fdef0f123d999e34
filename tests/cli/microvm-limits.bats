#!/usr/bin/env bats
# The microvm backend's --pids (issue 19): accepted for the sandbox user, refused by name with
# --user root (the kernel exempts root from the guest agent's RLIMIT_NPROC). Above the monitor
# shim, with the fake monitor (no VM; tests/escape/escape-microvm.sh shows the limit stop a fork
# bomb in a qemu guest). $CORDON is the binary under test.

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-microvm-limits.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  export CORDON_MICROVM_MONITOR=fake
  cd "$PROJECT"
}

teardown() {
  cd /
  for s in "$PROJECT"/.cordon/sessions/*; do
    [ -d "$s" ] && "$CORDON" session destroy "$(basename "$s")" >/dev/null 2>&1
  done
  rm -rf "$PROJECT"
}

@test "microvm declares pids among what it enforces" {
  run "$CORDON" backends --json
  [ "$status" -eq 0 ]
  enforces=$(jq -r '.[] | select(.name == "microvm") | .enforces | join(",")' <<<"$output")
  echo "$enforces"
  [[ ",$enforces," == *",pids,"* ]]
}

@test "microvm --pids for the sandbox user: accepted" {
  run "$CORDON" session create --backend microvm --monitor fake --pids 16
  echo "$output"
  [ "$status" -eq 0 ]
  "$CORDON" session destroy "$output"
}

@test "microvm --pids with --user root: refused by name, nothing left" {
  run "$CORDON" session create --backend microvm --monitor fake --pids 16 --user root
  echo "$output"
  [ "$status" -eq 4 ]
  [[ "$output" == *"pids"* && "$output" == *"root"* ]]
  [ -z "$(ls -A "$PROJECT/.cordon/sessions" 2>/dev/null)" ]
  # Each alone is fine.
  run "$CORDON" session create --backend microvm --monitor fake --user root
  [ "$status" -eq 0 ]
  "$CORDON" session destroy "$output"
}
