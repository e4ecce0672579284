#!/usr/bin/python3
"""ACLs with real clients (issue 21, ACLs).

- Without the authorizer CreateAcls, DescribeAcls and DeleteAcls answer
  SECURITY_DISABLED (raw frames); then, with it (User:ANONYMOUS a super user):
  CreateAcls, DescribeAcls and DeleteAcls from kafka-python's admin client
  (Debian's confluent-kafka 1.7 has no ACL calls): bindings of each
  resource type and pattern are created, a duplicate is no error, an
  invalid one (an ANY operation) is INVALID_REQUEST; DescribeAcls filters
  by resource, pattern (MATCH finds the PREFIXED and LITERAL "*" bindings
  that apply to a name), principal and permission; DeleteAcls removes what
  a filter matches and lists it; the bindings survive a restart (the
  metadata log's ACL and REMOVE_ACL records); `sluicectl acl create|list|delete`.
- The authorizer (StandardAuthorizer) with SCRAM users over SASL_PLAINTEXT
  and librdkafka (confluent_kafka): alice, allowed to WRITE topic orders,
  produces to it but cannot read it, produce to or create another topic,
  join or commit for a group, or use a transactional id; Metadata lists
  only what she may DESCRIBE; a PREFIXED allow with a LITERAL deny; a
  DENY wins over an ALLOW; a new ACL takes effect on a connection already
  open; super.users (admin) bypass every check; DescribeAcls and
  CreateAcls need DESCRIBE / ALTER on the cluster; allow.everyone.if.no.acl.found.
- Every other API Kafka's KafkaApis checks, as raw frames from alice
  (PLAIN): each refused with Kafka's error without its ACL, and served with
  the one operation it needs: ListOffsets, OffsetForLeaderEpoch, the config
  APIs (topic and broker resources), CreatePartitions, DeleteRecords,
  FindCoordinator, DescribeGroups, ListGroups (filtered, or all with
  DESCRIBE on the cluster), DeleteGroups, OffsetDelete, OffsetFetch,
  TxnOffsetCommit and AddPartitionsToTxn (per topic), WriteTxnMarkers,
  DescribeLogDirs, DescribeCluster's authorized operations, ElectLeaders,
  the reassignment APIs, DescribeQuorum, DescribeUserScramCredentials; a
  Fetch or Metadata of an unknown topic id is UNKNOWN_TOPIC_ID, Metadata by
  the id of a topic alice may not describe 29 without its name.
- A 3-node cluster with the authorizer and User:ANONYMOUS (the brokers'
  principal on the PLAINTEXT inter-broker listener) in super.users
  replicates: acks=all produces, every ISR full, the same bytes on each node.
- An unknown authorizer.class.name stops the start (exit 2, naming the key).

    /usr/bin/python3 tests/integration/test_acls.py [test ...]
"""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import SLUICECTL, SLUICED, broker, free_port, main, run, temp_dir, test  # noqa: E402
from kraw import Conn, W, compact_str, read_compact_str, read_uvarint, uvarint  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402

from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, KafkaAdminClient,  # noqa: E402
                         ResourcePattern, ResourcePatternFilter, ResourceType)
from kafka.admin.acl_resource import ACLResourcePatternType  # noqa: E402
from kafka.errors import InvalidRequestError  # noqa: E402


def admin(b):
    return KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=15000, api_version=(2, 5))


def acl(principal, op, perm, rtype, name, pat=ACLResourcePatternType.LITERAL, host="*"):
    return ACL(principal, host, op, perm, ResourcePattern(rtype, name, pat))


def flt(rtype=ResourceType.ANY, name=None, pat=ACLResourcePatternType.ANY, principal=None,
        op=ACLOperation.ANY, perm=ACLPermissionType.ANY):
    return ACLFilter(principal, None, op, perm, ResourcePatternFilter(rtype, name, pat))


def key(a):
    p = a.resource_pattern
    return (p.resource_type, p.resource_name, p.pattern_type, a.principal, a.host, a.operation,
            a.permission_type)


def described(ad, f):
    acls, err = ad.describe_acls(f)
    assert err.errno == 0, err
    return sorted(key(a) for a in acls)


