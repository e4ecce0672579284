#!/usr/bin/python3
"""The workloads' read loop (tools/sluicefault/workload.py read_loop)
writes every record its client delivered, also the batch of a consume that
a zombie's wake cut short.

A one-node cluster (tests/integration/cluster.py), a topic of one
partition with 300 records, and a group member of the group workload
(real librdkafka through confluent-kafka) reading it with a woke() that
acts once, right after the first consume that delivered records (as the
zombie's does when its pause ended inside that consume). The member's
history must hold reads of offsets 0-299, each once. Before, the loop
dropped that batch: the history lacked the first consume's records (up to
200), which the checker counts as skipped — the 200 records
group/kill-leader/5n reported "skipped, not explained" in
docs/fault-results.md were such a batch (the zombie's first fetch in its
new generation, from the offset it had been assigned).

Run: /usr/bin/python3 tests/fault/test_read_loop.py
"""

import json
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
sys.path.insert(0, os.path.join(REPO, "tools"))

from harness import main, temp_dir, test  # noqa: E402
from cluster import Cluster, create_topic  # noqa: E402
from sluicefault import workload  # noqa: E402

from confluent_kafka import Producer  # noqa: E402

RECORDS = 300


@test
def the_batch_a_wake_cut_short_is_written_as_reads():
    base = temp_dir("sluicef-rl-")
    try:
        with Cluster(1, sets=["group.initial.rebalance.delay.ms=0"]) as c:
            create_topic(c.bootstrap, "rl", 1, 1)
            p = Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 5})
            for i in range(RECORDS):
                p.produce("rl", partition=0, value=b"rl-%d" % i)
            assert p.flush(30) == 0, "records not acknowledged"

            deadline = time.monotonic() + 60
            m = workload._Member("rl-member", base, deadline, c.bootstrap, "rl", "rl-group", 1)
            woken = []

            def woke(cons):
                # once, after the first consume that moved the position
                if woken:
                    return False
                pos = [tp.offset for tp in cons.position(cons.assignment())]
                if pos and max(pos) > 0:
                    woken.append(max(pos))
                    return True
                return False

            passed = []

            def each(cons, msgs):
                passed.extend(x.offset() for x in msgs)
                return len(passed) + woken[0] < RECORDS if woken else True

            cons = m.group_consumer()
            m.read_loop(cons, lambda: time.monotonic() < deadline, each, woke=woke)
            cons.close()
            m.w.close()
            assert woken, "the first consume never delivered a record"
            with open(m.w.path) as f:
                reads = [json.loads(ln)["offset"] for ln in f if json.loads(ln)["type"] == "read"]
            assert sorted(reads) == list(range(RECORDS)), (
                "the history's reads are not offsets 0-%d once each: %d reads, first %s; the wake "
                "came after the client delivered offsets below %d" % (
                    RECORDS - 1, len(reads), reads[:3], woken[0]))
            assert passed and min(passed) == woken[0], (
                "each() should get the records after the cut-short batch only", min(passed), woken[0])
            print("  the consume the wake cut short delivered offsets 0-%d: in the history, not "
                  "handed on; %d reads in all" % (woken[0] - 1, len(reads)))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main("fault read loop")
