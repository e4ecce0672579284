/* dataplane/native/native_broker.h — the broker's side of the native
 * datagram protocol (native_format.h), on the shards.
 *
 * Each shard owns, for the native path: a datagram transport (today the
 * kernel's UDP, one socket per shard bound with SO_REUSEPORT to
 * native.listen, so the kernel keeps a client's flow on one shard; the DPDK
 * queue pair of the shard is the next transport), its sessions, the
 * reassembly of fragmented batches, and the buffers datagrams live in.
 *
 * A PRODUCE is validated as Kafka's Produce validates a batch, then appended
 * by the partition's owner shard through the same idempotent producer state
 * (a resent batch is acknowledged with its first offset and appended once);
 * the PRODUCE_ACK leaves from the receiving shard when the batch is durable
 * per log.durability. A FETCH is served by the owner shard, which reads
 * (tail or disk) and sends the FETCH_DATA datagrams itself from its own
 * socket on the same port.
 *
 * Thread: the owning shard (@thread shard), except native_shard_open
 * (@thread main, at shard creation). Owns: its socket, session table,
 * buffer pools (allocated at open, never per datagram). Errors: -errno;
 * bad datagrams are counted and answered with ERROR, never fatal.
 */
#ifndef SLUICE_NATIVE_BROKER_H
#define SLUICE_NATIVE_BROKER_H

#include <stddef.h>
#include <stdint.h>

#include "dataplane/native/native_format.h"

struct shard;

struct native_stats {
	uint64_t datagrams_in, datagrams_out, bytes_in;
	uint64_t rejected[NATIVE_E_COUNT];    /* unreadable datagrams, by reason */
	uint64_t unknown_session, wrong_peer, unknown_producer, credits_exceeded;
	uint64_t sessions_opened, sessions_expired, sessions_full;
	uint64_t batches, batches_fragmented, duplicates_acked, produce_errors;
	uint64_t reassembly_timeouts, reassembly_full, fragments_duplicate, fragments_bad;
	uint64_t fetches, fetch_datagrams, fetch_busy;
	uint64_t send_errors, rx_pool_empty;
};

/* @thread main. Bind this shard's socket (SO_REUSEPORT) to host:port and
 * allocate its pools. -errno with err filled (naming the address). */
int native_shard_open(struct shard *sh, const char *host, int port, char *err, size_t errlen);
/* The socket to poll for readability (io_uring), or -1. */
int native_shard_fd(const struct shard *sh);
/* Read and serve what is waiting (up to a batch); returns the datagrams
 * handled (0: nothing). Never blocks. */
int native_shard_poll(struct shard *sh);
/* Timers: expire idle sessions and stale reassemblies (slow path). */
void native_shard_tick(struct shard *sh);
/* One line of counters for the broker's log (no newline). */
int native_shard_describe(const struct shard *sh, char *buf, size_t len);
void native_shard_close(struct shard *sh);

#endif
