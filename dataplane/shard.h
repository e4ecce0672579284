/* dataplane/shard.h — a shard: one pinned thread that owns an io_uring, a
 * listener (SO_REUSEPORT), the connections it accepted, its partitions and
 * its storage engine.
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
#include "dataplane/kafka/kafka_codec.h"
#include "storage/store.h"

/* user_data ops of the shard (storage uses 1..4 and 6). */
#define SHARD_OP_IO 5

enum io_kind { IO_ACCEPT = 1, IO_RECV, IO_SEND, IO_WAKE, IO_CLOSE, IO_NATIVE };

/* One in-flight operation; user_data = &io | SHARD_OP_IO. */
struct io_op {
	uint8_t kind;
	uint8_t inflight;
	struct conn *c;
} __attribute__((aligned(8)));

struct conn;

/* A data reference a response holds until it is sent: a tail chunk or a
 * disk read buffer, on this shard or on its owner shard. */
struct data_hold {
	int shard;                  /* owner shard */
	struct plog_read *rd;       /* on the owner; released there */
};

/* The request in progress on a connection (one at a time, like Kafka:
 * the connection is muted until the response is queued). */
struct kafka_ctx {
	struct shard *sh;
	struct conn *c;
	struct kafka_request req;
	const uint8_t *frame;
	uint32_t frame_len;
	int pending;                        /* sub-operations outstanding */
	int (*resume)(struct kafka_ctx *);  /* when pending drops to 0 */
	void *resp;                         /* response body, in the arena */
	void *state;                        /* handler state, in the arena */
	uint64_t deadline_ns;
	int parked;                         /* long-poll waiting */
	struct kafka_ctx *park_next, *park_prev;
	struct data_hold *holds;            /* in the arena */
	int nholds, holds_cap;
	int final;                          /* long-poll over: answer now */
	int16_t only_error;                 /* nonzero: answer just this error */
	void (*cleanup)(struct kafka_ctx *);/* when the request ends (its response sent or dropped) */
	void *cleanup_arg;
	int ready;                          /* response built (or none): send in order */
	int no_response;                    /* acks=0: nothing to send */
	int parked_once;                    /* a fetch that long-polled (metrics) */
	uint64_t started_ns;
	uint64_t recv_ns;                   /* CLOCK_MONOTONIC when the frame was taken up: orders
					     * requests across connections (transactions' fences) */
	uint64_t conn_ns;                   /* CLOCK_MONOTONIC when its connection was accepted */
	struct kafka_arena arena;           /* the request's memory, until its response is sent */
	uint8_t *arena_mem;
	size_t arena_cap;
	void *more;                         /* blocks beyond arena_mem for a response larger than it
					     * (kafka_ctx_alloc_more), freed when the request ends */
	size_t more_bytes;
};

/* Requests of one connection in progress at once: consecutive Produce
 * requests already received are carried out together (their appends share
 * a group commit); everything else runs one at a time. Responses always
 * go out in request order. */
#define CONN_PIPE 8

