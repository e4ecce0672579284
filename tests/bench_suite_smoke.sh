#!/usr/bin/env bash
# tests/bench_suite_smoke.sh — `sluice-bench suite --quick` on a handful of
# scenarios with tiny sizes: it starts its brokers and peers (Redis Streams,
# NATS JetStream) itself, exits 0, and writes a report.md with every
# scenario's section, a results.json that parses with every scenario "ok",
# every rate row given as a fraction of the profile's limit, the peers'
# ratios, and PNG plots; it leaves no run directory, server or namespace
# behind. Then --emulate with the Kafka 2014 profile (root: network
# namespace, veth shaped to 1 Gb/s): the row is bound by the shaped NIC;
# k14-replicated's three nodes (on loopback in the first run) are each in
# a namespace of its own behind its own shaped link (scripts/cluster
# --netns).
# The report's capacity planner check, and `sluicectl capacity plan`
# calibrated by the run's results.json: a plan in JSON, bad input named.
# Bad input: an unknown scenario and a profile with a bad key are refused
# with exit 2 and a message naming them. Figures are not checked (they are
# for benchmarks, not tests).
set -u
cd "$(dirname "$0")/.."
pass=0 fail=0
base=${SLUICE_TEST_DIR:-/var/tmp}
work=$(mktemp -d "$base/sluice-suite-smoke-XXXXXX") || exit 1
export SLUICE_TEST_DIR=$work/run
mkdir -p "$SLUICE_TEST_DIR"
trap 'rm -rf "$work"' EXIT
PY=/usr/bin/python3

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# 1. the suite on tiny sizes
out=$work/out
if timeout 300 build/sluice-bench suite --quick --profile hw-profiles/commodity-2026.conf \
    --records 20000 --seconds 0.3 --stored 20M --backlog 0.5 --rate 2000 --out "$out" \
    k14-producer k14-consumers3 k14-latency k14-replicated consumer-defaults size-sweep stored-data backlog-drain peers \
    >"$work/stdout" 2>"$work/stderr"; then
  ok
else
  bad "suite exited $?"; tail -30 "$work/stderr"
fi
grep -q '^suite: \[9/9\] peers' "$work/stderr" && ok || bad "no progress line for scenario 9 of 9"
for s in k14-producer k14-consumers3 k14-latency k14-replicated consumer-defaults size-sweep stored-data backlog-drain peers; do
  grep -q "^## $s — " "$out/report.md" 2>/dev/null && ok || bad "report.md has no section for $s"
done
grep -q '^| Kafka 2014 row' "$out/report.md" && ok || bad "report.md has no Kafka 2014 headline table"
grep -Eq '^\| 1 producer \| [0-9,]+ \| [0-9,]+ / [0-9,]+ \| [0-9.]+% \|' "$out/report.md" && ok ||
  bad "the headline's 1 producer row does not give its two runs and how far apart: $(grep '^| 1 producer' "$out/report.md")"
grep -q 'the rounds: sluice produce [0-9,]* / [0-9,]*' "$out/report.md" && ok || bad "the peers' rounds are not in the report"
grep -q '^| produce records/s |' "$work/stdout" && ok || bad "stdout has no peers headline row"
if $PY - "$out" <<'PYEOF'
import json, sys, os
out = sys.argv[1]
d = json.load(open(os.path.join(out, "results.json")))
names = [s["name"] for s in d["scenarios"]]
assert names == ["k14-producer", "k14-consumers3", "k14-latency", "k14-replicated", "consumer-defaults", "size-sweep",
                 "stored-data", "backlog-drain", "peers"], names
for s in d["scenarios"]:
    assert s["status"] == "ok", (s["name"], s["error"])
    assert s["rows"], s["name"] + ": no rows"
rates = [r for s in d["scenarios"] for r in s["rows"] if r["MB_per_s"] is not None]
assert rates and all(r["fraction_of_limit"] is not None and r["binds"] for r in rates), \
    [r for r in rates if r["fraction_of_limit"] is None]
