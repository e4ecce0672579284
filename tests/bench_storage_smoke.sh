#!/usr/bin/env bash
# tests/bench_storage_smoke.sh — `sluice-bench storage --quick` runs to the
# end, exits 0 and prints four result rows (three workloads and recovery)
# with numeric figures; `sluice-bench disk` (the disk alone, paced) runs a
# short while, every record timed, its latencies numbers in order, no file
# left, and a bad option is refused with exit 2 naming it. The figures
# themselves are not checked.
set -u
cd "$(dirname "$0")/.."
base=${SLUICE_TEST_DIR:-/var/tmp}
tmp=$(mktemp -d "$base/sluice-bench-smoke-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

out=$(build/sluice-bench storage --quick --dir "$tmp" 2>"$tmp/stderr")
rc=$?
# rows: name ... append raw ratio ">=" target ok|below
rows=$(printf '%s\n' "$out" | awk '
  /^#/ || /^workload/ { next }
  NF >= 6 && $(NF) ~ /^(ok|below)$/ && $(NF-2) == ">=" &&
  $(NF-3) ~ /^[0-9]+\.[0-9]+$/ && $(NF-4) ~ /^[0-9]+\.[0-9]+$/ &&
  $(NF-5) ~ /^[0-9]+\.[0-9]+$/ && $(NF-4) + 0 > 0 { n++ }
  END { print n + 0 }')
leftover=$(ls -A "$tmp" | grep -v '^stderr$' || true)
if [ $rc -eq 0 ] && [ "$rows" -eq 4 ] && [ -z "$leftover" ]; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "bench-storage smoke: exit $rc, $rows result rows, leftover: ${leftover:-none}"
  printf '%s\n' "$out"
  tail -20 "$tmp/stderr"
fi

# sluice-bench disk: 2 s at 5,000 records/s over 3 files, the first second
# not timed
out=$(build/sluice-bench disk --dir "$tmp" --seconds 2 --rate 5000 --partitions 3 2>"$tmp/stderr")
rc=$?
ok=$(printf '%s\n' "$out" | awk '
  /^disk records 15000 \(timed 10000\), writes [0-9]+ / { rec = 1 }
  /^disk latency_p50_ms [0-9.]+$/ { p50 = $3 }
  /^disk latency_p99_ms [0-9.]+$/ { p99 = $3 }
  /^disk latency_max_ms [0-9.]+$/ { max = $3 }
  /^disk write_p99_ms [0-9.]+$/ { w = 1 }
  END { print (rec && w && p50 > 0 && p50 <= p99 && p99 <= max) ? 1 : 0 }')
leftover=$(ls -A "$tmp" | grep -v '^stderr$' || true)
if [ $rc -eq 0 ] && [ "$ok" = 1 ] && [ -z "$leftover" ]; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "bench-storage smoke: disk: exit $rc, rows ok $ok, leftover: ${leftover:-none}"
  printf '%s\n' "$out"
  tail -20 "$tmp/stderr"
fi
err=$(build/sluice-bench disk --partitions 65 2>&1 >/dev/null)
rc=$?
if [ $rc -eq 2 ] && printf '%s' "$err" | grep -q -- '--partitions: out of range'; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "bench-storage smoke: disk --partitions 65: exit $rc, said: $err"
fi
echo "bench-storage smoke: $pass passed, $fail failed"
[ $fail -eq 0 ]
