#!/usr/bin/env bash
# tests/integration/run-native-dpdk.sh — run build/itests/test_native_dpdk
# (the native client library's DPDK transport against a real sluiced over
# net_tap). Prints its result lines and figures; the full output on
# failure. A scenario the machine cannot run (no root, the EAL refuses)
# prints SKIPPED and its reason, and does not fail the run. BUILD=dir
# selects another build; an argument (stream, faults, own-eal) runs one
# scenario.
set -u
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
out=$(mktemp)
echo "== integration: test_native_dpdk"
start=$(date +%s)
"$build/itests/test_native_dpdk" "$@" >"$out" 2>&1
rc=$?
grep -E '^(ok|FAIL|SKIPPED|native_dpdk)' "$out" || true
echo "test_native_dpdk: $(( $(date +%s) - start )) s"
if [ $rc -ne 0 ]; then
  echo "integration suite test_native_dpdk FAILED (exit $rc); full output:"
  cat "$out"
fi
rm -f "$out"
exit $rc
