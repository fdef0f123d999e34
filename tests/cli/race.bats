#!/usr/bin/env bats
# `cordon race` and `cordon receipt verify` as a user types them, on the worktree backend (fast;
# ranking needs no isolation), plus one race on `ns` when it declares SNAPSHOT. $CORDON is the
# binary under test; every test runs in a fresh project with its own key directory.

bats_require_minimum_version 1.5.0

setup() {
  PROJECT=$(mktemp -d "${TMPDIR:-/tmp}/cordon-race.XXXXXX")
  KEYS=$(mktemp -d "${TMPDIR:-/tmp}/cordon-race-keys.XXXXXX")
  export CORDON_PROJECT=$PROJECT
  export CORDON_KEY_DIR=$KEYS/keys
  cd "$PROJECT"
  mkdir -p tree/sub
  printf 'alpha\n' > tree/a
  printf 'bravo\n' > tree/sub/b
  "$CORDON" key init >/dev/null
  KID=$("$CORDON" key show | sed -n 's/^kid: //p')
  [ ${#KID} -eq 43 ]
  BASE=$("$CORDON" snapshot take tree)
}

teardown() {
  cd /
  rm -rf "$PROJECT" "$KEYS"
}

# Candidate i writes 1000 - 100 i bytes; candidate 1 fails; candidate 2 deletes a base file.
CMD=(sh -c 'i=$CORDON_CANDIDATE_INDEX; head -c $((1000 - i * 100)) /dev/zero > out; [ $i -eq 2 ] && rm a; [ $i -ne 1 ]')

race() { "$CORDON" race --backend worktree --base "$BASE" "$@"; }

winner_of() { tr -d ' \n' < "$1" | sed -n 's/.*"winner":{"snapshot":"[0-9a-f]*","task_id":"\([^"]*\)"}.*/\1/p'; }

sessions_left() { ls "$PROJECT/.cordon/sessions" 2>/dev/null | wc -l; }

audit_entries() { "$CORDON" audit show --json | wc -l; }

# The digest of the "out" blob of candidate N (each candidate's differs in size).
out_digest_of() {
  head -c $((1000 - $1 * 100)) /dev/zero | sha256sum | cut -c1-64
}

# The file that stores a blob (its own, or the pack holding it), from `cas info`.
stored_in() {
  printf '%s/.cordon/cas/%s' "$PROJECT" "$("$CORDON" cas info "$1" | sed -n 's/^location: //p')"
}

@test "race and receipt: --help, usage errors are exit 2 (receipt verify: 64) and one line" {
  for v in "race" "receipt" "receipt verify"; do
    run $CORDON $v --help
    [ "$status" -eq 0 ]
    [[ "$output" == usage:* ]]
  done
  run $CORDON --help
  [[ "$output" == *"race --base ID"* ]]
  [[ "$output" == *"receipt verify"* ]]
  run $CORDON race --k 2 --out r.json -- true
  [ "$status" -eq 2 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"--base"* ]]
  run $CORDON race --base "$BASE" --out r.json -- true
  [ "$status" -eq 2 ]
  run $CORDON race --base "$BASE" --k 2 -- true
  [ "$status" -eq 2 ]
  run $CORDON race --base "$BASE" --k 0 --out r.json -- true
  [ "$status" -eq 2 ]
  [[ "$output" == *"--k needs a number from 1 to 256"* ]]
  run $CORDON race --base "$BASE" --k 2 --out r.json
  [ "$status" -eq 2 ]
  [[ "$output" == *"no command"* ]]
  run $CORDON race --base "$BASE" --k 2 --out r.json true
  [ "$status" -eq 2 ]
  [[ "$output" == *"after --"* ]]
  run $CORDON race --bogus
  [ "$status" -eq 2 ]
  run $CORDON receipt frob
  [ "$status" -eq 64 ]
  run $CORDON receipt verify
  [ "$status" -eq 64 ]
  run $CORDON receipt verify r.json --expected-keyid short
  [ "$status" -eq 64 ]
}

@test "bad base, unwritable out, bad profile, no SNAPSHOT: refused before anything runs" {
  run race --k 2 --out r.json -- touch ran
  [ "$status" -eq 0 ] # the reference: this one runs
  rm -rf "$PROJECT/.cordon/audit" r.json
  run $CORDON race --backend worktree --base 0000000000000000000000000000000000000000000000000000000000000000 --k 2 --out r.json -- touch ran
  [ "$status" -eq 3 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"not a snapshot in the store"* ]]
  run $CORDON race --backend worktree --base nothex --k 2 --out r.json -- touch ran
  [ "$status" -eq 2 ]
  run race --k 2 --out "$PROJECT/no/such/dir/r.json" -- touch ran
  [ "$status" -eq 2 ]
  [[ "$output" == *"no/such/dir"* ]]
  run race --k 2 --out "$PROJECT/tree" -- touch ran
  [ "$status" -eq 2 ]
  [[ "$output" == *"Is a directory"* ]]
  printf '{"axes":[{"name":"speed","direction":"benefit","weight":1}]}' > fast.json
  run race --k 2 --profile fast.json --out r.json -- touch ran
  [ "$status" -eq 1 ]
  [[ "$output" == *"speed"* ]]
  printf '{"axes":[' > broken.json
  run race --k 2 --profile broken.json --out r.json -- touch ran
  [ "$status" -eq 1 ]
  [ "${#lines[@]}" -eq 1 ]
  run race --k 2 --profile missing.json --out r.json -- touch ran
  [ "$status" -eq 3 ]
  if ! $CORDON backends --json | tr -d ' \n' | grep -q '"name":"ns"[^}]*"snapshot"'; then
    run $CORDON race --backend ns --base "$BASE" --k 2 --out r.json -- touch ran
    [ "$status" -eq 4 ]
    [[ "$output" == *"does not declare SNAPSHOT"* ]]
  fi
  # A missing key is made on first use (json.bats); an unsafe key directory is refused.
  mkdir -m 0755 "$KEYS/open"
  run env CORDON_KEY_DIR=$KEYS/open $CORDON race --backend worktree --base "$BASE" --k 2 --out r.json -- touch ran
  [ "$status" -eq 4 ]
  [[ "$output" == *"key directory"*"must be 0700"* ]]
  # Nothing ran, nothing was written.
  [ "$(sessions_left)" -eq 0 ]
  [ ! -e r.json ]
  [ ! -e "$PROJECT/.cordon/audit/audit-000001.jsonl" ]
}

