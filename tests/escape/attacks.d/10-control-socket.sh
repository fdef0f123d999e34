# shellcheck shell=bash
# Finding 1 of issue 14: another project's session, below the workspace (a workspace of /tmp or
# $HOME with a project inside). From inside a sandbox: (a) drive that session's control socket,
# (b) rewrite its state so that the operator's `session destroy` kills a host process of our
# choice, (c) plant a listener where its socket used to be, so that the operator's `session
# exec` hands us its argv and --env secrets and takes our forged exit code. Each layer must hold
# on its own, even where the other project's .cordon/ is visible in the sandbox. The inner
# session is always an ns one (the operator's), the attacker runs on $backend.

inner="$ws/inner"
mkdir -p "$inner/w"
inner_cordon() { CORDON_PROJECT="$inner" "$CORDON" "$@"; }
state_field() { sed -n "s/.*\"$1\": \"\\{0,1\\}\\([^\",]*\\)\"\\{0,1\\},\\{0,1\\}\$/\\1/p" "$2" | head -1; }

if ! inner_id=$(inner_cordon session create --backend ns --workspace "$inner/w" 2>&1); then
  skip "another project's session below the workspace" "cannot create it: $inner_id"
else
  inner_dir="$inner/.cordon/sessions/$inner_id"
  # docker's workload runs as the workspace's owner (65534 here): give it the inner project as
  # the ns idmap gives it to an ns sandbox, so that the attacks are tried, not merely denied.
  [ "$backend" = docker ] && chown -R 65534:65534 "$inner/.cordon"
  seen_dir="/workspace/inner/.cordon/sessions/$inner_id" # the same, as the sandbox sees it
  inner_sock=$(state_field socket "$inner_dir/state.json")
  # Where the socket really is (today: the runtime directory; before: the session directory).
  case $inner_sock in
    /*) real_sock_dir=$(dirname "$inner_sock") ;;
    *) real_sock_dir=$inner_dir ;;
  esac
  note "inner session $inner_id, socket in $real_sock_dir"

  # (a) Any socket of the inner project, and the real socket's directory should it be visible.
  attack "another project's control socket, driven from inside" -- \
    hijack-holder /workspace/inner/.cordon "$real_sock_dir"

  # (a') A client on the host that does not prove the session's secret (anyone who can reach
  # the socket's path: same uid, or a sandbox that could see it) runs nothing.
  hout=$("$PROBE" hijack-holder "$real_sock_dir" 2>&1)
  case $? in
    1) ok "a client without the session's secret is refused: $hout" ;;
    0) not_ok "a client without the session's secret ran a command: $hout" ;;
    *) not_ok "hijack-holder from the host broke: $hout" ;;
  esac

  # (c) A listener planted at the session directory's socket path.
  rm -f "$ws/plant.out" "$outside/plant.code"
  before=$(stat -c %i "$inner_dir/holder.sock" 2>/dev/null || echo none)
  (
    run_probe -- plant-listener "$seen_dir/holder.sock" /workspace/plant.out 30
    echo "$code" > "$outside/plant.code"
    echo "$out" > "$outside/plant.txt"
  ) &
  plant_job=$!
  for _ in $(seq 150); do
    now=$(stat -c %i "$inner_dir/holder.sock" 2>/dev/null || echo none)
    { [ "$now" != none ] && [ "$now" != "$before" ]; } && break
    [ -e "$outside/plant.code" ] && break
    sleep 0.1
  done
  secret="cordon-escape-secret-$$"
  eout=$(inner_cordon session exec "$inner_id" --env "ESCAPE_SECRET=$secret" -- \
    sh -c 'echo "real holder $ESCAPE_SECRET"' 2>&1)
  ecode=$?
  # Release the listener if nobody came (the operator's exec went elsewhere, as it must).
  if [ ! -e "$outside/plant.code" ] && [ -S "$inner_dir/holder.sock" ]; then
    python3 - "$inner_dir/holder.sock" <<'EOF' 2>/dev/null
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"bye")
s.close()
EOF
  fi
  wait "$plant_job"
  pcode=$(cat "$outside/plant.code" 2>/dev/null || echo 2)
  if [ "$pcode" = 0 ] || [ "$ecode" = 42 ] || grep -qF "$secret" "$ws/plant.out" 2>/dev/null; then
    not_ok "a listener planted at the old socket path took the operator's exec (exit $ecode): $(cat "$outside/plant.txt" 2>/dev/null)"
  elif [ "$ecode" = 0 ] && [ "$eout" = "real holder $secret" ]; then
    ok "a listener planted at the old socket path got nothing; exec reached the holder: $(tail -1 "$outside/plant.txt" 2>/dev/null)"
  else
    not_ok "session exec after a planted listener: exit $ecode: $eout"
  fi
  rm -f "$ws/plant.out"

  # (b) Rewrite the inner state to name a host process (with its start time, as if guessed)
  # and, as root, a host cgroup holding it; then the operator destroys the inner session.
  bash -c 'exec -a cordon-escape-victim sleep 600' &
  victim=$!
  pids+=("$victim")
  victim_start=$(awk '{print $22}' "/proc/$victim/stat")
  victim_cg=
  if [ "$role" = root ]; then
    v2=$(awk '$3 == "cgroup2" {print $2; exit}' /proc/self/mounts)
    if [ -n "$v2" ] && mkdir "$v2/cordon-escape-victim-$$" 2>/dev/null; then
      if echo "$victim" > "$v2/cordon-escape-victim-$$/cgroup.procs" 2>/dev/null; then
        victim_cg="$v2/cordon-escape-victim-$$"
      else
        rmdir "$v2/cordon-escape-victim-$$"
      fi
    fi
  fi
  cp "$inner_dir/state.json" "$outside/inner-state.json"
  holder_pid=$(state_field holder_pid "$inner_dir/state.json")
  holder_start=$(state_field holder_start "$inner_dir/state.json")
  cg=$(state_field cgroup_v2 "$inner_dir/state.json")
  pairs=("\"holder_pid\": $holder_pid" "\"holder_pid\": $victim"
         "\"holder_start\": $holder_start" "\"holder_start\": $victim_start")
  [ -n "$cg" ] && [ -n "$victim_cg" ] && pairs+=("\"cgroup_v2\": \"$cg\"" "\"cgroup_v2\": \"$victim_cg\"")
  run_probe -- rewrite-file "$seen_dir/state.json" "${pairs[@]}"
  rcode=$code
  rout=$out
  dout=$(inner_cordon session destroy "$inner_id" 2>&1)
  dcode=$?
  sleep 0.2
  if ! kill -0 "$victim" 2>/dev/null; then
    not_ok "a rewritten state made destroy kill a host process of the sandbox's choice: $dout"
  elif [ -n "$victim_cg" ] && [ ! -d "$victim_cg" ]; then
    not_ok "a rewritten state made destroy remove a host cgroup of the sandbox's choice: $dout"
  elif [ "$rcode" = 1 ]; then
    ok "the inner state could not be rewritten from inside: $(echo "$rout" | tail -1)"
  elif [ "$rcode" = 0 ] && [ "$dcode" = 1 ] && [ "$(echo "$dout" | wc -l)" = 1 ]; then
    ok "destroy refused the rewritten state: $dout"
  else
    not_ok "destroy of a rewritten state (rewrite exit $rcode): exit $dcode: $dout"
  fi
  # Put the real state back and destroy the inner session for good.
  [ -d "$inner_dir" ] && cp "$outside/inner-state.json" "$inner_dir/state.json"
  inner_cordon session destroy "$inner_id" >/dev/null 2>&1
  kill "$victim" 2>/dev/null
  wait "$victim" 2>/dev/null
  [ -n "$victim_cg" ] && rmdir "$victim_cg" 2>/dev/null
  if [ -d "$inner_dir" ] || { [ "${inner_sock#/}" != "$inner_sock" ] && [ -e "$inner_sock" ]; }; then
    not_ok "the inner session was not cleaned up ($inner_dir, $inner_sock)"
  fi
fi
rm -rf "$inner"
