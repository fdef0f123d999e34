#!/usr/bin/env bats
# Egress class restricted (issue 20): only lo inside, a proxy outside that lets through the
# --allow-domain names. Every byte of test traffic goes to loopback servers this file starts on
# the host (HTTP, and HTTPS with a CA made here), reached through names pinned with --resolve;
# the blocked ranges are tested through names pinned to loopback addresses no --allow-cidr
# opened. A UDP query goes nowhere: it never leaves the sandbox's own network namespace.

load common

setup_file() {
  backends_check_once ns docker
  export EGRESS_DIR
  EGRESS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/cordon-egress-servers.XXXXXX")
  local d=$EGRESS_DIR
  echo "hello from loopback" >"$d/hello.txt"
  # A CA and a server certificate for the test names, made here.
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/ca.key" -out "$d/ca.pem" -days 2 \
    -subj "/CN=cordon egress test CA" >/dev/null 2>&1
  openssl req -newkey rsa:2048 -nodes -keyout "$d/server.key" -out "$d/server.csr" \
    -subj "/CN=allowed.test" >/dev/null 2>&1
  printf 'subjectAltName=DNS:allowed.test,DNS:api.allowed.test,DNS:other.test\n' >"$d/ext"
  openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
    -out "$d/server.pem" -days 2 -extfile "$d/ext" >/dev/null 2>&1
  cat >"$d/serve.py" <<'PY'
import http.server, socketserver, ssl, sys, os, functools
kind, directory, portfile = sys.argv[1], sys.argv[2], sys.argv[3]
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=directory)
class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
httpd = Server(("127.0.0.1", 0), handler)
if kind == "https":
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(directory, "server.pem"), os.path.join(directory, "server.key"))
    httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True)
with open(portfile + ".tmp", "w") as f:
    f.write(str(httpd.server_address[1]))
os.rename(portfile + ".tmp", portfile)
httpd.serve_forever()
PY
  python3 "$d/serve.py" http "$d" "$d/http.port" >/dev/null 2>&1 3>&- &
  echo $! >"$d/http.pid"
  python3 "$d/serve.py" https "$d" "$d/https.port" >/dev/null 2>&1 3>&- &
  echo $! >"$d/https.pid"
  local i
  for i in $(seq 1 100); do
    [ -s "$d/http.port" ] && [ -s "$d/https.port" ] && break
    sleep 0.1
  done
}

teardown_file() {
  [ -n "${EGRESS_DIR:-}" ] || return 0
  kill "$(cat "$EGRESS_DIR/http.pid")" "$(cat "$EGRESS_DIR/https.pid")" 2>/dev/null || true
  rm -rf "$EGRESS_DIR"
}

setup() {
  HTTP_PORT=$(cat "$EGRESS_DIR/http.port" 2>/dev/null || true)
  HTTPS_PORT=$(cat "$EGRESS_DIR/https.port" 2>/dev/null || true)
  [ -n "$HTTP_PORT" ] && [ -n "$HTTPS_PORT" ] || skip "the loopback test servers did not start"
  project_enter egress
}

teardown() {
  project_leave
}

# cordon run --net restricted with allowed.test (and other.test) pinned to the host's loopback
# and loopback opened: "$@" are extra options, then -- and the command.
run_allowed() {
  run "$CORDON" run --net restricted --allow-domain allowed.test --allow-cidr 127.0.0.0/8 \
    --resolve allowed.test:127.0.0.1 --resolve other.test:127.0.0.1 \
    --file ca.pem="$EGRESS_DIR/ca.pem" "$@"
}

need_tools() {
  command -v curl >/dev/null || skip "curl not installed"
  [ -x /usr/bin/python3 ] || skip "/usr/bin/python3 not installed"
}

# ---- usage ------------------------------------------------------------------------------------

