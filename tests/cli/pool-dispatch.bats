#!/usr/bin/env bats
# Pools, the dispatch side (issue 23, items 4-6): the concurrency ceiling holds across processes
# (refused with 4, or waited for with --wait), frees when a holder dies or a session ends;
# workers enrol, claim dispatches with signed receipts that `pool verify` re-checks offline and
# attributes to the enrolled key; warm slots serve a dispatch once, and a drifted one is
# quarantined while the dispatch runs cold. $CORDON is the binary under test.

bats_require_minimum_version 1.5.0

load pool-common

setup() {
  pool_project_enter pool-dispatch
  pool_spec ci 2 C > pool.json
}

teardown() {
  pool_project_leave
}

# pool_spec NAME MAX_CONCURRENCY LANG: a pool on ns whose body changes with LANG.
pool_spec() { pool_spec_exposing '"env"' "$@"; }

# The slots of pool $1 held by live processes or sessions right now: their records.
held() { find "$PROJECT/.cordon/pools/slots/$1" -name '*.json' 2>/dev/null | wc -l; }

# Wait (up to 20 s) until pool $1 has $2 slot records.
wait_held() {
  local i
  for i in $(seq 200); do
    [ "$(held "$1")" -ge "$2" ] && return 0
    sleep 0.1
  done
  echo "pool $1 never held $2 slots ($(held "$1"))" >&2
  return 1
}

# The details' member $2 of the first audit entry of event $1.
audit_member() {
  "$CORDON" audit show --json 2>/dev/null | python3 -c '
import json, sys
event, name = sys.argv[1], sys.argv[2]
for line in sys.stdin:
    e = json.loads(line)
    if e["event"] == event:
        d = e["details"]
        d = json.loads(d) if isinstance(d, str) else d
        print(d[name])
        break
' "$1" "$2"
}

@test "--help of worker, pool submit, pool warm and run name the dispatch side" {
  run "$CORDON" worker --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"cordon worker enrol --pool NAME"* && "$output" == *"--once"* ]]
  run "$CORDON" pool submit --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"cordon pool submit NAME"* ]]
  run "$CORDON" pool warm --help
  [ "$status" -eq 0 ]
  [[ "$output" == *"--slots N"* && "$output" == *"quarantine"* ]]
  run "$CORDON" run --help
  [[ "$output" == *"--wait SECONDS"* ]]
  run "$CORDON" --help
  [[ "$output" == *"worker enrol|run"* ]]
}

@test "usage errors: worker run without --pool, pool warm without --slots, --wait without --pool" {
  run "$CORDON" worker run
  [ "$status" -eq 2 ]
  run "$CORDON" pool warm ci
  [ "$status" -eq 2 ]
  [[ "$output" == *"--slots"* ]]
  run "$CORDON" pool submit ci
  [ "$status" -eq 2 ]
  run "$CORDON" run --wait 3 -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"--wait needs --pool"* ]]
  run "$CORDON" pool submit nosuch -- true
  [ "$status" -eq 3 ]
}

@test "the ceiling holds under parallel placements: 2 of 5 run, 3 are refused with 4" {
  ns_or_skip
  "$CORDON" pool register pool.json >/dev/null
  local pids=() i ok=0 refused=0
  for i in 1 2 3 4 5; do
    "$CORDON" run --pool ci -- sleep 8 >"out.$i" 2>&1 &
    pids+=($!)
  done
  BACKGROUND="${pids[*]}"
  for i in 0 1 2 3 4; do
    local rc=0
    wait "${pids[$i]}" || rc=$?
    [ "$rc" -eq 0 ] && ok=$((ok + 1))
    [ "$rc" -eq 4 ] && refused=$((refused + 1))
  done
  cat out.*
  [ "$ok" -eq 2 ]
  [ "$refused" -eq 3 ]
  grep -q "concurrency ceiling (2 of 2 slots held)" out.*
  [ "$(held ci)" -eq 0 ]
}

