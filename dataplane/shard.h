/* dataplane/shard.h — a shard: one pinned thread that owns an io_uring, a
 * listener (SO_REUSEPORT), the connections it accepted, its partitions and
 * its storage engine. This is its loop, the top of the shard: creation,
 * the ring, the rings to other threads, the timers, and the dispatch of
 * completions (through each io_op's done) and ring messages (through each
 * message's fn) to everything below it. What every part of a shard builds
 * on (struct shard, counters, the clock, SQEs, messages, parking) is
 * dataplane/shard_core.h; its connections are dataplane/conn.h, their
 * requests dataplane/kafka_ctx.h.
 *
 * Thread: the shard's own (@thread shard) unless a function says otherwise.
 * Owns: everything reachable from struct shard. Other threads reach it
 * only through the SPSC rings (broker_send), the words struct broker
 * points at, and the counters it publishes (shard_published: read-only).
 * Errors: 0/count or -errno.
 */
#ifndef SLUICE_SHARD_H
#define SLUICE_SHARD_H

#include <stddef.h>

#include "dataplane/shard_core.h"

/* What a shard publishes for other threads to read: its counters and
 * latency histograms, its tail cache's counters and its disk writes'
 * latency. Each word is written only by the shard (relaxed stores, see
 * struct shard_stats) and read with relaxed loads (LD); a reader writes
 * none of it and never stops the shard. This is the only way into a
 * shard's memory from control/ (scripts/check-layers, rule 7; control/
 * asks through broker_shard_published): the control thread's /metrics,
 * console and rate history read through it,
 * and tell a shard anything only through the rings.
 * @thread any, for the shard's lifetime. */
struct shard_published {
	const struct shard_stats *stats;
	const struct shard_hists *hists;
	const struct tail_pool *tail;     /* hits, misses, used, evictions, allocations, budget */
	const struct lathist *write_lat;  /* the disk writes' latency (store) */
	const struct store_stats *store;  /* the store's counters: writes, reads, group commits, errors */
};
struct shard_published shard_published(const struct shard *sh);
/* The same for the broker's shard i (0 .. nshards-1): how control/ asks,
 * without indexing the broker's shards itself. @thread any */
struct shard_published broker_shard_published(const struct broker *b, int i);

/* @thread main: -EADDRINUSE (err names the port) if another process
 * holds host:port. */
int shard_probe_port(const char *host, int port, char *err, size_t errlen);
/* @thread main: create (ring, listener on host:port with SO_REUSEPORT). */
int shard_create(struct broker *b, int id, struct shard **out, char *err, size_t errlen);
int shard_start(struct shard *sh);
void shard_join(struct shard *sh);
void shard_destroy(struct shard *sh);

/* @thread shard. The loop, one turn: reap completions, flush parked
 * messages, drain the rings, run the due timers, wake expired long-polls,
 * flush the store, submit. now_ns is CLOCK_MONOTONIC (or a test's clock),
 * now_ms the wall clock; nothing the turn runs reads a clock of its own
 * but the request's take-up time (kafka_ctx.recv_ns). Returns the work
 * done (messages, completions, appends flushed...): 0 means idle. */
int shard_poll(struct shard *sh, uint64_t now_ns, int64_t now_ms);
/* @thread shard. The idle policy, after a turn that returned 0: sleep in
 * io_uring_wait until I/O, a ring message (the `sleeping` word and the
 * eventfd), or the nearest deadline (100 ms at most; 10 ms with
 * connections waiting for request memory; dpdk.poll.sleep.us with DPDK
 * queues); DPDK with dpdk.poll.sleep.us 0 never sleeps. Returns 1 if it
 * slept. */
int shard_idle(struct shard *sh);
/* @thread shard. Before the first turn: the calling thread becomes the
 * ring's single issuer (receive buffers, the wake read). -errno. */
int shard_thread_init(struct shard *sh);
/* @thread shard. Stopped, and every shard has closed its connections. */
int shard_done(const struct shard *sh);
/* @thread shard. After the last turn: make the logs durable, close them. */
void shard_thread_fini(struct shard *sh);
/* @thread shard (or main before the loop starts). Add a timer; its index,
 * or -ENOSPC. */
int shard_timer_add(struct shard *sh, uint64_t first_ns, uint64_t period_ns, enum shard_timer_wake wake,
		    void (*fn)(struct shard *sh));

#endif
