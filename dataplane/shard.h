/* dataplane/shard.h — a shard: one pinned thread that owns an io_uring, a
 * listener (SO_REUSEPORT), the connections it accepted, its partitions and
 * its storage engine. The shard is three files: shard.c (creation, the
 * ring, the rings to other threads, the loop), conn.c (a connection,
 * dataplane/conn.h) and kafka_ctx.c (a request, dataplane/kafka_ctx.h);
 * what they share privately is dataplane/shard_internal.h.
 *
 * Thread: the shard's own (@thread shard) unless a function says otherwise.
 * Owns: everything reachable from struct shard. Other threads reach it
 * only through the SPSC rings (broker_send) and the `sleeping` word.
 * Errors: 0/count or -errno.
 * Connection limits and request memory (max.connections, .per.ip,
 * queued.max.request.bytes) are broker-wide, shared by the shards through
 * atomics in struct broker_conns (dataplane/broker.h says why not shares).
 */
#ifndef SLUICE_SHARD_H
#define SLUICE_SHARD_H

#include <liburing.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/uio.h>

#include "dataplane/broker.h"
#include "storage/lathist.h"
#include "dataplane/conn.h"
#include "dataplane/kafka_ctx.h"
#include "storage/store.h"

/* The shard's counters: written only by the shard, with relaxed atomic
 * stores of its own value plus n (shard_stat_add: a plain add on x86-64),
 * read by the control thread with relaxed loads for /metrics and reports.
 * A scrape never stops the shard; each word is a value the shard wrote.
 * On a cache line of its own, away from the shard's hot fields. */
struct shard_stats {
	uint64_t loops;
	uint64_t busy_cycles;               /* in loop turns that did work (shard_main) */
	uint64_t requests;
	uint64_t connections_accepted;
	uint64_t connections_open;
	uint64_t accept_errors[3];          /* by enum shard_accept_err */
	uint64_t conns_rejected[2];         /* closed at accept: max.connections, max.connections.per.ip */
	uint64_t conns_idle_closed;         /* closed after connections.max.idle.ms without a request */
	uint64_t req_mem_waits;             /* frames that waited for queued.max.request.bytes */
	uint64_t req_mem_refused;           /* frames larger than all of it: connection closed */
	uint64_t bad_frames;
	uint64_t unsupported;               /* requests answered UNSUPPORTED_VERSION or closed for it */
	uint64_t ring_full;
	uint64_t produce_batches;
	uint64_t produce_bytes;
	uint64_t produce_duplicates;        /* idempotent resends acknowledged without appending */
	uint64_t producer_state_full;       /* producer state could not grow (no memory) */
	uint64_t fetch_bytes;
	uint64_t send_zc;
	uint64_t send_zc_copied;     /* connections whose zero-copy sends were copied */
	uint64_t pbuf_starved;
	uint64_t produce_records;
	uint64_t produce_requests;
	uint64_t fetch_requests;
	uint64_t produce_rejected[7];       /* partitions' batches refused, by enum shard_reject */
	uint64_t fetch_waits;               /* fetches answered after a long-poll wait */
	uint64_t requests_inflight;         /* taken up, not ended (a gauge: +1/-1) */
	uint64_t uring_sqes;                /* SQEs taken on the shard's ring (shard and storage) */
	uint64_t uring_cqes;                /* completions reaped from it */
	uint64_t retention_segments_deleted;/* sealed segments removed by time or size retention */
	/* the cleaner (cleanup.policy=compact), copied from its own stats */
	uint64_t compact_passes, compact_segments, compact_records_removed, compact_tombstones_removed;
	uint64_t compact_bytes_before, compact_bytes_after, compact_errors;
} __attribute__((aligned(64)));

/* Why an accept failed: the process's descriptor limit (RLIMIT_NOFILE),
 * the system's, anything else. */
enum shard_accept_err { SHARD_ACCEPT_EMFILE, SHARD_ACCEPT_ENFILE, SHARD_ACCEPT_OTHER, SHARD_ACCEPT_ERRS };
_Static_assert(sizeof(((struct shard_stats *)0)->accept_errors) == SHARD_ACCEPT_ERRS * sizeof(uint64_t),
	       "one counter per reason");

/* Request latency, from the frame taken up to the response queued (for
 * Produce: the acknowledgement, after durability as acks asks), on the
 * shard's loop clock. Written by the shard only (struct lathist). */
#define SHARD_LAT_APIS 64                   /* api keys below this one are counted */
struct shard_hists {
	struct lathist produce[3];          /* by acks: 0, 1, all (-1) */
	struct lathist fetch;
	struct lathist api[SHARD_LAT_APIS]; /* every request, by api key */
};

/* Why a partition's batches were refused: batch checks on the
 * connection's shard (CRC, size, invalid), the idempotent producer's
 * sequence and epoch and the transaction check on the owner shard. */
enum shard_reject { SHARD_REJECT_CRC, SHARD_REJECT_SIZE, SHARD_REJECT_INVALID, SHARD_REJECT_OTHER,
		    SHARD_REJECT_SEQUENCE, SHARD_REJECT_EPOCH, SHARD_REJECT_TXN, SHARD_REJECTS };
