#!/usr/bin/python3
"""Leader epochs against a real sluiced (docs/leader-epochs.md): raw frames
for what the test clients never send (librdkafka 2.0.2, kafkajs 2.2.4 and
kafka-python 2.0.2 predate KIP-320 or leave it out): OffsetForLeaderEpoch
v0-4, Fetch v9-12 with a current leader epoch and a last fetched epoch,
ListOffsets v4, Metadata v7; then a librdkafka consumer (confluent-kafka)
through a topic whose partition's epoch moved.

How an epoch moves on one node, as Kafka's controller moves it: a broker's
start (a new registration) gives every partition it leads a new leader
epoch (a BROKER_RESTARTED record; alone in the ISR, it keeps leading); a partition CreatePartitions adds starts
at epoch 0. So "e" has partition 0 at epoch 0 with offsets 0-5, then
(after CreatePartitions and a restart) partition 0 at epoch 1 from offset
6 on, and partition 1 at epoch 1."""

import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import broker, main, test  # noqa: E402
from kraw import R, W, compact_str, read_compact_str, read_uvarint, uvarint  # noqa: E402
from ktxn import READ_UNCOMMITTED, TConn, batch, new_topic, parse_batches  # noqa: E402

FETCH, LIST_OFFSETS, METADATA, OFFSET_FOR_LEADER_EPOCH, CREATE_PARTITIONS = 1, 2, 3, 23, 37
NONE, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_OR_PARTITION = 0, 1, 3
FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH = 74, 75
LATEST, EARLIEST = -1, -2


def create_partitions(c, topic, count):
    w = W().array([topic], lambda w, t: w.str(t).i32(count).i32(-1)).i32(30000).i8(0)
    r = c.request(CREATE_PARTITIONS, 0, w)
    r.i32()
    res = r.array(lambda r: (r.str(), r.i16(), r.str()))
    assert res[0][1] == 0, res


def produce(c, topic, partition, n, tag):
    r = c.produce(topic, partition, batch([b"%s-%d" % (tag, i) for i in range(n)]))
    assert r.error == 0, r
    return r.base


def moved(b):
    """The topic "e" of the module docstring; returns the connection."""
    c = TConn(b.bootstrap)
    new_topic(c, "e")
    for k in range(3):
        produce(c, "e", 0, 2, b"a%d" % k)       # offsets 0-5 at epoch 0
    create_partitions(c, "e", 2)
    c.close()
    b.restart()
    c = TConn(b.bootstrap)
    produce(c, "e", 0, 4, b"b")                 # 6-9 at epoch 1
    produce(c, "e", 1, 3, b"c")                 # partition 1: 0-2 at epoch 1
    return c


# ---- OffsetForLeaderEpoch ---------------------------------------------------

def ofle(c, ver, parts, current=-1, replica=-1):
    """parts: [(topic, partition, epoch)]; returns {(topic, partition): (error,
    leader_epoch or None before v1, end_offset)}"""
    by = {}
    for t, p, e in parts:
        by.setdefault(t, []).append((p, e))
    topics = sorted(by.items())
    if ver >= 4:
        body = bytearray(struct.pack(">i", replica)) + uvarint(len(topics) + 1)
        for t, ps in topics:
            body += compact_str(t) + uvarint(len(ps) + 1)
            for p, e in ps:
                body += struct.pack(">iii", p, current, e) + b"\x00"
            body += b"\x00"
        body += b"\x00"
        r = c.request_flex(OFFSET_FOR_LEADER_EPOCH, ver, body)
        r.i32()
        out = {}
        for _ in range(read_uvarint(r) - 1):
            t = read_compact_str(r)
            for _ in range(read_uvarint(r) - 1):
                err, p, le, end = r.i16(), r.i32(), r.i32(), r.i64()
                assert read_uvarint(r) == 0
                out[(t, p)] = (err, le, end)
            assert read_uvarint(r) == 0
        assert read_uvarint(r) == 0
        r.done()
        return out
    w = W()
    if ver >= 3:
        w.i32(replica)

    def part(w, pe):
        w.i32(pe[0])
        if ver >= 2:
            w.i32(current)
        w.i32(pe[1])
    w.array(topics, lambda w, tv: w.str(tv[0]).array(tv[1], part))
    r = c.request(OFFSET_FOR_LEADER_EPOCH, ver, w)
    if ver >= 2:
        r.i32()

    def presp(r):
        err, p = r.i16(), r.i32()
        le = r.i32() if ver >= 1 else None
        return p, (err, le, r.i64())
    out = {}
    for t, ps in r.array(lambda r: (r.str(), r.array(presp))):
        for p, v in ps:
            out[(t, p)] = v
    r.done()
    return out


