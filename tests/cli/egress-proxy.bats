#!/usr/bin/env bats
# The egress proxy of --net restricted (src/net/) end to end, without a backend: the harness
# tests/unit/net-proxyd serves the proxy on a unix socket and the bridge on a loopback port, as
# a sandbox would have them, and curl and python3 go through the bridge to loopback HTTP and
# HTTPS servers whose names are pinned to 127.0.0.1 with --resolve. Two proxies: "open" opens
# 127.0.0.0/8 with --allow-cidr (the allowed cases), "closed" opens nothing, so the same names
# land on the blocked loopback range. Only loopback traffic, ever.
#
# Needs NET_PROXYD (the harness), curl, python3 and openssl; skips without them.

# A proxy+bridge instance: name, then the harness's options. Exports NAME_PORT (the bridge).
start_proxy() {
  local name=$1
  shift
  local dir=$SCRATCH/$name
  mkdir -p "$dir"
  "$NET_PROXYD" --socket "$dir/proxy.sock" --port-file "$dir/port" --events "$dir/events.jsonl" \
    --confine "$@" 2>"$dir/stderr" 3>&- &
  echo $! >"$dir/pid"
  for _ in $(seq 1 100); do
    [ -s "$dir/port" ] && break
    sleep 0.1
  done
  [ -s "$dir/port" ] || {
    echo "# the $name proxy did not start" >&3
    return 1
  }
  export "${name^^}_PORT=$(cat "$dir/port")"
}

start_server() { # port-file [cert key]
  python3 "$SCRATCH/server.py" "$@" 3>&- &
  echo $! >>"$SCRATCH/server.pids"
  for _ in $(seq 1 100); do
    [ -s "$1" ] && return 0
    sleep 0.1
  done
  return 1
}

setup_file() {
  [ -n "${NET_PROXYD:-}" ] && [ -x "$NET_PROXYD" ] || return 0
  command -v curl >/dev/null && command -v python3 >/dev/null && command -v openssl >/dev/null ||
    return 0
  SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/cordon-egress.XXXXXX")
  export SCRATCH
  cat >"$SCRATCH/server.py" <<'PY'
import http.server, os, ssl, sys
class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("hello %s %s\n" % (self.headers.get("Host"), self.path)).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
if len(sys.argv) > 2:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[2], sys.argv[3])
    server.socket = context.wrap_socket(server.socket, server_side=True)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
server.serve_forever()
PY
  # A CA of our own and a leaf for api.example.com signed by it.
  (
    cd "$SCRATCH"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
      -subj /CN=cordon-test-ca -keyout ca.key -out ca.pem
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
      -subj /CN=api.example.com -keyout leaf.key -out leaf.csr
    printf 'subjectAltName=DNS:api.example.com,DNS:www.pkg.example\n' >leaf.ext
    openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
      -extfile leaf.ext -out leaf.pem
  ) >/dev/null 2>&1
  start_server "$SCRATCH/http.port"
  start_server "$SCRATCH/https.port" "$SCRATCH/leaf.pem" "$SCRATCH/leaf.key"
  HTTP_PORT=$(cat "$SCRATCH/http.port")
  HTTPS_PORT=$(cat "$SCRATCH/https.port")
  export HTTP_PORT HTTPS_PORT
  local rules=(--allow-domain api.example.com --allow-domain '*.pkg.example'
    --allow-domain pinned2.example --allow-domain mapped.example
    --resolve api.example.com:127.0.0.1 --resolve www.pkg.example:127.0.0.1
    --resolve pkg.example:127.0.0.1 --resolve pinned2.example:127.0.0.2
    --resolve 'mapped.example:[::ffff:127.0.0.1]' --resolve unlisted.example:127.0.0.1)
  start_proxy open "${rules[@]}" --allow-cidr 127.0.0.0/8
  start_proxy closed "${rules[@]}"
  start_proxy small "${rules[@]}" --allow-cidr 127.0.0.0/8 --max-connections 2 \
    --header-timeout-ms 1500
}

