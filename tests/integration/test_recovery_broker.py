#!/usr/bin/python3
"""Recovery with a real broker and a real client (confluent-kafka), issue 17
items 2 and 3: clean-stop checkpoints, recovery points after a SIGKILL,
damage in the middle of a partition, a missing segment file and a damaged
metadata log.

Each test produces 3,000 acknowledged records (acks=all) into one partition
with 16 KiB segments, so the log has many sealed segments, then stops the
broker (SIGTERM or SIGKILL), does something to the data directory and
starts it again. What recovery read is taken from the broker's one-line
start-up summary:

    sluiced: recovery: P partitions, S segments, T taken from checkpoints
             unread (B bytes), N bytes scanned, D damaged ranges moved aside

Run: /usr/bin/python3 tests/integration/test_recovery_broker.py [test ...]
"""

import glob
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Broker, BrokerError, broker, main, test  # noqa: E402

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

TOPIC = "rec"
N = 3000
SEG = 16384
SUMMARY_RE = re.compile(r"sluiced: recovery: (\d+) partitions, (\d+) segments, (\d+) taken from "
                        r"checkpoints unread \((\d+) bytes\), (\d+) bytes scanned, (\d+) damaged")


def create(b):
    a = AdminClient({"bootstrap.servers": b.bootstrap})
    fs = a.create_topics([NewTopic(TOPIC, 1, 1, config={"segment.bytes": str(SEG)})])
    for f in fs.values():
        f.result(60)


def produce(b, n, tag):
    """n records, acks=all; returns the acknowledged offsets."""
    p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 2,
                  "batch.num.messages": 20, "enable.idempotence": False})
    acked, errs = [], []

    def cb(err, msg):
        if err:
            errs.append(err)
        else:
            acked.append(msg.offset())
    for i in range(n):
        p.produce(TOPIC, value=("%s-%d-" % (tag, i)).encode() + b"x" * 200, on_delivery=cb)
        if i % 200 == 0:
            p.poll(0)
    assert p.flush(60) == 0, "unflushed records"
    assert not errs, "delivery errors: %r" % errs[:3]
    assert len(acked) == n
    return acked


def consume_all(b):
    """Every record of the partition from the start: {offset: value}."""
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g-rec", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "enable.partition.eof": True})
    lo, hi = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)
    c.assign([TopicPartition(TOPIC, 0, lo)])
    got = {}
    try:
        while True:
            m = c.poll(10)
            assert m is not None, "consume stalled at %d of [%d, %d)" % (len(got), lo, hi)
            if m.error():
                if m.error().code() == -191:   # _PARTITION_EOF
                    if not got or max(got) + 1 >= hi:
                        break
                    continue
                raise KafkaException(m.error())
            got[m.offset()] = m.value()
    finally:
        c.close()
    return got, hi


def summary(b):
    with open(b.log_path, "r", errors="replace") as f:
        text = f.read()
    m = SUMMARY_RE.search(text)
    assert m, "no recovery summary line in the log:\n" + b.log_tail()
    return dict(zip(("parts", "segments", "trusted", "trusted_bytes", "scanned", "damaged"),
                    map(int, m.groups()))), text


def part_dir(b):
    return os.path.join(b.data_dir, TOPIC + "-0")


def segments(b):
    return sorted(glob.glob(os.path.join(part_dir(b), "*.log")))


@test
def clean_stop_checkpoints_every_segment():
    """(a) After SIGTERM every sealed segment has its index and the log has
    its checkpoint; the next start scans nothing of it."""
    with broker() as b:
        create(b)
        acked = produce(b, N, "a")
        b.stop()
        segs = segments(b)
        assert len(segs) >= 8, "only %d segments" % len(segs)
        missing = [os.path.basename(s) for s in segs
                   if not os.path.exists(s[:-4] + ".index")]
        assert not missing, "no index after a clean stop: %s" % missing[:5]
        assert os.path.exists(os.path.join(part_dir(b), "recovery-checkpoint")), "no checkpoint"
        b.start()
        s, _ = summary(b)
        assert s["scanned"] == 0, "a clean stop re-scanned %d bytes: %r" % (s["scanned"], s)
        assert s["trusted"] >= len(segs), s
        got, hi = consume_all(b)
        assert hi == max(acked) + 1 and len(got) == N


