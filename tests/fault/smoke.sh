#!/usr/bin/env bash
# tests/fault/smoke.sh — make test's short fault set (docs/fault-testing.md
# "Running scenarios"): tests/fault/run.py --matrix quick, two scenarios of
# 15 s each on 3 nodes (group through a majority/minority partition, txn
# through a leader's SIGSTOP). Fails when
# any anomaly is reported or any scenario could not run (no root, a nemesis
# or the workload missing, the cluster not built): never skipped. The run's
# histories and node logs are kept in the directory it names when it fails.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/fault-smoke.XXXXXX")
"$HERE/cleanup" >/dev/null 2>&1 || true   # what an earlier killed run left (owners gone only)
if /usr/bin/python3 "$HERE/run.py" --matrix quick --out "$out" --table "$out/table.md"; then
	rm -rf "$out"
	echo "fault smoke: 2 passed, 0 failed"
	exit 0
fi
echo "fault smoke: FAILED (histories, checker output and node logs in $out)"
exit 1