teardown_file() {
  [ -n "${SCRATCH:-}" ] || return 0
  local pid
  for pid in $(cat "$SCRATCH"/*/pid "$SCRATCH/server.pids" 2>/dev/null); do
    kill "$pid" 2>/dev/null || true
  done
  # The proxies stop on SIGTERM and report anything amiss (a sanitizer's finding) on stderr.
  for pid in $(cat "$SCRATCH"/*/pid); do
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null && [ "$(ps -o stat= -p "$pid")" != Z ] || break
      sleep 0.1
    done
  done
  local said=0
  for name in open closed small; do
    if [ -s "$SCRATCH/$name/stderr" ]; then
      echo "# the $name proxy said:" >&3
      sed 's/^/# /' "$SCRATCH/$name/stderr" >&3
      said=1
    fi
  done
  rm -rf "$SCRATCH"
  [ "$said" -eq 0 ]
}

setup() {
  [ -n "${NET_PROXYD:-}" ] && [ -x "$NET_PROXYD" ] || skip "NET_PROXYD (tests/unit/net-proxyd) not set"
  command -v curl >/dev/null || skip "curl not installed"
  command -v python3 >/dev/null || skip "python3 not installed"
  command -v openssl >/dev/null || skip "openssl not installed"
  [ -n "${OPEN_PORT:-}" ] || skip "the proxies did not start"
}

# curl through a proxy instance: instance, then curl's arguments.
via() {
  local port_var="${1^^}_PORT"
  shift
  curl -sS --max-time 20 --noproxy '' -x "http://127.0.0.1:${!port_var}" "$@"
}

events_of() { cat "$SCRATCH/$1/events.jsonl"; }

@test "egress: HTTPS through CONNECT to an allowed name, checked against our own CA" {
  run via open --cacert "$SCRATCH/ca.pem" "https://api.example.com:$HTTPS_PORT/tls"
  [ "$status" -eq 0 ]
  [ "$output" = "hello api.example.com:$HTTPS_PORT /tls" ]
  # The tunnel is byte for byte: the certificate the client checked is the server's.
  run via open "https://api.example.com:$HTTPS_PORT/tls"
  [ "$status" -ne 0 ]
}

@test "egress: plain HTTP is forwarded with the head rewritten to origin-form" {
  run via open -f -H 'Proxy-Authorization: Basic c2VjcmV0' "http://API.Example.com.:$HTTP_PORT/a?b=1"
  [ "$status" -eq 0 ]
  [ "$output" = "hello API.Example.com.:$HTTP_PORT /a?b=1" ]
}

@test "egress: SOCKS5 with remote name resolution (curl --socks5-hostname)" {
  run curl -sS --max-time 20 --noproxy '' --socks5-hostname "127.0.0.1:$OPEN_PORT" \
    "http://www.pkg.example:$HTTP_PORT/socks"
  [ "$status" -eq 0 ]
  [ "$output" = "hello www.pkg.example:$HTTP_PORT /socks" ]
  run curl -sS --max-time 20 --noproxy '' --cacert "$SCRATCH/ca.pem" \
    -x "socks5h://127.0.0.1:$OPEN_PORT" "https://api.example.com:$HTTPS_PORT/socks-tls"
  [ "$status" -eq 0 ]
  [ "$output" = "hello api.example.com:$HTTPS_PORT /socks-tls" ]
}

@test "egress: python3 urllib through HTTP_PROXY and HTTPS_PROXY" {
  run env HTTP_PROXY="http://127.0.0.1:$OPEN_PORT" HTTPS_PROXY="http://127.0.0.1:$OPEN_PORT" \
    NO_PROXY= CA="$SCRATCH/ca.pem" python3 -c '
import os, ssl, sys, urllib.request
context = ssl.create_default_context(cafile=os.environ["CA"])
for url in sys.argv[1:]:
    print(urllib.request.urlopen(url, timeout=20, context=context).read().decode().strip())
' "http://api.example.com:$HTTP_PORT/py" "https://api.example.com:$HTTPS_PORT/pys"
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "hello api.example.com:$HTTP_PORT /py" ]
  [ "${lines[1]}" = "hello api.example.com:$HTTPS_PORT /pys" ]
}

@test "egress: an allowed connection is one event, with its address and bytes" {
  via open -f "http://api.example.com:$HTTP_PORT/logged" >/dev/null
  run events_of open
  echo "$output" | grep '"host":"api.example.com"' | grep -q "\"port\":$HTTP_PORT"
  echo "$output" | grep "\"port\":$HTTP_PORT" |
    grep '"kind":"egress"' | grep '"address":"127.0.0.1"' | grep '"decision":"allowed"' |
    grep -q '"bytes_in":[1-9]'
}

