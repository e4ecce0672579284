"""kraw: a minimal raw Kafka client for the group tests (struct, classic
non-flexible encodings: request header v1, response header v0; the
flexible ones' varints and compact strings are helpers below, for the
tests that frame a flexible request themselves).

    c = Conn(b.bootstrap)
    r = c.join_group("g", protocols=[("range", subscription(["t"]))])
    assert r.error == 0

Every request helper returns a small object with the decoded fields so the
tests can assert exact error codes. The versions used are the ones the test
clients send (kafka-python: JoinGroup 2, SyncGroup 1, Heartbeat 1,
LeaveGroup 1, OffsetCommit 2, OffsetFetch 1); others can be asked for.
"""

import socket
import struct
from types import SimpleNamespace as NS

# Kafka error codes used by the group tests
NONE = 0
UNKNOWN_SERVER_ERROR = -1
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
RECORD_LIST_TOO_LARGE = 18
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
UNSUPPORTED_VERSION = 35
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
GROUP_SUBSCRIBED_TO_TOPIC = 86

API_VERSIONS, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 18, 3, 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, CREATE_TOPICS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 19, 42, 47


class W:
    def __init__(self):
        self.b = bytearray()

    def i8(self, v):
        self.b += struct.pack(">b", v)
        return self

    def i16(self, v):
        self.b += struct.pack(">h", v)
        return self

    def i32(self, v):
        self.b += struct.pack(">i", v)
        return self

    def i64(self, v):
        self.b += struct.pack(">q", v)
        return self

    def str(self, s):
        if s is None:
            return self.i16(-1)
        if isinstance(s, str):
            s = s.encode()
        self.i16(len(s))
        self.b += s
        return self

    def bytes(self, v):
        if v is None:
            return self.i32(-1)
        self.i32(len(v))
        self.b += v
        return self

    def array(self, items, fn):
        if items is None:
            return self.i32(-1)
        self.i32(len(items))
        for it in items:
            fn(self, it)
        return self


class R:
    def __init__(self, b):
        self.b = bytes(b)
        self.o = 0

    def _u(self, fmt, n):
        if self.o + n > len(self.b):
            raise ValueError("response truncated at %d (+%d of %d)" % (self.o, n, len(self.b)))
        v = struct.unpack_from(fmt, self.b, self.o)[0]
        self.o += n
        return v

    def i8(self):
        return self._u(">b", 1)

    def i16(self):
        return self._u(">h", 2)

    def i32(self):
        return self._u(">i", 4)

    def i64(self):
        return self._u(">q", 8)

    def str(self):
        n = self.i16()
        if n < 0:
            return None
        v = self.b[self.o:self.o + n]
        if len(v) != n:
            raise ValueError("string truncated")
        self.o += n
        return v.decode("utf-8", "replace")

    def bytes(self):
        n = self.i32()
        if n < 0:
            return None
        v = self.b[self.o:self.o + n]
        if len(v) != n:
            raise ValueError("bytes truncated")
        self.o += n
        return v

    def array(self, fn):
        n = self.i32()
        if n < 0:
            return None
        return [fn(self) for _ in range(n)]

    def done(self):
        if self.o != len(self.b):
            raise ValueError("%d bytes left over in the response" % (len(self.b) - self.o))


# ---- flexible encodings (KIP-482): unsigned varints, compact strings ---------

def uvarint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def read_uvarint(r):
    v = shift = 0
    while True:
        b = r.b[r.o]
        r.o += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v


def compact_str(s):
    s = s.encode()
    return uvarint(len(s) + 1) + s


def read_compact_str(r):
    """A compact (nullable) string: None for null."""
    n = read_uvarint(r) - 1
    if n < 0:
        return None
    v = r.b[r.o:r.o + n]
    if len(v) != n:
        raise ValueError("string truncated")
    v = v.decode()
    r.o += n
    return v


# ---- the consumer protocol (opaque bytes inside JoinGroup/SyncGroup) -------

def subscription(topics, user_data=None):
    return bytes(W().i16(0).array(topics, W.str).bytes(user_data).b)


def assignment(parts, user_data=None):
    """parts: {topic: [partition...]}"""
    w = W().i16(0)
    w.array(sorted(parts.items()), lambda w, tp: w.str(tp[0]).array(tp[1], W.i32))
    return bytes(w.bytes(user_data).b)


def parse_assignment(b):
    r = R(b)
    r.i16()
    parts = r.array(lambda r: (r.str(), r.array(R.i32)))
    return {t: p for t, p in parts}


