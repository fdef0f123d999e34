#!/bin/bash
# The escape suite on the microvm backend (qemu monitor; TCG here): attacks from inside a guest,
# and checks from the host of what the VMM process is. A TCG boot takes seconds, so the attacks
# share few VMs: one session as the sandbox user (uid 1000 of the guest) for most of them, one
# as the guest's root (whose reads and writes the VMM's own uid must stop), and one `cordon run`
# (the one-shot path). Every boot and every exec is bounded.
#
#   escape-microvm.sh CORDON PROBE     (meson test escape-microvm; needs root: the VMM is
#                                       started confined, which needs root)
#
# The probe (tests/escape/probe.c) exits 0 when an attack SUCCEEDED, 1 when it was blocked, 2
# when it could not even try (a broken test, which fails the suite too). Controls prove the
# probe and the host's fixtures work. Output is TAP; the status is non-zero if anything escaped
# or broke; 77 (skip) when the backend cannot run here, saying why.
set -u

CORDON=$(readlink -f "$1")
PROBE=$(readlink -f "$2")
monitor=${CORDON_ESCAPE_MONITOR:-qemu}
# A boot waits at most this long (the monitor's own bound is tighter); an exec, EXEC_BOUND.
BOOT_BOUND=${CORDON_ESCAPE_BOOT_BOUND:-180}
EXEC_BOUND=120

n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - [microvm-$monitor] $*"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - [microvm-$monitor] $*"; }
skip() { n=$((n + 1)); echo "ok $n - [microvm-$monitor] $1 # SKIP $2"; }
note() { echo "# [microvm-$monitor] $*"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "1..0 # SKIP the qemu monitor starts its VMM confined (own namespaces, uid 65534): root only"
  exit 77
fi
why=$(CORDON_MICROVM_MONITOR=$monitor "$CORDON" backends 2>&1 | awk '$1 == "microvm" && $0 !~ / yes / {print; exit}')
if [ -n "$why" ]; then
  echo "1..0 # SKIP the microvm backend (monitor $monitor) is unavailable here: $why"
  exit 77
fi

# ---- fixtures ------------------------------------------------------------------------------
project=$(mktemp -d /tmp/cordon-escape-microvm.XXXXXX)
outside=$(mktemp -d /tmp/cordon-escape-microvm-outside.XXXXXX)
chmod 755 "$project" "$outside"
export CORDON_PROJECT="$project"
export CORDON_MICROVM_MONITOR="$monitor"
unset CORDON_BACKEND CORDON_SANDBOX CORDON_SANDBOX_ALLOW
ws="$project/ws"
mkdir -p "$ws"
cp "$PROBE" "$ws/probe"
echo "workspace file" > "$ws/file"
echo "host file" > "$outside/file"
ln -s "$outside" "$ws/out-link" # a symlink planted in the workspace, pointing outside

pids=()
sessions=()
cleanup() {
  for id in "${sessions[@]}"; do "$CORDON" session destroy "$id" >/dev/null 2>&1; done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$project" "$outside"
}
trap cleanup EXIT

# A host process the guest must neither see nor signal.
bash -c 'exec -a cordon-escape-marker sleep 900' &
marker_pid=$!
pids+=("$marker_pid")
# A TCP listener on the host's loopback: the guest must not reach it.
portfile="$outside/port"
python3 - "$portfile" <<'EOF' &
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
open(sys.argv[1], "w").write(str(s.getsockname()[1]))
time.sleep(900)
EOF
pids+=("$!")
for _ in $(seq 100); do [ -s "$portfile" ] && break; sleep 0.05; done
port=$(cat "$portfile" 2>/dev/null || echo 1)

# ---- helpers -------------------------------------------------------------------------------
# boot NAME FLAGS...: a session, its id in $sid (empty when the boot failed, reported).
boot() {
  local name=$1
  shift
  local t0=$SECONDS out
  if out=$(timeout "$BOOT_BOUND" "$CORDON" session create --backend microvm --monitor "$monitor" "$@" 2>&1); then
    sid=$out
    sessions+=("$sid")
    note "$name booted in $((SECONDS - t0)) s"
    return 0
  fi
  sid=
  not_ok "boot $name: $out"
  return 1
}

# in_vm ID ARGV...: run ARGV in session ID; sets $code and $out.
in_vm() {
  local id=$1
  shift
  out=$(timeout $((EXEC_BOUND + 30)) "$CORDON" session exec --timeout "$EXEC_BOUND" "$id" -- "$@" 2>&1)
  code=$?
}

# attack ID NAME VERB ARGS...: the probe must report 'blocked' (1).
attack() {
  local id=$1 name=$2
  shift 2
  in_vm "$id" /workspace/probe "$@"
  case $code in
    1) ok "$name: $(echo "$out" | tail -1)" ;;
    0) not_ok "$name ESCAPED: $out" ;;
    *) not_ok "$name: exit $code (expected the probe's 'blocked'): $out" ;;
  esac
}