k = {s["name"]: s for s in d["scenarios"]}
assert k["k14-producer"]["rows"][0]["kafka_2014"]["records_per_s"] == 821557
lat = k["k14-latency"]["rows"][0]
assert lat["p99_ms"] is not None and lat["kafka_2014"]["p99_ms"] == 3
assert len(k["size-sweep"]["series"]["points"]) == 5
# three nodes, RF 3, acks=1 and acks=all against k14-producer's one-node row
rep = k["k14-replicated"]["rows"]
assert [r["kafka_2014"]["records_per_s"] for r in rep] == [786980, 421823], rep
assert all(r["records_per_s"] and "of the one-node row" in r["note"] for r in rep), rep
# a consumer with librdkafka's defaults beside the tuned one: both read
# every record, the ratio is said, and the CPU of each (which side binds)
cd = k["consumer-defaults"]["rows"]
assert [r["label"].split(":")[0] for r in cd] == ["librdkafka's defaults", "tuned simple consumer (the k14 rows')"], cd
# (the broker's CPU of 20,000 records may be under a clock tick: 0)
assert all(r["records_per_s"] and r["broker_cpu_ns_per_record"] is not None and r["client_cpu_ns_per_record"]
           for r in cd), cd
assert "the tuned consumer's rate, same run" in cd[0]["note"], cd[0]
assert "binds" in k["consumer-defaults"]["summary"], k["consumer-defaults"]["summary"]
peers = k["peers"]["peers"]
assert [p["name"] for p in peers] == ["sluice", "redis-streams", "nats-jetstream"], peers
assert all(p["ran"] and p["produce_records_per_s"] and p["consume_records_per_s"] and p["e2e_p99_ms"] is not None
           for p in peers), peers
# every headline row measured twice (the run's noise): each run kept, the
# row's figure their mean
def mean_of(runs, key):
    v = [r[key] for r in runs]
    assert len(v) == 2 and all(x is not None and x > 0 for x in v), runs
    return sum(v) / 2
for name in ("k14-producer", "k14-consumers3", "k14-replicated"):
    for r in k[name]["rows"]:
        assert abs(mean_of(r["runs"], "records_per_s") - r["records_per_s"]) <= 1e-6 * r["records_per_s"], (name, r)
assert abs(mean_of(lat["runs"], "p99_ms") - lat["p99_ms"]) <= 1e-6 * lat["p99_ms"], lat
for p in peers:
    assert abs(mean_of(p["runs"], "produce_records_per_s") - p["produce_records_per_s"]) \
        <= 1e-6 * p["produce_records_per_s"], p
    mean_of(p["runs"], "e2e_p99_ms")
