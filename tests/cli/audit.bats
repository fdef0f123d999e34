#!/usr/bin/env bats
# `cordon key` and `cordon audit` as a user types them. $CORDON is the binary under test; every
# test runs in a fresh project with its own key directory outside the project.

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-audit.XXXXXX")
  KEYS=$(mktemp -d "${TMPDIR:-/tmp}/cordon-keys.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  export CORDON_KEY_DIR=$KEYS/keys
  cd "$PROJECT"
}

teardown() {
  cd /
  rm -rf "$PROJECT" "$KEYS"
}

seg() { printf '%s/.cordon/audit/audit-%06d.jsonl' "$PROJECT" "$1"; }

append() { "$CORDON" audit append --event "${1:-test.event}" --resource-type thing \
  --resource-id "${2:-r1}" --details "${3:-{\}}" >/dev/null; }

@test "key and audit: --help on every subverb, unknown subverbs and flags are usage errors" {
  for v in "key" "key init" "key show" "key jwks" "audit" "audit append" "audit show" \
           "audit verify" "audit repair"; do
    run $CORDON $v --help
    [ "$status" -eq 0 ]
    [[ "$output" == usage:* ]]
  done
  run $CORDON key frob
  [ "$status" -eq 2 ]
  run $CORDON audit frob
  [ "$status" -eq 2 ]
  run $CORDON audit verify --bogus
  [ "$status" -eq 2 ]
  [ "${#lines[@]}" -eq 1 ]
  run $CORDON audit append --event x
  [ "$status" -eq 2 ]
  [[ "$output" == *"--resource-type"* ]]
  run $CORDON audit show --tail zero
  [ "$status" -eq 2 ]
  run $CORDON key jwks --json
  [ "$status" -eq 2 ]
}

@test "key show before init: exit 3, one line naming 'cordon key init'" {
  run $CORDON key show
  [ "$status" -eq 3 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"cordon key init"* ]]
}

@test "key init: 0700 directory, 0600 files, idempotent, show and jwks agree on the key id" {
  run $CORDON key init
  [ "$status" -eq 0 ]
  [[ "$output" == created* ]]
  [ "$(stat -c %a "$CORDON_KEY_DIR")" = 700 ]
  [ "$(stat -c %a "$CORDON_KEY_DIR/ed25519.key")" = 600 ]
  [ "$(stat -c %a "$CORDON_KEY_DIR/audit-hmac.key")" = 600 ]
  [ "$(stat -c %s "$CORDON_KEY_DIR/audit-hmac.key")" = 32 ]
  openssl pkey -in "$CORDON_KEY_DIR/ed25519.key" -noout
  kid=$($CORDON key show --json | jq -r .kid)
  [[ "$kid" =~ ^[A-Za-z0-9_-]{43}$ ]]
  run $CORDON key init --json
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | jq -r .signing_key_created)" = false ]
  [ "$(echo "$output" | jq -r .kid)" = "$kid" ]
  [ "$($CORDON key jwks | jq -r '.keys[0].kid')" = "$kid" ]
  [ "$($CORDON key jwks | jq -r '.keys[0].kty + " " + .keys[0].crv + " " + .keys[0].alg')" = \
    "OKP Ed25519 EdDSA" ]
  # The key id is the RFC 7638 thumbprint of the JWK's required members.
  x=$($CORDON key show --json | jq -r .jwk.x)
  want=$(printf '{"crv":"Ed25519","kty":"OKP","x":"%s"}' "$x" | openssl dgst -sha256 -binary |
    base64 -w0 | tr '+/' '-_' | tr -d '=')
  [ "$kid" = "$want" ]
  # No private material in what is shown.
  run $CORDON key show --json
  [[ "$output" != *'"d"'* ]]
}

@test "a key file or directory with group/other bits is refused with a clear error (exit 4)" {
  $CORDON key init >/dev/null
  chmod 640 "$CORDON_KEY_DIR/ed25519.key"
  run $CORDON key show
  [ "$status" -eq 4 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"is 0640: must be 0600"*"chmod 600"* ]]
  chmod 600 "$CORDON_KEY_DIR/ed25519.key"
  chmod 604 "$CORDON_KEY_DIR/audit-hmac.key"
  run $CORDON audit append --event e --resource-type t
  [ "$status" -eq 4 ]
  [[ "$output" == *"audit-hmac.key is 0604"* ]]
  chmod 600 "$CORDON_KEY_DIR/audit-hmac.key"
  chmod 755 "$CORDON_KEY_DIR"
  run $CORDON key show
  [ "$status" -eq 4 ]
  [[ "$output" == *"key directory"*"chmod 700"* ]]
  chmod 700 "$CORDON_KEY_DIR"
  run $CORDON key show
  [ "$status" -eq 0 ]
  CORDON_KEY_DIR=relative/keys run $CORDON key show
  [ "$status" -eq 2 ]
}

