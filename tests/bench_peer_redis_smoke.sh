#!/usr/bin/env bash
# tests/bench_peer_redis_smoke.sh — `sluice-bench peer redis` small, end to
# end: it starts its own redis-server (appendonly yes, appendfsync
# everysec), produces 2000 records of 100 bytes, consumes them back (each
# checked) and runs 1 s of e2e at 1000 records/s; it must exit 0, print
# produce_records 2000, consume_records 2000 and an e2e_p99_ms row, and
# leave no redis-server of its own running and no directory behind.
# Then the failure path: SLUICE_REDIS_SERVER=/nonexistent must exit 1 with
# a message naming the missing binary. The figures are not checked.
# SKIPPED (and said) when redis-server is not installed (scripts/setup).
set -u
cd "$(dirname "$0")/.."
pass=0 fail=0
if ! command -v redis-server >/dev/null && [ ! -x /usr/bin/redis-server ]; then
  echo "bench-peer-redis smoke: SKIPPED: no redis-server (scripts/setup installs it)"
  exit 0
fi
base=${SLUICE_TEST_DIR:-/var/tmp}
SLUICE_TEST_DIR=$(mktemp -d "$base/sluice-peer-redis-smoke-XXXXXX") || exit 1
export SLUICE_TEST_DIR
# kept when a run left its directory (with redis.log) behind
trap 'rmdir "$SLUICE_TEST_DIR" 2>/dev/null' EXIT

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "bench-peer-redis smoke: $*"; }

err=$(mktemp)
out=$(timeout 120 build/sluice-bench peer redis --records 2000 --size 100 --rate 1000 --seconds 1 2>"$err")
rc=$?
if [ $rc -eq 0 ] &&
   printf '%s\n' "$out" | grep -qx 'redis produce_records 2000' &&
   printf '%s\n' "$out" | grep -qx 'redis consume_records 2000' &&
   printf '%s\n' "$out" | grep -qE '^redis e2e_p99_ms [0-9]+(\.[0-9]+)?$'; then
  ok
else
  bad "run: exit $rc, want 0 and rows produce_records 2000, consume_records 2000, e2e_p99_ms"
  printf '%s\n' "$out"
  tail -20 "$err"
fi

# the server it started (redis renames its process title, so by the pid
# its "ready, pid N" progress line gave)
pid=$(sed -n 's/^redis: redis-server .* ready, pid \([0-9]*\)$/\1/p' "$err")
if [ -z "$pid" ]; then
  bad "no 'redis-server ... ready, pid N' line on stderr"
elif kill -0 "$pid" 2>/dev/null; then
  bad "redis-server pid $pid still running after the run"
  kill "$pid"
else
  ok
fi

out=$(SLUICE_REDIS_SERVER=/nonexistent timeout 30 build/sluice-bench peer redis --records 10 2>&1)
rc=$?
if [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q '/nonexistent'; then
  ok
else
  bad "SLUICE_REDIS_SERVER=/nonexistent: exit $rc, want 1 and a message naming /nonexistent:"
  printf '%s\n' "$out"
fi
rm -f "$err"

left=$(ls -A "$SLUICE_TEST_DIR")
if [ -n "$left" ]; then
  bad "left behind in $SLUICE_TEST_DIR:"
  printf '%s\n' "$left"
else
  ok
fi
echo "bench-peer-redis smoke: $pass passed, $fail failed"
[ $fail -eq 0 ]
