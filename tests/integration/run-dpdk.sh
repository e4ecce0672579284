#!/usr/bin/env bash
# tests/integration/run-dpdk.sh [SUITE [SCENARIO]] — run the DPDK suites,
# plain programs (one EAL per process), as `make test` does:
#   test_dpdk_net     dataplane/dpdk_port and netstack over net_tap, net_memif
#                     and net_ring (scenarios: tap, memif)
#   test_native_dpdk  libsluice_native's DPDK transport against a real sluiced
#                     over net_tap, and both on DPDK over net_memif (scenarios:
#                     stream, faults, own-eal, memif)
# No argument: both. Prints each suite's result lines and figures; its full
# output on failure. A scenario the machine cannot run (no root, the EAL
# refuses) prints SKIPPED and its reason, and does not fail the run.
# BUILD=dir selects another build.
set -u
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
suites=("${1:-test_dpdk_net test_native_dpdk}")
shift $(( $# > 0 ? 1 : 0 ))
fail=0
for s in ${suites[*]}; do
  out=$(mktemp)
  echo "== integration: $s"
  start=$(date +%s)
  "$build/itests/$s" "$@" >"$out" 2>&1
  rc=$?
  grep -E '^(ok|FAIL|SKIPPED|port:|dpdk_net|native_dpdk)' "$out" || true
  echo "$s: $(( $(date +%s) - start )) s"
  if [ $rc -ne 0 ]; then
    fail=1
    echo "integration suite $s FAILED (exit $rc); full output:"
    cat "$out"
  fi
  rm -f "$out"
done
exit $fail
