#!/usr/bin/env bats
# The docker backend against a real engine, as a user types it: the attacks that apply to a
# container (hidden paths, cordon's state, read-only paths, mounts and namespaces, kernel
# keyrings and eBPF, the network, limits), exec timeouts that leave the session usable, a
# container killed from outside, and `cordon gc`. $CORDON is the binary under test; the engine
# is the one DOCKER_HOST names (scripts/test starts one with scripts/docker-up). Without a
# reachable engine and test image every test is skipped, with the reason.
#
# A small static probe (compiled here, copied into the workspace) makes the system calls
# busybox has no applet for.
#
# Execs go through the in-container exec agent by default; CORDON_DOCKER_EXEC=api selects the
# Engine API's exec, which the conformance suite checks here too.

bats_require_minimum_version 1.5.0

load common

setup_file() {
  export BATS_NO_PARALLELIZE_WITHIN_FILE=true
  backends_check_once docker
  [ -z "${DOCKER_SKIP:-}" ] || return 0
  export SOCK=${DOCKER_HOST#unix://}
  [ -n "${DOCKER_HOST:-}" ] || SOCK=/var/run/docker.sock
  PROBE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/cordon-docker-probe.XXXXXX")
  export PROBE_DIR
  cat >"$PROBE_DIR/probe.c" <<'EOF'
#include <errno.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>
/* One attack per verb; prints "refused: ERRNO-NAME" or "ALLOWED" and exits 0 / 1. */
static int report(long r) {
  if (r < 0) { printf("refused: %s\n", strerror(errno)); return 0; }
  printf("ALLOWED\n");
  return 1;
}
int main(int argc, char **argv) {
  const char *v = argc > 1 ? argv[1] : "";
  if (!strcmp(v, "keyctl")) return report(syscall(SYS_add_key, "user", "k", "v", 1, -2));
  if (!strcmp(v, "bpf")) { union bpf_attr a; memset(&a, 0, sizeof(a));
    a.map_type = BPF_MAP_TYPE_ARRAY; a.key_size = 4; a.value_size = 4; a.max_entries = 1;
    return report(syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof(a))); }
  if (!strcmp(v, "mount")) return report(mount("none", "/tmp", "tmpfs", 0, NULL));
  if (!strcmp(v, "unshare")) return report(syscall(SYS_unshare, 0x10000000 /* NEWUSER */));
  if (!strcmp(v, "tiocsti")) { char c = 'x'; return report(ioctl(0, TIOCSTI, &c)); }
  if (!strcmp(v, "tiocsti-high")) { char c = 'x';
    return report(syscall(SYS_ioctl, 0, 0xffffffff00000000ul | TIOCSTI, &c)); }
  if (!strcmp(v, "impostor")) { /* replace the exec agent's socket; answer every connection
                                   with bytes that are not a reply */
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", argv[2]);
    unlink(a.sun_path);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 4) < 0) { perror("bind"); return 1; }
    printf("listening\n"); fflush(stdout);
    for (;;) { int c = accept(s, 0, 0); if (c < 0) return 1;
      if (write(c, "CDR1Xgarbage\377\377\377\377\377\377\377", 19) < 0) return 1; close(c); } }
  if (!strcmp(v, "alloc")) { size_t n = (size_t)atol(argv[2]) << 20; char *p = malloc(n);
    for (size_t i = 0; p && i < n; i += 4096) p[i] = 1; printf("allocated\n"); return 0; }
  fprintf(stderr, "probe: unknown verb %s\n", v);
  return 2;
}
EOF
  if cc -static -O2 -o "$PROBE_DIR/probe" "$PROBE_DIR/probe.c" 2>"$PROBE_DIR/cc.log"; then
    export PROBE="$PROBE_DIR/probe"
  fi
}

teardown_file() {
  [ -z "${PROBE_DIR:-}" ] || rm -rf "$PROBE_DIR"
}

setup() {
  need_docker
  project_enter docker
}

teardown() {
  [ -n "${PROJECT:-}" ] || return 0
  # Remove whatever a failed test left: sessions first, then their containers.
  project_destroy_sessions
  (cd / && "$CORDON" gc >/dev/null 2>&1) || true
  project_leave
}

needs_probe() {
  [ -n "${PROBE:-}" ] || skip "no C compiler for the probe: $(cat "$PROBE_DIR/cc.log" 2>/dev/null)"
  mkdir -p ws
  cp "$PROBE" ws/probe
}

