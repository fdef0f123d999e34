# Findings 2 and 3 (issue 14): out of memory in a sandbox, and /tmp and /dev/shm sizes.
#
# (a) With --memory, fill the memory cgroup through /tmp (tmpfs pages are charged to the writer,
#     but are no process's resident memory, so the OOM killer weighs everyone else in the cgroup
#     by theirs). A one-shot sandbox's pid 1 shares the memory of the `cordon` that made it: if
#     it is in the cgroup, it is the victim, and the kernel kills every process sharing its
#     memory, `cordon` included. Only the command may die: cordon ends with its status (137, or
#     the probe's "blocked" when the write fails first), the session goes on serving execs (in
#     session mode), and nothing is left behind.
# (b) Without --memory, --tmp-size caps /tmp and /dev/shm: writing past it fails (ENOSPC).

# gvisor refuses --memory and --tmp-size by name (escape.sh checks the memory refusal).
if [ "$backend" = gvisor ]; then
  skip "OOM through /tmp and --tmp-size" "the gvisor backend refuses --memory and --tmp-size by name"
  return 0
fi

# memory_run FLAGS... -- VERB ARGS...: like run_probe, but through python so that a cordon
# killed by a signal shows as a negative $code (bash says 137 for both).
memory_run() {
  local flags=() status
  while [ "$1" != "--" ]; do flags+=("$1"); shift; done
  shift
  local wrap=(python3 -c 'import subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
sys.stdout.write(r.stdout.decode(errors="replace"))
print("\ncordon-status %d" % r.returncode)')
  if [ "$mode" = session ]; then
    out=$("${wrap[@]}" "$CORDON" session exec "$memory_session" -- /workspace/probe "$@")
  else
    out=$("${wrap[@]}" "$CORDON" run --backend "$backend" "${policy[@]}" "${flags[@]}" -- \
      /workspace/probe "$@")
  fi
  code=$(echo "$out" | awk '$1 == "cordon-status" {print $2}' | tail -1)
  out=$(echo "$out" | grep -v '^cordon-status ' | sed '/^$/d')
}

# Cgroups whose owner label names a session directory of this project.
memory_leftover_cgroups() {
  python3 - "$project" <<'EOF'
import os, sys
prefix = sys.argv[1] + "/"
for top in ("/sys/fs/cgroup",):
    for root, dirs, _ in os.walk(top):
        if root.count("/") > 9:
            dirs[:] = []
            continue
        if not os.path.basename(root).startswith("cordon-"):
            continue
        try:
            owner = os.getxattr(root, "user.cordon.owner").decode()
        except OSError:
            continue
        if owner.startswith(prefix):
            print(root)
EOF
}

memory_sessions() { ls "$project/.cordon/sessions" 2>/dev/null | sort; }

if ! command -v python3 >/dev/null; then
  skip "OOM through /tmp kills only the command" "python3 is missing (it tells a killed cordon from an exit 137)"
else
  memory_before=$(memory_sessions)
  memory_session=
  memory_skip=
  if [ "$mode" = session ]; then
    if ! memory_session=$("$CORDON" session create --backend "$backend" "${policy[@]}" --memory 64M 2>&1); then
      if echo "$memory_session" | grep -q "cannot be enforced"; then
        memory_skip="the memory limit cannot be enforced here: $(echo "$memory_session" | tail -1)"
      else
        not_ok "OOM through /tmp: no session with --memory 64M: $memory_session"
        memory_skip="no session"
      fi
      memory_session=
    fi
  fi
  if [ -z "$memory_skip" ]; then
    memory_run --memory 64M -- fill-file /tmp/fill 256
    case $code in
      137 | 1) ok "OOM through /tmp (--memory 64M): cordon ends with the command's status $code" ;;
      125)
        if [ "$backend" = docker ] && [ "$(echo "$out" | wc -l)" -eq 1 ] &&
          echo "$out" | grep -q "out of memory"; then
          # docker: once the command is killed its full /tmp stays charged to the container's
          # memory cgroup, which init shares: init may be the next victim (docs/security.md).
          ok "OOM through /tmp (--memory 64M): the container ran out of memory, said in one line"
        elif echo "$out" | grep -q "cannot be enforced"; then
          memory_skip="the memory limit cannot be enforced here: $(echo "$out" | tail -1)"
        else
          not_ok "OOM through /tmp: cordon failed (125): $out"
        fi
        ;;
      -*) not_ok "OOM through /tmp KILLED cordon itself (signal ${code#-}): $out" ;;
      0) not_ok "OOM through /tmp: 256 MiB written under --memory 64M: $out" ;;
      *) not_ok "OOM through /tmp: exit $code: $out" ;;
    esac
  fi
  if [ -n "$memory_skip" ]; then
    [ "$memory_skip" = "no session" ] ||
      skip "OOM through /tmp kills only the command" "$memory_skip"
  else
    if [ "$mode" = session ]; then
      # The session lives on: the next exec is a command's status (its /tmp is still full, so a
      # command that needs memory may well be killed too), never a dead sandbox.
      # docker: init and the exec's monitor share the container's memory cgroup with the full
      # /tmp, so the next exec may run out of memory before its command raised its OOM score and
      # take the container down: that must at least be said in one line (docs/security.md).
      memory_run -- read-file /workspace/ro/file
      case $code in
        0 | 1 | 137) ok "after an OOM kill the session still runs commands (exit $code)" ;;
        125)
          if [ "$backend" = docker ] && [ "$(echo "$out" | wc -l)" -eq 1 ] &&
            echo "$out" | grep -q "out of memory"; then
            ok "after an OOM kill with a full /tmp, the container ran out of memory, said in one line"
          else
            not_ok "after an OOM kill the session is broken: exit $code: $out"
          fi
          ;;
        *) not_ok "after an OOM kill the session is broken: exit $code: $out" ;;
      esac
      if "$CORDON" session destroy "$memory_session" >/dev/null 2>&1; then
        ok "the OOM-killed session is destroyed"
      else
        not_ok "the OOM-killed session cannot be destroyed"
      fi
    fi
    if [ "$(memory_sessions)" = "$memory_before" ]; then
      ok "no session left behind by the OOM kill"
    else
      not_ok "sessions left behind by the OOM kill: $(comm -13 <(echo "$memory_before") <(memory_sessions) | tr '\n' ' ')"
    fi
    if [ "$backend" = ns ]; then
      memory_cgroups=$(memory_leftover_cgroups)
      if [ -z "$memory_cgroups" ]; then ok "no cgroup left behind by the OOM kill"
      else not_ok "cgroups left behind by the OOM kill: $memory_cgroups"; fi
      memory_pid1=0
      for p in $(pgrep -x cordon); do
        grep -qF "$project" "/proc/$p/mountinfo" 2>/dev/null && memory_pid1=$((memory_pid1 + 1))
      done
      if [ "$memory_pid1" -eq 0 ]; then ok "no sandbox pid 1 left behind by the OOM kill"
      else not_ok "$memory_pid1 sandbox pid 1 left behind by the OOM kill"; fi
    fi
  fi
  [ -z "$memory_session" ] || "$CORDON" session destroy "$memory_session" >/dev/null 2>&1
fi

# (b) /tmp and /dev/shm are capped without --memory.
control "write 4 MiB to /tmp under --tmp-size 8M" --tmp-size 8M -- fill-file /tmp/fill 4
attack "write 32 MiB to /tmp past --tmp-size 8M" --tmp-size 8M -- fill-file /tmp/fill 32
attack "write 32 MiB to /dev/shm past --tmp-size 8M" --tmp-size 8M -- fill-file /dev/shm/fill 32