@test "egress usage: --allow-domain, --allow-cidr, --resolve need --net restricted" {
  run "$CORDON" session create --allow-domain example.com
  [ "$status" -eq 2 ]
  [[ "$output" == *"--allow-domain"*"--net restricted"* ]]
  run "$CORDON" session create --net loopback --allow-cidr 10.0.0.0/8
  [ "$status" -eq 2 ]
  [[ "$output" == *"--allow-cidr"*"--net restricted"* ]]
  run "$CORDON" run --resolve a.test:127.0.0.1 -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"--resolve"*"--net restricted"* ]]
  [ ! -d .cordon/sessions ] || [ -z "$(ls .cordon/sessions)" ]
}

@test "egress usage: a bad allowlist entry is refused, named" {
  need_ns
  run "$CORDON" run --net restricted --allow-domain '*' -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"--allow-domain *"* ]]
  run "$CORDON" session create --net restricted --allow-cidr 10.0.0.0/99
  [ "$status" -ne 0 ]
  [[ "$output" == *"10.0.0.0/99"* ]]
}

@test "egress: --help names the options, cordon backends lists restricted for ns and docker" {
  run "$CORDON" run --help
  [[ "$output" == *"--allow-domain NAME"* && "$output" == *"--allow-cidr CIDR"* ]]
  [[ "$output" == *"--resolve NAME:ADDR"* ]]
  run "$CORDON" backends --json
  [ "$status" -eq 0 ]
  python3 -c '
import json, sys
b = {x["name"]: x for x in json.loads(sys.argv[1])}
assert "restricted" in b["ns"]["egress"], b["ns"]
assert "restricted" in b["docker"]["egress"], b["docker"]
assert "restricted" not in b["worktree"]["egress"]
for x in b.values():
    if "egress" in x:
        assert ("restricted" in x["egress"]) == ("net_restricted" in x["enforces"]), x
' "$output"
}

# ---- what gets through --------------------------------------------------------------------------

@test "egress ns: the command gets the proxy variables and only lo" {
  need_ns
  run "$CORDON" run --net restricted -- sh -c 'env; cat /proc/net/dev'
  [ "$status" -eq 0 ]
  [[ "$output" == *"HTTP_PROXY=http://127.0.0.1:3128"* ]]
  [[ "$output" == *"HTTPS_PROXY="* && "$output" == *"ALL_PROXY=socks5h://127.0.0.1:3128"* ]]
  [[ "$output" == *"NO_PROXY=localhost,127.0.0.1"* ]]
  [[ "$output" == *"lo:"* ]]
  [ "$(echo "$output" | grep -c ':.*[0-9]' | head -1)" -ge 1 ]
  ! echo "$output" | grep -Eq '^ *(eth|ens|enp|veth|wl)[^ ]*:'
}

@test "egress ns: an allowed name works through curl (CONNECT, forwarding, SOCKS5) and urllib" {
  need_ns
  need_tools
  run_allowed -- curl -sS --max-time 20 --cacert ca.pem "https://allowed.test:$HTTPS_PORT/hello.txt"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"hello from loopback"* ]]
  run_allowed -- curl -sS --max-time 20 "http://allowed.test:$HTTP_PORT/hello.txt"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"hello from loopback"* ]]
  run_allowed -- curl -sS --max-time 20 --socks5-hostname 127.0.0.1:3128 \
    "http://allowed.test:$HTTP_PORT/hello.txt"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"hello from loopback"* ]]
  run_allowed -- /usr/bin/python3 -c "import urllib.request
print(urllib.request.urlopen('http://allowed.test:$HTTP_PORT/hello.txt', timeout=20).read().decode())"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"hello from loopback"* ]]
}

# ---- what does not --------------------------------------------------------------------------------

@test "egress ns: an unlisted name is refused with 403 naming the rule" {
  need_ns
  need_tools
  run_allowed -- curl -sS --max-time 20 -o /dev/null -w '%{http_code}' \
    "http://other.test:$HTTP_PORT/hello.txt"
  echo "$output"
  [[ "$output" == *403* ]]
  run_allowed -- curl -sS --max-time 20 --cacert ca.pem "https://other.test:$HTTPS_PORT/hello.txt"
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" != *"hello from loopback"* ]]
  run_allowed -- curl -sS --max-time 20 --socks5-hostname 127.0.0.1:3128 \
    "http://other.test:$HTTP_PORT/hello.txt"
  [ "$status" -ne 0 ]
  [[ "$output" != *"hello from loopback"* ]]
}

