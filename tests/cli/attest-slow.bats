#!/usr/bin/env bats
# `cordon attest --backend gvisor` (suite slow: runsc takes seconds to start a sandbox). gVisor's
# own kernel (the Sentry) shows from inside, but the measured tier never passes the declared one.

load common

setup_file() {
  backends_check_once gvisor
}

setup() {
  project_enter attest-slow
  export CORDON_KEY_DIR=$PROJECT/keys
  "$CORDON" key init >/dev/null
}

teardown() {
  project_leave
}

@test "attest gvisor: capabilities observed, its own kernel seen, tier container (not above)" {
  need_backend gvisor
  run "$CORDON" attest --backend gvisor --out att.json
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [ "$(jq -r '.body.backends[0].tier' att.json)" = container ]
  [ "$(jq -c '.body.backends[0].observed' att.json)" = "$(jq -c '.body.backends[0].declared' att.json)" ]
  [ "$(jq -r '.body.backends[0].probes[] | select(.name == "own_kernel") | .verdict' att.json)" = observed ]
  [ "$(jq -r '.body.backends[0].probes[] | select(.name == "host_files_invisible") | .verdict' att.json)" = observed ]
}
