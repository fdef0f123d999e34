#!/usr/bin/env bats
# A read-only path beneath a hidden directory (`cordon run --hide D --ro D/sub`) under the ns
# backend: that part of the hidden tree is shown read-only inside the mask, the rest of it stays
# hidden, and nothing inside can write it, add beside it or carry it away. Negative tests, from
# inside. The docker backend, which cannot show a path inside a mask, refuses the policy. $CORDON
# is the binary under test; every test runs in a fresh project directory.

bats_require_minimum_version 1.5.0

setup_file() {
  local probe
  probe=$(mktemp -d "${TMPDIR:-/tmp}/cordon-rohide-probe.XXXXXX")
  if ! CORDON_PROJECT=$probe "$CORDON" backends --json 2>/dev/null | tr -d '\n ' |
    grep -q '"name":"ns"[^}]*"available":true'; then
    export NS_SKIP="the ns backend is unavailable on this host"
  fi
  local why
  why=$(CORDON_PROJECT=$probe "$CORDON" backends --json 2>&1 | tr -d '\n' |
    grep -o '"name": "docker"[^}]*' | grep -o '"unavailable_reason": "[^"]*"' || true)
  [ -z "$why" ] || export DOCKER_SKIP="docker backend unavailable: ${why#*: }"
  rm -rf "$probe"
}

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-rohide.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  export CORDON_QUIET=1
  export CORDON_KEY_DIR=$PROJECT.keys
  cd "$PROJECT"
  mkdir -p vault/shown/deeper vault/other
  echo secret >vault/top-secret
  echo other >vault/other/file
  echo shown >vault/shown/doc
  echo deep >vault/shown/deeper/doc
}

teardown() {
  cd /
  rm -rf "$PROJECT" "$PROJECT.keys"
}

need_ns() { [ -z "${NS_SKIP:-}" ] || skip "$NS_SKIP"; }

# Every line names a check and says ok (it held) or BAD (it did not).
probe() {
  cat <<'SH'
cd /workspace
check() { if eval "$2" >/dev/null 2>&1; then echo "BAD $1"; else echo "ok $1"; fi; }
must() { if eval "$2" >/dev/null 2>&1; then echo "ok $1"; else echo "BAD $1"; fi; }
must read-shown 'grep -qx shown vault/shown/doc'
must read-shown-deep 'grep -qx deep vault/shown/deeper/doc'
check read-hidden-file 'cat vault/top-secret'
check read-hidden-dir 'cat vault/other/file'
check list-hidden 'ls -A vault | grep -vqx shown'
check write-shown 'echo x > vault/shown/doc'
check append-shown 'echo x >> vault/shown/deeper/doc'
check create-in-shown 'touch vault/shown/new'
check mkdir-in-shown 'mkdir vault/shown/newdir'
check remove-in-shown 'rm -f vault/shown/doc'
check rename-in-shown 'mv vault/shown/doc vault/shown/doc2'
check chmod-shown 'chmod 777 vault/shown/doc'
check create-beside 'touch vault/planted'
check mkdir-beside 'mkdir vault/other2'
check rename-shown-away 'mv vault/shown vault/moved'
check remove-shown 'rm -rf vault/shown'
check rename-hidden-away 'mv vault vault2'
check remove-hidden 'rm -rf vault'
check remount-rw 'mount -o remount,rw vault/shown'
check umount-shown 'umount vault/shown'
check umount-mask 'umount -l vault'
SH
}

@test "run ns --hide D --ro D/sub: the sub-directory is shown read-only, the rest stays hidden" {
  need_ns
  run --separate-stderr "$CORDON" run --backend ns --workspace . --hide vault --ro vault/shown -- \
    sh -c "$(probe)"
  echo "$output"
  echo "$stderr"
  [ "$status" -eq 0 ]
  [[ "$output" != *BAD* ]]
  [ "$(grep -c '^ok ' <<<"$output")" -eq 21 ]
  # Nothing the attempts did reached the host.
  [ "$(cat vault/shown/doc)" = shown ]
  [ "$(cat vault/shown/deeper/doc)" = deep ]
  [ "$(cat vault/top-secret)" = secret ]
  [ ! -e vault/shown/new ] && [ ! -e vault/planted ] && [ ! -e vault2 ] && [ ! -e vault/moved ]
}

