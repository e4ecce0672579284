#!/usr/bin/python3
"""The fault scenario runner (docs/fault-testing.md "Running scenarios").

    tests/fault/run.py --nodes 3 --workload queue|group|txn --nemesis NAME[,NAME]
        --seconds S --seed N --out DIR [--binary PATH] [--table FILE] [--hold] [--keep-data]
    tests/fault/run.py --matrix quick|full --out DIR [--table FILE] [--seed N]

One scenario: prints the seed first; starts a NetCluster of --nodes nodes
(tests/fault/netcluster.py), creates the workload's topic(s) (3 partitions,
replication factor 3, min.insync.replicas=2); runs the workload CLI
(`python3 -m sluicefault.workload KIND ...`, PYTHONPATH=tools) inside the
client namespace for S seconds while it applies the nemesis schedule, writing
each start and stop to DIR/nemesis.jsonl; then heals every fault, starts any
node that is down, waits until every partition is led with its replicas in
sync, runs the workload's --final read, runs the checker (`python3 -m
sluicefault.checker DIR`) and prints one table row (appended to --table):
scenario, seed, nodes, sent/acked/read, each anomaly count, the longest
unavailability a client saw, the recovery time, and the command line that
reproduces it; the column client-stale-reset (beside nonmonotonic) counts the
backward jumps the checker attributes to librdkafka's stale offset reset,
and client-epoch-bump (beside duplicated) the records the final log's batch
headers (final-batches.jsonl, which the workload's final read writes) show
the client sent again under a new producer epoch: neither is an anomaly. Exit status: 0 no anomaly, 1 anomalies, 2 the scenario could
not run (the cluster, a nemesis, the workload or the checker failed: the
message names it).

The schedule (which nemesis, when, for how long, and the random choices the
nemesis makes: which node, which rate) comes only from random.Random(seed):
the same seed replays the same schedule (what the cluster does in between
is not replayed: which node leads at that moment, for example).

--matrix quick: the short set `make test` runs (tests/fault/smoke.sh);
--matrix full: every registered nemesis against every workload on 3 and 5
nodes (`make fault`, which writes docs/fault-results.md).
"""

import argparse
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netcluster  # noqa: E402
import nemeses  # noqa: E402

ROOT = netcluster.ROOT
WORKLOADS = ("queue", "group", "txn")
ANOMALIES = ("lost", "duplicated", "reordered", "unexpected", "divergent", "nonmonotonic", "skipped",
             "stale_commit", "commit_backwards", "aborted_visible", "partial_txn", "premature_read",
             "copy_mismatch", "cycles")
# the checker's count of librdkafka's stale offset resets (nonmonotonic
# reads the history shows to be the client's): a column beside
# nonmonotonic, printed, never an anomaly
STALE_RESET = "client-stale-reset"
# and of records the client sent again under a new producer epoch
# (librdkafka's epoch bump): beside duplicated, never an anomaly
EPOCH_BUMP = "client-epoch-bump"
COLUMNS = tuple(x for a in ANOMALIES for x in ((a, STALE_RESET) if a == "nonmonotonic" else
                                               (a, EPOCH_BUMP) if a == "duplicated" else (a,)))
PARTITIONS = 3
# make test's short set: (workload, nemeses); 20 s of workload each
# (a queue through a leader's SIGKILL is make test's test_cluster_failover
# and test_cluster_restart; the runner's kill-leader is in make fault)
QUICK = [("group", "partition-halves"), ("txn", "pause-leader")]
QUICK_SECONDS = 15


class ScenarioError(Exception):
    pass


