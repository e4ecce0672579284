#!/usr/bin/python3
"""The checked workloads (tools/sluicefault/workload.py) against a real
cluster, and the checker on what they recorded.

Three sluiced nodes on loopback (tests/integration/cluster.py),
min.insync.replicas=2, topics of 3 partitions on all three. The queue,
group and txn workloads run at once through the CLI for 8 s (seeds
printed); in the middle the node leading the queue topic's partition 0 is
SIGKILLed and restarted. Then each kind's --final read, and the checker
must report no anomaly, records sent, acknowledged and read, commits (group)
and committed transactions and copies (txn).

Then real damage: DeleteRecords (raw frames; Debian's confluent-kafka has no
delete_records) removes the queue topic's partition 0 up to its high
watermark, a new final read runs, and the checker must report the acknowledged
records of that partition lost.

And the group workload's zombie as a control: 20 s of the group workload
against the control broker with SLUICE_CONTROL=no-generation-check (make
control-broker), which takes the zombie's commits after its pause: the
checker must count them as stale_commit (and only the zombie's); then the
same against the normal broker, which refuses them: no anomaly.

Run: /usr/bin/python3 tests/fault/test_workloads.py
"""

import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
sys.path.insert(0, os.path.join(REPO, "tools"))

from harness import main, temp_dir, test  # noqa: E402
import cluster as cluster_mod  # noqa: E402
from cluster import Cluster, create_topic, partitions, wait_isrs  # noqa: E402
from sluicefault import checker, history  # noqa: E402

SECONDS = 8
SEED = int(os.environ.get("SLUICE_FAULT_SEED", "0")) or int(time.time()) % 100000
ENV = dict(os.environ, PYTHONPATH=os.path.join(REPO, "tools"))


def workload(kind, *args):
    return ["/usr/bin/python3", "-m", "sluicefault.workload", kind] + list(args)


def wait_all(procs, what, timeout=180):
    for name, p in procs:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            raise AssertionError("%s %s: still running after %d s\n%s" % (what, name, timeout, out.decode()))
        assert p.returncode == 0, "%s %s: exit %d\n%s" % (what, name, p.returncode, out.decode())


def delete_records(c, topic, part):
    """DeleteRecords v0 up to the high watermark (offset -1) on the
    partition's leader; its new log start."""
    import kraw
    lead = partitions(c.bootstrap, topic)[part][0]
    w = kraw.W().array([topic], lambda w, n: w.str(n).array([(part, -1)], lambda w, po: w.i32(po[0]).i64(po[1])))
    w.i32(30000)
    with kraw.Conn(c.addr(lead)) as k:
        r = k.request(21, 0, w)
        r.i32()
        res = r.array(lambda r: (r.str(), r.array(lambda r: (r.i32(), r.i64(), r.i16()))))
    (_, low, err), = res[0][1]
    assert err == 0 and low > 0, (err, low)
    return low


