# Findings 10 and 11, from inside a session forked from a snapshot (the path of race candidates
# and judges). Root half only (forks are overlay mounts (ns) or fresh workspaces cordon owns
# (docker) only as root); on ns in session mode, on docker in both (its suite runs `run` mode).
#  - user.overlay.* xattrs set from inside are content, never overlay markers: the session's
#    next snapshot still holds the file marked as a whiteout and what is below the directory
#    marked opaque (on ns a marker read as such dropped them; a metacopy aborted the snapshot);
#  - on docker the fork's root file system is read-only and its commands are not root, so a
#    candidate cannot replace a tool the judge runs.
if [ "$role" = root ] && { [ "$mode" = session ] || [ "$backend" = docker ]; }; then
  h7_base=$("$CORDON" snapshot take "$ws" --exclude .cordon 2>&1)
  if ! h7_id=$("$CORDON" session create --backend "$backend" --from "$h7_base" 2>&1); then
    not_ok "forged overlay markers: cannot fork a session from $h7_base: $h7_id"
  else
    h7_set=0
    for h7_x in "conf/token user.overlay.whiteout y" "ro user.overlay.opaque y" \
                "ro/file user.overlay.metacopy x"; do
      read -r h7_path h7_name h7_value <<<"$h7_x"
      h7_out=$("$CORDON" session exec "$h7_id" -- /workspace/probe set-xattr \
        "/workspace/$h7_path" "$h7_name" "$h7_value" 2>&1)
      [ $? -eq 0 ] && h7_set=$((h7_set + 1))
    done
    if [ "$h7_set" -eq 0 ]; then
      skip "forged overlay markers" "user xattrs cannot be set in this sandbox ($h7_out)"
    elif ! h7_snap=$("$CORDON" session snapshot "$h7_id" 2>&1); then
      not_ok "forged overlay markers abort the fork's snapshot: $h7_snap"
    else
      h7_show=$("$CORDON" snapshot show "$h7_snap" 2>&1)
      if grep -q ' conf/token$' <<<"$h7_show" && grep -q ' ro/file$' <<<"$h7_show"; then
        ok "forged overlay markers ($h7_set set) are content: the snapshot holds every file"
      else
        not_ok "forged overlay markers ESCAPED: files missing from the snapshot: $h7_show"
      fi
    fi
    if [ "$backend" = docker ]; then
      h7_out=$("$CORDON" session exec "$h7_id" -- /workspace/probe write-file /bin/cordon-escape 2>&1)
      case $? in
        1) ok "a fork cannot write its root file system: $(tail -1 <<<"$h7_out")" ;;
        *) not_ok "a fork wrote its root file system ESCAPED: $h7_out" ;;
      esac
    fi
    "$CORDON" session destroy "$h7_id" >/dev/null 2>&1
  fi
fi
