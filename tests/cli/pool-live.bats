#!/usr/bin/env bats
# Pools (issue 23, the rest): `pool show` reports live state (slots in use of max_concurrency,
# pending dispatches, warm sessions ready by effective manifest hash); a pool's read_only and
# hidden paths apply to the workspace a dispatch brings (`--workspace DIR`), and are enforced
# (attacks from inside fail); `pool verify` checks each entry's place in the HMAC chain and names
# the first break, whether a receipt or an audit line was tampered with. $CORDON is the binary
# under test; each test has its own project, key directory and state home.

bats_require_minimum_version 1.5.0

load pool-common

setup() {
  pool_project_enter pool-live
  pool_spec ci 2 C > pool.json
}

teardown() {
  pool_project_leave
}

# pool_spec NAME MAX_CONCURRENCY LANG [TEMPLATE_EXTRA]: a pool on ns whose body changes with
# LANG, read_only and hidden exposed besides env.
pool_spec() { pool_spec_exposing '"env", "read_only", "hidden"' "$@"; }

live() { "$CORDON" pool show ci --json | jq -c ".live | $1"; }

@test "pool show: live state of an idle pool, and looking creates nothing" {
  "$CORDON" pool register pool.json >/dev/null
  run "$CORDON" pool show ci --json
  [ "$status" -eq 0 ]
  [ "$(jq -c .live <<<"$output")" = '{"max_concurrency":2,"pending_dispatches":0,"slots_held_by_sessions":0,"slots_in_use":0,"warm":[],"warm_drifted":0,"warm_ready":0}' ]
  run "$CORDON" pool show ci
  [ "$status" -eq 0 ]
  [[ "$output" == *"slots_in_use               0/2 (0 held by sessions)"* ]]
  [[ "$output" == *"pending_dispatches         0"* ]]
  [[ "$output" == *"warm_ready                 0"* ]]
  [ ! -e .cordon/pools/warm ] && [ ! -e .cordon/pools/queue ] && [ ! -e .cordon/pools/slots ]
}

