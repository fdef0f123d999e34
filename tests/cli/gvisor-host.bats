#!/usr/bin/env bats
# The gvisor backend on the host side: runsc runs with --ignore-cgroups, so a sandbox stays in
# its caller's cgroups (runsc's own, at the root of every v1 hierarchy, would move it out of
# them and limit nothing: the spec sets no resources), and the exec wrapper does nothing outside
# a sandbox (its orphan rule, kill every child of pid 1, must never meet the host's init).
# Skipped, with the reason, where runsc or a pid namespace is missing.

bats_require_minimum_version 1.5.0

load common

setup_file() {
  export BATS_NO_PARALLELIZE_WITHIN_FILE=true
  backends_check_once gvisor
}

setup() {
  project_enter gvisor-host
}

teardown() {
  [ -z "${run_pid:-}" ] || kill "$run_pid" 2>/dev/null || true
  project_leave
}

# Every process below pid $1 (children first found through /proc/PID/task/*/children).
descendants() {
  local pid child
  for pid in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    echo "$pid"
    descendants "$pid"
  done
}


@test "gvisor host: a one-shot run's sandbox and gofer stay in the caller's cgroups" {
  need_backend gvisor
  mine=$(v1_cgroups $$)
  [ -n "$mine" ] || skip "no cgroup v1 hierarchy here: nothing runsc would have moved"
  "$CORDON" run --backend gvisor -- sleep 30 >/dev/null 2>&1 &
  run_pid=$!
  sandbox="" gofer=""
  for _ in $(seq 200); do
    for pid in $(descendants "$run_pid"); do
      case "$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline")" in
      runsc-sandbox*) sandbox=$pid ;;
      runsc-gofer*) gofer=$pid ;;
      esac
    done
    [ -n "$sandbox" ] && [ -n "$gofer" ] && break
    sleep 0.1
  done
  [ -n "$sandbox" ] || { echo "no runsc-sandbox below cordon $run_pid"; false; }
  [ -n "$gofer" ] || { echo "no runsc-gofer below cordon $run_pid"; false; }
  in_callers_v1_cgroups "$sandbox" "$gofer"
  kill "$run_pid"
  wait "$run_pid" || true
  run_pid=""
}

@test "gvisor host: the exec wrapper refuses to run outside a sandbox and kills nothing" {
  helper=${CORDON_GVISOR_HELPER:-$(dirname "$CORDON")/../backends/gvisor/cordon-gvisor-exec}
  [ -x "$helper" ] || skip "no cordon-gvisor-exec beside $CORDON"
  flags="-fp --mount-proc"
  unshare $flags true 2>/dev/null || flags="-r -fp --mount-proc"
  unshare $flags true 2>/dev/null || skip "no pid namespace can be made here"
  # In a pid namespace of its own, where pid 1 is a shell with an orphaned sleep as its child:
  # were the wrapper to run its tree kill here, the orphan would die (and only it).
  run unshare $flags sh -c '
    (sleep 30 &)
    sleep 0.2
    "$1" "$2/record" 0 / -- true; echo "exec=$?"
    timeout 10 "$1" pause; echo "pause=$?"
    for p in /proc/[0-9]*; do [ "$(cat "$p/comm" 2>/dev/null)" = sleep ] && echo orphan=alive; done
    exit 0' sh "$helper" "$PROJECT"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"exec=125"* ]]
  [[ "$output" == *"pause=125"* ]]
  [[ "$output" == *"runs only inside a cordon gvisor sandbox"* ]]
  [[ "$output" == *"orphan=alive"* ]]
  [ ! -e "$PROJECT/record" ]
}