# The Engine API, for what a test does to a container from outside cordon.
engine() { curl -sS --unix-socket "$SOCK" -o /dev/null -w '%{http_code}' "$@"; }

dk() { "$CORDON" run --backend docker "$@"; }

@test "docker: exit code, stdout and stderr; 127 not found; 126 not executable" {
  run --separate-stderr dk -- sh -c 'echo out; echo err >&2; exit 7'
  [ "$status" -eq 7 ]
  [ "$output" = "out" ]
  [ "$stderr" = "err" ]
  run -127 dk -- no-such-command-cordon
  mkdir ws && printf 'x' > ws/notexec
  run -126 dk --workspace ws -- ./notexec
  run -137 dk -- sh -c 'kill -KILL $$'
}

@test "docker: no capabilities, no new privileges, a seccomp filter stacked on the engine's" {
  run dk -- sh -c 'grep -E "^(CapEff|CapBnd|NoNewPrivs|Seccomp_filters):" /proc/self/status'
  [ "$status" -eq 0 ]
  [[ "$output" == *"CapEff:	0000000000000000"* ]]
  [[ "$output" == *"CapBnd:	0000000000000000"* ]]
  [[ "$output" == *"NoNewPrivs:	1"* ]]
  [[ "$output" == *"Seccomp_filters:	2"* ]]
}

@test "docker: hidden paths read as empty and cannot be written" {
  mkdir -p ws/secrets && echo 'TOKEN=abc' > ws/secrets/api && echo 'PASSWORD=x' > ws/.env
  run dk --workspace ws --hide secrets --hide .env -- sh -c \
    'ls -A secrets; cat .env; cat secrets/api; echo x > secrets/new; echo x > .env'
  [[ "$output" != *"TOKEN"* ]]
  [[ "$output" != *"PASSWORD"* ]]
  [[ "$output" == *"secrets/api"*"No such file"* ]]
  [[ "$output" == *"Read-only file system"* ]]
  [ "$(cat ws/.env)" = "PASSWORD=x" ]
  [ ! -e ws/secrets/new ]
}

@test "docker: cordon's own .cordon/ is hidden when the workspace is the project" {
  "$CORDON" session create --backend worktree >/dev/null # puts state in .cordon/
  [ -n "$(ls -A .cordon)" ]
  run dk --workspace . -- sh -c 'ls -A .cordon; cat .cordon/sessions/*/state.json'
  [ "$status" -ne 0 ]
  [[ "$output" != *"backend_state"* ]]
  [[ "$output" == *"No such file"* ]]
}

@test "docker: read-only paths cannot be written, through any name" {
  mkdir -p ws/config && echo original > ws/config/app.conf && ln -s config ws/alias
  run dk --workspace ws --ro config -- sh -c \
    'echo evil > config/app.conf; echo evil > alias/app.conf; rm config/app.conf; touch config/new'
  [ "$status" -ne 0 ]
  [[ "$output" == *"Read-only file system"* ]]
  [ "$(cat ws/config/app.conf)" = "original" ]
  [ ! -e ws/config/new ]
}

@test "docker: policy paths that leave the workspace are refused before anything starts" {
  mkdir ws && ln -s /etc ws/etc-link
  run dk --workspace ws --ro etc-link -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"etc-link"* ]]
  run dk --workspace ws --hide ../x -- true
  [ "$status" -eq 125 ]
  [ -z "$(ls .cordon/sessions 2>/dev/null)" ]
}

@test "docker: mount, unshare, keyctl, bpf and TIOCSTI are refused" {
  needs_probe
  run dk --workspace ws -- sh -c 'mount -t tmpfs none /mnt 2>&1; unshare -U true 2>&1; true'
  [[ "$output" == *"mount: permission denied"* ]]
  [[ "$output" == *"Operation not permitted"* ]]
  for attack in keyctl bpf mount unshare tiocsti tiocsti-high; do
    run dk --workspace ws -- ./probe "$attack"
    echo "$attack: $output"
    [ "$status" -eq 0 ]
    [[ "$output" == refused:* ]]
  done
}

@test "docker: the default egress (loopback) has only lo and reaches nothing outside" {
  run dk -- cat /proc/net/dev
  [ "$status" -eq 0 ]
  [ "$(echo "$output" | tail -n +3 | grep -vc '^ *lo:')" -eq 0 ]
  host_ip=$(ip -4 -o addr show scope global 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -1)
  [ -n "$host_ip" ] || host_ip=10.0.0.1
  run dk -- nc -w 2 "$host_ip" 9
  [ "$status" -ne 0 ]
  [[ "$output" == *"unreachable"* ]]
}

