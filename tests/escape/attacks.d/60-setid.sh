# shellcheck shell=bash
# Issue 14, finding 9: no set-user-ID or set-group-ID file or directory made inside a sandbox may
# reach the host. The probe tries every way to leave one (chmod, fchmod, fchmodat, fchmodat2, the
# 32-bit and x32 entry points, open/openat/creat/openat2 with O_CREAT, O_TMPFILE, mknod S_IFREG,
# g+s on a directory); then the host looks for any set-id bit under the workspace. Sourced by
# escape.sh (see its helpers).

setid_sweep() { # WORKSPACE NAME: no set-id bit anywhere below WORKSPACE, seen from the host
  local left
  left=$(find "$1" -perm /6000 2>/dev/null | head -3 | tr '\n' ' ')
  if [ -z "$left" ]; then ok "$2: no set-id file or directory on the host"
  else not_ok "$2: set-id bits reached the host: $left"; fi
}

rm -rf "$ws"/setid.*
control "ordinary modes (0600, 0755, 01777, O_TMPFILE) still work" -- modes /workspace/setid
attack "set-id bits on what the sandbox makes" -- setid /workspace/setid
setid_sweep "$ws" "set-id bits on what the sandbox makes"
rm -rf "$ws"/setid.*

# The review's case: a root-owned workspace, whose new files are host root's (ns maps its owner
# to the sandbox uid; docker runs the command as that owner, uid 0 without capabilities).
if [ "$role" = root ]; then
  setid_ws=$(mktemp -d /tmp/cordon-escape-setid.XXXXXX)
  chmod 755 "$setid_ws"
  cp "$PROBE" "$setid_ws/probe"
  setid_saved_policy=("${policy[@]}")
  policy=(--workspace "$setid_ws")
  attack "set-id bits in a root-owned workspace" -- setid /workspace/setid
  policy=("${setid_saved_policy[@]}")
  setid_sweep "$setid_ws" "set-id bits in a root-owned workspace"
  rm -rf "$setid_ws"
else
  skip "set-id bits in a root-owned workspace" "an unprivileged user cannot own one as root"
fi
