/* dataplane/native/native_broker.h — the broker's side of the native
 * datagram protocol (native_format.h), on the shards.
 *
 * Each shard owns, for the native path: its datagram transports — the
 * kernel's UDP (one socket per shard bound with SO_REUSEPORT to
 * native.listen, so the kernel keeps a client's flow on one shard) and,
 * with dpdk.enable, its queue pairs on the DPDK port (dpdk.listen; a
 * netstack on each answers ARP and ping, checks IPv4/UDP) — its sessions,
 * the reassembly of fragmented batches, and the buffers datagrams live in.
 * A session answers through the transport its HELLO came by. A DPDK
 * datagram the port hashed to another shard than its session's is passed
 * to that shard through the shard ring (the mbuf travels, not a copy).
 *
 * A PRODUCE is validated as Kafka's Produce validates a batch, then appended
 * by the partition's owner shard through the same idempotent producer state
 * (a resent batch is acknowledged with its first offset and appended once);
 * the PRODUCE_ACK leaves from the receiving shard when the batch is durable
 * per log.durability. A FETCH is served by the owner shard, which reads
 * (tail or disk) and sends the FETCH_DATA datagrams itself from its own
 * socket on the same port.
 *
 * REPLICA_FETCH and REPLICA_DATA (broker to broker, on any pair, the
 * replication pair where the port keeps flows apart) go to native_repl.c
 * (dataplane/native/native_repl.h), which answers by the pair they came
 * on; client datagrams on the replication pair are served only where the
 * port may put client flows there (net_tap).
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
struct broker;

struct native_stats {
	uint64_t datagrams_in, datagrams_out, bytes_in;
	uint64_t rejected[NATIVE_E_COUNT];    /* unreadable datagrams, by reason */
	uint64_t unknown_session, wrong_peer, unknown_producer, credits_exceeded;
	uint64_t sessions_opened, sessions_expired, sessions_full;
	uint64_t batches, batches_fragmented, duplicates_acked, produce_errors;
	uint64_t reassembly_timeouts, reassembly_full, fragments_duplicate, fragments_bad;
	uint64_t fetches, fetch_datagrams, fetch_busy;
	uint64_t send_errors, rx_pool_empty;
	uint64_t forwarded;           /* DPDK: datagrams passed to their session's shard */
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

/* @thread shard, once at its start: with DPDK, an lcore id for the thread. */
void native_shard_thread_init(struct shard *sh);
/* 1 when the shard polls a DPDK port (its loop must not sleep long). */
int native_shard_dpdk(const struct shard *sh);

/* @thread main, before the shards are created: the EAL (eal_args, as
 * dpdk.eal.args) and the port (device, "" for the first; mtu 0 for its
 * default) with a queue pair per shard, kept in b->dpdk. Each shard's
 * native_shard_open then takes its queues. -errno, err says what failed. */
int native_dpdk_start(struct broker *b, const char *eal_args, const char *device, int mtu, char *err, size_t errlen);
/* @thread main, after the shards are destroyed. */
void native_dpdk_stop(struct broker *b);

#endif
