#!/usr/bin/python3
"""Transactions with real clients against a real sluiced: kcat 1.7.1
(librdkafka 2.0.2), which produces in one transaction when given
transactional.id and reads read_committed (stopping at the last stable
offset and dropping aborted records); kafkajs 2.2.4
(tests/integration/kafkajs/txn_check.js), whose transactional producer
commits, aborts and sends offsets in transactions, read back by a
read_committed (the kafkajs default) and a readUncommitted consumer. What
the clients wrote is checked on the wire too (ktxn.py: markers, LSO)."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import broker, main, run, test  # noqa: E402
from ktxn import (MARKER_ABORT, MARKER_COMMIT, READ_COMMITTED, READ_UNCOMMITTED, Producer,  # noqa: E402
                  TConn, data_offsets, markers, new_topic, plain, vals)

HERE = os.path.dirname(os.path.abspath(__file__))
KJS_DIR = os.path.join(HERE, "kafkajs")
NODE = os.environ.get("NODE", "node")
KCAT = os.environ.get("KCAT", "kcat")
SETTINGS = {"group.initial.rebalance.delay.ms": 0}


def kcat(b, *args, input=None, check=True):
    return run([KCAT, "-b", b.bootstrap, "-m", "30", "-q"] + list(args), input=input, check=check)


def kcat_read(b, topic, isolation, partition=0):
    """Values of topic/partition from the beginning to the end kcat -e sees
    (for read_committed: the last stable offset)."""
    out = kcat(b, "-C", "-t", topic, "-p", str(partition), "-o", "beginning", "-e", "-f", "%s\n",
               "-X", "isolation.level=" + isolation).stdout
    return out.splitlines()


def kcat_txn_produce(b, topic, txn_id, lines, partition=0):
    kcat(b, "-P", "-t", topic, "-p", str(partition), "-X", "transactional.id=" + txn_id,
         input=b"".join(v + b"\n" for v in lines))


@test
def kcat_transactional_produce_read_committed():
    """kcat -P -X transactional.id=kc-tx with 200 lines: a read_committed
    kcat consumer gets all 200 in order; on the wire they are transactional
    batches at 0..199 followed by one COMMIT marker at 200, and the LSO is
    the high watermark (201). A second kcat run with the same
    transactional.id (its InitProducerId bumps the epoch) adds 200 more
    and a COMMIT marker at 401; read_committed gets all 400."""
    first, second = vals(b"one", 200), vals(b"two", 200)
    with broker(settings=SETTINGS) as b, TConn(b.bootstrap) as c:
        new_topic(c, "kc")
        kcat_txn_produce(b, "kc", "kc-tx", first)
        got = kcat_read(b, "kc", "read_committed")
        assert got == first, (len(got), got[:3])
        assert (c.latest("kc", 0, READ_UNCOMMITTED), c.latest("kc", 0, READ_COMMITTED)) == (201, 201)
        f = c.fetch1("kc", 0, 0, READ_COMMITTED)
        assert (f.hw, f.lso) == (201, 201) and f.aborted in (None, []), f
        assert data_offsets(f.batches) == list(range(200)), data_offsets(f.batches)[:5]
        assert all(bt.transactional and bt.pid >= 0 for bt in f.batches), [(bt.base, bt.attributes) for bt in f.batches]
        (m1,) = markers(f.batches)
        assert m1[:2] == (200, MARKER_COMMIT), m1

        kcat_txn_produce(b, "kc", "kc-tx", second)
        got = kcat_read(b, "kc", "read_committed")
        assert got == first + second, (len(got), got[198:203])
        f = c.fetch1("kc", 0, 0, READ_COMMITTED)
        assert (f.hw, f.lso) == (402, 402), f
        ms = markers(f.batches)
        assert [m[:2] for m in ms] == [(200, MARKER_COMMIT), (401, MARKER_COMMIT)], ms
        assert ms[1][2] == m1[2] and ms[1][3] > m1[3], ("same producer id, newer epoch", ms)


@test
def kcat_read_committed_stops_at_open_transaction():
    """Offsets 0..2 plain, 3..4 a transaction left open (raw), 5 plain:
    kcat read_committed -e ends at the LSO with p-0..p-2 only, while
    read_uncommitted gets all six. After the transaction is aborted,
    read_committed gets the five non-aborted records (librdkafka drops
    3..4 by the AbortedTransactions list) and read_uncommitted still all
    six."""
    with broker(settings=SETTINGS) as b, TConn(b.bootstrap) as c:
        new_topic(c, "ko")
        assert c.produce("ko", 0, plain(vals(b"p", 3))).error == 0
        p = Producer(c, "ko-tx")
        p.add("ko", [0])
        assert p.produce("ko", 0, vals(b"t", 2)).error == 0
        assert c.produce("ko", 0, plain([b"after"])).error == 0
        everything = vals(b"p", 3) + vals(b"t", 2) + [b"after"]
        got = kcat_read(b, "ko", "read_committed")
        assert got == vals(b"p", 3), got
        got = kcat_read(b, "ko", "read_uncommitted")
        assert got == everything, got
        assert p.end(False) == 0
        got = kcat_read(b, "ko", "read_committed")
        assert got == vals(b"p", 3) + [b"after"], got
        got = kcat_read(b, "ko", "read_uncommitted")
        assert got == everything, got


@test
def confluent_kafka_consume_transform_produce():
    """confluent-kafka 1.7.0 (librdkafka 2.0.2) consume-transform-produce,
    exactly once: 30 records in "in"; a read_committed consumer in group
    ctp-g and a transactional producer (ctp-tx) handle them 10 at a time,
    producing each upper-cased to "out" and sending the consumer's position
    with send_offsets_to_transaction (AddOffsetsToTxn, TxnOffsetCommit) in
    the same transaction. The second batch's transaction is aborted and
    redone from the group's committed offset (10). In the end "out" read
    read_committed holds exactly the 30 transformed records once each, in
    order; the group's committed offset is 30; the aborted attempt's
    records (flushed before the abort) are on the wire at 11..20, listed in
    AbortedTransactions, between the first COMMIT marker (10) and its
    ABORT marker (21)."""
    from confluent_kafka import Consumer, KafkaException, Producer as CProducer, TopicPartition
    n, per = 30, 10
    with broker(settings=SETTINGS) as b, TConn(b.bootstrap) as c:
        new_topic(c, "in")
        new_topic(c, "out")
        assert c.produce("in", 0, plain(vals(b"rec", n))).error == 0
        common = {"bootstrap.servers": b.bootstrap, "socket.timeout.ms": 30000}
        prod = CProducer(dict(common, **{"transactional.id": "ctp-tx", "transaction.timeout.ms": 30000}))
        cons = Consumer(dict(common, **{"group.id": "ctp-g", "enable.auto.commit": False,
                                        "auto.offset.reset": "earliest", "isolation.level": "read_committed"}))
        try:
            prod.init_transactions(30)
            tp = TopicPartition("in", 0)
            cons.assign([tp])
            done, attempt = 0, 0
            while done < n:
                prod.begin_transaction()
                got = []
                while len(got) < per:
                    msgs = cons.consume(per - len(got), timeout=1.0)
                    for m in msgs:
                        if m.error():
                            raise KafkaException(m.error())
                        got.append(m)
                assert [m.offset() for m in got] == list(range(done, done + per)), [m.offset() for m in got]
                for m in got:
                    prod.produce("out", value=m.value().upper(), partition=0)
                pos = cons.position([tp])
                prod.send_offsets_to_transaction(pos, cons.consumer_group_metadata(), 30)
                attempt += 1
                if attempt == 2:
                    # the records go out first (else the abort just purges
                    # them: a marker over an empty transaction)
                    assert prod.flush(30) == 0
                    prod.abort_transaction(30)
                    committed = cons.committed([tp], timeout=30)[0].offset
                    assert committed == done, (committed, done)
                    cons.seek(TopicPartition("in", 0, committed))
                    continue
                prod.commit_transaction(30)
                done += per
        finally:
            cons.close()
            prod.flush(10)
            cons = prod = None     # rd_kafka_destroy now, while the broker is up
        out, _ = c.offset_fetch("ctp-g", {"in": [0]})
        assert out[("in", 0)][0] == n, out
        want = [v.upper() for v in vals(b"rec", n)]
        got = kcat_read(b, "out", "read_committed")
        assert got == want, got
        f = c.fetch1("out", 0, 0, READ_COMMITTED)
        assert (f.hw, f.lso, f.aborted) == (44, 44, [(f.batches[0].pid, 11)]), (f.hw, f.lso, f.aborted)
        assert [m[1] for m in markers(f.batches)] == [MARKER_COMMIT, MARKER_ABORT, MARKER_COMMIT, MARKER_COMMIT], \
            markers(f.batches)


def txn_check(b, topic, prefix, n):
    p = run([NODE, os.path.join(KJS_DIR, "txn_check.js"), b.bootstrap, topic, prefix, str(n)],
            check=False, cwd=KJS_DIR)
    out = p.stdout.decode("utf-8", "replace").strip().splitlines()
    err = p.stderr.decode("utf-8", "replace")[-4000:]
    assert out, "txn_check.js: exit %d, no output; stderr:\n%s" % (p.returncode, err)
    res = json.loads(out[-1])
    assert res["ok"] and p.returncode == 0, "txn_check.js failed (exit %d) after %s: %s\nstderr:\n%s\nbroker log:\n%s" % (
        p.returncode, res.get("steps"), res.get("error"), err, b.log_tail())
    return res


def by_partition(records):
    out = {}
    for r in records:
        out.setdefault(r["partition"], []).append((r["offset"], r["key"]))
    return out


@test
def kafkajs_commit_and_abort():
    """A kafkajs transactional producer: transaction c1 (25 records to each
    of 2 partitions, sendOffsets partition 0 = 7) committed, transaction ab
    (25 more each, sendOffsets 99) aborted, transaction c3 (25 more each)
    committed. Per partition: c1 at 0..24, its marker 25, ab at 26..50,
    marker 51, c3 at 52..76, marker 77, so the end offset is 78. The
    read_committed consumer (kafkajs default) reads exactly c1 and c3, each
    once, at those offsets; the readUncommitted one reads c1, ab and c3; the
    group's committed offset is 7 (the aborted 99 dropped). On the wire:
    COMMIT, ABORT, COMMIT markers and AbortedTransactions [(pid, 26)]."""
    n = 25
    topic, prefix = "kjs-txn", "kjs-txn"
    with broker(settings=SETTINGS) as b:
        res = txn_check(b, topic, prefix, n)
        for p in (0, 1):
            c1 = [(i, "c1-%d-%d" % (p, i)) for i in range(n)]
            ab = [(n + 1 + i, "ab-%d-%d" % (p, i)) for i in range(n)]
            c3 = [(2 * n + 2 + i, "c3-%d-%d" % (p, i)) for i in range(n)]
            got = by_partition(res["rc"]["records"]).get(p)
            assert got == c1 + c3, ("read_committed", p, got)
            got = by_partition(res["ru"]["records"]).get(p)
            assert got == c1 + ab + c3, ("readUncommitted", p, got)
        assert res["committedOffsets"] == [{"partition": 0, "offset": "7"}, {"partition": 1, "offset": "-1"}], \
            res["committedOffsets"]
        assert res["topicOffsets"] == [{"partition": p, "high": str(3 * n + 3), "low": "0"} for p in (0, 1)], \
            res["topicOffsets"]
        with TConn(b.bootstrap) as c:
            for p in (0, 1):
                f = c.fetch1(topic, p, 0, READ_COMMITTED)
                assert (f.hw, f.lso) == (3 * n + 3, 3 * n + 3), (p, f)
                ms = markers(f.batches)
                assert [m[:2] for m in ms] == [(n, MARKER_COMMIT), (2 * n + 1, MARKER_ABORT),
                                               (3 * n + 2, MARKER_COMMIT)], (p, ms)
                assert f.aborted == [(ms[1][2], n + 1)], (p, f.aborted)


if __name__ == "__main__":
    main("txn-clients")