@test "egress: an unlisted name is refused with 403 naming the rule, and logged" {
  run via open -i "http://unlisted.example:$HTTP_PORT/"
  [[ "$output" == *"HTTP/1.1 403 Forbidden"* ]]
  [[ "$output" == *"by rule not-allowlisted"* ]]
  run via open --cacert "$SCRATCH/ca.pem" "https://unlisted.example:$HTTPS_PORT/"
  [ "$status" -ne 0 ]
  [[ "$output" == *403* ]]
  events_of open | grep '"host":"unlisted.example"' | grep '"decision":"refused"' |
    grep -q '"rule":"not-allowlisted"'
}

@test "egress: a subdomain rule does not open its apex" {
  run via open -f "http://pkg.example:$HTTP_PORT/"
  [ "$status" -ne 0 ]
  [[ "$output" == *403* ]]
  events_of open | grep '"host":"pkg.example"' | grep -q '"rule":"not-allowlisted"'
}

@test "egress: an IP literal is refused unless --allow-cidr opens it, odd spellings always" {
  run via closed -i "http://127.0.0.1:$HTTP_PORT/"
  [[ "$output" == *"403 Forbidden"* ]]
  [[ "$output" == *"rule ip-literal"* ]]
  run via closed -i --cacert "$SCRATCH/ca.pem" "https://[::ffff:127.0.0.1]:$HTTPS_PORT/"
  [ "$status" -ne 0 ]
  [[ "$output" == *403* ]]
  # curl rewrites these spellings itself, so they go in by hand, as a client might send them.
  run python3 - "$OPEN_PORT" "$HTTP_PORT" <<'PY'
import socket, sys
for odd in ["2130706433", "0177.0.0.1", "0x7f.1", "127.1", "127.0.0.1."]:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
    s.sendall(b"GET http://%s:%s/ HTTP/1.1\r\n\r\n" % (odd.encode(), sys.argv[2].encode()))
    reply = b""
    while chunk := s.recv(4096):
        reply += chunk
    print(odd, reply.split(b"\r\n")[0].decode(), b"rule non-canonical-literal" in reply)
PY
  [ "$status" -eq 0 ]
  [ "${#lines[@]}" -eq 5 ]
  for line in "${lines[@]}"; do
    [[ "$line" == *" HTTP/1.1 403 Forbidden True" ]]
  done
  run via open -f "http://127.0.0.1:$HTTP_PORT/literal"
  [ "$status" -eq 0 ]
}

@test "egress: names pinned to loopback (127.0.0.2, ::ffff:127.0.0.1) stay blocked without --allow-cidr" {
  for name in api.example.com pinned2.example mapped.example; do
    run via closed -i "http://$name:$HTTP_PORT/"
    [[ "$output" == *"403 Forbidden"* ]]
    [[ "$output" == *"rule blocked-range:loopback"* ]]
  done
  run curl -sS --max-time 20 --noproxy '' --socks5-hostname "127.0.0.1:$CLOSED_PORT" \
    "http://mapped.example:$HTTP_PORT/"
  [ "$status" -ne 0 ]
  # curl reports the SOCKS5 reply code: 2, "connection not allowed by ruleset".
  [[ "$output" == *"(2)"* ]]
  events_of closed | grep '"host":"mapped.example"' | grep -q '"rule":"blocked-range:loopback"'
  # The same names through the open proxy: 127.0.0.2 has no server, the mapped form does.
  run via open -f "http://mapped.example:$HTTP_PORT/mapped"
  [ "$status" -eq 0 ]
  [ "$output" = "hello mapped.example:$HTTP_PORT /mapped" ]
}

