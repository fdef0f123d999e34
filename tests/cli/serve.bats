#!/usr/bin/env bats
# `cordon serve` (docs/api.md) and `cordon token`: every route over the unix socket (curl
# --unix-socket) and over TCP on 127.0.0.1 with an ephemeral port and bearer tokens; the error
# paths (400, 401, 403, 404, 405, 409, 413); a streamed exec whose first line arrives while the
# command still runs, and a client that goes away killing the command; the metrics read with
# prometheus_client's text-format parser and checked to move by the right amounts, the CLI's
# work included through the event log; token forgeries. ns sessions need root; the rest runs on
# any host. $CORDON is the binary under test.

bats_require_minimum_version 1.5.0

load common

setup_file() {
  export BATS_NO_PARALLELIZE_WITHIN_FILE=true
  backends_check_once ns
}

setup() {
  project_enter serve
  KEYS=$(mktemp -d "${TMPDIR:-/tmp}/cordon-serve-keys.XXXXXX")
  chmod 700 "$KEYS"
  export CORDON_KEY_DIR=$KEYS
  command -v curl >/dev/null || skip "curl is not installed"
  command -v jq >/dev/null || skip "jq is not installed"
}

teardown() {
  if [ -n "${SERVER:-}" ]; then
    kill "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
  fi
  if [ -n "${BG:-}" ]; then kill "$BG" 2>/dev/null || true; wait "$BG" 2>/dev/null || true; fi
  project_leave
  rm -rf "$KEYS"
}

serve() { serve_start "$@"; }

# api METHOD PATH [curl args...]: the body on stdout, the status in $STATUS_FILE's file.
api() {
  local method=$1 path=$2
  shift 2
  local -a target
  if [[ "$ADDR" == unix:* ]]; then
    target=(--unix-socket "${ADDR#unix:}" "http://cordon$path")
  else
    target=("$ADDR$path")
    [ -z "${TOKEN:-}" ] || target+=(-H "Authorization: Bearer $TOKEN")
  fi
  curl -sS -X "$method" -o body.out -w '%{http_code}' "${target[@]}" "$@" >status.out
  cat body.out
}

status() { cat status.out; }

# A prometheus_client parser: Debian's python3-prometheus-client.
prom_python() {
  local py
  for py in python3 /usr/bin/python3; do
    if "$py" -c 'import prometheus_client.parser' 2>/dev/null; then
      echo "$py"
      return 0
    fi
  done
  return 1
}

# The value of one sample (name and labels as k=v,k=v) in metrics text on stdin; 0 if absent.
metric() {
  "$PROM_PY" -c '
import sys
from prometheus_client.parser import text_string_to_metric_families
name, labels = sys.argv[1], dict(kv.split("=", 1) for kv in sys.argv[2].split(",") if kv)
value = 0.0
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
            value = s.value
print(int(value) if value == int(value) else value)
' "$1" "${2:-}"
}

@test "serve: a unix socket in .cordon/, 0600; healthz, backends, the JWKS of cordon key jwks" {
  "$CORDON" key init >/dev/null
  serve
  [ "$ADDR" = "unix:$PROJECT/.cordon/serve.sock" ]
  [ "$(stat -c %a .cordon/serve.sock)" = 600 ]
  run -0 api GET /healthz
  [ "$(status)" = 200 ]
  [ "$(echo "$output" | jq -r .status)" = ok ]
  run -0 api GET /v1/backends
  [ "$(status)" = 200 ]
  echo "$output" | jq -e '.backends[] | select(.name == "ns") | .available != null'
  run -0 api GET /.well-known/jwks.json
  [ "$output" = "$("$CORDON" key jwks)" ]
  # A second server on the same socket is refused; the first still answers.
  run -4 "$CORDON" serve
  [[ "$output" == *"already listens"* ]]
  run -0 api GET /healthz
}

@test "serve: the unix socket answers only its owner's uid (SO_PEERCRED), even when opened up" {
  [ "$(id -u)" -eq 0 ] || skip "needs root to connect as another user"
  command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
  chmod 755 "$PROJECT"
  serve
  chmod 666 .cordon/serve.sock
  chmod 755 .cordon
  run setpriv --reuid=65534 --regid=65534 --clear-groups curl -sS --unix-socket \
    .cordon/serve.sock -w ' %{http_code}' http://cordon/v1/sessions
  [[ "$output" == *'"forbidden_peer"'*' 403' ]]
  [ ! -d .cordon/sessions ] || [ -z "$(ls .cordon/sessions)" ]
}