@test "the same race twice gives a byte-identical receipt; three K=4 races one winner" {
  run race --k 4 --out r1.json -- "${CMD[@]}"
  [ "$status" -eq 0 ]
  [[ "$output" == *"winner: candidate-3"* ]]
  [ -z "$(race --k 4 --out r2.json -- "${CMD[@]}" 2>&1 >/dev/null)" ] # quiet off a terminal
  cmp r1.json r2.json
  [ "$(wc -l < r1.json)" -eq 1 ]
  for n in 1 2 3; do
    race --k 4 --jobs $((n % 2 + 1)) --json --out w$n.json -- "${CMD[@]}" > out$n.json
    winner_of out$n.json > winner$n
  done
  [ "$(cat winner1)" = candidate-3 ]
  cmp winner1 winner2
  cmp winner1 winner3
  cmp r1.json w3.json
  [ "$(sessions_left)" -eq 0 ]
  # Every race is in the chain, whole.
  [ "$(audit_entries)" -eq 5 ]
  run $CORDON audit verify
  [ "$status" -eq 0 ]
  run $CORDON audit show
  [[ "$output" == *"race.select"* ]]
}

@test "receipt verify: verified with the key id, unanchored without, failed with another" {
  race --k 2 --out r.json -- "${CMD[@]}" >/dev/null
  run $CORDON receipt verify r.json --expected-keyid "$KID"
  [ "$status" -eq 0 ]
  [[ "$output" == verified:* ]]
  run $CORDON receipt verify r.json
  [ "$status" -eq 3 ]
  [[ "$output" == unanchored:* ]]
  run $CORDON receipt verify r.json --expected-keyid AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
  [ "$status" -eq 1 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"not by the expected key"* ]]
  run $CORDON receipt verify r.json --json --expected-keyid "$KID"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"verdict": "verified"'* ]]
  [[ "$output" == *"\"kid\": \"$KID\""* ]]
  # One candidate that changed nothing: one snapshot re-hashed, said in the singular.
  race --k 1 --out one.json -- true >/dev/null
  run -0 $CORDON receipt verify one.json --expected-keyid "$KID"
  [[ "$output" =~ \;\ 1\ snapshot\ and\ [0-9]+\ blobs?\ re-hashed$ ]]
}