struct conn {
	int fd;
	uint64_t accept_ns;                /* CLOCK_MONOTONIC at accept */
	uint32_t gen;
	struct shard *sh;
	struct io_op recv_op, send_op, close_op;
	uint8_t *in;
	uint32_t in_cap, in_len, in_off;   /* bytes [in_off, in_len) unparsed */
	uint32_t want;                     /* room a partial frame needs */
	uint8_t *vbuf;                     /* the provided buffer being parsed */
	uint32_t vlen, voff;
	int vbid;                          /* its buffer id, -1: none */
	int pbuf_starved;                  /* the ring ran dry: next receive is ours */
	uint8_t *out;
	uint32_t out_cap;
	struct iovec *iov;
	int iov_cap;
	struct msghdr msg;
	size_t send_left;
	int zc_notifs;                     /* zero-copy notifications to come */
	int zc_copied;                     /* the kernel copied our zero-copy pages: plain sends */
	int send_done;                     /* sent; waiting for them */
	int busy;                          /* requests in progress (pipe[phead..]) */
	int sending;                       /* the head's response is on the wire */
	struct kafka_ctx *pipe[CONN_PIPE]; /* in request order from phead; allocated on first use */
	int phead;
	int closing;
	uint32_t in_charge;                /* bytes of `in` reserved in the broker's request memory
					    * (queued.max.request.bytes): its capacity when above
					    * the initial buffer, else 0 */
	int mem_wait;                      /* on the shard's memq: its frame waits for request memory */
	struct conn *memq_next;
	int ip_slot;                       /* its word in the per-address table, -1: none */
	uint64_t active_ns;                /* loop clock at accept and at each request's start and
					    * end: idle since then (connections.max.idle.ms) */
	int peer_closed;                   /* EOF read: finish what was sent, then close */
	int zombie;                        /* unlinked, freed next loop turn */
	struct kafka_ctx ctx;              /* pipe[]'s first slot */
	struct conn *next;                 /* shard's list */
	struct conn *prev;
};

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
	uint64_t next_native_tick_ns;
	uint64_t last_enter_ns;       /* DPDK busy-polling: the last io_uring_enter */
	/* the cleaner (cleanup.policy=compact), made on first need */
	struct compactor *compactor;
	struct compress_ctx *compress;
	struct part *compacting;      /* the partition whose pass runs, or NULL */
	struct recompress *recompress;  /* compression.type: scratch made at start (storage/recompress.h) */
	int compact_due;              /* the retention timer fired: look for a partition to clean */
	int sleeping;                /* written by this shard, read by senders */
	uint64_t md_seen;            /* read by the control thread */
	uint64_t now_ns;
	struct conn *conns;
	struct conn *zombies;        /* closed connections freed at the next turn */
	struct io_uring_buf_ring *pbuf_ring;  /* provided receive buffers, NULL if unsupported */
	uint8_t *pbufs;
	struct kafka_ctx *parked;    /* long-polling fetches */
	struct part *parts;          /* partitions this shard owns */
	struct part *retired_parts;  /* of deleted topics: kept until exit */
	uint8_t **rbufs;             /* free disk-read buffers */
	int nrbufs;
	struct lo_item *lo_wait;     /* ListOffsets-by-time lookups waiting for a read buffer (FIFO) */
	struct lo_item *lo_wait_tail;
	int64_t now_ms;              /* wall clock, for timestamps and retention */
	uint64_t next_retention_ns;
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
	uint64_t next_idle_ns;       /* next look for idle connections */
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

/* Send a message to another thread; parked and retried if its ring is full. */
void shard_send(struct shard *sh, int to, const struct shard_msg *m);

/* Queue the response in ctx->resp for sending; ends the request. */
void kafka_ctx_respond(struct kafka_ctx *ctx);
/* End a request that has no response (acks=0). */
void kafka_ctx_done(struct kafka_ctx *ctx);
/* A sub-operation finished: resume the handler when none is left. */
void kafka_ctx_sub_done(struct kafka_ctx *ctx);
/* Close the connection after a protocol violation. */
void kafka_ctx_abort(struct kafka_ctx *ctx);

#define SHARD_RBUF_SIZE (2u << 20)
#define SEND_ZC_MIN (64u * 1024)     /* responses this large go out zero-copy */
#define SHARD_PBUF_SIZE (64u * 1024) /* one provided receive buffer */
#define SHARD_PBUFS 256              /* per shard: 16 MiB */
#define SHARD_PBUF_GROUP 1
#define SHARD_RBUFS 16

/* n elements of `type` from the request's arena (at least one, so an
 * empty array is not NULL); NULL when the arena is full. The arena lives
 * until the response is sent. */
#define ALLOC(ctx, type, n) ((type *)kafka_ctx_alloc((ctx), sizeof(type) * (size_t)((n) > 0 ? (n) : 1)))

/* Requests' memory beyond their arena: at most this much more each. */
#define KAFKA_CTX_MORE_MAX (256u << 20)

/* @thread shard. The slow side of ALLOC: the arena is spent, so a new
 * block (at least 1 MiB) becomes the arena, the old one staying valid
 * until the request ends. For responses larger than the request that asked
 * for them (Metadata of a topic with many thousands of partitions); NULL
 * past KAFKA_CTX_MORE_MAX or when memory is short. */
void *kafka_ctx_alloc_more(struct kafka_ctx *ctx, size_t n);

/* @thread shard. n bytes of the request's memory, or NULL. */
static inline void *kafka_ctx_alloc(struct kafka_ctx *ctx, size_t n)
{
	void *p = kafka_arena_alloc(&ctx->arena, n);

	return p ? p : kafka_ctx_alloc_more(ctx, n);
}

/* Keep `rd` (on shard `owner`) until the response is sent. */
int kafka_ctx_hold(struct kafka_ctx *ctx, int owner, struct plog_read *rd);
/* Wake every parked request on this shard (a watched partition moved). */
void shard_wake_parked(struct shard *sh);

/* Park a request until its deadline or a wake on one of its partitions. */
void kafka_ctx_park(struct kafka_ctx *ctx, uint64_t deadline_ns);
void kafka_ctx_unpark(struct kafka_ctx *ctx);

#endif
