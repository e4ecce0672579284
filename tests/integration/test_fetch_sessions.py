#!/usr/bin/python3
"""Fetch v12-15 over raw sockets against a real sluiced (one shard, so that
every connection of a test reaches the same session cache): topics by id
(KIP-516: Fetch v13+, Metadata v10+), the follower's ReplicaState (v15,
KIP-903), and fetch sessions (KIP-227) as Kafka's FetchManager answers them:
a full fetch at epoch 0 makes a session, an incremental one answers only
the partitions that changed, ForgottenTopicsData drops partitions, a wrong
epoch is INVALID_FETCH_SESSION_EPOCH (71), an unknown session
FETCH_SESSION_ID_NOT_FOUND (70), a session made by v12 asked with v13
FETCH_SESSION_TOPIC_ID_ERROR (106), and a full cache answers SessionId 0;
and a fetch of more partitions than one sendmsg takes iovecs arrives
whole."""

import os
import struct
import sys
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import broker, free_port, main, test  # noqa: E402
from kraw import R, compact_str, read_compact_str, read_uvarint, uvarint  # noqa: E402
from ktxn import TConn, new_topic, parse_batches, plain  # noqa: E402
from types import SimpleNamespace as NS  # noqa: E402

FETCH, METADATA = 1, 3
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
INVALID_REQUEST = 42
FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
UNKNOWN_TOPIC_ID = 100
FETCH_SESSION_TOPIC_ID_ERROR = 106


def skip_tags(r):
    for _ in range(read_uvarint(r)):
        read_uvarint(r)
        r.o += read_uvarint(r)


def carray(items, fn):
    out = bytearray(uvarint(len(items) + 1))
    for it in items:
        out += fn(it)
    return bytes(out)


def read_carray(r, fn):
    n = read_uvarint(r) - 1
    return None if n < 0 else [fn(r) for _ in range(n)]


def topic_ids(c, names):
    """Metadata v12 by name: {name: 16-byte id}."""
    body = carray(names, lambda n: b"\x00" * 16 + compact_str(n) + b"\x00") + b"\x00\x00\x00"
    r = c.request_flex(METADATA, 12, body)
    return {t.name: t.id for t in metadata_topics(r)}


def metadata_topics(r):
    r.i32()
    read_carray(r, lambda r: (r.i32(), read_compact_str(r), r.i32(), read_compact_str(r), skip_tags(r)))
    read_compact_str(r)
    r.i32()

    def topic(r):
        err, name, tid, internal = r.i16(), read_compact_str(r), r.b[r.o:r.o + 16], None
        r.o += 16
        internal = r.i8()
        read_carray(r, lambda r: (r.i16(), r.i32(), r.i32(), r.i32(), read_carray(r, R.i32),
                                  read_carray(r, R.i32), read_carray(r, R.i32), skip_tags(r)))
        ops = r.i32()
        skip_tags(r)
        return NS(error=err, name=name, id=bytes(tid), internal=internal, ops=ops)
    return read_carray(r, topic)