@test
def three_workloads_through_a_leader_kill():
    print("  seed %d (SLUICE_FAULT_SEED=%d replays the schedule)" % (SEED, SEED))
    base = temp_dir("sluicef-wl-")
    try:
        run_and_check(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run_and_check(base):
    with Cluster(3, sets=["min.insync.replicas=2", "group.initial.rebalance.delay.ms=0"]) as c:
        topics = {"queue": "fq", "group": "fg", "txn": "fx"}
        for t in ["fq", "fg", "fx", "fx-out"]:
            create_topic(c.bootstrap, t, 3, 3)
        for t in ["fq", "fg", "fx", "fx-out"]:
            wait_isrs(c.bootstrap, t, 3)
        dirs = {k: os.path.join(base, k) for k in topics}
        start = time.monotonic()
        procs = [(k, subprocess.Popen(workload(k, "--bootstrap", c.bootstrap, "--topic", t, "--seconds",
                                               str(SECONDS), "--out", dirs[k], "--seed", str(SEED)),
                                      env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
                 for k, t in topics.items()]
        time.sleep(SECONDS / 3)           # the fault's place in the schedule, not a readiness wait
        victim = partitions(c.bootstrap, "fq")[0][0]
        nemesis = [history.Writer(d, "nemesis") for d in dirs.values()]
        for w in nemesis:
            w.write("nemesis", name="kill", phase="start", detail={"node": victim})
        c.kill(victim)
        killed = time.monotonic() - start
        time.sleep(SECONDS / 4)
        c.restart(victim)
        for w in nemesis:
            w.write("nemesis", name="kill", phase="stop", detail={"node": victim})
            w.close()
        print("  node %d (leader of fq[0]) killed at %.1f s, restarted at %.1f s" % (
            victim, killed, time.monotonic() - start))
        wait_all(procs, "workload")
        procs = [(k, subprocess.Popen(workload(k, "--bootstrap", c.bootstrap, "--topic", t, "--out", dirs[k],
                                               "--final"), env=ENV, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT)) for k, t in topics.items()]
        wait_all(procs, "final read")
        for k in topics:
            res = checker.check([dirs[k]])
            print("  %s: %s" % (k, checker.table(res).splitlines()[-1]))
            bad = {a: res[a] for a in checker.ANOMALIES if res[a]}
            assert not bad, "%s: %s\n%s" % (k, bad, checker.table(res))
            assert res["sent"] > 0 and res["acked"] > 0 and res["read"] > 0 and res["read_final"] > 0, (k, res)
        lines = {k: history.read([dirs[k]]) for k in topics}
        commits = [x for x in lines["group"] if x["type"] == "commit" and x["ok"]]
        assigns = [x for x in lines["group"] if x["type"] == "assign"]
        assert commits and assigns, (len(commits), len(assigns))
        txns = [x for x in lines["txn"] if x["type"] == "txn_commit" and x["ok"]]
        aborts = [x for x in lines["txn"] if x["type"] == "txn_abort" and x["ok"]]
        copies = [x for x in lines["txn"] if x["type"] == "read" and x["reader"] == "final-rc"
                  and x["topic"] == "fx-out"]
        assert txns and aborts and copies, (len(txns), len(aborts), len(copies))
        # the mixers (write, then read, then commit) committed and read too
        mixed = [x for x in txns if x["txn"].startswith("txn-m")]
        mixed_reads = [x for x in lines["txn"] if x["type"] == "read" and x["reader"].startswith("txn-m")
                       and x.get("txn")]
        assert mixed and mixed_reads, (len(mixed), len(mixed_reads))
        zombie = [x for x in lines["group"] if x["type"] == "commit" and x.get("zombie")]
        assert not [x for x in zombie if x["ok"]], zombie
        print("  group: %d ok commits, %d assignments, %d zombie commits (refused: %s); txn: %d committed, "
              "%d aborted, %d copies" % (len(commits), len(assigns), len(zombie),
                                         sorted({x["error"] for x in zombie}), len(txns), len(aborts), len(copies)))

        # the checker catches real damage: partition 0 of the queue topic
        # emptied by DeleteRecords, then a new final read
        low = delete_records(c, "fq", 0)
        damaged = os.path.join(base, "queue-damaged")
        wait_all([("queue", subprocess.Popen(workload("queue", "--bootstrap", c.bootstrap, "--topic", "fq",
                                                      "--out", damaged, "--final"), env=ENV,
                                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT))], "final read")
        run_files = [f for f in history.files([dirs["queue"]]) if not os.path.basename(f).startswith("final-")]
        res = checker.check(run_files + [damaged])
        acked0 = sum(1 for x in lines["queue"] if x["type"] == "ack" and x["partition"] == 0)
        print("  after DeleteRecords of fq[0] up to %d: lost %d of %d acknowledged there" % (
            low, res["lost"], acked0))
        assert acked0 > 0 and res["lost"] == acked0, (acked0, res["lost"], checker.table(res))


CONTROL = os.environ.get("SLUICED_CONTROL", os.path.join(os.path.dirname(cluster_mod.SLUICED), "control", "sluiced"))


@test
def the_zombies_commits_are_stale_against_no_generation_check():
    assert os.path.exists(CONTROL), "%s: build it with make control-broker" % CONTROL
    for label, binary, env in (("control", CONTROL, {"SLUICE_CONTROL": "no-generation-check"}),
                               ("normal", cluster_mod.SLUICED, None)):
        res, zombie = zombie_run(binary, env)
        print("  %s: zombie commits %s; %s" % (label, [(x["ok"], x["error"]) for x in zombie],
                                               {a: res[a] for a in checker.ANOMALIES if res[a]}))
        assert zombie, "%s: the zombie never committed on waking" % label
        if env:
            assert all(x["ok"] for x in zombie), zombie
            assert res["stale_commit"] > 0, checker.table(res)
            assert {x["client"] for x in res["details"]["stale_commit"]} == {"group-z1"}, checker.table(res)
        else:
            assert not [x for x in zombie if x["ok"]], zombie
            assert not any(res[a] for a in checker.ANOMALIES), checker.table(res)


def zombie_run(binary, env):
    """20 s of the group workload on three nodes of binary (env for the
    nodes), its final read: (the checker's result, the zombie's commits on
    waking)."""
    base = temp_dir("sluicef-wlz-")
    old = cluster_mod.SLUICED
    cluster_mod.SLUICED = binary
    try:
        with Cluster(3, sets=["min.insync.replicas=2", "group.initial.rebalance.delay.ms=0"], env=env) as c:
            create_topic(c.bootstrap, "fg", 3, 3)
            wait_isrs(c.bootstrap, "fg", 3)
            d = os.path.join(base, "group")
            wait_all([("group", subprocess.Popen(workload("group", "--bootstrap", c.bootstrap, "--topic", "fg",
                                                          "--seconds", "20", "--out", d, "--seed", str(SEED)),
                                                 env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))],
                     "workload")
            wait_all([("group", subprocess.Popen(workload("group", "--bootstrap", c.bootstrap, "--topic", "fg",
                                                          "--out", d, "--final"), env=ENV, stdout=subprocess.PIPE,
                                                 stderr=subprocess.STDOUT))], "final read")
        res = checker.check([d])
        with open(os.path.join(d, "group-z1.jsonl")) as f:
            zombie = [x for x in map(json.loads, f) if x["type"] == "commit" and x.get("zombie")]
        return res, zombie
    finally:
        cluster_mod.SLUICED = old
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main("fault workloads")