@test
def api_versions_advertise_the_epoch_apis():
    """OffsetForLeaderEpoch 0-4, Fetch 4-15, ListOffsets 1-4, Metadata 0-12."""
    with broker() as b, TConn(b.bootstrap) as c:
        apis = c.api_versions().apis
        assert apis[OFFSET_FOR_LEADER_EPOCH] == (0, 4), apis.get(OFFSET_FOR_LEADER_EPOCH)
        assert apis[FETCH] == (4, 15), apis[FETCH]
        assert apis[LIST_OFFSETS] == (1, 4), apis[LIST_OFFSETS]
        assert apis[METADATA] == (0, 12), apis[METADATA]


@test
def offset_for_leader_epoch_answers_kafkas_end_offsets():
    """Every version: epoch 0 ends where epoch 1 began (6), the latest epoch
    ends at the log end (10), an epoch above every one is -1/-1 with no
    error, one below the first is answered with the first's start; a
    partition the topic lacks: UNKNOWN_TOPIC_OR_PARTITION."""
    with broker() as b:
        c = moved(b)
        for ver in range(5):
            got = ofle(c, ver, [("e", 0, 0), ("e", 1, 1), ("nope", 0, 0), ("e", 7, 0)])
            le = (lambda e: e) if ver >= 1 else (lambda e: None)
            assert got[("e", 0)] == (NONE, le(0), 6), (ver, got)
            assert got[("e", 1)] == (NONE, le(1), 3), (ver, got)
            assert got[("nope", 0)][0] == UNKNOWN_TOPIC_OR_PARTITION, (ver, got)
            assert got[("e", 7)][0] == UNKNOWN_TOPIC_OR_PARTITION, (ver, got)
            assert ofle(c, ver, [("e", 0, 1)])[("e", 0)] == (NONE, le(1), 10), ver
            assert ofle(c, ver, [("e", 0, 2)])[("e", 0)] == (NONE, le(-1), -1), ver
            assert ofle(c, ver, [("e", 1, 0)])[("e", 1)] == (NONE, le(0), 0), ver
        c.close()


@test
def offset_for_leader_epoch_checks_the_current_epoch():
    """v2+: the client's current leader epoch: older FENCED_LEADER_EPOCH (74),
    newer UNKNOWN_LEADER_EPOCH (75), -1 or equal: answered."""
    with broker() as b:
        c = moved(b)
        for ver in (2, 3, 4):
            assert ofle(c, ver, [("e", 0, 0)], current=0)[("e", 0)][0] == FENCED_LEADER_EPOCH, ver
            assert ofle(c, ver, [("e", 0, 0)], current=2)[("e", 0)][0] == UNKNOWN_LEADER_EPOCH, ver
            assert ofle(c, ver, [("e", 0, 0)], current=1)[("e", 0)] == (NONE, 0, 6), ver
            assert ofle(c, ver, [("e", 0, 0)], current=-1)[("e", 0)] == (NONE, 0, 6), ver
        c.close()


# ---- Metadata v7 ------------------------------------------------------------