@test "pool show: pending dispatches, slots in use and warm sessions by effective manifest" {
  ns_or_skip
  "$CORDON" pool register pool.json >/dev/null
  "$CORDON" pool submit ci -- true >/dev/null
  "$CORDON" pool submit ci -- false >/dev/null
  [ "$(live .pending_dispatches)" = 2 ]
  # A session made with --pool holds a slot until it is destroyed.
  sid=$("$CORDON" session create --pool ci)
  [ "$(live '[.slots_in_use, .slots_held_by_sessions]')" = '[1,1]' ]
  # A run holding the other slot while its command sleeps.
  "$CORDON" run --pool ci -- sleep 30 >/dev/null 2>&1 &
  BACKGROUND=$!
  for i in $(seq 200); do [ "$(live .slots_in_use)" = 2 ] && break; sleep 0.1; done
  [ "$(live '[.slots_in_use, .slots_held_by_sessions]')" = '[2,1]' ]
  run "$CORDON" pool show ci
  [[ "$output" == *"slots_in_use               2/2 (1 held by sessions)"* ]]
  kill -9 $BACKGROUND
  wait $BACKGROUND 2>/dev/null || true
  BACKGROUND=
  "$CORDON" session destroy "$sid" >/dev/null
  [ "$(live .slots_in_use)" = 0 ]
  # Warm sessions, grouped by the effective manifest they serve.
  printf '{"pool": "ci", "overrides": {"env": {"STAGE": "lint"}}}\n' > lint.json
  lint=$("$CORDON" pool warm ci --slots 2 --recipe lint.json --json | jq -r .effective_manifest_hash)
  plain=$("$CORDON" pool warm ci --slots 1 --json | jq -r .effective_manifest_hash)
  [ "$lint" != "$plain" ]
  [ "$(live .warm_ready)" = 3 ]
  [ "$(live "[.warm[] | select(.effective_manifest_hash == \"$lint\") | .sessions, .backend, .drifted]")" = '[2,"ns",false]' ]
  [ "$(live "[.warm[] | select(.effective_manifest_hash == \"$plain\") | .sessions]")" = '[1]' ]
  run "$CORDON" pool show ci
  [[ "$output" == *"warm_ready                 3"* ]]
  [[ "$output" == *"  $lint ns 2"* ]]
  # One is used: two left. The pool is updated: the rest are drifted (the next dispatch
  # quarantines them).
  "$CORDON" run --pool ci -- true
  [ "$(live '[.warm_ready, .warm_drifted]')" = '[2,0]' ]
  pool_spec ci 2 C.UTF-8 > pool2.json
  "$CORDON" pool register pool2.json >/dev/null
  [ "$(live '[.warm_ready, .warm_drifted, (.warm | map(.drifted) | all)]')" = '[0,2,true]' ]
  run "$CORDON" pool show ci
  [[ "$output" == *"warm_ready                 0 (and 2 drifted)"* ]]
  [[ "$output" == *"$lint ns 2 drifted"* ]]
  run "$CORDON" run --pool ci -- true
  [ "$status" -eq 0 ]
  [ "$(live '[.warm_ready, .warm_drifted, .warm]')" = '[0,0,[]]' ]
}

@test "pool show: no such pool is 3, no name is 2" {
  run "$CORDON" pool show nope --json
  [ "$status" -eq 3 ]
  run "$CORDON" pool show
  [ "$status" -eq 2 ]
}

# A project with a secret, documentation and source.
make_project() {
  mkdir -p work/secret work/docs work/src
  echo 'hunter2' > work/secret/key
  echo 'read me' > work/docs/README
  echo 'int main;' > work/src/main.c
}

@test "a pool's hidden and read_only paths apply to the workspace given: attacks from inside fail" {
  ns_or_skip
  pool_spec ci 2 C ', "hidden": ["secret"], "read_only": ["docs"]' > pool.json
  "$CORDON" pool register pool.json >/dev/null
  make_project
  # Readable and writable where the pool leaves it so.
  run "$CORDON" run --pool ci --workspace work -- sh -c 'cat docs/README && echo ok > src/out'
  [ "$status" -eq 0 ]
  [[ "$output" == *"read me"* ]]
  [ "$(cat work/src/out)" = ok ]
  # The hidden path: not readable, not listable, its content nowhere.
  run "$CORDON" run --pool ci --workspace work -- cat secret/key
  [ "$status" -ne 0 ]
  [[ "$output" != *hunter2* ]]
  run "$CORDON" run --pool ci --workspace work -- sh -c 'ls -la secret; cat secret/* ; grep -r hunter2 . /workspace 2>/dev/null'
  [[ "$output" != *hunter2* ]]
  # The read-only path: no write, no delete, no rename, no chmod.
  run "$CORDON" run --pool ci --workspace work -- sh -c 'echo x > docs/README'
  [ "$status" -ne 0 ]
  run "$CORDON" run --pool ci --workspace work -- rm -f docs/README
  [ "$status" -ne 0 ]
  run "$CORDON" run --pool ci --workspace work -- mv docs/README src/stolen
  [ "$status" -ne 0 ]
  run "$CORDON" run --pool ci --workspace work -- chmod 777 docs/README
  [ "$status" -ne 0 ]
  run "$CORDON" run --pool ci --workspace work -- touch docs/new
  [ "$status" -ne 0 ]
  # (mv may leave a copy in src: reading is allowed; the original stays.)
  [ "$(cat work/docs/README)" = 'read me' ]
  [ ! -e work/docs/new ]
  # A recipe can only add protections: src read-only too.
  printf '{"pool": "ci", "overrides": {"read_only": ["src"]}}\n' > ro.json
  run "$CORDON" run --pool ci --recipe ro.json --workspace work -- sh -c 'echo y > src/out'
  [ "$status" -ne 0 ]
  [ "$(cat work/src/out)" = ok ]
  run "$CORDON" run --pool ci --recipe ro.json --workspace work -- cat secret/key
  [ "$status" -ne 0 ]
  [[ "$output" != *hunter2* ]]
  # The same through session create --pool.
  sid=$("$CORDON" session create --pool ci --workspace work)
  run "$CORDON" session exec "$sid" -- cat secret/key
  [ "$status" -ne 0 ]
  [[ "$output" != *hunter2* ]]
  run "$CORDON" session exec "$sid" -- sh -c 'echo x > docs/README'
  [ "$status" -ne 0 ]
  "$CORDON" session destroy "$sid" >/dev/null
  [ "$(cat work/docs/README)" = 'read me' ]
  [ "$(cat work/secret/key)" = hunter2 ]
}

@test "without --workspace the pool's paths fail closed, naming --workspace; other options stay refused" {
  ns_or_skip
  pool_spec ci 2 C ', "hidden": ["secret"]' > pool.json
  "$CORDON" pool register pool.json >/dev/null
  run "$CORDON" run --pool ci -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"secret"*"--workspace DIR"* ]]
  run "$CORDON" session create --pool ci
  [ "$status" -ne 0 ]
  [[ "$output" == *"--workspace DIR"* ]]
  [ -z "$("$CORDON" session list)" ]
  # --workspace is the one manifest option a pooled dispatch takes.
  make_project
  run "$CORDON" run --pool ci --workspace work --ro src -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"with --pool"* ]]
  run "$CORDON" run --pool ci --workspace work --net open -- true
  [ "$status" -eq 125 ]
  # A missing hidden path in the workspace is refused, not ignored.
  rm -rf work/secret
  run "$CORDON" run --pool ci --workspace work -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *secret* ]]
}