@test "--wait waits for a slot: four runs in a pool of two all run, in two waves" {
  ns_or_skip
  "$CORDON" pool register pool.json >/dev/null
  local pids=() i start end
  start=$(date +%s.%N)
  for i in 1 2 3 4; do
    "$CORDON" run --pool ci --wait 120 -- sleep 1.5 >/dev/null 2>&1 &
    pids+=($!)
  done
  BACKGROUND="${pids[*]}"
  for i in 0 1 2 3; do wait "${pids[$i]}"; done
  end=$(date +%s.%N)
  # Two at a time: at least two sleeps end to end.
  python3 -c "import sys; sys.exit(0 if $end - $start >= 3.0 else 1)"
}

@test "a holder that dies frees its slot; a session holds its slot until destroyed" {
  ns_or_skip
  pool_spec one 1 C > one.json
  "$CORDON" pool register one.json >/dev/null
  "$CORDON" run --pool one -- sleep 60 >/dev/null 2>&1 &
  BACKGROUND=$!
  wait_held one 1
  run "$CORDON" run --pool one -- true
  [ "$status" -eq 4 ]
  kill -9 "$BACKGROUND"
  wait "$BACKGROUND" || true
  # Nobody cleaned up: the dead holder's lock went with it.
  run "$CORDON" run --pool one -- echo freed
  [ "$status" -eq 0 ]
  [ "$output" = "freed" ]
  # A session outlives the process that created it, and keeps the slot.
  id=$("$CORDON" session create --pool one)
  run "$CORDON" run --pool one -- true
  [ "$status" -eq 4 ]
  run "$CORDON" session create --pool one --wait 0.3
  [ "$status" -eq 4 ]
  "$CORDON" session destroy "$id"
  run "$CORDON" run --pool one -- echo again
  [ "$status" -eq 0 ]
}

@test "a worker's claims verify offline and are attributed to its enrolled key" {
  ns_or_skip
  "$CORDON" pool register pool.json >/dev/null
  d1=$("$CORDON" pool submit ci -- echo one)
  d2=$("$CORDON" pool submit ci -- sh -c 'exit 3')
  [ "$d1" != "$d2" ]
  # Not enrolled: nothing is claimed.
  run "$CORDON" worker run --pool ci --once
  [ "$status" -eq 4 ]
  [[ "$output" == *"not enrolled"* ]]
  [ "$(ls .cordon/pools/queue/ci/pending | wc -l)" -eq 2 ]
  kid=$("$CORDON" worker enrol --pool ci --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["kid"])')
  run "$CORDON" worker run --pool ci --once
  [ "$status" -eq 0 ]
  [[ "$output" == *"dispatch $d1: ran cold, exit 0"* ]]
  run "$CORDON" worker run --pool ci --once --json
  [ "$status" -eq 0 ]
  [[ "$output" == *"\"exit_code\":3"* && "$output" == *"\"kid\":\"$kid\""* ]]
  run "$CORDON" worker run --pool ci --once
  [ "$status" -eq 0 ]
  [ -f ".cordon/pools/queue/ci/done/$d1.json" ]
  grep -q '"stdout":"one\\n"' ".cordon/pools/queue/ci/done/$d1.json"
  run "$CORDON" pool verify
  [ "$status" -eq 0 ]
  # `audit verify` re-checks the pool records the chain names, too.
  run "$CORDON" audit verify
  [ "$status" -eq 0 ]
  [[ "$output" == *"pool records verified"* ]]
  # The claim names the enrolled key, and its receipt is signed by it.
  [ "$(audit_member worker.claimed kid)" = "$kid" ]
  [ "$(audit_member worker.claimed dispatch_id)" = "$d1" ]
  claim=$(audit_member worker.claimed receipt)
  python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).read()); assert d["signature"]["kid"]==sys.argv[2]; assert d["body"]["dispatch_id"]==sys.argv[3]' "$(blob "$claim")" "$kid" "$d1"
  # One flipped byte of the claim receipt breaks verification, naming the claim.
  cp "$(blob "$claim")" claim.bak
  flip "$(blob "$claim")" 40
  run "$CORDON" pool verify
  [ "$status" -eq 1 ]
  [[ "$output" == *"worker.claimed"* ]]
  run "$CORDON" audit verify
  [ "$status" -eq 1 ]
  [[ "$output" == *"audit chain intact"*"pool record"*"worker.claimed"* ]]
  run "$CORDON" audit verify --json
  [ "$status" -eq 1 ]
  python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["problem"]=="pool_record" and not d["ok"], d' <<<"$output"
  cp claim.bak "$(blob "$claim")"
  run "$CORDON" pool verify
  [ "$status" -eq 0 ]
  # One flipped byte of the recorded effective manifest breaks it too.
  flip "$(blob "$(audit_member worker.claimed effective_manifest_hash)")" 5
  run "$CORDON" pool verify
  [ "$status" -eq 1 ]
  run "$CORDON" audit verify
  [ "$status" -eq 1 ]
}

