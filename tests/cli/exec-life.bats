#!/usr/bin/env bats
# The life of an exec's processes: what a session exec starts in the background outlives it
# (until the session ends), a timeout kills the whole tree, an exec returns although a
# background child holds its output, an out-of-memory kill is reported as such, and under
# --json cordon's own failure (an "error" object) is told apart from a command's exit 125.
# $CORDON is the binary under test; every test runs in a fresh project.

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-exec-life.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  cd "$PROJECT"
  mkdir ws
  # A sleep length no other test uses: its processes are found by their command line.
  MARK=$((300000 + RANDOM))
}

teardown() {
  cd /
  if [ -d "$PROJECT/.cordon/sessions" ]; then
    for s in $(ls "$PROJECT/.cordon/sessions"); do $CORDON session destroy "$s" || true; done
  fi
  pkill -KILL -f "sleep $MARK" 2>/dev/null || true
  rm -rf "$PROJECT"
}

ns_or_skip() {
  run $CORDON backends --json
  [[ "$output" == *'"ns"'* ]] || skip "no ns backend"
  if [ "$(id -u)" -ne 0 ] && ! unshare -Ur true 2>/dev/null; then
    skip "the ns backend needs user namespaces here"
  fi
}

running() { pgrep -fx "sleep $1" >/dev/null; }

# Wait up to $2 seconds for no process whose command line is "sleep $1" (exactly: a copy of
# cordon, its remover of a session's files, may carry those words in its own).
gone_within() {
  local i
  for i in $(seq $(($2 * 10))); do
    running "$1" || return 0
    sleep 0.1
  done
  return 1
}

@test "ns: a background process and a setsid daemon survive their exec, and die at destroy" {
  ns_or_skip
  ID=$($CORDON session create --backend ns --workspace ws)
  run $CORDON session exec "$ID" -- sh -c "sleep $MARK >/dev/null 2>&1 & (setsid sleep $((MARK + 1)) >/dev/null 2>&1 &); exit 0"
  [ "$status" -eq 0 ]
  running "$MARK"
  running "$((MARK + 1))"
  # Still there for the next exec, which sees them.
  run $CORDON session exec "$ID" -- sh -c "ps -e -o args 2>/dev/null || cat /proc/[0-9]*/cmdline | tr '\\0' ' '"
  [ "$status" -eq 0 ]
  [[ "$output" == *"sleep $MARK"* ]]
  running "$MARK"
  run $CORDON session destroy "$ID"
  [ "$status" -eq 0 ]
  gone_within "$MARK" 10
  gone_within "$((MARK + 1))" 10
}

@test "ns: session shutdown kills what earlier execs left running" {
  ns_or_skip
  ID=$($CORDON session create --backend ns --workspace ws)
  run $CORDON session exec "$ID" -- sh -c "sleep $MARK >/dev/null 2>&1 &"
  [ "$status" -eq 0 ]
  running "$MARK"
  run $CORDON session shutdown "$ID"
  [ "$status" -eq 0 ]
  gone_within "$MARK" 10
}

@test "ns: a timeout kills the command's daemonised grandchild too" {
  ns_or_skip
  ID=$($CORDON session create --backend ns --workspace ws)
  run $CORDON session exec "$ID" --timeout 1 -- sh -c "(setsid sleep $MARK >/dev/null 2>&1 &); sleep $((MARK + 1))"
  [ "$status" -eq 124 ]
  [[ "$output" == *"timed out"* ]]
  gone_within "$MARK" 10
  gone_within "$((MARK + 1))" 10
}

@test "ns: an exec returns when its command ends, though a background child holds stdout" {
  ns_or_skip
  ID=$($CORDON session create --backend ns --workspace ws)
  # Streamed (cordon's own stdout, here a file): cordon returns though the child keeps the file
  # open. (A reader of a pipe waits for the child, as with `docker exec`: redirect its output.)
  start=$(date +%s)
  $CORDON session exec "$ID" -- sh -c "echo started; sleep $MARK & exit 0" > out 2>&1
  end=$(date +%s)
  grep -q started out
  # Generous under load, far below the sleep.
  [ $((end - start)) -lt 30 ]
  running "$MARK"
  # Captured (--json): the runner takes what is buffered and stops waiting for EOF.
  start=$(date +%s)
  run $CORDON session exec --json "$ID" -- sh -c "echo again; sleep $((MARK + 1)) & exit 0"
  end=$(date +%s)
  [ "$status" -eq 0 ]
  [[ "$output" == *again* ]]
  [ $((end - start)) -lt 30 ]
  running "$((MARK + 1))"
}

