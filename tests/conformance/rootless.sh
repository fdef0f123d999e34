#!/bin/sh
# The conformance suite against the ns backend as an unprivileged user (uid 65534, no
# capabilities, no groups), the way a rootless caller runs it: the binary is copied where that
# user can execute it, into a project that user owns.
#   rootless.sh CORDON        (meson test runs it as root; skips, saying why, otherwise)
set -u
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root to become uid 65534"; exit 77; }
as_user="setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all"
if ! $as_user unshare -U true 2>/dev/null; then
  echo "SKIP: unprivileged user namespaces are unavailable here"
  exit 77
fi
dir=$(mktemp -d /tmp/cordon-rootless.XXXXXX) || exit 1
trap 'rm -rf "$dir"' EXIT
chmod 755 "$dir"
cp "$1" "$dir/cordon"
mkdir "$dir/project"
chown 65534:65534 "$dir/project"
cd "$dir/project" || exit 1
$as_user env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$dir/project" LANG=C.UTF-8 \
  CORDON_PROJECT="$dir/project" "$dir/cordon" conformance ns
