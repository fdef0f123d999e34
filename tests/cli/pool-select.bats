#!/usr/bin/env bats
# Pools place through the selector (issues 22 and 23): the pool's allowlist, in its own order,
# is the selector's candidate list; an attestation that refutes a capability the work needs
# (the lying plugin's network, needed by the template's net class) passes that backend over;
# refuted everywhere: exit 4 with a chained refusal naming the selector's reason; the receipt
# seals the selector's canonical inputs, byte-identical across projects that share the key and
# attestation; `pool verify` re-derives the choice. One attestation (liar, ns) for the file.
# $LIAR_PLUGIN_DIR holds tests/conformance/liar-plugin.c.

load common
bats_require_minimum_version 1.5.0

setup_file() {
  backends_check_once ns
  export CORDON_PLUGIN_PATH=$LIAR_PLUGIN_DIR
  export CORDON_KEY_DIR=$BATS_FILE_TMPDIR/keys
  export XDG_STATE_HOME=$BATS_FILE_TMPDIR/state
  mkdir -p "$XDG_STATE_HOME"
  # Docker's availability is the engine's, which may change during the run: keep it out.
  export DOCKER_HOST=unix:///nonexistent/cordon-pool-select-test.sock
  "$CORDON" key init >/dev/null
  [ -n "${NS_SKIP:-}" ] && return 0
  local project
  project=$(mktemp -d "${TMPDIR:-/tmp}/cordon-pool-select-att.XXXXXX")
  CORDON_PROJECT=$project "$CORDON" attest --backend liar --backend ns \
    --out "$BATS_FILE_TMPDIR/att.json" >/dev/null
  rm -rf "$project"
  export ATT=$BATS_FILE_TMPDIR/att.json
}

setup() {
  need_ns
  project_enter pool-select
  mkdir -p .cordon
  register edge '"liar", "ns"'
  printf '{"pool": "edge", "overrides": {}}\n' > recipe.json
}

teardown() {
  project_leave
}

# register NAME ALLOWLIST: a pool whose work needs egress none (so the network capability,
# which the liar declares and the attestation refutes).
register() {
  cat > "$1.json" <<JSON
{"name": "$1", "backend_allowlist": [$2],
 "template": {"env": {"LANG": "C"}, "timeout_seconds": 60, "net": "none",
              "capabilities": ["exec"]},
 "exposed_fields": ["env"], "max_concurrency": 4,
 "capability_ceiling": ["exec", "file_rw", "network"], "network_egress_class": "none",
 "credential_env_allowlist": []}
JSON
  "$CORDON" pool register "$1.json" >/dev/null
}

# The body of the signed document in file $1.
body() { jq -c '.body' "$1"; }

@test "the attestation is the liar's refutation: network refuted" {
  [ "$(jq -c '.body.backends[] | select(.name == "liar") | .refuted' "$ATT")" = '["network"]' ]
}

@test "without --attestation the allowlist's first backend is placed, and the receipt says no attestation was given" {
  run "$CORDON" pool place edge --recipe recipe.json --out r.json --json
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [ "$(jq -r .chosen_backend <<<"$output")" = liar ]
  [ "$(jq -r '.body.selector_inputs.attestation' r.json)" = null ]
  [ "$(jq -r '.body.selector_inputs.requirements.allow_unverifiable' r.json)" = true ]
  [ "$(jq -r '.body.selector_inputs.requirements.net' r.json)" = none ]
  [ "$(jq -r '.body.selector_inputs.type' r.json)" = cordon.selector-inputs.v1 ]
  # The candidates are the allowlist in the pool's order, not the registry's cost order.
  [ "$(jq -c '[.body.selector_inputs.candidates[].name]' r.json)" = '["liar","ns"]' ]
  run "$CORDON" pool verify
  [ "$status" -eq 0 ] || { echo "$output"; false; }
}

