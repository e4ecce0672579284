#!/usr/bin/env bash
# tests/bench_scrape_smoke.sh — `sluice-bench scrape` end to end, small:
# one round of 0.5 s phases, 200 extra partitions, 3 timed scrapes. It must
# exit 0, leave no run directory behind and print its ratio row and both
# scrape rows with numbers (no scrape may fail). Then the same with
# --console (the web console's streams and page polls; no poll or stream
# may fail, the streams must have carried bytes). The figures themselves
# are not judged here (docs/metrics.md: Tests and benchmark; docs/console.md).
set -u
cd "$(dirname "$0")/.."
base=${SLUICE_TEST_DIR:-/var/tmp}
SLUICE_TEST_DIR=$(mktemp -d "$base/sluice-bench-scrape-XXXXXX") || exit 1
export SLUICE_TEST_DIR
trap 'rmdir "$SLUICE_TEST_DIR" 2>/dev/null' EXIT
err=$(mktemp)
out=$(timeout 120 build/sluice-bench scrape --phase 0.5 --rounds 1 --partitions 200 --scrapes 3 2>"$err")
rc=$?
ok=1
[ $rc -eq 0 ] || { echo "bench-scrape: exit $rc"; ok=0; }
printf '%s\n' "$out" | grep -Eq '^produce_ratio_median_of_rounds +[0-9]+\.[0-9]+' ||
  { echo "bench-scrape: no ratio row"; ok=0; }
printf '%s\n' "$out" | grep -Eq '^scrape during_produce_count [1-9][0-9]* failures 0 .* bytes [1-9]' ||
  { echo "bench-scrape: no scrape during the produce, or a failed one"; ok=0; }
printf '%s\n' "$out" | grep -Eq '^scrape partitions 200 .*count 3 .* bytes [1-9]' ||
  { echo "bench-scrape: no timed scrape row"; ok=0; }
out2=$(timeout 120 build/sluice-bench scrape --console --phase 0.5 --rounds 1 --partitions 200 --scrapes 3 2>>"$err")
rc=$?
[ $rc -eq 0 ] || { echo "bench-scrape: --console: exit $rc"; ok=0; }
printf '%s\n' "$out2" | grep -Eq '^produce_ratio_median_of_rounds +[0-9]+\.[0-9]+ +\(target >= 0\.98' ||
  { echo "bench-scrape: --console: no ratio row"; ok=0; }
printf '%s\n' "$out2" | grep -Eq '^console page_polls [1-9][0-9]* failures 0 .* stream_bytes [1-9]' ||
  { echo "bench-scrape: --console: no page poll or stream during the produce, or a failed one"; ok=0; }
printf '%s\n' "$out2" | grep -Eq '^topics_json partitions 200 .*count 3 .* bytes [1-9]' ||
  { echo "bench-scrape: --console: no timed /v1/topics row"; ok=0; }
out="$out
$out2"
[ -z "$(ls -A "$SLUICE_TEST_DIR")" ] || { echo "bench-scrape: a run directory was left in $SLUICE_TEST_DIR"; ok=0; }
if [ $ok -eq 1 ]; then
  rm -f "$err"
  echo "bench-scrape: 1 passed, 0 failed"
  exit 0
fi
echo "--- output:"; printf '%s\n' "$out"; echo "--- stderr:"; tail -20 "$err"; rm -f "$err"
echo "bench-scrape: 0 passed, 1 failed"
exit 1
