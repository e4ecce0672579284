#!/usr/bin/env bash
# tests/bench_emulate_smoke.sh — bench/emulate.c (sluice-bench suite
# --emulate) for real, through build/emulate-check (tests/emulate_check.c):
# with hw-profiles/kafka-2014.conf, TCP both ways across the emulated
# namespace's veth pair must be shaped (below twice 1 Gb/s, where loopback
# does many times that), the tbf must show on both ends, the disk cap is
# tried with O_DIRECT writes, and teardown leaves nothing behind. Needs
# root: otherwise prints SKIP and exits 77, which scripts/run-test-scripts
# counts as a failure (it knows no skips; CI runs as root).
# BUILD=dir takes the program from another build.
set -u
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: bench emulate smoke needs root (network namespaces, tc, cgroups)"
  exit 77
fi
bin=${BUILD:-build}/emulate-check
[ -x "$bin" ] || { echo "bench emulate smoke: no $bin (make builds it)"; exit 1; }
start=$(date +%s)
"$bin" hw-profiles/kafka-2014.conf
rc=$?
left=$(ip netns list | grep -E "^sluice-em-" | while read -r ns _; do
  pid=${ns#sluice-em-}; kill -0 "$pid" 2>/dev/null || echo "$ns"; done)
if [ -n "$left" ]; then echo "bench emulate smoke: leftover namespaces: $left"; rc=1; fi
echo "bench emulate smoke: $(( $(date +%s) - start )) s, $([ $rc -eq 0 ] && echo '1 passed, 0 failed' || echo '0 passed, 1 failed')"
exit $rc
