#!/usr/bin/python3
"""tests/kafka/kpy_oracle.py — kafka-python 2.0.2 (Debian's python3-kafka,
kafka.protocol) as an independent oracle for Sluice's generated codec.

    kpy_oracle.py encode DIR [PER]   write PER random instances of every
                                     request/response class kafka-python has
    kpy_oracle.py check DIR          decode every file Sluice wrote with the
                                     matching kafka-python class, re-encode,
                                     and require identical bytes

Files are named {req,resp}-KEY-VERSION-N.bin and hold a message body (no
size prefix, no header). kafka-python knows no nullability, so the encoder
never writes nulls; Sluice's samples do, where the JSON allows them.
"""
import importlib
import io
import os
import random
import sys

from kafka.protocol.api import Request, Response
from kafka.protocol import types as T

MODULES = ["admin", "commit", "fetch", "group", "metadata", "offset", "produce"]


def classes():
    out = {}
    for mod in MODULES:
        m = importlib.import_module("kafka.protocol." + mod)
        for obj in vars(m).values():
            if not isinstance(obj, type):
                continue
            for base, kind in ((Request, "req"), (Response, "resp")):
                if issubclass(obj, base) and obj is not base:
                    try:
                        key, ver = obj.API_KEY, obj.API_VERSION
                    except Exception:
                        continue
                    if isinstance(key, int) and isinstance(ver, int):
                        out[(kind, key, ver)] = obj
    return out


# kafka-python 2.0.2 schemas that disagree with Apache Kafka's JSON (checked
# by hand against ../shared/kafka-protocol/messages); the oracle reports
# them instead of failing on them.
KNOWN_DEFECTS = {
    ("req", 2, 4): "OffsetRequest_v4 declares current_leader_epoch Int64 (JSON: CurrentLeaderEpoch "
                   "int32, 4+)",
    ("resp", 10, 1): "GroupCoordinatorResponse_v1 lacks ThrottleTimeMs (JSON: versions 1+)",
    ("resp", 15, 3): "DescribeGroupsResponse_v3 puts authorized_operations at top level "
                     "(JSON: AuthorizedOperations inside each DescribedGroup, 3+)",
    ("resp", 32, 1): "DescribeConfigsResponse_v1 has is_default (JSON: IsDefault only v0, "
                     "ConfigSource int8 from v1)",
}


def broken(t):
    """kafka-python 2.0.2 defect: FetchRequest v7-v10 declare a field as the
    String class instead of an instance, so any non-empty array of it fails
    to encode or decode there."""
    if t is T.String:
        return True
    if isinstance(t, T.Schema):
        return any(broken(f) for f in t.fields)
    if isinstance(t, T.Array):
        return broken(t.array_of)
    return False


def value(t, rnd, depth=0):
    if isinstance(t, T.Array) and broken(t.array_of):
        return []
    if isinstance(t, T.Schema):
        return tuple(value(f, rnd, depth + 1) for f in t.fields)
    if isinstance(t, T.Array):
        return [value(t.array_of, rnd, depth + 1) for _ in range(rnd.randrange(0, 4 if depth < 4 else 1))]
    if t is T.Int8 or isinstance(t, T.Int8):
        return rnd.randrange(-128, 128)
    if t is T.Int16 or isinstance(t, T.Int16):
        return rnd.choice([0, -1, 1, rnd.randrange(-2**15, 2**15)])
    if t is T.Int32 or isinstance(t, T.Int32):
        return rnd.choice([0, -1, 7, rnd.randrange(-2**31, 2**31)])
    if t is T.Int64 or isinstance(t, T.Int64):
        return rnd.choice([0, -1, rnd.randrange(-2**63, 2**63)])
    if t is T.Boolean or isinstance(t, T.Boolean):
        return rnd.random() < 0.5
    if isinstance(t, T.String):
        return "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz-_.") for _ in range(rnd.randrange(0, 12)))
    if t is T.Bytes or isinstance(t, T.Bytes):
        return bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 40)))
    raise TypeError("unhandled kafka-python type %r" % (t,))


def encode(d, per):
    os.makedirs(d, exist_ok=True)
    rnd = random.Random(20240917)
    n = 0
    for (kind, key, ver), cls in sorted(classes().items()):
        if (kind, key, ver) in KNOWN_DEFECTS:
            continue               # its bytes are not Kafka's: nothing to hand Sluice
        for i in range(per):
            vals = value(cls.SCHEMA, rnd)
            obj = cls(*vals)
            data = obj.encode()
            with open(os.path.join(d, "%s-%d-%d-%d.bin" % (kind, key, ver, i)), "wb") as f:
                f.write(data)
            n += 1
    print("kpy-oracle: kafka-python wrote %d messages (%d classes)" % (n, len(classes())))


def check(d):
    cls_by = classes()
    ok = skipped = bad = defect = 0
    for fn in sorted(os.listdir(d)):
        if not fn.endswith(".bin"):
            continue
        kind, key, ver, _ = fn[:-4].split("-")
        cls = cls_by.get((kind, int(key), int(ver)))
        if cls is None:
            skipped += 1
            continue
        if (kind, int(key), int(ver)) in KNOWN_DEFECTS:
            defect += 1
            continue
        with open(os.path.join(d, fn), "rb") as f:
            data = f.read()
        buf = io.BytesIO(data)
        try:
            obj = cls.decode(buf)
            again = obj.encode()
        except Exception as e:  # a misreading shows up as a decode error
            if broken(cls.SCHEMA):
                defect += 1
                continue
            print("kpy-oracle: %s: kafka-python cannot decode Sluice's bytes: %r" % (fn, e))
            bad += 1
            continue
        if buf.tell() != len(data) or again != data:
            print("kpy-oracle: %s: kafka-python read %d of %d bytes, re-encoded %s" % (
                fn, buf.tell(), len(data), "identically" if again == data else "differently"))
            bad += 1
            continue
        ok += 1
    print("kpy-oracle: kafka-python decoded and re-encoded %d Sluice messages byte for byte, "
          "%d failed, %d skipped (no kafka-python class), %d skipped (kafka-python defect)" % (
              ok, bad, skipped, defect))
    for k, why in sorted(KNOWN_DEFECTS.items()):
        print("kpy-oracle: not compared, kafka-python defect: %s" % why)
    return 1 if bad or not ok else 0


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "encode":
        encode(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 4)
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "check":
        return check(sys.argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