@test
def clean_stop_checkpoints_many_partitions_side_by_side():
    """(a) with many partitions on both shards: a shard's stop asks every
    log's checkpoint at once and then waits for them all (their saves run
    side by side), and each close finds its own in place. After SIGTERM
    every partition written is taken from its checkpoint unread, nothing is
    scanned, and every record is there."""
    n = 400
    with broker() as b:
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        a.create_topics([NewTopic("many", n, 1)], operation_timeout=120)["many"].result(120)
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 20,
                      "enable.idempotence": False})
        for i in range(n):
            for k in range(3):
                p.produce("many", value=b"m-%d-%d" % (i, k), partition=i)
            p.poll(0)
        assert p.flush(60) == 0, "unflushed records"
        b.stop()
        missing = [i for i in range(n)
                   if not os.path.exists(os.path.join(b.data_dir, "many-%d" % i, "recovery-checkpoint"))]
        assert not missing, "no recovery-checkpoint after a clean stop: partitions %s" % missing[:10]
        b.start()
        s, _ = summary(b)
        assert s["scanned"] == 0, "a clean stop re-scanned %d bytes: %r" % (s["scanned"], s)
        assert s["trusted"] >= n, s
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "many-check",
                      "enable.auto.commit": False})
        try:
            for i in (0, n // 2, n - 1):
                lo, hi = c.get_watermark_offsets(TopicPartition("many", i), timeout=30)
                assert (lo, hi) == (0, 3), (i, lo, hi)
        finally:
            c.close()


@test
def sigkill_scans_only_after_the_recovery_point():
    """(b) After a SIGKILL the sealed segments come from their indexes and
    only the active segment (after the recovery point) is read."""
    with broker() as b:
        create(b)
        acked = produce(b, N, "b")
        b.kill()
        segs = segments(b)
        active = os.path.getsize(segs[-1])   # preallocated: an upper bound of its data
        b.start()
        s, _ = summary(b)
        assert s["trusted"] >= len(segs) - 1, s
        assert s["scanned"] <= active, "scanned %d bytes after SIGKILL; the active segment is %d: %r" % (
            s["scanned"], active, s)
        got, hi = consume_all(b)
        assert all(o in got for o in acked), "acknowledged records lost after SIGKILL"
        print("    %d segments; after SIGKILL: %d taken from checkpoints unread, %d bytes scanned" % (
            len(segs), s["trusted"], s["scanned"]))


@test
def sigkill_after_a_checkpoint_scans_nothing():
    """(b) The shard writes the recovery point on its retention tick
    (log.retention.check.interval.ms, here 200 ms): a SIGKILL after it, with
    nothing appended since, scans nothing at the next start."""
    with broker(settings={"log.retention.check.interval.ms": "200"}) as b:
        create(b)
        acked = produce(b, N, "k")
        ck = os.path.join(part_dir(b), "recovery-checkpoint")
        want = "sluice-checkpoint 1 hw %d" % (max(acked) + 1)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if os.path.exists(ck) and open(ck).read().strip() == want:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("no checkpoint %r within 30 s" % want)
        b.kill()
        b.start()
        s, _ = summary(b)
        assert s["scanned"] == 0, "scanned %d bytes after a checkpoint at the end: %r" % (s["scanned"], s)
        got, hi = consume_all(b)
        assert hi == max(acked) + 1


@test
def damage_in_a_middle_segment_keeps_the_rest():
    """(c) A 16-byte run flipped in the 5th segment (its index gone too, so
    recovery reads it): the later segments are kept and served, the damaged
    range is moved aside and reported with the file and offsets, and the
    next produce never gets an acknowledged offset."""
    with broker() as b:
        create(b)
        acked = produce(b, N, "c")
        b.stop()
        segs = segments(b)
        assert len(segs) >= 8
        victim = segs[4]
        if os.path.exists(victim[:-4] + ".index"):
            os.unlink(victim[:-4] + ".index")
        with open(victim, "r+b") as f:
            f.seek(6000)
            run = bytearray(f.read(16))
            f.seek(6000)
            f.write(bytes(x ^ 0xFF for x in run))
        b.start()
        assert len(segments(b)) == len(segs), "%d of %d segments were dropped" % (
            len(segs) - len(segments(b)), len(segs))
        got, hi = consume_all(b)
        assert hi == max(acked) + 1, "the log end fell from %d to %d" % (max(acked) + 1, hi)
        s, text = summary(b)
        name = os.path.basename(victim)
        assert s["damaged"] == 1, s
        line = [ln for ln in text.splitlines() if "DAMAGED" in ln]
        assert line and name in line[0] and "moved to %s.damaged" % name in line[0], text[-2000:]
        assert os.path.exists(victim + ".damaged")
        lost = [o for o in acked if o not in got]
        seg_base = [int(os.path.basename(x)[:20]) for x in segs]
        assert lost and min(lost) >= seg_base[4] and max(lost) < seg_base[5], \
            "lost %d records outside segment 5 [%d, %d)" % (len(lost), seg_base[4], seg_base[5])
        assert len(lost) < N // 4, "lost %d of %d" % (len(lost), N)
        for o in got:
            assert got[o].startswith(b"c-%d-" % o), "offset %d holds another record" % o
        again = produce(b, 10, "d")
        assert min(again) > max(acked), "offset %d handed out again (acknowledged up to %d)" % (
            min(again), max(acked))
        print("    damaged: %d of %d records lost, all in %s (segment 5 of %d); %s" % (
            len(lost), N, name, len(segs), line[0][-160:]))


@test
def missing_middle_segment_stops_the_broker():
    """(d) A deleted middle segment file: the broker exits non-zero naming
    the file and what to do, and deletes nothing."""
    with broker() as b:
        create(b)
        produce(b, N, "e")
        b.stop()
        segs = segments(b)
        os.unlink(segs[3])
        try:
            b.start()
        except BrokerError as e:
            msg = str(e)
        else:
            raise AssertionError("the broker started with a segment file missing")
        assert "exited" in msg and "exited 0" not in msg, msg
        assert os.path.basename(segs[3]) in msg and "Restore the file" in msg, msg
        assert all(os.path.exists(x) for x in segs if x != segs[3]), "recovery deleted segments"
        print("    " + [ln for ln in msg.splitlines() if "cannot be opened" in ln][0])


def raft_segments(md):
    """The metadata quorum's closed segments ("<first>-<last>"), by first index."""
    segs = [p for p in glob.glob(os.path.join(md, "*-*")) if re.match(r"^\d+-\d+$", os.path.basename(p))]
    return sorted(segs, key=lambda p: int(os.path.basename(p).split("-")[0]))


@test
def damaged_metadata_log_stops_the_broker():
    """(e) The metadata quorum's log (__cluster_metadata-raft) with a
    segment truncated to 100 bytes, with a damaged run in a sealed segment,
    or (after a SIGKILL) a damaged entry in the open segment, which libraft
    alone would drop as a torn write together with every record after it:
    the broker exits non-zero naming the directory and what to do, instead
    of starting ready with topics gone. Without the check of the last
    applied index (sluice-applied) the third case starts without the
    topic: shown by removing that file."""
    for kind in ("truncated", "damaged", "torn", "torn-unchecked"):
        with broker() as b:
            create(b)
            produce(b, 10, "f")
            md = os.path.join(b.data_dir, "__cluster_metadata-raft")
            if kind.startswith("torn"):
                b.kill()
                seg = os.path.join(md, "open-1")
                with open(seg, "rb") as f:
                    data = f.read(1 << 16)
                at = data.find(b"\x00\x03" + TOPIC.encode())
                assert at > 0, "the topic's record is not in %s" % seg
                with open(seg, "r+b") as f:
                    f.seek(at)
                    f.write(b"\xa5" * 4)
                if kind == "torn-unchecked":
                    os.unlink(os.path.join(md, "sluice-applied"))
                    b.start()
                    a = AdminClient({"bootstrap.servers": b.bootstrap})
                    topics = a.list_topics(timeout=30).topics
                    assert TOPIC not in topics, "the damaged record was read: the case proves nothing"
                    print("    without sluice-applied: started, topic %s gone (%d topics)" % (TOPIC, len(topics)))
                    continue
            else:
                b.stop()
                segs = raft_segments(md)
                assert segs, os.listdir(md)
                seg = max(segs, key=os.path.getsize)
                if kind == "truncated":
                    os.truncate(seg, 100)
                else:
                    with open(seg, "r+b") as f:
                        f.seek(150)
                        f.write(b"\xa5" * 16)
            try:
                b.start()
            except BrokerError as e:
                msg = str(e)
            else:
                raise AssertionError("%s metadata log: the broker started ready" % kind)
            assert "exited" in msg and "exited 0" not in msg, msg
            assert md in msg and "Restore" in msg, msg
            print("    " + [ln for ln in msg.splitlines() if "metadata log" in ln][0])


if __name__ == "__main__":
    main("recovery-broker")