@test "audit: appends chain and verify says intact" {
  run $CORDON audit verify
  [ "$status" -eq 0 ]
  [[ "$output" == *"0 entries"* ]]
  h1=$($CORDON audit append --event race.select --resource-type snapshot --resource-id abc \
    --details '{"k": 4, "winner": "t2"}')
  [[ "$h1" =~ ^[0-9a-f]{64}$ ]]
  append test.two
  run $CORDON audit append --event test.three --resource-type thing --actor agent:7 --json
  [ "$status" -eq 0 ]
  h3=$(echo "$output" | jq -r .hmac)
  run $CORDON audit verify
  [ "$status" -eq 0 ]
  [[ "$output" == *"intact: 3 entries"*"head $h3"* ]]
  run $CORDON audit verify --json
  [ "$(echo "$output" | jq -r '.ok, .entries, .head')" = "true
3
$h3" ]
  [ "$(stat -c %a "$(seg 1)")" = 600 ]
  # Lines are canonical JSON, the first links to the project's id, the second to the first.
  [ "$(head -n1 "$(seg 1)" | jq -r .prev)" = "$(cat .cordon/project-id)" ]
  [[ "$(cat .cordon/project-id)" =~ ^[0-9a-f]{64}$ ]]
  [ "$(sed -n 2p "$(seg 1)" | jq -r .prev)" = "$h1" ]
  head -n1 "$(seg 1)" | grep -q '"details":{"k":4,"winner":"t2"}'
  run $CORDON audit show
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 3 ]
  [[ "${lines[0]}" == *"race.select"*"snapshot:abc"* ]]
  [[ "${lines[2]}" == *"agent:7"* ]]
  run $CORDON audit show --json --tail 1
  [ "${#lines[@]}" -eq 1 ]
  [ "$(echo "$output" | jq -r .hmac)" = "$h3" ]
}

@test "audit: bad details are refused and nothing is written" {
  append one
  run $CORDON audit append --event e --resource-type t --details '[1,2]'
  [ "$status" -eq 2 ]
  [[ "$output" == *"object"* ]]
  run $CORDON audit append --event e --resource-type t --details '{"a":'
  [ "$status" -eq 2 ]
  run $CORDON audit append --event '' --resource-type t
  [ "$status" -eq 2 ]
  [ "$(wc -l < "$(seg 1)")" -eq 1 ]
}

@test "audit verify: a changed value is a bad HMAC on the line that holds it (exit 1)" {
  for i in 1 2 3 4; do append "e$i" "r$i"; done
  sed -i '3s/"r3"/"r9"/' "$(seg 1)"
  run $CORDON audit verify
  [ "$status" -eq 1 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"audit-000001.jsonl:3 "*"bad_hmac"* ]]
  run $CORDON audit verify --json
  [ "$status" -eq 1 ]
  [ "$(echo "$output" | jq -r '.problem, .line, .entries')" = "bad_hmac
3
2" ]
}

@test "audit verify: a removed line is a broken link, a mangled one is malformed" {
  for i in 1 2 3 4; do append "e$i"; done
  cp "$(seg 1)" saved
  sed -i '2d' "$(seg 1)"
  run $CORDON audit verify
  [ "$status" -eq 1 ]
  [[ "$output" == *":2 "*"broken_link"* ]]
  cp saved "$(seg 1)"
  sed -i '3s/^{/{ /' "$(seg 1)"
  run $CORDON audit verify
  [ "$status" -eq 1 ]
  [[ "$output" == *":3 "*"malformed"*"canonical"* ]]
  cp saved "$(seg 1)"
  run $CORDON audit verify
  [ "$status" -eq 0 ]
}

@test "audit verify: flipping any single byte of the log fails" {
  append a; append b
  f=$(seg 1)
  cp "$f" saved
  size=$(stat -c %s saved)
  for ((i = 0; i < size; i += 5)); do
    cp saved "$f"
    byte=$(od -An -tu1 -j "$i" -N1 saved | tr -d ' ')
    printf "$(printf '\\%03o' $((byte ^ 1)))" | dd of="$f" bs=1 seek="$i" conv=notrunc status=none
    run $CORDON audit verify
    [ "$status" -eq 1 ] || { echo "byte $i went unnoticed"; false; }
  done
}

@test "audit: a torn final line is detected precisely, blocks appends, and repair drops it" {
  for i in 1 2 3; do append "e$i"; done
  size=$(stat -c %s "$(seg 1)")
  printf '{"actor":"user:x","det' >> "$(seg 1)"
  run $CORDON audit verify
  [ "$status" -eq 1 ]
  [[ "$output" == *"audit-000001.jsonl:4 (entry 4, byte $size): missing_newline"*"22 bytes"* ]]
  run $CORDON audit append --event e --resource-type t
  [ "$status" -eq 1 ]
  [[ "$output" == *"line 4"*"torn"*"cordon audit repair"* ]]
  run $CORDON audit repair
  [ "$status" -eq 0 ]
  [[ "$output" == *"22 bytes"* ]]
  run $CORDON audit verify
  [ "$status" -eq 0 ]
  [[ "$output" == *"4 entries"* ]]
  tail -n1 "$(seg 1)" | grep -q '"event":"audit.repair"'
  run $CORDON audit repair
  [[ "$output" == *"nothing to repair"* ]]
}