@test "a worker must enrol again after the pool is updated; dispatches are claimed once" {
  ns_or_skip
  "$CORDON" pool register pool.json >/dev/null
  "$CORDON" worker enrol --pool ci >/dev/null
  pool_spec ci 2 C.UTF-8 > pool.json
  "$CORDON" pool register pool.json >/dev/null
  "$CORDON" pool submit ci -- true >/dev/null
  run "$CORDON" worker run --pool ci --once
  [ "$status" -eq 4 ]
  "$CORDON" worker enrol --pool ci >/dev/null
  # Two workers at once, one dispatch: one runs it, the other finds nothing.
  "$CORDON" worker run --pool ci --once >w1 2>&1 &
  "$CORDON" worker run --pool ci --once >w2 2>&1 &
  wait
  [ "$(cat w1 w2 | grep -c 'ran cold')" -eq 1 ]
  [ "$(ls .cordon/pools/queue/ci/done | wc -l)" -eq 1 ]
  run "$CORDON" pool verify
  [ "$status" -eq 0 ]
}

@test "a warm slot serves one dispatch, once, and is gone afterwards" {
  ns_or_skip
  "$CORDON" pool register pool.json >/dev/null
  run "$CORDON" pool warm ci --slots 1
  [ "$status" -eq 0 ]
  warm=$output
  [ -f ".cordon/pools/warm/ci/ready/$warm.json" ]
  "$CORDON" session list | grep -q "$warm"
  run "$CORDON" run --pool ci -- echo served
  [ "$status" -eq 0 ]
  [ "$output" = "served" ]
  [ -f ".cordon/pools/warm/ci/used/$warm.json" ]
  [ -z "$(ls .cordon/pools/warm/ci/ready)" ]
  # Used once: the session is destroyed after the dispatch (by a detached process).
  local i
  for i in $(seq 200); do
    "$CORDON" session list | grep -q "$warm" || break
    sleep 0.1
  done
  ! "$CORDON" session list | grep -q "$warm"
  run "$CORDON" run --pool ci -- echo cold
  [ "$status" -eq 0 ]
  [ "$(ls .cordon/pools/warm/ci/used | wc -l)" -eq 1 ]
}

@test "a drifted warm slot is quarantined with a receipt and the dispatch runs cold" {
  ns_or_skip
  "$CORDON" pool register pool.json >/dev/null
  warm=$("$CORDON" pool warm ci --slots 1)
  pool_spec ci 2 C.UTF-8 > pool.json
  "$CORDON" pool register pool.json >/dev/null
  run "$CORDON" run --pool ci -- sh -c 'echo $LANG'
  [ "$status" -eq 0 ]
  [[ "$output" == *"warm slot $warm of pool ci drifted"* ]]
  [[ "$output" == *"C.UTF-8" ]]
  [ -f ".cordon/pools/warm/ci/quarantine/$warm.json" ]
  [ -z "$(ls .cordon/pools/warm/ci/used)" ]
  ! "$CORDON" session list | grep -q "$warm"
  [ "$(audit_member pool.warm_quarantined session)" = "$warm" ]
  run "$CORDON" pool verify
  [ "$status" -eq 0 ]
}