class Conn:
    def __init__(self, bootstrap, client_id="kraw", timeout=60.0):
        host, port = bootstrap.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=timeout)
        self.client_id = client_id
        self.corr = 0

    def close(self):
        self.s.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def send(self, api, ver, body):
        self.corr += 1
        hdr = W().i16(api).i16(ver).i32(self.corr).str(self.client_id)
        msg = bytes(hdr.b) + bytes(body)
        self.s.sendall(struct.pack(">i", len(msg)) + msg)
        return self.corr

    def _recvn(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.s.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("connection closed by the broker after %d of %d bytes" % (len(buf), n))
            buf += chunk
        return bytes(buf)

    def recv(self, corr):
        n = struct.unpack(">i", self._recvn(4))[0]
        body = self._recvn(n)
        got = struct.unpack_from(">i", body)[0]
        if got != corr:
            raise ValueError("correlation id %d, expected %d" % (got, corr))
        return R(body[4:])

    def request(self, api, ver, w):
        return self.recv(self.send(api, ver, w.b))

    def request_flex(self, api, ver, body):
        """A flexible request (header v2: no tagged fields) of the bytes
        `body`; the response after its header v1's (empty) tagged fields."""
        self.corr += 1
        hdr = W().i16(api).i16(ver).i32(self.corr).str(self.client_id).b + b"\x00"
        msg = bytes(hdr) + bytes(body)
        self.s.sendall(struct.pack(">i", len(msg)) + msg)
        r = self.recv(self.corr)
        if read_uvarint(r) != 0:
            raise ValueError("tagged fields in the response header")
        return r

    # ---- APIs --------------------------------------------------------------

    def api_versions(self):
        r = self.request(API_VERSIONS, 0, W())
        err = r.i16()
        apis = r.array(lambda r: (r.i16(), r.i16(), r.i16()))
        return NS(error=err, apis={k: (lo, hi) for k, lo, hi in apis})

    def create_topic(self, name, partitions):
        w = W().array([name], lambda w, n: w.str(n).i32(partitions).i16(1).i32(0).i32(0)).i32(30000)
        r = self.request(CREATE_TOPICS, 0, w)
        res = r.array(lambda r: (r.str(), r.i16()))
        return dict(res)[name]

    def find_coordinator(self, key, ver=0, key_type=0):
        w = W().str(key)
        if ver >= 1:
            w.i8(key_type)
        r = self.request(FIND_COORDINATOR, ver, w)
        if ver >= 1:
            r.i32()
        err = r.i16()
        if ver >= 1:
            r.str()
        return NS(error=err, node=r.i32(), host=r.str(), port=r.i32())

    def join_group(self, group, member_id="", protocol_type="consumer", protocols=None,
                   session_ms=30000, rebalance_ms=30000, ver=2, instance_id=None):
        if protocols is None:
            protocols = [("range", subscription(["t"]))]
        w = W().str(group).i32(session_ms)
        if ver >= 1:
            w.i32(rebalance_ms)
        w.str(member_id)
        if ver >= 5:
            w.str(instance_id)
        w.str(protocol_type)
        w.array(protocols, lambda w, p: w.str(p[0]).bytes(p[1]))
        r = self.request(JOIN_GROUP, ver, w)
        if ver >= 2:
            r.i32()
        res = NS(error=r.i16(), generation=r.i32(), protocol=r.str(), leader=r.str(), member_id=r.str())

        def member(r):
            m = NS(member_id=r.str(), instance_id=None)
            if ver >= 5:
                m.instance_id = r.str()
            m.metadata = r.bytes()
            return m
        res.members = r.array(member)
        r.done()
        return res

    def sync_group(self, group, generation, member_id, assignments=(), ver=1, instance_id=None):
        w = W().str(group).i32(generation).str(member_id)
        if ver >= 3:
            w.str(instance_id)
        w.array(list(assignments), lambda w, a: w.str(a[0]).bytes(a[1]))
        r = self.request(SYNC_GROUP, ver, w)
        if ver >= 1:
            r.i32()
        res = NS(error=r.i16(), assignment=r.bytes())
        r.done()
        return res

    def heartbeat(self, group, generation, member_id, ver=1, instance_id=None):
        w = W().str(group).i32(generation).str(member_id)
        if ver >= 3:
            w.str(instance_id)
        r = self.request(HEARTBEAT, ver, w)
        if ver >= 1:
            r.i32()
        err = r.i16()
        r.done()
        return err

    def leave_group(self, group, member_id, ver=1):
        w = W().str(group).str(member_id)
        r = self.request(LEAVE_GROUP, ver, w)
        if ver >= 1:
            r.i32()
        err = r.i16()
        r.done()
        return err

    def offset_commit(self, group, offsets, generation=-1, member_id="", ver=2, commit_ts=-1):
        """offsets: {(topic, partition): (offset, metadata)}; returns
        {(topic, partition): error}. commit_ts: v1's per-partition commit
        timestamp (-1: the broker's clock)."""
        by_topic = {}
        for (t, p), v in sorted(offsets.items()):
            by_topic.setdefault(t, []).append((p, v))
        w = W().str(group)
        if ver >= 1:
            w.i32(generation).str(member_id)
        if 2 <= ver <= 4:
            w.i64(-1)  # retention time: the broker's default

        def part(w, pv):
            p, (off, meta) = pv
            w.i32(p).i64(off)
            if ver == 1:
                w.i64(commit_ts)
            w.str(meta)
        w.array(list(by_topic.items()), lambda w, tv: w.str(tv[0]).array(tv[1], part))
        r = self.request(OFFSET_COMMIT, ver, w)
        if ver >= 3:
            r.i32()
        out = {}
        for t, parts in r.array(lambda r: (r.str(), r.array(lambda r: (r.i32(), r.i16())))):
            for p, e in parts:
                out[(t, p)] = e
        r.done()
        return out

    def offset_fetch(self, group, parts, ver=1):
        """parts: {topic: [partition...]} (None = all, v2+); returns
        ({(topic, partition): (offset, metadata, error)}, top-level error)."""
        w = W().str(group)
        w.array(None if parts is None else sorted(parts.items()),
                lambda w, tp: w.str(tp[0]).array(tp[1], W.i32))
        r = self.request(OFFSET_FETCH, ver, w)
        if ver >= 3:
            r.i32()
        out = {}

        def part(r):
            p = r.i32()
            off = r.i64()
            if ver >= 5:
                r.i32()
            return p, off, r.str(), r.i16()
        for t, ps in r.array(lambda r: (r.str(), r.array(part))):
            for p, off, meta, e in ps:
                out[(t, p)] = (off, meta, e)
        top = r.i16() if ver >= 2 else 0
        r.done()
        return out, top

    def list_groups(self, ver=0):
        r = self.request(LIST_GROUPS, ver, W())
        if ver >= 1:
            r.i32()
        err = r.i16()
        groups = r.array(lambda r: (r.str(), r.str()))
        r.done()
        return err, dict(groups)

    def describe_groups(self, groups, ver=0, include_ops=False):
        """ver 0-4 (non-flexible); include_ops: v3+'s
        IncludeAuthorizedOperations, answered per group as .ops"""
        w = W().array(groups, W.str)
        if ver >= 3:
            w.i8(1 if include_ops else 0)
        r = self.request(DESCRIBE_GROUPS, ver, w)
        if ver >= 1:
            r.i32()

        def member(r):
            m = NS(member_id=r.str())
            if ver >= 4:
                m.instance_id = r.str()
            m.client_id, m.client_host = r.str(), r.str()
            m.metadata, m.assignment = r.bytes(), r.bytes()
            return m

        def group(r):
            g = NS(error=r.i16(), group_id=r.str(), state=r.str(), protocol_type=r.str(),
                   protocol=r.str(), members=r.array(member))
            if ver >= 3:
                g.ops = r.i32()
            return g
        res = r.array(group)
        r.done()
        return {g.group_id: g for g in res}

    def delete_groups(self, groups, ver=0):
        r = self.request(DELETE_GROUPS, ver, W().array(groups, W.str))
        r.i32()
        res = dict(r.array(lambda r: (r.str(), r.i16())))
        r.done()
        return res

    def offset_delete(self, group, parts):
        w = W().str(group).array(sorted(parts.items()), lambda w, tp: w.str(tp[0]).array(tp[1], W.i32))
        r = self.request(OFFSET_DELETE, 0, w)
        top = r.i16()
        r.i32()
        out = {}
        for t, ps in r.array(lambda r: (r.str(), r.array(lambda r: (r.i32(), r.i16())))):
            for p, e in ps:
                out[(t, p)] = e
        r.done()
        return top, out


def describe_quorum(port):
    """DescribeQuorum v0 (flexible) of __cluster_metadata on 127.0.0.1:port:
    (leader, epoch, [voter ids]), every error asserted 0."""
    body = uvarint(2) + compact_str("__cluster_metadata") + uvarint(2) + W().i32(0).b + b"\x00" * 3
    with Conn("127.0.0.1:%d" % port) as c:
        r = c.request_flex(55, 0, body)
        assert r.i16() == 0
        assert read_uvarint(r) == 2 and read_compact_str(r) == "__cluster_metadata"
        assert read_uvarint(r) == 2 and r.i32() == 0
        assert r.i16() == 0
        leader, epoch, _hw = r.i32(), r.i32(), r.i64()
        voters = []
        for _ in range(read_uvarint(r) - 1):
            voters.append(r.i32())
            r.i64()
            assert read_uvarint(r) == 0
        return leader, epoch, sorted(voters)