def schedule(rng, names, seconds):
    """[(start_s, duration_s, name, nemesis_seed)]: fault windows from a
    warm-up of 10% (at least 3 s) to 80% of the run, each 3-10 s long (a
    third of the run at most) with 2-6 s of quiet after it."""
    out = []
    t = max(3.0, seconds * 0.1)
    end = seconds * 0.8
    longest = max(3.0, min(10.0, seconds / 3))
    while True:
        dur = round(rng.uniform(3.0, longest), 1)
        if t + dur > end:
            break
        out.append((round(t, 1), dur, rng.choice(names), rng.getrandbits(32)))
        t += dur + rng.uniform(2.0, 6.0)
    return out


def node_options(names, n, work, closers):
    """What the nodes need for the nemeses named: loop-mounted data
    directories for the disk ones, libfaketime for the clock one
    (nemesis_disk.py, nemesis_clock.py). Returns (NetCluster kwargs,
    cluster attributes); what must be undone at the end goes to closers."""
    kw, attrs = {}, {}
    if any(x.startswith("disk-") for x in names):
        import nemesis_disk
        fss = {}
        for i in range(1, n + 1):
            fs = nemesis_disk.LoopFs(work, "%d-n%d" % (os.getpid(), i))
            closers.append(fs.close)
            fss[i] = os.path.join(fs.mnt, "data")
        kw["data_dirs"] = fss
    if any(x.startswith("clock-") for x in names):
        import nemesis_clock
        files = {i: os.path.join(work, "clock-n%d" % i) for i in range(1, n + 1)}
        kw["node_env"] = {i: nemesis_clock.node_env(p) for i, p in files.items()}
        attrs["clock_files"] = files
    return kw, attrs


class History:
    def __init__(self, path):
        self.f = open(path, "a")

    def write(self, name, phase, detail):
        self.f.write(json.dumps({"t": time.monotonic_ns(), "client": "nemesis", "type": "nemesis", "name": name,
                                 "phase": phase, "detail": detail}, default=str) + "\n")
        self.f.flush()


def wait_healthy(c, topics, timeout=120):
    """Until every node runs and lists every broker, and every partition of
    topics is led with all its replicas in sync. Seconds it took."""
    t0 = time.monotonic()
    for i in c.nodes:
        if not c.running(i):
            c.start(i)
    c.wait_brokers(timeout=timeout)
    end = t0 + timeout
    last = None
    while True:
        try:
            ok = True
            for t in topics:
                md = c.metadata(c.controller() or c.nodes[0], t)
                tm = md.topics.get(t)
                if tm is None or tm.error is not None or not tm.partitions or not all(
                        p.leader >= 0 and len(p.isrs) == len(p.replicas) for p in tm.partitions.values()):
                    ok = False
                    last = (t, tm and {k: (p.leader, p.replicas, p.isrs) for k, p in tm.partitions.items()})
            if ok:
                return time.monotonic() - t0
        except Exception as e:   # noqa: BLE001 - an election under way
            last = e
        if time.monotonic() > end:
            raise ScenarioError("the cluster did not heal within %d s: %r" % (timeout, last))
        time.sleep(0.5)


def command_line(a, seed):
    argv = ["tests/fault/run.py", "--nodes", str(a.nodes), "--workload", a.workload, "--nemesis", a.nemesis,
            "--seconds", str(a.seconds), "--seed", str(seed), "--out", "DIR"]
    if a.binary:
        argv += ["--binary", a.binary]
    for s in a.set or []:
        argv += ["--set", s]
    return " ".join(shlex.quote(x) for x in argv)


