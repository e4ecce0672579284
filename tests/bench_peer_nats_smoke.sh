#!/usr/bin/env bash
# tests/bench_peer_nats_smoke.sh — `sluice-bench peer nats` end to end, small:
# 2000 records of 100 bytes produced and consumed back, then 1 s of e2e at
# 1000 records/s against a nats-server the bench starts itself. It must exit
# 0, print produce_records 2000, consume_records 2000 and an e2e_p99_ms row,
# and leave no nats-server running and nothing in its directory. With
# SLUICE_NATS_SERVER=/nonexistent it must exit 1 and name that binary.
# The figures themselves are not judged here.
set -u
cd "$(dirname "$0")/.."
pass=0 fail=0
base=${SLUICE_TEST_DIR:-/var/tmp}
SLUICE_TEST_DIR=$(mktemp -d "$base/sluice-bench-nats-XXXXXX") || exit 1
export SLUICE_TEST_DIR
trap 'rmdir "$SLUICE_TEST_DIR" 2>/dev/null' EXIT

check() {   # name, then a condition (a command) that must hold
  local name=$1; shift
  if "$@"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "bench-peer-nats: FAILED: $name"
    bad=1
  fi
}

row() {     # metric, value: "nats <metric> <value>" is in $out
  printf '%s\n' "$out" | awk -v m="$1" -v v="$2" '$1 == "nats" && $2 == m && $3 == v { f = 1 }
    END { exit !f }'
}

e2e_row() {
  printf '%s\n' "$out" | grep -Eq '^nats e2e_p99_ms [0-9]+\.[0-9]+$'
}

no_server() {   # no process running from our directory (the server's -sd)
  ! pgrep -f -- "$SLUICE_TEST_DIR/" >/dev/null
}

dir_empty() {
  [ -z "$(ls -A "$SLUICE_TEST_DIR")" ]
}

bad=0
err=$(mktemp)
out=$(timeout 120 build/sluice-bench peer nats --records 2000 --size 100 --rate 1000 --seconds 1 2>"$err")
rc=$?
check "exit 0 (got $rc)" [ $rc -eq 0 ]
check "produce_records 2000" row produce_records 2000
check "consume_records 2000" row consume_records 2000
check "an e2e_p99_ms row" e2e_row
check "no nats-server left running" no_server
check "nothing left in $SLUICE_TEST_DIR" dir_empty
if [ $bad -ne 0 ]; then
  echo "--- output:"; printf '%s\n' "$out"; echo "--- stderr:"; tail -20 "$err"
  ls -lR "$SLUICE_TEST_DIR"
fi

bad=0
out=$(SLUICE_NATS_SERVER=/nonexistent timeout 60 build/sluice-bench peer nats --records 10 2>"$err")
rc=$?
check "SLUICE_NATS_SERVER=/nonexistent: exit 1 (got $rc)" [ $rc -eq 1 ]
check "SLUICE_NATS_SERVER=/nonexistent: the message names the binary" grep -q '/nonexistent' "$err"
check "SLUICE_NATS_SERVER=/nonexistent: nothing left in $SLUICE_TEST_DIR" dir_empty
[ $bad -eq 0 ] || { echo "--- stderr:"; cat "$err"; }
rm -f "$err"

echo "bench-peer-nats: $pass passed, $fail failed"
[ $fail -eq 0 ]