@test "serve: a session's life on ns: create with the manifest, show, list, files, exec, snapshot, shutdown, destroy" {
  need_ns
  serve
  content=$(printf 'hello\n' | base64)
  run -0 api POST /v1/sessions -d "{\"backend\": \"ns\", \"net\": \"none\", \"env\": {\"GREETING\": \"hi\"},
    \"files\": [{\"path\": \"a.txt\", \"content\": \"$content\"}, {\"path\": \"secret\", \"content\": \"\"}],
    \"policy\": {\"read_only\": [\"a.txt\"], \"hidden\": [\"secret\"]}, \"limits\": {\"pids\": 64},
    \"timeout_seconds\": 60}"
  [ "$(status)" = 201 ]
  id=$(echo "$output" | jq -r .id)
  [ "$(echo "$output" | jq -r .backend)" = ns ]
  run -0 api GET "/v1/sessions/$id"
  [ "$(status)" = 200 ]
  [ "$(echo "$output" | jq -r .id)" = "$id" ]
  # What it may touch, as `cordon session inspect --json` gives it.
  [ "$(echo "$output" | jq -c '.policy | [.net, .read_only, .hidden, .limits.pids]')" = \
    '["none",["a.txt"],["secret"],64]' ]
  [ "$(echo "$output" | jq -S -c .)" = "$("$CORDON" session inspect "$id" --json | jq -S -c .)" ]
  run -0 api GET "/v1/sessions/${id:0:8}" # a unique prefix will do
  [ "$(echo "$output" | jq -r .id)" = "$id" ]
  run -0 api GET /v1/sessions
  [ "$(echo "$output" | jq -r '.sessions[0].id')" = "$id" ]
  # The session is the CLI's too: one library, one state.
  run -0 "$CORDON" session exec "$id" -- cat a.txt
  [ "$output" = hello ]
  printf '\000\001bin' >b.bin
  run -0 api PUT "/v1/sessions/$id/files?path=sub/b.bin&mode=0600" --data-binary @b.bin
  [ "$(status)" = 200 ]
  run -0 api GET "/v1/sessions/$id/files?path=sub/b.bin"
  [ "$(status)" = 200 ]
  [ "$(od -An -tx1 body.out | tr -d ' ')" = 000162696e ]
  run -0 api GET "/v1/sessions/$id/ls?path=sub"
  [ "$(echo "$output" | jq -r '.entries[0] | "\(.name) \(.kind) \(.mode) \(.size)"')" = "b.bin file 0600 5" ]
  # exec: the CLI's result, stdout and stderr in base64; the session's env, stdin from the body.
  run -0 api POST "/v1/sessions/$id/exec" -d "{\"argv\": [\"sh\", \"-c\", \"echo \$GREETING; cat; echo oops >&2; exit 3\"],
    \"stdin\": \"$(printf 'in' | base64)\"}"
  [ "$(status)" = 200 ]
  [ "$(echo "$output" | jq -r .exit_code)" = 3 ]
  [ "$(echo "$output" | jq -r .stdout | base64 -d)" = "$(printf 'hi\nin')" ]
  [ "$(echo "$output" | jq -r .stderr | base64 -d)" = oops ]
  [ "$(echo "$output" | jq -r '.stdout_truncated, .timed_out' | tr '\n' ' ')" = "false false " ]
  echo "$output" | jq -e '.duration_seconds > 0'
  # The policy holds: the read-only file refuses a write, the hidden one is empty.
  run -0 api POST "/v1/sessions/$id/exec" -d '{"argv": ["sh", "-c", "echo x >> a.txt"]}'
  [ "$(echo "$output" | jq -r .exit_code)" != 0 ]
  # Truncation is reported as the CLI reports it.
  run -0 api POST "/v1/sessions/$id/exec" -d '{"argv": ["head", "-c", "5000", "/dev/zero"], "max_output": 100}'
  [ "$(echo "$output" | jq -r '.stdout_truncated, .stdout_bytes' | tr '\n' ' ')" = "true 5000 " ]
  run -0 api POST "/v1/sessions/$id/snapshot"
  [ "$(status)" = 200 ]
  snap=$(echo "$output" | jq -r .snapshot)
  [ ${#snap} -eq 64 ]
  run -0 api GET "/v1/snapshots/$snap"
  echo "$output" | jq -e '.entries[] | select(.path == "sub/b.bin")'
  run -0 api POST "/v1/sessions/$id/shutdown"
  [ "$(status)" = 200 ]
  run -0 api POST "/v1/sessions/$id/shutdown" # idempotent
  [ "$(status)" = 200 ]
  run -0 api POST "/v1/sessions/$id/exec" -d '{"argv": ["true"]}'
  [ "$(status)" = 409 ]
  [ "$(echo "$output" | jq -r .error.code)" = shut_down ]
  run -0 api DELETE "/v1/sessions/$id"
  [ "$(status)" = 200 ]
  run -0 api GET "/v1/sessions/$id"
  [ "$(status)" = 404 ]
  [ "$(echo "$output" | jq -r .error.code)" = not_found ]
  # Resume from the snapshot.
  run -0 api POST /v1/sessions -d "{\"backend\": \"ns\", \"from\": \"$snap\"}"
  [ "$(status)" = 201 ]
  id2=$(echo "$output" | jq -r .id)
  # Resumed on an overlay, it has no host path for its workspace: null, never a /proc name
  # (docs/formats.md), in create, show and list, and the CLI lists it in the same shape.
  [ "$(echo "$output" | jq -r .workspace)" = null ]
  run -0 api GET "/v1/sessions/$id2"
  [ "$(echo "$output" | jq -c '[.workspace, .shut_down]')" = '[null,false]' ]
  run -0 api GET /v1/sessions
  from_api=$(echo "$output" | jq -S -c ".sessions[] | select(.id == \"$id2\")")
  [[ "$from_api" != *"/proc/"* ]]
  run -0 "$CORDON" session list --json
  [ "$(echo "$output" | jq -S -c ".[] | select(.id == \"$id2\")")" = "$from_api" ]
  run -0 api GET "/v1/sessions/$id2/files?path=a.txt"
  [ "$output" = hello ]
  run -0 api DELETE "/v1/sessions/$id2"
}

@test "serve: error bodies: 400 malformed JSON and bad fields, 404 session and route, 405, 413" {
  serve
  run -0 api POST /v1/sessions -d '{"backend": '
  [ "$(status)" = 400 ]
  [ "$(echo "$output" | jq -r .error.code)" = malformed_json ]
  [[ "$(echo "$output" | jq -r .error.message)" == *"not JSON"* ]]
  run -0 api POST /v1/sessions -d '[1]'
  [ "$(status)" = 400 ]
  run -0 api POST /v1/sessions -d '{"backend": "ns", "memory": 5}'
  [ "$(status)" = 400 ]
  [ "$(echo "$output" | jq -r .error.message)" = "unknown field 'memory'" ]
  run -0 api POST /v1/sessions -d '{"net": "sideways"}'
  [ "$(status)" = 400 ]
  run -0 api POST /v1/sessions -d '{"backend": "no-such-backend"}'
  [ "$(status)" = 404 ]
  run -0 api POST /v1/sessions/0123456789abcdef/exec -d '{"argv": ["true"]}'
  [ "$(status)" = 404 ]
  [ "$(echo "$output" | jq -r .error.code)" = not_found ]
  run -0 api POST /v1/sessions/0123456789abcdef/exec -d '{"argv": "true"}'
  [ "$(status)" = 400 ]
  [ "$(echo "$output" | jq -r .error.code)" = bad_exec ]
  run -0 api GET "/v1/sessions/0123456789abcdef/files"
  [ "$(status)" = 400 ]
  run -0 api GET /v1/nothing
  [ "$(status)" = 404 ]
  [ "$(echo "$output" | jq -r .error.code)" = no_route ]
  run -0 api PATCH /v1/sessions
  [ "$(status)" = 405 ]
  head -c $((64 * 1024 * 1024 + 1)) /dev/zero >big
  run -0 api POST /v1/snapshots/import --data-binary @big
  [ "$(status)" = 413 ]
  [ "$(echo "$output" | jq -r .error.code)" = body_too_large ]
  rm big
  # Every error body has the one shape.
  run -0 api GET /v1/snapshots/zz
  echo "$output" | jq -e '.error.code and .error.message'
}

@test "serve: a streamed exec delivers its first line before the command ends; events in order" {
  need_ns
  serve
  id=$(api POST /v1/sessions -d '{"backend": "ns"}' | jq -r .id)
  mkfifo lines
  curl -sSN --unix-socket "${ADDR#unix:}" -X POST "http://cordon/v1/sessions/$id/exec?stream=1" \
    -d '{"argv": ["sh", "-c", "echo a; echo e >&2; sleep 30; echo b"]}' >lines &
  BG=$!
  exec 4<lines
  line=
  read -t 20 -r line <&4
  [ "$(echo "$line" | jq -r .stdout | base64 -d)" = a ]
  read -t 20 -r line <&4
  [ "$(echo "$line" | jq -r .stderr | base64 -d)" = e ]
  # The command still sleeps: nothing more yet.
  ! read -t 1 -r line <&4
  kill "$BG"
  wait "$BG" || true
  BG=
  exec 4<&-
  # A short one runs to its end: output events, then the exit event last.
  run -0 curl -sSN --unix-socket "${ADDR#unix:}" -X POST "http://cordon/v1/sessions/$id/exec?stream=1" \
    -d "{\"argv\": [\"sh\", \"-c\", \"cat; exit 7\"], \"stdin\": \"$(printf 'x' | base64)\"}"
  [ "$(echo "$output" | head -1 | jq -r .stdout | base64 -d)" = x ]
  [ "$(echo "$output" | tail -1 | jq -r .exit)" = 7 ]
  run -0 api DELETE "/v1/sessions/$id"
}

@test "serve: a client that disconnects from a streamed exec kills the command" {
  need_ns
  serve
  id=$(api POST /v1/sessions -d '{"backend": "ns"}' | jq -r .id)
  marker=$((RANDOM + 40000))
  run curl -sSN --max-time 5 --unix-socket "${ADDR#unix:}" -X POST \
    "http://cordon/v1/sessions/$id/exec?stream=1" \
    -d "{\"argv\": [\"sh\", \"-c\", \"echo started; exec sleep $marker\"]}"
  [ "$status" -eq 28 ] # curl's timeout: we went away mid-stream
  [[ "$output" == *'"stdout"'* ]]
  gone=
  for i in $(seq 100); do
    if ! pgrep -fx "sleep $marker" >/dev/null; then gone=1; break; fi
    sleep 0.1
  done
  [ -n "$gone" ]
  # The session is still usable.
  run -0 api POST "/v1/sessions/$id/exec" -d '{"argv": ["echo", "ok"]}'
  [ "$(echo "$output" | jq -r .stdout | base64 -d)" = ok ]
  run -0 api DELETE "/v1/sessions/$id"
}

@test "serve: snapshots: take from a directory, show, export as a tar stream, import" {
  serve
  mkdir -p tree/d && echo one >tree/d/f && ln -s d/f tree/link
  run -0 api POST /v1/snapshots -d "{\"path\": \"$PROJECT/tree\"}"
  [ "$(status)" = 201 ]
  snap=$(echo "$output" | jq -r .snapshot)
  [ "$snap" = "$("$CORDON" snapshot take tree)" ]
  run -0 api GET "/v1/snapshots/$snap"
  echo "$output" | jq -e '.entries[] | select(.path == "link" and .target == "d/f")'
  api GET "/v1/snapshots/$snap/export" >/dev/null
  [ "$(status)" = 200 ]
  cp body.out image.tar
  "$CORDON" snapshot export "$snap" -o cli.tar
  cmp image.tar cli.tar
  tar -tf image.tar | grep -qx 'd/f'
  run -0 api POST /v1/snapshots/import --data-binary @image.tar
  [ "$(status)" = 201 ]
  [ "$(echo "$output" | jq -r .snapshot)" = "$snap" ]
  run -0 api POST /v1/snapshots/import --data-binary 'not a tar'
  [ "$(status)" = 400 ]
  run -0 api GET "/v1/snapshots/$(printf 'f%.0s' $(seq 64))/export"
  [ "$(status)" = 404 ]
  run -0 api POST /v1/snapshots -d '{"path": "relative"}'
  [ "$(status)" = 400 ]
}

@test "serve: receipt and audit verification" {
  serve
  run -0 api POST /v1/receipts/verify -d '{"not": "a receipt"}'
  [ "$(status)" = 200 ]
  [ "$(echo "$output" | jq -r .verified)" = false ]
  [ "$(echo "$output" | jq -r .verdict)" != verified ]
  run -0 api POST /v1/receipts/verify
  [ "$(status)" = 400 ]
  "$CORDON" audit append --event test.event --resource-type test >/dev/null
  run -0 api POST /v1/audit/verify
  [ "$(status)" = 200 ]
  [ "$(echo "$output" | jq -r '.intact, .entries' | tr '\n' ' ')" = "true 1 " ]
}

@test "serve --listen: bearer tokens; 401 without, expired, revoked, forged, alg none, wrong kid; 403 without the scope; neither reaches the backend" {
  serve --listen 127.0.0.1:0
  [[ "$ADDR" == http://127.0.0.1:* ]]
  run -0 api GET /healthz # open
  [ "$(status)" = 200 ]
  run -0 api GET /.well-known/jwks.json # open: the public key
  [ "$output" = "$("$CORDON" key jwks)" ]
  run -0 api GET /v1/sessions
  [ "$(status)" = 401 ]
  [ "$(echo "$output" | jq -r .error.code)" = unauthorized ]
  run -0 api GET /metrics
  [ "$(status)" = 401 ]
  read_token=$("$CORDON" token create --scope read --sub tester)
  TOKEN=$read_token
  run -0 api GET /v1/sessions
  [ "$(status)" = 200 ]
  run -0 api POST /v1/sessions -d '{"backend": "ns"}'
  [ "$(status)" = 403 ]
  [ "$(echo "$output" | jq -r .error.code)" = forbidden ]
  run -0 api POST /v1/audit/verify
  [ "$(status)" = 403 ]
  # The header and claims as documented.
  header=$(echo "$read_token" | cut -d. -f1 | tr '_-' '/+' | base64 -d 2>/dev/null || true)
  echo "$header" | jq -e '.alg == "EdDSA" and .kid == "'"$("$CORDON" key show --kid)"'"'
  claims=$("$CORDON" token create --scope read,exec --ttl 2h --json)
  echo "$claims" | jq -e '.scope == "read exec" and .exp - .iat == 7200 and .sub == "cordon"'
  # Expired.
  TOKEN=$("$CORDON" token create --scope admin --ttl 1s)
  sleep 2.5
  run -0 api GET /v1/sessions
  [ "$(status)" = 401 ]
  [[ "$(echo "$output" | jq -r .error.message)" == *expired* ]]
  # Revoked, by jti.
  json=$("$CORDON" token create --scope admin --json)
  TOKEN=$(echo "$json" | jq -r .token)
  run -0 api GET /v1/sessions
  [ "$(status)" = 200 ]
  run -0 "$CORDON" token revoke "$(echo "$json" | jq -r .jti)"
  run -0 api GET /v1/sessions
  [ "$(status)" = 401 ]
  [[ "$(echo "$output" | jq -r .error.message)" == *revoked* ]]
  # Forged: the claims rewritten to admin under a read token's signature.
  b64url() { base64 -w0 | tr '+/' '-_' | tr -d '='; }
  h=$(echo "$read_token" | cut -d. -f1)
  sig=$(echo "$read_token" | cut -d. -f3)
  forged_claims=$(printf '{"exp":4102444800,"iat":1,"jti":"x","scope":"admin","sub":"evil"}' | b64url)
  TOKEN="$h.$forged_claims.$sig"
  run -0 api POST /v1/sessions -d '{"backend": "ns"}'
  [ "$(status)" = 401 ]
  # alg none, no signature.
  none=$(printf '{"alg":"none","kid":"%s"}' "$("$CORDON" key show --kid)" | b64url)
  TOKEN="$none.$forged_claims."
  run -0 api POST /v1/sessions -d '{"backend": "ns"}'
  [ "$(status)" = 401 ]
  TOKEN="$none.$forged_claims"
  run -0 api POST /v1/sessions -d '{"backend": "ns"}'
  [ "$(status)" = 401 ]
  # Signed by another install key: wrong kid (and a signature this key does not make).
  other=$(mktemp -d "${TMPDIR:-/tmp}/cordon-serve-other.XXXXXX")
  chmod 700 "$other"
  TOKEN=$(CORDON_KEY_DIR=$other "$CORDON" token create --scope admin 2>/dev/null)
  rm -rf "$other"
  run -0 api POST /v1/sessions -d '{"backend": "ns"}'
  [ "$(status)" = 401 ]
  [[ "$(echo "$output" | jq -r .error.message)" == *"key id"* ]]
  TOKEN=garbage
  run -0 api GET /v1/sessions
  [ "$(status)" = 401 ]
  # None of these made a session.
  [ ! -d .cordon/sessions ] || [ -z "$(ls .cordon/sessions)" ]
  # exec may create, but host paths and unconfined backends are an admin's.
  TOKEN=$("$CORDON" token create --scope exec)
  run -0 api POST /v1/sessions -d "{\"backend\": \"ns\", \"workspace\": \"$PROJECT\"}"
  [ "$(status)" = 403 ]
  run -0 api POST /v1/sessions -d '{"backend": "worktree"}'
  [ "$(status)" = 403 ]
  run -0 api POST /v1/snapshots -d "{\"path\": \"$PROJECT\"}"
  [ "$(status)" = 403 ]
  [ ! -d .cordon/sessions ] || [ -z "$(ls .cordon/sessions)" ]
  TOKEN=$("$CORDON" token create --scope admin)
  run -0 api POST /v1/sessions -d '{"backend": "worktree"}'
  [ "$(status)" = 201 ]
  run -0 api DELETE "/v1/sessions/$(echo "$output" | jq -r .id)"
  [ "$(status)" = 200 ]
}

@test "serve --token-file: an admin token for the client that started the server" {
  serve --listen 127.0.0.1:0 --token-file tok
  [ "$(stat -c %a tok)" = 600 ]
  TOKEN=$(cat tok)
  run -0 api POST /v1/audit/verify
  [ "$(status)" = 200 ]
}

@test "token create|revoke: usage errors" {
  run -2 "$CORDON" token create
  [[ "$output" == *"--scope is required"* ]]
  run -2 "$CORDON" token create --scope root
  [[ "$output" == *"unknown scope 'root'"* ]]
  run -2 "$CORDON" token create --scope read --ttl 3y
  run -2 "$CORDON" token revoke 'a/b'
  run -0 "$CORDON" token revoke abc
  run -0 "$CORDON" token revoke abc
  [[ "$output" == *"already revoked"* ]]
  [ "$(jq -c .revoked .cordon/revoked-tokens.json)" = '["abc"]' ]
  run -0 "$CORDON" token --help
  [[ "$output" == *"EdDSA"* ]]
  run -0 "$CORDON" serve --help
  [[ "$output" == *"SO_PEERCRED"* ]]
}

@test "serve: /metrics in Prometheus text format moves by the server's work and the event log's" {
  need_ns
  PROM_PY=$(prom_python) || skip "python3-prometheus-client is not installed"
  serve
  scrape() { api GET /metrics; }
  run -0 scrape
  [ "$(status)" = 200 ]
  [ "$(echo "$output" | metric sandbox_session_created_total backend=ns)" = 0 ]
  id=$(api POST /v1/sessions -d '{"backend": "ns"}' | jq -r .id)
  api POST "/v1/sessions/$id/exec" -d '{"argv": ["true"]}' >/dev/null
  api POST "/v1/sessions/$id/exec" -d '{"argv": ["true"]}' >/dev/null
  api POST "/v1/sessions/$id/exec" -d '{"argv": ["sh", "-c", "exit 3"]}' >/dev/null
  curl -sSN --unix-socket "${ADDR#unix:}" -X POST "http://cordon/v1/sessions/$id/exec?stream=1" \
    -d '{"argv": ["true"]}' >/dev/null
  run -0 scrape
  [ "$(echo "$output" | metric sandbox_session_created_total backend=ns)" = 1 ]
  [ "$(echo "$output" | metric sandbox_active_sessions backend=ns)" = 1 ]
  [ "$(echo "$output" | metric sandbox_exec_count_total backend=ns,exit_code=0)" = 3 ]
  [ "$(echo "$output" | metric sandbox_exec_count_total backend=ns,exit_code=3)" = 1 ]
  [ "$(echo "$output" | metric sandbox_exec_duration_seconds_count backend=ns)" = 4 ]
  api DELETE "/v1/sessions/$id" >/dev/null
  run -0 scrape
  [ "$(echo "$output" | metric sandbox_session_destroyed_total backend=ns)" = 1 ]
  [ "$(echo "$output" | metric sandbox_active_sessions backend=ns)" = 0 ]
  [ "$(echo "$output" | metric sandbox_session_duration_seconds_count backend=ns)" = 1 ]
  [ "$(echo "$output" | metric sandbox_session_duration_seconds_bucket backend=ns,le=+Inf)" = 1 ]
  # The CLI's work arrives through the event log, read on from where the last scrape stopped,
  # across a rotation (events.jsonl renamed to events.jsonl.1), a torn last line waiting.
  ev() {
    printf '{"time": "2026-01-01T00:00:00.000Z", "verb": "%s", "backend": "docker", "session": "s1"%s}\n' "$@"
  }
  { ev create ', "duration_seconds": 0.5'; ev exec ', "exit_code": 0, "duration_seconds": 0.02'; } >>.cordon/events.jsonl
  run -0 scrape
  [ "$(echo "$output" | metric sandbox_session_created_total backend=docker)" = 1 ]
  [ "$(echo "$output" | metric sandbox_active_sessions backend=docker)" = 1 ]
  [ "$(echo "$output" | metric sandbox_exec_count_total backend=docker,exit_code=0)" = 1 ]
  ev exec ', "exit_code": 2, "duration_seconds": 0.5' >>.cordon/events.jsonl
  mv .cordon/events.jsonl .cordon/events.jsonl.1
  { ev destroy ', "duration_seconds": 12'
    printf '{"time": "2026-01-01T00:00:00.000Z", "verb": "exec", "backend": "docker"'; } >.cordon/events.jsonl
  run -0 scrape
  [ "$(echo "$output" | metric sandbox_exec_count_total backend=docker,exit_code=2)" = 1 ]
  [ "$(echo "$output" | metric sandbox_session_destroyed_total backend=docker)" = 1 ]
  [ "$(echo "$output" | metric sandbox_active_sessions backend=docker)" = 0 ]
  [ "$(echo "$output" | metric sandbox_session_duration_seconds_sum backend=docker)" = 12 ]
  # The torn line is completed later and counted once.
  printf ', "session": "s1", "exit_code": 5, "duration_seconds": 1}\n' >>.cordon/events.jsonl
  run -0 scrape
  [ "$(echo "$output" | metric sandbox_exec_count_total backend=docker,exit_code=5)" = 1 ]
  run -0 scrape
  [ "$(echo "$output" | metric sandbox_exec_count_total backend=docker,exit_code=5)" = 1 ]
  [ "$(echo "$output" | metric sandbox_exec_count_total backend=docker,exit_code=0)" = 1 ]
}

# The library logs every create, destroy and exec, the server's own too; /metrics reads that
# log and nothing else, so each operation moves a counter by exactly one, whoever asked for it.
@test "serve: /metrics counts each operation once: N execs by the API and M by the CLI move it by N+M" {
  need_ns
  PROM_PY=$(prom_python) || skip "python3-prometheus-client is not installed"
  # History before the server starts is not counted; a session that exists then is active.
  old=$("$CORDON" session create --backend ns)
  "$CORDON" session exec "$old" -- true
  serve
  scrape() { api GET /metrics; }
  run -0 scrape
  [ "$(echo "$output" | metric sandbox_exec_count_total backend=ns,exit_code=0)" = 0 ]
  [ "$(echo "$output" | metric sandbox_session_created_total backend=ns)" = 0 ]
  [ "$(echo "$output" | metric sandbox_active_sessions backend=ns)" = 1 ]
  id=$(api POST /v1/sessions -d '{"backend": "ns"}' | jq -r .id)
  [ "$(status)" = 201 ]
  # N = 4 through the API (one streamed, one exiting 7), M = 3 through the CLI.
  for argv in '["true"]' '["true"]' '["sh", "-c", "exit 7"]'; do
    api POST "/v1/sessions/$id/exec" -d "{\"argv\": $argv}" >/dev/null
    [ "$(status)" = 200 ]
  done
  curl -sSN --unix-socket "${ADDR#unix:}" -X POST "http://cordon/v1/sessions/$id/exec?stream=1" \
    -d '{"argv": ["true"]}' >/dev/null
  "$CORDON" session exec "$id" -- true
  "$CORDON" session exec "$old" -- true
  run -7 "$CORDON" session exec "$old" -- sh -c 'exit 7'
  run -0 scrape
  [ "$(echo "$output" | metric sandbox_exec_count_total backend=ns,exit_code=0)" = 5 ]
  [ "$(echo "$output" | metric sandbox_exec_count_total backend=ns,exit_code=7)" = 2 ]
  [ "$(echo "$output" | metric sandbox_exec_duration_seconds_count backend=ns)" = 7 ]
  [ "$(echo "$output" | metric sandbox_session_created_total backend=ns)" = 1 ]
  [ "$(echo "$output" | metric sandbox_active_sessions backend=ns)" = 2 ]
  # Scraped again with nothing new: nothing moves.
  run -0 scrape
  [ "$(echo "$output" | metric sandbox_exec_count_total backend=ns,exit_code=0)" = 5 ]
  # One destroy through the API, one through the CLI: two, once each.
  api DELETE "/v1/sessions/$id" >/dev/null
  [ "$(status)" = 200 ]
  "$CORDON" session destroy "$old"
  run -0 scrape
  [ "$(echo "$output" | metric sandbox_session_destroyed_total backend=ns)" = 2 ]
  [ "$(echo "$output" | metric sandbox_session_duration_seconds_count backend=ns)" = 2 ]
  [ "$(echo "$output" | metric sandbox_active_sessions backend=ns)" = 0 ]
}

@test "serve: a race: start, status while and after, the receipt, verified through the API" {
  need_ns
  "$CORDON" key init >/dev/null
  mkdir tree && echo base >tree/a
  snap=$("$CORDON" snapshot take tree)
  serve
  run -0 api POST /v1/races -d "{\"base\": \"${snap:0:12}\", \"k\": 3, \"backend\": \"ns\",
    \"argv\": [\"sh\", \"-c\", \"sleep 1; echo \$CORDON_CANDIDATE_INDEX > out\"]}"
  [ "$(status)" = 202 ]
  rid=$(echo "$output" | jq -r .id)
  [ "$(echo "$output" | jq -r .base)" = "$snap" ]
  # While it runs the receipt is not there yet: 409 (asked at once; each candidate sleeps 1 s).
  run -0 api GET "/v1/races/$rid/receipt"
  [ "$(status)" = 409 ]
  [ "$(echo "$output" | jq -r .error.code)" = race_running ]
  st=
  for i in $(seq 600); do
    st=$(api GET "/v1/races/$rid")
    [ "$(echo "$st" | jq -r .status)" = running ] || break
    sleep 0.2
  done
  [ "$(echo "$st" | jq -r .status)" = done ]
  [ "$(echo "$st" | jq -r '.phases | join(",")')" = done,done,done ]
  [ "$(echo "$st" | jq -r '.candidates | length')" = 3 ]
  winner=$(echo "$st" | jq -r .winner_snapshot)
  api GET "/v1/races/$rid/receipt" >/dev/null
  [ "$(status)" = 200 ]
  cp body.out receipt.json
  run -0 api POST "/v1/receipts/verify?expected_keyid=$("$CORDON" key show --kid)" --data-binary @receipt.json
  [ "$(echo "$output" | jq -r .verdict)" = verified ]
  [ "$(echo "$output" | jq -r .winner_snapshot)" = "$winner" ]
  run -0 "$CORDON" receipt verify receipt.json --expected-keyid "$("$CORDON" key show --kid)"
  run -0 api GET /v1/races/0123456789abcdef
  [ "$(status)" = 404 ]
  run -0 api POST /v1/races -d '{"base": "x", "k": 0, "argv": ["true"]}'
  [ "$(status)" = 400 ]
  [ "$(echo "$output" | jq -r .error.code)" = bad_race ]
}
