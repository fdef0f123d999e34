#!/usr/bin/env bats
# Egress decisions reach /metrics (issue 20, "counts reach the metrics"): a restricted session
# makes allowed and refused requests to a loopback HTTP server this file starts, through names
# pinned with --resolve; when it is destroyed, its proxy's decisions are summed into the
# project's event log (verb egress) and `cordon serve`'s /metrics counts them. Loopback only.
# The docker case skips without an engine (DOCKER_HOST).

bats_require_minimum_version 1.5.0

load common

setup_file() {
  export BATS_NO_PARALLELIZE_WITHIN_FILE=true
  backends_check_once ns docker
  export METRICS_DIR
  METRICS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/cordon-egress-metrics.XXXXXX")
  echo "hello from loopback" >"$METRICS_DIR/hello.txt"
  cat >"$METRICS_DIR/serve.py" <<'PY'
import functools, http.server, os, sys
directory, portfile = sys.argv[1], sys.argv[2]
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=directory)
httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
with open(portfile + ".tmp", "w") as f:
    f.write(str(httpd.server_address[1]))
os.rename(portfile + ".tmp", portfile)
httpd.serve_forever()
PY
  python3 "$METRICS_DIR/serve.py" "$METRICS_DIR" "$METRICS_DIR/http.port" >/dev/null 2>&1 3>&- &
  echo $! >"$METRICS_DIR/http.pid"
  local i
  for i in $(seq 1 100); do
    [ -s "$METRICS_DIR/http.port" ] && break
    sleep 0.1
  done
}

teardown_file() {
  [ -n "${METRICS_DIR:-}" ] || return 0
  kill "$(cat "$METRICS_DIR/http.pid")" 2>/dev/null || true
  rm -rf "$METRICS_DIR"
}

setup() {
  HTTP_PORT=$(cat "$METRICS_DIR/http.port" 2>/dev/null || true)
  [ -n "$HTTP_PORT" ] || skip "the loopback test server did not start"
  command -v curl >/dev/null || skip "curl is not installed"
  project_enter egress-metrics
}

teardown() {
  if [ -n "${SERVER:-}" ]; then
    kill "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
  fi
  project_leave
}

