#!/usr/bin/env bash
# tests/integration/run-dpdk.sh — run build/itests/test_dpdk_net (the DPDK
# port and network stack over net_tap and net_memif). Prints its result
# lines and the ports' reports; the full output on failure. A scenario the
# machine cannot run (no root, the EAL refuses) prints SKIPPED and its
# reason, and does not fail the run. BUILD=dir selects another build;
# an argument (tap, memif) runs one scenario.
set -u
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
out=$(mktemp)
echo "== integration: test_dpdk_net"
start=$(date +%s)
"$build/itests/test_dpdk_net" "$@" >"$out" 2>&1
rc=$?
grep -E '^(ok|FAIL|SKIPPED|port:|dpdk_net)' "$out" || true
echo "test_dpdk_net: $(( $(date +%s) - start )) s"
if [ $rc -ne 0 ]; then
  echo "integration suite test_dpdk_net FAILED (exit $rc); full output:"
  cat "$out"
fi
rm -f "$out"
exit $rc
