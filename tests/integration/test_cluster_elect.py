#!/usr/bin/python3
"""ElectLeaders sent to a node that is not the active controller, on real
clusters: that node forwards it to the active controller over the
controller channel and relays the answer, as Kafka's KRaft brokers do
(docs/cluster.md, Leader elections).

- three combined nodes: a partition whose preferred leader (the first
  replica, reordered by a reassignment that keeps the leader) does not
  lead; ElectLeaders over raw frames to a node that is not the quorum's
  leader elects it (0), and answers ELECTION_NOT_NEEDED (84) for a
  partition its preferred replica leads already and
  UNKNOWN_TOPIC_OR_PARTITION (3) for an unknown topic and partition, as
  the active controller does; a null topic list (every partition) is
  forwarded too; the forwarding node counts what it forwarded
  (sluice_controller_channel_requests_total{kind="elect_forwarded"});
  `sluicectl leader elect` bootstrapped from such a node only elects too;
- a controller-only voter and two broker-only nodes (Kafka's dedicated
  roles): each broker forwards, raw and through sluicectl; with the
  controller gone the answer is REQUEST_TIMED_OUT or NOT_CONTROLLER
  (retriable) rather than no answer, within the request's TimeoutMs
  (3 s asked; the node's own 30 s without it), and once it is back an
  election through a broker works again.

Without forwarding every one of these answers NOT_CONTROLLER (41).
"""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, create_topic, until, wait_isrs  # noqa: E402
from harness import main, test  # noqa: E402
from kraw import W, Conn, describe_quorum  # noqa: E402

ELECT_LEADERS = 43
NONE, UNKNOWN_TOPIC_OR_PARTITION, REQUEST_TIMED_OUT, NOT_CONTROLLER, ELECTION_NOT_NEEDED = 0, 3, 7, 41, 84
SLUICECTL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "sluicectl")
FORWARDED = 'sluice_controller_channel_requests_total{kind="elect_forwarded"}'


def elect(addr, topics, etype=0, timeout_ms=60000):
    """ElectLeaders v1 to addr (host:port): topics None (every partition) or
    [(name, [p...])], TimeoutMs timeout_ms. (top-level error, {topic:
    {partition: code}})."""
    w = W().i8(etype)
    if topics is None:
        w.i32(-1)
    else:
        w.array(topics, lambda w, t: w.str(t[0]).array(t[1], lambda w, p: w.i32(p)))
    w.i32(timeout_ms)
    with Conn(addr, timeout=90) as c:
        r = c.request(ELECT_LEADERS, 1, w)
        r.i32()
        top = r.i16()
        res = r.array(lambda r: (r.str(), r.array(lambda r: (r.i32(), r.i16(), r.str()))))
        r.done()
    return top, {t: {p: e for p, e, _ in parts} for t, parts in res}


def layout(addr, topic):
    """{partition: (leader, [replicas in order])} from Metadata on addr."""
    from confluent_kafka.admin import AdminClient
    md = AdminClient({"bootstrap.servers": addr}).list_topics(topic, timeout=20)
    t = md.topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        return None
    return {p: (m.leader, list(m.replicas)) for p, m in t.partitions.items()}


def sluicectl(addr, *args, timeout=120):
    return subprocess.run([SLUICECTL, "-b", addr] + list(args), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)


def not_preferred(addr, topic, part):
    """Reorder the partition's replicas (AlterPartitionReassignments, the
    same set: its leader stays) so that its first, preferred replica is
    another one; that replica's id."""
    leader, replicas = layout(addr, topic)[part]
    first = [r for r in replicas if r != leader][0]
    order = [first] + [r for r in replicas if r != first]
    p = sluicectl(addr, "partition", "reassign", "--topic", topic, "--partition", str(part),
                  "--replicas", ",".join(map(str, order)))
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    until("%s-%d's replicas %s, its leader still %d" % (topic, part, order, leader),
          lambda: layout(addr, topic)[part] == (leader, order))
    return first


def controller(c):
    """The quorum's leader, as a voter's DescribeQuorum says."""
    return until("a quorum leader", lambda: (lambda q: q[0] if q[0] > 0 else None)(describe_quorum(c.ports[0])))


def led_by(addr, topic, part, node):
    until("%s-%d led by %d" % (topic, part, node), lambda: layout(addr, topic)[part][0] == node)