@test "docker: the pids limit stops a fork bomb, the memory limit a hog" {
  needs_probe
  run dk --pids 20 -- sh -c 'for i in $(seq 60); do sleep 3 & done; wait'
  [[ "$output" == *"fork"* ]] || [[ "$output" == *"Resource temporarily unavailable"* ]]
  run dk --workspace ws --memory 32M -- ./probe alloc 200
  [ "$status" -eq 137 ]
  run dk --workspace ws --memory 64M -- ./probe alloc 8
  [ "$status" -eq 0 ]
  [ "$output" = "allocated" ]
}

@test "docker: a timeout kills that exec's tree only; the session and the next exec work" {
  id=$("$CORDON" session create --backend docker)
  "$CORDON" session exec "$id" -- sh -c 'sleep 300 >/dev/null 2>&1 &' # an exec of its own
  run "$CORDON" session exec "$id" --timeout 1 -- sh -c \
    '(sleep 3; echo bg > bg-survived) & setsid sh -c "sleep 3; echo d > daemon-survived" & sleep 30'
  [ "$status" -eq 124 ]
  [[ "$output" == *"timed out"* ]]
  sleep 3
  [ ! -e "$PROJECT/.cordon/sessions/$id/workspace/bg-survived" ]
  [ ! -e "$PROJECT/.cordon/sessions/$id/workspace/daemon-survived" ]
  run "$CORDON" session exec "$id" -- echo still here
  [ "$status" -eq 0 ]
  [ "$output" = "still here" ]
  # Only the timed-out exec's tree died: the first exec's background sleep, which its command
  # left running, lives on until the session ends, and pid 1 is still cordon's init.
  run "$CORDON" session exec "$id" -- sh -c 'ps -o comm | grep -cx sleep; true'
  [ "$output" = "1" ]
  run "$CORDON" session exec "$id" -- cat /proc/1/cmdline
  [[ "$output" == *"cordon-init"* ]]
  "$CORDON" session destroy "$id"
}

@test "docker agent: execs run under init's agent; stdin, stdout and stderr stay apart" {
  id=$("$CORDON" session create --backend docker)
  printf 'line one\nline two\n' > input
  run --separate-stderr "$CORDON" session exec "$id" --stdin input -- \
    sh -c 'cat; echo to-stderr >&2; tr "\0" " " < /proc/$PPID/cmdline; exit 3'
  [ "$status" -eq 3 ]
  [ "${lines[0]}" = "line one" ]
  [ "${lines[1]}" = "line two" ]
  # The command's parent is the agent's per-exec monitor, forked by init (not a `runc exec`).
  [[ "${lines[2]}" == "/.cordon-init init"* ]]
  [ "$stderr" = "to-stderr" ]
  # The same through the Engine API path: the parent is the exec wrapper.
  run --separate-stderr env CORDON_DOCKER_EXEC=api "$CORDON" session exec "$id" --stdin input -- \
    sh -c 'cat; echo to-stderr >&2; tr "\0" " " < /proc/$PPID/cmdline; exit 3'
  [ "$status" -eq 3 ]
  [ "${lines[0]}" = "line one" ]
  [[ "${lines[2]}" == "/.cordon-init exec"* ]]
  [ "$stderr" = "to-stderr" ]
  run env CORDON_DOCKER_EXEC=bogus "$CORDON" session exec "$id" -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"CORDON_DOCKER_EXEC=bogus"* ]]
  "$CORDON" session destroy "$id"
}

@test "docker agent: a timeout kills a setsid'd, double-forked daemon; the session goes on" {
  id=$("$CORDON" session create --backend docker)
  ws=$PROJECT/.cordon/sessions/$id/workspace
  run "$CORDON" session exec "$id" --timeout 1 -- sh -c \
    'setsid sh -c "(while :; do date +%s%N >> daemon.log; sleep 0.2; done) &" </dev/null >/dev/null 2>&1; sleep 30'
  [ "$status" -eq 124 ]
  [[ "$output" == *"timed out"* ]]
  [ -s "$ws/daemon.log" ] # the daemon did run
  size=$(wc -c < "$ws/daemon.log")
  sleep 1
  [ "$(wc -c < "$ws/daemon.log")" -eq "$size" ] # and is dead
  run "$CORDON" session exec "$id" -- sh -c 'echo next; ps -o comm | grep -c sleep; true'
  [ "$status" -eq 0 ]
  [ "${lines[0]}" = "next" ]
  [ "${lines[1]}" = "0" ]
  "$CORDON" session destroy "$id"
}

