#!/usr/bin/env bats
# `cordon select` and `--backend auto` (issue 22, item 4): the selector reads a verified
# attestation; the lying plugin's refuted network excludes it; nothing fits: exit 4 with a
# reason per backend; the same inputs give the same digest; a bad attestation is refused;
# without one every claim is unverifiable. One attestation (worktree, the liar, ns where it
# runs) is made for the whole file. $LIAR_PLUGIN_DIR holds tests/conformance/liar-plugin.c.

load common
bats_require_minimum_version 1.5.0

setup_file() {
  backends_check_once ns
  export CORDON_PLUGIN_PATH=$LIAR_PLUGIN_DIR
  export CORDON_KEY_DIR=$BATS_FILE_TMPDIR/keys
  # Docker's availability is the engine's, which may change during the run: keep it out.
  export DOCKER_HOST=unix:///nonexistent/cordon-select-test.sock
  "$CORDON" key init >/dev/null
  local project
  project=$(mktemp -d "${TMPDIR:-/tmp}/cordon-select-att.XXXXXX")
  local backends=(--backend worktree --backend liar)
  [ -n "${NS_SKIP:-}" ] || backends+=(--backend ns)
  CORDON_PROJECT=$project "$CORDON" attest "${backends[@]}" --out "$BATS_FILE_TMPDIR/att.json"
  rm -rf "$project"
  export ATT=$BATS_FILE_TMPDIR/att.json
}

setup() {
  project_enter select
}

teardown() {
  project_leave
}

# The reason select's --json output $1 gives for backend $2 ("" when it was not rejected).
reason_of() {
  jq -r --arg b "$2" '.rejected[] | select(.backend == $b) | .reason' <<<"$1"
}

@test "the liar's refuted network excludes it; what it was not refuted on does not" {
  [ "$(jq -c '.body.backends[] | select(.name == "liar") | .refuted' "$ATT")" = '["network"]' ]
  run "$CORDON" select --require network --attestation "$ATT" --allow-unverifiable --json
  [[ "$(reason_of "$output" liar)" == *"network refuted by the attestation"* ]] ||
    { echo "$output"; false; }
  [ "$(jq -r .backend <<<"$output")" != liar ]
  run "$CORDON" select --require exec --attestation "$ATT" --allow-unverifiable --json
  [ "$status" -eq 0 ]
  [ -z "$(reason_of "$output" liar)" ] || { echo "$output"; false; }
  # Refuted is not waivable: --allow-unverifiable does not bring it back, and without it the
  # liar is refused as well.
  run "$CORDON" select --require network --attestation "$ATT" --json
  [[ "$(reason_of "$output" liar)" == *"network refuted"* ]]
}

@test "nothing fits: exit 4, one reason per backend, the digest named" {
  n=$("$CORDON" backends --json | jq '[.[] | select(has("tier"))] | length')
  [ "$n" -ge 3 ]
  run --separate-stderr "$CORDON" select --require gpu,persistent_volumes --attestation "$ATT"
  [ "$status" -eq 4 ]
  [ -z "$output" ]
  [[ "${stderr_lines[0]}" == "cordon: select: no backend fits (selector_inputs "* ]]
  [ "$(grep -c '^  [a-z0-9_-]*: ' <<<"$stderr")" -eq "$n" ]
  grep -q '^  worktree: does not declare gpu,persistent_volumes$' <<<"$stderr"
  grep -q '^  liar: ' <<<"$stderr"
  run "$CORDON" select --require gpu --json
  [ "$status" -eq 4 ]
  [ "$(jq -r .backend <<<"$output")" = null ]
  [ "$(jq '.rejected | length' <<<"$output")" -eq "$n" ]
}