# one-run rows carry no runs
assert all("runs" not in r for r in k["size-sweep"]["rows"]), k["size-sweep"]["rows"]
for s in d["scenarios"]:
    if s["plot"]:
        with open(os.path.join(out, s["plot"]), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", s["plot"]
assert k["size-sweep"]["plot"] == "size-sweep.png"
# the broker's and the clients' CPU a record of each produce row (the
# capacity planner's costs; the clients' share of the machine)
for name in ("k14-producer", "size-sweep"):
    for r in k[name]["rows"]:
        assert r["broker_cpu_ns_per_record"] is not None and r["client_cpu_ns_per_record"] is not None, (name, r)
PYEOF
then ok; else bad "results.json does not hold what the run measured"; fi
# the capacity planner calibrated by this run (docs/capacity.md): the
# report's check of the model, then sluicectl capacity plan on its figures
grep -q '^## Capacity planner check' "$out/report.md" && grep -q '^| size-sweep 1000 B from the fit' "$out/report.md" \
  && ok || bad "report.md has no capacity planner check of the size sweep"
if build/sluicectl capacity plan --results "$out/results.json" --rate 100k --record-bytes 1k --retention 1d \
    --disk-gib 1000 --format json >"$work/cap.json" 2>"$work/cap.err"; then
  ok
else
  bad "capacity plan exited $?: $(cat "$work/cap.err")"
fi
if $PY - "$work/cap.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
res = {r["resource"]: r for r in d["resources"]}
assert d["servers"] >= 3 and d["binding"] in res, d
assert set(res) == {"cpu", "disk write", "disk space", "nic in", "nic out", "memory", "partitions"}, res
# 100k/s x ~1 KB x 1 day x 3 replicas on 1000 GiB disks kept 30 % free
assert d["binding"] == "disk space" and res["disk space"]["utilisation"] <= 0.7, d
c = d["calibration"]
assert c["size_sweep_points"] == 5 and c["produce_ns_per_record"] > 0 and c["copy_over_produce"] is not None, c
assert d["latency"]["p99_ms"] is not None and d["latency"]["class"], d["latency"]
PYEOF
then ok; else bad "capacity plan's JSON is not the plan: $(head -c 600 "$work/cap.json")"; fi
build/sluicectl capacity plan --results "$out/results.json" --rate 100k --retention 3x >/dev/null 2>"$work/cap.err"
rc=$?
[ $rc -eq 2 ] && grep -q -- "--retention: '3x'" "$work/cap.err" && ok || bad "bad --retention: exit $rc, $(cat "$work/cap.err")"
build/sluicectl capacity plan --results "$work/stdout" --rate 1 >/dev/null 2>"$work/cap.err"
rc=$?
[ $rc -eq 2 ] && grep -q "stdout.*not JSON" "$work/cap.err" && ok || bad "a results file that is not JSON: exit $rc, $(cat "$work/cap.err")"
left=$(ls -A "$SLUICE_TEST_DIR")
[ -z "$left" ] && ok || bad "run directories left behind: $left"
pgrep -f "$work" >/dev/null && bad "a server of the run is still running" || ok

# 2. --emulate: the broker behind a veth shaped to the 2014 profile's 1 Gb/s
if [ "$(id -u)" -ne 0 ]; then
  bad "--emulate needs root (network namespaces, tc): run as root"
else
  eout=$work/emulated
  if timeout 120 build/sluice-bench suite --emulate hw-profiles/kafka-2014.conf --records 20000 \
      --out "$eout" k14-producer k14-replicated >"$work/estdout" 2>"$work/estderr"; then
    ok
  else
    bad "suite --emulate exited $?"; tail -20 "$work/estderr"
  fi
  if $PY - "$eout" <<'PYEOF'
import json, sys, os
d = json.load(open(os.path.join(sys.argv[1], "results.json")))
e = d["emulation"]
assert e and e["nic_gbps"] == 1 and e["netns"].startswith("sluice-em-"), e
row = d["scenarios"][0]["rows"][0]
assert d["scenarios"][0]["status"] == "ok", d["scenarios"][0]
assert row["binds"] == "NIC (shaped)" and abs(row["limit_MB_per_s"] - 125) < 1e-6, row
# the three nodes, each in its namespace behind its own shaped link
rep = d["scenarios"][1]
assert rep["name"] == "k14-replicated" and rep["status"] == "ok", rep
assert len(rep["rows"]) == 2 and all("each link shaped" in r["note"] for r in rep["rows"]), rep["rows"]
PYEOF
  then ok; else bad "the emulated run's results.json is not as set up"; fi
  ip netns list | grep -q "sluice-em-" && bad "a sluice-em-* namespace is left: $(ip netns list)" || ok
  # the cluster's (other runs on the machine may have clusters of their own)
  k=$(sed -n 's/.*nodes in namespaces sluice\([0-9]*\)n1\.\.3.*/\1/p' "$work/estderr")
  [ -n "$k" ] && ok || bad "no line naming k14-replicated's namespaces"
  [ -n "$k" ] && ip netns list | grep -q "^sluice${k}n" && bad "namespace sluice${k}n* is left: $(ip netns list)" || ok
fi

# 3. bad input
build/sluice-bench suite --profile hw-profiles/commodity-2026.conf --out "$work/x" no-such-scenario \
  >/dev/null 2>"$work/err1"
rc=$?
[ $rc -eq 2 ] && grep -q "no-such-scenario" "$work/err1" && ok || bad "unknown scenario: exit $rc, $(cat "$work/err1")"
printf 'description=x\ncores=2\nnic_gbs=10\n' >"$work/bad.conf"
build/sluice-bench suite --profile "$work/bad.conf" --out "$work/x" k14-producer >/dev/null 2>"$work/err2"
rc=$?
[ $rc -eq 2 ] && grep -q "bad.conf:3" "$work/err2" && ok || bad "bad profile key: exit $rc, $(cat "$work/err2")"

echo "bench_suite_smoke: $pass passed, $fail failed"
[ $fail -eq 0 ]
