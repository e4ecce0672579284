#!/usr/bin/env bash
# tests/fault/smoke.sh — make test's short fault set (docs/fault-testing.md
# "Running scenarios"): tests/fault/run.py --matrix quick, two scenarios of
# 15 s each on 3 nodes (group through a majority/minority partition, txn
# through a leader's SIGSTOP). Fails when
# any anomaly is reported or any scenario could not run (no root, a nemesis
# or the workload missing, the cluster not built): never skipped. The run's
# histories and node logs are kept in the directory it names when it fails.
# The checker's client-stale-reset (librdkafka's stale offset reset, no
# anomaly) fails nothing: the last line says it, and the run is kept.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/fault-smoke.XXXXXX")
"$HERE/cleanup" >/dev/null 2>&1 || true   # what an earlier killed run left (owners gone only)
if /usr/bin/python3 "$HERE/run.py" --matrix quick --out "$out" --table "$out/table.md"; then
	# every scenario wrote the final log's batch headers (the checker's
	# client-epoch-bump reads them)
	for d in "$out"/*/; do
		if ! grep -q '"type": "batch"' "$d/final-batches.jsonl" 2>/dev/null; then
			echo "fault smoke: FAILED: $d has no batch headers in final-batches.jsonl (run kept in $out)"
			exit 1
		fi
	done
	# librdkafka's stale offset resets (the checker's client-stale-reset):
	# no anomaly, so no failure, but said, and the run kept for a look
	stale=$(cat "$out"/*/checker.json 2>/dev/null | sed -n 's/^ *"client-stale-reset": *\([0-9]*\).*/\1/p' |
		awk '{ n += $1 } END { print n + 0 }')
	if [ "$stale" -gt 0 ]; then
		echo "fault smoke: 2 passed, 0 failed; client-stale-reset $stale (the client's, not counted;" \
			"the checker's evidence in $out/*/checker.txt)"
		exit 0
	fi
	rm -rf "$out"
	echo "fault smoke: 2 passed, 0 failed"
	exit 0
fi
echo "fault smoke: FAILED (histories, checker output and node logs in $out)"
exit 1
