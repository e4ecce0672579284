#!/usr/bin/env bash
# tests/bench_storage_smoke.sh — `sluice-bench storage --quick` runs to the
# end, exits 0 and prints four result rows (three workloads and recovery)
# with numeric figures. The figures themselves are not checked.
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
echo "bench-storage smoke: $pass passed, $fail failed"
[ $fail -eq 0 ]