_Static_assert(sizeof(((struct shard_stats *)0)->produce_rejected) == SHARD_REJECTS * sizeof(uint64_t),
	       "one counter per reason");

/* @thread shard: count n more (see struct shard_stats). */
static inline void shard_stat_add(uint64_t *c, uint64_t n)
{
	__atomic_store_n(c, *c + n, __ATOMIC_RELAXED);
}

/* Periodic work of the loop (retention, producer snapshots, the cleaner,
 * idle connections, the native tick), run by shard_poll on the turn's
 * clock, in the order added, as Redis's serverCron runs its jobs. A timer
 * runs when now_ns >= next_ns, then again period_ns after that turn. */
enum shard_timer_wake {
	SHARD_TIMER_NO_WAKE,         /* the loop does not wake up for it (runs on the next turn) */
	SHARD_TIMER_WAKE,            /* a sleeping loop wakes up when it is due */
	SHARD_TIMER_WAKE_IF_CONNS,   /* ... when the shard has connections */
};
struct shard_timer {
	uint64_t next_ns;
	uint64_t period_ns;
	enum shard_timer_wake wake;
	void (*fn)(struct shard *sh);
};
#define SHARD_TIMERS 8

struct shard {
	int id;
	struct broker *b;
	pthread_t thread;
	struct io_uring ring;
	struct store st;
	int listen_fd;
	int wake_fd;                 /* eventfd */
	uint64_t wake_buf;
	struct io_op accept_op, wake_op, native_op;
	struct native_shard *native;  /* the native datagram protocol (native.listen), or NULL */
	int native_armed;
	uint64_t last_enter_ns;       /* DPDK busy-polling: the last io_uring_enter */
	/* the cleaner (cleanup.policy=compact), made on first need */
	struct compactor *compactor;
	struct compress_ctx *compress;
	struct part *compacting;      /* the partition whose pass runs, or NULL */
	struct recompress *recompress;  /* compression.type: scratch made at start (storage/recompress.h) */
	int compact_due;              /* the retention timer fired: look for a partition to clean */
	int sleeping;                /* written by this shard, read by senders */
	uint64_t md_seen;            /* read by the control thread */
	uint64_t now_ns;             /* the turn's clock (CLOCK_MONOTONIC, or a test's): handlers
				      * read this, never the clock */
	struct conn *conns;
	struct conn *zombies;        /* closed connections freed at the next turn */
	struct io_uring_buf_ring *pbuf_ring;  /* provided receive buffers, NULL if unsupported */
	uint8_t *pbufs;
	struct kafka_ctx *parked;    /* long-polling fetches */
	struct part *parts;          /* partitions this shard owns */
	struct part *retired_parts;  /* of deleted topics: kept until exit */
	uint8_t **rbufs;             /* free disk-read buffers */
	int nrbufs;
	struct rbuf_wait *rbuf_wait; /* reads waiting for a read buffer (FIFO, dataplane/part.h) */
	struct rbuf_wait *rbuf_wait_tail;
	int rbuf_waking;             /* part_rbuf_put is starting waiters */
	int64_t now_ms;              /* the turn's wall clock, for timestamps and retention */
	struct shard_msg *backlog;   /* messages that found a full ring */
	int backlog_len, backlog_cap;
	int *backlog_to;
	struct shard_stats stats;
	struct shard_hists hists;    /* written by this shard, read by the control thread */
	uint32_t sqe_seen, cqe_seen; /* ring positions at the last count (uring_sqes, uring_cqes) */
	int stop;
	int drained;                 /* stopped and without connections */
	int no_send_zc;              /* the kernel refused zero-copy sends */
	int accepting;               /* the accept is armed (once the broker serves) */
	/* Accept back-off: after EMFILE/ENFILE (or no memory) the accept is
	 * not re-armed until accept_retry_ns (100 ms, doubling to 1 s while
	 * it keeps failing; reset by an accept that succeeds): re-arming at
	 * once would fail at once, for ever, and spin the loop. Connections
	 * already open are served meanwhile; new ones wait in the backlog. */
	int accept_wait;
	uint64_t accept_retry_ns, accept_backoff_ns;
	struct conn *memq, *memq_tail;   /* connections waiting for request memory, in order */
	int memq_front;              /* retrying memq: a connection still without room goes back in front */
	struct shard_timer timers[SHARD_TIMERS];  /* the loop's periodic work (shard_timer_add) */
	int ntimers;
	int native_timer;            /* timers[] index of the native protocol's tick */
	uint64_t next_parked_ns;     /* the nearest parked request's deadline this turn (0: none) */
	int no_zc_report;            /* ... or their usage report (before 6.2) */
};

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

/* Send a message to another thread; parked and retried if its ring is full. */
void shard_send(struct shard *sh, int to, const struct shard_msg *m);

/* Wake every parked request on this shard (a watched partition moved). */
void shard_wake_parked(struct shard *sh);

#define SHARD_RBUF_SIZE (2u << 20)
#define SHARD_RBUFS 16

#endif