@test "docker agent: a monitor killed from inside gives a one-line error; its orphans die" {
  id=$("$CORDON" session create --backend docker)
  ws=$PROJECT/.cordon/sessions/$id/workspace
  run "$CORDON" session exec "$id" -- sh -c \
    '(sleep 1; echo orphan > orphan-survived) & kill -KILL $PPID; sleep 5'
  [ "$status" -eq 125 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"monitor"*"ended without a status"* ]]
  sleep 2
  [ ! -e "$ws/orphan-survived" ]
  run "$CORDON" session exec "$id" -- echo fine
  [ "$output" = "fine" ]
  "$CORDON" session destroy "$id"
}

@test "docker agent: a socket replaced from inside is refused, a planted symlink not followed" {
  needs_probe
  id=$("$CORDON" session create --backend docker --workspace ws)
  # An impostor listening in the agent's place while its own exec runs.
  "$CORDON" session exec "$id" --timeout 20 -- ./probe impostor /.cordon-agent/agent.sock \
    > impostor.out 2>&1 &
  pid=$!
  for _ in $(seq 50); do grep -q listening impostor.out && break; sleep 0.1; done
  run "$CORDON" session exec "$id" -- true
  kill "$pid" 2>/dev/null || true # the impostor may have died of SIGPIPE already
  wait "$pid" || true
  echo "$output"
  [ "$status" -eq 125 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"not by the container's init"*"replaced from inside the container"* ]]
  # A symlink to the engine's own socket in the agent's place: never followed.
  id2=$("$CORDON" session create --backend docker)
  "$CORDON" session exec "$id2" -- sh -c \
    "rm /.cordon-agent/agent.sock && ln -s $SOCK /.cordon-agent/agent.sock"
  run "$CORDON" session exec "$id2" -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"cannot reach the exec agent"*"non-socket"* ]]
  # The Engine API path still works for such a session.
  run env CORDON_DOCKER_EXEC=api "$CORDON" session exec "$id2" -- echo api
  [ "$output" = "api" ]
  "$CORDON" session destroy "$id"
  "$CORDON" session destroy "$id2"
}

@test "docker: a rewritten session state (another container, another engine) is refused, acting on nothing" {
  a=$("$CORDON" session create --backend docker)
  b=$("$CORDON" session create --backend docker)
  sa=".cordon/sessions/$a/state.json"
  cp "$sa" saved.json
  ca=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["backend_state"]["container"])' "$sa")
  cb=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["backend_state"]["container"])' \
    ".cordon/sessions/$b/state.json")
  # The state and the session's private record (in the runtime directory) disagree: refused.
  python3 - "$sa" "$cb" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["backend_state"]["container"] = sys.argv[2]