def metadata_epochs(c, topic, ver=7):
    w = W().array([topic], W.str).i8(0)
    r = c.request(METADATA, ver, w)
    r.i32()
    r.array(lambda r: (r.i32(), r.str(), r.i32(), r.str()))
    r.str()
    r.i32()

    def part(r):
        err, idx, _leader, epoch = r.i16(), r.i32(), r.i32(), r.i32()
        r.array(R.i32)
        r.array(R.i32)
        r.array(R.i32)
        return idx, (err, epoch)
    topics = r.array(lambda r: (r.i16(), r.str(), r.i8(), r.array(part)))
    r.done()
    assert topics[0][0] == 0, topics
    return dict(topics[0][3])


@test
def metadata_v7_carries_each_partitions_epoch():
    """Partition 0 at 0 before CreatePartitions, the new partition 1 at 0
    (Kafka's), both at 1 once the broker restarted (a new leader epoch for
    every partition a restarted broker leads)."""
    with broker() as b:
        c = TConn(b.bootstrap)
        new_topic(c, "e")
        assert metadata_epochs(c, "e") == {0: (0, 0)}
        create_partitions(c, "e", 2)
        assert metadata_epochs(c, "e") == {0: (0, 0), 1: (0, 0)}
        c.close()
        b.restart()
        with TConn(b.bootstrap) as c:
            assert metadata_epochs(c, "e") == {0: (0, 1), 1: (0, 1)}
            # and it is the epoch the partition checks against (KIP-320)
            assert ofle(c, 2, [("e", 0, 1)], current=1)[("e", 0)][0] == NONE


# ---- Fetch -----------------------------------------------------------------

def fetch(c, ver, topic, partition, offset, current=-1, last_fetched=-1, max_wait_ms=0):
    """One partition; returns NS-like dict: error, hw, diverging (epoch,
    end) or None, batches."""
    if ver < 12:
        w = W().i32(-1).i32(max_wait_ms).i32(1).i32(1 << 20).i8(READ_UNCOMMITTED).i32(0).i32(-1)
        def part(w, p):
            w.i32(p)
            if ver >= 9:
                w.i32(current)
            w.i64(offset).i64(-1).i32(1 << 20)
        w.array([topic], lambda w, t: w.str(t).array([partition], part))
        w.array([], None)
        if ver >= 11:
            w.str("")
        r = c.request(FETCH, ver, w)
        r.i32()
        assert r.i16() == 0
        r.i32()
        out = []

        def pdata(r):
            d = dict(index=r.i32(), error=r.i16(), hw=r.i64(), lso=r.i64(), log_start=r.i64())
            d["aborted"] = r.array(lambda r: (r.i64(), r.i64()))
            if ver >= 11:
                r.i32()
            d["diverging"] = None
            d["batches"] = parse_batches(r.bytes())
            return d
        for _t, ps in r.array(lambda r: (r.str(), r.array(pdata))):
            out += ps
        r.done()
        return out[0]
    body = bytearray(struct.pack(">iiiibii", -1, max_wait_ms, 1, 1 << 20, READ_UNCOMMITTED, 0, -1))
    body += uvarint(2) + compact_str(topic) + uvarint(2)
    body += struct.pack(">iiqiqi", partition, current, offset, last_fetched, -1, 1 << 20) + b"\x00"
    body += b"\x00"                    # topic tags
    body += uvarint(1)                 # no forgotten topics
    body += compact_str("")            # rack
    body += b"\x00"
    r = c.request_flex(FETCH, ver, body)
    r.i32()
    assert r.i16() == 0
    r.i32()
    parts = []
    for _ in range(read_uvarint(r) - 1):
        read_compact_str(r)
        for _ in range(read_uvarint(r) - 1):
            d = dict(index=r.i32(), error=r.i16(), hw=r.i64(), lso=r.i64(), log_start=r.i64())
            n = read_uvarint(r) - 1
            d["aborted"] = [(r.i64(), r.i64(), read_uvarint(r)) for _ in range(max(n, 0))]
            r.i32()
            n = read_uvarint(r) - 1
            blob = r.b[r.o:r.o + n] if n >= 0 else None
            r.o += max(n, 0)
            d["batches"] = parse_batches(blob)
            d["diverging"] = None
            for _ in range(read_uvarint(r)):
                tag, size = read_uvarint(r), read_uvarint(r)
                if tag == 0:
                    d["diverging"] = (r.i32(), r.i64())
                    assert read_uvarint(r) == 0
                else:
                    r.o += size
            parts.append(d)
        assert read_uvarint(r) == 0
    assert read_uvarint(r) == 0
    r.done()
    return parts[0]