control() {
  local id=$1 name=$2
  shift 2
  in_vm "$id" /workspace/probe "$@"
  if [ "$code" -eq 0 ]; then ok "control $name"; else not_ok "control $name: exit $code: $out"; fi
}

# The VMM's pid of session ID, from its state file (what a later `session exec` attaches to).
vmm_pid_of() {
  jq -r '.backend_state.vm.pid // empty' "$project/.cordon/sessions/$1/state.json" 2>/dev/null
}
vmms=()

# ---- the sandbox user's VM: no network, 192 MiB, at most 64 processes ----------------------
if boot "the sandbox user's VM" --workspace "$ws" --net none --memory 192M --pids 64; then
  user_vm=$sid
  control "$user_vm" "read a workspace file" read-file /workspace/file
  control "$user_vm" "write the workspace" write-file /workspace/written
  if [ -e "$ws/written" ]; then ok "control the guest's write reached the host's workspace"
  else not_ok "control the guest's write is not in the host's workspace"; fi
  if "$PROBE" see-host >/dev/null; then ok "control marker visible on the host"
  else not_ok "control marker visible on the host"; fi
  if "$PROBE" connect 127.0.0.1 "$port" >/dev/null; then ok "control host listener is up"
  else not_ok "control host listener is up (port $port)"; fi

  # Host processes.
  attack "$user_vm" "see any host process" see-host
  attack "$user_vm" "see the host marker by its pid" see-pid "$marker_pid"
  attack "$user_vm" "signal the host marker by its pid" signal "$marker_pid"
  if kill -0 "$marker_pid" 2>/dev/null; then ok "the host marker process is untouched"
  else not_ok "the host marker process died"; fi
  attack "$user_vm" "kill the guest agent (pid 1)" kill-holder
  attack "$user_vm" "ptrace the guest agent (pid 1)" ptrace 1

  # Host files beyond the workspace.
  attack "$user_vm" "read a host file by its host path" read-file "$outside/file"
  attack "$user_vm" "list the host's directory of it" list-dir "$outside"
  attack "$user_vm" "read /etc/shadow" read-file /etc/shadow
  attack "$user_vm" "write /etc/passwd" write-file /etc/passwd
  attack "$user_vm" "write /usr" write-file /usr/cordon-escape
  attack "$user_vm" "write through a planted symlink to the host" write-file /workspace/out-link/pwned
  if [ -e "$outside/pwned" ]; then not_ok "host file written through the planted symlink"
  else ok "nothing written outside through the planted symlink"; fi
  attack "$user_vm" "hard-link a host file into the workspace" link-out /etc/passwd /workspace/pw
  in_vm "$user_vm" sh -c 'ls -a /tmp; ls /root 2>&1; ls /home'
  if [[ "$out" == *"$(basename "$outside")"* || "$out" == *"cordon-escape-microvm"* ]]; then
    not_ok "the host's /tmp is visible in the guest: $out"
  else ok "the guest's /tmp, /root and /home are its own: $(echo "$out" | tr '\n' ' ')"; fi
  attack "$user_vm" "write the runtime binary" write-exe "$CORDON"
  attack "$user_vm" "mknod a device in the workspace" mknod /workspace/null-device

  # No network at all with --net none: no NIC (only lo, and lo down).
  in_vm "$user_vm" sh -c 'ls /sys/class/net'
  if [ "$code" -eq 0 ] && [ "$(echo "$out" | tr -d ' \n')" = lo ]; then
    ok "--net none: no NIC in the guest (/sys/class/net holds only lo)"
  else not_ok "--net none: /sys/class/net: exit $code: $out"; fi
  in_vm "$user_vm" cat /sys/class/net/lo/operstate
  note "--net none: lo is $out"
  attack "$user_vm" "loopback inside with --net none" loopback-self
  attack "$user_vm" "TCP to the host's loopback (--net none)" connect 127.0.0.1 "$port"
  attack "$user_vm" "TCP to qemu's user-mode gateway (--net none)" connect 10.0.2.2 "$port"
  attack "$user_vm" "DNS lookup (--net none)" dns 10.0.2.3
  attack "$user_vm" "raw socket" raw-socket

  # Exit codes are the guest agent's status record, never the VMM's.
  for c in 0 1 3 125 126 127; do
    in_vm "$user_vm" sh -c "exit $c"
    if [ "$code" -eq "$c" ]; then ok "a command that exits $c by itself is reported as $c"
    else not_ok "a command that exits $c by itself is reported as $code: $out"; fi
  done
  out=$("$CORDON" session exec --json "$user_vm" -- sh -c 'exit 127' 2>&1)
  if [[ "$out" == *'"exit_code": 127'* && "$out" != *exec_failure* ]]; then
    ok "its own 127 is not called cordon's failure to start it (--json: no exec_failure)"
  else not_ok "its own 127 in --json: $out"; fi
  out=$("$CORDON" session exec --json "$user_vm" -- /no/such/command 2>&1)
  if [[ "$out" == *'"exit_code": 127'* && "$out" == *'"exec_failure": "not_found"'* ]]; then
    ok "a command that does not exist: 127, exec_failure not_found"
  else not_ok "a command that does not exist, --json: $out"; fi
  in_vm "$user_vm" /workspace/file
  if [ "$code" -eq 126 ]; then ok "a file that cannot be executed: 126"
  else not_ok "a file that cannot be executed: exit $code: $out"; fi
  in_vm "$user_vm" sh -c 'kill -9 $$'
  if [ "$code" -eq 137 ]; then ok "a command killed by SIGKILL: 137"
  else not_ok "a command killed by SIGKILL: exit $code: $out"; fi

  # The status channel cannot be forged from inside: status frames (REPLY, exit 0) for every
  # exec id near a random guess and for ids 0..4095, written to stdout, to stderr, to the
  # agent's virtio-serial port and to the console, then exit 3.
  cat > "$ws/forge.py" <<'EOF'
