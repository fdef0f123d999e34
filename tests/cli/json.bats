#!/usr/bin/env bats
# One command line, one dialect: every verb's --json as docs/formats.md ("CLI JSON") writes it
# down, the exit codes of `receipt verify`, the install key made on first use, `gc` without
# Docker, `conformance` leaving the project's store alone, and the progress bars of the long
# verbs (on a terminal only). $CORDON is the binary under test; every test runs in a fresh
# project with its own key directory.

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-json.XXXXXX")
  KEYS=$(mktemp -d "${TMPDIR:-/tmp}/cordon-json-keys.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  export CORDON_KEY_DIR=$KEYS/keys
  export CORDON_QUIET=1
  cd "$PROJECT"
  mkdir -p tree/sub
  printf 'alpha\n' > tree/a
  printf 'bravo\n' > tree/sub/b
  chmod 0640 tree/a
}

teardown() {
  cd /
  rm -rf "$PROJECT" "$KEYS"
}

need_jq() {
  command -v jq >/dev/null || skip "jq is not installed (scripts/install-deps installs it)"
}

# A tree big enough that a progress bar has something to report.
make_big_tree() {
  mkdir -p "$1"
  for i in $(seq 1 200); do head -c 100000 /dev/urandom > "$1/f$i"; done
}

# The number of files in the project's store (blobs, packs, sidecars).
store_files() { find "$PROJECT/.cordon/cas" -type f 2>/dev/null | wc -l; }

@test "--json: durations are duration_seconds (run, snapshot take)" {
  need_jq
  run -0 "$CORDON" run --backend worktree --json -- true
  [ "$(jq -r 'has("duration_seconds") and (has("duration") | not)' <<< "$output")" = true ]
  [ "$(jq -r '.duration_seconds | type' <<< "$output")" = number ]
  run -0 "$CORDON" snapshot take tree --json
  [ "$(jq -r 'has("duration_seconds") and (has("seconds") | not)' <<< "$output")" = true ]
}

@test "--json: every verify verb prints ok, verdict, exit_code and problems" {
  need_jq
  "$CORDON" snapshot take tree >/dev/null
  run -0 "$CORDON" cas verify --json
  [ "$(jq -c '[.ok, .verdict, .exit_code, (.problems | type)]' <<< "$output")" = '[true,"verified",0,"array"]' ]
  "$CORDON" key init >/dev/null
  "$CORDON" audit append --event test.event --resource-type test >/dev/null
  run -0 "$CORDON" audit verify --json
  [ "$(jq -c '[.ok, .verdict, .exit_code, (.problems | type)]' <<< "$output")" = '[true,"verified",0,"array"]' ]
  printf 'not a receipt' > bad.json
  run -1 "$CORDON" receipt verify bad.json --json
  [ "$(jq -c '[.ok, .verdict, .exit_code, (.problems | type)]' <<< "$output")" = '[false,"failed",1,"array"]' ]
  run -2 "$CORDON" receipt verify missing.json --json
  [ "$(jq -c '[.ok, .verdict, .exit_code]' <<< "$output")" = '[false,"incomplete",2]' ]
  # A tampered blob: cas verify fails, and says so in the same dialect.
  blob=$(find "$PROJECT/.cordon/cas" -type f | grep -E '/[0-9a-f]{2}/[0-9a-f]{64}$' | head -1)
  [ -n "$blob" ] || skip "no loose blob in the store to tamper with"
  chmod u+w "$blob"
  printf 'tampered' >> "$blob"
  run -1 "$CORDON" cas verify --json
  [ "$(jq -c '[.ok, .verdict, .exit_code]' <<< "$output")" = '[false,"failed",1]' ]
  [ "$(jq -r '.problems[0] | has("object") and has("verdict") and has("message")' <<< "$output")" = true ]
}

