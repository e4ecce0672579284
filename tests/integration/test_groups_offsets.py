#!/usr/bin/python3
"""Committed offsets beyond commit and fetch, with kafka-python (Debian's
python3-kafka) against a real sluiced: they expire only for groups without
members, durably; and the broker's group report (SIGUSR1) gives each
committed partition's lag and the age of its oldest unconsumed record."""

import os
import re
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import HANG_GUARD, broker, main, test  # noqa: E402

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.structs import OffsetAndMetadata  # noqa: E402

COMMON = dict(api_version_auto_timeout_ms=30000, request_timeout_ms=40000)
RETENTION_MS = 1500


def offsets(b, group):
    a = KafkaAdminClient(bootstrap_servers=b.bootstrap, **COMMON)
    try:
        return {(tp.topic, tp.partition): om.offset for tp, om in a.list_consumer_group_offsets(group).items()}
    finally:
        a.close()


@test
def empty_group_offsets_expire_and_stay_expired():
    """A group without members that committed (assign + commit, generation
    -1) loses its offsets once offsets.retention.ms has passed; a group
    whose member is still there keeps them; after a SIGKILL restart the
    expired offsets are still gone (expiry wrote tombstones)."""
    settings = {"offsets.retention.ms": RETENTION_MS, "offsets.retention.check.interval.ms": 200,
                "group.initial.rebalance.delay.ms": 0}
    with broker(settings=settings) as b:
        p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", **COMMON)
        for i in range(10):
            p.send("exp", value=b"%d" % i, partition=0)
        p.flush()
        p.close()
        tp = TopicPartition("exp", 0)

        simple = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="memberless", enable_auto_commit=False,
                               **COMMON)
        simple.assign([tp])
        simple.commit({tp: OffsetAndMetadata(7, "")})
        simple.close(autocommit=False)
        assert offsets(b, "memberless") == {("exp", 0): 7}

        live = KafkaConsumer("exp", bootstrap_servers=b.bootstrap, group_id="live", enable_auto_commit=False,
                             auto_offset_reset="earliest", heartbeat_interval_ms=200, session_timeout_ms=6000,
                             **COMMON)
        got = 0
        deadline = time.monotonic() + HANG_GUARD
        while got < 10:
            assert time.monotonic() < deadline, "live consumer got only %d of 10 records" % got
            got += sum(len(r) for r in live.poll(timeout_ms=200).values())
        live.commit()
        assert offsets(b, "live") == {("exp", 0): 10}

        # wait (a condition, under the hang guard) for the expiry
        deadline = time.monotonic() + HANG_GUARD
        while offsets(b, "memberless"):
            assert time.monotonic() < deadline, "offsets of the memberless group never expired"
            live.poll(timeout_ms=100)   # keeps the live member's session
        # the live group's offsets outlived the retention: its member is there
        live.poll(timeout_ms=RETENTION_MS + 500)
        assert offsets(b, "live") == {("exp", 0): 10}, "a group with a member lost its offsets"
        live.close(autocommit=False)

        b.restart(hard=True)
        assert offsets(b, "memberless") == {}, "expired offsets came back after a restart"


def report(b, after):
    """SIGUSR1, then the report lines the broker printed (waits for the
    report's last line, under the hang guard)."""
    b.proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + HANG_GUARD
    while True:
        with open(b.log_path) as f:
            text = f.read()[after:]
        if "group report:" in text:
            return text
        assert time.monotonic() < deadline, "no group report after SIGUSR1"
        time.sleep(0.05)


@test
def group_report_gives_lag_and_oldest_unconsumed_age():
    """10 records; group 'behind' commits 4, waits, and the report says lag
    6 and an oldest-unconsumed age at least as long as it waited; group
    'done' committed 10: lag 0, age 0. A later report after 'behind'
    commits 10 says lag 0."""
    with broker(settings={"group.initial.rebalance.delay.ms": 0}) as b:
        p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", **COMMON)
        for i in range(10):
            p.send("lagt", value=b"%d" % i, partition=0)
        p.flush()
        p.close()
        tp = TopicPartition("lagt", 0)
        for group, off in (("behind", 4), ("done", 10)):
            c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=group, enable_auto_commit=False, **COMMON)
            c.assign([tp])
            c.commit({tp: OffsetAndMetadata(off, "")})
            c.close(autocommit=False)
        produced_by = time.time()
        time.sleep(0.6)
        with open(b.log_path) as f:
            at = len(f.read())
        text = report(b, at)
        line = re.compile(r"group (\S+): state (\S+).*?\n((?:sluiced:   .*\n)*)")
        rows = {}
        for g, _state, body in line.findall(text):
            for m in re.finditer(r"(\S+)-(\d+) committed (\d+) high-watermark (-?\d+) lag (\S+) "
                                 r"oldest-unconsumed-age-ms (\S+)", body):
                rows[(g, m.group(1), int(m.group(2)))] = (int(m.group(3)), int(m.group(4)), m.group(5), m.group(6))
        assert rows.get(("behind", "lagt", 0), (None,))[:3] == (4, 10, "6"), "report: %r" % text
        assert rows.get(("done", "lagt", 0)) == (10, 10, "0", "0"), "report: %r" % text
        age = int(rows[("behind", "lagt", 0)][3])
        waited_ms = (time.time() - produced_by) * 1000
        assert 500 <= age <= waited_ms + 60000, "oldest unconsumed age %d ms after waiting %.0f ms" % (age, waited_ms)

        c = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id="behind", enable_auto_commit=False, **COMMON)
        c.assign([tp])
        c.commit({tp: OffsetAndMetadata(10, "")})
        c.close(autocommit=False)
        with open(b.log_path) as f:
            at = len(f.read())
        text = report(b, at)
        assert re.search(r"lagt-0 committed 10 high-watermark 10 lag 0 oldest-unconsumed-age-ms 0", text), text


if __name__ == "__main__":
    main("groups-offsets")
