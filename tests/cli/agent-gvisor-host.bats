#!/usr/bin/env bats
# The agent's gvisor mechanism on the host side: runsc gets the gvisor backend's global flags
# (--ignore-cgroups: the agent's spec sets no resources, so runsc's cgroups at the root of every
# v1 hierarchy would limit nothing and only move the sandbox out of the caller's cgroups), and
# `runsc delete` runs only when the state root still holds a container (runsc killed mid-run),
# not after every run, and a runsc killed at any point leaves nothing of its sandbox running. runsc is reached through a logging stand-in first on PATH, which execs the
# real one. The agent's stdio are files of the test's own, never /dev/null (runsc hands its stdio
# to the sandbox's user). Skipped, with the reason, without runsc or root.

bats_require_minimum_version 1.5.0

load common

setup_file() {
  export BATS_NO_PARALLELIZE_WITHIN_FILE=true
}

setup() {
  "$CORDON" agent --help >/dev/null 2>&1 || skip "this build has no 'cordon agent' verb"
  REAL_RUNSC=$(command -v runsc || true)
  [ -n "$REAL_RUNSC" ] || skip "runsc (gVisor) is not installed"
  [ "$(id -u)" -eq 0 ] || skip "gvisor needs root"
  local root=${AGENT_TEST_ROOT:-/var/tmp}
  PROJECT=$(mktemp -d "$root/cordon-agent-gvisor-host.XXXXXX")
  SHIM=$(mktemp -d "$root/cordon-agent-gvisor-shim.XXXXXX")
  export CORDON_PROJECT=$PROJECT CORDON_QUIET=1 CORDON_KEY_DIR=$PROJECT.keys
  # Every runsc call, one line each ("runsc ARGS..."), then the real runsc in its place.
  cat >"$SHIM/runsc" <<EOF
#!/bin/sh
echo "runsc \$*" >>"$SHIM/calls"
exec "$REAL_RUNSC" "\$@"
EOF
  chmod 755 "$SHIM/runsc"
  : >"$SHIM/stdin"
  cd "$PROJECT" || return 1
}

teardown() {
  cd /
  [ -z "${agent_pid:-}" ] || stop_agent "$agent_pid"
  [ -z "${PROJECT:-}" ] || rm -rf "$PROJECT" "$PROJECT.keys"
  [ -z "${SHIM:-}" ] || rm -rf "$SHIM"
}

# The agent under gvisor, through the stand-in, stdio on files of the test's own.
agent() {
  PATH="$SHIM:$PATH" "$CORDON" agent --mechanism gvisor --project "$PROJECT" -- "$@" \
    <"$SHIM/stdin" >"$SHIM/out" 2>&1
}

# Every process below pid $1.
descendants() {
  local pid
  for pid in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    echo "$pid"
    descendants "$pid"
  done
}

# The pid of the first process below $1 whose command line starts with $2, waited for (20 s).
find_below() {
  local pid
  for _ in $(seq 200); do
    for pid in $(descendants "$1"); do
      case "$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" in
      "$2"*)
        echo "$pid"
        return 0
        ;;
      esac
    done
    sleep 0.1
  done
  return 1
}

# The foreground `runsc run` below the agent $1 (the stand-in exec'd it: its command line is
# runsc's), or nothing.
runsc_run_below() {
  local pid
  for pid in $(descendants "$1"); do
    case "$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" in
    *" run --bundle "*) echo "$pid" && return 0 ;;
    esac
  done
}

# End the agent $1 as runsc's death would: its `runsc run` killed, the agent left to delete the
# container and remove its bundle; the agent itself killed should it not end in 20 s.
stop_agent() {
  local runner
  runner=$(runsc_run_below "$1")
  [ -z "$runner" ] || kill -9 "$runner" 2>/dev/null || true
  for _ in $(seq 200); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}


# Kill the agent's `runsc run` ($1) and wait for the agent, which must fail; prints its output
# and the runsc calls. Not `run wait`: bats runs that in a subshell, whose wait returns at once.
kill_runner() {
  kill -9 "$1"
  local status=0
  wait "$agent_pid" || status=$?
  agent_pid=""
  cat "$SHIM/out" "$SHIM/calls"
  [ "$status" -ne 0 ]
}