def scenario(a, seed, out):
    """Run one scenario into out; returns the row dict."""
    names = [x for x in a.nemesis.split(",") if x]
    missing = [x for x in names if x not in nemeses.REGISTRY]
    if missing:
        raise ScenarioError("no nemesis named %s (registered: %s)" % (", ".join(missing),
                                                                      ", ".join(sorted(nemeses.REGISTRY))))
    rng = random.Random(seed)
    plan = schedule(rng, names, a.seconds)
    if os.path.isdir(out) and os.listdir(out):
        raise ScenarioError("%s is not empty (the checker reads every history in it)" % out)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "schedule.json"), "w") as f:
        json.dump({"seed": seed, "windows": plan}, f)
    print("schedule: %s" % ", ".join("%s at %.1f s for %.1f s" % (n, s, d) for s, d, n, _ in plan), flush=True)
    tools = a.tools or os.path.join(ROOT, "tools")
    for mod in ("workload", "checker"):
        if not os.path.exists(os.path.join(tools, "sluicefault", mod + ".py")):
            raise ScenarioError("%s is missing (the sluicefault package's %s)" % (
                os.path.join(tools, "sluicefault", mod + ".py"), mod))
    env = {"PYTHONPATH": tools}
    topic = "fault-%s" % a.workload
    topics = [topic, topic + "-out"] if a.workload == "txn" else [topic]
    rf = min(3, a.nodes)
    sets = ["min.insync.replicas=2", "offsets.topic.replication.factor=%d" % rf,
            "transaction.state.log.replication.factor=%d" % rf] + list(a.set or [])
    if any(x in ("disk-power-cut", "kill-all") for x in names) and not any(
            s.startswith("log.durability=") for s in a.set or ()):
        # every node at once: what log.durability=sync promises (a power
        # loss); `write` promises a process crash only (docs/storage.md)
        sets.append("log.durability=sync")
    closers = []
    c = None
    row = {"scenario": "%s/%s/%dn" % (a.workload, a.nemesis, a.nodes), "seed": seed, "nodes": a.nodes,
           "command": command_line(a, seed)}
    hist = History(os.path.join(out, "nemesis.jsonl"))
    try:
        kw, attrs = node_options(names, a.nodes, out, closers)
        try:
            c = netcluster.NetCluster(a.nodes, sets=sets, binary=a.binary, env=env, **kw)
        except Exception as e:
            raise ScenarioError("the cluster could not be built: %s" % e)
        for k, v in attrs.items():
            setattr(c, k, v)
        c.topic, c.focus = topic, (topic, 0)
        for t in topics:
            c.create_topic(t, PARTITIONS, rf, config={"min.insync.replicas": "2"})
        argv = [sys.executable, "-m", "sluicefault.workload", a.workload, "--bootstrap", c.bootstrap, "--topic", topic,
                "--seconds", str(a.seconds), "--out", out, "--seed", str(seed), "--partitions", str(PARTITIONS),
                "--replication", str(rf)]
        wlog = open(os.path.join(out, "workload.log"), "w")
        closers.append(wlog.close)
        t0 = time.monotonic()
        wl = c.run_client(argv, stdout=wlog, stderr=subprocess.STDOUT)
        running = []
        try:
            for start_s, dur, name, nseed in plan:
                if not sleep_until(t0 + start_s, wl):
                    break
                n = nemeses.REGISTRY[name]()
                try:
                    detail = n.start(c, random.Random(nseed))
                except Exception as e:
                    hist.write(name, "start", {"error": repr(e)})
                    raise ScenarioError("nemesis %s could not start: %r" % (name, e))
                running.append((name, n))
                print("%7.1f s  %s start %s" % (time.monotonic() - t0, name, json.dumps(detail, default=str)), flush=True)
                hist.write(name, "start", detail)
                sleep_until(t0 + start_s + dur, wl)
                n.stop(c)
                running.remove((name, n))
                hist.write(name, "stop", {})
                print("%7.1f s  %s stop" % (time.monotonic() - t0, name), flush=True)
        finally:
            for name, n in running:
                try:
                    n.stop(c)
                finally:
                    hist.write(name, "stop", {})
            nemeses.heal_all(c)
        try:
            hung = wait_workload(wl, out, a.seconds + 180 - (time.monotonic() - t0))
        except subprocess.TimeoutExpired:
            raise ScenarioError("the workload did not end within %d s of its %d (see %s)" % (
                180, a.seconds, os.path.join(out, "workload.log")))
        if hung:
            row["close_hung"] = hung
        elif wl.returncode != 0:
            raise ScenarioError("the workload exited %d (see %s)" % (wl.returncode, os.path.join(out, "workload.log")))
        row["heal_s"] = round(wait_healthy(c, topics), 1)
        fin = c.run_client(argv + ["--final"], stdout=wlog, stderr=subprocess.STDOUT)
        if fin.wait(timeout=300) != 0:
            raise ScenarioError("the final read exited %d (see %s)" % (fin.returncode, os.path.join(out, "workload.log")))
    finally:
        if c is not None and getattr(a, "hold", False):
            hold = os.path.join(out, "HOLD")
            open(hold, "w").close()
            print("run: --hold: the nodes keep running (bootstrap %s) until %s is removed" % (c.bootstrap, hold),
                  flush=True)
            while os.path.exists(hold):
                time.sleep(1)
        if c is not None:
            logs = os.path.join(out, "nodes")
            os.makedirs(logs, exist_ok=True)
            for i in c.nodes:
                if os.path.exists(c.log_path(i)):
                    shutil.copy(c.log_path(i), os.path.join(logs, "n%d.log" % i))
                if getattr(a, "keep_data", False):
                    # the workload's partitions as each node left them
                    # (segments, producer snapshot, checkpoints), for
                    # `sluicectl` or a reader of the batch headers
                    for t in topics:
                        for k in range(PARTITIONS):
                            src = os.path.join(c.data_dir(i), "%s-%d" % (t, k))
                            if os.path.isdir(src):
                                shutil.copytree(src, os.path.join(out, "data", "n%d" % i, "%s-%d" % (t, k)))
            c.close()
        for close in reversed(closers):
            close()
        hist.f.close()
    res = check(out, tools)
    row.update(res)
    return row


