#!/usr/bin/python3
"""Replication between two nodes whose Kafka listeners are IPv6
(docs/replication.md): `scripts/cluster --ipv6` binds each node's client
listener to PLAINTEXT://[::1]:PORT (the controller listeners stay on
127.0.0.1), so the nodes register ::1 and a follower can reach its leader
only over IPv6.

- a topic of 2 partitions on both nodes with min.insync.replicas=2: 200
  acks=all records through the [::1] bootstrap, every one acknowledged
  (the high watermark moves only once the follower has fetched them: a
  follower that cannot reach an IPv6 leader leaves every acks=all
  unanswered, then NOT_ENOUGH_REPLICAS once the ISR shrinks);
- both copies of each partition are the same batches.

Skipped (said, not passed) when the machine has no ::1.

Run: /usr/bin/python3 tests/integration/test_cluster_ipv6.py
"""

import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, test  # noqa: E402
from cluster import Cluster, create_topic, same_logs, wait_isrs  # noqa: E402

from confluent_kafka import Producer  # noqa: E402

TOPIC = "six"


def has_ipv6_loopback():
    try:
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


@test
def followers_fetch_from_leaders_on_ipv6_listeners():
    if not has_ipv6_loopback():
        print("  SKIPPED: this machine cannot bind ::1")
        return
    with Cluster(2, ipv6=True, sets=["replica.lag.time.max.ms=10000"]) as c:
        assert c.bootstrap.startswith("[::1]:"), c.bootstrap
        create_topic(c.bootstrap, TOPIC, 2, 2, {"min.insync.replicas": "2"})
        wait_isrs(c.bootstrap, TOPIC, 2, timeout=30)
        acked, errors = [], []
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 5,
                      "message.timeout.ms": 8000})
        for i in range(200):
            p.produce(TOPIC, partition=i % 2, value=b"v6:%d" % i,
                      on_delivery=lambda e, m: errors.append(str(e)) if e else acked.append(m.offset()))
        p.flush(30)
        assert not errors and len(acked) == 200, (len(acked), errors[:3])
        same_logs(c, TOPIC, 2, (1, 2))
        print("  200 acks=all records acknowledged by two nodes on [::1]")


if __name__ == "__main__":
    main("test_cluster_ipv6")