def fetch(c, ver, topics, session=0, epoch=-1, forgotten=(), replica=-1, max_wait_ms=0, min_bytes=1):
    """A flexible Fetch (v12-15). topics: [(name or id, [(partition,
    offset)])]; forgotten: [(name or id, [partitions])]. The answer: error,
    session and {(name or id, partition): NS(error, hw, values)}."""
    key = (lambda t: compact_str(t)) if ver < 13 else (lambda t: t)
    body = bytearray()
    if ver < 15:
        body += struct.pack(">i", replica)
    body += struct.pack(">iiibii", max_wait_ms, min_bytes, 1 << 20, 0, session, epoch)
    body += carray(topics, lambda t: key(t[0]) + carray(
        t[1], lambda p: struct.pack(">iiqiqi", p[0], -1, p[1], -1, -1, 1 << 20) + b"\x00") + b"\x00")
    body += carray(forgotten, lambda t: key(t[0]) + carray(t[1], lambda p: struct.pack(">i", p)) + b"\x00")
    body += compact_str("")
    if ver >= 15 and replica >= 0:
        state = struct.pack(">iq", replica, 1) + b"\x00"
        body += uvarint(1) + uvarint(1) + uvarint(len(state)) + state
    else:
        body += b"\x00"
    r = c.request_flex(FETCH, ver, bytes(body))
    r.i32()
    err, sid = r.i16(), r.i32()
    parts = {}

    def topic(r):
        if ver < 13:
            name = read_compact_str(r)
        else:
            name = bytes(r.b[r.o:r.o + 16])
            r.o += 16

        def part(r):
            idx, perr, hw = r.i32(), r.i16(), r.i64()
            r.i64()
            r.i64()
            read_carray(r, lambda r: (r.i64(), r.i64(), skip_tags(r)))
            r.i32()
            n = read_uvarint(r) - 1
            blob = b"" if n < 0 else bytes(r.b[r.o:r.o + n])
            r.o += max(n, 0)
            skip_tags(r)
            vals = [x.value for bt in parse_batches(blob) for x in bt.records]
            parts[(name, idx)] = NS(error=perr, hw=hw, values=vals)
        read_carray(r, part)
        skip_tags(r)
    read_carray(r, topic)
    skip_tags(r)
    r.done()
    return NS(error=err, session=sid, parts=parts)


@test
def topics_by_id():
    """Metadata v12 gives each topic its id and finds a topic by id (an
    unknown id: UNKNOWN_TOPIC_ID with a null name; v11 by id:
    INVALID_REQUEST, as Kafka); Fetch v13 and v14 read
    a topic by its id, an unknown id is UNKNOWN_TOPIC_ID (100) for each of
    its partitions; v15's ReplicaState carries a follower's id (this node's
    only replica is itself: NOT_LEADER_OR_FOLLOWER, as to v12's ReplicaId),
    and no ReplicaState is a consumer. Then a session by topic id
    (sessions_by_topic_id)."""
    with broker(settings={"shards": 1}) as b, TConn(b.bootstrap) as c:
        new_topic(c, "t", 2)
        assert c.produce("t", 1, plain([b"a", b"b"])).error == 0
        ids = topic_ids(c, ["t"])
        tid = ids["t"]
        assert len(tid) == 16 and tid != b"\x00" * 16, ids
        body = carray([tid], lambda t: t + b"\x00" + b"\x00") + b"\x00\x00\x00"
        topics = metadata_topics(c.request_flex(METADATA, 12, body))
        assert [(t.error, t.name, t.id) for t in topics] == [(0, "t", tid)], topics
        other = uuid.uuid4().bytes
        body = carray([other], lambda t: t + b"\x00" + b"\x00") + b"\x00\x00\x00"
        topics = metadata_topics(c.request_flex(METADATA, 12, body))
        assert [(t.error, t.name, t.id) for t in topics] == [(UNKNOWN_TOPIC_ID, None, other)], topics
        # v10-11 define the id but Kafka takes it only from v12
        topics = metadata_topics(c.request_flex(METADATA, 11, body))
        assert [t.error for t in topics] == [INVALID_REQUEST], topics
        for ver in (13, 14, 15):
            f = fetch(c, ver, [(tid, [(1, 0), (0, 0)]), (other, [(0, 0)])])
            assert f.error == 0 and f.session == 0, f
            assert f.parts[(tid, 1)].values == [b"a", b"b"] and f.parts[(tid, 1)].hw == 2, f
            assert f.parts[(tid, 0)].error == 0 and f.parts[(tid, 0)].hw == 0, f
            assert f.parts[(other, 0)].error == UNKNOWN_TOPIC_ID, f
        f = fetch(c, 12, [("t", [(1, 1)]), ("nope", [(0, 0)])])
        assert f.parts[("t", 1)].error == 0 and b"b" in f.parts[("t", 1)].values, f
        assert f.parts[("nope", 0)].error == UNKNOWN_TOPIC_OR_PARTITION, f
        for ver in (12, 15):
            f = fetch(c, ver, [("t" if ver < 13 else tid, [(1, 0)])], replica=1)
            key = ("t" if ver < 13 else tid, 1)
            assert f.parts[key].error == NOT_LEADER_OR_FOLLOWER, (ver, f)
        sessions_by_topic_id(c)