@test "flipping any single byte of the receipt file makes verify fail (every position)" {
  race --k 1 --out r.json -- "${CMD[@]}" >/dev/null
  # One perl process walks every position; cordon runs once per flipped copy.
  run perl -e '
    my ($cordon, $file, $kid) = @ARGV;
    open(my $fh, "<:raw", $file) or die; local $/; my $doc = <$fh>; close $fh;
    my $bad = 0;
    for my $i (0 .. length($doc) - 1) {
      my $copy = $doc;
      substr($copy, $i, 1) = chr(ord(substr($doc, $i, 1)) ^ 0x01);
      open(my $out, ">:raw", "flipped.json") or die; print $out $copy; close $out;
      my $pid = fork() // die;
      if ($pid == 0) {
        open(STDOUT, ">", "/dev/null"); open(STDERR, ">", "/dev/null");
        exec($cordon, "receipt", "verify", "flipped.json", "--expected-keyid", $kid) or exit 99;
      }
      waitpid($pid, 0);
      my $code = $? >> 8;
      if ($code != 1) { print "byte $i: exit $code\n"; $bad++; }
    }
    print "positions: ", length($doc), ", not failed: $bad\n";
    exit($bad ? 1 : 0);' "$CORDON" r.json "$KID"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"not failed: 0"* ]]
}

@test "a loser's blob flipped gives 1, deleted 2, a FIFO 4 within a bounded time" {
  race --k 4 --out r.json -- "${CMD[@]}" >/dev/null
  d=$(out_digest_of 0) # candidate-0 lost to candidate-3
  blob=$(stored_in "$d")
  at=$(( $("$CORDON" cas info "$d" | sed -n 's/^offset: //p') + 10 ))
  [ -f "$blob" ]
  cp "$blob" saved
  chmod u+w "$blob"
  perl -e 'open(my $f, "+<:raw", $ARGV[0]) or die; seek($f, $ARGV[1], 0); print $f "\x01"; close $f' "$blob" "$at"
  run $CORDON receipt verify r.json --expected-keyid "$KID"
  [ "$status" -eq 1 ]
  [[ "$output" == *"corrupt"* ]]
  rm -f "$blob"
  run $CORDON receipt verify r.json --expected-keyid "$KID"
  [ "$status" -eq 2 ]
  [[ "$output" == *"absent"* ]]
  run $CORDON receipt verify r.json
  [ "$status" -eq 2 ] # incomplete outranks unanchored
  mkfifo "$blob"
  SECONDS=0
  run timeout 20 $CORDON receipt verify r.json --expected-keyid "$KID"
  [ "$status" -eq 4 ]
  [[ "$output" == *"FIFO"* ]]
  [ "$SECONDS" -lt 10 ]
  rm -f "$blob"
  ln -s "$PROJECT/saved" "$blob"
  run $CORDON receipt verify r.json --expected-keyid "$KID"
  [ "$status" -eq 4 ]
  rm -f "$blob"
  cp saved "$blob"
  run $CORDON receipt verify r.json --expected-keyid "$KID"
  [ "$status" -eq 0 ]
}

@test "a malformed, missing or unreadable receipt file: one line, never a crash" {
  printf 'not json\n' > bad.json
  run $CORDON receipt verify bad.json --expected-keyid "$KID"
  [ "$status" -eq 1 ]
  [ "${#lines[@]}" -eq 1 ]
  : > empty.json
  run $CORDON receipt verify empty.json
  [ "$status" -eq 1 ]
  [ "${#lines[@]}" -eq 1 ]
  printf '{"body":{},"signature":{"alg":"EdDSA","kid":"x","value":"y"}}\n' > shape.json
  run $CORDON receipt verify shape.json
  [ "$status" -eq 1 ]
  [ "${#lines[@]}" -eq 1 ]
  head -c 100000 /dev/urandom > noise.json
  run $CORDON receipt verify noise.json
  [ "$status" -eq 1 ]
  [ "${#lines[@]}" -eq 1 ]
  run $CORDON receipt verify missing.json
  [ "$status" -eq 2 ]
  [ "${#lines[@]}" -eq 1 ]
  mkfifo fifo.json
  run timeout 20 $CORDON receipt verify fifo.json
  [ "$status" -eq 4 ]
  [ "${#lines[@]}" -eq 1 ]
  run $CORDON receipt verify tree
  [ "$status" -eq 4 ]
  [ "${#lines[@]}" -eq 1 ]
}