@test "from inside a pool's sandbox, the slot table and the queue cannot be seen or touched" {
  ns_or_skip
  "$CORDON" pool register pool.json >/dev/null
  "$CORDON" pool submit ci -- true >/dev/null
  [ -d "$PROJECT/.cordon/pools/slots/ci" ] || "$CORDON" run --pool ci -- true
  run "$CORDON" run --pool ci -- ls "$PROJECT/.cordon/pools/queue/ci/pending"
  [ "$status" -ne 0 ]
  run "$CORDON" run --pool ci -- sh -c "echo '{\"pid\":1,\"session\":null}' > $PROJECT/.cordon/pools/slots/ci/1.json"
  [ "$status" -ne 0 ]
  [ ! -e "$PROJECT/.cordon/pools/slots/ci/1.json" ]
}

@test "a dispatch tampered with in the queue is refused at its claim and never runs" {
  ns_or_skip
  "$CORDON" pool register pool.json >/dev/null
  "$CORDON" worker enrol --pool ci >/dev/null
  id=$("$CORDON" pool submit ci -- echo harmless)
  sed -i 's/harmless/harmful!/' .cordon/pools/queue/ci/pending/*"$id".json
  run "$CORDON" worker run --pool ci --once
  [ "$status" -eq 1 ]
  [[ "$output" == *"dispatch $id hashes to"* ]]
  [ ! -e ".cordon/pools/queue/ci/done/$id.json" ]
  run "$CORDON" audit show
  [[ "$output" != *"worker.claimed"* ]]
}

@test "the queue through cordon serve: a dispatch submitted over HTTP is claimed by a worker; its state and result read back" {
  ns_or_skip
  command -v curl >/dev/null || skip "curl is not installed"
  "$CORDON" pool register pool.json >/dev/null
  "$CORDON" worker enrol --pool ci >/dev/null
  "$CORDON" serve >serve.out 2>serve.err &
  BACKGROUND="$BACKGROUND $!"
  local i
  for i in $(seq 200); do
    [ -S .cordon/serve.sock ] && grep -q "listening on" serve.out && break
    sleep 0.1
  done
  api() { curl -sS --unix-socket .cordon/serve.sock -w '\n%{http_code}' "$@"; }
  # Bad bodies: 400 with a reason; an unknown pool: 404; nothing is queued.
  run api -X POST -d '{"argv": []}' http://d/v1/pools/ci/dispatches
  [[ "$output" == *"argv"* && "${lines[-1]}" = 400 ]]
  run api -X POST -d '{"argv": ["true"], "recipe": {"pool": "other"}}' http://d/v1/pools/ci/dispatches
  [[ "$output" == *"names pool other"* && "${lines[-1]}" = 400 ]]
  run api -X POST -d '{"argv": ["true"]}' http://d/v1/pools/nosuch/dispatches
  [ "${lines[-1]}" = 404 ]
  [ -z "$(ls .cordon/pools/queue/ci/pending 2>/dev/null)" ]
  # A good one: 201 and its id; pending until a worker claims it; then done with its result.
  run api -X POST -d '{"argv": ["sh", "-c", "echo served; exit 5"]}' http://d/v1/pools/ci/dispatches
  [ "${lines[-1]}" = 201 ]
  id=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["dispatch_id"])' "${lines[0]}")
  run api "http://d/v1/pools/ci/dispatches?id=$id"
  [ "${lines[-1]}" = 200 ] && [[ "${lines[0]}" == *'"state":"pending"'* ]]
  run "$CORDON" worker run --pool ci --once
  [ "$status" -eq 0 ]
  [[ "$output" == *"dispatch $id"*"exit 5"* ]]
  run api "http://d/v1/pools/ci/dispatches?id=$id"
  [ "${lines[-1]}" = 200 ]
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["state"]=="done", d; assert "served" in json.dumps(d["result"]), d' "${lines[0]}"
  run api "http://d/v1/pools/ci/dispatches?id=nothex"
  [ "${lines[-1]}" = 400 ]
  run api "http://d/v1/pools/ci/dispatches?id=$(printf '0%.0s' $(seq 64))"
  [ "${lines[-1]}" = 404 ]
  run "$CORDON" pool verify
  [ "$status" -eq 0 ]
}