@test "--json: file modes are octal strings (snapshot show, session ls)" {
  need_jq
  id=$("$CORDON" snapshot take tree)
  run -0 "$CORDON" snapshot show "$id" --json
  [ "$(jq -r '.entries[] | select(.path == "a") | .mode' <<< "$output")" = 0640 ]
  [ "$(jq -r '.entries[] | select(.path == ".") | .mode | type' <<< "$output")" = string ]
  s=$("$CORDON" session create --backend worktree)
  printf 'x\n' | "$CORDON" session write "$s" f --mode 0600
  run -0 "$CORDON" session ls "$s" --json
  "$CORDON" session destroy "$s"
  [ "$(jq -r '.[] | select(.name == "f") | .mode' <<< "$output")" = 0600 ]
  # Real paths, never a descriptor's /proc name.
  [[ "$output" != */proc/* ]]
}

@test "--json: a session's workspace is a real path or null, never a /proc name" {
  need_jq
  "$CORDON" backends --json | jq -e '.[] | select(.name == "ns") | .available' >/dev/null ||
    skip "the ns backend is not available here"
  snap=$("$CORDON" snapshot take tree)
  run -0 "$CORDON" session create --backend ns --from "$snap" --json
  s=$(jq -r .id <<< "$output")
  created=$output
  run -0 "$CORDON" session list --json
  listed=$(jq -S -c ".[] | select(.id == \"$s\")" <<< "$output")
  ws=$(jq -r .workspace <<< "$created")
  [ "$ws" = null ] || [ -d "$ws" ] || ws_missing=1
  "$CORDON" session destroy "$s"
  [[ "$created" != *'/proc/'* ]]
  # The list gives the session as create did (it listed bare ids before, with no workspace).
  [ "$listed" = "$(jq -S -c . <<< "$created")" ]
  [ -z "${ws_missing:-}" ]
}

@test "--json: an error is one JSON object on stderr, with the exit code it exits with" {
  need_jq
  run --separate-stderr -3 "$CORDON" snapshot show "$(printf '0%.0s' $(seq 64))" --json
  [ -z "$output" ]
  [ "${#stderr_lines[@]}" -eq 1 ]
  [ "$(jq -c '[.error.kind, .error.exit_code, (.error.message | type)]' <<< "$stderr")" = '["not_found",3,"string"]' ]
  run --separate-stderr -2 "$CORDON" snapshot show nothex --json
  [ "$(jq -c '[.error.kind, .error.exit_code]' <<< "$stderr")" = '["usage",2]' ]
  run --separate-stderr -64 "$CORDON" receipt verify --bogus --json
  [ "$(jq -c '[.error.kind, .error.exit_code]' <<< "$stderr")" = '["usage",64]' ]
  run --separate-stderr "$CORDON" snapshot take "$PROJECT/no/such" --json
  [ "$status" -ne 0 ]
  [ "$(jq -r '.error.exit_code' <<< "$stderr")" -eq "$status" ]
  [[ "$stderr" != */proc/* ]]
  # Without --json the plain line stays.
  run --separate-stderr -2 "$CORDON" snapshot show nothex
  [[ "$stderr" == "cordon: "* ]]
}

@test "receipt verify: usage errors exit 64, documented in --help and the man page" {
  run -64 "$CORDON" receipt verify
  run -64 "$CORDON" receipt verify r.json --bogus
  run -64 "$CORDON" receipt verify r.json --expected-keyid short
  run -64 "$CORDON" receipt frob
  run -64 "$CORDON" receipt
  run -2 "$CORDON" receipt verify absent.json
  run -0 "$CORDON" receipt verify --help
  [[ "$output" == *"64 usage error"* ]]
  man_page="$BATS_TEST_DIRNAME/../../docs/man/cordon-receipt.1"
  [ -f "$man_page" ] || skip "no man page source next to the tests"
  grep -q '^\.B 64$' "$man_page"
}

@test "key show --kid prints the bare key id; key init takes an empty 0700 directory" {
  mkdir -m 0700 "$KEYS/keys"
  run -0 "$CORDON" key init
  run -0 "$CORDON" key show --kid
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" =~ ^[A-Za-z0-9_-]{43}$ ]]
  [ "$output" = "$("$CORDON" key show | sed -n 's/^kid: //p')" ]
  run -2 "$CORDON" key init --kid
}

@test "key init explains a key directory with the wrong mode" {
  mkdir -m 0755 "$KEYS/keys"
  run -4 "$CORDON" key init
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"$KEYS/keys is 0755: must be 0700, not readable by group or others"* ]]
  [ ! -e "$KEYS/keys/ed25519.key" ]
}

@test "race and receipt verify create the install key on first use, saying so once" {
  base=$("$CORDON" snapshot take tree)
  [ ! -e "$KEYS/keys" ]
  run --separate-stderr -0 "$CORDON" race --backend worktree --base "$base" --k 2 --out r.json -- true
  kid=$("$CORDON" key show --kid)
  [[ "$stderr" == *"cordon: created the install key $kid in $KEYS/keys"* ]]
  run --separate-stderr -0 "$CORDON" race --backend worktree --base "$base" --k 2 --out r2.json -- true
  [[ "$stderr" != *"created the install key"* ]]
  run -0 "$CORDON" receipt verify r.json --expected-keyid "$kid"
  # receipt verify on a fresh install: the key is made, the verdict is the receipt's (the
  # receipt carries its signer's public key; --expected-keyid anchors it).
  rm -rf "$KEYS/keys"
  run --separate-stderr -0 "$CORDON" receipt verify r.json --expected-keyid "$kid"
  [[ "$stderr" == *"cordon: created the install key "*" in $KEYS/keys"* ]]
  [ -f "$KEYS/keys/ed25519.key" ]
}

@test "gc without a Docker engine: exit 0 and one note" {
  run --separate-stderr -0 env DOCKER_HOST="unix://$PROJECT/no-such.sock" "$CORDON" gc
  [ "$stderr" = "cordon: docker: engine not running, no containers checked" ]
  run --separate-stderr -0 env DOCKER_HOST="unix://$PROJECT/no-such.sock" "$CORDON" gc --json
  [ "${#stderr_lines[@]}" -eq 1 ]
  if command -v jq >/dev/null; then
    [ "$(jq -r '.docker_checked' <<< "$output")" = false ]
  fi
}

@test "conformance leaves nothing in the project's store" {
  "$CORDON" snapshot take tree >/dev/null
  before=$(store_files)
  run -0 "$CORDON" cas verify
  listing_before=$output
  run -0 "$CORDON" conformance --json worktree
  if command -v jq >/dev/null; then
    [ "$(jq -r '[.results[] | has("duration_seconds")] | all' <<< "$output")" = true ]
  fi
  [ "$(store_files)" -eq "$before" ]
  run -0 "$CORDON" cas verify
  [ "$output" = "$listing_before" ]
  [ ! -e "$PROJECT/.cordon/sessions" ] || [ -z "$(ls "$PROJECT/.cordon/sessions")" ]
}

@test "progress: a bar on a terminal, nothing but the result when piped" {
  command -v script >/dev/null || skip "script(1) is not installed (util-linux)"
  make_big_tree big
  make_big_tree big2
  # On a terminal (script gives the command one): the bar redraws with \r.
  run -0 script -qec "$CORDON snapshot take big" /dev/null
  [[ "$output" == *$'\r'* ]]
  id=$(grep -o '[0-9a-f]\{64\}' <<< "$output" | tail -1)
  run -0 script -qec "$CORDON snapshot export $id -o image.tar" /dev/null
  [[ "$output" == *$'\r'* ]]
  run -0 script -qec "$CORDON cas verify" /dev/null
  [[ "$output" == *$'\r'* ]]
  run -0 script -qec "$CORDON snapshot restore $id out1" /dev/null
  [[ "$output" == *$'\r'* ]]
  rm -rf "$PROJECT/.cordon/cas"
  run -0 script -qec "$CORDON snapshot import image.tar" /dev/null
  [[ "$output" == *$'\r'* ]]
  # Piped: the result alone, on stdout; nothing on stderr.
  run --separate-stderr -0 "$CORDON" snapshot take big2
  [[ "$output" =~ ^[0-9a-f]{64}$ ]]
  [ -z "$stderr" ]
  run --separate-stderr -0 "$CORDON" cas verify
  [ "${#lines[@]}" -eq 1 ]
  [ -z "$stderr" ]
  run --separate-stderr -0 "$CORDON" snapshot restore "$id" out2
  [ -z "$stderr" ]
}
