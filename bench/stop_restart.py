#!/usr/bin/python3
"""bench/stop_restart.py — how long a one-node broker with many partitions
takes to stop cleanly (SIGTERM to exit) and to start again (exec to ready),
side by side for two builds (docs/benchmarks.md "Stop and restart with many
partitions").

    bench/stop_restart.py [--partitions 10000] [--rounds 2]
                          [--sluiced BUILD/sluiced] [--vs OTHER/sluiced]

Each round starts a broker (its own free port and temporary directory,
RLIMIT_NOFILE raised to fit the partitions), creates one topic of
--partitions partitions, writes one 100-byte record to each
(confluent-kafka, acks=1), waits 2 s, then times SIGTERM until the process
exited 0 and the start that follows until the broker is ready (the
harness's readiness check). With --vs the rounds alternate between the two
binaries, so that both see the same machine. Prints one line a round and
the best of each; exits 1 only if a broker cannot run."""

import argparse
import os
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import harness  # noqa: E402

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def one_round(binary, n):
    harness.SLUICED = binary
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    with harness.broker(nofile=min(hard, n + 2500)) as b:
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        a.create_topics([NewTopic("stop", n, 1)], operation_timeout=300)["stop"].result(300)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 50, "acks": 1,
                      "queue.buffering.max.messages": 2000000})
        for i in range(n):
            p.produce("stop", b"x" * 100, partition=i)
            p.poll(0)
        if p.flush(300) != 0:
            raise SystemExit("stop_restart: records not acknowledged within 300 s")
        time.sleep(2)
        t0 = time.monotonic()
        b.stop()
        stop_s = time.monotonic() - t0
        t0 = time.monotonic()
        b.start()
        start_s = time.monotonic() - t0
    return stop_s, start_s


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sluiced", default=os.environ.get("SLUICED", os.path.join(here, "..", "build", "sluiced")))
    ap.add_argument("--vs", help="a second sluiced, alternated with the first")
    o = ap.parse_args()
    if o.partitions < 1 or o.rounds < 1:
        ap.error("--partitions and --rounds must be at least 1")
    binaries = [o.sluiced] + ([o.vs] if o.vs else [])
    for bn in binaries:
        if not os.access(bn, os.X_OK):
            ap.error("%s: not an executable sluiced" % bn)
    print("# stop_restart: %d partitions, one record each; seconds" % o.partitions, flush=True)
    best = {}
    for r in range(o.rounds):
        for bn in binaries:
            stop_s, start_s = one_round(bn, o.partitions)
            print("round %d %s: stop %.2f start %.2f" % (r + 1, bn, stop_s, start_s), flush=True)
            s0, t0 = best.get(bn, (stop_s, start_s))
            best[bn] = (min(s0, stop_s), min(t0, start_s))
    for bn in binaries:
        print("best %s: stop %.2f start %.2f" % (bn, best[bn][0], best[bn][1]))


if __name__ == "__main__":
    main()
