#!/usr/bin/python3
"""A consumer's close() that hangs holding Python's lock does not cost the
scenario (tests/fault/run.py wait_workload, workload.py close_consumer).

librdkafka 2.0.2 through confluent-kafka 1.7 once hung in a group member's
close() (rd_kafka_assign of its rebalance) with Python's lock held: every
thread of the workload process stopped with it, the process never ended,
and the runner reported the scenario FAILED after its 180 s although every
client had recorded all it did. Each client now writes a "closing" line
before a consumer's close() and an "end" line when it is done; the runner
ends the workload's process group when every client history ends with one
of the two and a "closing" line has stood for CLOSE_HANG_S.

A one-node cluster (tests/integration/cluster.py) and the queue workload's
real process (real librdkafka), its reader's close made to hang holding
Python's lock (SLUICEFAULT_TEST_HANG_CLOSE=queue-r1: libc's sleep through
ctypes.PyDLL). Without the protection (wait_workload's hang_s=None, the
runner's wait of before) the process does not end: the wait runs out.
With it the wait returns the reader's name, the process group is gone, the
producers' histories end with "end" and every acknowledged value is in
them, and the reader's ends with "closing" after its reads.

Run: /usr/bin/python3 tests/fault/test_close_hang.py
"""

import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
sys.path.insert(0, HERE)

from harness import main, temp_dir, test  # noqa: E402
from cluster import Cluster, create_topic  # noqa: E402
import run  # noqa: E402   tests/fault/run.py

SECONDS = 2
HANG_S = 2


def lines(path):
    with open(path) as f:
        return [json.loads(t) for t in f if t.strip()]


@test
def a_close_that_hangs_holding_the_lock_ends_the_workload_with_its_history_whole():
    base = temp_dir("sluicef-ch-")
    wl = None
    try:
        with Cluster(1) as c:
            create_topic(c.bootstrap, "ch", 1, 1)
            env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "tools"), SLUICEFAULT_TEST_HANG_CLOSE="queue-r1")
            wl = subprocess.Popen([sys.executable, "-m", "sluicefault.workload", "queue", "--bootstrap", c.bootstrap,
                                   "--topic", "ch", "--seconds", str(SECONDS), "--out", base, "--seed", "1",
                                   "--partitions", "1", "--replication", "1", "--flush-s", "10"],
                                  env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
            # the runner's wait of before: the process never ends (its
            # clients are done within SECONDS and a flush of about a second)
            try:
                run.wait_workload(wl, base, SECONDS + 8, hang_s=None)
                raise AssertionError("the workload ended with its reader's close hung (exit %s): the hang is not "
                                     "simulated" % wl.returncode)
            except subprocess.TimeoutExpired:
                pass
            last = run.client_ends(base)
            assert sorted(last) == ["queue-p1", "queue-p2", "queue-r1"], sorted(last)
            assert last["queue-r1"].get("type") == "closing", last["queue-r1"]
            # with the protection: the hung close is named and the process
            # group ended
            hung = run.wait_workload(wl, base, 30, hang_s=HANG_S)
            assert hung == ["queue-r1"], hung
            assert wl.poll() is not None, "the workload still runs"
            try:
                os.killpg(wl.pid, 0)
                raise AssertionError("a process of the workload's group is left")
            except ProcessLookupError:
                pass
            acked = set()
            for p in ("queue-p1", "queue-p2"):
                ls = lines(os.path.join(base, p + ".jsonl"))
                assert ls[-1]["type"] == "end", ls[-1]
                acked |= {x["value"] for x in ls if x["type"] == "ack"}
            r = lines(os.path.join(base, "queue-r1.jsonl"))
            assert r[-1]["type"] == "closing", r[-1]
            read = {x["value"] for x in r if x["type"] == "read"}
            assert acked, "nothing acknowledged"
            # the reader read up to its end while the producers flushed:
            # what it read is acknowledged values (its history is whole up
            # to the close)
            assert read and read <= acked | {x["value"] for p in ("queue-p1", "queue-p2")
                                             for x in lines(os.path.join(base, p + ".jsonl"))
                                             if x["type"] == "send"}, "the reader read values nobody sent"
            print("  %d acknowledged, %d read before the hung close" % (len(acked), len(read)))
    finally:
        if wl is not None and wl.poll() is None:
            os.killpg(wl.pid, 9)
            wl.wait()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main("fault close hang")
