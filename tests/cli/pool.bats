#!/usr/bin/env bats
# Named sandbox pools: `cordon pool register|list|show|retire|verify|place`, `run --pool` and
# `session create --pool`. Every refusal rule exits 4 with a receipt chained in the audit log
# and creates no session; two projects sharing one key seal byte-identical placement receipts;
# `pool verify` finds a flipped byte in any stored body or receipt and a deleted audit line.
# $CORDON is the binary under test; each test has its own project, key directory and state home.

bats_require_minimum_version 1.5.0

load pool-common

setup() {
  pool_project_enter pool-cli
  cat > pool.json <<'EOF'
{"name": "ci",
 "backend_allowlist": ["ns", "worktree"],
 "template": {"env": {"LANG": "C", "STAGE": "test"}, "timeout_seconds": 60, "net": "loopback",
              "capabilities": ["exec", "file_rw"]},
 "exposed_fields": ["env", "net", "timeout_seconds", "credential_env", "capabilities", "backend"],
 "max_concurrency": 2,
 "capability_ceiling": ["exec", "file_rw", "network"],
 "network_egress_class": "restricted",
 "credential_env_allowlist": ["GITHUB_TOKEN"]}
EOF
  printf '{"pool": "ci", "overrides": {"env": {"STAGE": "lint"}}}\n' > ok.json
}

teardown() {
  pool_project_leave
}

sessions_count() {
  local d=$PROJECT/.cordon/sessions
  [ -d "$d" ] || { echo 0; return; }
  find "$d" -mindepth 1 -maxdepth 1 | wc -l
}

@test "--help of pool, run and session create describe pools" {
  run "$CORDON" pool --help
  [ "$status" -eq 0 ]
  for verb in register list show retire verify place; do
    [[ "$output" == *"cordon pool $verb"* ]]
  done
  [[ "$output" == *"4 refused"* ]]
  run "$CORDON" run --help
  [[ "$output" == *"--pool NAME"* && "$output" == *"--recipe FILE"* ]]
  run "$CORDON" session create --help
  [[ "$output" == *"--pool NAME"* ]]
  run "$CORDON" --help
  [[ "$output" == *"pool register|list|show|retire|verify|place"* ]]
}

