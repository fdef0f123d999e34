#!/usr/bin/env bats
# The microvm guest agent forks the next exec's keeper and command process while the guest is
# idle (guest/exec.c). A process of the sandbox's user that an earlier command left running
# can kill that waiting process: the next exec must still run and report its own status, never
# the dead process's. One VM (qemu, TCG unless KVM works) for the file; skipped with the reason
# where the qemu monitor cannot run. $CORDON is the binary under test.

bats_require_minimum_version 1.5.0
load common

setup_file() { microvm_session_setup_file microvm-keeper; }
teardown_file() { microvm_session_teardown_file; }
setup() { microvm_session_setup; }

@test "microvm keeper: a waiting process killed by a leftover of the sandbox user does not cost the next exec" {
  # Left running: in 2 s it kills every process the sandbox's user may signal (the waiting
  # command process of the next exec among them), itself included.
  run -0 "$CORDON" session exec "$SESSION" -- sh -c '(sleep 2; kill -9 -1) >/dev/null 2>&1 </dev/null & echo started'
  [ "$output" = started ]
  sleep 5
  run -3 "$CORDON" session exec "$SESSION" -- sh -c 'echo ran; exit 3'
  [ "$output" = ran ]
  run -0 "$CORDON" session exec "$SESSION" -- id -u
  [ "$output" = 1000 ]
}

@test "microvm keeper: stdin, a cwd that does not exist, and a timeout still behave after pre-forking" {
  run -0 --separate-stderr "$CORDON" session exec -i "$SESSION" -- cat <<<"through stdin"
  [ "$output" = "through stdin" ]
  run -125 "$CORDON" session exec "$SESSION" --cwd no-such-dir -- true
  run -124 "$CORDON" session exec "$SESSION" --timeout 1 -- sleep 30
  run -127 "$CORDON" session exec "$SESSION" -- no-such-command
  run -0 "$CORDON" session exec "$SESSION" -- true
}
