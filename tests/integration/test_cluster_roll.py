#!/usr/bin/python3
"""`sluicectl cluster roll`: a rolling restart of a loopback cluster
(docs/operating.md#rolling-restart).

Three sluiced processes (scripts/cluster), a topic of 3 partitions with 3
replicas and min.insync.replicas=2. The restart command given to the roll
is `scripts/cluster restart {id}`: SIGTERM (the broker's controlled
shutdown), wait for the process to exit, start it again with the same
arguments and wait until it listens.

- A command that exits non-zero, or overruns --exec-timeout, stops the
  roll at the first broker: exit 1, the broker named, no process changed.
- An idempotent acks=all producer writes all through the roll; the roll
  exits 0, the active controller last, every broker runs a new process
  (its pid changed), and every acknowledged record is read back
  afterwards.
- A command that leaves the second broker of the plan down (SIGKILL, not
  started) stops the roll at that broker after --wait, naming it and that
  it does not answer, and the broker after it in the plan keeps its
  process.

Run: /usr/bin/python3 tests/integration/test_cluster_roll.py [test ...]
"""

import json
import os
import shlex
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import SLUICECTL, main, test  # noqa: E402
from cluster import CLUSTER, Cluster, create_topic, wait_isrs  # noqa: E402

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402

TOPIC = "roll"
NPARTS = 3
SETS = ["min.insync.replicas=2", "default.replication.factor=3"]


def roll(c, exec_cmd, *args, timeout=120):
    """sluicectl cluster roll on c: (exit status, stdout, stderr)."""
    p = subprocess.run([SLUICECTL, "-b", c.bootstrap, "cluster", "roll", "--exec", exec_cmd] + list(args),
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                       env=c.env)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def restart_cmd(c):
    """The roll's --exec: scripts/cluster restart of the broker."""
    return "%s restart {id} --dir %s" % (shlex.quote(CLUSTER), shlex.quote(c.dir))


def pids(c):
    return {n: c.pid(n) for n in (1, 2, 3)}


class Writer:
    """An idempotent acks=all producer on its own thread until stopped:
    acked holds every acknowledged value."""

    def __init__(self, bootstrap):
        self.acked, self.errors = set(), []
        self.p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                           "linger.ms": 5, "message.timeout.ms": 60000,
                           "topic.metadata.refresh.interval.ms": 1000, "log_level": 2})
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run)
        self.t.start()

    def dr(self, err, msg):
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked.add(msg.value())

    def run(self):
        i = 0
        while not self.stop.is_set():
            try:
                self.p.produce(TOPIC, key=b"k%d" % (i % 30), value=b"v%07d" % i, on_delivery=self.dr)
                i += 1
            except BufferError:
                pass
            self.p.poll(0.002 if i % 20 else 0.01)

    def close(self):
        self.stop.set()
        self.t.join()
        left = self.p.flush(60)
        assert left == 0, "%d records unanswered" % left


def read_all(bootstrap):
    """Every value of the topic up to each partition's high watermark."""
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "roll-check", "enable.auto.commit": False})
    his = {p: cons.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in range(NPARTS)}
    cons.assign([TopicPartition(TOPIC, p, 0) for p in range(NPARTS)])
    got, last = set(), {p: -1 for p in range(NPARTS)}
    deadline = time.monotonic() + 60
    while any(last[p] + 1 < his[p] for p in range(NPARTS)):
        assert time.monotonic() < deadline, "reading back: %r of %r" % (last, his)
        for m in cons.consume(1000, 1.0):
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                continue
            got.add(m.value())
            last[m.partition()] = max(last[m.partition()], m.offset())
    cons.close()
    return got


