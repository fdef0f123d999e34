# shellcheck shell=bash
# A read-only or hidden path named through a symlink planted in the workspace (by an earlier run:
# the workspace is the sandbox's to write) must never bring a host tree into the sandbox: the
# policy's paths resolve beneath the workspace, and one that leaves it is refused. Before, the
# gvisor backend handed runsc the path as named, and runsc's gofer followed the link on the host:
# `--ro out-link` bound the host directory it points at. Sourced by ../escape.sh.

# policy_link NAME FLAGS... -- VERB ARGS...: refused before anything runs, by a line naming the
# path (run_probe gives 125 for both paths), or run with nothing of the host readable (the probe
# blocked).
policy_link() {
  local name=$1
  shift
  run_probe "$@"
  if [ "$code" -eq 125 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] &&
    echo "$out" | grep -q "path out-link.*\(outside the workspace\|symbolic link\)"; then
    ok "$name: refused: $(echo "$out" | tail -1)"
  elif [ "$code" -eq 1 ]; then
    ok "$name: $(echo "$out" | tail -1)"
  else
    not_ok "$name: exit $code (expected a refusal or the probe's 'blocked'): $out"
  fi
}

policy_link "a read-only path through a planted symlink to the host" --ro out-link \
  -- read-file /workspace/out-link/file
policy_link "a read-only path beneath a planted symlink to the host" --ro out-link/file \
  -- read-file /workspace/out-link/file
policy_link "a hidden path beneath a planted symlink to the host" --hide out-link/file \
  -- read-file /workspace/out-link/file
