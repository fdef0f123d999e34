#!/usr/bin/env bats
# An idle microvm guest stays idle: between execs no host is connected to the agent's port, and
# virtio-console then reports POLLIN with POLLHUP although nothing can be read. An agent that
# took that for a host polled and read 0 without end, its whole vCPU (a busy host thread per
# idle session). Measured in the guest's own accounting: pid 1's share of the guest's CPU ticks
# across a few idle seconds, a share that does not depend on how loaded the host is. One VM
# (qemu, TCG unless KVM works); skipped with the reason where the qemu monitor cannot run.
# $CORDON is the binary under test.

bats_require_minimum_version 1.5.0
load common

setup_file() { microvm_session_setup_file microvm-idle; }
teardown_file() { microvm_session_teardown_file; }
setup() { microvm_session_setup; }

# pid 1's CPU ticks (user + system) and the guest's total ticks, as "AGENT TOTAL".
ticks() {
  "$CORDON" session exec "$SESSION" -- sh -c \
    'set -- $(cut -d" " -f14,15 /proc/1/stat) && a=$(($1 + $2)) &&
     set -- $(head -n1 /proc/stat) && shift && t=0 && for v; do t=$((t + v)); done &&
     echo "$a $t"'
}

@test "microvm idle: the agent does not spin while no host is connected, and wakes for the next exec" {
  run -0 ticks
  read -r agent0 total0 <<<"$output"
  sleep 4
  run -0 ticks
  read -r agent1 total1 <<<"$output"
  agent=$((agent1 - agent0)) total=$((total1 - total0))
  echo "pid 1: $agent of $total ticks"
  [ "$total" -gt 0 ]
  # The spinning agent took about three quarters of the guest's ticks; an idle one a few.
  [ $((agent * 100)) -lt $((total * 20)) ]
  run -0 "$CORDON" session exec "$SESSION" -- echo awake
  [ "$output" = awake ]
}