@test
def a_roll_restarts_every_broker_once_loses_no_record_and_stops_at_a_broker_left_down():
    with Cluster(3, sets=SETS) as c:
        create_topic(c.bootstrap, TOPIC, NPARTS, 3, {"min.insync.replicas": "2"})
        wait_isrs(c.bootstrap, TOPIC, 3)
        before = pids(c)

        # a command that fails: the roll stops at its first broker
        rc, out, err = roll(c, "echo restarting {id} on {host}:{port} as $SLUICE_BROKER_ID; exit 3")
        assert rc == 1, (rc, out, err)
        first = int(err.split("stopped at broker ", 1)[1].split(":", 1)[0]) if "stopped at broker " in err else None
        assert first, err
        assert "restarting %d on 127.0.0.1:%d as %d" % (first, c.port(first), first) in out, out
        assert "stopped at broker %d: the restart command exited 3" % first in err, err
        assert pids(c) == before, (before, pids(c))
        # one that overruns --exec-timeout: stopped (its process group), and the roll with it
        t0 = time.monotonic()
        rc, out, err = roll(c, "sleep 60", "--exec-timeout", "1")
        assert rc == 1 and time.monotonic() - t0 < 20, (rc, out, err)
        assert "stopped at broker %d: the restart command ran longer than --exec-timeout 1 s" % first in err, err
        assert pids(c) == before, (before, pids(c))

        # the roll, an acks=all producer writing all through it
        w = Writer(c.bootstrap)
        try:
            until_acked = time.monotonic() + 20
            while len(w.acked) < 200:
                assert time.monotonic() < until_acked, "no records acknowledged before the roll: %r" % w.errors[:3]
                time.sleep(0.05)
            t0, acked_before = time.monotonic(), len(w.acked)
            rc, out, err = roll(c, restart_cmd(c), "--wait", "60", "--format", "json")
            took = time.monotonic() - t0
            acked_during = len(w.acked) - acked_before
        finally:
            w.close()
        assert rc == 0, (rc, out, err)
        res = json.loads(out)
        assert [b["result"] for b in res["brokers"]] == ["restarted"] * 3, res
        order = [b["node_id"] for b in res["brokers"]]
        assert sorted(order) == [1, 2, 3], order
        assert order[-1] == res["controller_id"], (order, res["controller_id"])   # the controller last
        assert "[3/3] broker %d (127.0.0.1:%d), the active controller:" % (order[-1], c.port(order[-1])) in err, err
        rolled = pids(c)
        assert all(rolled[n] and rolled[n] != before[n] for n in before), (before, rolled)
        assert err.count("back and healthy") == 3, err   # progress on stderr with --format json
        assert err.count("registered anew: broker epoch") == 3, err   # each one's new registration seen
        assert acked_during > 0, "nothing acknowledged while the roll ran: %r" % w.errors[:3]
        print("  rolled %s in %.1f s (the controller last); %d records acknowledged, %d while the roll ran; %d "
              "delivery errors" % (order, took, len(w.acked), acked_during, len(w.errors)))
        got = read_all(c.bootstrap)
        lost = w.acked - got
        assert not lost, "%d acknowledged records lost, e.g. %r" % (len(lost), sorted(lost)[:3])

        # the second broker of the plan is left down: stopped there, the last untouched
        plan = json.loads(roll(c, "true", "--dry-run", "--format", "json")[1])
        first, broken, last = [b["node_id"] for b in plan["brokers"]]
        cmd = "if [ {id} = %d ]; then %s kill {id} --dir %s; else %s; fi" % (
            broken, shlex.quote(CLUSTER), shlex.quote(c.dir), restart_cmd(c))
        t0 = time.monotonic()
        rc, out, err = roll(c, cmd, "--wait", "4")
        took = time.monotonic() - t0
        assert rc == 1, (rc, out, err)
        assert "stopped at broker %d: broker %d did not come back healthy within --wait 4 s" % (broken, broken) \
            in err, err
        assert "broker %d does not answer" % broken in err, err
        assert "not restarted: broker(s) %d" % last in err, err
        after = pids(c)
        assert after[first] and after[first] != rolled[first], (rolled, after)
        assert after[broken] is None, after
        assert after[last] == rolled[last], (rolled, after)
        print("  then stopped at broker %d (left down) after %.1f s; broker %d restarted before it, broker %d "
              "untouched" % (broken, took, first, last))


if __name__ == "__main__":
    main("test_cluster_roll")