import glob, os, random, struct, sys
OCFM, REPLY_MAGIC = 0x4d46434f, 0x5247434f
def frame(i, code):
    # a guest wire REPLY frame: exec wire reply 'X' (exited) with `code`
    reply = struct.pack("=IIii", REPLY_MAGIC, ord("X"), code, 0)
    return struct.pack("=IIII", OCFM, ord("R"), i, len(reply)) + reply
ids = list(range(4096)) + [random.getrandbits(32) for _ in range(4096)]
blob = b"".join(frame(i, 0) for i in ids)
os.write(1, blob)
os.write(2, blob)
reached = []
for dev in glob.glob("/dev/vport*") + glob.glob("/dev/hvc*") + ["/dev/console", "/dev/ttyS0"]:
    try:
        fd = os.open(dev, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as e:
        print("%s: %s" % (dev, e.strerror), file=sys.stderr)
        continue
    try:
        os.write(fd, blob[:65536])
        reached.append(dev)
    except OSError as e:
        print("%s: write: %s" % (dev, e.strerror), file=sys.stderr)
    os.close(fd)
print("written to: %s" % (", ".join(reached) or "no device"), file=sys.stderr)
sys.exit(3)
EOF
  timeout $((EXEC_BOUND + 30)) "$CORDON" session exec --timeout "$EXEC_BOUND" "$user_vm" -- python3 /workspace/forge.py > "$outside/forge.out" 2>&1
  code=$?
  out=$(tr -d '\0' < "$outside/forge.out")
  if [ "$code" -eq 3 ]; then ok "forged status frames on stdout, stderr and the devices: still exit 3 ($(echo "$out" | grep 'written to' | tail -1))"
  else not_ok "forged status frames changed the exit code to $code: $(echo "$out" | tail -3)"; fi
  in_vm "$user_vm" sh -c 'set -- /dev/vport*p*; [ -e "$1" ] || { echo "NO PORT"; exit 0; }
    for p; do ls -l "$p"; if (exec 3<>"$p") 2>/dev/null; then echo "OPENED $p"; fi; done'
  if [[ "$out" == *OPENED* || "$out" == *"NO PORT"* || "$code" -ne 0 ]]; then
    not_ok "the sandbox user and the agent's port: exit $code: $out"
  else ok "the sandbox user cannot open the agent's port: $(echo "$out" | awk '{print $1, $3, $4, $NF}' | tr '\n' ' ')"; fi
  in_vm "$user_vm" true
  if [ "$code" -eq 0 ]; then ok "the session still serves execs after the forgery"
  else not_ok "no exec after the forgery: exit $code: $out"; fi

  # The VMM, seen from the host: not root, its own namespaces, no new privileges, seccomp.
  vmm=$(vmm_pid_of "$user_vm")
  if [ -n "$vmm" ] && [ -d "/proc/$vmm" ]; then
    vmms+=("$vmm")
    note "VMM pid $vmm: $(tr '\0' ' ' < "/proc/$vmm/cmdline" | cut -c1-60)..."
    uids=$(awk '/^Uid:/ {print $2, $3, $4, $5}' "/proc/$vmm/status")
    gids=$(awk '/^Gid:/ {print $2, $3, $4, $5}' "/proc/$vmm/status")
    if [ "$uids" = "65534 65534 65534 65534" ] && [ "$gids" = "65534 65534 65534 65534" ]; then
      ok "the VMM runs as uid and gid 65534 on the host (real, effective, saved, fs)"
    else not_ok "the VMM's ids on the host: uid $uids, gid $gids"; fi
    groups=$(awk '/^Groups:/ {$1 = ""; print}' "/proc/$vmm/status" | tr -d ' ')
    if [ -z "$groups" ]; then ok "the VMM has no supplementary groups"
    else not_ok "the VMM's supplementary groups: $groups"; fi
    for ns in user mnt pid net ipc uts; do
      if [ "$(readlink "/proc/$vmm/ns/$ns")" != "$(readlink "/proc/self/ns/$ns")" ]; then
        ok "the VMM has a $ns namespace of its own"
      else not_ok "the VMM shares the host's $ns namespace"; fi
    done
    # Its user namespace maps one id: 65534 on the host, nothing else (no root).
    map=$(tr -s ' ' < "/proc/$vmm/uid_map" | sed 's/^ //')
    if [ "$(echo "$map" | wc -l)" -eq 1 ] && [ "$(echo "$map" | cut -d' ' -f2-)" = "65534 1" ]; then
      ok "the VMM's user namespace maps one id, host uid 65534 ($map)"
    else not_ok "the VMM's uid_map: $map"; fi
    if [ "$(awk '/^NoNewPrivs:/ {print $2}' "/proc/$vmm/status")" = 1 ]; then
      ok "the VMM runs with no_new_privs"
    else not_ok "the VMM may gain privileges (NoNewPrivs 0)"; fi
    if [ "$(awk '/^Seccomp:/ {print $2}' "/proc/$vmm/status")" = 2 ]; then
      ok "the VMM runs under a seccomp filter"
    else not_ok "the VMM runs without a seccomp filter"; fi
    capeff=$(awk '/^CapEff:/ {print $2}' "/proc/$vmm/status")
    if [ "$capeff" = 0000000000000000 ]; then ok "the VMM has no effective capability"
    else not_ok "the VMM's effective capabilities: $capeff"; fi
    # Nothing of the host's processes in its pid namespace.
    if [ "$(awk '/^NSpid:/ {print NF}' "/proc/$vmm/status")" -ge 3 ]; then
      ok "the VMM is in a nested pid namespace ($(awk '/^NSpid:/' "/proc/$vmm/status"))"
    else not_ok "the VMM's pid namespace: $(awk '/^NSpid:/' "/proc/$vmm/status")"; fi
    # What a guest that escaped into qemu would hold: the VMM's uid in the VMM's namespaces and
    # its root. None of the host's files beyond the system paths and the workspace.
    as_vmm=(nsenter -t "$vmm" -U -m -p -n -i -u -r -w -S "$(awk '{print $1}' "/proc/$vmm/uid_map")" -G "$(awk '{print $1}' "/proc/$vmm/gid_map")")
    if "${as_vmm[@]}" true 2>/dev/null; then
      out=$("${as_vmm[@]}" sh -c "cat '$outside/file'; ls -d '$project' /root /home /var /run" 2>&1)
      seen=$("${as_vmm[@]}" ls / 2>&1 | tr '\n' ' ')
      if [[ "$out" == *"host file"* ]] || grep -qxE "$project|/root|/home|/var|/run" <<<"$out"; then
        not_ok "the VMM's view holds host files: $out"
      else ok "the VMM's root holds no host file beyond the system paths and the workspace: / is $seen"; fi
      out=$("${as_vmm[@]}" sh -c "cat /etc/shadow 2>&1; touch /usr/cordon-escape /etc/cordon-escape /workspace/../cordon-escape 2>&1" 2>&1)
      if [ -e /usr/cordon-escape ] || [ -e /etc/cordon-escape ] || [ -e "$(dirname "$ws")/cordon-escape" ] || [[ "$out" == *root:* ]]; then
        not_ok "the VMM's uid read /etc/shadow or wrote a system path: $out"
        rm -f /usr/cordon-escape /etc/cordon-escape "$(dirname "$ws")/cordon-escape"
      else ok "the VMM's uid reads no /etc/shadow and writes no system path"; fi
    else not_ok "cannot enter the VMM's namespaces as its uid to look at its view"; fi
    # Its network namespace holds nothing but a loopback that is down.
    links=$(nsenter -t "$vmm" -n ip -o link 2>/dev/null | awk -F': ' '{print $2}' | tr '\n' ' ')
    if [ "$links" = "lo " ]; then ok "the VMM's network namespace has only lo"
    else not_ok "the VMM's network namespace: $links"; fi
  else
    not_ok "no VMM process found for session $user_vm (state: $(ls -R "$project/.cordon/sessions" 2>&1 | head -5))"
  fi

  # Resource limits: the guest's, and the VMM's memory on the host stays near the VM's size.
  rm -f "$ws/forkbomb-out"
  in_vm "$user_vm" /workspace/probe forkbomb 2000
  case $code in
    1) ok "fork bomb stopped by --pids 64: $(echo "$out" | tail -1)" ;;
    0) not_ok "fork bomb ESCAPED --pids 64: $out" ;;
    *) not_ok "fork bomb with --pids 64: exit $code: $out" ;;
  esac
  # The guest has no swap: near its limit the kernel reclaims the hog's own code pages (read
  # back over 9p) for minutes before its OOM killer fires (it once stalled 120 s). The agent's
  # memory watch (guest/memory.c) kills it first: it ends by SIGKILL, well inside the exec's
  # bound. A timeout (124) is a stall the watch missed; 0 is a hog that got its 1 GiB.
  hog_start=$(date +%s)
  EXEC_BOUND=60 in_vm "$user_vm" /workspace/probe memory 1024
  hog_seconds=$(($(date +%s) - hog_start))
  case $code in
    1 | 137) ok "memory hog stopped in a 192 MiB VM (exit $code, ${hog_seconds} s): $(echo "$out" | tail -1)" ;;
    124) not_ok "memory hog STALLED the guest until the exec's timeout (${hog_seconds} s): $out" ;;
    0) not_ok "memory hog ESCAPED --memory 192M: $out" ;;
    *) not_ok "memory hog in a 192 MiB VM: exit $code: $out" ;;
  esac
  if [ -n "${vmm:-}" ] && [ -d "/proc/$vmm" ]; then
    # The VMM's own memory on the host: the guest's RAM, TCG's translation cache (bounded:
    # qemu's default is 1 GiB, which --memory would not count) and qemu's heap. File pages
    # (the kernel image qemu maps) are the page cache's, not the VMM's.
    cache=$(tr '\0' '\n' < "/proc/$vmm/cmdline" | sed -n 's/^tcg,tb-size=\([0-9]*\)$/\1/p')
    anon=$(awk '/^RssAnon:/ {print int($2 / 1024)}' "/proc/$vmm/status")
    if grep -qx kvm <(tr '\0' '\n' < "/proc/$vmm/cmdline"); then
      ok "the VMM runs under KVM: no translation cache to bound"
    elif [ -n "$cache" ] && [ "$cache" -le 256 ]; then
      ok "the VMM's TCG translation cache is bounded: $cache MiB"
    else not_ok "the VMM's TCG translation cache is unbounded (qemu's 1 GiB default): no tb-size"; fi
    if [ "$anon" -le $((192 + ${cache:-0} + 96)) ]; then
      ok "the VMM's anonymous memory on the host after the hog: $anon MiB (guest RAM 192 MiB, cache ${cache:-0} MiB)"
    else not_ok "the VMM's anonymous memory on the host: $anon MiB for a 192 MiB guest"; fi
  fi
  in_vm "$user_vm" /workspace/probe read-file /workspace/file
  if [ "$code" -eq 0 ]; then ok "the VM serves execs after the fork bomb and the memory hog"
  else not_ok "no exec after the fork bomb and the memory hog: exit $code: $out"; fi

  # A daemon left in the guest dies with the VM.
  rm -f "$ws/survivor"
  in_vm "$user_vm" /workspace/probe daemon /workspace/survivor 3
  "$CORDON" session destroy "$user_vm" >/dev/null 2>&1
  sessions=("${sessions[@]/$user_vm/}")
  if [ -n "${vmm:-}" ]; then
    for _ in $(seq 50); do [ -d "/proc/$vmm" ] || break; sleep 0.1; done
    if [ -d "/proc/$vmm" ]; then not_ok "the VMM $vmm outlived session destroy"
    else ok "session destroy stops the VMM"; fi
  fi
  sleep 4
  if [ -e "$ws/survivor" ]; then not_ok "a daemon in the guest outlived the session (wrote survivor)"
  else ok "a daemon in the guest did not outlive the session"; fi
