#!/usr/bin/python3
"""Replicated partitions survive the loss of a leader (issue 19's first
cluster test; docs/replication.md).

Three sluiced processes on loopback (scripts/cluster), a topic of 6
partitions with replication factor 3 and min.insync.replicas=2. An
idempotent librdkafka producer (acks=all) sends keyed records while the
node leading partition 0 is killed with SIGKILL and later restarted:

- every acknowledged record is read back exactly once, and no record at
  all is read twice (idempotence across the leader change);
- per key, the records are in the order they were sent;
- the restarted node rejoins every partition's ISR; then another node
  leading partitions is SIGTERMed (a controlled shutdown): once it has
  exited it is in no ISR and leads nothing, acks=all records are answered
  without it at once, and on the leaders its follower lag in milliseconds
  grows; it restarts and rejoins; at the end the
  three copies of every partition are the same bytes (the restarted node
  cut what it had that the new leader did not: a follower's log is the
  leader's batches as they are);
- every copy of every partition has its high-watermark checkpoint, at
  most its log end;
- while that node is stopped, DeleteRecords moves the log start of a
  second topic (one partition on all three) past its log end: restarted,
  it rejoins that ISR with a log starting at the leader's log start,
  the same batches as the others' from there (Kafka's truncate fully
  and start at; before, it asked again every 500 ms and never rejoined).

The paused leader's test is tests/integration/test_cluster_pause.py.

Run: /usr/bin/python3 tests/integration/test_cluster_failover.py [test ...]
SLUICE_FAILOVER_RECORDS changes the count (default 200000).
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, test  # noqa: E402
from cluster import Cluster, create_topic, delete_records, log_batches, partitions, until  # noqa: E402

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402

RECORDS = int(os.environ.get("SLUICE_FAILOVER_RECORDS", "200000"))
KEYS = 500
TOPIC = "failover"
NPARTS = 6


def all_in_sync(bootstrap, n):
    ps = partitions(bootstrap, TOPIC)
    return ps and len(ps) == NPARTS and all(l >= 0 and len(isr) == n for l, _r, isr in ps.values())


def produce(c, victim, t0):
    """Send RECORDS keyed records, killing victim (SIGKILL) once a quarter is
    acknowledged, restarting it once partition 0 has another leader and a
    tenth more is acknowledged. Returns (acked, errors, failover): acked
    maps (key, seq) to (partition, offset); failover is the time from the
    SIGKILL to the first acknowledgement of partition 0 by its successor."""
    acked = {}
    errors = []
    st = {"phase": 0}

    def dr(err, msg):
        key = msg.key().decode()
        seq = int(msg.value().split(b":")[1])
        if err is not None:
            errors.append((key, seq, str(err)))
            return
        acked[(key, seq)] = (msg.partition(), msg.offset())
        # the successor's first: acks in flight from the old leader arrive
        # within milliseconds of the kill; a successor needs a session
        if msg.partition() == 0 and st["phase"] >= 1 and "first" not in st and \
                time.monotonic() > st["killed"] + 0.2:
            st["first"] = time.monotonic()

    def step():
        now = time.monotonic()
        if st["phase"] == 0 and len(acked) >= RECORDS // 4:
            c.kill(victim)
            st["killed"] = time.monotonic()
            st["phase"] = 1
        elif st["phase"] == 1 and now - st.get("looked", 0) > 0.5:
            st["looked"] = now
            try:
                leader = partitions(c.bootstrap, TOPIC)[0][0]
            except Exception:  # noqa: BLE001 - mid-election
                return
            if leader not in (-1, victim):
                st["phase"] = 2
                st["acked_at_election"] = len(acked)
        elif st["phase"] == 2 and "first" in st and (len(acked) >= st["acked_at_election"] + RECORDS // 10 or
                                                     len(acked) + len(errors) >= RECORDS):
            # (every record answered already: on a quiet machine the
            # producer can finish before the election is seen)
            c.restart(victim)
            st["phase"] = 3

    p = Producer({"bootstrap.servers": c.bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5, "message.timeout.ms": 180000, "batch.num.messages": 2000,
                  "queue.buffering.max.messages": 20000, "topic.metadata.refresh.interval.ms": 1000})
    seqs = [0] * KEYS
    for i in range(RECORDS):
        k = i % KEYS
        while True:
            try:
                p.produce(TOPIC, key=b"k%04d" % k, value=b"k%04d:%d:" % (k, seqs[k]) + b"x" * 80,
                          on_delivery=dr)
                break
            except BufferError:
                p.poll(0.05)
                step()
        seqs[k] += 1
        if i % 1000 == 0:
            p.poll(0)
            step()
    while st["phase"] < 3 and time.monotonic() - t0 < 300:
        p.poll(0.1)
        step()
    left = p.flush(240)
    assert left == 0, "%d records still unanswered after 240 s" % left
    assert st["phase"] == 3, ("partition 0 never got a new leader after its leader's SIGKILL" if st["phase"] < 2 else
                              "the successor acknowledged %d records (%s of partition 0) since the election was "
                              "seen" % (len(acked) - st["acked_at_election"], "some" if "first" in st else "none")) + \
        " (phase %d, %d acknowledged, %d failed)" % (st["phase"], len(acked), len(errors))
    return acked, errors, st["first"] - st["killed"]


def read_all(bootstrap):
    """Every record of the topic, per partition, up to its high watermark."""
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "failover-check",
                     "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    ends = {}
    for part in range(NPARTS):
        lo, hi = cons.get_watermark_offsets(TopicPartition(TOPIC, part), timeout=30)
        ends[part] = hi
    cons.assign([TopicPartition(TOPIC, part, 0) for part in range(NPARTS)])
    got = {part: [] for part in range(NPARTS)}
    done = {part for part in range(NPARTS) if ends[part] == 0}
    deadline = time.monotonic() + 180
    while len(done) < NPARTS:
        assert time.monotonic() < deadline, "reading back: %r of %r" % (
            {p: len(v) for p, v in got.items()}, ends)
        for m in cons.consume(2000, 1.0):
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                continue
            got[m.partition()].append((m.offset(), m.key().decode(), int(m.value().split(b":")[1])))
            if m.offset() + 1 >= ends[m.partition()]:
                done.add(m.partition())
    cons.close()
    return got


def sigterm_leaves_every_isr_and_its_lag_grows(c):
    """SIGTERM (a controlled shutdown) of a node that leads partitions: by
    the time it has exited it is in no ISR (its leaderships moved), long
    before replica.lag.time.max.ms (10 s here); acks=all records are
    answered at once without it; on the leaders its follower lag in ms grows
    while records arrive it does not have. Then it restarts and rejoins."""
    import signal
    import urllib.request
    ps = partitions(c.bootstrap, TOPIC)
    node = ps[1][0]                   # partition 1's leader
    pid = c.pid(node)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    while c.pid(node) is not None:
        assert time.monotonic() - t0 < 30, "node %d still runs 30 s after SIGTERM" % node
        time.sleep(0.05)
    exited = time.monotonic() - t0
    rest = [n for n in (1, 2, 3) if n != node]
    boot = ",".join(c.addr(n) for n in rest)
    ps = partitions(boot, TOPIC)
    assert all(node not in isr and lead in rest for lead, _r, isr in ps.values()), (
        "node %d in an ISR or leading right after its controlled shutdown (%.2f s): %r" % (node, exited, ps))
    p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 5, "message.timeout.ms": 30000})
    t1 = time.monotonic()
    for i in range(NPARTS * 50):
        p.produce(TOPIC, partition=i % NPARTS, key=b"sigterm", value=b"sigterm:%d:" % i)   # read_all's form
    assert p.flush(30) == 0
    acked = time.monotonic() - t1
    assert acked < 5, "acks=all without the stopped node took %.2f s" % acked

    def lag_ms(n, part):
        props = open(os.path.join(c.dir, "n%d" % n, "server.properties")).read()
        admin = [ln.split("=", 1)[1] for ln in props.splitlines() if ln.startswith("admin.listen=")][0]
        body = urllib.request.urlopen("http://%s/metrics" % admin, timeout=30).read().decode()
        key = 'sluice_partition_follower_lag_ms{topic="%s",partition="%d",' % (TOPIC, part)
        return [float(ln.rsplit(" ", 1)[1]) for ln in body.splitlines() if ln.startswith(key)][0]
    start = below_the_log_start_while_away(c, node, boot)
    lead = ps[0][0]
    first = lag_ms(lead, 0)
    time.sleep(1)
    second = lag_ms(lead, 0)
    assert 0 < first < second, "partition 0's follower lag on its leader %d: %r then %r ms" % (lead, first, second)
    print("  node %d SIGTERMed: exited after %.2f s in no ISR; %d acks=all records answered in %.2f s; its "
          "follower lag on node %d %.0f then %.0f ms" % (node, exited, NPARTS * 50, acked, lead, first, second))
    c.restart(node)
    until("node %d back in every ISR" % node, lambda: all_in_sync(c.bootstrap, 3), timeout=120)
    until("node %d back in %s's ISR" % (node, LS_TOPIC),
          lambda: len(partitions(c.bootstrap, LS_TOPIC)[0][2]) == 3, timeout=60)
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": 30000})
    for i in range(50):
        p.produce(LS_TOPIC, partition=0, value=b"after:%d" % i)
    assert p.flush(30) == 0
    return node, start


LS_TOPIC = "logstart"


def first_offset(batch):
    return int.from_bytes(batch[0:8], "big")


def next_offset(batch):
    return first_offset(batch) + int.from_bytes(batch[23:27], "big") + 1


def below_the_log_start_while_away(c, node, boot):
    """While node is stopped: 50 more acks=all records to LS_TOPIC (one
    partition on all three nodes, 50 written before the stop), then
    DeleteRecords on its leader up to the high watermark: the leader's log
    start is past node's log end. Returns that log start (node, restarted,
    must start its log there)."""
    p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 5, "message.timeout.ms": 30000})
    for i in range(50):
        p.produce(LS_TOPIC, partition=0, value=b"later:%d" % i)
    assert p.flush(30) == 0
    lead, low = delete_records(c, LS_TOPIC, bootstrap=boot)
    assert low >= 100, low
    mine = log_batches(os.path.join(c.data_dir(node), "%s-0" % LS_TOPIC))
    assert mine and next_offset(mine[-1]) < low, (
        "node %d's log of %s ends at %d, not below the leader's new log start %d" % (
            node, LS_TOPIC, next_offset(mine[-1]) if mine else -1, low))
    print("  %s: node %d's log ends at %d; DeleteRecords on node %d moved the log start to %d" % (
        LS_TOPIC, node, next_offset(mine[-1]), lead, low))
    return low


def same_from_the_log_start(c, node, start):
    """After the stop: node's copy of LS_TOPIC starts at the leader's log
    start and the three copies are the same batches from there."""
    copies = {n: log_batches(os.path.join(c.data_dir(n), "%s-0" % LS_TOPIC)) for n in (1, 2, 3)}
    mine = copies[node]
    assert mine and first_offset(mine[0]) == start, (
        "node %d's log of %s starts at %d, not at the leader's log start %d" % (
            node, LS_TOPIC, first_offset(mine[0]) if mine else -1, start))
    for n in (1, 2, 3):
        theirs = [b for b in copies[n] if first_offset(b) >= start]
        assert theirs == mine, "%s: node %d's batches from %d (%d) differ from node %d's (%d)" % (
            LS_TOPIC, n, start, len(theirs), node, len(mine))


@test
def an_acknowledged_record_survives_the_leaders_sigkill_exactly_once_and_the_copies_end_identical():
    sets = ["min.insync.replicas=2", "default.replication.factor=3", "replica.lag.time.max.ms=10000",
            "broker.session.timeout.ms=6000"]
    with Cluster(3, sets=sets) as c:
        create_topic(c.bootstrap, TOPIC, NPARTS, 3)
        create_topic(c.bootstrap, LS_TOPIC, 1, 3)
        until("every partition led with 3 in sync", lambda: all_in_sync(c.bootstrap, 3))
        until("%s led with 3 in sync" % LS_TOPIC, lambda: len(partitions(c.bootstrap, LS_TOPIC)[0][2]) == 3)
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5})
        for i in range(50):
            p.produce(LS_TOPIC, partition=0, value=b"before:%d" % i)
        assert p.flush(30) == 0
        victim = partitions(c.bootstrap, TOPIC)[0][0]
        acked, errors, failover = produce(c, victim, time.monotonic())
        print("  %d acknowledged, %d failed; node %d killed, partition 0's first write acknowledged by its "
              "successor %.2f s after the SIGKILL (broker.session.timeout.ms=6000); restarted" % (
                  len(acked), len(errors), victim, failover))
        until("the restarted node back in every ISR", lambda: all_in_sync(c.bootstrap, 3), timeout=120)
        stopped, start = sigterm_leaves_every_isr_and_its_lag_grows(c)

        got = read_all(c.bootstrap)
        seen = {}
        for part, recs in got.items():
            last = {}
            for off, key, seq in recs:
                assert (key, seq) not in seen, "record %s:%d read twice (partition %d offsets %d and %d)" % (
                    key, seq, part, seen[(key, seq)][1], off)
                seen[(key, seq)] = (part, off)
                assert last.get(key, -1) < seq, "key %s out of order in partition %d: %d after %d" % (
                    key, part, seq, last[key])
                last[key] = seq
        lost = [ks for ks in acked if ks not in seen]
        assert not lost, "%d acknowledged records lost, e.g. %r" % (len(lost), lost[:5])
        moved = [(ks, acked[ks], seen[ks]) for ks in acked if acked[ks] != seen[ks]]
        assert not moved, "acknowledged at one offset, read at another: %r" % moved[:5]

        c.stop()
        for part in range(NPARTS):
            copies = [log_batches(os.path.join(c.data_dir(n), "%s-%d" % (TOPIC, part))) for n in (1, 2, 3)]
            for n in (2, 3):
                assert copies[n - 1] == copies[0], (
                    "partition %d: node %d's log (%d batches) differs from node 1's (%d batches)" % (
                        part, n, len(copies[n - 1]), len(copies[0])))
            total = sum(len(b) for b in copies[0])
            assert total > 0, "partition %d is empty" % part
            end = next_offset(copies[0][-1])
            for n in (1, 2, 3):
                # the high-watermark checkpoint each replica wrote (at the latest at its clean stop)
                with open(os.path.join(c.data_dir(n), "%s-%d" % (TOPIC, part), "high-watermark")) as f:
                    line = f.read()
                assert line.startswith("sluice-hw 1 ") and 0 < int(line.split()[2]) <= end, (
                    "partition %d on node %d: high-watermark %r, log end %d" % (part, n, line, end))
        same_from_the_log_start(c, stopped, start)


@test
def a_node_left_without_a_quorum_stops_without_waiting_out_its_controlled_shutdown():
    """Two of three voters SIGKILLed: the third is in every ISR with them
    (their sessions have not ended), and its controlled shutdown would wait
    for moves that need an active controller, which no majority is left to
    elect. It stops waiting once no quorum leader has been known for 2 s,
    not after its 5 s bound (the last node of every whole-cluster stop
    waited those 5 s). Without the cut-off its log says "stopped waiting
    after 5000 ms"."""
    import signal
    with Cluster(3, sets=["default.replication.factor=3"]) as c:
        create_topic(c.bootstrap, "alone", 3, 3)
        until("alone led with 3 in sync", lambda: all(
            len(isr) == 3 for _l, _r, isr in partitions(c.bootstrap, "alone").values()))
        c.kill(1)
        c.kill(2)
        pid = c.pid(3)
        t0 = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        while c.pid(3) is not None:
            assert time.monotonic() - t0 < 30, "node 3 still runs 30 s after SIGTERM"
            time.sleep(0.05)
        took = time.monotonic() - t0
        log = c.log(3)
        assert "controlled shutdown: no metadata quorum leader for 2000 ms" in log, log[-3000:]
        assert "stopped waiting after" not in log, log[-3000:]
        assert "stopped cleanly" in log, log[-3000:]
        print("  node 3 alone after SIGKILL of nodes 1 and 2: SIGTERM to exit %.2f s" % took)


if __name__ == "__main__":
    main("test_cluster_failover")