@test
def a_node_that_is_not_the_controller_forwards_elect_leaders():
    with Cluster(3) as c:
        create_topic(c.bootstrap, "fw", 2, 3)
        wait_isrs(c.bootstrap, "fw", 3)
        ctrl = controller(c)
        other = [n for n in (1, 2, 3) if n != ctrl][0]
        addr = c.addr(other)
        want = not_preferred(addr, "fw", 0)
        assert layout(addr, "fw")[1][0] == layout(addr, "fw")[1][1][0], "fw-1 is led by its preferred replica"
        before = c.metric(other, FORWARDED)
        top, res = elect(addr, [("fw", [0, 1, 7]), ("nope", [0])])
        assert controller(c) == ctrl and ctrl != other, "the controller stayed on another node"
        assert top == NONE and res == {"fw": {0: NONE, 1: ELECTION_NOT_NEEDED, 7: UNKNOWN_TOPIC_OR_PARTITION},
                                       "nope": {0: UNKNOWN_TOPIC_OR_PARTITION}}, (top, res)
        led_by(addr, "fw", 0, want)
        assert c.metric(other, FORWARDED) == before + 1
        assert c.metric(ctrl, FORWARDED) == 0, "the controller elects its clients' requests itself"

        # a null topic list: every partition, forwarded
        want = not_preferred(addr, "fw", 1)
        top, res = elect(addr, None)
        assert top == NONE and res["fw"] == {0: ELECTION_NOT_NEEDED, 1: NONE}, res
        assert all(e in (NONE, ELECTION_NOT_NEEDED) for ps in res.values() for e in ps.values()), res
        led_by(addr, "fw", 1, want)
        assert c.metric(other, FORWARDED) == before + 2

        # sluicectl, bootstrapped from a node that is not the controller only
        ctrl = controller(c)
        other = [n for n in (1, 2, 3) if n != ctrl][-1]
        addr = c.addr(other)
        want = not_preferred(addr, "fw", 0)
        p = sluicectl(addr, "--format", "json", "leader", "elect", "--topic", "fw", "--partition", "0")
        assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
        out = json.loads(p.stdout)
        assert out["elected"] == 1 and out["partitions"][0]["error_code"] == NONE, out
        led_by(addr, "fw", 0, want)
        assert c.metric(other, FORWARDED) >= 1
        p = sluicectl(addr, "leader", "elect", "--topic", "fw")
        assert p.returncode == 0 and "not needed" in p.stdout and "0 elected" in p.stdout, (p.stdout, p.stderr)


@test
def broker_only_nodes_forward_elect_leaders_and_a_lost_controller_is_a_retriable_error():
    with Cluster(1, brokers=2) as c:
        create_topic(c.bootstrap, "bo", 2, 2)
        wait_isrs(c.bootstrap, "bo", 2)
        want = not_preferred(c.addr(2), "bo", 0)
        top, res = elect(c.addr(2), [("bo", [0, 1]), ("nope", [3])])
        assert top == NONE and res == {"bo": {0: NONE, 1: ELECTION_NOT_NEEDED},
                                       "nope": {3: UNKNOWN_TOPIC_OR_PARTITION}}, (top, res)
        led_by(c.addr(2), "bo", 0, want)
        assert c.metric(2, FORWARDED) == 1

        want = not_preferred(c.addr(3), "bo", 1)
        p = sluicectl(c.addr(3), "--format", "json", "leader", "elect", "--topic", "bo")
        assert p.returncode == 0 and json.loads(p.stdout)["elected"] == 1, (p.returncode, p.stdout, p.stderr)
        led_by(c.addr(3), "bo", 1, want)
        assert c.metric(3, FORWARDED) == 1

        # the controller gone: an answer that says so (retriable), not none,
        # within the request's TimeoutMs (3 s here; without it the node
        # waited its own 30 s whatever the client asked)
        want = not_preferred(c.addr(2), "bo", 0)
        c.kill(1)
        t0 = time.monotonic()
        top, res = elect(c.addr(2), [("bo", [0])], timeout_ms=3000)
        took = time.monotonic() - t0
        assert top == NONE and res["bo"][0] in (REQUEST_TIMED_OUT, NOT_CONTROLLER), (top, res)
        assert took < 20, f"answered after {took:.1f} s, not within TimeoutMs (3 s)"
        c.restart(1)
        until("bo-0 elected through broker 2 again",
              lambda: elect(c.addr(2), [("bo", [0])])[1]["bo"][0] in (NONE, ELECTION_NOT_NEEDED), timeout=150)
        led_by(c.addr(2), "bo", 0, want)


if __name__ == "__main__":
    main("cluster_elect")