@test "egress ns: a subdomain rule does not open its apex" {
  need_ns
  need_tools
  run "$CORDON" run --net restricted --allow-domain '*.allowed.test' --allow-cidr 127.0.0.0/8 \
    --resolve allowed.test:127.0.0.1 -- curl -sS --max-time 20 "http://allowed.test:$HTTP_PORT/hello.txt"
  echo "$output"
  [ "$status" -ne 0 ] || [[ "$output" != *"hello from loopback"* ]]
  [[ "$output" != *"hello from loopback"* ]]
}

@test "egress ns: an IP literal is refused without --allow-cidr" {
  need_ns
  need_tools
  run "$CORDON" run --net restricted --allow-domain allowed.test -- \
    curl -sS --max-time 20 --noproxy '' -x http://127.0.0.1:3128 -w '\n%{http_code}\n' \
    "http://127.0.0.1:$HTTP_PORT/hello.txt"
  echo "$output"
  [[ "$output" != *"hello from loopback"* ]]
  [[ "$output" == *403* ]]
}

@test "egress ns: an allowed name pinned to 127.0.0.2 or ::ffff:127.0.0.1 is refused" {
  need_ns
  need_tools
  run "$CORDON" run --net restricted --allow-domain allowed.test --resolve allowed.test:127.0.0.2 -- \
    curl -sS --fail --max-time 20 "http://allowed.test:$HTTP_PORT/hello.txt"
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" != *"hello from loopback"* ]]
  run "$CORDON" run --net restricted --allow-domain allowed.test \
    --resolve 'allowed.test:[::ffff:127.0.0.1]' -- \
    curl -sS --fail --max-time 20 "http://allowed.test:$HTTP_PORT/hello.txt"
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" != *"hello from loopback"* ]]
}

@test "egress ns: no direct TCP to the host's loopback, no UDP DNS" {
  need_ns
  [ -x /usr/bin/python3 ] || skip "/usr/bin/python3 not installed"
  # The sandbox's 127.0.0.1 is its own: the host's server is not there.
  run_allowed -- /usr/bin/python3 -c "import socket
try:
    socket.create_connection(('127.0.0.1', $HTTP_PORT), timeout=5)
    print('CONNECTED')
except OSError as e:
    print('refused', e)"
  echo "$output"
  [[ "$output" == *refused* && "$output" != *CONNECTED* ]]
  # A DNS query over UDP: no route out of the sandbox's namespace (it never reaches a wire).
  run_allowed -- /usr/bin/python3 -c "import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(3)
try:
    s.sendto(b'\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01', ('192.0.2.53', 53))
    s.recvfrom(512)
    print('ANSWERED')
except OSError as e:
    print('failed', e)"
  echo "$output"
  [[ "$output" == *failed* && "$output" != *ANSWERED* ]]
}

@test "egress ns: a stalled client does not block others; the proxy's socket is not inside" {
  need_ns
  need_tools
  # One connection to the proxy that never sends a byte, then a request beside it.
  run_allowed -- /usr/bin/python3 -c "import socket, subprocess
stalled = socket.create_connection(('127.0.0.1', 3128), timeout=5)
r = subprocess.run(['curl', '-sS', '--max-time', '20', 'http://allowed.test:$HTTP_PORT/hello.txt'],
                   capture_output=True, text=True)
print(r.stdout, r.stderr)
stalled.close()"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"hello from loopback"* ]]
  # Nothing of the host side is mounted in: no unix socket of the proxy anywhere inside.
  run_allowed -- sh -c 'find / -xdev -name egress.sock 2>/dev/null; find /tmp /run /workspace -type s 2>/dev/null; echo done'
  echo "$output"
  [ "$output" = done ]
}

# ---- the event log and the proxy's life ------------------------------------------------------------