@test "ns: a command killed by the memory limit says so; kill -9 does not" {
  ns_or_skip
  run $CORDON run --backend ns --workspace ws --memory 64M -- sh -c 'tail /dev/zero'
  if [[ "$output" == *"memory limit"*"not"* ]] || [[ "$output" == *"cannot"*"cgroup"* ]]; then
    skip "no memory cgroup here: $output"
  fi
  [ "$status" -eq 137 ]
  [[ "$output" == *"cordon: killed by the memory limit (64M)"* ]]
  run --separate-stderr $CORDON run --backend ns --workspace ws --memory 64M --json -- sh -c 'tail /dev/zero'
  [ "$status" -eq 137 ]
  [[ "$output" == *'"oom_killed": true'* ]]
  run $CORDON run --backend ns --workspace ws --memory 64M -- sh -c 'kill -9 $$'
  [ "$status" -eq 137 ]
  [[ "$output" != *"memory limit"* ]]
  run --separate-stderr $CORDON run --backend ns --workspace ws --memory 64M --json -- sh -c 'kill -9 $$'
  [ "$status" -eq 137 ]
  [[ "$output" == *'"oom_killed": false'* ]]
  # The same in a session.
  ID=$($CORDON session create --backend ns --workspace ws --memory 64M)
  run $CORDON session exec "$ID" -- sh -c 'tail /dev/zero'
  [ "$status" -eq 137 ]
  [[ "$output" == *"cordon: killed by the memory limit (64M)"* ]]
  run $CORDON session exec "$ID" -- sh -c 'kill -9 $$'
  [ "$status" -eq 137 ]
  [[ "$output" != *"memory limit"* ]]
}

@test "--json: a command's own exit 125 has no error object; cordon's failure has one" {
  run --separate-stderr $CORDON run --backend worktree --workspace ws --json -- sh -c 'exit 125'
  [ "$status" -eq 125 ]
  [[ "$output" == *'"exit_code": 125'* ]]
  [[ "$output" != *'"error"'* ]]
  run --separate-stderr $CORDON run --backend worktree --workspace no-such-dir --json -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *'"error"'* ]]
  [[ "$output" == *'"message"'* ]]
  [[ "$output" == *'"kind"'* ]]
  [[ "$output" == *'"exit_code": 125'* ]]
  echo "$output" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["exit_code"]==125 and d["error"]["message"]'
}

docker_or_skip() {
  [ -n "${DOCKER_HOST:-}" ] || skip "DOCKER_HOST is not set: no docker engine to test against"
  run $CORDON backends --json
  local why
  why=$(echo "$output" | tr -d '\n' | grep -o '"name": "docker"[^}]*' |
    grep -o '"unavailable_reason": "[^"]*"' || true)
  [ -z "$why" ] || skip "docker backend unavailable: $why"
}

# Whether a process runs in the session's container ("sleep N" in its command line).
in_container() {
  $CORDON session exec "$1" -- sh -c "ps -o args 2>/dev/null || cat /proc/[0-9]*/cmdline | tr '\\0' ' '" |
    grep -q "sleep $2"
}

@test "docker: a background process and a setsid daemon survive their exec, and die at destroy" {
  docker_or_skip
  # The exec agent (the default path) and the Engine API's exec (the wrapper's keeper).
  for mode in agent api; do
    ID=$(CORDON_DOCKER_EXEC=$mode $CORDON session create --backend docker)
    start=$(date +%s)
    run env CORDON_DOCKER_EXEC=$mode $CORDON session exec --json "$ID" -- sh -c "echo started; sleep $MARK >/dev/null 2>&1 & (setsid sleep $((MARK + 1)) >/dev/null 2>&1 &); sleep $((MARK + 2)) & exit 0"
    end=$(date +%s)
    [ "$status" -eq 0 ]
    [[ "$output" == *started* ]]
    # Returns though a background child holds stdout (generous under load, far below the sleep).
    [ $((end - start)) -lt 30 ]
    CORDON_DOCKER_EXEC=$mode in_container "$ID" "$MARK"
    CORDON_DOCKER_EXEC=$mode in_container "$ID" "$((MARK + 1))"
    run $CORDON session destroy "$ID"
    [ "$status" -eq 0 ]
  done
}

@test "docker: a timeout kills the command's daemonised grandchild too" {
  docker_or_skip
  for mode in agent api; do
    ID=$(CORDON_DOCKER_EXEC=$mode $CORDON session create --backend docker)
    # A background sleep from an earlier exec stays: the timeout kills only its own tree.
    run env CORDON_DOCKER_EXEC=$mode $CORDON session exec "$ID" -- sh -c "sleep $((MARK + 2)) >/dev/null 2>&1 &"
    [ "$status" -eq 0 ]
    run env CORDON_DOCKER_EXEC=$mode $CORDON session exec "$ID" --timeout 1 -- sh -c "(setsid sleep $MARK >/dev/null 2>&1 &); sleep $((MARK + 1))"
    [ "$status" -eq 124 ]
    sleep 1
    ! CORDON_DOCKER_EXEC=$mode in_container "$ID" "$MARK"
    ! CORDON_DOCKER_EXEC=$mode in_container "$ID" "$((MARK + 1))"
    CORDON_DOCKER_EXEC=$mode in_container "$ID" "$((MARK + 2))"
    run $CORDON session destroy "$ID"
    [ "$status" -eq 0 ]
  done
}