@test "a dispatch with --workspace is never served by a warm session" {
  ns_or_skip
  "$CORDON" pool register pool.json >/dev/null
  make_project
  warm=$("$CORDON" pool warm ci --slots 1)
  run "$CORDON" run --pool ci --workspace work -- sh -c 'cat src/main.c'
  [ "$status" -eq 0 ]
  [[ "$output" == *"int main;"* ]]
  [ -f ".cordon/pools/warm/ci/ready/$warm.json" ]
  [ "$(live .warm_ready)" = 1 ]
}

# The index (1-based) of the first audit entry of event $1.
entry_of() {
  "$CORDON" audit show --json 2>/dev/null | python3 -c '
import json, sys
for i, line in enumerate(sys.stdin, 1):
    if json.loads(line)["event"] == sys.argv[1]:
        print(i); break' "$1"
}

# The details' member $2 of audit entry $1 (1-based).
member_of() {
  sed -n "$1p" .cordon/audit/audit-000001.jsonl | jq -r ".details.$2 // (.details | fromjson? | .$2)"
}

@test "pool verify names the first break: a tampered receipt, a tampered audit line" {
  ns_or_skip
  "$CORDON" pool register pool.json >/dev/null
  printf '{"pool": "ci", "overrides": {"env": {"STAGE": "a"}}}\n' > a.json
  printf '{"pool": "ci", "overrides": {"env": {"STAGE": "b"}}}\n' > b.json
  "$CORDON" pool place ci --recipe a.json >/dev/null
  "$CORDON" pool place ci --recipe b.json >/dev/null
  run "$CORDON" pool verify
  [ "$status" -eq 0 ]
  log=.cordon/audit/audit-000001.jsonl
  [ "$(wc -l < "$log")" -eq 3 ]
  first=$(member_of 2 receipt)
  second=$(member_of 3 receipt)
  [ -f "$(blob "$first")" ] && [ -f "$(blob "$second")" ]
  cp -a .cordon saved

  # A tampered receipt: entry 2 names it.
  flip "$(blob "$first")" 30
  run "$CORDON" pool verify
  [ "$status" -eq 1 ]
  [[ "$output" == *"audit entry 2 (pool.placed): receipt $first"* ]]

  # A tampered audit line (its details edited, the line still well-formed JSON): the chain
  # breaks at that entry, and nothing after it is trusted.
  rm -rf .cordon && cp -a saved .cordon
  sed -i '3s/"chosen_backend":"ns"/"chosen_backend":"nt"/' "$log"
  ! cmp -s "$log" saved/audit/audit-000001.jsonl
  run "$CORDON" pool verify
  [ "$status" -eq 1 ]
  [[ "$output" == *"audit chain: entry 3 "*"line 3"* ]]
  run "$CORDON" pool verify --json
  [ "$status" -eq 1 ]
  [ "$(jq -r '.problems[0].object' <<<"$output")" = "audit chain" ]

  # Both: the first break is reported, whichever kind it is.
  flip "$(blob "$first")" 30
  run "$CORDON" pool verify
  [ "$status" -eq 1 ]
  [[ "$output" == *"audit entry 2 (pool.placed): receipt $first"* ]]
  [[ "$output" != *"audit chain"* ]]
  rm -rf .cordon && cp -a saved .cordon
  sed -i '2s/"chosen_backend":"ns"/"chosen_backend":"nt"/' "$log"
  flip "$(blob "$second")" 30
  run "$CORDON" pool verify
  [ "$status" -eq 1 ]
  [[ "$output" == *"audit chain: entry 2 "* ]]
  [[ "$output" != *"$second"* ]]

  # Restored, it verifies again.
  rm -rf .cordon && cp -a saved .cordon
  run "$CORDON" pool verify
  [ "$status" -eq 0 ]
}