@test
def sessions():
    """A full fetch at epoch 0 makes a session; the incremental fetches
    that follow answer only the partitions with records or news (a
    partition added, the high watermark moved), keep the offsets the client
    gave, and drop a forgotten partition; a wrong epoch is 71, an unknown
    session 70, a v12 session asked with v13 is 106; epoch -1 closes it."""
    with broker(settings={"shards": 1}) as b, TConn(b.bootstrap) as c:
        new_topic(c, "s", 3)
        for p in range(3):
            assert c.produce("s", p, plain([b"p%d" % p])).error == 0
        f = fetch(c, 12, [("s", [(0, 0), (1, 0)])], epoch=0)
        assert f.error == 0 and f.session > 0, f
        sid = f.session
        assert f.parts[("s", 0)].values == [b"p0"] and f.parts[("s", 1)].values == [b"p1"], f
        # nothing changed at the offsets given: no partition answered
        f = fetch(c, 12, [("s", [(0, 1), (1, 1)])], session=sid, epoch=1)
        assert f.error == 0 and f.session == sid and f.parts == {}, f
        # a record on partition 1 (its offset kept by the session); partition 2 added
        assert c.produce("s", 1, plain([b"q1"])).error == 0
        f = fetch(c, 12, [("s", [(2, 0)])], session=sid, epoch=2)
        assert f.error == 0 and sorted(f.parts) == [("s", 1), ("s", 2)], f
        assert f.parts[("s", 1)].values == [b"q1"] and f.parts[("s", 1)].hw == 2, f
        assert f.parts[("s", 2)].values == [b"p2"], f
        # partition 1 forgotten: its next record is not answered; partition 0's is
        assert c.produce("s", 1, plain([b"r1"])).error == 0
        assert c.produce("s", 0, plain([b"r0"])).error == 0
        f = fetch(c, 12, [("s", [(1, 2), (2, 1)])], session=sid, epoch=3, forgotten=[("s", [1])])
        assert f.error == 0 and sorted(f.parts) == [("s", 0)], f
        assert f.parts[("s", 0)].values == [b"r0"], f
        # the epoch already used, and one too far: 71, the session stays
        for ep in (3, 5):
            f = fetch(c, 12, [], session=sid, epoch=ep)
            assert f.error == INVALID_FETCH_SESSION_EPOCH and f.session == 0 and f.parts == {}, f
        f = fetch(c, 13, [], session=sid, epoch=4)
        assert f.error == FETCH_SESSION_TOPIC_ID_ERROR and f.session == 0, f
        f = fetch(c, 12, [("s", [(0, 2)])], session=sid, epoch=4)
        assert f.error == 0 and f.session == sid and f.parts == {}, f
        f = fetch(c, 12, [], session=sid + 1, epoch=1)
        assert f.error == FETCH_SESSION_ID_NOT_FOUND and f.session == 0, f
        # a full fetch naming the session closes it; epoch -1 makes none
        f = fetch(c, 12, [("s", [(0, 0)])], session=sid, epoch=-1)
        assert f.error == 0 and f.session == 0 and f.parts[("s", 0)].values == [b"p0", b"r0"], f
        f = fetch(c, 12, [], session=sid, epoch=5)
        assert f.error == FETCH_SESSION_ID_NOT_FOUND, f


