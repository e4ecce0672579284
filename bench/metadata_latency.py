#!/usr/bin/python3
"""bench/metadata_latency.py — how long a metadata change takes, seen from
a client: CreateTopics (1 partition), IncrementalAlterConfigs on that topic
and DeleteTopics, one request at a time over raw frames, each answered
once its record is committed and applied (and, for the create, once the
partition opened on its shard).

    bench/metadata_latency.py [--rounds 200] [--vs OLD_SLUICED]

Starts its own broker (build/sluiced, or $SLUICED; a free loopback port, a
temporary directory: tests/integration/harness.py) and prints the median
and p99 of each operation in ms. With --vs, the same rounds run on the
other binary too, in alternating blocks of 20 within one run (the machine
is shared and noisy), and the ratios new/old are printed: how a change of
the metadata path (the Raft quorum under the metadata log, for instance)
moves what a client waits for.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))

import harness  # noqa: E402
from kraw import Conn, W  # noqa: E402

CREATE_TOPICS, DELETE_TOPICS, INCREMENTAL_ALTER_CONFIGS = 19, 20, 44
OPS = ("create", "alter-config", "delete")


def create(c, name):
    w = W().array([name], lambda w, n: w.str(n).i32(1).i16(1).array([], None).array([], None)).i32(30000).i8(0)
    r = c.request(CREATE_TOPICS, 1, w)
    (_, err, _), = r.array(lambda r: (r.str(), r.i16(), r.str()))
    assert err == 0, ("CreateTopics", name, err)


def alter(c, name):
    w = W().array([(2, name)], lambda w, res: w.i8(res[0]).str(res[1]).array(
        [("retention.ms", 0, "3600000")], lambda w, o: w.str(o[0]).i8(o[1]).str(o[2]))).i8(0)
    r = c.request(INCREMENTAL_ALTER_CONFIGS, 0, w)
    r.i32()
    (err, _, _, _), = r.array(lambda r: (r.i16(), r.str(), r.i8(), r.str()))
    assert err == 0, ("IncrementalAlterConfigs", name, err)


def delete(c, name):
    r = c.request(DELETE_TOPICS, 0, W().array([name], lambda w, n: w.str(n)).i32(30000))
    (_, err), = r.array(lambda r: (r.str(), r.i16()))
    assert err == 0, ("DeleteTopics", name, err)


def rounds(b, tag, n, out):
    """n rounds of create, alter, delete on broker b; seconds appended to out[op]."""
    with Conn(b.bootstrap) as c:
        for i in range(n):
            name = "ml-%s-%d-%d" % (tag, os.getpid(), i)
            for op, fn in zip(OPS, (create, alter, delete)):
                t0 = time.monotonic()
                fn(c, name)
                out[op].append(time.monotonic() - t0)


def pct(xs, p):
    xs = sorted(xs)
    return 1000.0 * xs[min(len(xs) - 1, int(len(xs) * p))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=200, help="rounds of create, alter, delete (default 200)")
    ap.add_argument("--vs", help="another sluiced binary to run side by side (the 'old' one)")
    o = ap.parse_args()
    new = os.environ.get("SLUICED", harness.SLUICED)
    bins = [("new", new)] + ([("old", o.vs)] if o.vs else [])
    res = {tag: {op: [] for op in OPS} for tag, _ in bins}
    brokers = []
    try:
        for tag, path in bins:
            harness.SLUICED = path
            br = harness.Broker(harness.temp_dir(), settings={"admin.listen": ""})
            br.start()
            brokers.append((tag, br))
        left, block = o.rounds, 20
        while left > 0:
            k = min(block, left)
            for tag, br in brokers:
                rounds(br, tag, k, res[tag])
            left -= k
    finally:
        for _, br in brokers:
            if br.proc:
                br.stop()
            harness.shutil.rmtree(br.workdir, ignore_errors=True)
    print("# bench/metadata_latency.py: %d rounds, one request at a time; ms" % o.rounds)
    print("%-5s %-13s %8s %8s" % ("", "op", "p50", "p99"))
    for tag, _ in bins:
        for op in OPS:
            print("%-5s %-13s %8.2f %8.2f" % (tag, op, pct(res[tag][op], 0.5), pct(res[tag][op], 0.99)))
    if o.vs:
        for op in OPS:
            print("ratio %-13s p50 new/old %.2f  p99 new/old %.2f" % (
                op, pct(res["new"][op], 0.5) / pct(res["old"][op], 0.5),
                pct(res["new"][op], 0.99) / pct(res["old"][op], 0.99)))


if __name__ == "__main__":
    main()
