#!/usr/bin/env bats
# The setup of a cold `cordon run` made cheaper (issue 15, cold start), held to what it was.
# Its network namespace: pid 1 is born in the caller's network namespace and a helper makes the
# sandbox's own beside the mount work; pid 1 joins it before anything runs. The command must
# never see the caller's network: its own namespace, only lo (up), no way to a service on the
# host's loopback, and no helper left behind. Its signals: pid 1 resets only those not at their
# default, and the command still starts with none ignored. $CORDON is the binary under test.

bats_require_minimum_version 1.5.0
load common

setup_file() {
  backends_check_once ns
}

setup() {
  project_enter coldstart-net
}

teardown() {
  [ -n "${LISTENER:-}" ] && kill "$LISTENER" 2>/dev/null
  project_leave
}

@test "run: the command's network namespace is a new one, with lo alone and up" {
  need_ns
  host_ns=$(readlink /proc/self/ns/net)
  run "$CORDON" run -- sh -c 'readlink /proc/self/ns/net; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "'
  [ "$status" -eq 0 ]
  [ "${lines[0]}" != "$host_ns" ]
  [[ "${lines[0]}" == net:\[* ]]
  [ "${#lines[@]}" -eq 2 ]
  [ "${lines[1]}" = lo ]
  # lo is up (IFF_UP 0x1) and carries traffic: a connection to a listener of the sandbox's own.
  command -v python3 >/dev/null || skip "python3 is not installed"
  run "$CORDON" run -- python3 -c '
import fcntl, socket, struct
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
c = socket.create_connection(s.getsockname(), timeout=5)
flags = struct.unpack("16sH", fcntl.ioctl(c.fileno(), 0x8913, struct.pack("16sH", b"lo", 0)))[1]
print("up" if flags & 1 else "down")'
  [ "$status" -eq 0 ]
  [ "$output" = up ]
}

@test "run: attack from inside: a service on the host's loopback is out of reach" {
  need_ns
  command -v python3 >/dev/null || skip "python3 is not installed"
  # A listener on the host's 127.0.0.1 (loopback only), accepting whoever comes.
  python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(8)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
while True:
    c, _ = s.accept(); c.sendall(b"host\n"); c.close()' "$PROJECT/port" &
  LISTENER=$!
  for _ in $(seq 50); do [ -s "$PROJECT/port" ] && break; sleep 0.1; done
  port=$(cat "$PROJECT/port")
  # The listener answers on the host: the attack below is a real one.
  run python3 -c "import socket; print(socket.create_connection(('127.0.0.1', $port), timeout=5).recv(5).decode().strip())"
  [ "$output" = host ]
  run "$CORDON" run -- python3 -c "
import socket
try:
    c = socket.create_connection(('127.0.0.1', $port), timeout=2)
    print('reached', c.recv(5))
except OSError as e:
    print('refused', e.errno)"
  [ "$status" -eq 0 ]
  [[ "$output" == refused* ]]
}

@test "run: no helper of the setup is left in the sandbox" {
  need_ns
  # The command sees its own tree alone (pid 1 is not dumpable: hidden): no pid below its own,
  # though the helper had one.
  run "$CORDON" run -- sh -c 'for p in /proc/[0-9]*; do p=${p#/proc/}; [ "$p" -lt $$ ] && echo "other: $p"; done; echo "self: $$"'
  [ "$status" -eq 0 ]
  [[ "$output" != *other* ]]
  [[ "$output" == *self:* ]]
}

@test "run: the command starts with every signal at its default, whatever cordon's parent ignored" {
  need_ns
  # pid 1 resets only what /proc/self/status lists as ignored or caught: a parent that ignores
  # signals must not hand them, ignored, to the command (a shell keeps what it is given ignored).
  run bash -c 'trap "" INT HUP QUIT PIPE USR1 TERM; exec "$0" run -- sh -c "grep SigIgn /proc/self/status"' "$CORDON"
  [ "$status" -eq 0 ]
  [[ "$output" == *"SigIgn:"*"0000000000000000"* ]]
}
