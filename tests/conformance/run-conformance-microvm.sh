#!/bin/sh
# The conformance suite on the microvm backend, with the monitor $CORDON_MICROVM_MONITOR names
# (fake when unset: everything above the monitor shim, without a VM).
# usage: run-conformance-microvm.sh CORDON
#
# The fake monitor runs commands on the host, as the caller: it cannot give what only a guest
# gives, so under it exactly these checks may fail, and no other: the host's interfaces are
# there (default-egress-loopback, net-none-no-interface) and commands run as the caller, not
# as uid 1000 (sandbox-user-1000). Any other monitor must pass everything.
set -u
cordon=$1
monitor=${CORDON_MICROVM_MONITOR:-fake}
export CORDON_MICROVM_MONITOR=$monitor
out=$("$(dirname "$0")/run-conformance.sh" "$cordon" microvm 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -eq 4 ] && printf '%s' "$out" | grep -q 'backend microvm is unavailable'; then
  echo "SKIP: the microvm backend is unavailable here with monitor $monitor"
  exit 77
fi
[ "$monitor" = fake ] || exit "$rc"
failed=$(printf '%s\n' "$out" | sed -n 's/^fail \([^:]*\).*/\1/p' |
  grep -v -x -e default-egress-loopback -e net-none-no-interface -e sandbox-user-1000)
if [ -n "$failed" ]; then
  echo "FAIL under the fake monitor: $failed"
  exit 1
fi
printf '%s\n' "$out" | grep -q '^pass cwd' || { echo "FAIL: the suite did not run"; exit 1; }
exit 0
