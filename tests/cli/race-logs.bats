#!/usr/bin/env bats
# `cordon race`'s logs: each candidate's and judge's stdout and stderr kept (bounded, truncation
# marked), written by --logs, carried by --json, bound by digest in the receipt and printed live,
# prefixed, by --stream. On the worktree backend (fast); one race on ns for the streamed pipes.

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-race-logs.XXXXXX")
  KEYS=$(mktemp -d "${TMPDIR:-/tmp}/cordon-race-logs-keys.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  export CORDON_KEY_DIR=$KEYS/keys
  cd "$PROJECT"
  mkdir tree
  printf 'alpha\n' > tree/a
  "$CORDON" key init >/dev/null
  BASE=$("$CORDON" snapshot take tree)
}

teardown() {
  cd /
  rm -rf "$PROJECT" "$KEYS"
}

# Candidate i prints two lines on stdout and one on stderr; the judge one line on each.
CMD=(sh -c 'i=$CORDON_CANDIDATE_INDEX; echo "out one $i"; echo "out two $i"; echo "err $i" >&2')
JUDGE=(--judge sh --judge -c --judge 'echo "judged $CORDON_CANDIDATE_INDEX"; echo "judge err $CORDON_CANDIDATE_INDEX" >&2')

race() { "$CORDON" race --backend worktree --base "$BASE" "$@"; }

@test "race --logs: every candidate's and judge's stdout and stderr, in files of DIR (0700)" {
  run race --k 2 --out r.json --logs logs/here "${JUDGE[@]}" -- "${CMD[@]}"
  [ "$status" -eq 0 ]
  [ "$(stat -c %a logs/here)" = 700 ]
  for i in 0 1; do
    [ "$(cat logs/here/candidate-$i.stdout)" = "$(printf 'out one %s\nout two %s' $i $i)" ]
    [ "$(cat logs/here/candidate-$i.stderr)" = "err $i" ]
    [ "$(cat logs/here/candidate-$i.judge.stdout)" = "judged $i" ]
    [ "$(cat logs/here/candidate-$i.judge.stderr)" = "judge err $i" ]
    [ "$(stat -c %a logs/here/candidate-$i.stdout)" = 600 ]
  done
  grep -q '"truncated": false' logs/here/logs.json
  # No temp file left beside them.
  [ "$(ls -A logs/here | wc -l)" -eq 9 ]
}

@test "race --log-limit: a candidate printing more than the bound keeps the first bytes, marked truncated" {
  run race --k 1 --out r.json --logs L --log-limit 1K --json -- sh -c 'head -c 5000 /dev/zero | tr "\0" x; echo small >&2'
  [ "$status" -eq 0 ]
  [ "$(stat -c %s L/candidate-0.stdout)" -eq 1024 ]
  [ "$(head -c 1024 /dev/zero | tr '\0' x)" = "$(cat L/candidate-0.stdout)" ]
  python3 - "$output" <<'PY'
import json, sys
c = json.loads(sys.argv[1])["candidates"][0]["logs"]
assert c["stdout"]["truncated"] is True and c["stdout"]["bytes"] == 1024 and c["stdout"]["total"] == 5000, c
assert c["stderr"]["truncated"] is False and c["stderr"]["tail"] == "small\n", c
PY
  tr -d ' \n' < r.json | grep -q '"stdout":{"bytes":1024,"sha256":"[0-9a-f]*","truncated":true}'
  run race --k 1 --out r.json --log-limit 0 -- true
  [ "$status" -eq 2 ]
  [[ "$output" == *"--log-limit"* ]]
}

@test "race --json: each candidate's log tails (the last 4K of each stream) with truncated flags" {
  run race --k 2 --out r.json --json "${JUDGE[@]}" -- sh -c 'seq 1 3000; echo "err $CORDON_CANDIDATE_INDEX" >&2'
  [ "$status" -eq 0 ]
  python3 - "$output" <<'PY'
import json, sys
doc = json.loads(sys.argv[1])
for i, c in enumerate(doc["candidates"]):
    logs = c["logs"]
    assert set(logs) == {"stdout", "stderr", "judge_stdout", "judge_stderr"}, logs
    out = logs["stdout"]
    assert out["tail_bytes"] == 4096 and len(out["tail"]) == 4096 and out["tail"].endswith("2999\n3000\n"), out
    assert out["truncated"] is False and out["bytes"] == out["total"] > 4096
    assert logs["stderr"]["tail"] == "err %d\n" % i
    assert logs["judge_stdout"]["tail"] == "judged %d\n" % i
PY
}

