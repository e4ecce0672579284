#!/usr/bin/python3
"""bench/failover.py — how long a producer waits when a partition's leader
goes, on a cluster of three nodes on this machine (docs/benchmarks.md
"Replication (three nodes on this machine)").

    bench/failover.py [--rounds 3] [--rate 1000]

Starts a 3-node cluster (scripts/cluster, min.insync.replicas=2,
broker.session.timeout.ms at its default) in a temporary directory, creates
a topic of 6 partitions with 3 replicas each, and keeps an idempotent
producer (acks=all, confluent-kafka) sending to partition 0 at --rate
records/s. Then, --rounds times each:

  kill     SIGKILL partition 0's leader (scripts/cluster kill); the time
           from the kill to the first acknowledgement of partition 0 that
           arrives more than 200 ms after it (acks in flight from the old
           leader arrive sooner); the node is restarted and the ISR of
           every partition waited for.
  sigterm  SIGTERM to the leader's process (a controlled shutdown); the
           time to the first acknowledgement whose offset is beyond the last
           one acknowledged before the SIGTERM, and the time until the
           process exited; restarted likewise.
  kill-ctl the producer moved to a partition the active controller (the
           metadata quorum's leader) leads, then as kill: SIGKILL of a node
           that is both, whose successor needs a new active controller too.

Each round also gives the longest gap between two acknowledgements from
the event on (the producer's stall, whoever answered). A round with no
successor within 60 s says so. Figures over target are not failures: exit 0
unless the cluster or the producer cannot run at all. The cluster and its
directory go at the end, also on Ctrl-C.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = os.path.join(HERE, "scripts", "cluster")
SLUICECTL = os.environ.get("SLUICECTL", os.path.join(HERE, "build", "sluicectl"))
TOPIC = "failover"
SESSION_TIMEOUT_S = 9.0          # broker.session.timeout.ms's default
KILL_TARGET_S = SESSION_TIMEOUT_S + 1.0
TERM_TARGET_S = 0.2
IN_FLIGHT_S = 0.2
GIVE_UP_S = 60.0
PART = [0]                       # the partition the producer sends to and the rounds watch


def now():
    return time.monotonic()


class Load:
    """An idempotent acks=all producer sending to partition 0 on its own
    thread; every acknowledgement is (monotonic time, offset)."""

    def __init__(self, bootstrap, rate):
        self.bootstrap = bootstrap
        self.period = 1.0 / rate
        self.acks = []
        self.errors = []
        self.stop = False
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def new_producer(self):
        return Producer({
            "bootstrap.servers": self.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 0,
            "message.timeout.ms": 300000,
            "log_level": 2,
            "error_cb": lambda e: self.errors.append((now(), str(e))),
        })

    def on_delivery(self, err, msg):
        t = now()
        with self.lock:
            if err is None:
                self.acks.append((t, msg.offset()))
            else:
                self.errors.append((t, str(err)))

    def run(self):
        p = self.new_producer()
        n = 0
        nxt = now()
        while not self.stop:
            if now() >= nxt:
                try:
                    p.produce(TOPIC, value=b"%012d" % n + b"x" * 88, partition=PART[0], on_delivery=self.on_delivery)
                    n += 1
                except BufferError:
                    pass
                except KafkaException as e:
                    self.errors.append((now(), "produce: %s" % e))
                nxt += self.period
                if nxt < now() - 1:
                    nxt = now()
            p.poll(max(0.0, min(self.period, nxt - now())))
        p.flush(10)

    def snapshot(self):
        with self.lock:
            return list(self.acks)


def cluster(d, *args, check=True):
    p = subprocess.run([CLUSTER] + list(args) + ["--dir", d], stdout=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        raise RuntimeError("scripts/cluster %s: exit %d" % (" ".join(args), p.returncode))
    return p.stdout


def pids(d):
    out = {}
    for line in cluster(d, "status").splitlines()[1:]:
        f = line.split()
        if len(f) >= 3 and f[2] == "running":
            out[int(f[0])] = int(f[1])
    return out


def partitions(admin):
    md = admin.list_topics(TOPIC, timeout=5)
    t = md.topics.get(TOPIC)
    if t is None or t.error is not None:
        return None
    return t.partitions


def controller(bootstrap):
    """The active controller: the quorum's leader by DescribeQuorum
    (sluicectl cluster info; Metadata's ControllerId names the node asked)."""
    try:
        p = subprocess.run([SLUICECTL, "-b", bootstrap, "--format", "json", "cluster", "info"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=10)
        return int((json.loads(p.stdout).get("quorum") or {}).get("leader_id", -1))
    except (subprocess.SubprocessError, ValueError):
        return -1


def leader0(admin):
    try:
        ps = partitions(admin)
    except KafkaException:
        return -1
    return ps[PART[0]].leader if ps and PART[0] in ps else -1


def wait_whole(admin, timeout=120.0):
    """Every partition has a leader and 3 in-sync replicas; seconds taken
    or None."""
    t0 = now()
    while now() - t0 < timeout:
        try:
            ps = partitions(admin)
            if ps and len(ps) == 6 and all(p.leader >= 0 and len(p.isrs) == 3 for p in ps.values()):
                return now() - t0
        except KafkaException:
            pass
        time.sleep(0.2)
    return None


def exited(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def longest_gap(acks, t0, t_end):
    ts = [t0] + [t for t, _ in acks if t0 <= t <= t_end]
    return max((b - a for a, b in zip(ts, ts[1:])), default=0.0)


def wait_successor(load, t0, pred):
    """The first ack after t0 that pred accepts: its time after t0, or None
    after GIVE_UP_S."""
    while now() - t0 < GIVE_UP_S:
        for t, off in load.snapshot():
            if t > t0 and pred(t, off):
                return t - t0
        time.sleep(0.01)
    return None


def steady(load, seconds=1.0):
    """Acks keep arriving: one in the last `seconds` (at most 60 s)."""
    t0 = now()
    while now() - t0 < 60:
        a = load.snapshot()
        if a and now() - a[-1][0] < 0.1:
            time.sleep(seconds)
            return True
        time.sleep(0.05)
    return False


def log_tail(d, node, pattern_words=("elect", "fenc", "leader", "isr", "shutdown", "error", "warn"),
             all_lines=False):
    path = os.path.join(d, "n%d" % node, "sluiced.log")
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return []
    got = [l for l in lines if any(w in l.lower() for w in pattern_words)]
    return got if all_lines else got[-6:]


class LeaderWatch:
    """From t0 on, how long until metadata names a leader of partition 0
    other than old (polled every 20 ms on a thread of its own)."""

    def __init__(self, bootstrap, old, t0):
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
        self.old, self.t0, self.s, self.leader, self.stop = old, t0, None, -1, False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop and now() - self.t0 < GIVE_UP_S:
            ld = leader0(self.admin)
            if ld >= 0 and ld != self.old:
                self.s, self.leader = now() - self.t0, ld
                return
            time.sleep(0.02)

    def done(self):
        self.stop = True
        self.thread.join(10)
        return self.s


def fence_lines(d, node, seen):
    """The surviving nodes' new log lines saying node was fenced (seen: the
    count of such lines each node had before)."""
    out = []
    for n in (1, 2, 3):
        if n == node:
            continue
        lines = [l for l in log_tail(d, n, ("sent no heartbeat",), all_lines=True)
                 if "broker %d " % node in l]
        out += ["n%d: %s" % (n, l.strip()) for l in lines[seen.get(n, 0):]]
    return out


def fence_counts(d, node):
    return {n: len([l for l in log_tail(d, n, ("sent no heartbeat",), all_lines=True) if "broker %d " % node in l])
            for n in (1, 2, 3) if n != node}


def round_kill_ctl(d, admin, load, r):
    """kill, of a partition the active controller leads."""
    ctl = controller(load.bootstrap)
    ps = partitions(admin)
    led = sorted(p for p, m in (ps or {}).items() if m.leader == ctl)
    if not led:
        return None
    PART[0] = led[0]
    try:
        time.sleep(1.0)          # partition 0's acks in flight land first
        if not steady(load):
            return None
        res = round_kill(d, admin, load, r)
        res["kind"] = "kill-ctl"
        return res
    finally:
        PART[0] = 0


def round_kill(d, admin, load, r):
    ld = leader0(admin)
    ctl = controller(load.bootstrap)
    seen = fence_counts(d, ld)
    t0 = now()
    watch = LeaderWatch(load.bootstrap, ld, t0)
    pid = pids(d).get(ld)
    cluster(d, "kill", str(ld))
    t_kill_done = now() - t0
    if pid is None or not exited(pid):
        print("kill: node %d (pid %s) still runs after scripts/cluster kill" % (ld, pid), flush=True)
    took = wait_successor(load, t0, lambda t, off: t - t0 > IN_FLIGHT_S)
    gap = longest_gap(load.snapshot(), t0, now())
    new = leader0(admin)
    res = {"kind": "kill", "round": r, "part": PART[0], "node": ld, "successor": new, "s": took, "gap": gap,
           "kill_call_s": t_kill_done, "meta_s": watch.done(), "controller": ctl == ld,
           "fenced": fence_lines(d, ld, seen)}
    if took is None:
        res["logs"] = {n: log_tail(d, n) for n in (1, 2, 3) if n != ld}
    res["isr_down"] = isr0(admin)
    cluster(d, "restart", str(ld))
    res["isr_whole_s"] = wait_whole(admin)
    return res


def round_sigterm(d, admin, load, r):
    ld = leader0(admin)
    ctl = controller(load.bootstrap)
    pid = pids(d)[ld]
    acks = load.snapshot()
    last = acks[-1][1] if acks else -1
    t0 = now()
    watch = LeaderWatch(load.bootstrap, ld, t0)
    os.kill(pid, signal.SIGTERM)
    exit_s = None
    took = None
    while now() - t0 < GIVE_UP_S and (exit_s is None or took is None):
        if exit_s is None and exited(pid):
            exit_s = now() - t0
        if took is None:
            for t, off in load.snapshot():
                if t > t0 and off > last:
                    took = t - t0
                    break
        time.sleep(0.002)
    gap = longest_gap(load.snapshot(), t0, now())
    new = leader0(admin)
    res = {"kind": "sigterm", "round": r, "node": ld, "successor": new, "s": took, "gap": gap,
           "exit_s": exit_s, "meta_s": watch.done(), "controller": ctl == ld}
    if took is None:
        res["logs"] = {n: log_tail(d, n) for n in (1, 2, 3)}
    res["isr_down"] = isr0(admin)
    cluster(d, "restart", str(ld))
    res["isr_whole_s"] = wait_whole(admin)
    return res


def isr0(admin):
    try:
        ps = partitions(admin)
        return sorted(ps[PART[0]].isrs) if ps and PART[0] in ps else None
    except KafkaException:
        return None


def fmt_s(v):
    return "none within %.0f s" % GIVE_UP_S if v is None else "%.3f s" % v


def report(res):
    line = ("%-7s round %d: node %d%s -> %s: first successor ack %s, longest ack gap %.3f s, "
            "metadata names the successor after %s" %
            (res["kind"], res["round"], res["node"], " (the active controller)" if res["controller"] else "",
             res["successor"], fmt_s(res["s"]), res["gap"], fmt_s(res["meta_s"])))
    if res["kind"] == "sigterm":
        line += ", process exited after %s" % fmt_s(res["exit_s"])
    line += ", ISR of partition %d while down %s, whole again %s after the restart" % (
        res.get("part", 0), res["isr_down"], fmt_s(res["isr_whole_s"]))
    print(line, flush=True)
    for l in res.get("fenced", []):
        print("    " + l)
    for n, lines in res.get("logs", {}).items():
        for l in lines:
            print("    n%d: %s" % (n, l))


def summary(kind, results, target):
    got = [r["s"] for r in results if r["s"] is not None]
    missing = len(results) - len(got)
    med = statistics.median(got) if got else None
    gaps = statistics.median(r["gap"] for r in results) if results else 0
    meta = [r["meta_s"] for r in results if r["meta_s"] is not None]
    print("failover %s_metadata_names_successor_median_s %s" %
          (kind, "%.3f" % statistics.median(meta) if meta else "none"))
    print("failover %s_to_successor_median_s %s  (target <= %.1f s: %s)%s; longest ack gap median %.3f s" %
          (kind, "%.3f" % med if med is not None else "none", target,
           "met" if med is not None and med <= target and not missing else "NOT met",
           "; %d round(s) with no successor within %.0f s" % (missing, GIVE_UP_S) if missing else "", gaps))
    if kind == "sigterm":
        ex = [r["exit_s"] for r in results if r["exit_s"] is not None]
        print("failover sigterm_process_exit_median_s %s" % ("%.3f" % statistics.median(ex) if ex else "none"))


def on_term(signum, frame):
    raise KeyboardInterrupt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=int, default=1000, help="records/s to partition 0 (default 1000)")
    o = ap.parse_args()
    if o.rounds < 1 or o.rate < 1:
        ap.error("--rounds and --rate must be at least 1")
    # also SIGINT: a shell without job control starts a background job
    # with it ignored, and Python keeps it so
    signal.signal(signal.SIGINT, on_term)
    signal.signal(signal.SIGTERM, on_term)
    d = tempfile.mkdtemp(prefix="sluice-failover-")
    started = False
    load = None
    try:
        started = True
        p = subprocess.run([CLUSTER, "start", "3", "--dir", d, "--set", "min.insync.replicas=2"],
                           stdout=subprocess.PIPE, text=True)
        if p.returncode != 0:
            raise SystemExit("failover: the cluster did not start")
        bootstrap = p.stdout.strip().splitlines()[-1]
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
        for f in admin.create_topics([NewTopic(TOPIC, 6, 3)], operation_timeout=30).values():
            f.result()
        if wait_whole(admin) is None:
            raise SystemExit("failover: the topic's ISRs are not whole after 120 s")
        print("# bench/failover.py: 3 nodes (scripts/cluster, 1 shard each, min.insync.replicas=2, "
              "broker.session.timeout.ms=9000) at %s; topic of 6 partitions x 3 replicas; an idempotent "
              "acks=all producer at %d records/s to partition 0; %d rounds each" %
              (bootstrap, o.rate, o.rounds), flush=True)
        load = Load(bootstrap, o.rate)
        load.thread.start()
        if not steady(load):
            raise SystemExit("failover: the producer gets no acknowledgements")
        kills, terms, ctls = [], [], []
        for r in range(1, o.rounds + 1):
            for kind, fn, out in (("kill", round_kill, kills), ("sigterm", round_sigterm, terms),
                                  ("kill-ctl", round_kill_ctl, ctls)):
                if leader0(admin) < 0 or not steady(load):
                    print("%-7s round %d: skipped: partition 0 has no leader or no acks for 60 s" % (kind, r))
                    continue
                res = fn(d, admin, load, r)
                if res is None:
                    print("%-7s round %d: skipped: the active controller leads no partition with acks" % (kind, r))
                    continue
                out.append(res)
                report(res)
        print()
        summary("kill", kills, KILL_TARGET_S)
        summary("kill-ctl", ctls, KILL_TARGET_S)
        summary("sigterm", terms, TERM_TARGET_S)
        errs = load.errors
        print("failover producer_errors %d%s" % (len(errs), (" (first: %s)" % errs[0][1]) if errs else ""))
    except KeyboardInterrupt:
        print("failover: interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if load is not None:
            load.stop = True
            load.thread.join(15)
        if started:
            subprocess.run([CLUSTER, "stop", "--dir", d], stdout=subprocess.DEVNULL)
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