@test "judge words and a profile file are bound into the receipt" {
  printf '{"axes":[{"name":"cost","direction":"cost","weight":1}],"name":"cheap"}' > cheap.json
  run race --k 3 --profile cheap.json --judge sh --judge -c --judge 'test -s out' --json \
    --out r.json -- sh -c 'head -c $((CORDON_CANDIDATE_INDEX * 10)) /dev/zero > out'
  [ "$status" -eq 0 ]
  [[ "$output" == *'"judge_exit_code": 1'* ]] # candidate-0's out is empty
  grep -q '"judge":\["sh","-c","test -s out"\]' r.json
  grep -q '"name":"cheap"' r.json
  run $CORDON receipt verify r.json --expected-keyid "$KID"
  [ "$status" -eq 0 ]
}

@test "four concurrent races leave one unforked audit chain that verifies" {
  for n in 1 2 3 4; do
    race --k 3 --out c$n.json -- "${CMD[@]}" > log$n 2>&1 &
  done
  wait
  for n in 1 2 3 4; do
    run $CORDON receipt verify c$n.json --expected-keyid "$KID"
    [ "$status" -eq 0 ]
  done
  [ "$(audit_entries)" -eq 4 ]
  run $CORDON audit verify
  [ "$status" -eq 0 ]
  [[ "$output" == *"4 entries"* ]]
  [ "$(sessions_left)" -eq 0 ]
}

@test "a live view of the candidates on a terminal" {
  command -v script >/dev/null || skip "script(1) is not installed"
  run script -qec "$CORDON race --backend worktree --base $BASE --k 2 --out $PROJECT/t.json -- sh -c 'sleep 0.3'" /dev/null
  [ "$status" -eq 0 ]
  [[ "$output" == *"candidate-0"*"running"* ]]
  [[ "$output" == *"winner: candidate-0"* ]]
}

@test "a race on ns, when ns declares SNAPSHOT" {
  if ! $CORDON backends --json | tr -d ' \n' | grep -q '"name":"ns"[^}]*"snapshot"'; then
    skip "the ns backend does not declare SNAPSHOT (yet)"
  fi
  run $CORDON race --backend ns --base "$BASE" --k 2 --out r.json -- "${CMD[@]}"
  [ "$status" -eq 0 ]
  run $CORDON receipt verify r.json --expected-keyid "$KID"
  [ "$status" -eq 0 ]
  grep -q '"backend":"ns"' r.json
  [ "$(sessions_left)" -eq 0 ]
}

# Attack from inside: pid 1 of an ns candidate shares the race process's memory, so it is kept
# not dumpable (hidden from its sandbox's /proc, its /proc/1/mem closed). The flag is the memory's,
# one for every candidate: restored when the first candidate ended, it opened pid 1 of every
# other one, and the race's memory with it, to their commands (a candidate read 4 KiB of the
# race's heap through /proc/1/mem). Candidate 0 ends at once; candidate 1 looks for 5 s.
@test "ns race: a candidate never sees its pid 1 or the race's memory, after a sibling ended too" {
  ns_snapshot_or_skip
  run $CORDON race --backend ns --base "$BASE" --k 2 --jobs 2 --out r.json --logs logs -- sh -c '
    [ "$CORDON_CANDIDATE_INDEX" -eq 0 ] && exit 0
    for _ in $(seq 25); do
      if [ -e /proc/1/status ] || head -c 1 /proc/1/mem >/dev/null 2>&1; then
        echo "pid 1 reachable"; grep -m1 heap /proc/1/maps; exit 0
      fi
      sleep 0.2
    done
    echo "pid 1 hidden"'
  [ "$status" -eq 0 ]
  [ "$(cat logs/candidate-1.stdout)" = "pid 1 hidden" ]
}