@test "same inputs, same digest; another input, another digest" {
  a=$("$CORDON" select --require exec,file_rw --attestation "$ATT" --allow-unverifiable)
  b=$("$CORDON" select --require file_rw,exec --attestation "$ATT" --allow-unverifiable)
  [ "$a" = "$b" ]
  [[ "$a" == "backend: worktree"$'\n'"selector_inputs: "* ]]
  d=$(sed -n 's/^selector_inputs: //p' <<<"$a")
  [ ${#d} -eq 64 ]
  # The digest is the SHA-256 of the canonical inputs --json shows.
  j=$("$CORDON" select --require exec,file_rw --attestation "$ATT" --allow-unverifiable --json)
  [ "$(jq -r .selector_inputs_digest <<<"$j")" = "$d" ]
  [ "$(jq -r .selector_inputs.type <<<"$j")" = cordon.selector-inputs.v1 ]
  [ "$(jq -r .selector_inputs.attestation.sha256 <<<"$j")" = "$(sha256sum "$ATT" | cut -d' ' -f1)" ]
  c=$("$CORDON" select --require exec,file_rw --attestation "$ATT" --allow-unverifiable \
    --min-tier process | sed -n 's/^selector_inputs: //p' || true)
  e=$("$CORDON" select --require exec,file_rw --allow-unverifiable | sed -n 's/^selector_inputs: //p')
  [ -n "$e" ]
  [ "$c" != "$d" ]
  [ "$e" != "$d" ]
}

@test "without an attestation every claim is unverifiable: refused unless allowed" {
  run --separate-stderr "$CORDON" select --require exec
  [ "$status" -eq 4 ]
  grep -q '^  worktree: exec unverifiable (no attestation was given; --allow-unverifiable' \
    <<<"$stderr"
  run "$CORDON" select --require exec --allow-unverifiable
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "backend: worktree" ]
}

@test "a measured tier decides --min-tier; an unmeasured one is unverifiable" {
  need_ns
  run "$CORDON" select --require exec,network --min-tier container --attestation "$ATT" --json
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [ "$(jq -r .backend <<<"$output")" = ns ]
  [[ "$(reason_of "$output" worktree)" == *"declares tier none, below container"* ]]
  # The liar's boundary could not be observed: its tier is not evidence.
  run "$CORDON" select --require exec --min-tier container --attestation "$ATT" --json
  [[ "$(reason_of "$output" liar)" == *"tier container unverifiable"* ]] || { echo "$output"; false; }
}

@test "a bad attestation is refused: tampered, another signer, absent" {
  # One byte of the signed body changed.
  python3 - "$ATT" bad.json <<'EOF'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
i = data.index(b'"refuted":["network"]')
data[i + 13] ^= 0x01
open(sys.argv[2], "wb").write(bytes(data))
EOF
  run "$CORDON" select --require exec --attestation bad.json --allow-unverifiable
  [ "$status" -eq 1 ]
  [[ "$output" == *"attestation bad.json failed"* ]]
  run "$CORDON" select --require exec --attestation "$ATT" --allow-unverifiable \
    --expected-keyid AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
  [ "$status" -eq 1 ]
  run "$CORDON" select --require exec --attestation missing.json
  [ "$status" -eq 1 ]
  [[ "$output" == *"incomplete"* ]]
  # The same file anchored to the key that signed it is fine.
  kid=$("$CORDON" key show | sed -n 's/^kid: //p')
  run "$CORDON" select --require exec --attestation "$ATT" --expected-keyid "$kid"
  [ "$status" -eq 0 ]
}

@test "select: usage errors exit 2" {
  run "$CORDON" select
  [ "$status" -eq 2 ]
  run "$CORDON" select --require exec,warp
  [ "$status" -eq 2 ]
  [[ "$output" == *"unknown capability 'warp'"* ]]
  run "$CORDON" select --require exec --min-tier castle
  [ "$status" -eq 2 ]
  run "$CORDON" select --require exec --net everywhere
  [ "$status" -eq 2 ]
  run "$CORDON" select --require exec --expected-keyid AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
  [ "$status" -eq 2 ]
  run "$CORDON" select --require exec extra
  [ "$status" -eq 2 ]
}

@test "run --backend auto: the selector's choice runs the command; nothing fits: 125" {
  need_ns
  run --separate-stderr "$CORDON" run --backend auto --min-tier container --attestation "$ATT" \
    -- sh -c 'echo inside'
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  [ "$output" = inside ]
  [[ "$stderr" == *"--backend auto: ns (selector_inputs "* ]]
  # A limit worktree does not enforce: not chosen, even allowed unverifiable claims.
  run --separate-stderr "$CORDON" run --backend auto --allow-unverifiable --pids 64 -- true
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  [[ "$stderr" != *"--backend auto: worktree"* ]]
  run --separate-stderr "$CORDON" run --backend auto --require gpu --attestation "$ATT" -- true
  [ "$status" -eq 125 ]
  [[ "$stderr" == *"worktree: does not declare gpu"* ]] || { echo "$stderr"; false; }
  [[ "$stderr" == *"no backend fits"* ]]
  # Selector options without --backend auto are a mistake, said.
  run "$CORDON" run --backend worktree --require exec -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"go with --backend auto"* ]]
}