# The egress daemons (their comm) holding session $1's event log open.
egress_pids() {
  local pid
  for pid in $(pgrep -x cordon-egress 2>/dev/null); do
    ls -l "/proc/$pid/fd" 2>/dev/null | grep -q "sessions/$1/events.jsonl" && echo "$pid"
  done
  return 0
}

# Whether process $1 is gone (a zombie waiting for init counts as gone).
gone() {
  [ ! -e "/proc/$1" ] || [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]
}

@test "egress ns: a held session's refusals are in its event log; its proxy ends with it" {
  need_ns
  need_tools
  local id pids pid i
  id=$("$CORDON" session create --net restricted --allow-domain allowed.test \
    --allow-cidr 127.0.0.0/8 --resolve allowed.test:127.0.0.1 --resolve other.test:127.0.0.1)
  [ -n "$id" ]
  [ -f ".cordon/sessions/$id/events.jsonl" ]
  run "$CORDON" session exec "$id" -- curl -sS --max-time 20 "http://allowed.test:$HTTP_PORT/hello.txt"
  [[ "$output" == *"hello from loopback"* ]]
  run "$CORDON" session exec "$id" -- curl -sS --max-time 20 "http://other.test:$HTTP_PORT/hello.txt"
  [[ "$output" != *"hello from loopback"* ]]
  # The log is written as the proxy decides: give it a moment under load.
  for i in $(seq 1 50); do
    grep -q other.test ".cordon/sessions/$id/events.jsonl" && break
    sleep 0.1
  done
  cat ".cordon/sessions/$id/events.jsonl"
  grep other.test ".cordon/sessions/$id/events.jsonl" | grep -q not-allowlisted
  grep allowed.test ".cordon/sessions/$id/events.jsonl" | grep -v other.test | grep -q allowed
  pids=$(egress_pids "$id")
  [ -n "$pids" ]
  "$CORDON" session destroy "$id"
  for pid in $pids; do
    for i in $(seq 1 100); do
      gone "$pid" && break
      sleep 0.1
    done
    gone "$pid"
  done
}

@test "egress ns: a one-shot run's proxy is gone after the run" {
  need_ns
  local before after pid i
  before=$(pgrep -x cordon-egress | sort || true)
  run "$CORDON" run --net restricted -- true
  [ "$status" -eq 0 ]
  for i in $(seq 1 100); do
    after=$(pgrep -x cordon-egress | sort || true)
    new=$(comm -13 <(echo "$before") <(echo "$after") | while read -r pid; do
      if [ -n "$pid" ] && ! gone "$pid"; then echo "$pid"; fi
    done)
    [ -z "$new" ] && break
    sleep 0.1
  done
  [ -z "$new" ]
}

# ---- cordon agent --mechanism ns ------------------------------------------------------------------

@test "egress agent ns: allowed through the proxy, others refused (flags and policy file)" {
  need_ns
  need_tools
  run "$CORDON" agent --mechanism ns --net restricted --allow-domain allowed.test \
    --allow-cidr 127.0.0.0/8 --resolve allowed.test:127.0.0.1 --resolve other.test:127.0.0.1 -- \
    sh -c "curl -sS --max-time 20 http://allowed.test:$HTTP_PORT/hello.txt; echo; \
      curl -sS --max-time 20 -w '%{http_code}' http://other.test:$HTTP_PORT/hello.txt"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"hello from loopback"* ]]
  [[ "$output" == *"not-allowlisted"*403* ]]
  cat >policy.yaml <<YAML
net: restricted
allow_domains: [allowed.test]
allow_cidrs: [127.0.0.0/8]
resolve: [allowed.test:127.0.0.1]
YAML
  run "$CORDON" agent --mechanism ns --policy policy.yaml -- \
    curl -sS --max-time 20 "http://allowed.test:$HTTP_PORT/hello.txt"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"hello from loopback"* ]]
  # Direct connections go nowhere: the agent's 127.0.0.1 is its own.
  run "$CORDON" agent --mechanism ns --policy policy.yaml -- \
    /usr/bin/python3 -c "import socket
