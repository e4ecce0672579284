#!/usr/bin/python3
"""Replication over the shards' DPDK replication queue pairs
(docs/replication.md, docs/native-protocol.md: REPLICA_FETCH and
REPLICA_DATA).

Two sluiced processes (scripts/cluster, two shards each), each with
`dpdk.enable` on a net_memif port (node 1 the memif server, node 2 the
client, on one socket: pair i of one joins pair i of the other, so each
shard's replication pair reaches the other node's shard's; node 2 starts
a second after node 1, as a memif client connects only at its start),
--no-huge --no-pci. A
topic of 4 partitions, replication factor 2, min.insync.replicas=2: an
acks=all librdkafka producer's records are acknowledged only once the
follower has them durable, and the follower fetches them natively:

- every record is acknowledged (acks=all answered: the follower's fetch
  offsets moved the high watermark);
- the followers' sluice_replication_native_bytes_in_total (counted only
  by the native transport) equals their sluice_replication_bytes_in_total
  and is above 0, the leaders' native bytes out likewise, no TCP replica
  fetch was served (the Fetch handler's replication_bytes_out counts its
  own; native bytes out equal it all);
- both copies of every partition are the same bytes;
- each node's exit line shows REPLICA_FETCH served and REPLICA_DATA taken.

Three nodes and a leader's SIGKILL: test_dpdk_replication_failover.py
(make itest-dpdk-replication, ~40 s: not in make test).

Not skippable: as root with DPDK built in, a node whose EAL or port does
not start fails the test (run it as root; it refuses to run otherwise).

Run: /usr/bin/python3 tests/integration/test_dpdk_replication.py
"""

import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, temp_dir, test  # noqa: E402
from cluster import Cluster, create_topic, eal_dirs_gone, partitions, same_logs, until, wait_isrs  # noqa: E402

from confluent_kafka import Producer  # noqa: E402

TOPIC = "dpdkrepl"
NPARTS = 4
SHARDS = 2
RECORDS = int(os.environ.get("SLUICE_DPDK_REPL_RECORDS", "20000"))


def dpdk_sets(base):
    sock = os.path.join(base, "memif.sock")
    tag = "sdr%d" % os.getpid()
    sets = []
    for node, role in ((1, "server"), (2, "client")):
        eal = ("--no-huge -m 256 --no-pci --no-telemetry --file-prefix=%s-%d "
               "--vdev=net_memif0,role=%s,socket=%s" % (tag, node, role, sock))
        sets += [(node, "dpdk.eal.args=" + eal), (node, "dpdk.listen=10.77.%d.%d:9095" % (os.getpid() % 200, node))]
    return sets


def metric(c, node, name):
    """The node's counter, summed over its shards."""
    return sum(c.metric(node, "sluice_%s{shard=\"%d\"}" % (name, s)) for s in range(SHARDS))


@test
def records_reach_the_follower_through_the_dpdk_replication_queues():
    assert os.geteuid() == 0, "DPDK over net_memif needs root: this test does not skip"
    base = temp_dir()
    c = None
    try:
        c = Cluster(2, base=base, shards=SHARDS, stagger=1, sets=["dpdk.enable=true", "dpdk.prefix.length=24", "dpdk.poll.sleep.us=50",
                                         "min.insync.replicas=2"],
                    node_sets=dpdk_sets(base))
        for n in (1, 2):
            assert re.search(r"sluiced: dpdk: .*net_memif", c.log(n)), "node %d opened no memif port: %s" % (
                n, c.log(n)[-2000:])
        create_topic(c.bootstrap, TOPIC, NPARTS, 2)
        wait_isrs(c.bootstrap, TOPIC, 2)
        errors = []
        acked = [0]

        def done(err, msg):
            if err:
                errors.append(err)
            else:
                acked[0] += 1

        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 60000})
        for i in range(RECORDS):
            while True:
                try:
                    p.produce(TOPIC, value=b"v%08d" % i, key=b"k%d" % (i % 50), on_delivery=done)
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
        assert p.flush(90) == 0, "records not acknowledged in 90 s"
        assert not errors and acked[0] == RECORDS, (acked[0], errors[:3])
        leaders = {part: v[0] for part, v in partitions(c.bootstrap, TOPIC).items()}
        # what the followers took, all of it natively; the leaders sent it natively
        native_in = sum(metric(c, n, "replication_native_bytes_in_total") for n in (1, 2))
        tcp_in = sum(metric(c, n, "replication_bytes_in_total") for n in (1, 2))
        native_out = sum(metric(c, n, "replication_native_bytes_out_total") for n in (1, 2))
        tcp_out = sum(metric(c, n, "replication_bytes_out_total") for n in (1, 2))
        print("  %d records acks=all; leaders %s; follower bytes in %d (native %d), leader bytes out: native %d, "
              "Fetch %d" % (RECORDS, leaders, tcp_in, native_in, native_out, tcp_out), flush=True)
        assert native_in > RECORDS * 9, native_in
        assert native_in == tcp_in, "some replication came over TCP: %d of %d" % (tcp_in - native_in, tcp_in)
        assert native_out >= native_in and tcp_out == 0, (native_out, tcp_out)
        # byte-identical copies, once the follower has the last batch durable
        same_logs(c, TOPIC, NPARTS, (1, 2), timeout=20)
        c.stop()
        for n in (1, 2):
            line = [x for x in c.log(n).splitlines() if "replication: " in x and "REPLICA_FETCH served" in x]
            assert line, "node %d printed no native replication counters" % n
            for x in line[-SHARDS:]:
                print("  node %d %s: %s" % (n, re.search(r"native shard \d+", x).group(0),
                                             x[x.index("replication: "):]), flush=True)
        served = sum(int(re.search(r"replication: (\d+) REPLICA_FETCH served", x).group(1))
                     for n in (1, 2) for x in c.log(n).splitlines() if "REPLICA_FETCH served" in x)
        assert served > 0
    finally:
        if c:
            c.close()
        shutil.rmtree(base, ignore_errors=True)
        eal_dirs_gone("sdr%d" % os.getpid())


if __name__ == "__main__":
    main("dpdk_replication")
