#!/usr/bin/python3
"""ACLs with real clients (issue 21, ACLs).

- CreateAcls, DescribeAcls and DeleteAcls from kafka-python's admin client
  (Debian's confluent-kafka 1.7 has no ACL calls): bindings of each
  resource type and pattern are created, a duplicate is no error, an
  invalid one (an ANY operation) is INVALID_REQUEST; DescribeAcls filters
  by resource, pattern (MATCH finds the PREFIXED and LITERAL "*" bindings
  that apply to a name), principal and permission; DeleteAcls removes what
  a filter matches and lists it; the bindings survive a restart (the
  metadata log's ACL and REMOVE_ACL records).

    /usr/bin/python3 tests/integration/test_acls.py [test ...]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import broker, main, test  # noqa: E402

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
        finally:
            ad.close()


if __name__ == "__main__":
    main("acls")