# Issue 14, finding 13: the caller's umask does not reach the candidates (every sandboxed command
# starts with umask 022), and a fork's root keeps the base's mode (here 0751, not 0755 & ~umask).
@test "the same race under umask 077 and 022: the same snapshots, a byte-identical receipt" {
  chmod 0751 tree
  BASE=$("$CORDON" snapshot take tree)
  umask_cmd=(sh -c 'mkdir -p d/e; head -c $((100 + CORDON_CANDIDATE_INDEX)) /dev/zero > d/out; echo x > top')
  backends=(worktree)
  for b in ns docker; do
    if $CORDON backends --json | tr -d ' \n' | grep -q "\"name\":\"$b\"[^}]*\"available\":true[^}]*\"snapshot\""; then
      backends+=("$b")
    fi
  done
  echo "# backends: ${backends[*]}" >&3
  for b in "${backends[@]}"; do
    (umask 077 && "$CORDON" race --backend "$b" --base "$BASE" --k 2 --out "r077-$b.json" -- "${umask_cmd[@]}")
    (umask 022 && "$CORDON" race --backend "$b" --base "$BASE" --k 2 --out "r022-$b.json" -- "${umask_cmd[@]}")
    cmp "r077-$b.json" "r022-$b.json"
    # The winner's tree: the base's root mode, umask 022 modes for what the command made.
    winner=$(tr -d ' \n' < "r077-$b.json" | sed -n 's/.*"winner":{"snapshot":"\([0-9a-f]*\)".*/\1/p')
    [ ${#winner} -eq 64 ]
    (umask 077 && "$CORDON" snapshot restore "$winner" "out-$b")
    [ "$(stat -c %a "out-$b")" = 751 ]
    [ "$(stat -c %a "out-$b/d")" = 755 ]
    [ "$(stat -c %a "out-$b/d/e")" = 755 ]
    [ "$(stat -c %a "out-$b/d/out")" = 644 ]
  done
  [ "$(sessions_left)" -eq 0 ]
}

@test "race --max-snapshot-bytes: a candidate's tree over the limit is refused by name, nothing staged stays" {
  run $CORDON race --backend worktree --base "$BASE" --k 1 --out r.json --max-snapshot-bytes lots -- true
  [ "$status" -eq 2 ]
  run $CORDON race --backend worktree --base "$BASE" --k 1 --out r.json --fsize lots -- true
  [ "$status" -eq 2 ]
  run race --k 2 --out "$PROJECT/r.json" --max-snapshot-bytes 1K -- \
    sh -c 'head -c $((2048 * (1 - CORDON_CANDIDATE_INDEX) + 1)) /dev/zero > big'
  # The candidate over the limit has no terminal snapshot: the race fails naming the limit, or
  # (when a failed snapshot scores as a failed candidate) the other candidate wins.
  if [ "$status" -ne 0 ]; then
    [[ "$output" == *"over the snapshot limit of 1024 bytes"* ]]
  else
    [ "$(winner_of "$PROJECT/r.json")" != "" ]
  fi
  [ -z "$(ls -A "$PROJECT/.cordon/cas/tmp")" ]
  [ "$(sessions_left)" -eq 0 ]
}

# ---- findings 10 and 11: a candidate cannot forge its snapshot nor reach the judge ----------

ns_snapshot_or_skip() {
  $CORDON backends --json | tr -d ' \n' | grep -q '"name":"ns"[^}]*"snapshot"' ||
    skip "the ns backend does not declare SNAPSHOT (yet)"
  [ "$(id -u)" -eq 0 ] || skip "ns candidates are overlay forks only as root"
  [ -x "${PROBE:-}" ] || skip "the escape probe is not built (PROBE=${PROBE:-unset})"
}

# A base with the probe in it (the sandbox has no setfattr) and a directory of two files.
probe_base() {
  mkdir -p ptree/d
  cp "$PROBE" ptree/probe
  printf 'one\n' > ptree/d/one
  printf 'two\n' > ptree/d/two
  "$CORDON" snapshot take ptree
}

# The change a receipt records for one candidate, as "added removed modified".
change_of() {
  jq -r --arg t "$2" '.body.candidates[] | select(.task_id == $t) |
    "\(.change.added) \(.change.removed) \(.change.modified)"' "$1"
}

@test "ns: user.overlay.* set from inside is content, not a whiteout or an opaque dir (finding 10)" {
  ns_snapshot_or_skip
  PBASE=$(probe_base)
  # Candidate 0 writes the same 100 bytes as candidate 1, plus 5000 bytes of junk that it marks
  # as a whiteout, and marks d opaque: read as markers, its junk vanished and its cost looked
  # like candidate 1's. Both must count what is in the tree.
  run $CORDON race --backend ns --base "$PBASE" --k 2 --out r.json -- sh -c '
    head -c 100 /dev/zero > out
    [ "$CORDON_CANDIDATE_INDEX" -eq 0 ] || exit 0
    head -c 5000 /dev/zero > junk
    ./probe set-xattr junk user.overlay.whiteout y &&
    ./probe set-xattr d user.overlay.opaque y &&
    ./probe set-xattr d/one user.overlay.whiteout y'
  [ "$status" -eq 0 ]
  # junk and out added; d/one copied up (same content), nothing removed.
  [ "$(change_of r.json candidate-0)" = "2 0 0" ]
  [ "$(change_of r.json candidate-1)" = "1 0 0" ]
  [ "$(winner_of r.json)" = "candidate-1" ]
  snap=$(jq -r '.body.candidates[] | select(.task_id == "candidate-0") | .snapshot' r.json)
  run $CORDON snapshot show "$snap"
  [[ "$output" == *" junk"* ]]
  [[ "$output" == *" d/one"* ]]
  [[ "$output" == *" d/two"* ]]
  run $CORDON receipt verify r.json --expected-keyid "$KID"
  [ "$status" -eq 0 ]
}

@test "ns: a user.overlay.metacopy on one candidate's file does not end the race (finding 10)" {
  ns_snapshot_or_skip
  PBASE=$(probe_base)
  run $CORDON race --backend ns --base "$PBASE" --k 2 --out r.json -- sh -c '
    if [ "$CORDON_CANDIDATE_INDEX" -eq 0 ]; then
      head -c 300 /dev/zero > out && ./probe set-xattr out user.overlay.metacopy ""
    else
      head -c 100 /dev/zero > out
    fi'
  [ "$status" -eq 0 ]
  [ "$(winner_of r.json)" = "candidate-1" ]
  [ "$(change_of r.json candidate-0)" = "1 0 0" ]
  run $CORDON receipt verify r.json --expected-keyid "$KID"
  [ "$status" -eq 0 ]
  [ "$(sessions_left)" -eq 0 ]
}

@test "ns: the judge runs in a fresh sandbox from the snapshot, not the candidate's (finding 11)" {
  ns_snapshot_or_skip
  # The candidate plants a file in /tmp and a process that would answer for the judge; the
  # judge passes only when it sees neither, and sees the candidate's tree.
  run $CORDON race --backend ns --base "$BASE" --k 2 --out r.json \
    --judge sh --judge -c --judge 'test -s out && ! test -e /tmp/planted && ! test -e /tmp/alive' \
    -- sh -c 'echo x > out; echo yes > /tmp/planted; (sh -c "sleep 1; touch /tmp/alive; sleep 30" &)'
  [ "$status" -eq 0 ]
  [ "$(jq '[.body.candidates[].outcome.judge_exit_code] | add' r.json)" -eq 0 ]
  [ "$(jq '[.body.candidates[].scores.correctness] | add' r.json)" -eq 2 ]
  [ "$(sessions_left)" -eq 0 ]
}

docker_or_skip() {
  why=$(CORDON_PROJECT=$(mktemp -d) "$CORDON" backends --json 2>&1 | tr -d '\n' |
    grep -o '"name": "docker"[^}]*' | grep -o '"unavailable_reason": "[^"]*"' || true)
  [ -z "$why" ] || skip "docker backend unavailable: ${why#*: }"
  export CORDON_DOCKER_IMAGE=${CORDON_DOCKER_IMAGE:-cordon-test:busybox}
}

@test "docker: a candidate cannot replace /bin/grep for the judge (read-only root, not root) (finding 11)" {
  docker_or_skip
  # The candidate writes its answer, then tries to make grep always succeed; its exit code is
  # that attempt's. The judge's grep must still tell "x" from nothing.
  # Its command fails (exit 7) by design: --allow-no-pass keeps the receipt's winner.
  run $CORDON race --backend docker --base "$BASE" --k 1 --allow-no-pass --out r.json \
    --judge sh --judge -c --judge 'grep -q "^x$" out && ! grep -q . /dev/null && [ "$(id -u)" -ne 0 ]' \
    -- sh -c 'echo x > out; printf "#!/bin/sh\nexit 0\n" > /bin/grep || exit 7; chmod 755 /bin/grep'
  [ "$status" -eq 0 ]
  [ "$(jq '.body.candidates[0].outcome.exit_code' r.json)" -eq 7 ]
  [ "$(jq '.body.candidates[0].outcome.judge_exit_code' r.json)" -eq 0 ]
  [ "$(sessions_left)" -eq 0 ]
}

@test "docker: a resumed session runs as non-root on a read-only root; host writes stay its own" {
  docker_or_skip
  [ "$(id -u)" -eq 0 ] || skip "the workspace is given to the sandbox's user only by root"
  sid=$($CORDON session create --backend docker --from "$BASE")
  echo data | $CORDON session write "$sid" d1/d2/new.txt
  run $CORDON session exec "$sid" -- sh -c 'id -u; echo more >> d1/d2/new.txt && echo more >> a &&
    echo written; touch /etc/x 2>/dev/null || echo ro-root; touch /tmp/x && echo tmp'
  $CORDON session destroy "$sid"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = 1000 ]
  [[ "$output" == *written*ro-root*tmp* ]]
}

@test "honest cost: one line changed in a 46 KB file costs 2 lines, a new 4-line file 5 (issue 17)" {
  mkdir big
  for i in $(seq 1 1000); do printf 'line %04d of a large source file, unchanged.....\n' "$i"; done > big/lib.py
  [ "$(wc -c < big/lib.py)" -gt 45000 ]
  base=$("$CORDON" snapshot take big)
  run "$CORDON" race --backend worktree --base "$base" --k 2 --json --out r.json -- sh -c '
    if [ "$CORDON_CANDIDATE_INDEX" -eq 0 ]; then
      sed "500s/.*/line 0500 of a large source file, fixed............/" lib.py > t && cat t > lib.py && rm t
    else
      printf "import pytest\n\ndef pytest_collection_modifyitems(items):\n    items.clear()  # skip all\n" > conftest.py
    fi'
  [ "$status" -eq 0 ]
  printf '%s\n' "$output" > out.json
  # The fix: one line removed, one added; no entry added or removed.
  [ "$(jq -r '.candidates[] | select(.task_id == "candidate-0") | .cost' out.json)" = 2 ]
  [ "$(jq '.body.candidates[0].change.lines_changed' r.json)" -eq 2 ]
  [ "$(jq '.body.candidates[0].change.meta_changed' r.json)" -eq 0 ]
  [ "$(jq '.body.candidates[0].scores.cost' r.json)" -eq 2 ]
  # The new file: its four lines and the entry.
  [ "$(jq -r '.candidates[] | select(.task_id == "candidate-1") | .cost' out.json)" = 5 ]
  [ "$(jq '.body.candidates[1].change.lines_changed' r.json)" -eq 4 ]
  [ "$(jq '.body.candidates[1].change.added' r.json)" -eq 1 ]
  [ "$(jq -r '.body.profile.cost_rule' r.json)" = changed-lines.v1 ]
  run "$CORDON" race --help
  [[ "$output" == *"rule changed-lines.v1"* ]]
  # The verifier measures the change again from the store.
  run "$CORDON" receipt verify r.json --expected-keyid "$KID"
  [ "$status" -eq 0 ]
  [[ "$output" == verified:* ]]
}

@test "honest cost: a binary file costs the bytes that differ, and a mode change one" {
  mkdir bin
  head -c 20000 /dev/zero > bin/blob
  printf 'x\n' > bin/script
  base=$("$CORDON" snapshot take bin)
  run "$CORDON" race --backend worktree --base "$base" --k 1 --out r.json -- sh -c '
    printf "\001\002\003" | dd of=blob bs=1 seek=100 conv=notrunc 2>/dev/null; chmod 755 script'
  [ "$status" -eq 0 ]
  [ "$(jq '.body.candidates[0].change.bytes_changed' r.json)" -eq 3 ]
  [ "$(jq '.body.candidates[0].change.meta_changed' r.json)" -eq 1 ]
  [ "$(jq '.body.candidates[0].scores.cost' r.json)" -eq 4 ]
}

# ---- no passing candidate, no winner (issue 17, item 3) ----------------------------------------

# Candidate 0 exits 3, candidate 1 exits 1, candidate 2 outlives --timeout: none passes.
FAILING=(sh -c 'i=$CORDON_CANDIDATE_INDEX; printf "%s" "$i" > out; [ $i -eq 2 ] && exec sleep 60; exit $((3 - 2 * i))')

@test "no pass: an all-failing race exits 1, winner null, one reason per candidate; receipt and audit chain verify" {
  run --separate-stderr race --k 3 --timeout 2 --out r.json -- "${FAILING[@]}"
  [ "$status" -eq 1 ]
  [[ "$output" == *"winner: none (no candidate passed)"* ]]
  [ "$(grep -c 'did not pass$' <<< "$output")" -eq 3 ]
  [[ "$stderr" == *"cordon: candidate-0: command exited 3"* ]]
  [[ "$stderr" == *"cordon: candidate-1: command exited 1"* ]]
  [[ "$stderr" == *"cordon: candidate-2: timed out"* ]]
  [ "$(grep -c '^cordon: candidate-' <<< "$stderr")" -eq 3 ]
  [ "$(grep -c 'no candidate passed' <<< "$stderr")" -eq 1 ]
  # Written, signed, kept and audited all the same.
  grep -q '"winner":null' r.json
  grep -q '"outcome":"no_pass"' r.json
  run grep -c allow_no_pass r.json
  [ "$output" = 0 ]
  sha=$(sha256sum r.json | cut -c1-64)
  cmp r.json "$PROJECT/.cordon/receipts/$sha.json"
  run $CORDON receipt verify r.json --expected-keyid "$KID"
  [ "$status" -eq 0 ]
  [[ "$output" == verified:*"outcome no_pass"*"none of 3 candidates passed"* ]]
  run $CORDON receipt verify r.json --json --expected-keyid "$KID"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"verdict": "verified"'* ]]
  [[ "$output" == *'"winner": null'* ]]
  [[ "$output" == *'"outcome": "no_pass"'* ]]
  [ "$(audit_entries)" -eq 1 ]
  run $CORDON audit show --json
  [[ "$output" == *race.select* ]]
  [[ "$output" == *"$sha"* ]]
  run $CORDON audit verify
  [ "$status" -eq 0 ]
  [ "$(sessions_left)" -eq 0 ]
}

@test "no pass: a judge that fails every candidate gives exit 1, a judge reason each, --json winner null" {
  run --separate-stderr race --k 2 --judge false --json --out r.json -- true
  [ "$status" -eq 1 ]
  [[ "$stderr" == *"cordon: candidate-0: judge exited 1"* ]]
  [[ "$stderr" == *"cordon: candidate-1: judge exited 1"* ]]
  [ "$(grep -c '^cordon: candidate-' <<< "$stderr")" -eq 2 ]
  [[ "$output" == *'"winner": null'* ]]
  [[ "$output" == *'"outcome": "no_pass"'* ]]
  [[ "$output" != *'"passed": true'* ]]
  grep -q '"winner":null' r.json
  run $CORDON receipt verify r.json --expected-keyid "$KID"
  [ "$status" -eq 0 ]
  run $CORDON audit verify
  [ "$status" -eq 0 ]
}

@test "mixed race: a failing candidate with a tiny change never beats a passing one with a big change" {
  # A cost-only profile ranks the cheapest first: that is candidate-0, whose command fails.
  printf '{"axes":[{"name":"cost","direction":"cost","weight":1}],"name":"cheap"}' > cheap.json
  mixed=(sh -c 'if [ $CORDON_CANDIDATE_INDEX -eq 0 ]; then printf x > out; exit 1; fi; head -c 100000 /dev/zero > big')
  run race --k 2 --profile cheap.json --json --out r.json -- "${mixed[@]}"
  [ "$status" -eq 0 ]
  [ "$(winner_of r.json)" = candidate-1 ]
  grep -q '"outcome":"winner"' r.json
  run $CORDON receipt verify r.json --expected-keyid "$KID"
  [ "$status" -eq 0 ]
  [[ "$output" == *"winner candidate-1"* ]]
  # --allow-no-pass ranks every scored candidate, as before: the failing cheap one wins, and
  # the receipt says the race was run that way.
  run race --k 2 --profile cheap.json --allow-no-pass --out a.json -- "${mixed[@]}"
  [ "$status" -eq 0 ]
  [ "$(winner_of a.json)" = candidate-0 ]
  grep -q '"allow_no_pass":true' a.json
  run $CORDON receipt verify a.json --json --expected-keyid "$KID"
  [ "$status" -eq 0 ]
  [[ "$output" == *'"allow_no_pass": true'* ]]
}

@test "--allow-no-pass: an all-failing race exits 0 with a winner, recorded in the receipt" {
  run race --k 2 --allow-no-pass --out r.json -- sh -c 'exit 5'
  [ "$status" -eq 0 ]
  [[ "$output" == *"winner: candidate-"* ]]
  [ -n "$(winner_of r.json)" ]
  grep -q '"allow_no_pass":true' r.json
  grep -q '"outcome":"winner"' r.json
  run $CORDON receipt verify r.json --expected-keyid "$KID"
  [ "$status" -eq 0 ]
  [[ "$output" == verified:*"winner candidate-"* ]]
}

@test "no pass: two identical all-failing races give byte-identical receipts" {
  run race --k 3 --out f1.json -- sh -c 'printf "%s" "$CORDON_CANDIDATE_INDEX" > out; exit 2'
  [ "$status" -eq 1 ]
  run race --k 3 --jobs 1 --out f2.json -- sh -c 'printf "%s" "$CORDON_CANDIDATE_INDEX" > out; exit 2'
  [ "$status" -eq 1 ]
  grep -q '"winner":null' f1.json
  cmp f1.json f2.json
  [ "$(audit_entries)" -eq 2 ]
}
