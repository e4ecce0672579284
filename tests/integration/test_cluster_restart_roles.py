#!/usr/bin/python3
"""A node restarting while its partition's leader moves follows the new
leader (issue 20's finding: tests/fault/kill_rounds.py, "Process faults"
in docs/fault-testing.md).

A restarting node sends each partition its role (leader, or follower of
a leader) as the partition opens, from the metadata image of that moment,
and publishes its snapshot once every partition has opened. A partition
record applied between the two (the leader moved) found nothing published
to refresh, so the role it carried never reached the partition: the node
kept following the dead leader (or leading, when it was that leader), the
new leader saw no fetch from it, and with min.insync.replicas=2 every
acks=all produce failed for as long as anyone waited.

Forced here with the test knob SLUICE_TEST_START_HOLD (docs/cluster.md):
three nodes, a partition on all three; a follower F is killed and
restarted with its start-up held once every partition opened; then the
leader L is killed (not restarted), the controller fences it and moves
the leadership; once F has applied that record its start-up goes on. The
acks=all records produced then (F and the third node the only replicas
left) must be acknowledged: F follows (or leads) as the image says.
Before the fix F never fetched and no record was acknowledged.

Run: /usr/bin/python3 tests/integration/test_cluster_restart_roles.py
"""

import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import main, temp_dir, test  # noqa: E402
from cluster import Cluster, create_topic, partitions, until  # noqa: E402

from confluent_kafka import Producer  # noqa: E402

TOPIC = "roles"
SETS = ["min.insync.replicas=2", "broker.session.timeout.ms=2000", "broker.heartbeat.interval.ms=500",
        "replica.lag.time.max.ms=3000"]
APPLIED = 'sluice_controller_quorum_index{index="applied"}'


def produce(bootstrap, n, timeout_s):
    """n acks=all idempotent records; {value: error name or None}."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "message.timeout.ms": int(timeout_s * 1000)})
    out = {}

    def done(err, msg):
        out[msg.value()] = err.name() if err else None

    for i in range(n):
        p.produce(TOPIC, b"r%d" % i, partition=0, on_delivery=done)
    p.flush(timeout_s + 30)
    return out


@test
def a_node_restarting_while_the_leader_moves_follows_the_new_leader():
    base = temp_dir()   # the cluster's (removed with it)
    hold = os.path.join(base, "start-hold")
    open(hold, "w").close()   # present: no node holds its start-up
    with Cluster(3, sets=SETS, base=base, env={"SLUICE_TEST_START_HOLD": hold}) as c:
        create_topic(c.bootstrap, TOPIC, 1, 3)
        leader, replicas, _ = until("the topic's ISR of 3", lambda: (
            lambda ps: ps and len(ps[0][2]) == 3 and ps[0])(partitions(c.bootstrap, TOPIC)))
        r = produce(c.bootstrap, 5, 30)
        assert not any(r.values()), r
        f, o = [n for n in replicas if n != leader]
        c.kill(f)
        os.unlink(hold)
        restarted = {}

        def restart():
            try:
                c.restart(f)
                restarted["ok"] = True
            except BaseException as e:  # noqa: BLE001 - reported below
                restarted["err"] = e

        th = threading.Thread(target=restart)
        th.start()
        try:
            # every partition of F opened: their roles went out (follower of L)
            until("node %d holding its start-up" % f, lambda: "SLUICE_TEST_START_HOLD: every partition opened"
                  in c.log(f))
            c.kill(leader)
            # the leadership moved off L in the image (the third node serves)
            until("a new leader", lambda: (lambda ps: ps and ps[0][0] not in (leader, -1))(
                partitions(c.addr(o), TOPIC)))
            at = c.metric(o, APPLIED)
            until("node %d applied the leader change" % f, lambda: c.metric(f, APPLIED) >= at)
        finally:
            open(hold, "w").close()
            th.join()
        assert restarted.get("ok"), restarted
        bootstrap = "%s,%s" % (c.addr(f), c.addr(o))
        r = produce(bootstrap, 5, 30)
        bad = {v: e for v, e in r.items() if e}
        assert not bad, "after node %d's restart and leader %d's kill: %s; partition: %s" % (
            f, leader, bad, partitions(bootstrap, TOPIC))


if __name__ == "__main__":
    main("test_cluster_restart_roles")