CLOSE_HANG_S = 60    # a client's "closing" line this old, every other client ended: its close hung


def client_ends(out):
    """{client: its history's last line} of each client history in out
    (DIR/<client>.jsonl; not the runner's nemesis.jsonl nor the final
    read's final-*.jsonl)."""
    last = {}
    for name in sorted(os.listdir(out)):
        if not name.endswith(".jsonl") or name == "nemesis.jsonl" or name.startswith("final-"):
            continue
        line = None
        with open(os.path.join(out, name), encoding="utf-8", errors="replace") as f:
            for text in f:
                if text.strip():
                    line = text
        try:
            last[name[:-len(".jsonl")]] = json.loads(line) if line else {}
        except ValueError:
            last[name[:-len(".jsonl")]] = {}   # a line cut short: not ended
    return last


def wait_workload(wl, out, timeout, hang_s=CLOSE_HANG_S):
    """Wait up to timeout seconds for the workload process wl to end;
    [] when it did. A consumer's close() in librdkafka 2.0.2 has hung
    holding Python's lock (every thread of the workload stops with it):
    when every client history in out ends with "end" or "closing"
    (workload.py close_consumer), at least one "closing" line at least
    hang_s seconds old, the workload's process group is killed and the
    names of the clients whose close hung are returned; what they
    recorded is all they did. hang_s None: no such end (the wait of
    before). Raises subprocess.TimeoutExpired."""
    end = time.monotonic() + timeout
    while True:
        try:
            wl.wait(timeout=min(1.0, max(0.0, end - time.monotonic())))
            return []
        except subprocess.TimeoutExpired:
            if time.monotonic() >= end:
                raise
        if hang_s is None:
            continue
        last = client_ends(out)
        now = time.monotonic_ns()      # the clients' clock (history lines' "t")
        closing = [n for n, x in last.items() if x.get("type") == "closing"]
        if closing and all(x.get("type") in ("end", "closing") for x in last.values()) and \
                all(now - last[n]["t"] >= hang_s * 1e9 for n in closing):
            try:
                os.killpg(wl.pid, 9)
            except ProcessLookupError:
                pass
            wl.wait()
            return closing


