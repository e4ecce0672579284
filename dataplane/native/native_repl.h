/* dataplane/native/native_repl.h — replication over the shards' DPDK
 * replication queue pairs (dpdk.enable): the native protocol's
 * REPLICA_FETCH and REPLICA_DATA (native_format.h).
 *
 * The leader's side: a REPLICA_FETCH that reached any shard (its
 * replication pair, or on net_tap any pair) is checked against the
 * metadata (the partition led here, the replica one of its followers, as
 * the Fetch handler checks), then served by the partition's owner with
 * the same leader logic as Kafka's replica Fetch (part_role.c:
 * part_fetch_epoch_check, part_role_replica_fetch, part_role_fetch_ready,
 * part_role_note_sent; part_read up to the log end): an error, a
 * diverging epoch, or the records from the fetch offset with the high
 * watermark; with nothing new it is held (max_wait_ms) and answered as
 * soon as the log end or the high watermark moves. The REPLICA_DATA train
 * leaves by the queue pair the fetch came in on (net_memif joins pair i of
 * one end to pair i of the other), from the owner's read buffer.
 *
 * The follower's side is the fetcher's (dataplane/replica_fetcher.c, its
 * native transport): it sends with native_repl_send and takes the answers
 * through the receiver it set (a callback: this layer never calls up).
 *
 * Thread: the owning shard (@thread shard); state per shard, reached
 * through its native engine. Allocates: its fetch slots, at the shard's
 * start; nothing per datagram or batch.
 */
#ifndef SLUICE_NATIVE_REPL_H
#define SLUICE_NATIVE_REPL_H

#include <stddef.h>
#include <stdint.h>

#include "dataplane/native/native_format.h"

struct shard;
struct native_repl;

/* Where a replication datagram came from, and by which queue pair
 * (0: the client pair, 1: the replication pair) it answers. */
struct native_repl_peer {
	uint32_t ip;                  /* network order */
	uint16_t port;                /* host order */
	uint8_t q;
};

struct native_repl_stats {
	uint64_t fetches_in;          /* leader: REPLICA_FETCH served */
	uint64_t fetches_refused;     /* ...answered with an error (not a follower, epoch, range) */
	uint64_t fetches_parked;      /* ...held for new data */
	uint64_t fetches_busy;        /* ...dropped: every slot taken (the follower asks again) */
	uint64_t fetches_handed;      /* leader: REPLICA_FETCH that came by this shard's queue for
				       * another shard's partition, handed to its owner */
	uint64_t data_for_others;     /* leader: answers of another shard's partition sent from
				       * this shard's queue (the one the fetch came by) */
	uint64_t data_out, bytes_out; /* leader: REPLICA_DATA datagrams and record bytes sent */
	uint64_t fetches_out;         /* follower: REPLICA_FETCH sent */
	uint64_t data_in;             /* follower: REPLICA_DATA taken */
	uint64_t data_stray;          /* follower: REPLICA_DATA nobody waits for */
};

/* ---- the native engine's side (native_broker.c) ---- */

/* The shard's state; send(sh, to, dg, len) puts a datagram on the queue
 * pair to->q: 0, or -errno (counted there). max_datagram: the largest
 * datagram that pair carries. NULL: no memory. */
struct native_repl *native_repl_new(struct shard *sh,
				    int (*send)(struct shard *sh, const struct native_repl_peer *to, const uint8_t *dg,
						int len),
				    uint16_t max_datagram);
void native_repl_free(struct native_repl *r);
/* A parsed REPLICA_FETCH or REPLICA_DATA that reached this shard. */
void native_repl_datagram(struct shard *sh, const struct native_msg *m, const struct native_repl_peer *from);
/* The loop's turn on an owner: fetches held for new data that may answer
 * now. Returns the work done. */
int native_repl_poll(struct shard *sh);
/* One clause of counters for the shard's line (no newline). */
int native_repl_describe(const struct shard *sh, char *buf, size_t len);
const struct native_repl_stats *native_repl_stats(const struct shard *sh);

/* ---- the follower's side (replica_fetcher.c) ---- */

/* The largest REPLICA_DATA this shard's replication pair takes, or 0: no
 * native replication here (no DPDK, or the port has no replication
 * pairs). */
uint16_t native_repl_max_datagram(const struct shard *sh);
/* The answers: fn(arg, m) for each REPLICA_DATA whose request number's
 * top byte is this shard (one receiver per shard). */
void native_repl_set_receiver(struct shard *sh, void (*fn)(void *arg, const struct native_msg *m), void *arg);
/* A REPLICA_FETCH to the leader at ip (network order):port from the
 * replication pair. 0, or -errno (the frame could not be queued: the
 * fetcher asks again after its timeout). */
int native_repl_send(struct shard *sh, uint32_t ip, uint16_t port, uint32_t request, const char *topic,
		     size_t topic_len, const struct native_replica_fetch *f);

#endif