fi

# ---- the guest's root: the VMM's own uid is what stops it ----------------------------------
if boot "a guest-root VM" --workspace "$ws" --net none --user root; then
  root_vm=$sid
  vmms+=("$(vmm_pid_of "$root_vm")")
  in_vm "$root_vm" /workspace/probe suid
  if [ "$code" -eq 1 ] && in_vm "$root_vm" id -u && [ "$out" = 0 ]; then ok "control the command is the guest's root"
  else not_ok "control the command is the guest's root: id -u says $out"; fi
  # /etc is the host's, read-only, through the VMM (uid 65534): root in the guest reads only
  # what 65534 may read on the host.
  # A status record never written is an error (125), never exit 0 (issue 19: the agent's kill,
  # SIGUSR1 to the keeper, once came back as "exited 0" with no output; so did a memory hog the
  # agent ended when it took the host for gone). Guest root can signal the command's keeper.
  in_vm "$root_vm" sh -c 'kill -USR1 $PPID; sleep 5; echo late'
  if [ "$code" -eq 125 ] && [[ "$out" == *"no exit status"* ]]; then ok "a command the guest agent ended reports no exit status (125)"
  else not_ok "a command the guest agent ended: exit $code (expected 125, no exit status): $out"; fi
  in_vm "$root_vm" sh -c 'kill -KILL $PPID; exit 0'
  if [ "$code" -eq 125 ] && [[ "$out" == *"no exit status"* ]]; then ok "a command whose keeper was killed reports no exit status (125)"
  else not_ok "a command whose keeper was killed: exit $code (expected 125, no exit status): $out"; fi
  in_vm "$root_vm" sh -c 'cat /proc/$PPID/oom_score_adj /proc/self/oom_score_adj | tr "\n" " "'
  if [ "$code" -eq 0 ] && [ "$out" = "-1000 0 " ]; then ok "the keeper is out of the OOM killer's choice, the command is not"
  else not_ok "oom_score_adj of keeper and command: exit $code: $out"; fi
  attack "$root_vm" "guest root reads the host's /etc/shadow" read-file /etc/shadow
  attack "$root_vm" "guest root writes the host's /etc/passwd" write-file /etc/passwd
  attack "$root_vm" "guest root writes the host's /etc" write-file /etc/cordon-escape
  attack "$root_vm" "guest root writes the host's /usr" write-file /usr/cordon-escape
  # Root of the guest may remount its view read-write (its own kernel's business); qemu's fsdev
  # is read-only and writes as uid 65534, so nothing reaches the host.
  in_vm "$root_vm" python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