try:
    socket.create_connection(('127.0.0.1', $HTTP_PORT), timeout=5); print('CONNECTED')
except OSError as e:
    print('refused', e)"
  echo "$output"
  [[ "$output" == *refused* && "$output" != *CONNECTED* ]]
}

@test "egress agent: rules without restricted are a usage error; other mechanisms refuse it" {
  run "$CORDON" agent --allow-domain allowed.test -- true
  [ "$status" -eq 2 ]
  [[ "$output" == *"--allow-domain"*"--net restricted"* ]]
  printf 'allow_domains: [allowed.test]\n' >policy.yaml
  run "$CORDON" agent --policy policy.yaml -- true
  [ "$status" -eq 2 ]
  [[ "$output" == *"allow_domains"*"restricted"* ]]
  run "$CORDON" agent --mechanism bwrap --net restricted -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"restricted"*"mechanism ns"* ]]
  run "$CORDON" agent --mechanism landlock --net restricted -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *"restricted"*"mechanism ns"* ]]
}

# ---- the proxy's own confinement ------------------------------------------------------------------

# The root of the proxy's daemon process $1 as root sees it (/proc/PID/root): its own mount
# namespace, a tmpfs with only what name resolution reads.
@test "egress: the proxy's daemon sees no host file system (no /root, no project, no passwd)" {
  need_ns
  [ "$(id -u)" -eq 0 ] || skip "the proxy gets its own mount namespace only when cordon runs as root"
  local id pids pid root
  echo secret >"$PROJECT/project-file"
  id=$("$CORDON" session create --net restricted --allow-domain allowed.test)
  [ -n "$id" ]
  pids=$(egress_pids "$id")
  [ -n "$pids" ]
  for pid in $pids; do
    root=/proc/$pid/root
    ls -la "$root" "$root/etc"
    [ -e "$root/etc/resolv.conf" ] || [ ! -e /etc/resolv.conf ]
    [ ! -e "$root/root" ]
    [ ! -e "$root/home" ]
    [ ! -e "$root/proc" ]
    [ ! -e "$root/etc/passwd" ]
    [ ! -e "$root/etc/shadow" ]
    [ ! -e "$root$PROJECT/project-file" ]
    [ ! -e "$root$PROJECT" ]
    # Read-only: nothing can be written into its root.
    ! touch "$root/planted" 2>/dev/null
    ! touch "$root/etc/hosts" 2>/dev/null
  done
  "$CORDON" session destroy "$id"
}

@test "egress: the daemon is a fresh exec of cordon, not the fork's copy of a caller's threads" {
  need_ns
  local id pids pid cmdline fd target
  id=$("$CORDON" session create --net restricted --allow-domain allowed.test)
  [ -n "$id" ]
  pids=$(egress_pids "$id")
  [ -n "$pids" ]
  for pid in $pids; do
    # A fork's copy would carry the caller's argv ("session create ..."); an exec, its own.
    cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline")
    echo "daemon $pid: $cmdline"
    [ "$cmdline" = "cordon-egress --cordon-internal-egress-daemon bridge " ]
    # It holds only what it serves with: null stdio, sockets, the event log, its own pipes.
    for fd in /proc/"$pid"/fd/*; do
      target=$(readlink "$fd")
      echo "  $fd -> $target"
      [[ "$target" =~ ^(/dev/null|socket:.*|pipe:.*|anon_inode:.*|.*/events\.jsonl)$ ]]
    done
  done
  "$CORDON" session destroy "$id"
}

@test "egress: the daemon's internal entry run by hand is refused in one line, exit 2" {
  run "$CORDON" --cordon-internal-egress-daemon bridge
  echo "$output"
  [ "$status" -eq 2 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"not meant to be run by hand"* ]]
  run "$CORDON" --cordon-internal-egress-daemon other
  [ "$status" -eq 2 ]
}

# ---- docker ---------------------------------------------------------------------------------------

