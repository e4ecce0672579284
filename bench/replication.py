#!/usr/bin/python3
"""bench/replication.py — what replication costs a producer, on a cluster of
three nodes on this machine (docs/benchmarks.md "Replication (three nodes on
this machine)").

    bench/replication.py [--pairs 3] [--records 1000000] [--size 100]
                         [--e2e-seconds 10] [--e2e-rate 50000] [--no-e2e]

Starts a 3-node cluster (scripts/cluster, min.insync.replicas=2) in a
temporary directory, then runs pair by pair `sluice-bench produce` with
acks=all on a topic of replication factor 3 against acks=1 on a topic of
replication factor 1, each on a fresh topic, the order alternating from one
pair to the next. Prints each pair's records/s and the ratio
RF3-acks=all / RF1-acks=1 (the median of the pairs), then the end-to-end
latency of `sluice-bench e2e` with acks=all on RF 3. The cluster and its
directory go at the end, also on Ctrl-C. Figures below target are not
failures: exit 0 unless a run fails.
"""
import argparse
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = os.path.join(HERE, "scripts", "cluster")
BENCH = os.environ.get("SLUICE_BENCH", os.path.join(HERE, "build", "sluice-bench"))
TARGET = 0.8
KAFKA_2014 = (421823, 821557)   # 3 replicas acks=all, 1 replica acks=1 (records/s)


def rows(out):
    r = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 3 and not line.startswith("#"):
            r[(f[0], f[1])] = f[2]
    return r


def node_pids(d):
    """The running nodes' process ids (scripts/cluster status)."""
    st = subprocess.run([CLUSTER, "status", "--dir", d], stdout=subprocess.PIPE, text=True).stdout
    return [int(f[1]) for f in (line.split() for line in st.splitlines()) if len(f) > 2 and f[1].isdigit()
            and "running" in f]


def cpu_s(pids):
    """CPU seconds (user + system) the processes used so far."""
    t = 0
    for pid in pids:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        t += int(fields[11]) + int(fields[12])
    return t / os.sysconf("SC_CLK_TCK")


def bench(args, label, pids=()):
    """The run's result rows, and the CPU seconds of the brokers (pids) and
    of the client (sluice-bench) over it."""
    cmd = [BENCH] + args
    print("$ sluice-bench " + " ".join(args), flush=True)
    c0, r0 = cpu_s(pids), resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    c1, r1 = cpu_s(pids), resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-3000:])
        raise SystemExit("replication: %s failed (exit %d)" % (label, p.returncode))
    return rows(p.stdout), (c1 - c0, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime))


def produce(bootstrap, o, acks, rf, pids):
    r, (brokers, client) = bench(["produce", "--bootstrap", bootstrap, "--records", str(o.records),
                                  "--size", str(o.size), "--acks", str(acks), "--replication-factor", str(rf)],
                                 "produce RF%d acks=%d" % (rf, acks), pids)
    print("  CPU: brokers %.2f s, client %.2f s" % (brokers, client), flush=True)
    return float(r[("produce", "records_per_s")]), float(r.get(("produce", "ack_p99_ms"), "nan")), brokers, client


def on_term(signum, frame):
    raise KeyboardInterrupt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--records", default="1000000")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--e2e-seconds", type=float, default=10)
    ap.add_argument("--e2e-rate", default="50000")
    ap.add_argument("--no-e2e", action="store_true")
    o = ap.parse_args()
    if o.pairs < 1:
        ap.error("--pairs must be at least 1")
    # also SIGINT: a shell without job control starts a background job
    # with it ignored, and Python keeps it so
    signal.signal(signal.SIGINT, on_term)
    signal.signal(signal.SIGTERM, on_term)
    d = tempfile.mkdtemp(prefix="sluice-replication-")
    started = False
    try:
        p = subprocess.run([CLUSTER, "start", "3", "--dir", d, "--set", "min.insync.replicas=2"],
                           stdout=subprocess.PIPE, text=True)
        started = True
        if p.returncode != 0:
            raise SystemExit("replication: the cluster did not start")
        bootstrap = p.stdout.strip().splitlines()[-1]
        print("# bench/replication.py: 3 nodes (scripts/cluster, 1 shard each, min.insync.replicas=2) "
              "at %s; %s records x %d bytes, 6 partitions, %d pairs alternating" %
              (bootstrap, o.records, o.size, o.pairs), flush=True)
        pids = node_pids(d)
        pairs = []
        for i in range(o.pairs):
            order = [(3, -1), (1, 1)] if i % 2 == 0 else [(1, 1), (3, -1)]
            got = {}
            for rf, acks in order:
                got[rf] = produce(bootstrap, o, acks, rf, pids)
            pairs.append((got[3], got[1]))
            print("pair %d: RF3 acks=all %.0f records/s (ack p99 %.2f ms), RF1 acks=1 %.0f records/s "
                  "(ack p99 %.2f ms), ratio %.3f" %
                  (i + 1, got[3][0], got[3][1], got[1][0], got[1][1], got[3][0] / got[1][0]), flush=True)
        ratios = [a[0] / b[0] for a, b in pairs]
        med = statistics.median(ratios)
        print()
        print("| pair | RF3 acks=all records/s | RF1 acks=1 records/s | ratio | CPU s RF3: brokers + client "
              "| CPU s RF1: brokers + client |")
        print("|---|---|---|---|---|---|")
        for i, (a, b) in enumerate(pairs):
            print("| %d | %.0f | %.0f | %.3f | %.2f + %.2f | %.2f + %.2f |" % (i + 1, a[0], b[0], a[0] / b[0], a[2],
                                                                           a[3], b[2], b[3]))
        print("| median | %.0f | %.0f | %.3f | | |" % (statistics.median(a[0] for a, _ in pairs),
                                                      statistics.median(b[0] for _, b in pairs), med))
        print()
        print("replication ratio_rf3_all_to_rf1_1 %.3f  (target >= %.1f: %s; Kafka 2014: %d/%d = %.2f)" %
              (med, TARGET, "met" if med >= TARGET else "NOT met", KAFKA_2014[0], KAFKA_2014[1],
               KAFKA_2014[0] / KAFKA_2014[1]), flush=True)
        if not o.no_e2e:
            r, _ = bench(["e2e", "--bootstrap", bootstrap, "--acks", "-1", "--replication-factor", "3",
                       "--size", str(o.size), "--rate", str(o.e2e_rate), "--seconds", str(o.e2e_seconds)],
                      "e2e RF3 acks=all", node_pids(d))
            print("replication e2e_rf3_acks_all_rate %s records/s" % o.e2e_rate)
            for k in ("latency_p50_ms", "latency_p99_ms", "latency_p99.9_ms", "latency_max_ms"):
                print("replication e2e_rf3_acks_all_%s %s" % (k, r.get(("e2e", k), "?")))
    except KeyboardInterrupt:
        print("replication: interrupted", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if started:
            subprocess.run([CLUSTER, "stop", "--dir", d], stdout=subprocess.DEVNULL)
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