@test "agent gvisor: runsc runs with --ignore-cgroups, and a run that ended costs no runsc delete" {
  run agent sh -c 'exit 7'
  cat "$SHIM/out" "$SHIM/calls"
  [ "$status" -eq 7 ]
  [ "$(wc -l <"$SHIM/calls")" -eq 1 ]
  grep -q -- '--ignore-cgroups .* run --bundle' "$SHIM/calls"
  ! grep -q ' delete ' "$SHIM/calls"
}

@test "agent gvisor: the sandbox and its gofer stay in the caller's cgroups" {
  mine=$(v1_cgroups $$)
  [ -n "$mine" ] || skip "no cgroup v1 hierarchy here: nothing runsc would have moved"
  agent sleep 30 &
  agent_pid=$!
  sandbox=$(find_below "$agent_pid" runsc-sandbox) || { echo "no runsc-sandbox"; false; }
  gofer=$(find_below "$agent_pid" runsc-gofer) || { echo "no runsc-gofer"; false; }
  in_callers_v1_cgroups "$sandbox" "$gofer"
}

@test "agent gvisor: runsc killed mid-run: its container is deleted, nothing of it is left" {
  agent sleep 30 &
  agent_pid=$!
  sandbox=$(find_below "$agent_pid" runsc-sandbox) || { echo "no runsc-sandbox"; false; }
  runner=$(runsc_run_below "$agent_pid")
  [ -n "$runner" ] || { echo "no runsc run below the agent"; false; }
  # Killed once runsc has recorded the container in its state root (the agent deletes what is
  # recorded there): the sandbox process starts before that record is written.
  state=$(sed -n 's/.*--root=\([^ ]*\) .* run --bundle .*/\1/p' "$SHIM/calls")
  [ -n "$state" ] || { echo "no state root in the runsc call"; false; }
  for _ in $(seq 200); do
    [ -n "$(ls -A "$state" 2>/dev/null)" ] && break
    sleep 0.1
  done
  [ -n "$(ls -A "$state")" ] || { echo "runsc recorded nothing in $state"; false; }
  kill_runner "$runner"
  grep -q -- '--ignore-cgroups delete --force cordon-agent-' "$SHIM/calls"
  for _ in $(seq 50); do
    [ -d "/proc/$sandbox" ] || break
    sleep 0.1
  done
  [ ! -d "/proc/$sandbox" ]
}

@test "agent gvisor: runsc killed as it starts, before or while it records its container: nothing of it is left" {
  agent sleep 30 &
  agent_pid=$!
  runner=""
  for _ in $(seq 2000); do
    runner=$(runsc_run_below "$agent_pid")
    [ -z "$runner" ] || break
    sleep 0.01
  done
  [ -n "$runner" ] || { echo "no runsc run below the agent"; false; }
  kill_runner "$runner"
  bundle=$(sed -n 's/.* run --bundle \([^ ]*\) .*/\1/p' "$SHIM/calls")
  [ -n "$bundle" ] || { echo "no bundle in the runsc call"; false; }
  # runsc's sandbox and gofer name the bundle or its state root on their command lines.
  for _ in $(seq 50); do
    left=$(grep -l -F -- "$bundle" /proc/[0-9]*/cmdline 2>/dev/null || true)
    [ -n "$left" ] || break
    sleep 0.1
  done
  [ -z "$left" ] || { echo "left running: $left"; false; }
  [ ! -e "$bundle" ]
}

@test "agent gvisor: a file as stdin is left where the agent stopped reading" {
  printf 'one\ntwo\nthree\n' >"$SHIM/lines"
  # The agent takes one line; what follows it on the same input finds the rest.
  {
    PATH="$SHIM:$PATH" "$CORDON" agent --mechanism gvisor --project "$PROJECT" -- \
      sh -c 'read l; echo "agent: $l"'
    echo "after: $(cat)"
  } <"$SHIM/lines" >"$SHIM/out" 2>&1
  cat "$SHIM/out"
  grep -qx 'agent: one' "$SHIM/out"
  grep -qx 'after: two' "$SHIM/out"
}
