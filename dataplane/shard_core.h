/* dataplane/shard_core.h — what everything on a shard builds on: the
 * struct shard itself, its counters and latency histograms, the turn's
 * clock, SQEs on its ring and the completion callback each one carries
 * (struct io_op), messages to other threads (shard_send, parked when a
 * ring is full), and the parking of work that waits for a deadline or for
 * new data (struct shard_park). It calls nothing above it: the loop
 * (dataplane/shard.c) dispatches completions through io_op.done and ring
 * messages through their fn, so a lower module never needs the loop.
 *
 * Thread: the shard's own (@thread shard) unless a function says otherwise.
 * Owns: everything reachable from struct shard. Other threads reach it
 * only through the SPSC rings (broker_send) and the words struct broker
 * points at (sleeping, md_seen, busy_cycles).
 * Errors: 0/count or -errno.
 * Connection limits and request memory (max.connections, .per.ip,
 * queued.max.request.bytes) are broker-wide, shared by the shards through
 * atomics in struct broker_conns (dataplane/broker.h says why not shares).
 */
#ifndef SLUICE_SHARD_CORE_H
#define SLUICE_SHARD_CORE_H

#include <liburing.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "dataplane/broker.h"
#include "dataplane/fetch_session.h"
#include "dataplane/part_table.h"
#include "dataplane/repl_throttle.h"
#include "storage/lathist.h"
#include "storage/store.h"

struct conn;
struct conn_ops;
struct rbuf_wait;

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
	uint64_t tls_handshakes;     /* TLS connections whose handshake completed */
	uint64_t tls_failures;       /* TLS connections closed by a handshake or record failure */
	uint64_t tls_record_openssl; /* TLS connections whose record layer stayed OpenSSL's */
	uint64_t tls_record_ktls;    /* ... handed to the kernel (kTLS) */
	uint64_t sasl_auth_ok;       /* SASL authentications that succeeded */
	uint64_t sasl_auth_failed;   /* ... that failed (wrong password, unknown user, bad message) */
	uint64_t sasl_preauth_closed;/* connections closed before authentication for a request other
				      * than ApiVersions/SaslHandshake/SaslAuthenticate, or a frame
				      * over SASL_PREAUTH_FRAME_MAX */
	uint64_t sasl_reauth_ok;     /* KIP-368 re-authentications that succeeded */
	uint64_t sasl_expired_closed;/* connections closed at a request after their session's end */
	uint64_t authz_checks;       /* authorizer checks that ran the ACL matcher */
	uint64_t authz_cache_hits;   /* ... answered from the connection's remembered decisions */
	uint64_t pbuf_starved;
	uint64_t produce_records;
	uint64_t produce_requests;
	uint64_t fetch_requests;
	uint64_t produce_rejected[7];       /* partitions' batches refused, by enum shard_reject */
	uint64_t fetch_waits;               /* fetches answered after a long-poll wait */
	uint64_t fetch_sessions;            /* gauge: fetch sessions in the shard's cache */
	uint64_t fetch_session_evictions;   /* sessions evicted for new ones */
	uint64_t repl_bytes_in;             /* replication: batch bytes a follower appended */
	uint64_t repl_bytes_out;            /* replication: batch bytes sent to followers' fetches */
	uint64_t repl_errors;               /* replication: partition errors in fetch answers */
	uint64_t repl_truncations;          /* replication: divergent tails cut */
	uint64_t repl_reconnects;           /* replication: fetcher connections lost */
	uint64_t repl_native_bytes_in;      /* replication: of repl_bytes_in, what came by DPDK (REPLICA_DATA) */
	uint64_t repl_native_bytes_out;     /* replication: record bytes sent in REPLICA_DATA */
	uint64_t repl_tls_bytes_in;         /* replication: fetch answers' bytes OpenSSL decrypted */
	uint64_t repl_tls_bytes_out;        /* replication: fetch requests' bytes OpenSSL encrypted */
	uint64_t repl_auth_failures;        /* replication: TLS or SASL handshakes with a leader failed */
	uint64_t repl_reauth[2];            /* replication: KIP-368 re-authentications with a leader
					     * on the fetcher's connection: [0] ok, [1] failed */
	uint64_t repl_skipped[7];           /* replication: partitions left out of a fetch or answers
					     * dropped, by enum shard_repl_skip */
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

/* Why a follower's partition was left out of its replica fetches (counted
 * once each time it starts to be: dataplane/replica_fetcher.c), or an
 * answer for it dropped (counted each time): its durable end behind its
 * log end with the filesystem marked full; its log failed; the leader
 * refused it and the pause after is running; a throttled replica whose
 * budget is spent; an answer to an older fetch (the epoch or log end
 * moved since); an answer for a partition not followed from that leader
 * any more; a set of batches not contiguous (not appended). */
enum shard_repl_skip { SHARD_REPL_SKIP_FULL, SHARD_REPL_SKIP_LOG_FAILED, SHARD_REPL_SKIP_BACKOFF,
		       SHARD_REPL_SKIP_THROTTLED, SHARD_REPL_DROP_STALE, SHARD_REPL_DROP_NOT_FOLLOWED,
		       SHARD_REPL_DROP_NON_CONTIGUOUS, SHARD_REPL_SKIPS };