r = libc.mount(None, b"/etc", None, 32, None)  # MS_REMOUNT, read-write
print("remount rw:", "done" if r == 0 else os.strerror(ctypes.get_errno()))
try:
    open("/etc/cordon-escape", "w").write("x")
    print("WROTE")
except OSError as e:
    print("write:", e.strerror)'
  if [ -e /etc/cordon-escape ]; then
    not_ok "guest root remounted and wrote the host's /etc: $out"
    rm -f /etc/cordon-escape
  else ok "guest root cannot write the host's /etc even after a remount ($(echo "$out" | tr '\n' ' '))"; fi
  attack "$root_vm" "guest root sees a host process" see-host
  # The agent holds its port open: a second opener (root included) is refused.
  cat > "$ws/port.py" <<'EOF'
import glob, os, sys
for dev in sorted(glob.glob("/dev/vport*")):
    try:
        fd = os.open(dev, os.O_RDWR | os.O_NONBLOCK)
    except OSError as e:
        print("%s: %s" % (dev, e.strerror))
        continue
    print("%s: opened" % dev)
    os.close(fd)
sys.exit(5)
EOF
  in_vm "$root_vm" python3 /workspace/port.py
  if [ "$code" -eq 5 ] && [[ "$out" != *opened* ]]; then ok "guest root cannot open the agent's port: $(echo "$out" | tr '\n' ' ')"
  else not_ok "guest root and the agent's port: exit $code: $out"; fi
  # Files guest root makes in the workspace land on the host as the workspace's owner, never as
  # the host's root with set-id bits.
  in_vm "$root_vm" sh -c 'echo x > /workspace/root-made && chmod 4755 /workspace/root-made; chown 0:0 /workspace/root-made; stat -c "%u %a" /workspace/root-made'
  owner=$(stat -c %u "$ws/root-made" 2>/dev/null)
  mode=$(stat -c %a "$ws/root-made" 2>/dev/null)
  if [ "$owner" = "$(stat -c %u "$ws")" ] && [ "$mode" != 4755 ]; then
    ok "a file the guest's root makes is the workspace owner's on the host, no set-uid (mode $mode)"
  else not_ok "a file the guest's root made: owner $owner, mode $mode on the host (guest: $out)"; fi
  "$CORDON" session destroy "$root_vm" >/dev/null 2>&1
  sessions=("${sessions[@]/$root_vm/}")