@test "docker: a command killed by the memory limit says so; kill -9 does not" {
  docker_or_skip
  ID=$($CORDON session create --backend docker --memory 64M)
  run $CORDON session exec "$ID" -- sh -c 'tail /dev/zero'
  [ "$status" -eq 137 ]
  [[ "$output" == *"cordon: killed by the memory limit (64M)"* ]] ||
    skip "the container's oom_kill counter cannot be read from this host: $output"
  run --separate-stderr $CORDON session exec "$ID" --json -- sh -c 'tail /dev/zero'
  [ "$status" -eq 137 ]
  [[ "$output" == *'"oom_killed": true'* ]]
  run $CORDON session exec "$ID" -- sh -c 'kill -9 $$'
  [ "$status" -eq 137 ]
  [[ "$output" != *"memory limit"* ]]
  run --separate-stderr $CORDON session exec "$ID" --json -- sh -c 'kill -9 $$'
  [ "$status" -eq 137 ]
  [[ "$output" == *'"oom_killed": false'* ]]
}

@test "--json: a command the backend could not execute has exec_failure; exit 126/127 of its own has none" {
  ns_or_skip
  run -127 --separate-stderr $CORDON run --json -- nosuchcmd
  [ "$status" -eq 127 ]
  [[ "$output" == *'"exec_failure": "not_found"'* ]]
  run -127 --separate-stderr $CORDON run --json -- sh -c 'exit 127'
  [ "$status" -eq 127 ]
  [[ "$output" != *exec_failure* ]]
  run --separate-stderr $CORDON run --json -- /etc/passwd
  [ "$status" -eq 126 ]
  [[ "$output" == *'"exec_failure": "cannot_execute"'* ]]
  run --separate-stderr $CORDON run --json -- sh -c 'exit 126'
  [ "$status" -eq 126 ]
  [[ "$output" != *exec_failure* ]]
  # A session's exec, and the host runner (worktree), the same.
  ID=$($CORDON session create --backend ns --workspace ws)
  run -127 --separate-stderr $CORDON session exec "$ID" --json -- nosuchcmd
  [ "$status" -eq 127 ]
  [[ "$output" == *'"exec_failure": "not_found"'* ]]
  run -127 --separate-stderr $CORDON session exec "$ID" --json -- sh -c 'exit 127'
  [[ "$output" != *exec_failure* ]]
  run -127 --separate-stderr $CORDON run --backend worktree --workspace ws --json -- nosuchcmd
  [ "$status" -eq 127 ]
  [[ "$output" == *'"exec_failure": "not_found"'* ]]
  run -127 --separate-stderr $CORDON run --backend worktree --workspace ws --json -- sh -c 'exit 127'
  [[ "$output" != *exec_failure* ]]
}

@test "docker: --json exec_failure only when the backend could not execute the command (agent and api)" {
  docker_or_skip
  for mode in agent api; do
    ID=$(CORDON_DOCKER_EXEC=$mode $CORDON session create --backend docker)
    run -127 --separate-stderr env CORDON_DOCKER_EXEC=$mode $CORDON session exec "$ID" --json -- nosuchcmd
    [ "$status" -eq 127 ]
    [[ "$output" == *'"exec_failure": "not_found"'* ]]
    run -127 --separate-stderr env CORDON_DOCKER_EXEC=$mode $CORDON session exec "$ID" --json -- sh -c 'exit 127'
    [ "$status" -eq 127 ]
    [[ "$output" != *exec_failure* ]]
    run -126 --separate-stderr env CORDON_DOCKER_EXEC=$mode $CORDON session exec "$ID" --json -- /etc/passwd
    [ "$status" -eq 126 ]
    [[ "$output" == *'"exec_failure": "cannot_execute"'* ]]
    run -126 --separate-stderr env CORDON_DOCKER_EXEC=$mode $CORDON session exec "$ID" --json -- sh -c 'exit 126'
    [ "$status" -eq 126 ]
    [[ "$output" != *exec_failure* ]]
    run $CORDON session destroy "$ID"
    [ "$status" -eq 0 ]
  done
  # cordon run too, on the api path.
  run -127 --separate-stderr env CORDON_DOCKER_EXEC=api $CORDON run --backend docker --json -- nosuchcmd
  [ "$status" -eq 127 ]
  [[ "$output" == *'"exec_failure": "not_found"'* ]]
  run -127 --separate-stderr env CORDON_DOCKER_EXEC=api $CORDON run --backend docker --json -- sh -c 'exit 127'
  [ "$status" -eq 127 ]
  [[ "$output" != *exec_failure* ]]
}
