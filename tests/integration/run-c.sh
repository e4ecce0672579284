#!/usr/bin/env bash
# tests/integration/run-c.sh — run the C integration suites (Criterion,
# librdkafka and raw sockets against a real build/sluiced; each test starts
# its own broker on a port of its own). Prints each suite's summary line;
# non-zero on failure. BUILD=dir selects another build directory; extra
# arguments go to every suite (e.g. --verbose, --filter 'rdkafka/*').
#
# RUNC_JOBS suites (default 2) run at the same time, each with Criterion's
# --jobs 2: their tests wait on brokers (sessions, transaction timeouts,
# fsyncs) far more than they compute, and a suite's last long test no
# longer leaves the machine idle. Each suite's lines are printed whole, in
# the order of the list, when it ends; the longest suites are first in it.
# RUNC_JOBS=1 runs one suite at a time.
set -u
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
jobs=${RUNC_JOBS:-2}
case $jobs in ''|*[!0-9]*|0) echo "run-c.sh: RUNC_JOBS must be a number >= 1" >&2; exit 2 ;; esac
suites=(test_txn test_badinput test_rdkafka test_idempotence test_groups test_native test_groups_fencing)
n=${#suites[@]}
fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/run-c.XXXXXX")
pids=()
trap 'for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null; done; wait; rm -rf "$tmp"; exit 130' INT TERM

run_one() {   # run_one INDEX [ARGS]: the suite's output, exit status and time in files
  local i=$1 start rc
  shift
  start=$(date +%s)
  "$build/itests/${suites[$i]}" --jobs 2 --short-filename "$@" >"$tmp/$i.out" 2>&1
  rc=$?
  echo "$rc $(( $(date +%s) - start ))" >"$tmp/$i.tmp" && mv "$tmp/$i.tmp" "$tmp/$i.end"
}

report() {   # report INDEX: the lines the serial runner printed
  local s=${suites[$1]} rc secs
  read -r rc secs <"$tmp/$1.end"
  echo "== integration: $s"
  grep -E 'Synthesis|FAIL|CRASH|Skipping|Timeout|Assertion|^idempotence:|^txn:|^native:' "$tmp/$1.out" || true
  echo "$s: $secs s"
  if [ "$rc" -ne 0 ]; then
    fail=1
    echo "integration suite $s FAILED (exit $rc); full output:"
    cat "$tmp/$1.out"
  fi
}

next_start=0
next_print=0
running=0
while [ $next_print -lt $n ]; do
  while [ $next_start -lt $n ] && [ $running -lt "$jobs" ]; do
    run_one $next_start "$@" &
    pids+=($!)
    next_start=$((next_start + 1))
    running=$((running + 1))
  done
  wait -n 2>/dev/null
  running=0
  for ((i = next_print; i < next_start; i++)); do
    [ -f "$tmp/$i.end" ] || running=$((running + 1))
  done
  while [ $next_print -lt $next_start ] && [ -f "$tmp/$next_print.end" ]; do
    report $next_print
    next_print=$((next_print + 1))
  done
done
wait
rm -rf "$tmp"
exit $fail
