#!/usr/bin/env bash
# tests/bench_kafka_smoke.sh — `sluice-bench produce --records 20000` and
# `consume --records 20000` each start their own broker, drive it through
# librdkafka, exit 0, print their result rows with numeric figures and leave
# no run directory behind (a run whose broker died keeps its directory, with
# sluiced.log, and fails here). The figures themselves are not checked.
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
check consume 5 build/sluice-bench consume --records 20000

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