# `cordon serve` on the project's unix socket; $SOCKET once it listens.
serve() {
  serve_start
  SOCKET=${ADDR#unix:}
}

scrape() { curl -sS --unix-socket "$SOCKET" http://cordon/metrics; }

# The value of the sample whose name and labels are exactly $1 (0 when absent).
sample() {
  awk -v want="$1" '$1 == want { v = $2 } END { print v == "" ? 0 : v }'
}

# A restricted session: allowed.test and other.test both pinned to the server, only
# allowed.test allowed; loopback opened for it.
restricted_session() {
  "$CORDON" session create --net restricted --allow-domain allowed.test \
    --allow-cidr 127.0.0.0/8 --resolve allowed.test:127.0.0.1 --resolve other.test:127.0.0.1
}

@test "egress metrics: a destroyed session's allowed and refused requests are counted, bytes too" {
  need_ns
  serve
  run -0 scrape
  [ "$(echo "$output" | sample 'sandbox_egress_decisions_total{backend="ns",decision="allowed",rule=""}')" = 0 ]
  id=$(restricted_session)
  [ -n "$id" ]
  # Two allowed (plain HTTP forwarding, and CONNECT), three refused: two unlisted, one IP
  # literal outside every --allow-cidr range.
  run "$CORDON" session exec "$id" -- curl -sS --max-time 20 "http://allowed.test:$HTTP_PORT/hello.txt"
  [[ "$output" == *"hello from loopback"* ]]
  run "$CORDON" session exec "$id" -- curl -sS --max-time 20 -p "http://allowed.test:$HTTP_PORT/hello.txt"
  [[ "$output" == *"hello from loopback"* ]]
  run "$CORDON" session exec "$id" -- curl -sS --max-time 20 "http://other.test:$HTTP_PORT/hello.txt"
  [[ "$output" == *"not-allowlisted"* ]]
  run "$CORDON" session exec "$id" -- curl -sS --max-time 20 "http://other.test:$HTTP_PORT/hello.txt"
  run "$CORDON" session exec "$id" -- curl -sS --max-time 20 "http://10.1.2.3:$HTTP_PORT/hello.txt"
  [[ "$output" == *"ip-literal"* ]]
  # Nothing is counted while the session lives: its log is its own until it ends.
  run -0 scrape
  [ "$(echo "$output" | sample 'sandbox_egress_decisions_total{backend="ns",decision="refused",rule="not-allowlisted"}')" = 0 ]
  "$CORDON" session destroy "$id"
  run -0 scrape
  echo "$output" | grep egress
  [ "$(echo "$output" | sample 'sandbox_egress_decisions_total{backend="ns",decision="allowed",rule=""}')" = 2 ]
  [ "$(echo "$output" | sample 'sandbox_egress_decisions_total{backend="ns",decision="refused",rule="not-allowlisted"}')" = 2 ]
  [ "$(echo "$output" | sample 'sandbox_egress_decisions_total{backend="ns",decision="refused",rule="ip-literal"}')" = 1 ]
  # Bytes: both requests went out (each at least its request line), both replies came back
  # (each at least the file).
  out=$(echo "$output" | sample 'sandbox_egress_bytes_total{backend="ns",direction="out"}')
  in=$(echo "$output" | sample 'sandbox_egress_bytes_total{backend="ns",direction="in"}')
  [ "$out" -ge 60 ]
  [ "$in" -ge 40 ]
  # The project's log has the summary, and no host name: operators' data, not the traffic's.
  grep '"verb": "egress"' .cordon/events.jsonl
  ! grep -q 'allowed.test\|other.test' .cordon/events.jsonl
  run -0 "$CORDON" events
  [[ "$output" == *"egress"*"refused not-allowlisted x2"* ]]
}

@test "egress metrics: a one-shot run counts too; a session without restricted adds no egress line" {
  need_ns
  serve
  run "$CORDON" run --net restricted --allow-domain allowed.test -- \
    curl -sS --max-time 20 "http://blocked.test:$HTTP_PORT/hello.txt"
  [[ "$output" == *"not-allowlisted"* ]]
  run -0 "$CORDON" run -- true
  run -0 scrape
  [ "$(echo "$output" | sample 'sandbox_egress_decisions_total{backend="ns",decision="refused",rule="not-allowlisted"}')" = 1 ]
  [ "$(grep -c '"verb": "egress"' .cordon/events.jsonl)" = 1 ]
}

@test "egress metrics: docker sessions count under their backend" {
  need_docker
  serve
  id=$("$CORDON" session create --backend docker --net restricted --allow-domain allowed.test \
    --allow-cidr 127.0.0.0/8 --resolve allowed.test:127.0.0.1 --resolve other.test:127.0.0.1)
  [ -n "$id" ]
  run "$CORDON" session exec "$id" -- timeout 60 wget -q -O - "http://allowed.test:$HTTP_PORT/hello.txt"
  [[ "$output" == *"hello from loopback"* ]]
  run "$CORDON" session exec "$id" -- timeout 60 wget -q -O - "http://other.test:$HTTP_PORT/hello.txt"
  [ "$status" -ne 0 ]
  "$CORDON" session destroy "$id"
  run -0 scrape
  echo "$output" | grep egress
  [ "$(echo "$output" | sample 'sandbox_egress_decisions_total{backend="docker",decision="allowed",rule=""}')" = 1 ]
  [ "$(echo "$output" | sample 'sandbox_egress_decisions_total{backend="docker",decision="refused",rule="not-allowlisted"}')" = 1 ]
  [ "$(echo "$output" | sample 'sandbox_egress_bytes_total{backend="docker",direction="in"}')" -ge 20 ]
}