@test "an attestation refuting the liar's network: placement passes it over for ns" {
  run "$CORDON" pool place edge --recipe recipe.json --attestation "$ATT" --out r.json --json
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [ "$(jq -r .chosen_backend <<<"$output")" = ns ]
  [ "$(jq -r .body.chosen_backend r.json)" = ns ]
  [ "$(jq -r '.body.selector_inputs.attestation.sha256' r.json)" = "$(sha256sum "$ATT" | cut -d' ' -f1)" ]
  [ "$(jq -r '.body.selector_inputs.attestation.kid' r.json)" = "$(jq -r .body.signer.kid "$ATT")" ]
  [ "$(jq -c '.body.selector_inputs.candidates[0].attested.refuted' r.json)" = '["network"]' ]
  # The choice replays from what was stored.
  run "$CORDON" pool verify
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  # run --pool and session create --pool take it too.
  run "$CORDON" run --pool edge --attestation "$ATT" -- sh -c 'echo ok'
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  [[ "$output" == *ok* ]]
  run --separate-stderr "$CORDON" session create --pool edge --attestation "$ATT" --json
  [ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
  [ "$(jq -r .backend <<<"$output")" = ns ]
  "$CORDON" session destroy "$(jq -r .id <<<"$output")" >/dev/null
}

@test "refuted everywhere: exit 4, a chained refusal naming the selector's reason, nothing created" {
  register lone '"liar"'
  printf '{"pool": "lone", "overrides": {}}\n' > lone-recipe.json
  run --separate-stderr "$CORDON" pool place lone --recipe lone-recipe.json --attestation "$ATT" --out refusal.json
  [ "$status" -eq 4 ] || { echo "$output $stderr"; false; }
  [[ "$stderr" == *"no_backend_available"*"liar: network refuted by the attestation"* ]] || { echo "$stderr"; false; }
  [ "$(jq -r .body.rule refusal.json)" = no_backend_available ]
  [[ "$(jq -r .body.message refusal.json)" == *"liar: network refuted by the attestation"* ]]
  run --separate-stderr "$CORDON" run --pool lone --attestation "$ATT" -- true
  [ "$status" -eq 4 ]
  run --separate-stderr "$CORDON" session create --pool lone --attestation "$ATT"
  [ "$status" -eq 4 ]
  [ -z "$(ls .cordon/sessions 2>/dev/null)" ]
  run "$CORDON" pool verify
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  # Without the attestation the operator's allowlist is the trust: the liar is placed.
  run "$CORDON" pool place lone --recipe lone-recipe.json
  [ "$status" -eq 0 ]
}

@test "two projects, same key, pool, recipe and attestation: byte-identical receipts" {
  "$CORDON" pool place edge --recipe recipe.json --attestation "$ATT" --out "$BATS_TEST_TMPDIR/a.json" >/dev/null
  local other
  other=$(mktemp -d "${TMPDIR:-/tmp}/cordon-pool-select-b.XXXXXX")
  mkdir -p "$other/.cordon"
  cp edge.json recipe.json "$other/"
  (cd "$other" && CORDON_PROJECT=$other "$CORDON" pool register edge.json >/dev/null &&
    CORDON_PROJECT=$other "$CORDON" pool place edge --recipe recipe.json --attestation "$ATT" \
      --out "$BATS_TEST_TMPDIR/b.json" >/dev/null)
  rm -rf "$other"
  cmp "$BATS_TEST_TMPDIR/a.json" "$BATS_TEST_TMPDIR/b.json"
  # Another attestation (here: none) is another decision, sealed as such.
  "$CORDON" pool place edge --recipe recipe.json --out "$BATS_TEST_TMPDIR/c.json" >/dev/null
  ! cmp -s "$BATS_TEST_TMPDIR/a.json" "$BATS_TEST_TMPDIR/c.json"
}

@test "a tampered or unanchored attestation is refused before placing; --expected-keyid needs --attestation" {
  python3 - "$ATT" "$BATS_TEST_TMPDIR/bad.json" <<'PY'
import sys
data = bytearray(open(sys.argv[1], 'rb').read())
i = data.index(b'"refuted"')
data[i + 14] ^= 1
open(sys.argv[2], 'wb').write(bytes(data))
PY
  run --separate-stderr "$CORDON" pool place edge --recipe recipe.json --attestation "$BATS_TEST_TMPDIR/bad.json"
  [ "$status" -ne 0 ] && [ "$status" -ne 4 ]
  [[ "$stderr" == *"attestation"*"bad.json"* ]] || { echo "$stderr"; false; }
  run --separate-stderr "$CORDON" pool place edge --recipe recipe.json --attestation "$ATT" \
    --expected-keyid AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
  [ "$status" -ne 0 ] && [ "$status" -ne 4 ]
  [[ "$stderr" == *"attestation"* ]]
  run --separate-stderr "$CORDON" pool place edge --expected-keyid AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
  [ "$status" -eq 2 ]
  [[ "$stderr" == *"--expected-keyid needs --attestation"* ]]
  # Nothing was placed by any of them.
  [ "$("$CORDON" pool verify --json | jq .receipts)" -eq 0 ]
}

@test "a worker places its dispatches with the attestation it was given" {
  register lone '"liar"'
  "$CORDON" worker enrol --pool lone >/dev/null
  "$CORDON" pool submit lone -- sh -c 'echo from-worker' >/dev/null
  run --separate-stderr "$CORDON" worker run --pool lone --once --attestation "$ATT" --json
  [ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
  # Refuted everywhere: recorded as refused, not run on the liar.
  [ "$(jq -r .refusal <<<"$output")" != null ] || { echo "$output"; false; }
  [ "$(jq -r .exit_code <<<"$output")" -eq 4 ]
  # The same dispatch without the attestation runs (the allowlist is the trust).
  "$CORDON" pool submit lone -- sh -c 'echo from-worker' >/dev/null
  run --separate-stderr "$CORDON" worker run --pool lone --once --json
  [ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
  [ "$(jq -r .refusal <<<"$output")" = null ]
  [ "$(jq -r .exit_code <<<"$output")" -eq 0 ]
  run "$CORDON" pool verify
  [ "$status" -eq 0 ] || { echo "$output"; false; }
}

@test "pool warm provisions on the attested choice; a dispatch with the attestation attaches to it" {
  run --separate-stderr "$CORDON" pool warm edge --slots 1 --attestation "$ATT" --json
  [ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
  [ "$(jq -r .backend <<<"$output")" = ns ]
  [ "$(ls .cordon/pools/warm/edge/ready | wc -l)" -eq 1 ]
  run "$CORDON" run --pool edge --attestation "$ATT" -- true
  [ "$status" -eq 0 ] || { echo "$output"; false; }
  # Used, not quarantined: same effective manifest, same (attested) backend.
  [ -z "$(ls .cordon/pools/warm/edge/ready)" ]
  [ -z "$(ls .cordon/pools/warm/edge/quarantine 2>/dev/null)" ]
  run --separate-stderr "$CORDON" pool warm edge --slots 1 --expected-keyid AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
  [ "$status" -eq 2 ]
}