def sessions_by_topic_id(c):
    """A v13 session keeps its partitions by topic id: the incremental
    fetch answers a new record by id; a v12 fetch on it is 106; forgetting
    its last partition closes it (SessionId 0, as Kafka)."""
    new_topic(c, "u", 1)
    tid = topic_ids(c, ["u"])["u"]
    f = fetch(c, 13, [(tid, [(0, 0)])], epoch=0)
    assert f.error == 0 and f.session > 0 and f.parts[(tid, 0)].values == [], f
    sid = f.session
    assert c.produce("u", 0, plain([b"v"])).error == 0
    f = fetch(c, 15, [], session=sid, epoch=1)
    assert f.error == 0 and f.session == sid and f.parts[(tid, 0)].values == [b"v"], f
    f = fetch(c, 12, [], session=sid, epoch=2)
    assert f.error == FETCH_SESSION_TOPIC_ID_ERROR, f
    f = fetch(c, 14, [], session=sid, epoch=2, forgotten=[(tid, [0])])
    assert f.error == 0 and f.session == 0 and f.parts == {}, f
    f = fetch(c, 14, [], session=sid, epoch=3)
    assert f.error == FETCH_SESSION_ID_NOT_FOUND, f


@test
def session_cache_full():
    """max.incremental.fetch.session.cache.slots=1: a second client's full
    fetch at epoch 0 is answered whole with SessionId 0 (the first session
    is neither stale nor evictable by a consumer's), and the first one goes
    on; once it is closed, the second gets a session, which a follower's
    session (v15 ReplicaState) then evicts: a consumer's session yields to a
    follower's, as in Kafka's cache."""
    port = free_port()
    with broker(settings={"shards": 1, "max.incremental.fetch.session.cache.slots": 1,
                          "admin.listen": "127.0.0.1:%d" % port}) as b, \
            TConn(b.bootstrap) as c, TConn(b.bootstrap) as d:
        new_topic(c, "f", 2)
        tid = topic_ids(c, ["f"])["f"]
        assert c.produce("f", 0, plain([b"x"])).error == 0
        a = fetch(c, 12, [("f", [(0, 0)])], epoch=0)
        assert a.session > 0, a
        f = fetch(d, 12, [("f", [(0, 0), (1, 0)])], epoch=0)
        assert f.error == 0 and f.session == 0 and f.parts[("f", 0)].values == [b"x"], f
        f = fetch(c, 12, [], session=a.session, epoch=1)
        assert f.error == 0 and f.session == a.session, f
        f = fetch(c, 12, [], session=a.session, epoch=-1)
        assert f.session == 0, f
        f = fetch(d, 12, [("f", [(0, 1)])], epoch=0)
        assert f.session > 0, f
        # a follower's session (privileged; its partitions refused here, a
        # node that is no replica) takes the consumer's slot
        r = fetch(c, 15, [(tid, [(1, 0)])], epoch=0, replica=7)
        assert r.session > 0 and r.parts[(tid, 1)].error == NOT_LEADER_OR_FOLLOWER, r
        g = fetch(d, 12, [], session=f.session, epoch=1)
        assert g.error == FETCH_SESSION_ID_NOT_FOUND, g
        text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read().decode()
        assert 'sluice_fetch_sessions{shard="0"} 1\n' in text, text
        assert 'sluice_fetch_session_evictions_total{shard="0"} 1\n' in text, text


@test
def a_fetch_of_more_partitions_than_one_sendmsg_takes():
    """A full fetch of 1,100 partitions that all have records: its answer
    is more iovecs (each partition's fields, then its records where the
    tail holds them) than one sendmsg takes (IOV_MAX, 1,024). It goes out
    IOV_MAX at a time and arrives whole. (It was EMSGSIZE and a closed
    connection: a librdkafka consumer of 520 partitions on one broker
    never got past its first fetches.) Records of 600 bytes: a response
    references records of 512 bytes and more where the tail holds them
    (KAFKA_WRITER_ZC_MIN), and copies smaller ones."""
    n = 1100

    def value(p):
        return b"v%d-" % p + b"x" * 600
    with broker(settings={"shards": 1}) as b, TConn(b.bootstrap) as c:
        new_topic(c, "wide", n)
        for p in range(n):
            assert c.produce("wide", p, plain([value(p)])).error == 0, p
        f = fetch(c, 12, [("wide", [(p, 0) for p in range(n)])])
        assert f.error == 0, f.error
        wrong = [p for p in range(n) if f.parts[("wide", p)].values != [value(p)]]
        assert not wrong, "partitions answered wrong: %s" % wrong[:10]


if __name__ == "__main__":
    main("fetch_sessions")