def sleep_until(when, proc):
    """Sleep until monotonic when; False if proc ended first."""
    while True:
        left = when - time.monotonic()
        if proc.poll() is not None:
            return False
        if left <= 0:
            return True
        time.sleep(min(left, 0.2))


def check(out, tools):
    env = dict(os.environ, PYTHONPATH=tools)
    files = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".jsonl"))
    p = subprocess.run([sys.executable, "-m", "sluicefault.checker", "--json"] + files, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with open(os.path.join(out, "checker.json"), "wb") as f:
        f.write(p.stdout)
    try:
        res = json.loads(p.stdout)
    except ValueError:
        raise ScenarioError("the checker (exit %d) printed no JSON: %s" % (p.returncode, p.stderr.decode()[-2000:]))
    txt = subprocess.run([sys.executable, "-m", "sluicefault.checker"] + files, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
    with open(os.path.join(out, "checker.txt"), "wb") as f:
        f.write(txt.stdout)
    return res


def fmt(v):
    if isinstance(v, float):
        return "%.1f" % v
    if isinstance(v, (list, tuple)):
        return "/".join(fmt(x) for x in v) or "-"
    if isinstance(v, dict):
        return "/".join("%s" % fmt(x) for x in v.values()) or "-"
    return "-" if v is None else str(v)


HEADER = (["scenario", "seed", "nodes", "sent/acked/read"] + list(COLUMNS) +
          ["longest unavailable (s)", "recovery (s)", "command"])


def table_row(row):
    if "error" in row:
        cells = [row["scenario"], str(row["seed"]), str(row["nodes"]), "FAILED: %s" % row["error"].replace("|", "/")
                 .replace("\n", " ")[:300]] + ["-"] * (len(COLUMNS) + 2)
    else:
        cells = [row["scenario"], str(row["seed"]), str(row["nodes"]),
                 "%s/%s/%s" % (fmt(row.get("sent")), fmt(row.get("acked")), fmt(row.get("read")))]
        cells += [fmt(row.get(k)) for k in COLUMNS]
        ck = row.get("cycle_kinds") or {}
        kinds = ["%s:%d" % (k, ck[k]) for k in ("G0", "G1c", "G-single", "G2") if ck.get(k)]
        if kinds:               # the cycle kinds that are figures, not anomalies (G0, G-single, G2)
            cells[-1] += " (%s)" % " ".join(kinds)
        cells += [fmt(max_of(row.get("longest_unavailable_s"))), fmt(max_of(row.get("recovery_s")))]
    cells.append("`%s`" % row["command"])
    return "| " + " | ".join(cells) + " |"


def max_of(v):
    """A figure per client or per nemesis: the largest."""
    if isinstance(v, dict):
        v = list(v.values())
    if isinstance(v, (list, tuple)):
        v = [x for x in v if isinstance(x, (int, float))]
        return max(v) if v else None
    return v


def table_header():
    return "| " + " | ".join(HEADER) + " |\n|" + "---|" * len(HEADER)


def anomalies(row):
    return sum(int(row.get(k) or 0) for k in ANOMALIES)


def run_one(a, seed, out, table):
    print("seed %d" % seed, flush=True)
    try:
        row = scenario(a, seed, out)
        status = 1 if anomalies(row) else 0
    except Exception as e:   # noqa: BLE001 - any failure is this scenario's row, the matrix goes on
        what = str(e) if isinstance(e, (ScenarioError, netcluster.HarnessError)) else repr(e)
        row = {"scenario": "%s/%s/%dn" % (a.workload, a.nemesis, a.nodes), "seed": seed, "nodes": a.nodes,
               "command": command_line(a, seed), "error": what}
        print("run: %s" % e, file=sys.stderr, flush=True)
        status = 2
    line = table_row(row)
    print(table_header())
    print(line, flush=True)
    if row.get("close_hung"):
        print("the close() of %s hung in librdkafka after its history was complete; the workload was ended "
              "(its histories are checked as they are)" % ", ".join(row["close_hung"]), flush=True)
    for k in (STALE_RESET, EPOCH_BUMP):
        if row.get(k):
            print("%s %d (the client's, not counted as an anomaly; the checker's evidence: %s)" % (
                k, row[k], os.path.join(out, "checker.txt")), flush=True)
    if table:
        new = not os.path.exists(table) or os.path.getsize(table) == 0
        with open(table, "a") as f:
            if new:
                f.write(table_header() + "\n")
            f.write(line + "\n")
    return status, row


def matrix(a):
    if a.matrix == "quick":
        plan = [(3, wl, nm, QUICK_SECONDS) for wl, nm in QUICK]
    else:
        plan = [(n, wl, nm, a.seconds or 60) for n in (3, 5) for nm in sorted(nemeses.REGISTRY) for wl in WORKLOADS]
    base_seed = a.seed if a.seed is not None else random.randrange(1 << 31)
    worst = 0
    rows = []
    for idx, (n, wl, nm, secs) in enumerate(plan):
        sa = argparse.Namespace(**vars(a))
        sa.nodes, sa.workload, sa.nemesis, sa.seconds = n, wl, nm, secs
        seed = base_seed + idx
        out = os.path.join(a.out, "%02d-%s-%s-%dn" % (idx, wl, nm, n))
        print("== scenario %d of %d: %s with %s on %d nodes" % (idx + 1, len(plan), wl, nm, n), flush=True)
        status, row = run_one(sa, seed, out, a.table)
        rows.append(row)
        worst = max(worst, status)
    print("== %d scenarios: %d with anomalies, %d could not run, %d %s reads and %d %s records (the client's, "
          "no anomaly)" % (
              len(rows), sum(1 for r in rows if "error" not in r and anomalies(r)), sum(1 for r in rows if "error" in r),
              sum(int(r.get(STALE_RESET) or 0) for r in rows), STALE_RESET,
              sum(int(r.get(EPOCH_BUMP) or 0) for r in rows), EPOCH_BUMP))
    return worst


def main():
    ap = argparse.ArgumentParser(prog="tests/fault/run.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=3, choices=(3, 5))
    ap.add_argument("--workload", choices=WORKLOADS)
    ap.add_argument("--nemesis", help="NAME[,NAME...] from: %s" % ", ".join(sorted(nemeses.REGISTRY)))
    ap.add_argument("--seconds", type=int)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--out", required=True)
    ap.add_argument("--binary", help="the sluiced to run (default: build/sluiced)")
    ap.add_argument("--table", help="append the row(s) to this Markdown file")
    ap.add_argument("--set", action="append", help="KEY=VALUE for every node (again for more)")
    ap.add_argument("--tools", help="where the sluicefault package is (default: tools/)")
    ap.add_argument("--keep-data", action="store_true",
                    help="copy the workload topic's partition directories of every node to OUT/data/nN/ "
                         "before the cluster is removed")
    ap.add_argument("--matrix", choices=("quick", "full"))
    ap.add_argument("--hold", action="store_true",
                    help="after the run (clean or not) leave the nodes running until DIR/HOLD is removed, "
                         "for inspection")
    a = ap.parse_args()
    if a.binary:
        a.binary = os.path.abspath(a.binary)
    a.out = os.path.abspath(a.out)
    try:
        netcluster.require_root()
    except netcluster.HarnessError as e:
        print("run: %s" % e, file=sys.stderr)
        return 2
    if a.matrix:
        return matrix(a)
    if not (a.workload and a.nemesis and a.seconds):
        ap.error("--workload, --nemesis and --seconds are needed (or --matrix)")
    seed = a.seed if a.seed is not None else random.randrange(1 << 31)
    return run_one(a, seed, a.out, a.table)[0]


if __name__ == "__main__":
    sys.exit(main())
