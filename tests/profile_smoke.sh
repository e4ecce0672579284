#!/usr/bin/env bash
# tests/profile_smoke.sh — `scripts/profile` (make profile) on a small
# produce run: perf records the bench and its broker, and the summary gives
# the client's and the broker's shares with a CPU time per record, the
# threads of each, and the broker's top functions; the directory is
# removed. A bad --freq is bad usage (exit 2).
set -u
cd "$(dirname "$0")/.."
out=$(mktemp -d "${SLUICE_TEST_DIR:-/var/tmp}/sluice-profile-smoke-XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
bad=''
log=$(scripts/profile --out "$out" produce --records 20000 2>&1)
rc=$?
[ $rc -eq 0 ] || bad="exit $rc"
grep -Eq '^client +[0-9.]+% of the samples, [0-9]+ ns of CPU a record' "$out/summary.txt" 2>/dev/null ||
	bad="$bad; no client line"
grep -Eq '^broker +[0-9.]+% of the samples, [0-9]+ ns of CPU a record' "$out/summary.txt" 2>/dev/null ||
	bad="$bad; no broker line"
grep -Eq 'sluice-shard[0-9]' "$out/threads.txt" 2>/dev/null || bad="$bad; no shard thread sampled"
grep -Eq '^ +[0-9.]+%' "$out/broker.txt" 2>/dev/null || bad="$bad; no broker function"
grep -q '^records 20000$' "$out/summary.txt" 2>/dev/null || bad="$bad; records not 20000"
scripts/profile --freq x produce >/dev/null 2>&1
[ $? -eq 2 ] || bad="$bad; --freq x not refused with exit 2"
if [ -n "$bad" ]; then
	echo "profile smoke: FAILED: ${bad#; }"
	printf '%s\n' "$log" | tail -20
	exit 1
fi
echo "profile smoke: 1 passed, 0 failed"
