# shellcheck shell=bash disable=SC2154 # the fixtures and helpers are escape.sh's
# Issue 14, findings 1 (visibility) and 6: no cordon state or secret is visible in any sandbox.
#  (i)   another project's .cordon/ inside the workspace (made by the operator through cordon,
#        so it is in the registry of projects): nothing of it can be listed, read or written;
#  (ii)  a read-only grant holding the key directory, the state home (with the registry), a
#        registered project's .cordon/ deep inside and an unregistered .cordon/ at its top: none
#        of them can be read, while a plain file of the grant can (the control);
#  (iii) a workspace or a grant inside a state directory is refused (exit 4, naming both).
# Sourced by escape.sh (see its helpers). This file's state home and key directory live inside
# the grant, in $outside, for its commands only.
hs_grant="$outside/hs-grant"
hs_env=(env XDG_STATE_HOME="$hs_grant/xdg" CORDON_KEY_DIR="$hs_grant/keys")
mkdir -p "$hs_grant/keys" "$hs_grant/.cordon" "$hs_grant/deep/proj" "$hs_grant/xdg/cordon" "$ws/inner"
echo "state" > "$hs_grant/xdg/cordon/marker"
echo "key" > "$hs_grant/keys/signing.key"
echo "state" > "$hs_grant/.cordon/marker"
echo "visible" > "$hs_grant/visible"
echo "visible" > "$ws/inner/visible"
if ! "${hs_env[@]}" CORDON_PROJECT="$ws/inner" "$CORDON" snapshot take "$ws/inner" >/dev/null ||
  ! "${hs_env[@]}" CORDON_PROJECT="$hs_grant/deep/proj" "$CORDON" snapshot take \
    "$hs_grant/deep/proj" >/dev/null; then
  not_ok "hidden state: cannot make the fixture projects with cordon snapshot take"
fi
echo "state" > "$ws/inner/.cordon/marker"
echo "state" > "$hs_grant/deep/proj/.cordon/marker"
# Readable by the sandbox's uid were they not hidden (rootless, the sandbox is the owner; as
# root, ns maps it to nobody and docker runs as the workspace's owner, nobody here).
chmod -R go+rX "$hs_grant" "$ws/inner"
[ "$backend" = docker ] && chown -R 65534:65534 "$ws/inner"

# hs_run NAME KIND [flags...] -- VERB ARGS...: attack or control with this file's environment.
hs_run() {
  local name=$1 kind=$2
  shift 2
  XDG_STATE_HOME="$hs_grant/xdg" CORDON_KEY_DIR="$hs_grant/keys" "$kind" "$name" "$@"
}

# (i) another project inside the workspace
hs_run "a file beside another project's .cordon/" control -- read-file /workspace/inner/visible
hs_run "list another project's .cordon/ in the workspace" attack -- list-dir /workspace/inner/.cordon
hs_run "read another project's .cordon/ in the workspace" attack -- read-file /workspace/inner/.cordon/marker
hs_run "write into another project's .cordon/ in the workspace" attack -- write-file /workspace/inner/.cordon/planted
if [ -e "$ws/inner/.cordon/planted" ]; then not_ok "a file was planted in another project's .cordon/"
else ok "nothing planted in another project's .cordon/"; fi

# (ii) a grant holding cordon's secrets and state
if [ "$backend" = gvisor ]; then
  skip "(ii) a grant holding cordon's secrets and state" "the gvisor backend offers no host grants (refused by name: escape.sh)"
else
hs_flags=(--allow-ro "$hs_grant")
hs_run "read a plain file of a grant" control "${hs_flags[@]}" -- read-file "$hs_grant/visible"
hs_run "read the key directory inside a grant" attack "${hs_flags[@]}" -- read-file "$hs_grant/keys/signing.key"
hs_run "list the key directory inside a grant" attack "${hs_flags[@]}" -- list-dir "$hs_grant/keys"
hs_run "list the state home (registry of projects) inside a grant" attack "${hs_flags[@]}" -- list-dir "$hs_grant/xdg/cordon"
hs_run "read a registered project's .cordon/ deep in a grant" attack "${hs_flags[@]}" -- read-file "$hs_grant/deep/proj/.cordon/marker"
hs_run "read an unregistered .cordon/ at the top of a grant" attack "${hs_flags[@]}" -- read-file "$hs_grant/.cordon/marker"
fi # gvisor: no grants

# (iii) refusals: exit 4 from session create, 125 from run (cordon failed), naming the state
# directory; nothing is created.
mkdir -p "$ws/.cordon/hs-sub"
hs_refused() {
  local name=$1
  shift
  out=$("${hs_env[@]}" "$CORDON" session create --backend "$backend" "$@" 2>&1)
  code=$?
  if [ "$code" -eq 4 ] && echo "$out" | grep -q "cordon's state directory"; then
    ok "$name refused: $out"
  else
    not_ok "$name: exit $code (expected 4, refused): $out"
    [ "$code" -eq 0 ] && "$CORDON" session destroy "$out" >/dev/null 2>&1
  fi
}
hs_refused "a workspace inside the project's .cordon/" --workspace "$ws/.cordon/hs-sub"
hs_refused "the key directory as the workspace" --workspace "$hs_grant/keys"
hs_refused "a workspace inside another project's .cordon/" --workspace "$ws/inner/.cordon/cas"
if [ "$backend" = gvisor ]; then
  skip "(iii) grants of a state directory" "the gvisor backend offers no host grants (refused by name: escape.sh)"
else
hs_refused "a grant of a project's .cordon/" --workspace "$ws" --allow-ro "$hs_grant/deep/proj/.cordon"
hs_refused "a grant of the state home" --workspace "$ws" --allow-ro "$hs_grant/xdg/cordon"
fi
out=$("${hs_env[@]}" "$CORDON" run --backend "$backend" --workspace "$ws/.cordon/hs-sub" -- true 2>&1)
code=$?
if [ "$code" -eq 125 ] && echo "$out" | grep -q "lies inside cordon's state directory"; then
  ok "run with a workspace inside .cordon/ refused: $out"
else not_ok "run with a workspace inside .cordon/: exit $code (expected 125): $out"; fi
rm -rf "$ws/inner" "$ws/.cordon/hs-sub"