BINDINGS = [
    acl("User:alice", ACLOperation.WRITE, ACLPermissionType.ALLOW, ResourceType.TOPIC, "orders"),
    acl("User:alice", ACLOperation.READ, ACLPermissionType.ALLOW, ResourceType.TOPIC, "team-",
        ACLResourcePatternType.PREFIXED),
    acl("User:alice", ACLOperation.READ, ACLPermissionType.DENY, ResourceType.TOPIC, "team-secret"),
    acl("User:*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW, ResourceType.TOPIC, "*"),
    acl("User:bob", ACLOperation.READ, ACLPermissionType.ALLOW, ResourceType.GROUP, "g1"),
    acl("User:bob", ACLOperation.WRITE, ACLPermissionType.ALLOW, ResourceType.TRANSACTIONAL_ID, "tx-1"),
    acl("User:ops", ACLOperation.ALTER, ACLPermissionType.ALLOW, ResourceType.CLUSTER, "kafka-cluster"),
]


SECURITY_DISABLED = 54


@test
def create_describe_delete_and_restart():
    with broker(shards=2) as b:
        # without the authorizer the ACL APIs answer SECURITY_DISABLED, as Kafka's
        with Conn(b.bootstrap) as c:
            r = c.request(29, 1, W().i8(1).str(None).i8(1).str(None).str(None).i8(1).i8(1))   # DescribeAcls
            r.i32()
            assert r.i16() == SECURITY_DISABLED
            r = c.request(30, 1, W().array([0], lambda w, _: w.i8(2).str("t").i8(3).str("User:x").str("*")
                                             .i8(3).i8(3)))                                # CreateAcls
            assert r.i32() >= 0 and r.i32() == 1 and r.i16() == SECURITY_DISABLED
            r = c.request(31, 1, W().array([0], lambda w, _: w.i8(1).str(None).i8(1).str(None).str(None)
                                             .i8(1).i8(1)))                                # DeleteAcls
            assert r.i32() >= 0 and r.i32() == 1 and r.i16() == SECURITY_DISABLED
        # the rest with the authorizer; the PLAINTEXT listener's User:ANONYMOUS a super user
        b.settings.update({"authorizer.class.name": AUTHZ, "super.users": "User:ANONYMOUS"})
        b.restart()
        ad = admin(b)
        try:
            res = ad.create_acls(BINDINGS + [BINDINGS[0]])   # a duplicate is no error
            assert not res["failed"], res["failed"]
            assert len(res["succeeded"]) == len(BINDINGS) + 1
            bad = acl("User:x", ACLOperation.READ, ACLPermissionType.ALLOW, ResourceType.TOPIC, "")
            res = ad.create_acls([bad])
            err = res["failed"][0][1] if len(res["failed"]) == 1 else None
            assert err is InvalidRequestError or isinstance(err, InvalidRequestError), res
            everything = described(ad, flt())
            assert everything == sorted(key(a) for a in BINDINGS), everything
            # MATCH: what applies to topic team-secret: the PREFIXED allow,
            # the LITERAL deny and the LITERAL "*"
            got = described(ad, flt(ResourceType.TOPIC, "team-secret", ACLResourcePatternType.MATCH))
            assert [g[1] for g in got] == ["*", "team-", "team-secret"], got
            got = described(ad, flt(principal="User:bob"))
            assert sorted(g[0] for g in got) == [ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID], got
            got = described(ad, flt(perm=ACLPermissionType.DENY))
            assert len(got) == 1 and got[0][1] == "team-secret", got
            # DeleteAcls: every binding of alice on topics
            res = ad.delete_acls([flt(ResourceType.TOPIC, principal="User:alice")])
            (f, matched, err), = res
            assert err.errno == 0 and len(matched) == 3, res
            assert all(e.errno == 0 for _, e in matched), matched
            left = described(ad, flt())
            assert len(left) == len(BINDINGS) - 3 and not any(g[3] == "User:alice" for g in left), left
        finally:
            ad.close()
        b.restart()
        ad = admin(b)
        try:
            assert described(ad, flt()) == left
            res = ad.delete_acls([flt()])
            assert len(res[0][1]) == len(left), res
            assert described(ad, flt()) == []
            # sluicectl acl create|list|delete
            ctl = [SLUICECTL, "-b", b.bootstrap]
            run(ctl + ["acl", "create", "-p", "User:carol", "-o", "read", "-t", "topic", "-r", "logs-",
                       "--pattern", "prefixed"])
            run(ctl + ["acl", "create", "-p", "User:carol", "-o", "ALTER", "-t", "CLUSTER", "--permission", "DENY"])
            assert described(ad, flt(principal="User:carol")) == sorted([
                (ResourceType.TOPIC, "logs-", ACLResourcePatternType.PREFIXED, "User:carol", "*",
                 ACLOperation.READ, ACLPermissionType.ALLOW),
                (ResourceType.CLUSTER, "kafka-cluster", ACLResourcePatternType.LITERAL, "User:carol", "*",
                 ACLOperation.ALTER, ACLPermissionType.DENY)])
            out = json.loads(run(ctl + ["acl", "list", "-t", "TOPIC", "-r", "logs-eu", "--pattern", "MATCH",
                                        "--format", "json"]).stdout)
            assert out["acls"] == [{"resource_type": "TOPIC", "resource": "logs-", "pattern": "PREFIXED",
                                    "principal": "User:carol", "host": "*", "operation": "READ",
                                    "permission": "ALLOW"}], out
            p = run(ctl + ["acl", "create", "-p", "carol", "-o", "READ", "-t", "TOPIC", "-r", "x"], check=False)
            assert p.returncode == 1 and b"INVALID_REQUEST" in p.stderr, p.stderr
            p = run(ctl + ["acl", "create", "-p", "User:carol", "-o", "READS", "-t", "TOPIC", "-r", "x"], check=False)
            assert p.returncode == 2, p.stderr
            out = json.loads(run(ctl + ["acl", "delete", "-p", "User:carol", "--format", "json"]).stdout)
            assert len(out["deleted"]) == 2, out
            assert described(ad, flt()) == []
        finally:
            ad.close()


SCRAM = ["--add-scram", "SCRAM-SHA-256=[name=admin,password=admin-pw]",
         "--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-pw]"]
AUTHZ = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-pw" user_admin="admin-pw";')


def authz_broker(admin=False, **settings):
    """A broker with the authorizer: PLAINTEXT (readiness; User:ANONYMOUS,
    allowed nothing) and SASL_PLAINTEXT (SCRAM, and PLAIN for the raw
    frames) listeners; User:admin a super user; admin=True: an admin
    endpoint (b.admin, for /metrics)."""
    s = {"sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN", "authorizer.class.name": AUTHZ,
         "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
         "super.users": "User:admin", "auto.create.topics.enable": "false"}
    s.update(settings)
    return broker(listeners=("SASL_PLAINTEXT",), admin=admin, shards=2, settings=s, args=SCRAM)


def metric(b, name):
    import urllib.request
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % b.admin, timeout=15).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