@test "session create --backend auto" {
  run --separate-stderr "$CORDON" session create --backend auto --allow-unverifiable --quiet
  [ "$status" -eq 0 ] || { echo "$stderr"; false; }
  id=$output
  run "$CORDON" session exec "$id" -- true
  [ "$status" -eq 0 ]
  "$CORDON" session destroy "$id"
  run "$CORDON" session create --backend auto --require snapshot,gpu --attestation "$ATT"
  [ "$status" -eq 4 ]
}

@test "serve's /v1/backends reports gpu as cordon backends does (fake GPU nodes)" {
  [ "$(id -u)" -eq 0 ] || skip "mknod needs root"
  command -v curl >/dev/null || skip "curl is not installed"
  mkdir -p gpu/dri
  mknod -m 666 gpu/nvidia0 c 1 3 || skip "cannot mknod here"
  mknod -m 666 gpu/nvidiactl c 1 3
  export CORDON_DEV_ROOT=$PROJECT/gpu
  want=$("$CORDON" backends --json | jq -c '[.[] | select(has("capabilities")) | {name, capabilities}]')
  [[ "$want" == *'"gpu"'* ]] || { echo "$want"; false; }
  "$CORDON" serve >serve.out 2>serve.err &
  server=$!
  for _ in $(seq 200); do
    grep -q '^cordon serve: listening on ' serve.out && break
    sleep 0.1
  done
  got=$(curl -sS --unix-socket "$PROJECT/.cordon/serve.sock" http://cordon/v1/backends |
    jq -c '[.backends[] | select(has("capabilities")) | {name, capabilities}]')
  kill "$server"
  wait "$server" || true
  [ "$got" = "$want" ] || { echo "got $got"; echo "want $want"; false; }
}

@test "cordon-select(1) and the completion name every option select --help prints" {
  [ -n "${SOURCE_ROOT:-}" ] || SOURCE_ROOT=$BATS_TEST_DIRNAME/../..
  page=$(sed 's/\\-/-/g' "$SOURCE_ROOT/docs/man/cordon-select.1")
  got=$(bash -c 'source "$1"; COMP_WORDS=(cordon select --); COMP_CWORD=2; _cordon
    printf "%s\n" "${COMPREPLY[@]}"' _ "$SOURCE_ROOT/completions/cordon.bash")
  opts=$("$CORDON" select --help | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u)
  [ -n "$opts" ]
  for opt in $opts; do
    grep -qE -- "$opt([^a-z0-9-]|\$)" <<<"$page" || { echo "page lacks $opt"; false; }
    grep -qx -- "$opt" <<<"$got" || { echo "completion lacks $opt"; false; }
  done
}