@test "egress: a stalled client delays no one, and its head times out" {
  python3 - "$SMALL_PORT" "$SCRATCH/stalled" <<'PY' &
import socket, sys, time
port = int(sys.argv[1])
silent = socket.create_connection(("127.0.0.1", port))
half = socket.create_connection(("127.0.0.1", port))
half.sendall(b"CONNECT api.example.com:443 HTTP/1.1\r\nHost: x")
open(sys.argv[2], "w").close()
time.sleep(8)
PY
  local stalls=$!
  for _ in $(seq 1 100); do
    [ -e "$SCRATCH/stalled" ] && break
    sleep 0.1
  done
  sleep 0.3 # the proxy accepts them: bridge, then unix socket
  # Both slots of the small proxy are taken: a third client is turned away at once.
  run curl -sS --max-time 5 --noproxy '' -x "http://127.0.0.1:$SMALL_PORT" "http://api.example.com:$HTTP_PORT/"
  [ "$status" -ne 0 ]
  events_of small | grep -q '"rule":"too-many-connections"'
  # The open proxy, shared by nobody stalled, answers while those two wait.
  run via open -f "http://api.example.com:$HTTP_PORT/while-stalled"
  [ "$status" -eq 0 ]
  # After the header timeout (1.5 s) both are refused and the slots free again (polled for up
  # to 20 s: on a loaded machine the proxy's timer and the bridge's close take their time).
  sleep 1.5
  for _ in $(seq 1 40); do
    [ "$(events_of small | grep -c '"rule":"timeout"')" -ge 2 ] && break
    sleep 0.5
  done
  [ "$(events_of small | grep -c '"rule":"timeout"')" -ge 2 ]
  for _ in $(seq 1 20); do
    run curl -sS --max-time 10 --noproxy '' -x "http://127.0.0.1:$SMALL_PORT" "http://api.example.com:$HTTP_PORT/after"
    [ "$status" -eq 0 ] && break
    sleep 0.5
  done
  [ "$status" -eq 0 ]
  [ "$output" = "hello api.example.com:$HTTP_PORT /after" ]
  kill "$stalls" 2>/dev/null || true
}

@test "egress: a malformed request is refused with 400, and SOCKS4 or SOCKS5 with auth only gets nothing" {
  run python3 - "$OPEN_PORT" <<'PY'
import socket, sys
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(b"GET /relative HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
print(s.recv(4096).split(b"\r\n")[0].decode())
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(b"\x05\x01\x02")
print(s.recv(16).hex())
PY
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "HTTP/1.1 400 Bad Request" ]
  [ "${lines[1]}" = "05ff" ]
}

@test "egress: a half-close passes through bridge and proxy, and the reply still comes back" {
  run python3 - "$OPEN_PORT" <<'PY'
import socket, sys, threading
# A server that reads to end of file, then answers with what it counted, then closes.
server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(1)
def answer():
    c, _ = server.accept()
    total = 0
    while chunk := c.recv(65536):
        total += len(chunk)
    c.sendall(b"got %d\n" % total)
    c.close()
threading.Thread(target=answer, daemon=True).start()
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
s.sendall(b"CONNECT api.example.com:%d HTTP/1.1\r\n\r\n" % server.getsockname()[1])
head = b""
while not head.endswith(b"\r\n\r\n"):
    head += s.recv(1)
print(head.split(b"\r\n")[0].decode())
s.sendall(b"x" * 3000000)
s.shutdown(socket.SHUT_WR)
reply = b""
while chunk := s.recv(4096):
    reply += chunk
print(reply.decode().strip())
PY
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "HTTP/1.1 200 Connection established" ]
  [ "${lines[1]}" = "got 3000000" ]
}

@test "bench/egress measures a bulk download and new connections, direct and through the proxy" {
  [ -n "${CORDON_BUILD_ROOT:-}" ] && [ -f "$CORDON_BUILD_ROOT/libcordon.a" ] ||
    skip "CORDON_BUILD_ROOT with libcordon.a not set"
  command -v cc >/dev/null || skip "no C compiler to build bench/egress.c"
  run "$CORDON_SOURCE_ROOT/bench/egress" "$CORDON_BUILD_ROOT" 16777216 20
  [ "$status" -eq 0 ]
  [[ "${lines[0]}" == "bulk 16777216 bytes: direct "*" MB/s; through the proxy (ns) "*"x; through bridge+proxy (docker) "*x ]]
  [[ "${lines[1]}" == "new connection to first byte, median of 20: direct "*" ms; through the proxy "*" ms: +"*" ms; through bridge+proxy "*" ms: +"*" ms" ]]
  # One path alone (for a timer that alternates runs), and a path it does not know.
  run "$CORDON_SOURCE_ROOT/bench/egress" "$CORDON_BUILD_ROOT" 16777216 1 proxy
  [ "$status" -eq 0 ]
  [[ "$output" == "proxy: "*" MB/s" ]]
  run "$CORDON_SOURCE_ROOT/bench/egress" "$CORDON_BUILD_ROOT" 16777216 1 sideways
  [ "$status" -eq 2 ]
}
