#!/usr/bin/python3
"""bench/txn_latency.py — where a transaction's time goes, seen from a
real client (confluent-kafka on librdkafka 2.0.2, Debian's
/usr/bin/python3): the same loop of N records over 6 partitions, flushed,
with a plain acks=all producer and inside transactions.

    bench/txn_latency.py [--rounds 200] [--records 1,1000]

Starts its own build/sluiced (free loopback port, temporary directory,
tests/integration/harness.py) and prints, per record count, the median
and p99 of:

  plain flush          produce N, flush (acks=all acknowledgements)
  txn flush            begin, produce N, flush: the same, plus the
                       AddPartitionsToTxn librdkafka sends before the
                       first record of each partition
  txn commit           commit_transaction after that flush: EndTxn
                       (PrepareCommit and every marker durable)
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))

from confluent_kafka import Producer  # noqa: E402

import harness  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return 1000.0 * xs[min(len(xs) - 1, int(len(xs) * p))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=200, help="transactions per record count (default 200)")
    ap.add_argument("--records", default="1,1000", help="records per transaction, comma-separated")
    o = ap.parse_args()
    counts = [int(x) for x in o.records.split(",")]
    value = b"x" * 100
    with harness.broker(settings={"num.partitions": 6}) as b:
        plain = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 5,
                          "batch.num.messages": 100000})
        txn = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "txn-latency", "linger.ms": 5,
                        "batch.num.messages": 100000})
        txn.init_transactions(30)
        plain.produce("tl", value, partition=0)
        plain.flush(30)
        txn.begin_transaction()
        txn.produce("tl", value, partition=0)
        txn.commit_transaction(30)
        print("# bench/txn_latency.py: 100-byte records over 6 partitions, %d rounds, librdkafka %s; ms"
              % (o.rounds, __import__("confluent_kafka").libversion()[0]))
        print("%-8s %-22s %8s %8s" % ("records", "what", "p50", "p99"))
        for n in counts:
            pf, tf, tc = [], [], []
            for r in range(o.rounds):
                for i in range(n):
                    plain.produce("tl", value, partition=i % 6)
                t0 = time.perf_counter()
                plain.flush(30)
                pf.append(time.perf_counter() - t0)
                txn.begin_transaction()
                for i in range(n):
                    txn.produce("tl", value, partition=i % 6)
                t0 = time.perf_counter()
                txn.flush(30)
                t1 = time.perf_counter()
                txn.commit_transaction(30)
                t2 = time.perf_counter()
                tf.append(t1 - t0)
                tc.append(t2 - t1)
            for what, xs in (("plain flush", pf), ("txn flush", tf), ("txn commit", tc)):
                print("%-8d %-22s %8.2f %8.2f" % (n, what, pct(xs, 0.5), pct(xs, 0.99)))
            sys.stdout.flush()
        del plain, txn   # the clients go before the broker stops


if __name__ == "__main__":
    main()