def offsets_of(d):
    return [rec.offset for bt in d["batches"] for rec in bt.records]


@test
def fetch_checks_the_current_leader_epoch():
    """Fetch v9-12: an older current leader epoch FENCED_LEADER_EPOCH (74), a
    newer one UNKNOWN_LEADER_EPOCH (75), with no records and -1 watermarks
    (at once, even with a long max wait); the partition's own or -1: records.
    Before v9 there is no epoch to check."""
    with broker() as b:
        c = moved(b)
        for ver in (9, 10, 11, 12):
            t0 = time.monotonic()
            d = fetch(c, ver, "e", 0, 0, current=0, max_wait_ms=5000)
            assert d["error"] == FENCED_LEADER_EPOCH and d["batches"] == [] and d["hw"] == -1, (ver, d)
            assert time.monotonic() - t0 < 2.5, "waited out max_wait_ms"
            d = fetch(c, ver, "e", 0, 0, current=2)
            assert d["error"] == UNKNOWN_LEADER_EPOCH and d["batches"] == [], (ver, d)
            for cur in (1, -1):
                d = fetch(c, ver, "e", 0, 0, current=cur)
                assert d["error"] == NONE and offsets_of(d) == list(range(10)), (ver, cur, d)
        d = fetch(c, 8, "e", 0, 0)                 # v8 carries no epoch to check
        assert d["error"] == NONE and offsets_of(d) == list(range(10)), d
        c.close()


@test
def fetch_v12_answers_a_diverging_epoch():
    """Fetch v12 with the epoch of the fetcher's last batch: its log diverges
    from this one when that epoch ended here before the fetch offset (a
    follower that kept epoch-0 records past 6): DivergingEpoch (0, 6), no
    records, no error, at once. At the epoch's end, or in the latest epoch:
    records as usual. An epoch this log never had above its latest:
    OFFSET_OUT_OF_RANGE."""
    with broker() as b:
        c = moved(b)
        t0 = time.monotonic()
        d = fetch(c, 12, "e", 0, 8, last_fetched=0, max_wait_ms=5000)
        assert d["error"] == NONE and d["diverging"] == (0, 6) and d["batches"] == [], d
        assert d["hw"] == 10, d
        assert time.monotonic() - t0 < 2.5, "waited out max_wait_ms"
        d = fetch(c, 12, "e", 0, 6, last_fetched=0)
        assert d["diverging"] is None and offsets_of(d) == [6, 7, 8, 9], d
        d = fetch(c, 12, "e", 0, 8, last_fetched=1)   # (the batch holding 8 is 6-9)
        assert d["diverging"] is None and offsets_of(d) == [6, 7, 8, 9], d
        d = fetch(c, 12, "e", 0, 0)
        assert d["diverging"] is None and offsets_of(d) == list(range(10)), d
        d = fetch(c, 12, "e", 0, 8, last_fetched=3)
        assert d["error"] == OFFSET_OUT_OF_RANGE and d["batches"] == [], d
        # fenced first: the epoch check comes before the divergence
        d = fetch(c, 12, "e", 0, 8, current=0, last_fetched=0)
        assert d["error"] == FENCED_LEADER_EPOCH and d["diverging"] is None, d
        c.close()


# ---- ListOffsets v4 ------------------------------------------------------------

def list_offsets4(c, topic, partition, ts, current=-1):
    w = W().i32(-1).i8(READ_UNCOMMITTED)
    w.array([topic], lambda w, t: w.str(t).array([partition], lambda w, p: w.i32(p).i32(current).i64(ts)))
    r = c.request(LIST_OFFSETS, 4, w)
    r.i32()
    res = r.array(lambda r: (r.str(), r.array(lambda r: (r.i32(), r.i16(), r.i64(), r.i64(), r.i32()))))
    r.done()
    _p, err, _ts, off, epoch = res[0][1][0]
    return err, off, epoch


