#!/usr/bin/env bats
# Every backend enforces what it is asked or refuses (issue 14, findings 7 and 8): a plugin or
# worktree asked for --ro, --hide, --memory, --pids or a network class it does not enforce is
# refused naming it (exit 4; `run`: 125, its exit code for every cordon failure), unless
# --no-require-enforcement, which says so loudly per feature and records the waiver in the
# project's audit chain. worktree says once that it isolates nothing, unless --quiet.
# $CORDON is the binary under test; CORDON_PLUGIN_PATH holds the example and the old-ABI plugin.

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-enforce.XXXXXX")
  KEYS=$(mktemp -d "${TMPDIR:-/tmp}/cordon-enforce-keys.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  export CORDON_KEY_DIR=$KEYS/keys
  unset CORDON_QUIET CORDON_SANDBOX CORDON_BACKEND CORDON_SANDBOX_ALLOW
  cd "$PROJECT"
  mkdir -p src secrets
}

teardown() {
  cd /
  rm -rf "$PROJECT" "$KEYS"
}

sessions_left() { ls "$PROJECT/.cordon/sessions" 2>/dev/null | wc -l; }

@test "a plugin asked for --ro, --hide, --memory or --pids is refused naming the feature" {
  for ask in "--ro src:read_only_paths (--ro)" "--hide secrets:hidden_paths (--hide)" \
             "--memory 64M:memory (--memory)" "--pids 16:pids (--pids)" \
             "--cpus 0.5:cpu (--cpus)" "--nofile 64:nofile (--nofile)" \
             "--fsize 1M:fsize (--fsize)" "--allow-ro /usr:host_grants" \
             "--net none:net_none (--net none)" "--net loopback:net_loopback"; do
    opt=${ask%%:*}
    want=${ask#*:}
    run $CORDON session create --backend example $opt
    [ "$status" -eq 4 ] || { echo "$opt: exit $status: $output"; false; }
    [ "${#lines[@]}" -eq 1 ]
    [[ "$output" == *"backend example does not enforce $want"*"--no-require-enforcement"* ]]
    run $CORDON run --backend example $opt -- touch ran
    [ "$status" -eq 125 ]
    [[ "$output" == *"does not enforce $want"* ]]
  done
  # Several at once: all named in one line.
  run $CORDON session create --backend example --ro src --memory 64M --pids 16
  [ "$status" -eq 4 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"read_only_paths (--ro), memory (--memory), pids (--pids): refusing to run without them"* ]]
  # Nothing ran, nothing was made, nothing was audited.
  [ ! -e ran ] && [ ! -e "$PROJECT/.cordon/example-workspace/ran" ]
  [ "$(sessions_left)" -eq 0 ]
  [ ! -e "$PROJECT/.cordon/audit" ]
  # What it does not restrict it runs: the example's default egress is open.
  run $CORDON run --backend example --quiet -- sh -c 'echo ran'
  [ "$status" -eq 0 ]
  [ "$output" = "ran" ]
  run $CORDON run --backend example --quiet --net open -- true
  [ "$status" -eq 0 ]
}

@test "--no-require-enforcement runs it, one WARNING per feature, and audits the waiver" {
  run --separate-stderr $CORDON run --backend example --ro src --memory 64M --pids 16 \
    --no-require-enforcement --quiet -- sh -c 'echo ran'
  [ "$status" -eq 0 ]
  [ "$output" = "ran" ]
  [ "${#stderr_lines[@]}" -eq 3 ]
  [[ "${stderr_lines[0]}" == *"WARNING: backend example does NOT enforce read_only_paths (--ro)"* ]]
  [[ "${stderr_lines[1]}" == *"WARNING"*"memory (--memory)"* ]]
  [[ "${stderr_lines[2]}" == *"WARNING"*"pids (--pids)"*"recorded in the audit log"* ]]
  run $CORDON audit show --json
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 1 ]
  [ "$(echo "$output" | jq -r '.event, .resource_type, .details.backend')" = "enforcement.waived
session
example" ]
  [ "$(echo "$output" | jq -c .details.features)" = '["read_only_paths","memory","pids"]' ]
  [[ "$(echo "$output" | jq -r .resource_id)" =~ ^[0-9a-f]{16}$ ]]
  # A session too; each waiver is its own entry, and the chain verifies.
  id=$($CORDON session create --backend example --hide secrets --no-require-enforcement 2>/dev/null)
  [ "$(($CORDON audit show --json) | tail -n1 | jq -r .resource_id)" = "$id" ]
  $CORDON session destroy "$id"
  run $CORDON audit verify
  [ "$status" -eq 0 ]
  [[ "$output" == *"intact: 2 entries"*"project $(cat .cordon/project-id)"* ]]
  # A waiver that cannot be recorded is no waiver: nothing runs.
  CORDON_KEY_DIR=relative/keys run $CORDON run --backend example --ro src \
    --no-require-enforcement --quiet -- touch not-run
  [ "$status" -eq 125 ]
  [[ "$output" == *"cannot be recorded in the audit log"* ]]
  [ "$(sessions_left)" -eq 0 ]
}

