"""The final log's record batch headers, over the Kafka protocol: for each
partition of the topics, Fetch v4 (read_uncommitted) from its leader, from
offset 0 to the end the final read found, and a "batch" line per batch in
"final-batches.jsonl" (client "final-batches"): base and last offset,
producer id, producer epoch, base sequence. The checker reads them to tell
a record the client sent again under a new producer epoch (librdkafka's
epoch bump: "client-epoch-bump") from one the broker took twice.

confluent-kafka gives no batch headers, so this is a small client of its
own on plain sockets (the workload's, the drill's: no TLS or SASL, as the
rest of sluicefault). A partition it cannot read is left out with a line
on stderr: its duplicates then stay "duplicated".
"""

import json
import os
import socket
import struct
import sys

FETCH, FETCH_V = 1, 4
MAX_BYTES = 4 << 20


def _str(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _request(sock, corr, body):
    head = struct.pack(">hhi", FETCH, FETCH_V, corr) + _str("sluicefault-batches")
    msg = head + body
    sock.sendall(struct.pack(">i", len(msg)) + msg)
    size = struct.unpack(">i", _recv(sock, 4))[0]
    data = _recv(sock, size)
    if struct.unpack(">i", data[:4])[0] != corr:
        raise OSError("answer to another request")
    return data[4:]


def _recv(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(min(n - len(out), 1 << 20))
        if not chunk:
            raise OSError("connection closed")
        out += chunk
    return out


def parse_headers(records):
    """(base, last, producer id, epoch, base sequence) of each whole batch in
    a Fetch answer's records bytes."""
    out, pos = [], 0
    while pos + 61 <= len(records):
        base, blen = struct.unpack(">qi", records[pos:pos + 12])
        if blen < 49 or pos + 12 + blen > len(records):
            break                        # a batch cut at max_bytes: the next fetch has it
        lod = struct.unpack(">i", records[pos + 23:pos + 27])[0]
        pid, epoch, seq = struct.unpack(">qhi", records[pos + 43:pos + 57])
        out.append((base, base + lod, pid, epoch, seq))
        pos += 12 + blen
    return out


def _fetch_partition(sock, topic, partition, end):
    """The headers of partition's batches up to end (the final read's)."""
    got, offset, corr = [], 0, 1
    while offset < end:
        body = struct.pack(">iiiib", -1, 100, 1, MAX_BYTES, 0) + struct.pack(">i", 1) + _str(topic) + \
            struct.pack(">iiqi", 1, partition, offset, MAX_BYTES)
        r = _request(sock, corr, body)
        corr += 1
        pos = 4 + 4                      # throttle time, one topic
        tlen = struct.unpack(">h", r[pos:pos + 2])[0]
        pos += 2 + tlen + 4              # the topic, one partition
        _p, err, _hw, _lso = struct.unpack(">ihqq", r[pos:pos + 22])
        pos += 22
        naborted = struct.unpack(">i", r[pos:pos + 4])[0]
        pos += 4 + max(naborted, 0) * 16
        rlen = struct.unpack(">i", r[pos:pos + 4])[0]
        pos += 4
        if err:
            raise OSError("Fetch of %s[%d] at %d: error code %d" % (topic, partition, offset, err))
        heads = parse_headers(r[pos:pos + max(rlen, 0)])
        heads = [h for h in heads if h[1] >= offset]
        if not heads:
            break                        # nothing more below the end (a compacted gap, or the end)
        got.extend(heads)
        offset = heads[-1][1] + 1
    return got


def write(bootstrap, ends, out_dir):
    """ends {(topic, partition): end offset}: the headers of every batch
    below each end, into out_dir/final-batches.jsonl. Returns how many
    partitions were read whole."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    done = 0
    with open(os.path.join(out_dir, "final-batches.jsonl"), "w") as f:
        try:
            md = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=30)
        except KafkaException as e:
            print("sluicefault: batch headers not read (metadata: %s): duplicates stay duplicated" % e,
                  file=sys.stderr, flush=True)
            return 0
        brokers = {b.id: (b.host, b.port) for b in md.brokers.values()}
        for (t, p), end in sorted(ends.items()):
            tm = md.topics.get(t)
            pm = tm.partitions.get(p) if tm else None
            try:
                if pm is None or pm.leader not in brokers:
                    raise OSError("no leader known")
                with socket.create_connection(brokers[pm.leader], timeout=30) as s:
                    heads = _fetch_partition(s, t, p, end)
            except (OSError, struct.error) as e:
                print("sluicefault: batch headers of %s[%d] not read (%s): its duplicates stay duplicated"
                      % (t, p, e), file=sys.stderr, flush=True)
                continue
            for base, last, pid, epoch, seq in heads:
                f.write(json.dumps(dict(t=0, client="final-batches", type="batch", node=pm.leader, topic=t,
                                        partition=p, base=base, last=last, producer_id=pid,
                                        producer_epoch=epoch, base_sequence=seq)) + "\n")
            done += 1
    return done