@test "egress docker: only lo, the proxy variables, an allowed name works, others get 403" {
  need_docker
  local id i
  id=$("$CORDON" session create --backend docker --net restricted --allow-domain allowed.test \
    --allow-cidr 127.0.0.0/8 --resolve allowed.test:127.0.0.1 --resolve other.test:127.0.0.1)
  [ -n "$id" ]
  run "$CORDON" session exec "$id" -- sh -c 'env; cat /proc/net/dev'
  [ "$status" -eq 0 ]
  [[ "$output" == *"HTTP_PROXY=http://127.0.0.1:3128"* ]]
  [[ "$output" == *"ALL_PROXY=socks5h://127.0.0.1:3128"* && "$output" == *"NO_PROXY=localhost,127.0.0.1"* ]]
  ! echo "$output" | grep -Eq '^ *(eth|ens|enp|veth|wl)[^ ]*:'
  # HTTP forwarding through init's bridge and the host's proxy (busybox wget uses http_proxy).
  run "$CORDON" session exec "$id" -- timeout 60 wget -q -O - "http://allowed.test:$HTTP_PORT/hello.txt"
  echo "$output"
  [ "$status" -eq 0 ]
  [[ "$output" == *"hello from loopback"* ]]
  run "$CORDON" session exec "$id" -- timeout 60 wget -q -O - "http://other.test:$HTTP_PORT/hello.txt"
  echo "$output"
  [ "$status" -ne 0 ]
  [[ "$output" != *"hello from loopback"* ]]
  # An IP literal without --allow-cidr for it: refused too (127.0.0.0/8 is open, so name one
  # outside it that nothing answers on; the proxy refuses before connecting).
  run "$CORDON" session exec "$id" -- timeout 60 wget -q -O - "http://10.0.0.1:$HTTP_PORT/hello.txt"
  [ "$status" -ne 0 ]
  for i in $(seq 1 50); do
    grep -q other.test ".cordon/sessions/$id/events.jsonl" && break
    sleep 0.1
  done
  cat ".cordon/sessions/$id/events.jsonl"
  grep other.test ".cordon/sessions/$id/events.jsonl" | grep -q not-allowlisted
  grep '"host":"allowed.test"' ".cordon/sessions/$id/events.jsonl" | grep -q '"decision":"allowed"'
  grep -q '"host":"10.0.0.1".*"decision":"refused"' ".cordon/sessions/$id/events.jsonl"
  "$CORDON" session destroy "$id"
}

@test "egress docker: no direct TCP past the bridge; the bridge outlives an exec's orphans" {
  need_docker
  local id
  id=$("$CORDON" session create --backend docker --net restricted --allow-domain allowed.test \
    --allow-cidr 127.0.0.0/8 --resolve allowed.test:127.0.0.1)
  [ -n "$id" ]
  # Without the proxy: the container's 127.0.0.1 is its own, the host's server is not there,
  # and no other address has a route.
  run "$CORDON" session exec "$id" -- timeout 60 wget -Y off -q -O - "http://127.0.0.1:$HTTP_PORT/hello.txt"
  [ "$status" -ne 0 ]
  [[ "$output" != *"hello from loopback"* ]]
  run "$CORDON" session exec "$id" -- timeout 60 wget -Y off -q -O - "http://192.0.2.1:$HTTP_PORT/"
  [ "$status" -ne 0 ]
  # The bridge is init's child and survives an exec that leaves orphans behind.
  run "$CORDON" session exec "$id" -- sh -c 'sleep 60 & exit 0'
  run "$CORDON" session exec "$id" -- timeout 60 wget -q -O - "http://allowed.test:$HTTP_PORT/hello.txt"
  [[ "$output" == *"hello from loopback"* ]]
  "$CORDON" session destroy "$id"
}

