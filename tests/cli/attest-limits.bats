#!/usr/bin/env bats
# `cordon attest`'s limits and boundary from one exec (issue 22, Measure): the memory and pids
# limits are still tried inside, where the backend enforces them, and judged by what was seen
# (ns stops both; the fake microvm monitor, which runs commands on the host, stops neither);
# the execs a backend's attestation costs stay few (the probe count a guard against creeping
# cost: each exec costs gvisor or a VM much).

load common

setup_file() {
  backends_check_once ns
}

setup() {
  project_enter attest-limits
  export CORDON_KEY_DIR=$PROJECT/keys
  unset CORDON_PLUGIN_PATH
  "$CORDON" key init >/dev/null
}

teardown() {
  project_leave
}

# verdict and evidence of probe $2 in attestation $1 (its one backend)
probe() {
  jq -r --arg p "$2" '.body.backends[0].probes[] | select(.name == $p) | "\(.verdict): \(.evidence)"' "$1"
}

@test "ns: memory and pids limits stopped inside, the boundary read by the same exec" {
  need_ns
  run "$CORDON" attest --backend ns --out att.json
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [ "$(probe att.json memory_limit_enforced)" = "observed: going past the memory limit was stopped" ]
  [ "$(probe att.json pids_limit_enforced)" = "observed: going past the pids limit was stopped" ]
  [ "$(probe att.json no_route_off)" = "observed: with egress none only lo is up inside" ]
  [ "$(probe att.json host_processes_invisible)" = "observed: a host process is not visible in /proc inside" ]
  # The first session's execs: the volume's write, then one for the exec probe, the file read
  # inside, the boundary and both limits. The resumed session reads the volume: one more.
  run "$CORDON" events --json
  [ "$status" -eq 0 ]
  [ "$(jq -s '[.[] | select(.verb == "exec" and .backend == "ns")] | length' <<<"$output")" -eq 3 ]
  [ "$(probe att.json exec)" = "observed: sh -c printed what it was asked to and exited 3" ]
  [ "$(probe att.json visible_inside)" = "observed: the command inside reads the file as written" ]
}

@test "fake microvm: limits it declares but does not hold are refuted by the same exec" {
  CORDON_MICROVM_MONITOR=fake run "$CORDON" attest --backend microvm --out att.json
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [ "$(probe att.json memory_limit_enforced)" = "refuted: going past the memory limit was not stopped" ]
  [ "$(probe att.json pids_limit_enforced)" = "refuted: going past the pids limit was not stopped" ]
  # The host's interfaces, sorted by name whatever order /proc/net/dev lists them in.
  ifs=$(probe att.json no_route_off | sed -n 's/.*interfaces \([^ ]*\) host.*/\1/p')
  [ -n "$ifs" ]
  [ "$ifs" = "$(tr ',' '\n' <<<"${ifs%,}" | LC_ALL=C sort | tr '\n' ,)" ]
  # One exec in all, the first session's; the resumed session is one-shot and runs none (so on
  # microvm it boots no VM: tests/unit/test-microvm-lazy.c).
  run "$CORDON" events --json
  [ "$status" -eq 0 ]
  [ "$(jq -s '[.[] | select(.verb == "exec" and .backend == "microvm")] | length' <<<"$output")" -eq 1 ]
}

@test "worktree: limits it does not enforce are refuted without being tried" {
  run "$CORDON" attest --backend worktree --out att.json
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [ "$(probe att.json memory_limit_enforced)" = "refuted: the backend does not enforce a memory limit" ]
  [ "$(probe att.json pids_limit_enforced)" = "refuted: the backend does not enforce a pids limit" ]
}
