#!/usr/bin/python3
"""Committed offsets expire only for groups without members, and their
expiry is durable: kafka-python (Debian's python3-kafka) against a real
sluiced with offsets.retention.ms shortened."""

import os
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


if __name__ == "__main__":
    main("groups-expiry")
