#!/usr/bin/env bats
# `cordon session create --from SNAPSHOT --count K`: K ns sessions forked at once from one
# snapshot, all or none. $CORDON is the binary under test; every test runs in a fresh project.

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-fork-cli.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  cd "$PROJECT"
  mkdir -p tree/sub
  printf 'base\n' > tree/base.txt
  printf 'deeper\n' > tree/sub/deeper.txt
  if [ "$(id -u)" -ne 0 ]; then
    skip "forks share one base through overlayfs, which needs root"
  fi
  ID=$($CORDON snapshot take tree)
}

teardown() {
  cd /
  if [ -d "$PROJECT/.cordon/sessions" ]; then
    for s in $(ls "$PROJECT/.cordon/sessions"); do $CORDON session destroy "$s" || true; done
  fi
  rm -rf "$PROJECT"
}

no_sessions_left() {
  [ ! -d .cordon/sessions ] || [ -z "$(ls .cordon/sessions)" ]
  run $CORDON session list
  [ "$status" -eq 0 ]
  [ -z "$output" ]
}

@test "session create --help documents --count and its exit codes" {
  run $CORDON session create --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"--count K"* ]]
  [[ "$output" == *"All or"* ]]
  run $CORDON session --help
  [[ "$output" == *"--count K"* ]]
}

@test "--count 3 makes three distinct live sessions, each its own fork" {
  run --separate-stderr $CORDON session create --backend ns --from "$ID" --count 3
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 3 ]
  [ "$(printf '%s\n' "${lines[@]}" | sort -u | wc -l)" -eq 3 ]
  ids=("${lines[@]}")
  # Every one is ready at once: its sandbox serves an exec and sees the snapshot.
  for i in 0 1 2; do
    run $CORDON session exec "${ids[$i]}" -- cat base.txt
    [ "$status" -eq 0 ]
    [ "$output" = "base" ]
    [ -s ".cordon/sessions/${ids[$i]}/state.json" ]
  done
  # A write in one is seen by none of the others (each has its own upper layer).
  run $CORDON session exec "${ids[0]}" -- sh -c 'echo mine > base.txt; echo new > only-0'
  [ "$status" -eq 0 ]
  run $CORDON session exec "${ids[0]}" -- cat base.txt only-0
  [ "$output" = "$(printf 'mine\nnew')" ]
  for i in 1 2; do
    run $CORDON session exec "${ids[$i]}" -- cat base.txt
    [ "$output" = "base" ]
    run $CORDON session exec "${ids[$i]}" -- test -e only-0
    [ "$status" -eq 1 ]
  done
  # The snapshot itself is untouched.
  [ "$(cat tree/base.txt)" = "base" ]
  run $CORDON session destroy "${ids[@]}"
  [ "$status" -eq 0 ]
  no_sessions_left
}

@test "--count with --json prints one array of sessions" {
  run --separate-stderr $CORDON session create --backend ns --from "$ID" --count 2 --json
  [ "$status" -eq 0 ]
  [ "$(printf '%s' "$output" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d), len({s["id"] for s in d}), d[0]["backend"])')" = "2 2 ns" ]
}

@test "bad --count values are usage errors (exit 2, one line) and nothing is created" {
  for v in 0 abc -1 257 1.5 ""; do
    run $CORDON session create --backend ns --from "$ID" --count "$v"
    [ "$status" -eq 2 ]
    [ "${#lines[@]}" -eq 1 ]
    [[ "$output" == *"--count needs a number from 1 to 256"* ]]
  done
  run $CORDON session create --backend ns --count 2
  [ "$status" -eq 2 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"--count needs --from"* ]]
  no_sessions_left
}

@test "an unknown snapshot fails before any session exists (exit 3, one line)" {
  run $CORDON session create --backend ns --count 3 \
    --from 0000000000000000000000000000000000000000000000000000000000000000
  [ "$status" -eq 3 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"no snapshot"* ]]
  no_sessions_left
}

@test "a failure midway destroys the sessions already made (exit 1, one line)" {
  # Each open session handle keeps a descriptor and each fork needs a few more while it is
  # made: with 64 descriptors some forks succeed, then one runs out (EMFILE).
  run bash -c "ulimit -n 64; exec $CORDON session create --backend ns --from $ID --count 64"
  [ "$status" -eq 1 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"of 64 (none was kept)"* ]]
  [[ "$output" == *"Too many open files"* ]]
  # Midway: sessions before the failing one had been made (and were destroyed).
  n=$(printf '%s' "$output" | sed -n 's/.*session \([0-9]*\) of 64.*/\1/p')
  [ "$n" -gt 1 ]
  no_sessions_left
  # ... and their sandboxes: no process anywhere still has an overlay of this project mounted.
  run grep -ls "upperdir=$PROJECT" /proc/[0-9]*/mountinfo
  [ -z "$output" ]
}