@test "audit: rotation by size keeps the chain continuous across files" {
  for i in $(seq 1 12); do
    $CORDON audit append --event rot --resource-type t --resource-id "$i" --rotate-size 1K \
      --details '{"pad":"0123456789012345678901234567890123456789"}' >/dev/null
  done
  n=$(ls .cordon/audit/audit-*.jsonl | wc -l)
  [ "$n" -ge 3 ]
  for f in .cordon/audit/audit-*.jsonl; do [ "$(stat -c %s "$f")" -le 1024 ]; done
  [ "$(head -n1 "$(seg 2)" | jq -r .prev)" = "$(tail -n1 "$(seg 1)" | jq -r .hmac)" ]
  run $CORDON audit verify
  [ "$status" -eq 0 ]
  [[ "$output" == *"12 entries in $n segments"* ]]
  mv "$(seg 2)" elsewhere
  run $CORDON audit verify
  [ "$status" -eq 1 ]
  [[ "$output" == *"missing_segment"* ]]
  mv elsewhere "$(seg 2)"
  sed -i '$d' "$(seg 1)"
  run $CORDON audit verify
  [ "$status" -eq 1 ]
  [[ "$output" == *"audit-000002.jsonl:1 "*"broken_link"* ]]
}

@test "audit: four concurrent appenders leave one unforked chain" {
  for p in 1 2 3 4; do
    (for i in $(seq 1 15); do append "p$p" "$i" || exit 1; done) &
  done
  wait
  run $CORDON audit verify --json
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | jq -r .entries)" = 60 ]
  # Every prev is unique: no two entries claim the same predecessor.
  [ "$(jq -r .prev "$(seg 1)" | sort | uniq -d | wc -l)" -eq 0 ]
}

@test "audit verify with another key fails on the first line; without a key exits 3" {
  append a
  mv "$CORDON_KEY_DIR" "$KEYS/old"
  run $CORDON audit verify
  [ "$status" -eq 3 ]
  [ "${#lines[@]}" -eq 1 ]
  run $CORDON audit append --event e --resource-type t
  [ "$status" -eq 3 ]
  $CORDON key init >/dev/null
  run $CORDON audit verify
  [ "$status" -eq 1 ]
  [[ "$output" == *":1 "*"bad_hmac"* ]]
}

@test "audit: another project's log under the same key fails verify naming both ids" {
  append a; append b
  mine=$(cat .cordon/project-id)
  OTHER=$(mktemp -d "${TMPDIR:-/tmp}/cordon-audit-other.XXXXXX")
  CORDON_PROJECT=$OTHER $CORDON audit append --event other.one --resource-type t >/dev/null
  CORDON_PROJECT=$OTHER $CORDON audit append --event other.two --resource-type t >/dev/null
  theirs=$(cat "$OTHER/.cordon/project-id")
  [ "$mine" != "$theirs" ]
  # Each verifies in its own project...
  CORDON_PROJECT=$OTHER run $CORDON audit verify
  [ "$status" -eq 0 ]
  [[ "$output" == *"project $theirs"* ]]
  # ...but the other's HMAC-valid chain copied in here does not.
  cp .cordon/audit/audit-000001.jsonl mine.jsonl
  cp "$OTHER/.cordon/audit/audit-000001.jsonl" .cordon/audit/audit-000001.jsonl
  rm -rf "$OTHER"
  run $CORDON audit verify
  [ "$status" -eq 1 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"audit-000001.jsonl:1 "*"foreign_project"*"$theirs"*"$mine"* ]]
  run $CORDON audit verify --json
  [ "$(echo "$output" | jq -r '.problem, .project, .entries')" = "foreign_project
$theirs
0" ]
  # Nor does it grow here.
  run $CORDON audit append --event e --resource-type t
  [ "$status" -eq 1 ]
  [[ "$output" == *"refusing to extend"*"foreign_project"*"$mine"* ]]
  # The project's own log back: intact. Without its project-id, its log is no one's.
  cp mine.jsonl .cordon/audit/audit-000001.jsonl
  run $CORDON audit verify
  [ "$status" -eq 0 ]
  mv .cordon/project-id saved-id
  run $CORDON audit verify
  [ "$status" -eq 1 ]
  [[ "$output" == *"foreign_project"*"$mine"*"none"* ]]
  mv saved-id .cordon/project-id
  echo garbage > .cordon/project-id
  run $CORDON audit verify
  [ "$status" -eq 1 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"project-id is not 64 lowercase hex digits"* ]]
}