json.dump(d, open(sys.argv[1], "w"))
PY
  run "$CORDON" session destroy "$a"
  echo "$output"
  [ "$status" -eq 1 ]
  [ "${#lines[@]}" -eq 1 ]
  [[ "$output" == *"differs from the session's private record"* ]]
  [ "$(engine "http://d/containers/$cb/json")" = 200 ] # B's container is untouched
  run "$CORDON" session exec "$b" -- true
  [ "$status" -eq 0 ]
  # Another engine socket: refused too.
  cp saved.json "$sa"
  python3 - "$sa" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["backend_state"]["socket"] = "/tmp/planted-engine.sock"
json.dump(d, open(sys.argv[1], "w"))
PY
  run "$CORDON" session exec "$a" -- true
  [ "$status" -eq 1 ] || [ "$status" -eq 125 ]
  [[ "$output" == *"differs from the session's private record"* ]]
  cp saved.json "$sa"
  # Restored: destroy checks the labels and removes A's own container.
  "$CORDON" session destroy "$a"
  [ "$(engine "http://d/containers/$ca/json")" = 404 ]
  "$CORDON" session destroy "$b"
  [ "$(engine "http://d/containers/$cb/json")" = 404 ]
  # Their runtime directories went with them (the agent's socket was never in .cordon/).
  [ -z "$(ls -A .cordon/sessions)" ]
}

@test "docker: the Engine API exec path (CORDON_DOCKER_EXEC=api) passes the conformance suite" {
  run env CORDON_DOCKER_EXEC=api "$CORDON" conformance docker
  # Failures first: a long log is cut in the middle by whoever shows it.
  grep -v '^pass ' <<<"$output" || true
  [ "$status" -eq 0 ]
  # The one skip: docker does not declare egress none (its engine keeps lo up).
  [[ "$output" == *" 0 failed, 1 skipped"* ]]
  [[ "$output" == *"skip net-none-no-interface"* ]]
}

@test "docker: a container killed from outside mid-exec gives a clear error" {
  id=$("$CORDON" session create --backend docker)
  (sleep 1.5; engine -X POST "http://docker/containers/cordon-$id/kill" >/dev/null) &
  run "$CORDON" session exec "$id" -- sleep 30
  wait
  [ "$status" -eq 125 ]
  [[ "$output" == *"stopped while the command ran"* ]]
  run "$CORDON" session exec "$id" -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"is not running"* ]]
  "$CORDON" session destroy "$id"
  [ "$(engine "http://docker/containers/cordon-$id/json")" = "404" ]
}

@test "docker: cordon gc removes a crashed session's container, and only that" {
  keep=$("$CORDON" session create --backend docker)
  lost=$("$CORDON" session create --backend docker)
  # A crash between creating the container and recording the session leaves no state.
  rm "$PROJECT/.cordon/sessions/$lost/state.json"
  run "$CORDON" gc --dry-run
  [[ "$output" == *"would remove container"*"$lost"* ]]
  [ "$(engine "http://docker/containers/cordon-$lost/json")" = "200" ]
  run "$CORDON" gc
  [ "$status" -eq 0 ]
  [[ "$output" == *"removed container"*"(session $lost)"* ]]
  [[ "$output" != *"$keep"* ]]
  [ "$(engine "http://docker/containers/cordon-$lost/json")" = "404" ]
  [ "$(engine "http://docker/containers/cordon-$keep/json")" = "200" ]
  # Nothing of ours left (the empty cgroups of other projects' deleted ns sessions may be).
  run "$CORDON" gc
  [ "$status" -eq 0 ]
  [[ "$output" != *"container"* ]]
  "$CORDON" session destroy "$keep"
}

@test "docker: cordon gc removes the container and state of a cordon run killed mid-exec" {
  "$CORDON" run --backend docker -- sleep 60 &
  pid=$!
  for _ in $(seq 100); do
    id=$(ls "$PROJECT/.cordon/sessions" 2>/dev/null | head -1)
    [ -n "$id" ] && [ -f "$PROJECT/.cordon/sessions/$id/state.json" ] && break
    sleep 0.1
  done
  sleep 0.5
  kill -KILL "$pid"
  wait "$pid" || true
  [ "$(engine "http://docker/containers/cordon-$id/json")" = "200" ]
  run "$CORDON" gc
  [[ "$output" == *"removed container"*"$id"*"gone"* ]]
  [ "$(engine "http://docker/containers/cordon-$id/json")" = "404" ]
  [ ! -e "$PROJECT/.cordon/sessions/$id" ]
}

@test "docker: unreachable daemon and missing image are named; nothing is left behind" {
  run env DOCKER_HOST=unix:///nonexistent/docker.sock "$CORDON" backends
  [[ "$output" == *"docker"*"/nonexistent/docker.sock"* ]]
  run env DOCKER_HOST=unix:///nonexistent/docker.sock "$CORDON" run --backend docker -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"/nonexistent/docker.sock"* ]]
  run env DOCKER_HOST=tcp://127.0.0.1:2375 "$CORDON" run --backend docker -- true
  [[ "$output" == *"tcp://127.0.0.1:2375"*"unix socket"* ]]
  run "$CORDON" run --backend docker --image cordon-no-such-image:1 -- true
  [ "$status" -eq 125 ]
  [[ "$output" == *"cordon-no-such-image:1"* ]]
  [ -z "$(ls .cordon/sessions 2>/dev/null)" ]
  code=$(curl -sS --unix-socket "$SOCK" -G "http://docker/containers/json" --data-urlencode all=1 \
    --data-urlencode "filters={\"label\":[\"org.cordon.project=$PROJECT/.cordon\"]}")
  [ "$code" = "[]" ]
}