@test
def list_offsets_v4_checks_and_answers_the_epoch():
    """ListOffsets v4: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH against the
    current leader epoch; the latest offset with the partition's epoch, the
    earliest and one found by time with the epoch that wrote it."""
    with broker() as b:
        c = moved(b)
        assert list_offsets4(c, "e", 0, LATEST, current=0)[0] == FENCED_LEADER_EPOCH
        assert list_offsets4(c, "e", 0, LATEST, current=2)[0] == UNKNOWN_LEADER_EPOCH
        assert list_offsets4(c, "e", 0, LATEST, current=1) == (NONE, 10, 1)
        assert list_offsets4(c, "e", 0, LATEST) == (NONE, 10, 1)
        assert list_offsets4(c, "e", 0, EARLIEST) == (NONE, 0, 0)
        assert list_offsets4(c, "e", 0, 0) == (NONE, 0, 0)       # by time: the first record
        c.close()


# ---- the checkpoint file ------------------------------------------------------

def file_soon(path, want=None, timeout=10):
    """The file's text once it exists (and, with want, once it says that:
    the file is saved on the shard's ring after the append, and an open
    may save it twice, rebuilt and then with the new epoch), or the last
    text read when the time is up."""
    deadline = time.monotonic() + timeout
    text = None
    while True:
        try:
            with open(path) as f:
                text = f.read()
            if want is None or text == want:
                return text
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            if text is None:
                raise FileNotFoundError(path)
            return text
        time.sleep(0.05)


@test
def the_epochs_are_kept_in_leader_epoch_checkpoint():
    """Kafka's text format in the partition directory; deleted, it is rebuilt
    from the batches on the next start, and the start says so. That start
    is the broker's third: its new leader epoch (2) begins at the log end
    (10), as Kafka's new leader assigns its epoch at its log end offset."""
    with broker() as b:
        moved(b).close()
        path = os.path.join(b.data_dir, "e-0", "leader-epoch-checkpoint")
        assert file_soon(path, "0\n2\n0 0\n1 6\n") == "0\n2\n0 0\n1 6\n"
        # (written on the shard's ring after the append, not before its answer)
        assert file_soon(os.path.join(b.data_dir, "e-1", "leader-epoch-checkpoint"), "0\n1\n1 0\n") == "0\n1\n1 0\n"
        b.stop()
        os.unlink(path)
        b.start()
        with open(b.log_path, "rb") as f:
            log = f.read().decode()
        assert "leader-epoch-checkpoint missing: rebuilt from 4 batches" in log, log
        assert file_soon(path, "0\n3\n0 0\n1 6\n2 10\n") == "0\n3\n0 0\n1 6\n2 10\n"
        with TConn(b.bootstrap) as c:
            assert ofle(c, 2, [("e", 0, 0)])[("e", 0)] == (NONE, 0, 6)


# ---- a log ahead of the metadata log -------------------------------------------

INCREMENTAL_ALTER_CONFIGS, TOPIC_RESOURCE, BROKER_RESOURCE = 44, 2, 4


def incremental_set(c, rtype, name, key, value):
    """IncrementalAlterConfigs v0, one SET; asserts it was done."""
    w = W().array([0], lambda w, _: w.i8(rtype).str(name).array(
        [0], lambda w, _: w.str(key).i8(0).str(value))).i8(0)
    r = c.request(INCREMENTAL_ALTER_CONFIGS, 0, w)
    r.i32()
    res = r.array(lambda r: (r.i16(), r.str(), r.i8(), r.str()))
    assert res[0][0] == 0, res