def conf(b, user):
    return {"bootstrap.servers": b.addr["SASL_PLAINTEXT"], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": user + "-pw"}


def sadmin(b, user):
    return KafkaAdminClient(bootstrap_servers=b.addr["SASL_PLAINTEXT"], security_protocol="SASL_PLAINTEXT",
                            sasl_mechanism="SCRAM-SHA-256", sasl_plain_username=user,
                            sasl_plain_password=user + "-pw", request_timeout_ms=15000, api_version=(2, 5))


def produce(p, topic):
    """One record to topic with producer p: None or the error's name."""
    from confluent_kafka import KafkaException
    out = []
    try:
        p.produce(topic, b"v", on_delivery=lambda err, msg: out.append(err))
    except KafkaException as e:   # refused from librdkafka's cached metadata
        return e.args[0].name()
    p.flush(20)
    assert out, "no delivery report"
    return out[0].name() if out[0] else None


def read_error(b, user, topic, group="g-alice"):
    """What a consumer of user gets from partition 0 of topic: an error
    name, or "OK" once a record comes."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer(dict(conf(b, user), **{"group.id": group, "enable.auto.commit": False}))
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().name() in ("_PARTITION_EOF",):
                    continue
                return m.error().name()
            return "OK"
        return "TIMEOUT"
    finally:
        c.close()


def commit_error(b, user, topic, group):
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    c = Consumer(dict(conf(b, user), **{"group.id": group, "enable.auto.commit": False}))
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
        return None
    except KafkaException as e:
        return e.args[0].name()
    finally:
        c.close()


def topics_seen(b, user):
    from confluent_kafka.admin import AdminClient
    return set(AdminClient(conf(b, user)).list_topics(timeout=15).topics)


def wait_for(fn, want, what):
    """fn() until it returns want (ACLs reach the shards with the next
    metadata snapshot): the last value."""
    deadline = time.monotonic() + 20
    got = fn()
    while got != want and time.monotonic() < deadline:
        time.sleep(0.05)
        got = fn()
    assert got == want, "%s: %r, wanted %r" % (what, got, want)
    return got


@test
def authorizer_with_scram_users():
    from confluent_kafka import Producer
    from kafka.admin import NewTopic
    from kafka.errors import TopicAuthorizationFailedError
    with authz_broker() as b:
        ad = sadmin(b, "admin")   # a super user: every check passes
        try:
            ad.create_topics([NewTopic("orders", 1, 1), NewTopic("other", 1, 1), NewTopic("team-a", 1, 1),
                              NewTopic("team-secret", 1, 1)])
            res = ad.create_acls([
                acl("User:alice", ACLOperation.WRITE, ACLPermissionType.ALLOW, ResourceType.TOPIC, "orders"),
                acl("User:alice", ACLOperation.WRITE, ACLPermissionType.ALLOW, ResourceType.TOPIC, "team-",
                    ACLResourcePatternType.PREFIXED),
                acl("User:alice", ACLOperation.WRITE, ACLPermissionType.DENY, ResourceType.TOPIC, "team-secret"),
                # her consumer's FindCoordinator needs DESCRIBE on the group (as Kafka's)
                acl("User:alice", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW, ResourceType.GROUP, "g-alice")])
            assert not res["failed"], res
            p = Producer(dict(conf(b, "alice"), **{"message.timeout.ms": 10000,
                                                  "topic.metadata.refresh.interval.ms": 200}))
            wait_for(lambda: produce(p, "orders"), None, "alice writes orders")
            assert produce(p, "other") == "TOPIC_AUTHORIZATION_FAILED"
            assert produce(p, "team-a") is None                       # PREFIXED allow
            assert produce(p, "team-secret") == "TOPIC_AUTHORIZATION_FAILED"   # LITERAL deny wins
            # WRITE implies DESCRIBE: Metadata shows exactly what alice may describe
            assert topics_seen(b, "alice") == {"orders", "team-a", "team-secret"}, topics_seen(b, "alice")
            assert read_error(b, "alice", "orders") == "TOPIC_AUTHORIZATION_FAILED"
            assert commit_error(b, "alice", "orders", "g-alice") == "GROUP_AUTHORIZATION_FAILED"
            sal = sadmin(b, "alice")
            try:
                try:
                    sal.create_topics([NewTopic("mine", 1, 1)])
                    raise AssertionError("alice created a topic without CREATE")
                except TopicAuthorizationFailedError:
                    pass
                # the ACL APIs need the cluster's DESCRIBE / ALTER
                res = sal.create_acls([acl("User:alice", ACLOperation.ALL, ACLPermissionType.ALLOW,
                                           ResourceType.TOPIC, "*")])
                assert len(res["failed"]) == 1, res
            finally:
                sal.close()
            # a transactional id alice may not use
            t = Producer(dict(conf(b, "alice"), **{"transactional.id": "tx-alice"}))
            try:
                t.init_transactions(15)
                raise AssertionError("init_transactions passed without WRITE on the transactional id")
            except Exception as e:   # KafkaException
                assert "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in str(e), e
            # new ACLs reach an open connection: READ on orders, the group,
            # WRITE on other (the producer p's connection stays open)
            res = ad.create_acls([
                acl("User:alice", ACLOperation.READ, ACLPermissionType.ALLOW, ResourceType.TOPIC, "orders"),
                acl("User:alice", ACLOperation.READ, ACLPermissionType.ALLOW, ResourceType.GROUP, "g-alice"),
                acl("User:alice", ACLOperation.WRITE, ACLPermissionType.ALLOW, ResourceType.TOPIC, "other")])
            assert not res["failed"], res
            wait_for(lambda: produce(p, "other"), None, "alice writes other once allowed")
            assert read_error(b, "alice", "orders") == "OK"
            assert commit_error(b, "alice", "orders", "g-alice") is None
            # a DENY wins over the ALLOW just given
            ad.create_acls([acl("User:*", ACLOperation.ALL, ACLPermissionType.DENY, ResourceType.TOPIC, "other")])
            wait_for(lambda: produce(p, "other"), "TOPIC_AUTHORIZATION_FAILED", "a DENY wins")
            assert produce(p, "orders") is None
            # the super user is not bound by the DENY
            pa = Producer(conf(b, "admin"))
            assert produce(pa, "other") is None
        finally:
            ad.close()


# ---- every other API, with raw frames (kraw) as alice over PLAIN -----------------------------

TAF, GAF, CAF, TXAF, NOT_ATTEMPTED, UNKNOWN_TOPIC_ID = 29, 30, 31, 53, 55, 100


def raw(b, user):
    """A kraw connection to the SASL_PLAINTEXT listener, logged in as user with PLAIN."""
    c = Conn(b.addr["SASL_PLAINTEXT"])
    assert c.request(17, 1, W().str("PLAIN")).i16() == 0
    assert c.request(36, 0, W().bytes(b"\0%s\0%s-pw" % (user.encode(), user.encode()))).i16() == 0
    return c


def first_error(r, path):
    """The error code at the end of path through a response: i32/i64/s
    skip a field, n an array's count (at least one), e the code."""
    for step in path.split():
        if step == "e":
            return r.i16()
        if step == "n":
            assert r.i32() >= 1, "an empty array before the error"
        else:
            {"i32": r.i32, "i64": r.i64, "s": r.str}[step]()
    raise AssertionError("no e in the path")


def one_part(t, fields=lambda w: w):
    return lambda w, _: fields(w.str(t).array([0], lambda w, p: w.i32(p)))


def per_topic(r):
    """{topic: the error of its partition 0} of a Topics[Name, Partitions[PartitionIndex, ErrorCode]]."""
    return dict(r.array(lambda r: (r.str(), r.array(lambda r: (r.i32(), r.i16()))[0][1])))


class Api:
    """The APIs Kafka's KafkaApis checks beyond produce, fetch, metadata,
    topics, the group membership APIs and the ACL APIs, as alice sends them."""

    def __init__(self, c):
        self.c = c

    def list_offsets(self, t):
        w = W().i32(-1).array([t], lambda w, t: w.str(t).array([0], lambda w, p: w.i32(p).i64(-1)))
        return first_error(self.c.request(2, 1, w), "n s n i32 e")

    def leader_epoch(self, t):
        w = W().array([t], lambda w, t: w.str(t).array([0], lambda w, p: w.i32(p).i32(-1).i32(0)))
        return first_error(self.c.request(23, 2, w), "i32 n s n e")

    def describe_configs(self, rtype, name):
        w = W().array([0], lambda w, _: w.i8(rtype).str(name).i32(-1))
        return first_error(self.c.request(32, 0, w), "i32 n e")

    def alter_configs(self, name):   # validate only
        w = W().array([0], lambda w, _: w.i8(2).str(name).array([0], lambda w, _: w.str("retention.ms")
                                                                .str("3600000"))).i8(1)
        return first_error(self.c.request(33, 0, w), "i32 n e")

    def incremental_alter_configs(self, rtype, name, configs=()):   # validate only
        w = W().array([0], lambda w, _: w.i8(rtype).str(name).array(list(configs), lambda w, kv: w.str(kv[0])
                                                                    .i8(0).str(kv[1]))).i8(1)
        return first_error(self.c.request(44, 0, w), "i32 n e")

    def create_partitions(self, t):   # validate only
        w = W().array([t], lambda w, t: w.str(t).i32(2).i32(-1)).i32(10000).i8(1)
        return first_error(self.c.request(37, 0, w), "i32 n s e")

    def delete_records(self, t):
        w = W().array([t], lambda w, t: w.str(t).array([0], lambda w, p: w.i32(p).i64(0))).i32(10000)
        return first_error(self.c.request(21, 0, w), "i32 n s n i32 i64 e")

    def describe_group(self, g):
        return first_error(self.c.request(15, 0, W().array([g], W.str)), "n e")

    def list_groups(self):
        r = self.c.request(16, 0, W())
        assert r.i16() == 0
        return set(g for g, _ in r.array(lambda r: (r.str(), r.str())))

    def delete_group(self, g):
        return first_error(self.c.request(42, 0, W().array([g], W.str)), "i32 n s e")

    def offset_delete(self, g, topics):
        r = self.c.request(47, 0, W().str(g).array(topics, lambda w, t: one_part(t)(w, t)))
        err = r.i16()
        r.i32()
        return err, per_topic(r)

    def offset_fetch(self, g, topics=None, ver=2):
        """(the group's error (None in v1), {topic: partition 0's error})"""
        r = self.c.request(9, ver, W().str(g).array(topics, lambda w, t: one_part(t)(w, t)))
        got = dict(r.array(lambda r: (r.str(), r.array(lambda r: (r.i32(), r.i64(), r.str(), r.i16()))[0][3])))
        return r.i16() if ver >= 2 else None, got

    def find_group(self, g):
        return self.c.find_coordinator(g, ver=1, key_type=0).error

    def txn_offset_commit(self, tx, g, topics):
        w = W().str(tx).str(g).i64(0).i16(0).array(topics, lambda w, t: w.str(t).array(
            [0], lambda w, p: w.i32(p).i64(1).str("")))
        r = self.c.request(28, 0, w)
        r.i32()
        return per_topic(r)

    def add_partitions_to_txn(self, tx, topics):
        r = self.c.request(24, 0, W().str(tx).i64(0).i16(0).array(topics, lambda w, t: one_part(t)(w, t)))
        r.i32()
        return per_topic(r)

    def write_txn_markers(self, t):   # producer id -1: refused after the checks
        w = W().array([0], lambda w, _: w.i64(-1).i16(0).i8(1).array([t], lambda w, t: one_part(t)(w, t)).i32(0))
        return first_error(self.c.request(27, 0, w), "n i64 n s n i32 e")

    def log_dirs(self):
        r = self.c.request(35, 0, W().i32(-1))
        r.i32()
        return r.i32()   # how many directories

    def elect(self, t):
        w = W().i8(0).array([t], lambda w, t: one_part(t)(w, t)).i32(10000)
        return first_error(self.c.request(43, 1, w), "i32 e")

    def fetch_by_id(self, topic_id):
        """Fetch v13 of partition 0 of a topic id: its error."""
        part = W().i32(0).i32(-1).i64(0).i32(-1).i64(-1).i32(1 << 20).b + uvarint(0)
        body = (W().i32(-1).i32(0).i32(1).i32(1 << 20).i8(0).i32(0).i32(-1).b + uvarint(2) + topic_id +
                uvarint(2) + part + uvarint(0) + uvarint(1) + compact_str("") + uvarint(0))
        r = self.c.request_flex(1, 13, body)
        r.i32(), r.i16(), r.i32()
        assert read_uvarint(r) == 2
        r.o += 16   # the topic id
        assert read_uvarint(r) == 2
        r.i32()
        return r.i16()

    def metadata_v12(self, name=None, topic_id=bytes(16)):
        """Metadata v12 of one topic, by name or by id: (error, name, id)."""
        body = (uvarint(2) + topic_id + (compact_str(name) if name else uvarint(0)) + uvarint(0) +
                b"\x00\x00" + uvarint(0))
        r = self.c.request_flex(3, 12, body)
        r.i32()
        for _ in range(read_uvarint(r) - 1):
            r.i32(), read_compact_str(r), r.i32(), read_compact_str(r), read_uvarint(r)
        read_compact_str(r), r.i32()
        assert read_uvarint(r) == 2
        err, got = r.i16(), read_compact_str(r)
        return err, got, bytes(r.b[r.o:r.o + 16])

    def flex(self, api, body):
        return self.c.request_flex(api, 0, body)

    def alter_reassignments(self):
        return first_error(self.flex(45, W().i32(10000).b + uvarint(1) + uvarint(0)), "i32 e")

    def list_reassignments(self):
        return first_error(self.flex(46, W().i32(10000).b + uvarint(0) + uvarint(0)), "i32 e")

    def describe_scram(self):
        return first_error(self.flex(50, uvarint(0) + uvarint(0)), "i32 e")

    def describe_quorum(self):
        body = (uvarint(2) + compact_str("__cluster_metadata") + uvarint(2) + W().i32(0).b + uvarint(0) +
                uvarint(0) + uvarint(0))
        return first_error(self.flex(55, body), "e")

    def cluster_ops(self):
        """DescribeCluster's ClusterAuthorizedOperations (no check: Kafka's broker answers anyone)."""
        r = self.flex(60, b"\x01" + uvarint(0))
        r.i32()
        assert r.i16() == 0
        read_compact_str(r), read_compact_str(r), r.i32()
        for _ in range(read_uvarint(r) - 1):
            r.i32(), read_compact_str(r), r.i32(), read_compact_str(r), read_uvarint(r)
        return r.i32()


def grant(ad, *bindings):
    res = ad.create_acls([acl("User:alice", op, ACLPermissionType.ALLOW, rtype, name)
                          for rtype, name, op in bindings])
    assert not res["failed"], res


@test
def every_other_api_is_checked():
    """Each API refused without its ACL (the error Kafka gives), allowed with it."""
    from kafka.admin import NewTopic
    T, G, C, X = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
    O = ACLOperation
    with authz_broker() as b:
        ad = sadmin(b, "admin")
        c = raw(b, "alice")
        a = Api(c)
        try:
            ad.create_topics([NewTopic(t, 1, 1) for t in ("x-lo", "x-dr", "x-cp", "x-dc", "x-ac", "x-secret",
                                                           "x-w")])
            with raw(b, "admin") as ac:   # offsets of two topics in four groups
                for g in ("x-g-desc", "x-g-del", "x-g-read", "x-g-other"):
                    r = ac.request(8, 2, W().str(g).i32(-1).str("").i64(-1).array(
                        ["x-lo", "x-secret"], lambda w, t: w.str(t).array([0], lambda w, p: w.i32(p).i64(1).str(""))))
                    assert per_topic(r) == {"x-lo": 0, "x-secret": 0}
            # nothing granted: every one refused
            assert a.list_offsets("x-lo") == TAF and a.leader_epoch("x-lo") == TAF
            assert a.describe_configs(2, "x-dc") == TAF and a.describe_configs(4, "") == CAF
            assert a.alter_configs("x-ac") == TAF and a.incremental_alter_configs(2, "x-ac") == TAF
            assert a.incremental_alter_configs(4, "") == CAF
            assert a.create_partitions("x-cp") == TAF and a.delete_records("x-dr") == TAF
            assert a.describe_group("x-g-desc") == GAF and a.find_group("x-g-desc") == GAF
            assert not any(g.startswith("x-") for g in a.list_groups())
            assert a.delete_group("x-g-del") == GAF and a.offset_delete("x-g-del", ["x-lo"])[0] == GAF
            assert a.offset_fetch("x-g-read", ["x-lo"])[0] == GAF
            assert a.offset_fetch("x-g-read", ["x-lo"], ver=1) == (None, {"x-lo": GAF})   # v1: per partition
            assert a.txn_offset_commit("x-tx", "x-g-read", ["x-lo"]) == {"x-lo": TXAF}
            assert a.add_partitions_to_txn("x-tx", ["x-w"]) == {"x-w": TXAF}
            assert a.write_txn_markers("x-lo") == CAF and a.log_dirs() == 0 and a.cluster_ops() == 0
            assert a.fetch_by_id(os.urandom(16)) == UNKNOWN_TOPIC_ID   # names nothing to refuse (Kafka's order)
            with raw(b, "admin") as ac:
                err, _, lo_id = Api(ac).metadata_v12("x-lo")
                assert err == 0 and lo_id != bytes(16)
            assert a.metadata_v12(topic_id=lo_id) == (TAF, None, lo_id)   # by id: the name not told
            assert a.metadata_v12(topic_id=os.urandom(16))[0] == UNKNOWN_TOPIC_ID
            assert a.elect("x-lo") == CAF and a.alter_reassignments() == CAF
            assert a.list_reassignments() == CAF and a.describe_scram() == CAF and a.describe_quorum() == CAF
            # the topics' and groups' ACLs
            grant(ad, (T, "x-lo", O.READ), (T, "x-dr", O.DELETE), (T, "x-cp", O.ALTER),
                  (T, "x-dc", O.DESCRIBE_CONFIGS), (T, "x-ac", O.ALTER_CONFIGS), (T, "x-w", O.WRITE),
                  (G, "x-g-desc", O.DESCRIBE), (G, "x-g-del", O.DELETE), (G, "x-g-read", O.READ),
                  (X, "x-tx", O.WRITE))
            wait_for(lambda: a.list_offsets("x-lo"), 0, "ListOffsets with READ (DESCRIBE) on the topic")
            assert a.leader_epoch("x-lo") == 0
            assert a.describe_configs(2, "x-dc") == 0 and a.describe_configs(4, "") == CAF
            assert a.alter_configs("x-ac") == 0 and a.incremental_alter_configs(2, "x-ac") == 0
            assert a.create_partitions("x-cp") == 0 and a.delete_records("x-dr") == 0
            assert a.describe_group("x-g-desc") == 0 and a.find_group("x-g-desc") == 0
            assert {"x-g-desc", "x-g-del", "x-g-read"} <= a.list_groups() and "x-g-other" not in a.list_groups()
            # per topic: the one alice may not read is refused, the other goes on
            assert a.offset_delete("x-g-del", ["x-lo", "x-secret"]) == (0, {"x-lo": 0, "x-secret": TAF})
            assert a.delete_group("x-g-del") == 0
            assert a.offset_fetch("x-g-read", ["x-lo", "x-secret"]) == (0, {"x-lo": 0, "x-secret": TAF})
            assert a.offset_fetch("x-g-read") == (0, {"x-lo": 0})   # every topic: those she may describe
            got = a.txn_offset_commit("x-tx", "x-g-read", ["x-lo", "x-secret"])
            assert got["x-secret"] == TAF and got["x-lo"] not in (TAF, GAF, TXAF), got
            assert a.txn_offset_commit("x-tx", "x-g-desc", ["x-lo"]) == {"x-lo": GAF}   # DESCRIBE is not READ
            assert a.add_partitions_to_txn("x-tx", ["x-w", "x-lo"]) == {"x-w": NOT_ATTEMPTED, "x-lo": TAF}
            with raw(b, "admin") as ac:   # never an internal topic, even for a super user (Kafka's)
                assert Api(ac).add_partitions_to_txn("x-tx", ["x-w", "__consumer_offsets"]) == {
                    "x-w": NOT_ATTEMPTED, "__consumer_offsets": TAF}
            assert a.add_partitions_to_txn("x-tx", ["x-w"])["x-w"] not in (TAF, TXAF, NOT_ATTEMPTED)
            assert a.write_txn_markers("x-lo") == CAF and a.log_dirs() == 0 and a.cluster_ops() == 0
            # the cluster's: DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS
            grant(ad, (C, "kafka-cluster", O.DESCRIBE), (C, "kafka-cluster", O.CLUSTER_ACTION),
                  (C, "kafka-cluster", O.DESCRIBE_CONFIGS))
            wait_for(lambda: a.list_reassignments(), 0, "ListPartitionReassignments with DESCRIBE on the cluster")
            assert a.describe_scram() == 0 and a.describe_quorum() == 0 and a.log_dirs() == 1
            assert a.write_txn_markers("x-lo") == 49   # past the check: INVALID_PRODUCER_ID_MAPPING
            assert a.describe_configs(4, "") == 0 and "x-g-other" in a.list_groups()
            ops = a.cluster_ops()
            assert ops & (1 << O.DESCRIBE) and ops & (1 << O.CLUSTER_ACTION) and not ops & (1 << O.ALTER), ops
            assert a.elect("x-lo") == CAF and a.alter_reassignments() == CAF   # DESCRIBE is not ALTER
            assert a.incremental_alter_configs(4, "") == CAF
            grant(ad, (C, "kafka-cluster", O.ALTER), (C, "kafka-cluster", O.ALTER_CONFIGS))
            wait_for(lambda: a.alter_reassignments(), 0, "AlterPartitionReassignments with ALTER on the cluster")
            assert a.elect("x-lo") == 0 and a.incremental_alter_configs(4, "") == 0
        finally:
            c.close()
            ad.close()


@test
def a_remembered_decision_goes_with_its_acl():
    """The connection's remembered decisions (docs/security.md#acls): a
    producer's Produce requests are checked once and then answered from
    its connection (sluice_authz_cache_hits_total grows); the moment
    DeleteAcls has answered, the next request of that producer (librdkafka)
    and of a raw connection is refused, and the moment CreateAcls has
    answered, the raw connection, which remembered the refusal, is served
    again (librdkafka keeps the topic's error until its next metadata
    refresh, so only the raw frames judge that side)."""
    from confluent_kafka import Producer
    from kafka.admin import NewTopic
    from ktxn import TConn, batch
    with authz_broker(admin=True) as b:
        ad = sadmin(b, "admin")
        tc = TConn(b.addr["SASL_PLAINTEXT"])
        try:
            assert tc.request(17, 1, W().str("PLAIN")).i16() == 0
            assert tc.request(36, 0, W().bytes(b"\0alice\0alice-pw")).i16() == 0
            ad.create_topics([NewTopic("orders", 1, 1)])
            write = acl("User:alice", ACLOperation.WRITE, ACLPermissionType.ALLOW, ResourceType.TOPIC, "orders")
            # DESCRIBE of its own, so that librdkafka's metadata does not
            # change with the WRITE (only the Produce requests are judged)
            res = ad.create_acls([write, acl("User:alice", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
                                             ResourceType.TOPIC, "orders")])
            assert not res["failed"], res
            p = Producer(dict(conf(b, "alice"), **{"message.timeout.ms": 10000, "linger.ms": 0}))
            wait_for(lambda: produce(p, "orders"), None, "alice writes orders")
            assert tc.produce("orders", 0, batch([b"raw"])).error == 0
            hits = metric(b, "sluice_authz_cache_hits_total")
            for _ in range(5):
                assert produce(p, "orders") is None
                assert tc.produce("orders", 0, batch([b"raw"])).error == 0
            assert metric(b, "sluice_authz_cache_hits_total") >= hits + 10, "the Produce checks were not remembered"
            (f, matched, err), = ad.delete_acls([flt(ResourceType.TOPIC, "orders", ACLResourcePatternType.LITERAL,
                                                     "User:alice", ACLOperation.WRITE)])
            assert err.errno == 0 and len(matched) == 1, matched
            assert tc.produce("orders", 0, batch([b"raw"])).error == TAF, "a remembered allow outlived its ACL"
            assert produce(p, "orders") == "TOPIC_AUTHORIZATION_FAILED", "a remembered allow outlived its ACL"
            assert tc.produce("orders", 0, batch([b"raw"])).error == TAF
            res = ad.create_acls([write])
            assert not res["failed"], res
            assert tc.produce("orders", 0, batch([b"raw"])).error == 0, "a remembered refusal outlived the new ACL"
        finally:
            tc.close()
            ad.close()


def init_producer_id(c):
    """InitProducerId v1 of an idempotent producer (a null transactional
    id): (error, producer id)."""
    r = c.request(22, 1, W().str(None).i32(60000))
    r.i32()
    return r.i16(), r.i64()


def idempotent_error(b, topic):
    """What an idempotent librdkafka producer of alice gets for one record:
    None (delivered) or the error names it reports."""
    from confluent_kafka import Producer
    errs, out = [], []
    p = Producer(dict(conf(b, "alice"), **{"enable.idempotence": True, "message.timeout.ms": 8000,
                                          "error_cb": lambda e: errs.append(e.name())}))
    p.produce(topic, b"v", on_delivery=lambda err, msg: out.append(err))
    from confluent_kafka import KafkaException
    try:
        p.flush(20)
    except KafkaException as e:   # the fatal error, raised by flush
        errs.append(e.args[0].name())
    if out and out[0] is None:
        return None
    return " ".join(([out[0].name()] if out else []) + errs) or "no delivery report"


@test
def an_idempotent_producer_needs_write_on_some_topic():
    """InitProducerId without a transactional id: Kafka's IDEMPOTENT_WRITE
    on the cluster, or WRITE on any topic (authorizeByResourceType, Kafka
    2.8+), else CLUSTER_AUTHORIZATION_FAILED; raw frames and librdkafka
    with enable.idempotence=true."""
    from kafka.admin import NewTopic
    T, C, O = ResourceType.TOPIC, ResourceType.CLUSTER, ACLOperation
    with authz_broker() as b:
        ad = sadmin(b, "admin")
        c = raw(b, "alice")
        try:
            ad.create_topics([NewTopic("idem-1", 1, 1)])
            # READ and DESCRIBE are not WRITE
            grant(ad, (T, "idem-1", O.READ), (T, "idem-1", O.DESCRIBE))
            assert init_producer_id(c)[0] == CAF
            err = idempotent_error(b, "idem-1")
            assert err and "CLUSTER_AUTHORIZATION_FAILED" in err, err
            # WRITE on topics of a prefix: served, and librdkafka delivers
            res = ad.create_acls([acl("User:alice", O.WRITE, ACLPermissionType.ALLOW, T, "idem-",
                                      ACLResourcePatternType.PREFIXED)])
            assert not res["failed"], res
            err, pid = init_producer_id(c)
            assert err == 0 and pid >= 0, (err, pid)
            assert idempotent_error(b, "idem-1") is None
            # a PREFIXED DENY of a shorter prefix dominates that ALLOW
            res = ad.create_acls([acl("User:alice", O.WRITE, ACLPermissionType.DENY, T, "idem",
                                      ACLResourcePatternType.PREFIXED)])
            assert not res["failed"], res
            assert init_producer_id(c)[0] == CAF
            # IDEMPOTENT_WRITE on the cluster serves it whatever the topics say
            grant(ad, (C, "kafka-cluster", O.IDEMPOTENT_WRITE))
            err, pid = init_producer_id(c)
            assert err == 0 and pid >= 0, (err, pid)
        finally:
            c.close()
            ad.close()


@test
def allow_everyone_if_no_acl_found():
    from confluent_kafka import Producer
    with authz_broker(**{"allow.everyone.if.no.acl.found": "true", "auto.create.topics.enable": "true"}) as b:
        ad = sadmin(b, "admin")
        try:
            p = Producer(dict(conf(b, "alice"), **{"message.timeout.ms": 10000,
                                                  "topic.metadata.refresh.interval.ms": 200}))
            assert produce(p, "free") is None   # no ACL names it: allowed (auto-created)
            ad.create_acls([acl("User:admin", ACLOperation.WRITE, ACLPermissionType.ALLOW, ResourceType.TOPIC,
                                "free")])
            wait_for(lambda: produce(p, "free"), "TOPIC_AUTHORIZATION_FAILED", "an ACL on the topic binds")
        finally:
            ad.close()


@test
def a_cluster_replicates_with_the_authorizer(super_users="User:ANONYMOUS"):
    from confluent_kafka import Producer
    from cluster import Cluster, create_topic, same_logs, wait_isrs
    with Cluster(3, sets=("authorizer.class.name=" + AUTHZ, "super.users=" + super_users)) as c:
        create_topic(c.bootstrap, "rep", 1, 3)
        wait_isrs(c.bootstrap, "rep", 3)
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "message.timeout.ms": 20000})
        errs = []
        for i in range(20):
            p.produce("rep", b"v%d" % i, on_delivery=lambda err, msg: errs.append(err))
        p.flush(30)
        assert len(errs) == 20 and not any(errs), errs
        wait_isrs(c.bootstrap, "rep", 3)
        same_logs(c, "rep", 1, [1, 2, 3])


@test
def unknown_authorizer_refused():
    d = temp_dir()
    try:
        r = subprocess.run([SLUICED, "--data-dir", os.path.join(d, "data"), "--listen", "127.0.0.1:%d" % free_port(),
                            "--set", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer"],
                           capture_output=True, timeout=30)
        assert r.returncode == 2, (r.returncode, r.stderr)
        assert b"authorizer.class.name" in r.stderr and b"StandardAuthorizer" in r.stderr, r.stderr
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main("acls")
