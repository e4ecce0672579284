#!/usr/bin/python3
"""ACLs with real clients (issue 21, ACLs).

- CreateAcls, DescribeAcls and DeleteAcls from kafka-python's admin client
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
from harness import SLUICED, Broker, broker, free_port, main, run, temp_dir, test  # noqa: E402
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


@test
def create_describe_delete_and_restart():
    with broker(shards=2) as b:
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
            ctl = [os.path.join(os.path.dirname(SLUICED), "sluicectl"), "-b", b.bootstrap]
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


class authz_broker:
    """A broker with the authorizer: PLAINTEXT (readiness; User:ANONYMOUS,
    allowed nothing) and SASL_PLAINTEXT (b.sp) listeners; User:admin a
    super user."""

    def __init__(self, **settings):
        self.settings = settings

    def __enter__(self):
        port, sp = free_port(), free_port()
        s = {"listeners": "PLAINTEXT://127.0.0.1:%d,SASL_PLAINTEXT://127.0.0.1:%d" % (port, sp),
             "sasl.enabled.mechanisms": "SCRAM-SHA-256", "authorizer.class.name": AUTHZ,
             "super.users": "User:admin", "auto.create.topics.enable": "false"}
        s.update(self.settings)
        self.b = Broker(temp_dir(), shards=2, settings=s, port=port, args=SCRAM)
        self.b.sp = "127.0.0.1:%d" % sp
        try:
            self.b.start()
        except BaseException:
            shutil.rmtree(self.b.workdir, ignore_errors=True)
            raise
        return self.b

    def __exit__(self, et, ev, tb):
        try:
            if self.b.proc is not None:
                self.b.stop() if et is None else self.b.kill()
        finally:
            shutil.rmtree(self.b.workdir, ignore_errors=True)
        return False


def conf(b, user):
    return {"bootstrap.servers": b.sp, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-256",
            "sasl.username": user, "sasl.password": user + "-pw"}


def sadmin(b, user):
    return KafkaAdminClient(bootstrap_servers=b.sp, security_protocol="SASL_PLAINTEXT",
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
                acl("User:alice", ACLOperation.WRITE, ACLPermissionType.DENY, ResourceType.TOPIC, "team-secret")])
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
            assert commit_error(b, "alice", "orders", "g-bob") == "GROUP_AUTHORIZATION_FAILED"
            # a DENY wins over the ALLOW just given
            ad.create_acls([acl("User:*", ACLOperation.ALL, ACLPermissionType.DENY, ResourceType.TOPIC, "other")])
            wait_for(lambda: produce(p, "other"), "TOPIC_AUTHORIZATION_FAILED", "a DENY wins")
            assert produce(p, "orders") is None
            # the super user is not bound by the DENY
            pa = Producer(conf(b, "admin"))
            assert produce(pa, "other") is None
        finally:
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