@test "worktree refuses network classes it cannot enforce; its default egress is open" {
  for net in none loopback restricted; do
    run $CORDON session create --backend worktree --net "$net"
    [ "$status" -eq 4 ] || { echo "--net $net: exit $status: $output"; false; }
    [ "${#lines[@]}" -eq 1 ]
    [[ "$output" == *"backend worktree does not enforce net_$net (--net $net)"* ]]
    run $CORDON run --backend worktree --net "$net" -- touch ran
    [ "$status" -eq 125 ]
    [[ "$output" == *"net_$net"* ]]
    [ ! -e ran ]
  done
  [ "$(sessions_left)" -eq 0 ]
  # Without --net it gets the class it can honour, open, and just runs.
  run --separate-stderr $CORDON run --backend worktree -- sh -c 'echo ran'
  [ "$status" -eq 0 ]
  [ "$output" = "ran" ]
  run $CORDON run --backend worktree --net open --quiet -- true
  [ "$status" -eq 0 ]
  # A batch is refused once, as a whole.
  snap=$($CORDON snapshot take src)
  run $CORDON session create --backend worktree --from "$snap" --count 2 --net none
  [ "$status" -eq 4 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"net_none"* ]]
  [[ "$output" != *"session 1 of 2"* ]]
  [ "$(sessions_left)" -eq 0 ]
  # Waived: it runs (with the host's network), loudly, and the chain says so.
  run --separate-stderr $CORDON run --backend worktree --net none --no-require-enforcement \
    --quiet -- true
  [ "$status" -eq 0 ]
  [[ "$stderr" == *"WARNING: backend worktree does NOT enforce net_none (--net none)"* ]]
  [ "$($CORDON audit show --json | jq -c .details)" = '{"backend":"worktree","features":["net_none"]}' ]
}

@test "worktree says once on stderr that it isolates nothing, unless --quiet or CORDON_QUIET" {
  run --separate-stderr $CORDON run --backend worktree -- sh -c 'echo out; echo err >&2'
  [ "$status" -eq 0 ]
  [ "$output" = "out" ]
  [ "${#stderr_lines[@]}" -eq 2 ]
  [[ "${stderr_lines[0]}" == "cordon: notice: backend worktree isolates nothing"*"--quiet"* ]]
  [ "${stderr_lines[1]}" = "err" ]
  run --separate-stderr $CORDON session create --backend worktree
  [ "$status" -eq 0 ]
  [ "${#stderr_lines[@]}" -eq 1 ]
  [[ "$stderr" == *"isolates nothing"* ]]
  id=$output
  # Not again for each exec of the session.
  run --separate-stderr $CORDON session exec "$id" -- true
  [ "$status" -eq 0 ]
  [ -z "$stderr" ]
  $CORDON session destroy "$id"
  run --separate-stderr $CORDON run --backend worktree --quiet -- true
  [ "$status" -eq 0 ]
  [ -z "$stderr" ]
  CORDON_QUIET=1 run --separate-stderr $CORDON run --backend worktree -- true
  [ -z "$stderr" ]
  # An isolating backend says nothing of the kind.
  if $CORDON backends --json | jq -e '.[] | select(.name == "ns" and .available)' >/dev/null; then
    run --separate-stderr $CORDON run --backend ns -- true
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
  fi
  # The unconfined fallback says it as its WARNING, not as the notice; it keeps the class a
  # confining backend would have applied (none), so giving that up is warned and audited too.
  CORDON_SANDBOX=off run --separate-stderr $CORDON run --no-require-enforcement -- true
  [ "$status" -eq 0 ]
  [ "${#stderr_lines[@]}" -eq 2 ]
  [[ "${stderr_lines[0]}" == *"WARNING: CORDON_SANDBOX=off: running UNCONFINED"* ]]
  [[ "${stderr_lines[1]}" == *"WARNING: backend worktree does NOT enforce net_none"* ]]
  [ "$($CORDON audit show --json | jq -c .details)" = '{"backend":"worktree","features":["net_none"]}' ]
  CORDON_SANDBOX=off run --separate-stderr $CORDON run --no-require-enforcement --net open -- true
  [ "$status" -eq 0 ]
  [ "${#stderr_lines[@]}" -eq 1 ]
  [ "$($CORDON audit show --json | wc -l)" -eq 1 ]
}

@test "backends declare what they enforce; a plugin of the old ABI is refused by name" {
  run $CORDON backends --json
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | jq -c '.[] | select(.name == "worktree") | .enforces')" = "[]" ]
  [ "$(echo "$output" | jq -c '.[] | select(.name == "example") | .enforces')" = "[]" ]
  ns=$(echo "$output" | jq -c '.[] | select(.name == "ns") | .enforces')
  [[ "$ns" == *'"read_only_paths","hidden_paths","host_grants","memory","pids","cpu","nofile","fsize"'* ]]
  [[ "$ns" == *'"net_none","net_loopback","net_restricted"'* ]]
  docker=$(echo "$output" | jq -c '.[] | select(.name == "docker") | .enforces')
  # docker: loopback, not none (the engine keeps lo up: tests/cli/backend-parity.bats).
  [[ "$docker" == *'"memory","pids","cpu","nofile","fsize","tmp_size","net_loopback"'* ]]
  [[ "$docker" != *net_none* ]]
  # Built against ABI 2, before backends declared what they enforce: refused, by its name.
  [ "$(echo "$output" | jq -r '.[] | select(.name == "cordon-old.so") | .load_error')" = \
    "built against backend ABI version 2, cordon speaks 3" ]
  run $CORDON run --backend cordon-old.so -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"cordon-old.so failed to load: built against backend ABI version 2"* ]]
  # The built-ins refuse what they do not declare too, before anything starts (no engine needed).
  # docker and ns enforce restricted (their host-side proxy: tests/cli/egress.bats); gvisor
  # does not, and is refused before runsc is asked anything.
  [[ "$docker" == *'"net_restricted"'* ]]
  run $CORDON session create --backend gvisor --net restricted
  [ "$status" -eq 4 ]
  [[ "$output" == *"backend gvisor does not enforce net_restricted"* ]]
}