fi

# ---- the one-shot path: cordon run -----------------------------------------------------------
out=$(cd "$ws" && timeout "$BOOT_BOUND" "$CORDON" run --backend microvm --monitor "$monitor" --workspace "$ws" --net none -- sh -c '/workspace/probe see-host >&2; exit 126' 2>&1)
code=$?
if [ "$code" -eq 126 ] && [[ "$out" == *"none from the host"* ]]; then
  ok "cordon run: a command that exits 126 by itself is 126; no host process seen"
else not_ok "cordon run: exit $code (expected 126): $out"; fi

# ---- nothing left --------------------------------------------------------------------------
left=$(ls "$project/.cordon/sessions" 2>/dev/null | wc -l)
if [ "$left" -eq 0 ]; then ok "every session was destroyed"
else not_ok "$left sessions left behind"; fi
leaked=0
for p in "${vmms[@]}"; do
  [ -n "$p" ] && [ -d "/proc/$p" ] && [ "$(awk '{print $3}' "/proc/$p/stat")" != Z ] && leaked=$((leaked + 1))
done
if [ "${#vmms[@]}" -ge 2 ] && [ "$leaked" -eq 0 ]; then ok "no VMM of this suite's sessions is left (${vmms[*]})"
else not_ok "VMMs of this suite's sessions left: $leaked of ${vmms[*]}"; fi

echo "1..$n"
[ "$failed" -eq 0 ]