@test
def a_log_epoch_above_the_metadata_logs_survives_every_rebuild():
    """A partition whose log holds a later leader epoch (5, its
    leader-epoch-checkpoint) than the metadata log (1, after a restart)
    runs at 5, and Metadata says 5; still 5 after the topic's entry is
    rebuilt by a config change of the topic, one of the cluster-wide
    defaults, and CreatePartitions (each entry is built from the image and
    the control thread's book, docs/cluster.md). One that said the image's
    1 would send a client to the partition at an epoch it refuses
    (FENCED_LEADER_EPOCH)."""
    with broker() as b:
        c = TConn(b.bootstrap)
        new_topic(c, "h")
        produce(c, "h", 0, 2, b"a")
        produce(c, "h", 0, 2, b"b")             # offsets 0-3 at epoch 0
        c.close()
        path = os.path.join(b.data_dir, "h-0", "leader-epoch-checkpoint")
        assert file_soon(path, "0\n1\n0 0\n") == "0\n1\n0 0\n"
        b.stop()
        with open(path, "w") as f:
            f.write("0\n2\n0 0\n5 2\n")     # epoch 5 from offset 2 on
        b.start()
        with TConn(b.bootstrap) as c:
            assert metadata_epochs(c, "h") == {0: (0, 5)}
            assert ofle(c, 2, [("h", 0, 5)], current=5)[("h", 0)] == (NONE, 5, 4)
            assert ofle(c, 2, [("h", 0, 5)], current=1)[("h", 0)][0] == FENCED_LEADER_EPOCH
            incremental_set(c, TOPIC_RESOURCE, "h", "retention.ms", "86400000")
            assert metadata_epochs(c, "h") == {0: (0, 5)}, "after the topic's config change"
            incremental_set(c, BROKER_RESOURCE, "", "log.retention.ms", "172800000")
            assert metadata_epochs(c, "h") == {0: (0, 5)}, "after the cluster-wide default's change"
            create_partitions(c, "h", 2)
            assert metadata_epochs(c, "h")[0] == (0, 5), "after CreatePartitions"
            assert ofle(c, 2, [("h", 0, 5)], current=5)[("h", 0)] == (NONE, 5, 4)


# ---- a real consumer -----------------------------------------------------------

@test
def librdkafka_consumes_through_an_epoch_change():
    """confluent-kafka (librdkafka 2.0.2) in a group: everything produced
    before and after partition 0's epoch moved, in order per partition, and
    its committed positions survive the move."""
    from confluent_kafka import Consumer, Producer

    def consume(bs, group, want):
        got = {}
        cons = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
        cons.subscribe(["e"])
        deadline = time.monotonic() + 60
        n = 0
        while n < want and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is None or m.error():
                continue
            got.setdefault(m.partition(), []).append((m.offset(), m.value()))
            n += 1
        cons.commit(asynchronous=False)
        cons.close()
        return got

    with broker() as b:
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        for i in range(20):
            p.produce("e", b"x%d" % i, partition=0)
        p.flush(30)
        got = consume(b.bootstrap, "g", 20)
        assert [o for o, _ in got[0]] == list(range(20)), got
        with TConn(b.bootstrap) as c:
            create_partitions(c, "e", 2)
        b.restart()
        with TConn(b.bootstrap) as c:
            assert metadata_epochs(c, "e") == {0: (0, 1), 1: (0, 1)}
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        for i in range(20, 30):
            p.produce("e", b"x%d" % i, partition=0)
            p.produce("e", b"y%d" % i, partition=1)
        p.flush(30)
        got = consume(b.bootstrap, "g", 20)        # from the committed positions on
        assert [(o, v) for o, v in got[0]] == [(20 + i, b"x%d" % (20 + i)) for i in range(10)], got
        assert [v for _, v in got[1]] == [b"y%d" % i for i in range(20, 30)], got
        got = consume(b.bootstrap, "fresh", 40)    # a new group: everything
        assert [o for o, _ in got[0]] == list(range(30)) and len(got[1]) == 10, got
        with TConn(b.bootstrap) as c:
            assert ofle(c, 2, [("e", 0, 0)], current=1)[("e", 0)] == (NONE, 0, 20)


if __name__ == "__main__":
    main("leader-epochs")
