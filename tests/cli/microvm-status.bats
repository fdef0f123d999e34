#!/usr/bin/env bats
# The microvm guest agent's status records (issue 19: exit codes from a status record, never
# from the VMM). A host killed in the middle of an exec leaves the agent's exec running until it
# takes the host for gone; the next exec's request must end it and run at once, not wait behind
# it until its own timeout. (A record that never came, or that the agent had to make up, is an
# error: tests/unit/test-microvm-status.c on the host side, the escape suite from guest root.)
# One VM (qemu, TCG unless KVM works); skipped with the reason where the qemu monitor cannot
# run. $CORDON is the binary under test.

bats_require_minimum_version 1.5.0
load common

setup_file() { microvm_session_setup_file microvm-status; }
teardown_file() { microvm_session_teardown_file; }
setup() { microvm_session_setup; }

@test "microvm status: the exec after a host killed mid-exec runs at once and ends the old one" {
  "$CORDON" session exec "$SESSION" -- sh -c 'echo $$ >first.pid; sleep 120' >/dev/null 2>&1 &
  local host=$!
  # Wait until the command runs (its pid file in the session's workspace), then kill its
  # host: a hang-up the agent does not take for good before the next request comes.
  local i pidfile=
  for i in $(seq 300); do
    pidfile=$(find "$PROJECT" -name first.pid -size +0 2>/dev/null | head -1)
    [ -n "$pidfile" ] && break
    sleep 0.2
  done
  [ -n "$pidfile" ]
  kill -KILL "$host"
  wait "$host" 2>/dev/null || true
  local t0=$SECONDS
  run -0 "$CORDON" session exec "$SESSION" --timeout 30 -- sh -c '[ -s first.pid ] || exit 9; kill -0 $(cat first.pid) 2>/dev/null && echo first-alive || echo first-gone'
  [ "$output" = first-gone ]
  # Before, the request waited behind the old exec until the host's own timeout (40 s).
  [ $((SECONDS - t0)) -lt 20 ]
}