@test "race: the receipt binds the logs' digests (sha256sum of the files), and verify checks their form" {
  run race --k 2 --out r.json --logs L "${JUDGE[@]}" -- "${CMD[@]}"
  [ "$status" -eq 0 ]
  body=$(tr -d ' \n' < r.json)
  for i in 0 1; do
    for s in stdout stderr judge.stdout judge.stderr; do
      d=$(sha256sum < L/candidate-$i.$s | cut -c1-64)
      [[ "$body" == *"\"sha256\":\"$d\""* ]]
    done
  done
  [[ "$body" == *'"logs":{"judge_stderr":{"bytes":'* ]]
  run "$CORDON" receipt verify r.json
  [[ "$output" != *"logs"* ]]
  [[ "$output" == *"winner candidate-0"* ]]
}

@test "race: two identical races of a deterministic command give byte-identical receipts (logs included)" {
  race --k 3 --out one.json "${JUDGE[@]}" -- "${CMD[@]}" >/dev/null
  race --k 3 --out two.json --stream "${JUDGE[@]}" -- "${CMD[@]}" >/dev/null 2>&1
  cmp one.json two.json
  grep -q '"logs"' one.json
}

@test "race --stream: every line whole and prefixed by its candidate (judge lines marked), no view" {
  # Long lines written in pieces by several candidates at once must still come out whole.
  run --separate-stderr race --k 4 --out r.json --stream "${JUDGE[@]}" -- \
    sh -c 'i=$CORDON_CANDIDATE_INDEX; for n in 1 2 3 4 5 6 7 8; do printf "c%s-%s-" $i $n; printf "%0500d" 0; printf "end\n"; done; printf "last %s" $i; echo "err $i" >&2'
  [ "$status" -eq 0 ]
  for i in 0 1 2 3; do
    [ "$(grep -c "^candidate-$i| c$i-[1-8]-0\{500\}end$" <<<"$output")" -eq 8 ]
    grep -qx "candidate-$i| last $i" <<<"$output"
    grep -qx "candidate-$i judge| judged $i" <<<"$output"
    grep -qx "candidate-$i| err $i" <<<"$stderr"
    grep -qx "candidate-$i judge| judge err $i" <<<"$stderr"
  done
  # Nothing but prefixed lines before the outcome table.
  [ -z "$(sed '/^TASK/,$d' <<<"$output" | grep -v '^candidate-[0-3]\( judge\)\?| ')" ]
}

@test "race: a candidate that did not pass is reported with the last line of its stderr" {
  run race --k 2 --out r.json -- sh -c 'echo "working" >&2; echo "assertion failed in test_$CORDON_CANDIDATE_INDEX" >&2; exit 3'
  [ "$status" -eq 1 ]
  [[ "$output" == *'candidate-0: command exited 3: "assertion failed in test_0"'* ]]
  [[ "$output" == *'candidate-1: command exited 3: "assertion failed in test_1"'* ]]
}

@test "race --stream on ns: the candidates' pipes stream through the sandbox" {
  if ! "$CORDON" backends 2>/dev/null | grep -q '^ns .* yes .*snapshot'; then
    skip "ns is not available or does not declare SNAPSHOT here"
  fi
  run --separate-stderr "$CORDON" race --backend ns --base "$BASE" --k 2 --out r.json --stream --logs L -- "${CMD[@]}"
  [ "$status" -eq 0 ]
  grep -qx "candidate-1| out two 1" <<<"$output"
  grep -qx "candidate-0| err 0" <<<"$stderr"
  [ "$(cat L/candidate-1.stderr)" = "err 1" ]
}
