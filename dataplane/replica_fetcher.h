/* dataplane/replica_fetcher.h — a shard's fetchers: one per leader broker
 * its follower partitions follow (Kafka's ReplicaFetcherThread, one per
 * (shard, leader) here), each a TCP connection of its own to the leader's
 * client listener, on the shard's io_uring, never shared with client
 * connections. A fetcher sends one Fetch (v12, ReplicaId = this node,
 * each partition's current leader epoch, its durable log end as the fetch
 * offset and the epoch of its last batch) for every partition the shard
 * follows from that leader, appends the answer's batches
 * (part_append_replica), takes the leader's high watermark, cuts a
 * divergent tail where the answer names a diverging epoch (KIP-279/320:
 * part_truncate_to), and sends the next Fetch only once what it appended
 * is durable. A lost connection is made again after a back-off (100 ms,
 * doubling to replica.fetch.backoff 1 s). On a secured inter-broker
 * listener (b->peer_sec) the connection first runs TLS and/or SASL
 * (dataplane/peer_session.h) with its own io_uring sends and receives,
 * then its Fetches through OpenSSL's record layer (TLS) or plain; a
 * handshake that fails is logged with why, counted, and made again after
 * the same back-off. When the leader's SaslAuthenticate gives the session
 * a lifetime (KIP-368) the fetcher authenticates again on the same
 * connection between two fetches, at 85-95% of it (a comparison with the
 * shard clock per turn, nothing per batch). PLAINTEXT has no session: the answer is received
 * straight into the input buffer, as before.
 *
 * Two transports behind one seam (struct rf_transport in the .c): that
 * TCP connection, or, where the shard has a DPDK replication queue pair
 * and the leader registered a native replication address, the native
 * protocol's REPLICA_FETCH on that pair (dataplane/native/native_repl.h:
 * each partition asked on its own, its REPLICA_DATA reassembled in one of
 * 8 slots of the fetcher's input buffer, asked again when lost). Both ask
 * with the same fields and take an answer with the same code.
 *
 * Thread: the owner shard (@thread shard): the loop calls
 * replica_fetchers_poll each turn while it holds partitions with a role.
 * Allocates: a fetcher, its buffers (grown for a larger answer, rare)
 * when a leader is first followed, its list of the partitions following
 * that leader (grown on a role change); nothing per fetch or batch
 * (either transport).
 */
#ifndef SLUICE_REPLICA_FETCHER_H
#define SLUICE_REPLICA_FETCHER_H

#include <stdint.h>

struct shard;
struct part;
struct kafka_writer;
struct kafka_fetch_response;

/* Fetch's version and wait: a version the broker serves (4-12). */
#define REPLICA_FETCH_VERSION 12
#define REPLICA_FETCH_WAIT_MS 500        /* replica.fetch.wait.max.ms */
#define REPLICA_FETCH_MAX_BYTES (8u << 20)
#define REPLICA_FETCH_PART_BYTES (1u << 20)   /* replica.fetch.max.bytes */

/* The loop's turn: make fetchers for leaders newly followed, drop those
 * nobody follows, connect, send, read. Returns the work done. */
int replica_fetchers_poll(struct shard *sh);
/* The shard stops: close every fetcher. */
void replica_fetchers_fini(struct shard *sh);

/* ---- the two halves, also for tests ---- */

/* Encode the Fetch for leader `leader` from the partitions of sh that
 * follow it and are ready (everything appended is durable; not cut): into
 * w (measure or write), correlation id corr. Returns how many partitions
 * it names (0: nothing to ask). */
int replica_fetch_build(struct shard *sh, int32_t leader, int32_t corr, struct kafka_writer *w);
/* Take a decoded answer of leader `leader`: append, cut, high
 * watermarks. Returns the bytes appended, or -errno when a partition's
 * log failed. */
int64_t replica_fetch_apply(struct shard *sh, int32_t leader, const struct kafka_fetch_response *r);

#endif