_Static_assert(sizeof(((struct shard_stats *)0)->repl_skipped) == SHARD_REPL_SKIPS * sizeof(uint64_t),
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

/* ---- completions -------------------------------------------------------- */

/* user_data ops of the shard (storage uses 1..4 and 6). */
#define SHARD_OP_IO 5

/* One in-flight operation on the shard's ring; user_data = &io |
 * SHARD_OP_IO. Its owner sets `done` before io_set; the loop calls it with
 * the completion's result and flags (one indirect call per completion)
 * and knows nothing of what the operation is for. The owner finds itself
 * from `op` (its address less the op's offset in the owner's struct). */
struct io_op {
	void (*done)(struct io_op *op, int res, unsigned flags);
	uint8_t inflight;
	uint8_t arg;                 /* the owner's tag (a listener's accept: its index) */
} __attribute__((aligned(8)));

/* ---- parking ------------------------------------------------------------ */

/* Work that waits on this shard for a deadline (the turn's clock) or for
 * new data in a partition it watches (shard_wake_parked): a long-polling
 * Fetch. Lives in its owner's memory; on the shard's list while parked. */
struct shard_park {
	struct shard_park *next, *prev;
	uint64_t deadline_ns;
	int parked;
	uint32_t run_gen;             /* the shard_run_parked pass that last woke it */
	/* Unparked already when it runs: the deadline passed, new data came
	 * (final 0), or the shard stops (final 1: answer with what there is). */
	void (*wake)(struct shard_park *pk, int final);
};

/* ---- timers ------------------------------------------------------------- */

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

#define SHARD_RBUF_SIZE (2u << 20)
#define SHARD_RBUFS 16

struct shard {
	int id;
	struct broker *b;
	pthread_t thread;
	struct io_uring ring;
	struct store st;
	int listen_fd[BROKER_MAX_LISTENERS];  /* one per client listener (b->set.listeners), -1: closed */
	int nlisten;
	int wake_fd;                 /* eventfd */
	uint64_t wake_buf;
	struct io_op accept_op[BROKER_MAX_LISTENERS], wake_op, native_op;
	const struct conn_ops *conn_ops;  /* what connections tell the request pipeline (dataplane/conn.h),
					   * given by the loop at creation */
	struct native_shard *native;  /* the native datagram protocol (native.listen), or NULL */
	struct native_repl *native_repl; /* replication on its DPDK replication pair (native_repl.h), or NULL */
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
	struct shard_park *parked;   /* waiting for a deadline or data (long-polling fetches) */
	uint32_t park_gen;           /* shard_run_parked passes begun (nested ones too) */
	uint32_t park_changes;       /* shard_park/shard_unpark calls: a wake that changed the list */
	struct fsess_cache fsess;    /* this shard's fetch sessions (dataplane/fetch_session.h) */
	struct part *parts;          /* partitions this shard owns */
	struct part *retired_parts;  /* of deleted topics: kept until exit */
	struct part_table part_tab;  /* sh->parts by (topic id, index): what messages naming a
				      * partition by value resolve (dataplane/part_table.h) */
	int repl_parts;              /* partitions with a role (dataplane/part_role.h): 0 on one node */
	int roles_changed;           /* a partition took a role or left the shard: the fetchers look (replica_fetcher.c) */
	struct replica_fetcher *fetchers;   /* one per leader followed (dataplane/replica_fetcher.h) */
	struct repl_throttle repl_throttle; /* the fetchers' budget for throttled partitions */
	struct repl_throttle repl_quota;    /* the leader's budget for throttled followers
					     * (dataplane/repl_quota.h) */
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
	uint64_t unsupported_logged_ns;  /* the last "not served" log line (kafka_ctx.c): one a minute */
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
	uint64_t next_parked_ns;     /* the nearest parked deadline this turn (0: none) */
	int no_zc_report;            /* ... or their usage report (before 6.2) */
};

/* @thread any. CLOCK_MONOTONIC now. Only the loop's driver reads it once
 * per turn (sh->now_ns); the two other readers need the instant itself:
 * a connection's accept (conn->accept_ns) and a request's take-up
 * (kafka_ctx.recv_ns), which order requests across connections and
 * shards against the control thread's own clock (transactions' fences):
 * the turn's clock, taken before the turn's work, could put a request
 * taken up later on one shard before one taken up earlier on another. */
static inline uint64_t shard_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* @thread shard. An SQE of the shard's ring, or NULL when it is full. */
static inline struct io_uring_sqe *shard_sqe(struct shard *sh)
{
	return store_sqe(&sh->st);
}

/* @thread shard. The SQE completes to `op` (the loop calls op->done). */
static inline void io_set(struct io_uring_sqe *sqe, struct io_op *op)
{
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)op | SHARD_OP_IO);
	op->inflight = 1;
}

/* Send a message to another thread; parked and retried if its ring is
 * full. To this shard itself: m->fn runs at once. */
void shard_send(struct shard *sh, int to, const struct shard_msg *m);
/* The loop, each turn: send the messages parked by shard_send, in order,
 * while their rings have room. */
void shard_flush_backlog(struct shard *sh);

/* Park pk until deadline_ns or a wake; unpark it (nothing if it is not
 * parked). */
void shard_park(struct shard *sh, struct shard_park *pk, uint64_t deadline_ns);
void shard_unpark(struct shard *sh, struct shard_park *pk);
/* Wake parked work: all when `all`, else what is past its deadline
 * (sh->now_ns); returns the nearest remaining deadline, 0 when none is
 * left. */
uint64_t shard_run_parked(struct shard *sh, int all);
/* The shard stops: everything parked answers now (final). */
void shard_stop_parked(struct shard *sh);
/* Wake everything parked on this shard (a watched partition moved). */
void shard_wake_parked(struct shard *sh);
/* The same as a ring message: another shard's partition moved (self: this
 * shard). */
void shard_wake_parked_msg(void *self, struct shard_msg *m);

#endif