@test "egress docker: the proxy lives exactly as long as the container" {
  need_docker
  local id pids pid i
  id=$("$CORDON" session create --backend docker --net restricted --allow-domain allowed.test)
  [ -n "$id" ]
  pids=$(egress_pids "$id")
  [ -n "$pids" ]
  "$CORDON" session destroy "$id"
  for pid in $pids; do
    for i in $(seq 1 300); do
      gone "$pid" && break
      sleep 0.1
    done
    gone "$pid"
  done
  # A one-shot run leaves no proxy either.
  local before after new
  before=$(pgrep -x cordon-egress | sort || true)
  run "$CORDON" run --backend docker --net restricted -- true
  [ "$status" -eq 0 ]
  for i in $(seq 1 300); do
    after=$(pgrep -x cordon-egress | sort || true)
    new=$(comm -13 <(echo "$before") <(echo "$after") | while read -r pid; do
      if [ -n "$pid" ] && ! gone "$pid"; then echo "$pid"; fi
    done)
    [ -z "$new" ] && break
    sleep 0.1
  done
  [ -z "$new" ]
}

@test "egress docker: rules without restricted are refused" {
  need_docker
  run "$CORDON" run --backend docker --net loopback --allow-domain allowed.test -- true
  [ "$status" -ne 0 ]
  [[ "$output" == *restricted* ]]
}

# ---- cordon race -----------------------------------------------------------------------------------

@test "egress race: the rules reach every candidate and its judge; the receipt binds them" {
  need_ns
  need_tools
  local keys
  keys=$(mktemp -d "${TMPDIR:-/tmp}/cordon-egress-keys.XXXXXX")
  export CORDON_KEY_DIR=$keys
  "$CORDON" key init >/dev/null
  mkdir tree
  echo base >tree/a
  local base
  base=$("$CORDON" snapshot take tree)
  # Every candidate fetches through the proxy; other.test is refused; the judge too.
  # -f: an HTTP error (the proxy's 403 or 502) fails curl with a line on stderr, which the
  # race's logs keep; every judge and candidate says which step failed.
  run "$CORDON" race --backend ns --base "$base" --k 2 --out r.json --logs logs \
    --net restricted --allow-domain Allowed.Test. --allow-domain '*.z.test' \
    --allow-cidr 127.0.0.0/8 --resolve allowed.test:127.0.0.1 --resolve other.test:127.0.0.1 \
    --judge-cmd "[\"sh\", \"-c\", \"curl -sSf --max-time 20 http://allowed.test:$HTTP_PORT/hello.txt | grep -q loopback || { echo judge: allowed.test failed >&2; exit 1; }; ! curl -sf --max-time 20 http://other.test:$HTTP_PORT/hello.txt || { echo judge: other.test was reached >&2; exit 1; }\"]" \
    -- sh -c "curl -sSf --max-time 20 http://allowed.test:$HTTP_PORT/hello.txt > got && ! curl -sf --max-time 20 http://other.test:$HTTP_PORT/hello.txt"
  echo "$output"
  for f in logs/*.stderr; do
    if [ -s "$f" ]; then echo "== $f"; cat "$f"; fi
  done
  [ "$status" -eq 0 ]
  jq -c .body.manifest r.json
  [ "$(jq -c .body.manifest.net r.json)" = '"restricted"' ]
  [ "$(jq -c .body.manifest.egress r.json)" = \
    '{"allow_cidrs":["127.0.0.0/8"],"allow_domains":["*.z.test","allowed.test"],"resolve":["allowed.test:127.0.0.1","other.test:127.0.0.1"]}' ]
  # Both candidates passed (their fetch worked, other.test was refused), judges included.
  [ "$(jq '[.body.candidates[] | select(.scores.correctness == 1)] | length' r.json)" -eq 2 ]
  run "$CORDON" receipt verify --expected-keyid "$("$CORDON" key show | sed -n 's/^kid: //p')" r.json
  echo "$output"
  [ "$status" -eq 0 ]
  # Without the rules the receipt differs: a receipt says what egress its candidates had.
  run "$CORDON" race --backend ns --base "$base" --k 1 --out r2.json --net loopback -- true
  [ "$status" -eq 0 ]
  [ "$(jq -c .body.manifest.egress r2.json)" = null ]
  rm -rf "$keys"
}