@test "register, list, show, update, retire: the registry replayed from the audit chain" {
  run "$CORDON" pool register pool.json
  [ "$status" -eq 0 ]
  [[ "$output" == "registered ci "* ]]
  hash=${output##* }
  run "$CORDON" pool register pool.json
  [[ "$output" == "unchanged ci $hash" ]]
  run "$CORDON" pool list
  [ "$output" = "$(printf 'ci\tactive\t1\t%s' "$hash")" ]
  run "$CORDON" pool show ci --json
  [ "$status" -eq 0 ]
  [ "$(jq -r .pool_hash <<<"$output")" = "$hash" ]
  [ "$(jq -r .state <<<"$output")" = active ]
  [ "$(jq -r .max_concurrency <<<"$output")" = 2 ]
  run "$CORDON" pool show ci
  [[ "$output" == *"network_egress_class       restricted"* ]]
  # The stored body is the canonical manifest: its digest is the pool_hash.
  [ "$(sha256sum < "$(blob "$hash")" | cut -d' ' -f1)" = "$hash" ]
  jq '.max_concurrency = 3' pool.json > pool2.json
  run "$CORDON" pool register pool2.json
  [[ "$output" == "updated ci "* ]]
  grep -q '"event":"pool.updated"' .cordon/audit/audit-000001.jsonl
  run "$CORDON" pool list --json
  [ "$(jq -r '.[0].version' <<<"$output")" = 2 ]
  run "$CORDON" pool retire ci
  [ "$status" -eq 0 ]
  run "$CORDON" pool list
  [[ "$output" == "ci"$'\t'"retired"* ]]
  run "$CORDON" pool retire ci
  [ "$status" -eq 3 ]
  run "$CORDON" pool show nope
  [ "$status" -eq 3 ]
  # Placing into a retired pool: refused with a receipt.
  run "$CORDON" pool place ci
  [ "$status" -eq 4 ]
  [[ "$output" == *"pool_retired"* ]]
  run "$CORDON" pool verify
  [ "$status" -eq 0 ]
}

@test "register refuses unknown fields, wrong types and a template above its ceiling, naming the field" {
  jq '.colour = "blue"' pool.json > bad.json
  run "$CORDON" pool register bad.json
  [ "$status" -eq 1 ]
  [[ "$output" == *"pool manifest: colour: unknown field"* ]]
  jq '.max_concurrency = "2"' pool.json > bad.json
  run "$CORDON" pool register bad.json
  [ "$status" -eq 1 ]
  [[ "$output" == *"max_concurrency:"* ]]
  jq '.template.net = "open"' pool.json > bad.json
  run "$CORDON" pool register bad.json
  [ "$status" -eq 1 ]
  [[ "$output" == *"template.net:"*"wider than network_egress_class"* ]]
  jq '.template.capabilities = ["gpu"]' pool.json > bad.json
  run "$CORDON" pool register bad.json
  [[ "$output" == *"template.capabilities:"* ]]
  jq '.template.credential_env = ["HOME"]' pool.json > bad.json
  run "$CORDON" pool register bad.json
  [[ "$output" == *"template.credential_env:"* ]]
  run "$CORDON" pool register missing.json
  [ "$status" -eq 3 ]
  run "$CORDON" pool register
  [ "$status" -eq 2 ]
  # Nothing was recorded.
  run "$CORDON" pool list
  [ -z "$output" ]
}

@test "place: accepted with a receipt; every refusal rule exits 4, chained, nothing created" {
  "$CORDON" pool register pool.json
  run "$CORDON" pool place ci --recipe ok.json --out receipt.json --json
  [ "$status" -eq 0 ]
  [ "$(jq -r .placed <<<"$output")" = true ]
  [ "$(jq -r '.effective_manifest.env.STAGE' <<<"$output")" = lint ]
  digest=$(jq -r .receipt <<<"$output")
  cmp receipt.json "$(blob "$digest")"
  [ "$(jq -r .body.type receipt.json)" = cordon.pool.placement ]
  [ "$(jq -r .body.effective_manifest_hash receipt.json)" = "$(jq -r .effective_manifest_hash <<<"$output")" ]
  # No clock, host or path in the signed body.
  ! grep -q "$PROJECT" receipt.json
  ! grep -qi '"time\|"created\|"host' receipt.json
  while read -r rule overrides; do
    printf '{"pool": "ci", "overrides": %s}\n' "$overrides" > r.json
    run "$CORDON" pool place ci --recipe r.json --out refusal.json
    [ "$status" -eq 4 ]
    [[ "$output" == *"$rule"* ]]
    [ "$(jq -r .body.rule refusal.json)" = "$rule" ]
    last=$(tail -n 1 .cordon/audit/audit-000001.jsonl)
    [ "$(jq -r .event <<<"$last")" = pool.override_refused ]
    [ "$(jq -r .details.rule <<<"$last")" = "$rule" ]
  done <<'EOF'
field_not_exposed {"image": "alpine"}
capability_above_ceiling {"capabilities": ["gpu"]}
egress_above_ceiling {"net": "open"}
credential_not_allowed {"credential_env": ["AWS_SECRET_ACCESS_KEY"]}
backend_not_allowed {"backend": "docker"}
invalid_override {"sudo": true}
EOF
  [ "$(sessions_count)" -eq 0 ]
  # A recipe for another pool is a usage error; an unknown pool is not found.
  printf '{"pool": "other"}\n' > other.json
  run "$CORDON" pool place ci --recipe other.json
  [ "$status" -eq 2 ]
  run "$CORDON" pool place nope
  [ "$status" -eq 3 ]
  run "$CORDON" pool verify --json
  [ "$status" -eq 0 ]
  [ "$(jq -r .receipts <<<"$output")" = 7 ]
  # The store's gc keeps every body, overrides, effective manifest and receipt the chain names.
  run "$CORDON" cas prune
  [ "$status" -eq 0 ]
  [[ "$output" == *"removed 0 blobs"* ]]
  run "$CORDON" pool verify
  [ "$status" -eq 0 ]
}

@test "run --pool and session create --pool: refusals create no session, placements run" {
  ns_or_skip
  "$CORDON" pool register pool.json
  printf '{"pool": "ci", "overrides": {"net": "open"}}\n' > wide.json
  printf '{"pool": "ci", "overrides": {"credential_env": ["HOME"]}}\n' > cred.json
  for recipe in wide.json cred.json; do
    run "$CORDON" run --pool ci --recipe "$recipe" -- touch /workspace/made
    [ "$status" -eq 4 ]
    run "$CORDON" session create --pool ci --recipe "$recipe"
    [ "$status" -eq 4 ]
  done
  [ "$(sessions_count)" -eq 0 ]
  [ "$(grep -c '"event":"pool.override_refused"' .cordon/audit/audit-000001.jsonl)" -eq 4 ]
  run "$CORDON" run --pool ci --recipe ok.json -- sh -c 'echo "$STAGE $LANG"'
  [ "$status" -eq 0 ]
  [ "$output" = "lint C" ]
  printf '{"pool": "ci", "overrides": {"credential_env": ["GITHUB_TOKEN"]}}\n' > token.json
  GITHUB_TOKEN=t0ken run "$CORDON" run --pool ci --recipe token.json -- sh -c 'echo "$GITHUB_TOKEN"'
  [ "$output" = t0ken ]
  # The credential's value is in no stored body, receipt or log line.
  ! grep -rq t0ken .cordon/cas .cordon/audit
  run "$CORDON" run --pool ci --recipe token.json -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"GITHUB_TOKEN is not set"* ]]
  # Manifest options do not mix with --pool.
  run "$CORDON" run --pool ci --net open -- true
  [ "$status" -eq 125 ]
  run "$CORDON" session create --pool ci --net open
  [ "$status" -eq 2 ]
  run "$CORDON" session create --pool ci --json
  [ "$status" -eq 0 ]
  [ "$(jq -r .pool <<<"$output")" = ci ]
  [ "$(sessions_count)" -eq 1 ]
  run "$CORDON" pool verify
  [ "$status" -eq 0 ]
}

