#!/usr/bin/env bash
# tests/fault/full.sh — make fault: every registered nemesis against the
# queue, group and txn workloads on 3 and 5 nodes (tests/fault/run.py
# --matrix full, 60 s each; hours), then docs/fault-results.md: the table,
# every row with the command that replays it. SEED=N fixes the first seed
# (scenario i gets N+i); SECONDS_EACH=S the length of each. Exits non-zero
# when a scenario found an anomaly or could not run (the page is written
# anyway).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
out=${FAULT_OUT:-$ROOT/build/fault}
rm -rf "$out"
mkdir -p "$out"
seed=${SEED:-$(( (RANDOM << 15) | RANDOM ))}
# the commit the run starts on (the binaries it runs were built from it;
# HEAD may move while the matrix runs for an hour)
commit=$(git -C "$ROOT" rev-parse --short HEAD)
"$HERE/cleanup" >/dev/null 2>&1 || true
/usr/bin/python3 "$HERE/run.py" --matrix full --seed "$seed" --seconds "${SECONDS_EACH:-60}" --out "$out" \
	--table "$out/table.md" | tee "$out/run.log"
status=${PIPESTATUS[0]}
{
	echo "# Fault results"
	echo
	echo "The latest \`make fault\` (tests/fault/full.sh; what each scenario does and"
	echo "promises: [fault-testing.md](fault-testing.md)): run on $(date -u +%Y-%m-%d) at commit"
	echo "$commit, first seed $seed, ${SECONDS_EACH:-60} s per scenario."
	echo "Each row's command replays its schedule (DIR: any new directory)."
	echo "Columns: records sent/acknowledged/read back; each anomaly the checker"
	echo "counts (sluicefault.checker), and beside nonmonotonic the client-stale-reset"
	echo "reads (librdkafka's stale offset reset, the client's: no anomaly, fails nothing;"
	echo "the checker's evidence is in the scenario's checker.txt); the longest time any client went without a"
	echo "success while it kept trying; the longest time from a nemesis's stop to"
	echo "the next acknowledgement. A FAILED row could not run (the reason is in it)."
	echo
	cat "$out/table.md"
} > "$ROOT/docs/fault-results.md"
echo "make fault: docs/fault-results.md written (histories and logs in $out)"
exit "$status"
