#!/usr/bin/python3
"""A leader paused (SIGSTOP) past broker.session.timeout.ms is replaced; a
Produce (acks=all) waiting in its socket while it was deposed must be
answered with an error after SIGCONT, never acknowledged, and be in no copy
of the log; what the new leader acknowledged is all there is.

It once failed in a clean-clone run (the leader answered error 0) when the
test sent its request as soon as kill(SIGSTOP) returned: a process stops only
once one of its threads has taken the signal and stopped the others, and
under load the leader's shard can take, replicate and legitimately
acknowledge a request before that. The request now goes only once every
thread of the leader is stopped (/proc/PID/task/*/stat state T), and an
answer that arrives while it is stopped fails the test by that name.
"""

import os
import select
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, test  # noqa: E402
from cluster import Cluster, create_topic, log_batches, partitions, until  # noqa: E402

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402


def produce_acked(bootstrap, topic, values):
    """values through an acks=all producer: the ones acknowledged."""
    acked = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60000})
    for v in values:
        p.produce(topic, value=v, partition=0,
                  on_delivery=lambda err, m: acked.append(m.value()) if err is None else None)
    assert p.flush(90) == 0
    return acked


def stop_all(pid):
    """SIGSTOP pid and wait until every one of its threads is stopped: kill()
    returns before the group stop has reached them all."""
    os.kill(pid, signal.SIGSTOP)

    def stopped():
        states = []
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except FileNotFoundError:
                continue
        return states and all(st in ("T", "t") for st in states)
    until("every thread of %d stopped" % pid, stopped, timeout=10)


def read_values(bootstrap, topic):
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "paused-check", "enable.auto.commit": False})
    _lo, hi = cons.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    cons.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + 60
    while len(out) < hi:
        assert time.monotonic() < deadline, "read %d of %d" % (len(out), hi)
        for m in cons.consume(1000, 1.0):
            if not m.error():
                out.append(m.value())
    cons.close()
    return out


@test
def a_leader_paused_past_its_session_is_replaced_and_what_it_took_while_deposed_is_never_acknowledged():
    from kraw import Conn, W
    from ktxn import batch
    sets = ["min.insync.replicas=2", "default.replication.factor=3", "broker.session.timeout.ms=4000"]
    with Cluster(3, sets=sets) as c:
        topic = "paused"
        create_topic(c.bootstrap, topic, 1, 3)
        until("3 in sync", lambda: (lambda ps: ps and ps[0][0] > 0 and len(ps[0][2]) == 3)(
            partitions(c.bootstrap, topic)))
        old = partitions(c.bootstrap, topic)[0][0]
        others = ",".join("127.0.0.1:%d" % c.port(n) for n in (1, 2, 3) if n != old)
        before = produce_acked(c.bootstrap, topic, [b"before-%d" % i for i in range(100)])
        assert len(before) == 100
        pid = c.pid(old)
        conn = Conn("127.0.0.1:%d" % c.port(old), timeout=90)
        stop_all(pid)
        try:
            # a Produce (acks=all) waiting in the paused leader's socket
            w = W().str(None).i16(-1).i32(30000)   # v7: transactional id, acks, timeout
            w.array([topic], lambda w, t: w.str(t).array(
                [0], lambda w, p: w.i32(p).bytes(batch([b"deposed-%d" % i for i in range(10)]))))
            corr = conn.send(0, 7, w.b)
            until("a new leader while %d is paused" % old,
                  lambda: partitions(others, topic)[0][0] not in (-1, old), timeout=60)
            after = produce_acked(others, topic, [b"after-%d" % i for i in range(100)])
            assert len(after) == 100, "the new leader acknowledged %d of 100" % len(after)
            # a stopped process answers nothing: an answer here would be one
            # the leader gave before it stopped (the test's own race)
            readable, _, _ = select.select([conn.s], [], [], 0)
            assert not readable, "node %d answered before it stopped: the test raced its own SIGSTOP" % old
        finally:
            os.kill(pid, signal.SIGCONT)
        r = conn.recv(corr)
        conn.close()
        r.i32()                               # topics
        assert r.str() == topic
        r.i32()                               # partitions
        idx, err = r.i32(), r.i16()
        assert idx == 0 and err != 0, "the deposed leader acknowledged a write (error %d)" % err
        print("  the deposed leader answered error %d" % err)
        until("node %d back in the ISR" % old, lambda: len(partitions(c.bootstrap, topic)[0][2]) == 3, timeout=90)
        vals = read_values(c.bootstrap, topic)
        assert not [v for v in vals if v.startswith(b"deposed-")], "a deposed leader's write is readable"
        assert vals == before + after, "read %d records, acknowledged %d" % (len(vals), len(before + after))
        c.stop()
        copies = [b"".join(log_batches(os.path.join(c.data_dir(n), "%s-0" % topic))) for n in (1, 2, 3)]
        assert copies[0] == copies[1] == copies[2], "the three copies differ (%r bytes)" % [len(x) for x in copies]
        assert b"deposed-" not in copies[old - 1], "node %d kept what it took while deposed" % old


if __name__ == "__main__":
    main("test_cluster_pause")
