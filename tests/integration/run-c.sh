#!/usr/bin/env bash
# tests/integration/run-c.sh — run the C integration suites (Criterion,
# librdkafka and raw sockets against a real build/sluiced; each test starts
# its own broker). Prints each suite's summary line; non-zero on failure.
# BUILD=dir selects another build directory; extra arguments go to every
# suite (e.g. --verbose, --filter 'rdkafka/*').
set -u
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
fail=0
for s in test_rdkafka test_badinput test_groups test_groups_fencing test_idempotence test_txn test_native; do
  out=$(mktemp)
  echo "== integration: $s"
  start=$(date +%s)
  "$build/itests/$s" --jobs 2 --short-filename "$@" >"$out" 2>&1
  rc=$?
  grep -E 'Synthesis|FAIL|CRASH|Skipping|Timeout|Assertion|^idempotence:|^txn:|^native:' "$out" || true
  echo "$s: $(( $(date +%s) - start )) s"
  if [ $rc -ne 0 ]; then
    fail=1
    echo "integration suite $s FAILED (exit $rc); full output:"
    cat "$out"
  fi
  rm -f "$out"
done
exit $fail
