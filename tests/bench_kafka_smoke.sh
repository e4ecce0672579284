#!/usr/bin/env bash
# tests/bench_kafka_smoke.sh — `sluice-bench produce --records 20000` starts
# its own broker, drives it through librdkafka, exits 0, prints its result
# rows with numeric figures and leaves no run directory behind. The figures
# themselves are not checked.
# TODO: add `consume --records 20000` once the broker stops cleanly after a
# consumer disconnects during a long-poll Fetch (see the benchk report).
set -u
cd "$(dirname "$0")/.."
pass=0 fail=0
before=$(ls -d /var/tmp/sluice-bench-kafka-* 2>/dev/null | sort)

check() {   # name, minimum number of "<bench> <metric> <number>" rows, command...
  local name=$1 want=$2; shift 2
  local err out rc rows
  err=$(mktemp)
  out=$(timeout 120 "$@" 2>"$err")
  rc=$?
  rows=$(printf '%s\n' "$out" | awk -v b="$name" '
    $1 == b && NF >= 3 && $3 ~ /^[0-9]+(\.[0-9]+)?$/ { n++ }
    $1 == b && $2 == "records_per_s" && $3 + 0 > 0 { r = 1 }
    END { print (r ? n + 0 : 0) }')
  if [ $rc -eq 0 ] && [ "$rows" -ge "$want" ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "bench-kafka smoke: $name: exit $rc, $rows result rows (want >= $want)"
    printf '%s\n' "$out"
    tail -20 "$err"
  fi
  rm -f "$err"
}

check produce 8 build/sluice-bench produce --records 20000

after=$(ls -d /var/tmp/sluice-bench-kafka-* 2>/dev/null | sort)
if [ "$before" != "$after" ]; then
  fail=$((fail + 1))
  echo "bench-kafka smoke: run directories left behind:"
  comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after")
else
  pass=$((pass + 1))
fi
echo "bench-kafka smoke: $pass passed, $fail failed"
[ $fail -eq 0 ]