@test "run ns --hide D --ro D/a/b/file: a file deep in the hidden tree is shown, its directories are not" {
  need_ns
  run -0 "$CORDON" run --backend ns --workspace . --hide vault --ro vault/shown/deeper/doc -- sh -c '
    cd /workspace
    cat vault/shown/deeper/doc
    ls -A vault/shown/deeper
    ls -A vault/shown
    cat vault/shown/doc 2>/dev/null && echo BAD-read
    echo x > vault/shown/deeper/doc 2>/dev/null && echo BAD-write
    touch vault/shown/deeper/new 2>/dev/null && echo BAD-create
    mv vault/shown/deeper vault/shown/d2 2>/dev/null && echo BAD-rename
    true'
  [ "${lines[0]}" = deep ]
  [ "${lines[1]}" = doc ]
  [ "${lines[2]}" = deeper ]
  [[ "$output" != *BAD* ]]
  [ "$(cat vault/shown/deeper/doc)" = deep ]
}

@test "run ns: a hidden path on a read-only one, or cordon's state, is still refused" {
  need_ns
  run --separate-stderr "$CORDON" run --backend ns --workspace . --hide vault --ro vault -- true
  [ "$status" -ne 0 ]
  [[ "$stderr" == *"read-only path vault is also hidden"* ]]
  # cordon's own state stays hidden: only .cordon/agent-visible may be shown.
  "$CORDON" run --backend ns --workspace . -- true # makes .cordon/
  mkdir -p .cordon/agent-visible .cordon/other
  run --separate-stderr "$CORDON" run --backend ns --workspace . --ro .cordon/other -- true
  [ "$status" -ne 0 ]
  [[ "$stderr" == *"lies in cordon's private state .cordon"* ]]
  run --separate-stderr "$CORDON" run --backend ns --workspace . --ro .cordon -- true
  [ "$status" -ne 0 ]
}

@test "run ns: a hard link from the shown part to a hidden file is refused" {
  need_ns
  ln vault/top-secret vault/shown/link
  run --separate-stderr "$CORDON" run --backend ns --workspace . --hide vault --ro vault/shown -- \
    cat /workspace/vault/shown/link
  [ "$status" -ne 0 ]
  [[ "$stderr" == *"hard link"* ]]
  [[ "$output" != *secret* ]]
}

@test "run ns: a symlink in place of the shown path is resolved first, not shown in the mask" {
  need_ns
  rm -rf vault/shown
  ln -s ../outside vault/shown
  mkdir outside && echo out >outside/f
  # The symlink names outside/, not a part of the hidden tree: that is made read-only in place,
  # and vault/ stays an empty mask, the symlink in it included.
  run --separate-stderr "$CORDON" run --backend ns --workspace . --hide vault --ro vault/shown -- \
    sh -c 'cd /workspace; echo "[$(ls -A vault)]"; cat vault/shown/f || echo no-shown;
           cat outside/f; echo x > outside/f || echo no-write'
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "[]" ]
  [ "${lines[1]}" = no-shown ]
  [ "${lines[2]}" = out ]
  [ "${lines[3]}" = no-write ]
  [ "$(cat outside/f)" = out ]
}

@test "run docker --hide D --ro D/sub is refused (docker cannot show a path inside a mask)" {
  [ -z "${DOCKER_SKIP:-}" ] || skip "$DOCKER_SKIP"
  run --separate-stderr "$CORDON" run --backend docker --workspace . --hide vault --ro vault/shown -- true
  [ "$status" -ne 0 ]
  [[ "$stderr" == *"under hidden path vault"* ]]
}

@test "agent --hide D --ro D/sub: shown read-only under ns and bwrap alike" {
  local mechanisms=()
  [ -n "${NS_SKIP:-}" ] || mechanisms+=(ns)
  if command -v bwrap >/dev/null && bwrap --unshare-all --ro-bind / / true 2>/dev/null; then
    mechanisms+=(bwrap)
  fi
  [ ${#mechanisms[@]} -gt 0 ] || skip "neither the ns backend nor bubblewrap can run here"
  unset CORDON_PROJECT
  for m in "${mechanisms[@]}"; do
    run --separate-stderr "$CORDON" agent --project "$PROJECT" --mechanism "$m" --hide vault --ro vault/shown -- sh -c '
      cat vault/shown/doc
      cat vault/top-secret 2>/dev/null && echo BAD-read
      echo x > vault/shown/doc 2>/dev/null && echo BAD-write
      touch vault/shown/new vault/planted 2>/dev/null && echo BAD-create
      mv vault/shown vault/moved 2>/dev/null && echo BAD-rename
      true'
    echo "$m: $output $stderr"
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = shown ]
    [[ "$output" != *BAD* ]]
  done
  [ "$(cat vault/shown/doc)" = shown ]
  [ ! -e vault/shown/new ] && [ ! -e vault/planted ] && [ ! -e vault/moved ]
}