@test "two projects with the same pool, recipe and key seal byte-identical placement receipts" {
  other=$(mktemp -d "${TMPDIR:-/tmp}/cordon-pool-other.XXXXXX")
  mkdir -p "$other/.cordon"
  cp pool.json ok.json "$other/"
  "$CORDON" pool register pool.json
  "$CORDON" pool place ci --recipe ok.json --out "$PROJECT/a.json"
  (cd "$other" && CORDON_PROJECT=$other "$CORDON" pool register pool.json &&
    CORDON_PROJECT=$other "$CORDON" pool place ci --recipe ok.json --out "$PROJECT/b.json")
  cmp a.json b.json
  # The audit chains differ (each bound to its project); the receipts do not.
  ! cmp -s .cordon/audit/audit-000001.jsonl "$other/.cordon/audit/audit-000001.jsonl"
  rm -rf "$other"
}

@test "pool verify fails on a flipped byte in a stored body, a receipt, an effective manifest, or a deleted audit line" {
  "$CORDON" pool register pool.json
  run "$CORDON" pool place ci --recipe ok.json --json
  receipt=$(jq -r .receipt <<<"$output")
  effective=$(jq -r .effective_manifest_hash <<<"$output")
  hash=$(jq -r .pool_hash <<<"$output")
  run "$CORDON" pool verify
  [ "$status" -eq 0 ]
  cp -a .cordon saved
  for digest in "$hash" "$receipt" "$effective"; do
    rm -rf .cordon && cp -a saved .cordon
    flip "$(blob "$digest")" 20
    run "$CORDON" pool verify
    [ "$status" -eq 1 ]
    [[ "$output" == *"$digest"* ]]
  done
  # A deleted audit line (the registration): the chain breaks.
  rm -rf .cordon && cp -a saved .cordon
  sed -i 1d .cordon/audit/audit-000001.jsonl
  run "$CORDON" pool verify
  [ "$status" -eq 1 ]
  [[ "$output" == *"audit chain"* ]]
  run "$CORDON" pool verify --json
  [ "$status" -eq 1 ]
  [ "$(jq -c '[.ok, .verdict, .exit_code, .problems[0].object]' <<<"$output")" = '[false,"failed",1,"audit chain"]' ]
  rm -rf .cordon && cp -a saved .cordon
  run "$CORDON" pool verify --json
  [ "$status" -eq 0 ]
  [ "$(jq -c '[.ok, .verdict, .exit_code, (.problems | type)]' <<<"$output")" = '[true,"verified",0,"array"]' ]
}
