#!/usr/bin/python3
"""Replication's data path on one node (docs/replication.md): what a real
sluiced answers a follower's Fetch (ReplicaId >= 0) from a broker that is
not one of the partition's replicas, and that acks=all and acks=1 answer as
they always did when the ISR is this node alone; the scrape's replication
families. Raw frames: the test clients never send a ReplicaId.

Several nodes (a leader and its followers over TCP) are tested in
tests/unit/test_replica_fetcher.c until a cluster can be started."""

import os
import struct
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import broker, free_port, main, test  # noqa: E402
from kraw import compact_str, read_compact_str, read_uvarint, uvarint  # noqa: E402
from ktxn import READ_UNCOMMITTED, TConn, batch, new_topic, parse_batches  # noqa: E402

FETCH = 1
NONE, NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH = 0, 6, 75


def fetch(c, replica, offset, current=-1, max_wait_ms=0):
    """Fetch v12 of partition 0 of "r" as broker `replica` (-1: a consumer);
    returns dict(error, hw, offsets)."""
    body = bytearray(struct.pack(">iiiibii", replica, max_wait_ms, 1, 1 << 20, READ_UNCOMMITTED, 0, -1))
    body += uvarint(2) + compact_str("r") + uvarint(2)
    body += struct.pack(">iiqiqi", 0, current, offset, -1, -1, 1 << 20) + b"\x00"
    body += b"\x00" + uvarint(1) + compact_str("") + b"\x00"
    r = c.request_flex(FETCH, 12, body)
    r.i32()
    assert r.i16() == 0
    r.i32()
    out = None
    for _ in range(read_uvarint(r) - 1):
        read_compact_str(r)
        for _ in range(read_uvarint(r) - 1):
            d = dict(index=r.i32(), error=r.i16(), hw=r.i64())
            r.i64()
            r.i64()
            n = read_uvarint(r) - 1
            for _ in range(max(n, 0)):
                r.i64(), r.i64(), read_uvarint(r)
            r.i32()
            n = read_uvarint(r) - 1
            blob = r.b[r.o:r.o + n] if n >= 0 else None
            r.o += max(n, 0)
            d["offsets"] = [rec.offset for bt in parse_batches(blob) for rec in bt.records]
            for _ in range(read_uvarint(r)):
                read_uvarint(r)
                r.o += read_uvarint(r)
            out = d
        assert read_uvarint(r) == 0
    assert read_uvarint(r) == 0
    r.done()
    return out


@test
def a_replica_fetch_from_a_broker_that_is_no_replica_is_refused():
    """Kafka's Partition.followerReplicaOrThrow: a Fetch whose ReplicaId is
    not a replica of the partition (another broker, or this leader itself)
    is NOT_LEADER_OR_FOLLOWER (6) without a current leader epoch and
    UNKNOWN_LEADER_EPOCH (75) with one, with no records, -1 watermarks and
    at once although it may wait 5 s; a consumer's (-1) reads as before."""
    with broker() as b:
        c = TConn(b.bootstrap)
        new_topic(c, "r")
        r = c.produce_many({("r", 0): batch([b"a", b"b", b"c"])}, acks=-1)[("r", 0)]
        assert r.error == NONE and r.base == 0, r
        for replica in (7, 1):            # another broker; this node (node.id 1) itself
            t0 = time.monotonic()
            d = fetch(c, replica, 0, max_wait_ms=5000)
            assert d["error"] == NOT_LEADER_OR_FOLLOWER and d["offsets"] == [] and d["hw"] == -1, (replica, d)
            assert time.monotonic() - t0 < 2.5, "waited out max_wait_ms"
            d = fetch(c, replica, 0, current=0)
            assert d["error"] == UNKNOWN_LEADER_EPOCH and d["offsets"] == [], (replica, d)
        d = fetch(c, -1, 0)
        assert d["error"] == NONE and d["offsets"] == [0, 1, 2] and d["hw"] == 3, d
        c.close()


@test
def acks_all_and_acks_1_on_one_node_answer_as_before():
    """The ISR is this node: acks=all is answered once the batch is durable
    here (the high watermark is the durable log end), at once, and so is
    acks=1; what both wrote is read back up to the high watermark."""
    with broker() as b:
        c = TConn(b.bootstrap)
        new_topic(c, "r")
        for i, acks in enumerate((-1, 1, -1, 1)):
            t0 = time.monotonic()
            r = c.produce_many({("r", 0): batch([b"v%d" % i])}, acks=acks)[("r", 0)]
            assert r.error == NONE and r.base == i, (acks, r)
            assert time.monotonic() - t0 < 2.0, "acks=%d waited" % acks
        d = fetch(c, -1, 0)
        assert d["error"] == NONE and d["offsets"] == [0, 1, 2, 3] and d["hw"] == 4, d
        c.close()


@test
def the_scrape_says_one_node_is_its_own_isr():
    """sluice_partition_isr_size 1, replicas 1, not under-replicated nor under
    min ISR, follower lag 0 (offsets and ms), no replication bytes: one node is its ISR."""
    port = free_port()
    with broker(settings={"admin.listen": "127.0.0.1:%d" % port}) as b:
        c = TConn(b.bootstrap)
        new_topic(c, "r")
        c.close()
        body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=30).read().decode()
        lines = [ln for ln in body.splitlines() if 'topic="r"' in ln]

        def value(name):
            got = [ln.rsplit(" ", 1)[1] for ln in lines if ln.startswith("sluice_%s{" % name)]
            assert len(got) == 1, (name, got)
            return float(got[0])
        assert value("partition_isr_size") == 1
        assert value("partition_replicas") == 1
        assert value("partition_under_replicated") == 0
        assert value("partition_under_min_isr") == 0
        assert value("partition_follower_lag_offsets") == 0
        assert value("partition_follower_lag_ms") == 0
        for fam in ("replication_bytes_in_total", "replication_bytes_out_total"):
            got = [ln for ln in body.splitlines() if ln.startswith("sluice_%s{" % fam)]
            assert got and all(ln.endswith(" 0") for ln in got), got


if __name__ == "__main__":
    main("replication")
