#!/usr/bin/env bats
# cordon-gvisor-exec, the exec wrapper of the gvisor backend: tried directly, as pid 1 of a pid
# namespace of the test's own (where it agrees to run, as in a one-shot sandbox), with no runsc. Each test reads the status record it
# writes and the exit code it returns: how the command ended, the sandbox user, the command's
# environment and PATH search, the limits, the set-id refusal, the tree kill. Skipped, with the
# reason, without root or a pid namespace.

bats_require_minimum_version 1.5.0

setup() {
  helper=${CORDON_GVISOR_HELPER:-$(dirname "$CORDON")/../backends/gvisor/cordon-gvisor-exec}
  [ -x "$helper" ] || skip "no cordon-gvisor-exec beside $CORDON"
  [ "$(id -u)" -eq 0 ] || skip "the wrapper becomes uid 1000: root only"
  unshare -fp --mount-proc true 2>/dev/null || skip "no pid namespace can be made here"
  dir=$(mktemp -d "${BATS_TMPDIR:-/tmp}/cordon-gvisor-wrapper.XXXXXX")
  chmod 0755 "$dir"
}

teardown() {
  [ -z "${dir:-}" ] || rm -rf "$dir"
}

# The wrapper as pid 1 of a new pid namespace: record, timeout ms, cwd, then its options.
wrap() {
  run unshare -fp --mount-proc "$helper" "$dir/record" "$@"
}

record() {
  cat "$dir/record"
}

@test "gvisor wrapper: the exit code, the sandbox user, the cwd and the environment given" {
  wrap 0 /tmp --env A=b --env PATH=/usr/bin:/bin -- sh -c 'echo "$(id -u):$(id -g):$(id -G) $PWD $A $PATH"; exit 3'
  echo "$output"
  [ "$status" -eq 3 ]
  [[ "$output" == *"1000:1000:1000 /tmp b /usr/bin:/bin"* ]]
  [ "$(record)" = "exit 3" ]
}

@test "gvisor wrapper: a name is searched in the command's own PATH" {
  mkdir "$dir/bin"
  printf '#!/bin/sh\necho found-it\n' >"$dir/bin/mine"
  chmod 0755 "$dir/bin/mine"
  wrap 0 / --env PATH=/nonexistent:"$dir/bin" -- mine
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *found-it* ]]
  [ "$(record)" = "exit 0" ]
}

@test "gvisor wrapper: not found is 127 and cannot execute 126, each with its message" {
  run -127 unshare -fp --mount-proc "$helper" "$dir/record" 0 / -- no-such-command-here
  echo "$output"
  [[ "$output" == *"cordon: no-such-command-here: No such file or directory"* ]]
  [ "$(record)" = "execfail 127" ]
  rm -f "$dir/record"
  printf 'not a program' >"$dir/data"
  chmod 0644 "$dir/data"
  wrap 0 / -- "$dir/data"
  echo "$output"
  [ "$status" -eq 126 ]
  [[ "$output" == *"cordon: $dir/data: Permission denied"* ]]
  [ "$(record)" = "execfail 126" ]
}

@test "gvisor wrapper: a cwd that cannot be entered, and a kill by signal" {
  wrap 0 "$dir/missing" -- true
  [ "$status" -eq 125 ]
  [ "$(record)" = "chdir 2" ]
  rm -f "$dir/record"
  wrap 0 / -- sh -c 'kill -TERM $$'
  [ "$status" -eq 143 ]
  [ "$(record)" = "signal 15" ]
}

@test "gvisor wrapper: the timeout kills the command's tree, daemonised children too" {
  start=$(date +%s)
  wrap 300 / -- sh -c '(setsid sleep 60 &) ; sleep 60'
  echo "$output"
  [ "$status" -eq 137 ]
  [ "$(record)" = "timeout 0" ]
  [ $(($(date +%s) - start)) -lt 30 ]
}

@test "gvisor wrapper: the limits given are the command's, and it cannot raise them" {
  wrap 0 / --nproc 7 --fsize 4096 -- sh -c 'cat /proc/self/limits; ulimit -f 100000 && echo raised'
  echo "$output"
  [ "$status" -ne 0 ] || [[ "$output" != *raised* ]]
  [[ "$output" =~ "Max processes"[[:space:]]+7[[:space:]]+7 ]]
  [[ "$output" =~ "Max file size"[[:space:]]+4096[[:space:]]+4096 ]]
}

@test "gvisor wrapper: the command cannot set a set-id bit (attack from inside)" {
  mkdir "$dir/w"
  chown 1000:1000 "$dir/w"
  wrap 0 "$dir/w" -- sh -c 'touch f; chmod 4755 f; echo "chmod=$?"; mkdir -m 2755 d; echo "mkdir=$?"'
  echo "$output"
  [[ "$output" == *"chmod=1"* ]]
  [[ "$output" == *"mkdir=1"* ]]
  [ -e "$dir/w/f" ]
  [ -z "$(find "$dir/w" -perm /6000)" ]
}
