#!/usr/bin/python3
"""DescribeCluster (ApiKey 60, KIP-700; v1 adds EndpointType, KIP-919)
over raw frames against a real sluiced, checked field by field against
what Kafka answers:

- v0 and v1 describe the same cluster as Metadata: its cluster id, this
  node as the controller (a combined broker and controller), and this node
  as the one broker at its advertised client address, with broker.rack or
  a null rack;
- ClusterAuthorizedOperations is INT32_MIN unless asked for; asked for,
  with no authorizer, Kafka answers every operation the cluster resource
  supports (CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS,
  ALTER_CONFIGS, IDEMPOTENT_WRITE);
- v1 asking for the controllers (EndpointType 2) of a broker listener is
  MISMATCHED_ENDPOINT_TYPE, any type but 1 and 2 UNSUPPORTED_ENDPOINT_TYPE,
  each with Kafka's message and an otherwise empty answer;
- ApiVersions advertises 60 at 0-1, and a version beyond the JSON's is
  refused as every other unserved version is.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import broker, free_port, main, test  # noqa: E402
from kraw import W, Conn, read_compact_str, read_uvarint  # noqa: E402

METADATA, DESCRIBE_CLUSTER = 3, 60
MISMATCHED_ENDPOINT_TYPE, UNSUPPORTED_ENDPOINT_TYPE = 114, 115
INT32_MIN = -(1 << 31)
# AclOperation codes: CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9,
# DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12
CLUSTER_OPS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def describe_cluster(c, ver, include_ops=False, endpoint_type=None):
    """DescribeCluster v0/v1 (flexible from v0). EndpointType is sent at
    v1 (1 unless given)."""
    body = bytes([1 if include_ops else 0])
    if ver >= 1:
        body += (1 if endpoint_type is None else endpoint_type).to_bytes(1, "big", signed=True)
    body += b"\x00"
    r = c.request_flex(DESCRIBE_CLUSTER, ver, body)
    res = {"throttle": r.i32(), "error": r.i16(), "message": read_compact_str(r)}
    if ver >= 1:
        res["endpoint_type"] = r.i8()
    res["cluster_id"] = read_compact_str(r)
    res["controller"] = r.i32()
    brokers = []
    for _ in range(read_uvarint(r) - 1):
        brokers.append((r.i32(), read_compact_str(r), r.i32(), read_compact_str(r)))
        assert read_uvarint(r) == 0, "broker tagged fields"
    res["brokers"] = brokers
    res["ops"] = r.i32()
    assert read_uvarint(r) == 0, "body tagged fields"
    r.done()
    return res


def metadata(c):
    """Metadata v4 with no topics: (brokers, cluster id, controller)."""
    r = c.request(METADATA, 4, W().array([], W.str).i8(0))
    r.i32()
    brokers = r.array(lambda r: (r.i32(), r.str(), r.i32(), r.str()))
    cluster, controller = r.str(), r.i32()
    r.array(lambda r: None)
    r.done()
    return brokers, cluster, controller


def check_describes_this_node(settings, node, host, rack, port=None):
    with broker(shards=2, port=port, settings=settings) as b:
        c = Conn(b.bootstrap)
        brokers, cluster, controller = metadata(c)
        port = port or b.port
        assert brokers == [(node, host, port, rack)], brokers
        assert controller == node and cluster, (controller, cluster)
        for ver in (0, 1):
            d = describe_cluster(c, ver)
            assert d["throttle"] == 0 and d["error"] == 0 and d["message"] is None, d
            assert d.get("endpoint_type", 1) == 1, d
            assert d["cluster_id"] == cluster, (d, cluster)
            assert d["controller"] == node, d
            assert d["brokers"] == brokers, (d, brokers)
            assert d["ops"] == INT32_MIN, d
            assert describe_cluster(c, ver, include_ops=True)["ops"] == CLUSTER_OPS
        c.close()


@test
def describe_cluster_v0_v1_describe_this_node_as_metadata_does():
    check_describes_this_node(None, 1, "127.0.0.1", None)


@test
def describe_cluster_gives_the_rack_node_id_and_advertised_address():
    p = free_port()
    check_describes_this_node({"broker.rack": "r1", "node.id": "7",
                               "advertised.listeners": "PLAINTEXT://localhost:%d" % p},
                              7, "localhost", "r1", port=p)


@test
def describe_cluster_v1_refuses_other_endpoint_types_as_kafka_does():
    with broker() as b:
        c = Conn(b.bootstrap)
        empty = {"throttle": 0, "endpoint_type": 1, "cluster_id": "", "controller": -1, "brokers": [],
                 "ops": INT32_MIN}
        d = describe_cluster(c, 1, endpoint_type=2)
        assert d == dict(empty, error=MISMATCHED_ENDPOINT_TYPE,
                         message="The request was sent to an endpoint of type BROKER, "
                                 "but we wanted an endpoint of type CONTROLLER"), d
        for t in (0, 3, -1):
            d = describe_cluster(c, 1, include_ops=True, endpoint_type=t)
            assert d == dict(empty, error=UNSUPPORTED_ENDPOINT_TYPE,
                             message="Unsupported endpoint type %d" % t), d
        # the connection still serves
        assert describe_cluster(c, 1)["error"] == 0
        c.close()


@test
def api_versions_advertises_describe_cluster_0_1_and_v2_is_refused():
    with broker() as b:
        c = Conn(b.bootstrap)
        av = c.api_versions()
        assert av.error == 0 and av.apis.get(DESCRIBE_CLUSTER) == (0, 1), av.apis.get(DESCRIBE_CLUSTER)
        # v2 (Kafka 4.0, IncludeFencedBrokers) is not in the JSON the codec
        # is built from: there is no frame to answer it in, and the broker
        # closes the connection as Kafka does for a version it does not know
        c.send(DESCRIBE_CLUSTER, 2, b"")
        try:
            got = c.s.recv(1)
        except ConnectionError:
            got = b""
        assert got == b"", "DescribeCluster v2 was answered"
        c.close()
        c = Conn(b.bootstrap)
        assert describe_cluster(c, 0)["error"] == 0
        c.close()


if __name__ == "__main__":
    main("describe_cluster")
